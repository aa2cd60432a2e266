"""Contract section 5, item by item, on small hand-written inputs (real Spark, real Delta)."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal as D
from pathlib import Path

import pytest

from market_spread.domain.rules import Thresholds
from market_spread.feeds.generate import Generator, write_backlog
from market_spread.lake.state import merge_state
from market_spread.runtime import spark as spark_mod
from market_spread.stream import batch as pipeline
from market_spread.stream.spec import StreamSpec
from tests.helpers.lake import (
    alerts_by_order,
    assert_same_tables,
    comparable_tables,
    metrics_totals,
    read_table,
    rows,
    rows_with_spark,
    stream,
)
from tests.helpers.landing import land, land_file
from tests.helpers.records import BAD_ORDERS, BAD_QUOTES, T, at, order, quote
from tests.helpers.symbols import SYMBOLS


def _settings(lake: Path, placement: str = "auto") -> StreamSpec:
    return StreamSpec(
        lake=lake, symbols=list(SYMBOLS), thresholds=Thresholds(D("0.05"), D("0.05")), placement=placement
    )


def ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(dt.UTC).replace(tzinfo=None)


# The tests taking `place` run on local disk and on the run's S3 server (tests/helpers/storage.py).


def test_orders_are_checked_as_of_their_time_within_a_batch(spark, place, placement):
    landing, lake = place / "landing", place / "lake"
    land(
        landing,
        "quotes",
        [
            quote("AAPL", T.format(1), "1.00", "1.10"),  # wide
            quote("AAPL", T.format(3), "1.00", "1.01"),  # tight
            quote("AAPL", T.format(5), "2.00", "2.50"),  # wide, at the same time as order O-5
        ],
    )
    land(
        landing,
        "orders",
        [
            order("O-0", "AAPL", T.format(0)),  # before any quote
            order("O-2", "AAPL", T.format(2)),  # current quote: the wide one at :01
            order("O-4", "AAPL", T.format(4)),  # current quote: the tight one at :03
            order("O-5", "AAPL", T.format(5)),  # a quote at the order's very time counts
        ],
    )
    assert stream(spark, landing, lake, placement=placement) == 0
    alerts = alerts_by_order(spark, lake)
    assert set(alerts) == {"O-0", "O-2", "O-5"}
    assert alerts["O-0"]["reason"] == "no_market_data" and alerts["O-0"]["bid"] is None
    assert alerts["O-2"]["reason"] == "wide_spread"
    assert (alerts["O-2"]["bid"], alerts["O-2"]["offer"], alerts["O-2"]["quote_time"]) == (
        D("1.00000000"),
        D("1.10000000"),
        ts(T.format(1)),
    )
    assert alerts["O-5"]["quote_time"] == ts(T.format(5)) and alerts["O-5"]["offer"] == D("2.5")


@pytest.fixture(params=["state on the driver", "state read from the table"])
def state_reader(request, monkeypatch):
    """Both ways a batch reads the state and the history of late orders: the driver's mirror with
    delta-rs (the default), and per batch from the table (past MARKET_SPREAD_STATE_MIRROR_ROWS symbols)."""
    if request.param == "state read from the table":
        monkeypatch.setenv("MARKET_SPREAD_STATE_MIRROR_ROWS", "0")  # read into the stream's spec
    return request.param


# Both state readers on local disk; on S3 the driver's copy (the default): reads of S3 tables are
# the rest of the suite's.
@pytest.mark.parametrize(
    ("place", "state_reader"),
    [("local", "state on the driver"), ("local", "state read from the table"), ("s3", "state on the driver")],
    indirect=True,
)
def test_late_orders_are_checked_against_history_not_newer_state(spark, place, state_reader, placement):
    landing, lake = place / "landing", place / "lake"
    land(
        landing, "quotes", [quote("MSFT", T.format(1), "10.00", "10.50"), quote("MSFT", T.format(3), "10.00", "10.01")]
    )
    assert stream(spark, landing, lake, placement=placement) == 0
    land(landing, "orders", [order("late", "MSFT", T.format(2)), order("now", "MSFT", T.format(4))])
    assert stream(spark, landing, lake, placement=placement) == 0
    alerts = alerts_by_order(spark, lake)
    assert set(alerts) == {"late"}, "the late order meets the wide quote of its time; the current one is tight"
    assert alerts["late"]["quote_time"] == ts(T.format(1))
    late = read_table(spark, lake, "batch_metrics").where("batch_id = 1").first()
    assert late.late_symbols == 1


def test_late_orders_find_a_quote_days_older_than_the_lookback_window(spark, tmp_path, state_reader, placement):
    """The history read for late orders starts a day before them; a symbol with no quote in that
    window is looked up further back, so the answer is the same as with an unbounded read."""
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    land(
        landing,
        "quotes",
        [
            quote("MSFT", "2026-11-10T14:00:00Z", "10.00", "10.50"),  # wide, 13 days before the late order
            quote("IBM", "2026-11-22T20:00:00Z", "100.00", "109.00"),  # wide, inside the window
            quote("IBM", "2026-11-23T09:00:00Z", "100.00", "100.01"),  # tight, after IBM's late order
            quote("MSFT", "2026-11-23T15:00:00Z", "10.00", "10.01"),  # tight: the state, newer than the order
        ],
    )
    assert stream(spark, landing, lake, placement=placement) == 0
    land(
        landing,
        "orders",
        [
            order("msft-late", "MSFT", "2026-11-23T12:00:00Z"),
            order("ibm-late", "IBM", "2026-11-23T08:00:00Z"),
            order("msft-now", "MSFT", "2026-11-23T16:00:00Z"),
        ],
    )
    assert stream(spark, landing, lake, placement=placement) == 0
    alerts = alerts_by_order(spark, lake)
    assert set(alerts) == {"msft-late", "ibm-late"}
    assert alerts["msft-late"]["quote_time"] == ts("2026-11-10T14:00:00Z")
    assert alerts["ibm-late"]["quote_time"] == ts("2026-11-22T20:00:00Z")


def test_commits_carry_the_batch_and_a_replay_skips_what_a_table_already_holds(spark, tmp_path, placement):
    """Exactly once with Delta's own idempotency: each commit carries Delta's transaction identifier
    (txn: the stream's id, kept in its checkpoint, and the batch), and a batch at or below a table's
    last marked batch is not written again. A lake written before the marks: the rows' batch_id."""
    import json

    from market_spread.lake.lake_tables import LakeTables
    from market_spread.runtime.checkpoint_files import query_id

    landing, lake = tmp_path / "landing", tmp_path / "lake"
    _generated(landing, files=1, seed=5)
    assert stream(spark, landing, lake, placement=placement) == 0
    stream_id = query_id(lake / "_checkpoints" / "stream")
    for table in ("alerts", "quotes", "symbol_state", "batch_metrics"):
        log = lake / table / "_delta_log"
        actions = [json.loads(line) for f in sorted(log.glob("*.json")) for line in f.read_text().splitlines()]
        assert [a["txn"]["version"] for a in actions if "txn" in a and a["txn"]["appId"] == stream_id] == [0], table
    marks = LakeTables(str(lake), stream_id).marks()
    assert marks["alerts"] == marks["batch_metrics"] == 0

    before = comparable_tables(spark, lake)
    batch = (
        spark.read.text(str(landing / "quotes"))
        .selectExpr("'quotes' AS stream", "value", "'q' AS source_file")
        .unionByName(
            spark.read.text(str(landing / "orders")).selectExpr("'orders' AS stream", "value", "'o' AS source_file")
        )
    )
    # Batch 0 again, as Spark replays it after a crash: nothing doubles.
    result = pipeline.process_batch(
        batch, 0, _settings(lake, placement), tables=LakeTables(str(lake), stream_id, spark)
    )
    assert "alerts" in result.skipped and "batch_metrics" in result.skipped
    assert comparable_tables(spark, lake) == before
    # A lake of an earlier release, without txn marks: the highest batch_id of the rows says it.
    other = tmp_path / "other"
    spark.range(1).selectExpr("CAST(3 AS BIGINT) AS batch_id").write.format("delta").save(str(other / "alerts"))
    assert LakeTables(str(other), stream_id).marks(("alerts", "quotes")) == {"alerts": 3, "quotes": -1}


def test_a_late_quote_enters_history_but_never_overwrites_newer_state(spark, tmp_path, placement):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    land(landing, "quotes", [quote("IBM", T.format(5), "100.00", "100.01")])
    assert stream(spark, landing, lake, placement=placement) == 0
    land(landing, "quotes", [quote("IBM", T.format(3), "100.00", "120.00")])
    land(landing, "orders", [order("O-4", "IBM", T.format(4)), order("O-6", "IBM", T.format(6))])
    assert stream(spark, landing, lake, placement=placement) == 0
    state = rows(spark, lake, "symbol_state")
    assert [(r["symbol"], r["quote_time"], r["offer"]) for r in state] == [("IBM", ts(T.format(5)), D("100.01"))]
    assert len(rows(spark, lake, "quotes")) == 2
    # The late quote still answers for the order of its time.
    assert set(alerts_by_order(spark, lake)) == {"O-4"}


def test_ties_in_time_are_broken_by_seq_then_prices(spark, tmp_path, placement):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    same = T.format(1)
    land(
        landing,
        "quotes",
        [
            quote("AAPL", same, "1.00", "1.01", seq=2),  # wins over seq 1 although listed first
            quote("AAPL", same, "1.00", "1.50", seq=1),
            quote("MSFT", same, "1.00", "1.50", seq=1),  # a seq beats no seq
            quote("MSFT", same, "1.00", "1.01"),
            quote("IBM", same, "1.00", "1.50"),  # no seq at all: prices decide, deterministically
            quote("IBM", same, "1.00", "1.01"),
        ],
    )
    land(landing, "orders", [order("a", "AAPL", same), order("m", "MSFT", same), order("i", "IBM", same)])
    assert stream(spark, landing, lake, placement=placement) == 0
    alerts = alerts_by_order(spark, lake)
    assert set(alerts) == {"m", "i"}
    assert alerts["m"]["quote_seq"] == 1
    state = {r["symbol"]: r for r in rows(spark, lake, "symbol_state")}
    assert state["AAPL"]["seq"] == 2 and state["AAPL"]["should_reject_trades"] is False
    assert state["MSFT"]["offer"] == D("1.5") and state["IBM"]["offer"] == D("1.5")


def test_orders_without_market_data_are_rejected(spark, tmp_path, placement):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    land(landing, "quotes", [quote("AAPL", T.format(1), "1.00", "1.01")])
    land(landing, "orders", [order("g", "GOOG", T.format(2)), order("a", "AAPL", T.format(2))])
    assert stream(spark, landing, lake, placement=placement) == 0
    alerts = alerts_by_order(spark, lake)
    assert set(alerts) == {"g"}
    g = alerts["g"]
    assert (g["reason"], g["bid"], g["offer"], g["quote_time"], g["quote_seq"]) == (
        "no_market_data",
        None,
        None,
        None,
        None,
    )
    assert (g["account"], g["side"], g["qty"], g["price"]) == (7, "BUY", D("100"), D("1.00"))


def test_every_kind_of_bad_line_is_quarantined_once_and_every_line_is_accounted_for(spark, place, placement):
    landing, lake = place / "landing", place / "lake"
    good_quotes = [quote("AAPL", T.format(0), "1.00", "1.01"), quote("AAPL", T.format(1), "1.00", "1.01", seq=3)]
    good_orders = [order("ok", "AAPL", T.format(2), qty="1.5")]
    quote_lines = good_quotes + [l for ls in BAD_QUOTES.values() for l in ls] + ["", "   ", "\t"]
    order_lines = good_orders + [l for ls in BAD_ORDERS.values() for l in ls]
    land(landing, "quotes", quote_lines)
    land(landing, "orders", order_lines)
    assert stream(spark, landing, lake, placement=placement) == 0

    quarantine = rows(spark, lake, "quarantine")
    got: dict[str, list[str]] = {}
    for r in quarantine:
        got.setdefault(r["reason"], []).append(r["raw"])
    expected = {**BAD_QUOTES, **BAD_ORDERS}
    assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in expected.items()}
    assert all(r["source_file"].endswith(".jsonl") for r in quarantine)
    assert {r["stream"] for r in quarantine if r["reason"] == "unknown_side"} == {"orders"}

    nonblank = sum(1 for l in quote_lines + order_lines if l.strip())
    totals = metrics_totals(spark, lake)
    assert totals["quotes"] + totals["orders"] + totals["quarantined"] == nonblank
    assert (totals["quotes"], totals["orders"], totals["quarantined"]) == (2, 1, len(quarantine))
    assert len(rows(spark, lake, "quotes")) == 2


