"""`sql` on delta-rs's own engine: DataFusion through `deltalake.QueryBuilder`, no JVM.

Each table of the lake is registered under its name and the one query (lake.sql_route decides
which text may come here) runs in this process; its rows come back as Arrow and are given the
forms Spark's rows have (naive UTC datetimes, exact decimals), so lake.query renders both alike.

DataFusion is told to read SQL as Spark does where it can: '...' and "..." are strings, `...`
quotes a name, unquoted names are case-insensitive, 1.5 is a decimal, NULLs sort first ascending
and last descending. Its errors are sorted by their text: a misspelt table names the lake's tables, an
unknown column is the user's to fix (`Failed(spark_may_run=False)`); anything else (a parse error,
a feature or function DataFusion lacks, a table delta-rs cannot read) Spark may run.
"""

from __future__ import annotations

import re
from typing import Any

from market_spread.errors import MarketSpreadError
from market_spread.runtime.storage import Location, open_delta

SESSION = {
    "datafusion.sql_parser.dialect": "databricks",  # Spark's quoting: "..." a string, `...` a name
    "datafusion.sql_parser.enable_ident_normalization": "true",  # `FROM Alerts` as in Spark
    "datafusion.sql_parser.default_null_ordering": "nulls_min",  # NULLS FIRST when ascending, as in Spark
    "datafusion.sql_parser.parse_float_as_decimal": "true",  # 1.5 a DECIMAL(2,1), as in Spark
}
# DataFusion names a table it cannot find with its catalog and schema: "datafusion.public.alertz".
NOT_FOUND = re.compile(r"table '(?P<name>[^']*)' not found")
OWN_SCHEMA = "datafusion.public."
# The user's mistakes: DataFusion's error is the answer, Spark would only say it slower.
USER_ERRORS = ("Schema error:",)
# What the note says when Spark runs what DataFusion did not (else DataFusion's first words).
WHY_SPARK = (
    (re.compile(r"ParserError|TokenizerError"), "syntax DataFusion does not parse"),
    (re.compile(r"not implemented", re.I), "a feature DataFusion lacks"),
    (re.compile(r"Invalid function '(?P<name>[^']+)'"), "DataFusion has no {name}()"),
    (NOT_FOUND, "a table by path or catalog is Spark's to find"),
)


class NoSuchTable(MarketSpreadError):
    """The query names a table the lake does not hold."""

    def __init__(self, name: str, tables: list[str]) -> None:
        super().__init__(f"no table '{name}' in the lake; its tables: {', '.join(tables)}")


class Failed(MarketSpreadError):
    """DataFusion did not run the query: its error on one line, and whether Spark may run it."""

    def __init__(self, message: str, spark_may_run: bool) -> None:
        super().__init__(message)
        self.spark_may_run = spark_may_run


def one_line(text: str, limit: int = 400) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def classify(exc: BaseException, tables: list[str]) -> MarketSpreadError:
    """The error to report for DataFusion's (or delta-rs's) `exc`."""
    text = str(exc).strip() or type(exc).__name__
    missing = NOT_FOUND.search(text)
    if missing and missing["name"].startswith(OWN_SCHEMA) and "." not in missing["name"][len(OWN_SCHEMA) :]:
        return NoSuchTable(missing["name"][len(OWN_SCHEMA) :], tables)
    # A qualified name (delta.`/path`, spark_catalog.default.t) is Spark's to find.
    return Failed(one_line(text), spark_may_run=not text.startswith(USER_ERRORS))


def why_spark(failed: Failed) -> str:
    """Why Spark runs what DataFusion did not, in a few words."""
    for pattern, reason in WHY_SPARK:
        if found := pattern.search(str(failed)):
            return reason.format(**found.groupdict())
    return f"DataFusion: {one_line(str(failed), 100)}"


def _plain(column: Any) -> Any:
    """A column in the forms of Spark's rows: timestamps naive UTC in microseconds (Arrow keeps UTC
    instants: the cast drops the zone and keeps the instant), durations in microseconds (Python's
    own types, where nanoseconds would bring pandas' in)."""
    import pyarrow as pa

    if pa.types.is_timestamp(column.type):
        return column.cast(pa.timestamp("us"), safe=False)
    if pa.types.is_duration(column.type):
        return column.cast(pa.duration("us"), safe=False)
    return column


def rows(table: Any) -> tuple[list[str], list[tuple]]:
    """(column names, rows as tuples) of an Arrow table, duplicate names kept."""
    values = [_plain(column).to_pylist() for column in table.columns]
    return list(table.column_names), (list(zip(*values)) if values else [])


def run(lake: Location, tables: list[str], query: str) -> tuple[list[str], list[tuple]]:
    """Run `query` over the lake's `tables` on DataFusion: (column names, rows).
    NoSuchTable or Failed when it does not run."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    try:
        builder = QueryBuilder(SESSION)
        for name in tables:
            builder.register(name, open_delta(lake / name))
        # Read as pyarrow's own reader: `pa.table()` of DataFusion's result would import pandas.
        result = pa.RecordBatchReader.from_stream(builder.execute(query)).read_all()
    except Exception as exc:  # noqa: BLE001 - DataFusion's and delta-rs's errors, sorted by their text
        raise classify(exc, tables) from None
    return rows(result)
