"""`stream --alerts-topic`'s settings (standard library only: the command line reads them)."""

from __future__ import annotations

from dataclasses import dataclass

from market_spread.errors import UsageError
from market_spread.sources.kafka_source import KafkaSettings, check_bootstrap, check_topic_name


@dataclass(frozen=True)
class AlertsTopic:
    """Where alerts are published: a topic on the brokers of `bootstrap_servers`."""

    bootstrap_servers: str
    topic: str


def alerts_topic(topic: str | None, bootstrap_servers: str | None, source: KafkaSettings | None) -> AlertsTopic | None:
    """`--alerts-topic` with `--bootstrap-servers` as an AlertsTopic (None without a topic);
    UsageError for a combination that cannot run."""
    if not topic:
        return None
    check_topic_name(topic, "--alerts-topic")
    servers = (bootstrap_servers or "").strip()
    if not servers:
        raise UsageError("--alerts-topic needs --bootstrap-servers HOST:PORT (the brokers to publish to)")
    check_bootstrap(servers, "--bootstrap-servers")
    if source is not None and topic in source.topics():
        raise UsageError(f"--alerts-topic {topic} is a topic the stream reads: name another")
    return AlertsTopic(servers, topic)
