"""Alert rows as the alerts topic's records (contract 4b), pure over Arrow: key = the symbol in
UTF-8, value = one JSON object with the alerts table's columns under their names (decimals as
strings exactly as stored, times ISO-8601 UTC with microseconds ending in `Z`), and a `batch_id`
header in UTF-8 digits."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # Arrow writes a microsecond timestamp's seconds with 6 decimals


@dataclass(frozen=True)
class Record:
    key: bytes
    value: bytes
    batch_id: int

    @property
    def headers(self) -> list[tuple[str, bytes]]:
        return [("batch_id", str(self.batch_id).encode("ascii"))]


def as_text(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A column as its value in the record: decimals and times as text, the rest as they are."""
    kind = column.type
    if pa.types.is_decimal(kind):
        return pc.cast(column, pa.string())  # every digit of the scale, as stored: 189.12000000
    if pa.types.is_timestamp(kind):
        utc = column if kind.tz == "UTC" else pc.cast(column, pa.timestamp(kind.unit, tz="UTC"))
        return pc.strftime(pc.cast(utc, pa.timestamp("us", tz="UTC")), format=TIME_FORMAT)
    return column


def records(rows: pa.Table) -> list[Record]:
    """One record per alert row, in the rows' order."""
    shown = pa.table({name: as_text(rows.column(name)) for name in rows.column_names})
    values = shown.to_pylist()
    return [
        Record(
            str(row["symbol"]).encode("utf-8"), json.dumps(row, separators=(",", ":")).encode("utf-8"), row["batch_id"]
        )
        for row in values
    ]


def transactional_id(table_id: str) -> str:
    """The producer's transactional id, and the consumer group holding the published position: one
    per alerts table (its Delta id), so a restarted stream fences the one it replaces."""
    return f"market-spread-alerts-{table_id}"