def test_repeated_order_ids_are_separate_orders(spark, tmp_path, placement):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    land(landing, "orders", [order("dup", "TSLA", T.format(1)), order("dup", "TSLA", T.format(2), qty="5")])
    assert stream(spark, landing, lake, placement=placement) == 0
    alerts = rows(spark, lake, "alerts")
    assert [(a["order_id"], a["qty"]) for a in alerts] == [("dup", D("100")), ("dup", D("5"))]


def test_prices_are_exact_decimals_from_the_text(spark, tmp_path, placement):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    land(
        landing,
        "quotes",
        [
            quote("AAPL", T.format(1), "1.10", "1.15"),  # rejects: exactly 0.05
            quote("MSFT", T.format(1), "0.50", "0.53"),  # rejects on the ratio
            quote("IBM", T.format(1), "1.00", "1.04"),  # does not reject
            quote("GOOG", T.format(1), "0.1234567850000000000000000000001", "0.74749102461495"),  # rounded half-up
        ],
    )
    assert stream(spark, landing, lake, placement=placement) == 0
    state = {r["symbol"]: r for r in rows(spark, lake, "symbol_state")}
    assert state["AAPL"]["should_reject_trades"] is True
    assert state["MSFT"]["should_reject_trades"] is True
    assert state["IBM"]["should_reject_trades"] is False
    assert (state["GOOG"]["bid"], state["GOOG"]["offer"]) == (D("0.12345679"), D("0.74749102"))
    schema = {f.name: f.dataType.simpleString() for f in read_table(spark, lake, "alerts").schema}
    assert schema["price"] == "decimal(18,8)" and schema["order_time"] == "timestamp" and schema["batch_id"] == "bigint"


