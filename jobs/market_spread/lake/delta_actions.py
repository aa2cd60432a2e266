"""Delta log actions as the driver's commits write them (lake.log_writer): add and remove actions,
commitInfo with the batch tag, and a data file's statistics. Pure: no I/O.

The statistics are exact bounds: decimals in their own digits (never through a float), times in
milliseconds rounded outwards (down for a minimum, up for a maximum: a reader that skips files by
them never skips a row), strings longer than Delta keeps (or not UTF-8) left out.
"""
from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from market_spread.lake.tables import batch_tag

ENGINE = "market-spread"
STATS_STRING_LIMIT = 32  # Delta's own writers keep string statistics to 32 characters


def _stat(value: Any, upper: bool) -> str:
    """One statistic as JSON: decimals exact (no float), times in milliseconds rounded outwards."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        rest = value.microsecond % 1000
        if rest:
            value += timedelta(microseconds=(1000 - rest) if upper else -rest)
        return json.dumps(value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z")
    if isinstance(value, date):
        return json.dumps(value.isoformat())
    return json.dumps(value)


def file_stats(rows: pa.Table) -> str:
    """The `stats` of an add action for a file holding `rows`: count, and per column nulls, min, max.

    Minimum and maximum are left out where they would not be exact bounds: strings longer than Delta
    keeps, and columns with no value."""
    lows, highs, nulls = [], [], []
    for name, column in zip(rows.column_names, rows.columns):
        nulls.append(f"{json.dumps(name)}:{column.null_count}")
        if column.null_count == len(column):
            continue
        bounds = pc.min_max(column)
        try:
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
        except UnicodeDecodeError:  # a quarantined raw line need not be UTF-8: no bounds for it
            continue
        if isinstance(low, str) and max(len(low), len(high)) > STATS_STRING_LIMIT:
            continue
        lows.append(f"{json.dumps(name)}:{_stat(low, upper=False)}")
        highs.append(f"{json.dumps(name)}:{_stat(high, upper=True)}")
    return (f'{{"numRecords":{rows.num_rows},"minValues":{{{",".join(lows)}}},'
            f'"maxValues":{{{",".join(highs)}}},"nullCount":{{{",".join(nulls)}}}}}')


def add_action(path: str, partition: dict[str, str | None], size: int, stats: str, now_ms: int) -> dict:
    return {"add": {"path": path, "partitionValues": partition, "size": size, "modificationTime": now_ms,
                    "dataChange": True, "stats": stats}}


def remove_action(path: str, partition: dict[str, str | None], size: int, now_ms: int) -> dict:
    return {"remove": {"path": path, "dataChange": True, "deletionTimestamp": now_ms, "extendedFileMetadata": True,
                       "partitionValues": partition, "size": size}}


def commit_info(operation: str, parameters: dict[str, str], metrics: dict[str, int], read_version: int,
                batch_id: int, now_ms: int) -> dict:
    """commitInfo, first in the commit as Spark writes it, tagged with the batch (lake.tables.batch_tag)."""
    return {"commitInfo": {"timestamp": now_ms, "operation": operation, "operationParameters": parameters,
                           "readVersion": read_version, "isolationLevel": "Serializable",
                           "isBlindAppend": operation == "WRITE", "engineInfo": ENGINE, "clientVersion": ENGINE,
                           "operationMetrics": {k: str(v) for k, v in metrics.items()},
                           "userMetadata": batch_tag(batch_id)}}


def commit_text(actions: list[dict]) -> bytes:
    return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode("utf-8")


def partition_value(value: Any) -> str | None:
    return None if value is None else value.isoformat() if isinstance(value, (date, datetime)) else str(value)


def partition_folder(partition: dict[str, str | None]) -> str:
    return "".join(f"{k}={'__HIVE_DEFAULT_PARTITION__' if v is None else v}/" for k, v in partition.items())
