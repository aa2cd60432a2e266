"""The alerts topic's pure parts (contract 4b): an alert row as its record, transactions cut at
batch boundaries, the flags' checks, the Stream page's line; and the test's own murmur2 (the
oracle of where a record must land) against Kafka's published values."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pyarrow as pa
import pytest

from market_spread.errors import UsageError
from market_spread.lake import tables as lake_mod
from market_spread.orchestration.stream_page import _alerts_topic
from market_spread.sinks import alerts_topic as publisher
from market_spread.sinks.alert_records import records
from market_spread.sinks.topic_settings import alerts_topic
from market_spread.sources.kafka_source import KafkaSettings
from tests.helpers.alerts_topic import as_record, murmur2

ROW = {
    "order_id": 'O-"1"',
    "account": 7,
    "symbol": "AAPL",
    "side": "BUY",
    "qty": Decimal("100.00000000"),  # as the table gives it back
    "price": Decimal("189.12345678"),
    "order_time": datetime(2026, 11, 23, 14, 30, 0, 200000, tzinfo=UTC),
    "reason": "no_market_data",
    "bid": None,
    "offer": None,
    "quote_time": None,
    "detected_at": datetime(2026, 11, 23, 14, 30, 1, tzinfo=UTC),
    "batch_id": 41,
    "order_seq": 18,
    "quote_seq": None,
}


def alerts(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=lake_mod.arrow_schema("alerts"))


def test_an_alert_row_becomes_its_record():
    (record,) = records(alerts([ROW]))
    assert record.key == b"AAPL" and record.headers == [("batch_id", b"41")]
    value = json.loads(record.value)
    assert list(value) == lake_mod.arrow_schema("alerts").names
    assert value["qty"] == "100.00000000" and value["price"] == "189.12345678"
    assert (
        value["order_time"] == "2026-11-23T14:30:00.200000Z" and value["detected_at"] == "2026-11-23T14:30:01.000000Z"
    )
    assert value["bid"] is None and value["order_id"] == 'O-"1"' and value["account"] == 7
    assert json.dumps(value, sort_keys=True) == as_record(ROW)  # the tests' own formatting agrees


def test_transactions_are_cut_at_batch_boundaries(monkeypatch):
    monkeypatch.setattr(publisher, "MAX_TRANSACTION_ROWS", 3)
    rows = alerts([{**ROW, "batch_id": b} for b in (1, 1, 2, 2, 2, 3, 4, 4, 4, 4)])
    cut = publisher.chunks(rows)
    assert [(c.column("batch_id").to_pylist(), through) for c, through in cut] == [
        ([1, 1, 2, 2, 2], 2),
        ([3, 4, 4, 4, 4], 4),
    ]
    assert publisher.chunks(rows.slice(0, 0)) == []


def test_the_flags_are_checked():
    assert alerts_topic(None, None, None) is None
    assert alerts_topic("alerts", "h:9092", None) == publisher.AlertsTopic("h:9092", "alerts")
    for topic, servers, source, said in (
        ("alerts", None, None, "--bootstrap-servers"),
        ("bad topic", "h:9092", None, "--alerts-topic"),
        ("alerts", "nohost", None, "--bootstrap-servers"),
        ("orders", "h:9092", KafkaSettings("h:9092"), "a topic the stream reads"),
    ):
        with pytest.raises(UsageError, match=said):
            alerts_topic(topic, servers, source)


def test_the_stream_page_says_where_alerts_go_and_how_far_behind():
    assert _alerts_topic(None).startswith("off")
    line = _alerts_topic(
        {"topic": "alerts", "servers": "h:9092", "published_through": 7, "unpublished": 12, "problem": "timed out"}
    )
    assert line == "alerts at h:9092: published through batch 7, 12 alert row(s) unpublished; waiting: timed out"


def test_the_tests_murmur2_is_kafkas():
    # Kafka's own test vectors (clients UtilsTest.testMurmur2), as signed 32-bit values.
    for key, want in (("21", -973932308), ("foobar", -790332482), ("a-little-bit-long-string", -985981536)):
        got = murmur2(key.encode())
        assert (got - (1 << 32) if got >= 1 << 31 else got) == want


class _Transactions:
    """A stand-in for the topic's transactions: open, its position due for its daily re-commit."""

    open = True

    def __init__(self) -> None:
        self.published: list[tuple[int, int]] = []

    def due_refresh(self) -> bool:
        return True

    def publish(self, records: list, through: int) -> None:
        self.published.append((len(records), through))


def test_an_idle_publisher_commits_its_position_again_unchanged(tmp_path):
    """Kafka forgets an idle group's offsets: the publisher re-commits the position it holds, batch 0
    included (committing 'none published' there would publish batch 0 again at the next start)."""
    for position in (0, 7, -1):
        idle = publisher.AlertsPublisher(publisher.AlertsTopic("h:9092", "alerts"), tmp_path)
        idle.tx, idle.position, idle._dirty = _Transactions(), position, False  # type: ignore[assignment]
        assert idle._cycle()
        assert idle.tx.published == [(0, position)]  # type: ignore[union-attr]