def _generated(landing, files: int, seed: int = 5, quotes: int = 600, orders: int = 600) -> None:
    gen = Generator(SYMBOLS, seed=seed, wide_share=0.4)
    write_backlog(landing, gen, quotes, orders, files, f"cut{files}")


def test_same_alerts_whatever_the_cutting_into_files_and_runs(spark, place, tmp_path, placement):
    one = place / "one"
    _generated(one / "landing", files=1)
    assert stream(spark, one / "landing", one / "lake", placement=placement) == 0
    assert rows(spark, one / "lake", "alerts"), "the generated data must produce alerts for this test to mean anything"

    many = place / "many"
    _generated(many / "landing", files=7)
    assert stream(spark, many / "landing", many / "lake", placement=placement) == 0

    # Several runs: land the files pair by pair, a run after every few pairs.
    staged, source = place / "staged", tmp_path / "src"
    _generated(source, files=7)
    for chunk in [[0, 1], [2], [3, 4, 5], [6]]:
        for k in chunk:
            for feed in ("quotes", "orders"):
                land_file(source / feed / f"cut7-{k:05d}.jsonl", staged / "landing", feed)
        assert stream(spark, staged / "landing", staged / "lake", placement=placement) == 0
    for lake in (many / "lake", staged / "lake"):
        assert_same_tables(spark, lake, one / "lake")
    assert metrics_totals(spark, staged / "lake")["batches"] == 4
    # Spark and delta-rs (the tests' reader) see the same rows.
    assert comparable_tables(spark, one / "lake", read=rows_with_spark) == comparable_tables(spark, one / "lake")


