"""`market-spread broker`: a single-node Kafka broker (KRaft) on 127.0.0.1, in the foreground."""

from __future__ import annotations

import sys
from pathlib import Path

from market_spread.cli.params import env_command, number, options
from market_spread.feeds.broker import BrokerSpec, run_broker

opt = options("broker")


@env_command("broker")
@opt("--port", type=number(int), default=9092, help="client port on 127.0.0.1 (default 9092)")
@opt(
    "--controller-port", type=number(int), default=0, help="KRaft controller port on 127.0.0.1 (default: --port + 1000)"
)
@opt("--data", default="data/kafka", help="data folder, kept across restarts (default data/kafka)")
@opt("--heap", default="512m", help="JVM heap (default 512m)")
@opt("--ready-timeout", type=number(float), default=120.0, help="seconds to wait for the broker to accept clients")
def command(port: int, controller_port: int, data: str, heap: str, ready_timeout: float) -> int:
    return run_broker(BrokerSpec(Path(data), port, controller_port, heap, ready_timeout))


if __name__ == "__main__":
    # How feeds.broker.BrokerProcess runs it: not as `market-spread`, so that `make run` stops the
    # CLI jobs first and the broker last. Through cli.main, for its messages and exit codes.
    from market_spread.cli.main import main

    raise SystemExit(main(["broker", *sys.argv[1:]]))
