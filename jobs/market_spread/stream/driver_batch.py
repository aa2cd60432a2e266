"""A small batch checked on the driver: its lines read from its landing files (from Kafka, brought
over in one Spark job), parsed and checked in Python (domain.certain_lines, domain.order_check), its
rows committed with delta-rs.

Why: through Spark a 2,000-event batch costs about 0.4 s even with a warm JVM (building, analysing
and planning the parse and the as-of check, and their jobs), which alone spends most of issue 43's
one-second budget; on the driver the same batch takes tens of milliseconds of Python.
The answers are the same: a batch is taken here only when every line is certainly valid (else it
goes to Spark whole, which alone decides quarantine reasons), the candidates of each order are those
of stream.check (the batch's quotes, the driver's copy of symbol_state, history for late orders) and
the choice among them is transforms.asof's. Which batches: while the batch before had fewer than
MARKET_SPREAD_DRIVER_BATCH_LINES lines, or, for the first one of a process, when the files it reads
are small enough (a Kafka batch's size is not known before it is read: Spark takes it).
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

import pyarrow as pa
from pyspark.sql import DataFrame

from market_spread.domain import order_check
from market_spread.domain.certain_lines import Order, Quote, is_blank, parse_order, parse_quote
from market_spread.domain.rules import Thresholds, should_reject
from market_spread.lake import delta_rs
from market_spread.lake import tables as lake_mod
from market_spread.lake.compaction import Compactor
from market_spread.lake.state import NEWEST_COLUMNS, late_history_rows, merge_state
from market_spread.lake.state_mirror import StateMirror, micros
from market_spread.lake.writes import ms_since
from market_spread.runtime import settings
from market_spread.runtime.storage import location
from market_spread.stream.batch_run import BatchRun, finish, run_writes

_BYTES_PER_LINE = 256  # a landing line is about 120-180 bytes: the bound errs towards Spark
_DAY_US = 86_400_000_000
_OFFSET = re.compile(r"(.*)/([0-9]+)", re.DOTALL)
_SCHEMAS = {t: delta_rs.arrow_schema(lake_mod.SCHEMAS[t]) for t in ("quotes", "alerts")}


@dataclass
class DriverBatch:
    """A batch's certainly valid lines, parsed, and where they came from (stream.summary's figures)."""

    quotes: list[Quote] = field(default_factory=list)
    orders: list[Order] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # landing files, or Kafka topic/partition
    last_offsets: dict[str, int] = field(default_factory=dict)  # Kafka topic/partition -> highest offset


def limit_lines() -> int:
    return settings.value("MARKET_SPREAD_DRIVER_BATCH_LINES")


def likely_small(batch_df: DataFrame, lines_before: int | None) -> bool:
    """Whether to try the batch on the driver: by the batch before, else by the files' size."""
    limit = limit_lines()
    if limit == 0 or not delta_rs.enabled():
        return False
    if lines_before is not None:
        return lines_before < limit
    size = plan_bytes(batch_df)
    return size is not None and size < limit * _BYTES_PER_LINE