@pytest.mark.every_place
def test_a_batch_replayed_after_a_crash_between_its_writes_leaves_exact_tables(spark, place, monkeypatch, placement):
    clean, crashed = place / "clean", place / "crashed"
    for root in (clean, crashed):
        _generated(root / "landing", files=2, seed=9)
        land(root / "landing", "quotes", ["garbage line"], name="zz-bad.jsonl")
    assert stream(spark, clean / "landing", clean / "lake", placement=placement) == 0

    # Crash after the appends (quarantine, history, alerts) but before the state MERGE and metrics
    # (symbol_state committed in its batch, beside the appends, not trailing them: lake.state_writes).
    monkeypatch.setenv("MARKET_SPREAD_STATE_TRAIL_BATCHES", "1")
    real_merge = merge_state

    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash between the writes of one micro-batch")

    from market_spread.lake import state_writes  # both placements commit through it

    monkeypatch.setattr(state_writes, "merge_state", crash)
    assert stream(spark, crashed / "landing", crashed / "lake", placement=placement) == 1
    assert rows(spark, crashed / "lake", "alerts"), "the appends happened before the crash"
    monkeypatch.setattr(state_writes, "merge_state", real_merge)
    assert stream(spark, crashed / "landing", crashed / "lake", placement=placement) == 0

    assert comparable_tables(spark, crashed / "lake") == comparable_tables(spark, clean / "lake")
    totals = metrics_totals(spark, crashed / "lake")
    assert totals["batches"] == 1
    assert totals["alerts"] == len(rows(spark, crashed / "lake", "alerts"))
    assert totals["quotes"] == len(rows(spark, crashed / "lake", "quotes"))
    assert totals["quarantined"] == len(rows(spark, crashed / "lake", "quarantine")) == 1


def test_tables_are_readable_without_spark_by_delta_rs(spark, place, placement):
    landing, lake = place / "landing", place / "lake"
    _generated(landing, files=2, seed=3, quotes=100, orders=100)
    land(landing, "orders", ["oops"])
    assert stream(spark, landing, lake, placement=placement) == 0
    for table in ("symbol_state", "alerts", "quotes", "quarantine", "batch_metrics"):
        arrow = place.open_delta(lake / table).to_pyarrow_table()
        assert arrow.num_rows == read_table(spark, lake, table).count() > 0, table
    alerts = place.open_delta(lake / "alerts").to_pyarrow_table()
    assert str(alerts.schema.field("price").type) == "decimal128(18, 8)"


def test_a_relative_lake_path_creates_the_tables_where_the_user_is(spark, tmp_path, monkeypatch):
    # Delta's SQL reads `delta.`path`` as a path only when absolute; `--lake data/lake` must work.
    from market_spread.lake import tables as lake_mod

    monkeypatch.chdir(tmp_path)
    lake_mod.ensure_tables(spark, "data/lake")
    assert all(lake_mod.is_delta_table(tmp_path / "data" / "lake" / name) for name in lake_mod.TABLES)


