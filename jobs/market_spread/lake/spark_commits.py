"""The commits a table gets from delta-spark when delta-rs cannot write it (lake.protocol): an append
and the state MERGE with the batch's mark, OPTIMIZE, and the checks of a user's CHECK constraints and
widened columns on the rows before they are committed. LakeTables (lake.lake_tables) decides when."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from market_spread.lake import tables as lake_mod
from market_spread.lake.commits import BatchMark, ConstraintViolated

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def append(frame: DataFrame, path: str, mark: BatchMark) -> None:
    """Append `frame` to the table at `path` in one commit marked with the batch (Delta's
    idempotent-write options: a replay of a committed batch writes nothing)."""
    (
        frame.write.format("delta")
        .mode("append")
        .options(**mark.spark_options())
        .option("userMetadata", lake_mod.batch_tag(mark.batch_id))
        .save(path)
    )


def merge(source: DataFrame, path: str, mark: BatchMark, condition: str) -> None:
    """Upsert `source` (one row per `symbol`) into the table at `path`: a stored row updated where
    `condition` holds, a new key inserted; marked with the batch (Delta's idempotent-DML settings)."""
    from delta.tables import DeltaTable

    from market_spread.lake.writes import USER_METADATA
    from market_spread.runtime.spark import session_settings

    columns: dict[str, str | Column] = {c: f"s.{c}" for c in source.columns}
    settings = {**mark.spark_conf(), USER_METADATA: lake_mod.batch_tag(mark.batch_id)}
    with session_settings(source.sparkSession, settings):
        (
            DeltaTable.forPath(source.sparkSession, path)
            .alias("t")
            .merge(source.alias("s"), "t.symbol = s.symbol")
            .whenMatchedUpdate(condition=condition, set=columns)
            .whenNotMatchedInsert(values=columns)
            .execute()
        )


def optimize(spark: Any, path: str) -> dict[str, Any]:
    """Delta's OPTIMIZE of the table at `path`; its file counts (numFilesAdded, numFilesRemoved)."""
    row = spark.sql(f"OPTIMIZE delta.`{path}`").first()
    return {} if row is None else row["metrics"].asDict()


def widened(frame: DataFrame, path: str) -> DataFrame:
    """`frame` cast to the column types of the table at `path` (a user widened one: Spark's append
    refuses a decimal narrower than its column, and its MERGE compares unlike structs)."""
    target = frame.sparkSession.read.format("delta").load(path).schema
    return frame.select([frame[f.name].cast(f.dataType) for f in target if f.name in frame.columns])


def broken(frame: DataFrame, rules: dict[str, str]) -> list[str]:
    """The constraints some row of `frame` breaks (false or null), by name. A whole count, not a
    `limit`: a limit's job can leave tasks running after it answers, which a stream stopping on the
    answer then reports as errors of their own."""
    return [n for n in sorted(rules) if frame.where(f"NOT coalesce(({rules[n]}), false)").count()]


def violated(name: str, batch_id: int, rules: dict[str, str]) -> ConstraintViolated:
    """The one-line error of a batch's rows that break `rules` (name -> SQL) of table `name`."""
    named = ", ".join(f"{n} ({rule})" for n, rule in rules.items()) or "an invariant of a column"
    return ConstraintViolated(
        f"{name}: rows of batch {batch_id} break the table's CHECK constraint {named}; "
        "nothing of them was committed: drop or change the constraint, or correct the input, "
        "then start the stream again"
    )
