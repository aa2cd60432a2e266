"""The lake's tables as one stream holds them: kept open in delta-rs (lake.commits), committed to
with the batch's mark, read fresh, checkpointed and compacted off the batch's path.

A `LakeTables` belongs to the stream that made it (its BatchProcessor), not to the process: two
streams in one process (tests) keep their own tables. Its `marks()` read, per table, the last batch
the stream committed there (Delta's txn version for the stream's id), once when a stream starts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from market_spread.lake import protocol, spark_commits
from market_spread.lake import tables as lake_mod
from market_spread.lake.commits import (
    BatchMark,
    ConstraintViolated,
    KeptTable,
    NeedsSpark,
    Upkeep,
    no_hooks,
)
from market_spread.lake.deltalog import marked_version, max_from_stats
from market_spread.lake.protocol import DELTA_RS, Route, reader_features, route
from market_spread.runtime.lease import prove

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from market_spread.runtime.storage import Location

# The stream id of batches processed outside a streaming query (tests, tools); a query's own id is
# read from its checkpoint (stream.query).
DEFAULT_STREAM_ID = "market-spread"

Guard = Callable[[], object] | None  # the lease's check: its proof is asked again after the commit


def records_changes(table: Any) -> bool:
    """Whether the delta-rs table has Change Data Feed on (its commits must say what changed)."""
    return str(table.metadata().configuration.get("delta.enableChangeDataFeed", "false")).lower() == "true"


class LakeTables:
    """The Delta tables of one lake that one stream commits to and reads."""

    def __init__(
        self, lake: str | Location, stream_id: str = DEFAULT_STREAM_ID, spark: "SparkSession | None" = None
    ) -> None:
        self.lake, self.stream_id, self.spark = str(lake), stream_id, spark
        self.upkeep = Upkeep()
        self._kept: dict[str, KeptTable] = {}
        self._lock = threading.Lock()
        self._writers: ThreadPoolExecutor | None = None

    @property
    def write_pool(self) -> ThreadPoolExecutor:
        """The threads the stream's batches write these tables on, side by side (lake.writes.run_all)."""
        with self._lock:
            if self._writers is None:
                from market_spread.lake.writes import write_pool

                self._writers = write_pool()
            return self._writers

    def mark(self, batch_id: int) -> BatchMark:
        return BatchMark(self.stream_id, batch_id)

    def path(self, name: str) -> str:
        return lake_mod.table_path(self.lake, name)

    def kept(self, name: str) -> KeptTable:
        with self._lock:
            kept = self._kept.get(name)
            if kept is None:
                kept = self._kept[name] = KeptTable(self.path(name), self.upkeep)
            return kept

    def read(self, name: str) -> Any:
        """The delta-rs table `name` with every commit this process made to it (for reads)."""
        return self.kept(name).current()

    # -- commits ----------------------------------------------------------------------------------
    def append(self, name: str, rows: pa.Table, batch_id: int, guard: Guard = None) -> int:
        """Append `rows` (the table's columns) in one commit marked with the batch; how many.
        No rows, no commit: a replay computes the same nothing again."""
        if rows.num_rows == 0:
            return 0
        from deltalake import write_deltalake

        mark, kept = self.mark(batch_id), self.kept(name)
        if self.route(name).writer == DELTA_RS:
            try:
                kept.commit(
                    lambda table: write_deltalake(
                        table,
                        rows,
                        mode="append",
                        commit_properties=mark.commit_properties(),
                        post_commithook_properties=no_hooks(),
                    ),
                    mark,
                    guard,
                )
                return rows.num_rows
            except NeedsSpark:  # a feature turned on since the route was read: Spark's turn
                self.route(name, fresh=True)
            except ConstraintViolated:
                raise self._violation(name, rows, batch_id) from None
        self._spark_append(name, rows, mark, guard)
        return rows.num_rows

    def merge(
        self,
        name: str,
        source: pa.Table,
        batch_id: int,
        condition: str,
        spark_condition: str,
        guard: Guard = None,
        replace: Callable[[pa.Table], pa.Table] | None = None,
    ) -> None:
        """Upsert `source` (the table's columns, one row per key `symbol`) in one MERGE marked with the
        batch: a stored row is updated where `condition` (DataFusion SQL over `s.` source and `t.`
        target; `spark_condition` the same in Spark SQL) holds, a new key inserted. delta-rs's MERGE,
        so a table with Change Data Feed records the updates; Spark's for a table delta-rs cannot write.

        `replace` (stored rows -> the table's new rows, the same upsert computed in Arrow): where the
        table records no changes, its rows are overwritten with it in one commit instead, which
        costs a fraction of the MERGE (docs/performance.md, row '`symbol_state` without Change Data Feed overwritten').
        Decided at each try, on the table as it stands then (a user may enable Change Data Feed)."""
        from deltalake import write_deltalake

        mark, kept = self.mark(batch_id), self.kept(name)

        def merge(table: Any) -> None:
            if replace is not None and not records_changes(table):
                rows, before = replace(kept.rows(table, lambda: self._rows(name, table))), table.version()
                write_deltalake(
                    table,
                    rows,
                    mode="overwrite",
                    commit_properties=mark.commit_properties(),
                    post_commithook_properties=no_hooks(),
                )
                if table.version() == before + 1:  # not rebased past another writer's commit
                    kept.overwritten(table, rows)
                return
            (
                table.merge(
                    source,
                    "t.symbol = s.symbol",
                    source_alias="s",
                    target_alias="t",
                    streamed_exec=False,
                    commit_properties=mark.commit_properties(),
                    post_commithook_properties=no_hooks(),
                )
                .when_matched_update_all(predicate=condition)
                .when_not_matched_insert_all()
                .execute()
            )

        if self.route(name).writer == DELTA_RS:
            try:
                kept.commit(merge, mark, guard)
                return
            except NeedsSpark:  # a feature turned on since the route was read: Spark's turn
                self.route(name, fresh=True)
            except ConstraintViolated:
                raise self._violation(name, source, batch_id) from None
        self.spark_merge(name, self._session(kept).createDataFrame(source), batch_id, spark_condition, guard)

    def spark_merge(self, name: str, source: "DataFrame", batch_id: int, condition: str, guard: Guard = None) -> None:
        """The same MERGE through Spark, marked with the batch (lake.spark_commits)."""
        kept = self.kept(name)
        source = self.widened(name, source)
        proof = prove(guard)
        spark_commits.merge(source, kept.path, self.mark(batch_id), condition)
        kept.mark_stale()
        proof.still_held()

    def _violation(self, name: str, rows: pa.Table, batch_id: int) -> ConstraintViolated:
        """The one-line error of rows that break the table's rules, naming the CHECK constraints they
        break (evaluated by Spark, whose SQL the constraints are written in, when it is at hand)."""
        self.kept(name).refresh()
        rules = self.constraints(name)
        broken = sorted(rules)
        if self.spark is not None and rules:
            broken = spark_commits.broken(self.spark.createDataFrame(rows), rules) or broken
        return spark_commits.violated(name, batch_id, {n: rules[n] for n in broken})

    def route(self, name: str, fresh: bool = False) -> Route:
        """How table `name` is committed to and read now (lake.protocol), from its protocol as this
        process last read it (`fresh`: read from the log first); said once each time it changes.
        FeatureNotHonoured when no library can write one of its features."""
        import sys

        kept = self.kept(name)
        chosen = route(kept.refresh() if fresh else kept.current(), name, kept.path)
        if chosen != kept.route:
            if kept.route is not None or chosen.writer != DELTA_RS:
                print(
                    f"market-spread stream: {name}: commits through {chosen.writer}, reads through {chosen.reader}"
                    + (f" (its features {chosen.why})" if chosen.why else ""),
                    file=sys.stderr,
                    flush=True,
                )
            kept.route = chosen
        return chosen

    def routes(self, names: tuple[str, ...] = lake_mod.TABLES) -> dict[str, Route]:
        """Every table's route read fresh from its log: run before a batch's first commit, so a table
        no library can write stops the stream before the batch commits anything. Side by side: on S3
        each read of a log is a request."""
        present = [name for name in names if name in self._kept or lake_mod.is_delta_table(self.path(name))]
        return dict(zip(present, self.write_pool.map(lambda name: self.route(name, fresh=True), present)))

    def constraints(self, name: str) -> dict[str, str]:
        """Table `name`'s CHECK constraints (name -> SQL) as this process last read its log."""
        return protocol.constraints(self.kept(name).current())

    def query(self, name: str, sql: str) -> pa.Table:
        """The rows of `sql` over table `name` (written `{t}` in it) as Arrow: delta-rs's query
        engine where it reads every feature of the table, else Spark (type widening)."""
        kept = self.kept(name)
        table = kept.current()
        if self.route(name).reader == DELTA_RS:
            from deltalake import QueryBuilder

            return pa.table(QueryBuilder().register("t", table).execute(sql.format(t="t")))
        spark = self._session(kept)
        view = f"market_spread_{name}_{threading.get_ident()}"  # a view per thread: reads run side by side
        spark.read.format("delta").load(kept.path).createOrReplaceTempView(view)
        try:
            return spark.sql(sql.format(t=view)).toArrow()
        finally:
            spark.catalog.dropTempView(view)

    def _rows(self, name: str, table: Any) -> pa.Table:
        """Every row of table `name` (the delta-rs `table` as it stands), in the declared schema."""
        from market_spread.runtime.storage import read_rows

        schema = lake_mod.arrow_schema(name)
        return read_rows(table, schema.names).cast(schema)

    def _session(self, kept: KeptTable) -> "SparkSession":
        if self.spark is None:
            raise NeedsSpark(
                f"{kept.path}: the table asks for a feature delta-rs cannot write, and no Spark session is at hand"
            )
        return self.spark

    def widened(self, name: str, frame: "DataFrame") -> "DataFrame":
        """`frame` cast up to the table's columns where a user widened one (type widening)."""
        kept = self.kept(name)
        if "typeWidening" not in reader_features(kept.current()):
            return frame
        return spark_commits.widened(frame, kept.path)

    def _spark_append(self, name: str, rows: pa.Table, mark: BatchMark, guard: Guard) -> None:
        proof = prove(guard)
        kept = self.kept(name)
        frame = self.widened(name, self._session(kept).createDataFrame(rows))
        rules = self.constraints(name)
        broken = spark_commits.broken(frame, rules) if rules else []
        if broken:  # said before a Spark job fails on them, whose task errors would fill stderr
            raise spark_commits.violated(name, mark.batch_id, {n: rules[n] for n in broken})
        try:
            spark_commits.append(frame, kept.path, mark)
        except Exception as exc:  # noqa: BLE001 - a broken constraint said in one line; the rest raised as it is
            if "DELTA_VIOLATE_CONSTRAINT" not in str(exc):
                raise
            raise self._violation(name, rows, mark.batch_id) from None
        kept.mark_stale()
        proof.still_held()

    def compact(self, name: str, batch_id: int, target_bytes: int, guard: Guard = None) -> Future:
        """Bin-pack the table's files under `target_bytes` (delta-rs's compaction: one commit that
        changes no row, tagged with the table's last batch) on the upkeep thread; the future gives
        (delta-rs's metrics, milliseconds). It holds the table's lock until its commit, so the next
        commit to that table (only) comes after it; `guard` runs right before it."""
        return self.upkeep.submit("compact", self.path(name), self._compact, name, batch_id, target_bytes, guard)

    def _compact(self, name: str, batch_id: int, target_bytes: int, guard: Guard) -> tuple[dict[str, Any], int]:
        import time

        from deltalake import CommitProperties

        began, kept = time.perf_counter(), self.kept(name)
        with kept.lock:
            table = kept.current()
            proof = prove(guard)
            if self.route(name).writer != DELTA_RS:  # the writer rule holds for compaction too
                metrics = spark_commits.optimize(self._session(kept), kept.path)
                kept.mark_stale()
            else:
                metrics = table.optimize.compact(
                    target_size=target_bytes,
                    post_commithook_properties=no_hooks(),
                    commit_properties=CommitProperties(custom_metadata={"userMetadata": lake_mod.batch_tag(batch_id)}),
                )
                kept.after_commit()
            proof.still_held()
        return metrics, int((time.perf_counter() - began) * 1000)

    # -- what this process knows ------------------------------------------------------------------
    def forget(self) -> None:
        """Drop every kept table (a stream's start, a failed batch): each is opened from its log again."""
        self.upkeep.settle()
        with self._lock:
            kept, self._kept = list(self._kept.values()), {}
        for table in kept:
            table.forget()

    def settle(self) -> None:
        self.upkeep.settle()

    def marks(self, names: tuple[str, ...] = lake_mod.TABLES) -> dict[str, int]:
        """Per table, the last batch this stream committed there (-1 for none): Delta's txn version
        for the stream's id; for a table no commit of this release marked, the highest `batch_id`
        of its files' statistics (lakes written before the txn marks)."""
        out = {}
        for name in names:
            if not lake_mod.is_delta_table(self.path(name)):
                out[name] = -1
                continue
            marked = marked_version(self.read(name), self.stream_id)
            if marked is None:
                known, highest = max_from_stats(self.path(name), "batch_id")
                marked = highest if known and highest is not None else None
            out[name] = -1 if marked is None else int(marked)
        return out