def test_archive_moves_processed_landing_files_out_and_changes_no_answer(spark, tmp_path):
    """--archive (cleanSource=archive): files leave the landing folder once their batch is committed,
    so its listing stays small over days; the tables are those of a run without it."""
    from market_spread.stream.query import run_query
    from market_spread.stream.spec import StreamSpec

    plain, archived = tmp_path / "plain", tmp_path / "archived"
    gen = Generator(SYMBOLS, seed=13, wide_share=0.4)
    pairs = [gen.events(150, 150), gen.events(150, 150)]
    lake = archived / "lake"
    for i, events in enumerate(pairs):
        for root in (plain, archived):
            for feed in ("quotes", "orders"):
                land(root / "landing", feed, [l for f, _, l in events if f == feed], name=f"pair-{i}.jsonl")
        assert stream(spark, plain / "landing", plain / "lake") == 0
        # Spark archives a batch's files when it commits them, as the next batch is planned.
        spec = StreamSpec(
            lake=lake,
            symbols=list(SYMBOLS),
            landing=archived / "landing",
            archive=archived / "archive",
            available_now=True,
        )
        assert run_query(spark, spec) == 0
    moved = sorted(str(p.relative_to(archived / "archive")) for p in (archived / "archive").rglob("*.jsonl"))
    assert [m for m in moved if m.endswith("pair-0.jsonl")], f"the first pair is archived: {moved}"
    left = sorted(p.name for p in (archived / "landing").rglob("*.jsonl"))
    assert "pair-0.jsonl" not in left
    assert comparable_tables(spark, lake) == comparable_tables(spark, plain / "lake")


def test_archived_files_leave_the_source_log_at_a_restart_and_in_a_long_run(spark, tmp_path, capsys, monkeypatch):
    """--archive: Spark's file source log keeps an entry for every file it ever read (compacted, never
    expired); the stream drops those of files already archived at each start and every N batches.
    No file is read twice and the tables are those of a plain run over the same files."""
    import json

    from market_spread.stream.query import run_query
    from market_spread.stream.spec import StreamSpec

    plain, archived = tmp_path / "plain", tmp_path / "archived"
    gen = Generator(SYMBOLS, seed=17, wide_share=0.4)

    def land_pairs(numbers) -> None:
        for i in numbers:
            events = gen.events(60, 60)
            for root in (plain, archived):
                for feed in ("quotes", "orders"):
                    landed = land(
                        root / "landing", feed, [l for f, _, l in events if f == feed], name=f"pair-{i}.jsonl"
                    )
                    # One file per batch is taken oldest first by modification time, ties in directory
                    # order: files landed within one millisecond could pair orders of pair i with
                    # quotes of pair j. A second apart, batch i holds pair i of both feeds.
                    os.utime(landed, (1_700_000_000 + i, 1_700_000_000 + i))

    spec = StreamSpec(
        lake=archived / "lake",
        symbols=list(SYMBOLS),
        landing=archived / "landing",
        archive=archived / "archive",
        max_files_per_batch=1,
        available_now=True,
    )

    def logged_files() -> list[str]:
        names = []
        for folder in (spec.checkpoint_path / "sources").iterdir():
            latest = max(folder.glob("*.compact"), key=lambda p: int(p.name.split(".")[0]))
            names += [Path(json.loads(l)["path"]).name for l in latest.read_text().split("\n")[1:] if l]
        return sorted(names)

    # Compact every second batch, so that a few batches show it.
    with spark_mod.session_settings(spark, {"spark.sql.streaming.fileSource.log.compactInterval": "2"}):
        land_pairs(range(6))
        assert run_query(spark, spec) == 0  # six batches: compact files at batches 1, 3 and 5
        assert logged_files() == sorted(f"pair-{i}.jsonl" for i in range(6) for _ in range(2))
        land_pairs(range(6, 8))
        capsys.readouterr()
        assert run_query(spark, spec) == 0
        assert "entries of archived files" in capsys.readouterr().out
        left = logged_files()
        assert "pair-0.jsonl" not in left and "pair-7.jsonl" in left, left
        # A long run: trimmed from inside the batch every 2 batches (batches 8 to 13 here).
        monkeypatch.setenv("MARKET_SPREAD_SOURCE_LOG_TRIM_EVERY", "2")
        land_pairs(range(8, 14))
        assert run_query(spark, spec) == 0
    left = logged_files()
    assert "pair-8.jsonl" not in left and "pair-13.jsonl" in left, left
    assert stream(spark, plain / "landing", plain / "lake") == 0
    assert metrics_totals(spark, archived / "lake")["quotes"] == metrics_totals(spark, plain / "lake")["quotes"]
    assert comparable_tables(spark, archived / "lake") == comparable_tables(spark, plain / "lake")