def plan_bytes(batch_df: DataFrame) -> int | None:
    """The bytes Spark's plan says the batch reads (its files' sizes), None when it does not know."""
    try:
        size = int(str(batch_df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    except Exception:  # noqa: BLE001 - no estimate: Spark takes the batch
        return None
    return size if size < (1 << 62) else None  # a source without an estimate says "huge"


def read_lines(batch_df: DataFrame) -> pa.Table | None:
    """The batch's lines (stream, value, source_file) on the driver: a landing file's read here
    straight from its folder or bucket (landing_files), Kafka records in one Spark job; None when
    the batch is bigger than the limit after all (Spark then takes it)."""
    limit = 2 * limit_lines()
    files = landing_files(batch_df, limit * _BYTES_PER_LINE)
    table = _file_lines(files) if files else None
    if table is None:
        table = batch_df.select("stream", "value", "source_file").toArrow()
    return table if table.num_rows <= limit else None


def landing_files(batch_df: DataFrame, max_bytes: int) -> list[str] | None:
    """The landing files the batch reads, whole, from the Spark plan foreachBatch hands over (its
    file scans' partitions), without running it; None for anything else (a Kafka batch, files
    larger than `max_bytes` together). Reading them here saves the batch a Spark job (58-68 ms of a
    5,000-line batch at 10,000 events/s, the largest phase of a driver batch)."""
    try:
        return _whole_files(batch_df._jdf.queryExecution().logical(), max_bytes)
    except Exception:  # noqa: BLE001 - a plan of another shape (not foreachBatch's): Spark reads it
        return None


def _whole_files(plan, max_bytes: int) -> list[str] | None:
    covered: dict[str, list[int]] = {}
    rdds = [plan.rdd()]
    while rdds:
        rdd = rdds.pop()
        deps = rdd.dependencies()
        if deps.isEmpty():
            if rdd.getClass().getSimpleName() != "FileScanRDD":
                return None  # another source
            for partition in _scala_list(rdd.filePartitions()):
                for f in partition.files():
                    seen = covered.setdefault(f.filePath().toPath().toString(), [0, f.fileSize()])
                    seen[0] += f.length()
            continue
        rdds.extend(d.rdd() for d in _scala_list(deps))
    if any(read != size for read, size in covered.values()) or sum(s for _, s in covered.values()) > max_bytes:
        return None
    return sorted(covered)


def _scala_list(seq) -> list:
    it, out = seq.iterator(), []
    while it.hasNext():
        out.append(it.next())
    return out


def _file_lines(files: list[str]) -> pa.Table | None:
    """The lines of landing files as Spark's text source splits them (at \n, \r\n or \r), the feed
    from each file's folder; None when a file is not UTF-8 or cannot be read here (Spark's collect
    then reads the batch)."""
    streams, values, sources = [], [], []
    for name in files:
        place = location(name.removeprefix("file:") if name.startswith("file:") else name)
        try:
            data = place.read_bytes()
            # Hadoop's line reader drops a UTF-8 byte-order mark at a file's start.
            data = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
            lines = [line.decode("utf-8") for line in data.splitlines()]
        except Exception:  # noqa: BLE001 - not UTF-8, gone, unreadable: Spark's read says what it is
            return None
        streams += [place.parent.name] * len(lines)
        values += lines
        sources += [name] * len(lines)
    return pa.table({"stream": streams, "value": values, "source_file": sources})


def parse(table: pa.Table, universe: frozenset[str]) -> DriverBatch | None:
    """The lines parsed (blank ones dropped, as parsing.nonblank_lines does); None when a line is
    not certainly valid."""
    batch, sources = DriverBatch(), set()
    try:
        columns = [table[c].to_pylist() for c in ("stream", "value", "source_file")]
    except UnicodeDecodeError:  # Spark hands over the bytes of a line that is not UTF-8 as they are
        return None
    for stream, line, source in zip(*columns):
        if line.startswith("\ufeff"):
            line = line[1:]
        if is_blank(line):
            continue
        record = parse_quote(line, universe) if stream == "quotes" else parse_order(line, universe)
        if record is None:
            return None
        (batch.quotes if stream == "quotes" else batch.orders).append(record)
        sources.add(source)
    batch.files, batch.last_offsets = _sources(sources)
    return batch


def _sources(names: set[str]) -> tuple[list[str], dict[str, int]]:
    """Files as they are; Kafka records (`topic/partition/offset`) as partitions and their last offset."""
    files, last = set(), {}
    for name in names:
        kafka = _OFFSET.fullmatch(name)  # stream.summary's regexes, the same names
        if kafka:
            where, offset = kafka[1], int(kafka[2])
            last[where] = max(offset, last.get(where, -1))
        files.add(kafka[1] if kafka else name)
    return sorted(files), last


def candidates(batch: DriverBatch, state: StateMirror, lake: str) -> tuple[dict[str, list[Quote]], int]:
    """Per symbol with orders, the quotes its orders may be checked against; and how many symbols
    had late orders (older than their stored state: history read for them, as stream.check does)."""
    spans = order_check.spans(batch.orders)
    out: dict[str, list[Quote]] = {s: [] for s in spans}
    for q in batch.quotes:
        if q.symbol in out:
            out[q.symbol].append(q)
    for symbol, q in state.stored(list(spans)).items():
        out[symbol].append(Quote(symbol, *q))
    late = state.late(_bounds(spans))
    if late:
        history = late_history_rows(lake, late)
        for row in zip(history["symbol"].to_pylist(), history["bid"].to_pylist(), history["offer"].to_pylist(),
                       micros(history["quote_time"]), history["seq"].to_pylist()):
            out[row[0]].append(Quote(*row))
    return out, len(late)


def _bounds(spans: dict[str, tuple[int, int]]) -> pa.Table:
    time = pa.timestamp("us", tz="UTC")
    return pa.table({"symbol": list(spans), "first_order": pa.array([s[0] for s in spans.values()], time),
                     "last_order": pa.array([s[1] for s in spans.values()], time)})


def _rejects(q: Quote, thresholds: Thresholds) -> bool:
    return should_reject(q.bid, q.offer, thresholds.max_spread, thresholds.max_spread_ratio)


def _table(schema: pa.Schema, columns: dict[str, list]) -> pa.Table:
    arrays = []
    for f in schema:
        values = columns[f.name]
        arrays.append(pa.array(values, pa.int64()).cast(f.type) if pa.types.is_timestamp(f.type) else pa.array(values, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def quote_rows(quotes: list[Quote], batch_id: int, thresholds: Thresholds) -> pa.Table:
    """The batch's quote history rows, as Spark's path writes them."""
    return _table(_SCHEMAS["quotes"], {
        "symbol": [q.symbol for q in quotes], "bid": [q.bid for q in quotes], "offer": [q.offer for q in quotes],
        "quote_time": [q.time for q in quotes], "seq": [q.seq for q in quotes], "batch_id": [batch_id] * len(quotes),
        "should_reject_trades": [_rejects(q, thresholds) for q in quotes],
        "quote_date": pa.array([q.time // _DAY_US for q in quotes], pa.int32()).cast(pa.date32()).to_pylist(),
    })


def newest_rows(quotes: list[Quote], thresholds: Thresholds) -> pa.Table:
    """Each symbol's highest quote of the batch (lake.state.NEWEST_COLUMNS): the state MERGE's source."""
    newest = list(order_check.newest_by_symbol(quotes).values())
    rows = quote_rows(newest, 0, thresholds)
    return rows.select(list(NEWEST_COLUMNS))


def alert_rows(orders: list[Order], chosen: list[Quote | None], thresholds: Thresholds, batch_id: int,
               detected_at: datetime) -> pa.Table:
    """The alerts of the orders checked against their chosen quotes (transforms.asof's columns)."""
    hits = [(o, q, r) for o, q in zip(orders, chosen) if (r := order_check.reason(q, thresholds)) is not None]
    at = int(detected_at.timestamp() * 1_000_000)

    def quote_field(name: str) -> list:
        return [getattr(q, name) if q is not None else None for _, q, _ in hits]

    return _table(_SCHEMAS["alerts"], {
        "order_id": [o.order_id for o, _, _ in hits], "account": [o.account for o, _, _ in hits],
        "symbol": [o.symbol for o, _, _ in hits], "side": [o.side for o, _, _ in hits],
        "qty": [o.qty for o, _, _ in hits], "price": [o.price for o, _, _ in hits],
        "order_time": [o.time for o, _, _ in hits], "reason": [r for _, _, r in hits],
        "bid": quote_field("bid"), "offer": quote_field("offer"), "quote_time": quote_field("time"),
        "detected_at": [at] * len(hits), "batch_id": [batch_id] * len(hits),
        "order_seq": [o.seq for o, _, _ in hits], "quote_seq": quote_field("seq"),
    })


def driver_steps(batch: BatchRun, batch_df: DataFrame, compactor: Compactor | None) -> bool:
    """The whole batch on the driver (stream.driver_batch); False, having committed nothing, when a
    line is not certainly valid: Spark then takes the batch (the attempt's time counts in its parse,
    which is timed from the batch's start)."""
    result, settings = batch.result, batch.settings
    batch.describe("read lines")
    lines = read_lines(batch_df)
    collected = ms_since(batch.t0)
    t1 = time.perf_counter()
    rows = parse(lines, settings.universe) if lines is not None else None
    if rows is None:
        return False
    result.on_driver = True
    result.quotes, result.orders, result.quarantined = len(rows.quotes), len(rows.orders), 0
    result.input_lines, result.files, result.last_offsets = result.quotes + result.orders, rows.files, rows.last_offsets
    result.phases_ms.update(collect=collected, parse=ms_since(t1))
    t2 = time.perf_counter()
    quotes_of, result.late_symbols = candidates(rows, batch.state, settings.lake)
    chosen = order_check.as_of(rows.orders, quotes_of)
    alerts = alert_rows(rows.orders, chosen, settings.thresholds, batch.batch_id, datetime.now(timezone.utc))
    result.phases_ms["check"] = ms_since(t2)
    settings.guard()
    t3 = time.perf_counter()
    newest = newest_rows(rows.quotes, settings.thresholds) if rows.quotes else None
    written = run_writes(batch, _writes(batch, rows, alerts, newest), newest=lambda: newest)
    result.alerts = alerts.num_rows
    result.phases_ms["write"] = ms_since(t3)
    result.phases_ms.setdefault("merge", 0)
    finish(batch, written, True, compactor)
    return True


def _writes(batch: BatchRun, rows: DriverBatch, alerts: pa.Table, newest: pa.Table | None,
            ) -> dict[str, Callable[[], None]]:
    """The driver's batch's writes, by table, not run yet (as stream.batch._planned_writes for Spark's)."""
    spark, settings, batch_id = batch.spark, batch.settings, batch.batch_id
    writes: dict[str, Callable[[], None]] = {}
    if rows.quotes:
        history = quote_rows(rows.quotes, batch_id, settings.thresholds)
        writes["quotes"] = lambda: delta_rs.append_rows(batch.path("quotes"), history, batch_id)
        writes["symbol_state"] = lambda: merge_state(spark, settings.lake, newest, batch_id)
    if rows.orders:
        writes["alerts"] = lambda: delta_rs.append_rows(batch.path("alerts"), alerts, batch_id)
    return writes
