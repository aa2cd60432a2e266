"""The environment variables the developer tools read, declared in the product's settings registry
(market_spread.runtime.settings) so that they are checked and documented like the product's own.

Import `value` from here, not from the registry: importing this module runs the declarations.
Variables the product package reads itself (MARKET_SPREAD_HOME, MARKET_SPREAD_SOURCE,
MARKET_SPREAD_RUN_ID, ...) are the product's to declare, not declared here twice; the tools mark
their remaining direct reads of those with `# registry: product`.
"""

from __future__ import annotations

from pathlib import Path

from market_spread.runtime.env import FALSE_WORDS, TRUE_WORDS
from market_spread.runtime.settings import declare, value

__all__ = ["value", "SOURCES", "source", "STORAGES", "storage"]

RUN = ("market-spread-run",)
SOURCES = ("files", "kafka")
STORAGES = ("local", "s3")


def port(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise ValueError("not a whole number") from None
    if not 0 < number < 65536:
        raise ValueError(f"not a TCP port: {number}")
    return number


def boolean(text: str) -> bool:
    word = text.lower()
    if word not in TRUE_WORDS | FALSE_WORDS:
        raise ValueError("not a boolean (use true or false)")
    return word in TRUE_WORDS


def source(text: str) -> str:
    word = text.strip().lower()
    if word not in SOURCES:
        raise ValueError(f"must be files or kafka, got {word!r}")
    return word


def storage(text: str) -> str:
    word = text.strip().lower()
    if word not in STORAGES:
        raise ValueError(f"must be local or s3, got {word!r}")
    return word


declare("PORT", port, 8080, "Port of the Airflow UI and API of `make run`, on 127.0.0.1.", RUN)
declare(
    "SOURCE",
    source,
    None,
    "`make run SOURCE=kafka`: run a Kafka broker beside Airflow and point the stream and feed DAGs at it "
    "(files or kafka; unset: MARKET_SPREAD_SOURCE, then files).",
    RUN,
)
declare(
    "STATSD_PORT",
    port,
    8125,
    "UDP port on 127.0.0.1 that `make run`'s Airflow sends its StatsD metrics to "
    "(a StatsD exporter listening there turns them into Prometheus metrics; nothing listens by default); 0 "
    "turns Airflow's metrics off.",
    RUN,
)
declare(
    "KAFKA_PORT",
    port,
    9092,
    "Port of the broker `make run SOURCE=kafka` starts on 127.0.0.1 (its controller takes this port + 1000).",
    RUN,
)
declare(
    "STORAGE",
    storage,
    "local",
    "local or s3. `make run STORAGE=s3`: run an S3 server (`market-spread object-store`, data in "
    "data/object-store) beside Airflow and keep landing and lake on it (s3://market-spread/landing, "
    "s3://market-spread/lake); Data Docs stay in data/quality.",
    RUN,
)
declare(
    "S3_PORT",
    port,
    None,
    "Port of the S3 server `make run STORAGE=s3` starts on 127.0.0.1.",
    RUN,
    shown_default="a free port",
)
declare(
    "MARKET_SPREAD_AIRFLOW_HOME",
    Path,
    None,
    "AIRFLOW_HOME of `make run` (unset: .airflow in the checkout); lets tests run a private instance "
    "beside a real one.",
    RUN,
)
declare(
    "MARKET_SPREAD_START_PAUSED",
    boolean,
    False,
    "`make run` leaves the DAGs paused (unpause them in the UI or through the API).",
    RUN,
)