def _pair(spark, landing: Path, k: int, files: int):
    """File pair k of a generated landing folder, as the stream hands it to a batch."""

    def feed(name: str):
        path = landing / name / f"cut{files}-{k:05d}.jsonl"
        return spark.read.text(str(path)).selectExpr(f"'{name}' AS stream", "value", f"'{path}' AS source_file")

    return feed("quotes").unionByName(feed("orders"))


def _reference_and_cut(spark, tmp_path: Path, files: int) -> tuple[Path, Path, Path]:
    """A lake from one run over one generated file pair (`one`), and the same feed cut into `files`
    pairs in `landing` beside an empty `lake`, for batches handed to a BatchProcessor one by one."""
    from market_spread.lake import tables as lake_mod

    one = tmp_path / "one"
    _generated(one / "landing", files=1, seed=11)
    assert stream(spark, one / "landing", one / "lake") == 0
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    _generated(landing, files=files, seed=11)
    lake_mod.ensure_tables(spark, lake)
    return one, landing, lake


def test_the_drivers_copy_of_the_state_is_the_table_after_every_batch(spark, tmp_path, monkeypatch):
    """The stream keeps symbol_state's quotes on the driver (lake.state_mirror.StateMirror) rather than
    reading the table twice a batch. Batch after batch in one process it must hold what the table
    holds, a failed batch must make it read the table (and the marks of committed writes) again,
    and the answers must be those of a
    run over one batch."""
    from pyspark.testing import assertDataFrameEqual

    from market_spread.lake import state_writes
    from market_spread.lake.state import STATE_QUOTE_COLUMNS

    one, landing, lake = _reference_and_cut(spark, tmp_path, files=5)
    monkeypatch.setenv("MARKET_SPREAD_STATE_TRAIL_BATCHES", "1")  # the table committed in every batch
    processor = pipeline.BatchProcessor(_settings(lake), on_batch=lambda result: None)
    table = lambda: read_table(spark, lake, "symbol_state").select(*STATE_QUOTE_COLUMNS)  # noqa: E731

    def crash(*args, **kwargs):
        raise RuntimeError("simulated failure of the state MERGE")

    for k in range(5):
        if k == 3:  # the copy may move on before the MERGE fails: it must be dropped, not kept
            monkeypatch.setattr(state_writes, "merge_state", crash)
            with pytest.raises(RuntimeError):
                processor(_pair(spark, landing, k, 5), k)
            assert processor.state._quotes is None
            monkeypatch.setattr(state_writes, "merge_state", merge_state)
        processor(_pair(spark, landing, k, 5), k)
        assert processor.state._quotes is not None, "the copy is in use, not the table"
        copy = processor.state.stored_table(sorted(processor.state._quotes))
        assertDataFrameEqual(spark.createDataFrame(copy), table())
    assert_same_tables(spark, lake, one / "lake")


def test_symbol_state_trails_by_at_most_ten_batches_and_a_restart_loses_none_of_it(spark, tmp_path, monkeypatch):
    """Contract 4: symbol_state is committed once 10 batches are staged (the time bound is
    test_state_writes.py's, turned off here), `batch_metrics.state_batch` says how far it is current,
    the checks use every batch's quotes meanwhile, and what a killed process had staged comes back
    from the quote history at the next start."""
    from market_spread.lake import state_writes

    monkeypatch.delenv("MARKET_SPREAD_STATE_TRAIL_BATCHES", raising=False)  # the default, 10
    monkeypatch.setattr(state_writes, "FLUSH_AFTER_S", 1e9)
    one, landing, lake = _reference_and_cut(spark, tmp_path, files=13)
    checkpoint = tmp_path / "checkpoint"  # the query's id, as Spark keeps it: the stream's id in the marks
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id":"a-trailing-stream"}\n')
    first = pipeline.BatchProcessor(_settings(lake), on_batch=lambda result: None, checkpoint=checkpoint)
    for k in range(12):
        first(_pair(spark, landing, k, 13), k)
    marks = first.tables.marks(("symbol_state", "quotes"))
    assert marks == {"symbol_state": 9, "quotes": 11}, "committed at the 10th batch, 10 and 11 staged"
    state_batch = {r["batch_id"]: r["state_batch"] for r in rows(spark, lake, "batch_metrics", drop=())}
    assert state_batch == {**dict.fromkeys(range(9)), 9: 9, 10: 9, 11: 9}
    first.state.writes._stop.set()  # killed: batches 10 and 11 were staged only
    again = pipeline.BatchProcessor(_settings(lake), on_batch=lambda result: None, checkpoint=checkpoint)
    again.resume(spark)  # the restarted query, before any input: 10 and 11 staged from the history
    staged = again.state.writes.overlay()
    assert staged is not None and set(staged["symbol"].to_pylist()) == {
        r["symbol"] for r in rows(spark, lake, "quotes", drop=()) if r["batch_id"] in (10, 11)
    }
    again(_pair(spark, landing, 12, 13), 12)
    again.settle()  # the end commits what is staged: 10 to 12, 10 and 11 from the history
    assert again.tables.marks(("symbol_state",)) == {"symbol_state": 12}
    assert_same_tables(spark, lake, one / "lake")


