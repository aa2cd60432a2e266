"""`market-spread generate`: synthetic quote and order feeds, into landing files or Kafka."""

from __future__ import annotations

from pathlib import Path

from market_spread.cli.commands import kafka
from market_spread.cli.commands.kafka import target as kafka_target
from market_spread.cli.options import place, ranged, symbols, whole_number
from market_spread.cli.params import choice, env_command, number, options
from market_spread.feeds.generate import GenerateSpec, generate

opt = options("generate")


@env_command("generate")
@opt("--landing", help="landing folder (quotes/ and orders/ are created); or --kafka")
@symbols("generate")
@opt("--quotes", type=whole_number(0), default=1000, help="quotes to write (default 1000)")
@opt("--orders", type=whole_number(0), default=1000, help="orders to write (default 1000)")
@opt("--files", type=whole_number(1), default=1, help="files per feed (default 1)")
@opt("--seed", type=number(int), default=1, help="random seed (default 1)")
@opt("--wide-share", type=ranged(float, 0, 1), default=0.1, help="share of symbols quoting wide (default 0.1)")
@opt("--profile", type=choice("default", "wallaroo"), default="default", help="data recipe")
@opt("--rate", type=number(float), help="events per second to land continuously (with --duration)")
@opt("--duration", type=number(float), help="seconds to keep landing files at --rate (0: until stopped)")
@opt("--tick", type=number(float), default=1.0, help="seconds between files in --rate mode (default 1)")
@opt("--start", help="event time of the first record, ISO-8601 (default 2026-11-23T14:30:00Z)")
@kafka.producer("generate")
def command(
    landing: str | None,
    symbols: str,
    kafka: str | None,
    quotes_topic: str,
    orders_topic: str,
    partitions: int,
    **recipe,
) -> int:  # recipe: the GenerateSpec fields of the same names
    return generate(
        GenerateSpec(
            symbols=Path(symbols),
            landing=place(landing),
            kafka=kafka_target(kafka, quotes_topic, orders_topic, partitions),
            **recipe,
        )
    )
