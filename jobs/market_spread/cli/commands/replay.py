"""`market-spread replay`: Wallaroo's fixish/FIX files into landing files or Kafka."""

from __future__ import annotations

from pathlib import Path

from market_spread.cli.commands import kafka
from market_spread.cli.commands.kafka import target as kafka_target
from market_spread.cli.options import place
from market_spread.cli.params import env_command, number, options
from market_spread.feeds.replay import DEFAULT_RECORDS_PER_FILE, ReplaySpec, replay

opt = options("replay")


@env_command("replay")
@opt("--landing", help="landing folder (quotes/ and orders/ are made inside); or --kafka")
@opt("--nbbo", multiple=True, metavar="FILE...", help="market data files (fixish or FIX text)")
@opt("--orders", multiple=True, metavar="FILE...", help="order files (fixish or FIX text)")
@opt(
    "--records-per-file",
    type=number(int),
    default=DEFAULT_RECORDS_PER_FILE,
    metavar="N",
    help=f"records per landing file (default {DEFAULT_RECORDS_PER_FILE})",
)
@opt("--strict", is_flag=True, help="stop at the first bad frame or line; write nothing then")
@kafka.producer("replay")
def command(
    landing: str | None,
    nbbo: tuple[str, ...],
    orders: tuple[str, ...],
    records_per_file: int,
    strict: bool,
    kafka: str | None,
    quotes_topic: str,
    orders_topic: str,
    partitions: int,
) -> int:
    return replay(
        ReplaySpec(
            nbbo=tuple(Path(p) for p in nbbo),
            orders=tuple(Path(p) for p in orders),
            landing=place(landing),
            kafka=kafka_target(kafka, quotes_topic, orders_topic, partitions),
            records_per_file=records_per_file,
            strict=strict,
        )
    )