def test_a_stream_compacting_every_two_commits_gives_the_same_tables(spark, tmp_path, monkeypatch, capsys):
    # lake.compaction inside the stream: fewer files, the same rows, every batch still counted.
    from market_spread.lake import compaction
    from market_spread.lake import tables as lake_mod
    from market_spread.stream.query import run_query
    from market_spread.stream.spec import StreamSpec

    one = tmp_path / "one"
    _generated(one / "landing", files=1)
    assert stream(spark, one / "landing", one / "lake") == 0
    many = tmp_path / "many"
    _generated(many / "landing", files=6)
    monkeypatch.setenv("MARKET_SPREAD_COMPACT_EVERY", "2")
    spec = StreamSpec(
        lake=many / "lake",
        symbols=SYMBOLS,
        landing=many / "landing",
        max_files_per_batch=1,
        thresholds=Thresholds(D("0.05"), D("0.05")),
        available_now=True,
    )
    assert run_query(spark, spec) == 0
    out = capsys.readouterr().out
    assert out.count("; compacted ") >= 3, out
    assert_same_tables(spark, many / "lake", one / "lake")
    assert metrics_totals(spark, many / "lake") == {**metrics_totals(spark, one / "lake"), "batches": 6}
    for table in ("alerts", "quotes", "batch_metrics"):
        assert compaction.data_files(lake_mod.table_path(many / "lake", table)) < 6, table
    from market_spread.lake.lake_tables import LakeTables
    from market_spread.runtime.checkpoint_files import query_id

    committed = LakeTables(str(many / "lake"), query_id(many / "lake" / "_checkpoints" / "stream")).marks()
    assert [committed[t] for t in ("alerts", "quotes", "symbol_state", "batch_metrics")] == [5] * 4


def test_late_history_holds_only_what_the_as_of_choice_can_use(spark, tmp_path, placement):
    """lake.state.late_history_rows: per late symbol, from its newest quote at or before its first
    late order (every quote of that time) up to its last late order, found in the last minute, the
    lookback days or further back: nothing older, nothing later."""
    from market_spread.lake.lake_tables import LakeTables
    from market_spread.lake.state import late_history_rows

    landing, lake = tmp_path / "landing", tmp_path / "lake"
    land(
        landing,
        "quotes",
        [
            quote("MSFT", "2026-11-23T10:00:00Z", "10.00", "10.50", seq=1),  # older than the current one: not needed
            quote("MSFT", "2026-11-23T10:00:30Z", "10.00", "10.40", seq=2),  # current at the first late order...
            quote("MSFT", "2026-11-23T10:00:30Z", "10.00", "10.30", seq=3),  # ...with a tie in time
            quote("MSFT", "2026-11-23T10:00:50Z", "10.00", "10.20", seq=4),  # between the late orders
            quote("MSFT", "2026-11-23T10:02:00Z", "10.00", "10.01", seq=5),  # after the last late order
            quote("IBM", "2026-11-23T08:00:00Z", "100.00", "101.00", seq=6),  # not current any more
            quote("IBM", "2026-11-23T09:00:00Z", "100.00", "100.50", seq=7),  # an hour before: the lookback day
            quote("GOOG", "2026-11-20T09:00:00Z", "50.00", "50.50", seq=8),  # days before: the oldest step
        ],
    )
    assert stream(spark, landing, lake, placement=placement) == 0
    at = lambda text: dt.datetime.fromisoformat(text.replace("Z", "+00:00"))  # noqa: E731
    late = [
        {"symbol": "MSFT", "first_order": at("2026-11-23T10:00:40Z"), "last_order": at("2026-11-23T10:01:00Z")},
        {"symbol": "IBM", "first_order": at("2026-11-23T10:00:40Z"), "last_order": at("2026-11-23T10:00:45Z")},
        {"symbol": "GOOG", "first_order": at("2026-11-23T10:00:41Z"), "last_order": at("2026-11-23T10:00:41Z")},
    ]
    rows = late_history_rows(LakeTables(str(lake)), late).to_pylist()
    assert sorted((r["symbol"], r["seq"]) for r in rows) == [
        ("GOOG", 8),
        ("IBM", 7),
        ("MSFT", 2),
        ("MSFT", 3),
        ("MSFT", 4),
    ]


