"""Kafka without a broker: record keys, checkpoint checks, flags, the broker's configuration."""

from __future__ import annotations

from tests.helpers.cli import market_spread
from tests.helpers.records import T, quote


def test_the_record_key_is_the_lines_symbol():
    from market_spread.feeds.producer import key_of

    assert key_of(quote("AAPL", T.format(1), "1", "2")) == b"AAPL"
    assert key_of('{"symbol": "A\\"B", "bid": 1}') == b'A"B'
    assert key_of("not json") is None and key_of('{"bid": 1}') is None


def test_a_checkpoint_of_the_other_source_is_named(tmp_path):
    from market_spread.sources.kafka_source import checkpoint_source_error

    offsets = tmp_path / "offsets"
    offsets.mkdir()
    assert checkpoint_source_error(tmp_path, "kafka") is None
    (offsets / "0").write_text('v1\n{"batchWatermarkMs":0}\n{"logOffset":0}\n{"logOffset":0}\n')
    assert "file source" in checkpoint_source_error(tmp_path, "kafka")
    assert checkpoint_source_error(tmp_path, "files") is None
    (offsets / "1").write_text('v1\n{"batchWatermarkMs":0}\n{"quotes":{"0":5}}\n')
    assert "Kafka source" in checkpoint_source_error(tmp_path, "files")
    assert checkpoint_source_error(tmp_path, "kafka") is None


def test_bad_kafka_flags_are_usage_errors(tmp_path):
    for argv, words in [
        (["stream", "--source", "kafka", "--bootstrap-servers", "nohost", "--lake", "x"], "HOST:PORT"),
        (
            [
                "stream",
                "--source",
                "kafka",
                "--bootstrap-servers",
                "h:1",
                "--quotes-topic",
                "a",
                "--orders-topic",
                "a",
                "--lake",
                "x",
            ],
            "must differ",
        ),
        (
            ["stream", "--source", "kafka", "--bootstrap-servers", "h:1", "--orders-topic", "bad topic", "--lake", "x"],
            "topic name",
        ),
        (["stream", "--lake", "x"], "--landing is required"),
        (["generate", "--kafka", "h:1", "--landing", "x"], "exclude each other"),
        (["replay", "--kafka", "h:x", "--nbbo", __file__], "HOST:PORT"),
        (["broker", "--port", "70000", "--data", str(tmp_path)], "TCP port"),
    ]:
        done = market_spread(*argv, timeout=60, cwd=tmp_path)
        assert done.returncode == 2, (argv, done.stderr)
        assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1, (argv, done.stderr)


def test_broker_configuration_is_single_node_loopback_and_takes_big_records(tmp_path):
    from market_spread.feeds.broker import new_cluster_id, server_properties

    props = dict(line.split("=", 1) for line in server_properties(tmp_path, 19092, 20092).splitlines())
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:20092"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:20092"
    assert int(props["message.max.bytes"]) > 2 * 1024 * 1024 and props["auto.create.topics.enable"] == "false"
    assert len(new_cluster_id()) == 22 and new_cluster_id() != new_cluster_id()


def test_the_bench_says_why_the_kafka_row_is_skipped(tmp_path, monkeypatch):
    from market_spread_tools.bench_kafka import broker_available

    assert broker_available() is None  # make setup fetched both JAR folders
    monkeypatch.setenv("MARKET_SPREAD_BROKER_JARS", str(tmp_path))
    assert "Kafka broker JARs" in broker_available() and str(tmp_path) in broker_available()


def test_a_new_broker_cluster_id_never_starts_with_a_dash():
    """kafka-storage format -t ID takes an ID starting with "-" for an option and fails; one
    broker start in 64 did before ids were drawn again (Kafka's own Uuid.randomUuid() does too)."""
    import base64

    from market_spread.feeds.broker import new_cluster_id

    ids = [new_cluster_id() for _ in range(3000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
