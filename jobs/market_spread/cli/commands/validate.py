"""`market-spread validate`: the Great Expectations suites on the lake, with Data Docs."""
from __future__ import annotations

import argparse

from market_spread.cli.options import lake, symbols, thresholds
from market_spread.cli.params import Converted, env_command, options
from market_spread.quality.command import grace_seconds
from market_spread.quality.defaults import DEFAULT_DOCS, DEFAULT_ORPHAN_GRACE_S

opt = options("validate")


@env_command("validate")
@lake("validate")
@symbols("validate")
@opt("--docs", default=str(DEFAULT_DOCS), help="folder for the Data Docs site and GX files (default: data/quality)")
@opt("--full", is_flag=True, help="validate every alert, not only those since the last passing run")
@opt("--orphan-grace-seconds", type=Converted(grace_seconds, "seconds"), default=DEFAULT_ORPHAN_GRACE_S, metavar="S",
     help="alerts of a batch with no batch_metrics row wait this long for it (a batch in flight), then are "
          f"validated and reported as orphans, failing the run (default {DEFAULT_ORPHAN_GRACE_S:g})")
@opt("--expectations", default=None, help="folder of alerts.json and symbol_state.json (default: expectations/)")
@thresholds("validate")
def command(**params) -> int:
    from market_spread.quality.command import run

    return run(argparse.Namespace(**params))