def _checked_batches(landing: Path):
    """Lands four batches in turn (yielding each one's files once landed): generated files, then
    ties, a symbol without quotes and late orders, a later late order, and bad lines of every sort."""
    _generated(landing, files=2, seed=21)
    yield sorted((landing / "quotes").glob("*.jsonl")) + sorted((landing / "orders").glob("*.jsonl"))
    quotes = [
        quote("AAPL", at(7), "1.00", "1.20", seq=2),
        quote("AAPL", at(7), "1.00", "1.01", seq=1),
        quote("MSFT", at(9), "5.00", "5.01"),
        quote("MSFT", at(-3600), "5.00", "6.00"),
    ]
    orders = [
        order("tie", "AAPL", at(7)),
        order("none", "IBM", at(-86400 * 3)),
        order("late", "MSFT", at(-1800), seq=4),
        order("now", "MSFT", at(10)),
    ]
    yield [_landed(landing, "quotes", quotes, "b2"), _landed(landing, "orders", orders, "b2")]
    yield [_landed(landing, "orders", [order("late2", "MSFT", at(-7200))], "b3")]
    single_quoted = order("single", "AAPL", at(8)).replace('"', "'")  # Jackson reads single quotes
    bad_orders = [order("bad-neighbour", "AAPL", at(8)), "{not json", single_quoted, "{'x': 1}"]
    bad_orders += [line for lines in BAD_ORDERS.values() for line in lines]
    bad_quotes = [line for lines in BAD_QUOTES.values() for line in lines]
    yield [_landed(landing, "orders", bad_orders, "b4"), _landed(landing, "quotes", bad_quotes, "b4")]


def _landed(landing: Path, feed: str, lines: list, name: str) -> Path:
    return Path(str(land(landing, feed, lines, name=f"{name}.jsonl")))


def test_both_parses_and_both_placements_check_batches_as_the_reference_engine(spark, tmp_path, monkeypatch):
    # A batch's lines in the product's own layout go through Arrow's kernels (kernel.layout), the
    # others line by line ("rows": every line goes that way here), on the driver or in Spark's tasks
    # ("executors"). The same tables each way, and the reference engine's alerts and quarantine,
    # over several batches, ties, orders without market data, late orders (history) and bad lines
    # of every sort, Jackson's leniencies included (single quotes, NaN, numbers given as strings).
    from market_spread.kernel import layout as driver_columns
    from market_spread_tools.reference import run_reference
    from tests.unit.test_lenient_lines import SPARK_NOT_REFERENCE

    real_split, left = driver_columns.split, []

    def rows_only(lines, universe, keep_text=False):
        columns, _ = real_split(lines, universe)
        return driver_columns.ColumnBatch(columns.quotes.slice(0, 0), columns.orders.slice(0, 0), []), lines

    lakes, batches = {}, []
    for name in ("driver", "rows", "executors"):
        split = {"driver": lambda *a: left.append(real_split(*a)[1].num_rows) or real_split(*a), "rows": rows_only}
        monkeypatch.setattr(driver_columns, "split", split.get(name, real_split))
        landing, lake = tmp_path / name / "landing", tmp_path / name / "lake"
        placement = "executors" if name == "executors" else "driver"
        batches = []
        for files in _checked_batches(landing):
            batches.append(files)
            assert stream(spark, landing, lake, placement=placement) == 0
        lakes[name] = lake
    assert left[:3] == [0, 0, 0] and left[3] > 0, "Arrow's parse took the valid batches' lines whole"
    want = comparable_tables(spark, lakes["driver"])
    reference = run_reference(batches, SYMBOLS)
    utc = dt.UTC
    assert sorted((a["order_id"], a["reason"], a["quote_time"]) for a in want["alerts"]) == sorted(
        (a["order_id"], a["reason"], a["quote_time"] and a["quote_time"].astimezone(utc).replace(tzinfo=None))
        for a in reference.alerts
    )
    assert {r["order_id"] for r in want["alerts"]} >= {"tie", "none", "late", "late2", "bad-neighbour", "single"}
    # Where the reference judges a line otherwise than Jackson does, the kernel keeps Spark's answer.
    expected = [(s, raw, SPARK_NOT_REFERENCE.get((s, raw), why)) for s, raw, why in reference.quarantined]
    assert sorted((r["stream"], r["raw"], r["reason"]) for r in want["quarantine"]) == sorted(expected)
    assert comparable_tables(spark, lakes["rows"]) == want
    assert comparable_tables(spark, lakes["executors"]) == want
    late = read_table(spark, lakes["driver"], "batch_metrics").where("batch_id = 1").first()
    assert late.late_symbols == 2  # MSFT, and IBM's order from before any quote
