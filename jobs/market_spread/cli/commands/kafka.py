"""The Kafka options of the commands that read (stream) or produce (generate, replay) records."""

from __future__ import annotations

from collections.abc import Callable

from market_spread.cli.params import choice, number, options
from market_spread.feeds.producer import DEFAULT_PARTITIONS, KafkaTarget
from market_spread.sources.kafka_source import DEFAULT_ORDERS_TOPIC, DEFAULT_QUOTES_TOPIC, SOURCES


def _all(f: Callable, decorators: list[Callable]) -> Callable:
    for decorate in reversed(decorators):  # listed in the order --help shows them
        f = decorate(f)
    return f


def producer(command: str) -> Callable[[Callable], Callable]:
    """`--kafka HOST:PORT` and the topic names."""
    opt = options(command)
    return lambda f: _all(
        f,
        [
            opt(
                "--kafka",
                metavar="HOST:PORT[,HOST:PORT]",
                help="write the records to Kafka topics at these brokers instead of landing files",
            ),
            opt("--quotes-topic", default=DEFAULT_QUOTES_TOPIC, help="with --kafka: quotes topic (default quotes)"),
            opt("--orders-topic", default=DEFAULT_ORDERS_TOPIC, help="with --kafka: orders topic (default orders)"),
            opt(
                "--partitions",
                type=number(int),
                default=DEFAULT_PARTITIONS,
                help=f"with --kafka: partitions of topics it creates (default {DEFAULT_PARTITIONS})",
            ),
        ],
    )


def source(command: str) -> Callable[[Callable], Callable]:
    """The stream's source: the landing folder or Kafka topics."""
    opt = options(command)
    return lambda f: _all(
        f,
        [
            opt(
                "--source",
                type=choice(*SOURCES),
                default="files",
                help="read the landing folder (files, default) or Kafka topics (kafka)",
            ),
            opt(
                "--bootstrap-servers",
                metavar="HOST:PORT[,HOST:PORT]",
                help="Kafka brokers, with --source kafka or --alerts-topic",
            ),
            opt("--quotes-topic", default=DEFAULT_QUOTES_TOPIC, help="topic of the quotes (default quotes)"),
            opt("--orders-topic", default=DEFAULT_ORDERS_TOPIC, help="topic of the orders (default orders)"),
            opt(
                "--starting-offsets",
                type=choice("earliest", "latest"),
                default="earliest",
                help="where a stream with a new checkpoint starts reading (default earliest); "
                "afterwards the checkpoint's offsets rule",
            ),
            opt(
                "--max-records-per-batch",
                type=number(int),
                metavar="N",
                help="with --source kafka: take at most N new records in one micro-batch (default: all)",
            ),
        ],
    )


def target(kafka: str | None, quotes_topic: str, orders_topic: str, partitions: int) -> KafkaTarget | None:
    """The producer's options as a KafkaTarget; None without --kafka (landing files)."""
    return KafkaTarget(kafka, quotes_topic, orders_topic, partitions) if kafka else None
