"""`market-spread broker`: a single-node Kafka broker (KRaft) on 127.0.0.1, in the foreground."""
from __future__ import annotations

import argparse

from market_spread.cli.params import env_command, number, options

opt = options("broker")


@env_command("broker")
@opt("--port", type=number(int), default=9092, help="client port on 127.0.0.1 (default 9092)")
@opt("--controller-port", type=number(int), default=0, help="KRaft controller port on 127.0.0.1 (default: --port + 1000)")
@opt("--data", default="data/kafka", help="data folder, kept across restarts (default data/kafka)")
@opt("--heap", default="512m", help="JVM heap (default 512m)")
@opt("--ready-timeout", type=number(float), default=120.0, help="seconds to wait for the broker to accept clients")
def command(**params) -> int:
    from market_spread.feeds.broker import run

    return run(argparse.Namespace(**params))
