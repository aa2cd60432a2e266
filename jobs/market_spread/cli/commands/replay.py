"""`market-spread replay`: Wallaroo's fixish/FIX files into landing files or Kafka."""
from __future__ import annotations

import argparse

from market_spread.cli.params import env_command, number, options
from market_spread.cli.commands import kafka
from market_spread.feeds.replay import DEFAULT_RECORDS_PER_FILE

opt = options("replay")


@env_command("replay")
@opt("--landing", help="landing folder (quotes/ and orders/ are made inside); or --kafka")
@opt("--nbbo", multiple=True, metavar="FILE...", help="market data files (fixish or FIX text)")
@opt("--orders", multiple=True, metavar="FILE...", help="order files (fixish or FIX text)")
@opt("--records-per-file", type=number(int), default=DEFAULT_RECORDS_PER_FILE, metavar="N",
     help=f"records per landing file (default {DEFAULT_RECORDS_PER_FILE})")
@opt("--strict", is_flag=True, help="stop at the first bad frame or line; write nothing then")
@kafka.producer("replay")
def command(**params) -> int:
    from market_spread.feeds.replay import run

    return run(argparse.Namespace(**params))
