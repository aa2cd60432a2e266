"""The few lines of a driver batch that neither the driver's parse nor its quarantine rules are
certain of, through Spark's own parse (transforms.parsing), which alone decides them: as columns
for the valid ones, quarantine rows for the others.

Why a plan of its own, warmed when the stream starts: a line Python's JSON reader refuses but
Spark's accepts (single quotes, content after the object) is rare, and sending its whole batch to
Spark's plan made that batch many times slower, the first such plan of a process most (measured:
docs/performance.md, row 'the few lines a driver batch is not certain of'). Parsing only
these lines through Spark is one small job, and the first batch that needs it finds its plan's code
already compiled: `warm` runs it once in the background at the stream's start.
"""

from __future__ import annotations

import threading

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession

from market_spread.kernel.layout import ORDER_TYPES, QUOTE_TYPES, ColumnBatch
from market_spread.kernel.line_rows import QUARANTINE
from market_spread.runtime.spark import in_background
from market_spread.transforms import parsing

# A line only Spark can judge (single quotes): what the warm-up parses.
_WARM_LINES = pa.table(
    {
        "stream": ["quotes", "orders"],
        "value": ["{'symbol': 'X'}", "{'order_id': 'X'}"],
        "source_file": ["warm-up", "warm-up"],
    }
)


def parse(spark: SparkSession, lines: pa.Table, symbols: parsing.Universe) -> tuple[ColumnBatch, pa.Table]:
    """`lines` (stream, value, source_file) through Spark's parse: the valid ones as columns, the
    others as quarantine rows (stream, raw, reason, source_file) with Spark's reasons."""
    frame = spark.createDataFrame(
        pa.table({"stream": lines["stream"], "line": lines["value"], "source_file": lines["source_file"]})
    )
    parsed = parsing.parse_lines(frame, symbols).toArrow()
    valid = pc.is_null(parsed["reason"])
    is_quote = pc.equal(parsed["stream"], "quotes")
    quotes = parsed.filter(pc.and_(valid, is_quote))
    orders = parsed.filter(pc.and_(valid, pc.invert(is_quote)))
    bad = parsed.filter(pc.invert(valid))
    columns = ColumnBatch(
        _columns(quotes, QUOTE_TYPES), _columns(orders, ORDER_TYPES), pc.unique(parsed["source_file"]).to_pylist()
    )
    quarantine = pa.table(
        {"stream": bad["stream"], "raw": bad["line"], "reason": bad["reason"], "source_file": bad["source_file"]}
    ).cast(pa.schema([(n, pa.string()) for n in QUARANTINE]))
    return columns, quarantine


def _columns(rows: pa.Table, types: dict[str, pa.DataType]) -> pa.Table:
    """Spark's parsed rows in the driver's columns (the time as microseconds since the epoch)."""
    time = pc.cast(rows["event_time"], pa.int64())
    return pa.table({name: time if name == "time" else pc.cast(rows[name], kind) for name, kind in types.items()})


class Warm:
    """The warm-up of `parse`, once per stream, on a thread of its own; `wait` before the first use."""

    def __init__(self, spark: SparkSession, symbols: parsing.Universe) -> None:
        self._done = threading.Event()
        thread = threading.Thread(target=self._run, args=(spark, symbols), name="warm-spark-parse", daemon=True)
        thread.start()

    def _run(self, spark: SparkSession, symbols: parsing.Universe) -> None:
        try:
            in_background(spark)  # not counted as a job of the batch it overlaps
            parse(spark, _WARM_LINES, symbols)
        except Exception:  # noqa: BLE001 - a failed warm-up costs only its time: the real parse says what fails
            pass
        finally:
            self._done.set()

    def wait(self, timeout: float = 60.0) -> None:
        self._done.wait(timeout)
