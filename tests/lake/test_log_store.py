"""The log store every Spark session registers (runtime/java/PutIfAbsentLogStore.java, issue 64):
Spark publishes a commit only if its version is absent, on S3 and on a local disk, so a Spark commit
racing a delta-rs commit of the same version is made again on the next version instead of erasing
the other. Real Spark, a real S3 server, real delta-rs."""

from __future__ import annotations

import threading
import uuid

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from py4j.protocol import Py4JJavaError

from market_spread.runtime.spark import LOG_STORE, log_store_jars
from tests.helpers.holding_proxy import HoldingProxy
from tests.helpers.storage import spark_s3a_settings

SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.string())])
FIRST = "00000000000000000001.json"


def rows(writer: str, *ids: int) -> pa.Table:
    return pa.table({"id": list(ids), "writer": [writer] * len(ids)}, schema=SCHEMA)


def writers(table: pa.Table) -> dict[str, int]:
    """Rows per writer."""
    names = table.column("writer").to_pylist()
    return {name: names.count(name) for name in set(names)}


def engines(table: DeltaTable) -> dict[int, str]:
    """Which library made each commit: Spark's commitInfo names Apache Spark, delta-rs's its own."""
    return {c["version"]: str(c.get("engineInfo") or c.get("clientVersion")) for c in table.history()}


def test_every_session_registers_the_log_store_for_s3a_s3_and_file(spark, tmp_path) -> None:
    conf = spark.sparkContext.getConf()
    assert set(log_store_jars()) <= set(conf.get("spark.jars").split(","))  # so executors load it too
    jvm = spark._jvm
    delegating = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(tmp_path)).store()
    for scheme in ("s3a", "s3", "file"):
        assert conf.get(f"spark.delta.logStore.{scheme}.impl") == LOG_STORE
        uri = f"{scheme}://bucket/t/_delta_log/{FIRST}" if scheme != "file" else f"file:{tmp_path}/{FIRST}"
        store = delegating.getDelegate(jvm.org.apache.hadoop.fs.Path(uri))
        assert store.logStoreImpl().getClass().getName() == LOG_STORE, scheme


def test_a_spark_commit_racing_a_delta_rs_commit_on_s3_erases_nothing(spark, object_store) -> None:
    """Spark's PUT of version 1 is held in a proxy until delta-rs has committed version 1 on the
    server: the PUT is refused (412), and Spark commits again as version 2. Delta's default S3 store
    checked for the object before the PUT, and its unconditional PUT replaced delta-rs's commit."""
    bucket = f"race-{uuid.uuid4().hex[:8]}"
    object_store.client().create_bucket(Bucket=bucket)
    options = object_store.config.delta_rs_options()
    table = f"s3://{bucket}/t"
    write_deltalake(table, rows("first", 0), storage_options=options)
    host, port = object_store.endpoint.removeprefix("http://").split(":")
    spark_s3a_settings(spark, object_store.config)
    endpoint = f"fs.s3a.bucket.{bucket}.endpoint"  # this bucket alone through the proxy
    with HoldingProxy(host, int(port), f"PUT /{bucket}/t/_delta_log/{FIRST} ".encode()) as proxy:
        spark.conf.set(endpoint, proxy.endpoint)
        try:
            spark_write = Background(
                lambda: (
                    spark.range(3)
                    .selectExpr("id + 10 AS id", "'spark' AS writer")
                    .write.format("delta")
                    .mode("append")
                    .save(table.replace("s3://", "s3a://"))
                )
            )
            assert proxy.held.wait(60), "Spark's commit never reached the proxy"
            write_deltalake(table, rows("delta-rs", 20, 21), mode="append", storage_options=options)
            proxy.release.set()
            spark_write.join()
            assert proxy.answer is not None and b" 412 " in proxy.answer, proxy.answer
            read_by_spark = spark.read.format("delta").load(table.replace("s3://", "s3a://"))
            by_spark = writers(pa.Table.from_pylist([r.asDict() for r in read_by_spark.collect()]))
        finally:
            spark.conf.unset(endpoint)
    delta_rs = DeltaTable(table, storage_options=options)
    assert delta_rs.version() == 2
    made_by = engines(delta_rs)
    assert "Spark" not in made_by[1] and "Spark" in made_by[2], made_by
    assert writers(delta_rs.to_pyarrow_table()) == by_spark == {"first": 1, "delta-rs": 2, "spark": 3}


def test_on_disk_a_spark_commit_of_a_version_delta_rs_took_is_made_on_the_next(spark, tmp_path) -> None:
    """A Spark transaction reads version 0 and writes its files; delta-rs commits version 1; Spark's
    commit of version 1 fails in the store (the hard link finds the name taken), and Delta, finding
    no conflict with an append, makes it version 2: both commits in the log, every row readable."""
    table = tmp_path / "t"
    write_deltalake(str(table), rows("first", 0))
    delta = spark._jvm.org.apache.spark.sql.delta
    transaction = delta.DeltaLog.forTable(spark._jsparkSession, str(table)).startTransaction()
    files = transaction.writeFiles(spark.range(20, 22).selectExpr("id", "'spark' AS writer")._jdf)
    write_deltalake(str(table), rows("delta-rs", 10), mode="append")
    assert transaction.commit(files, getattr(getattr(delta, "DeltaOperations$ManualUpdate$"), "MODULE$")) == 2
    delta_rs = DeltaTable(str(table))
    made_by = engines(delta_rs)
    assert "Spark" not in made_by[1] and "Spark" in made_by[2], made_by
    assert writers(delta_rs.to_pyarrow_table()) == {"first": 1, "delta-rs": 1, "spark": 2}


def test_on_disk_concurrent_writers_of_one_version_make_exactly_one_commit(spark, tmp_path) -> None:
    """Writers in separate store instances (as in separate processes: no lock shared) publish the
    same version at once, version after version: each time exactly one succeeds, the others get
    FileAlreadyExistsException, and the file holds the winner's line. (Delta's HDFSLogStore, run so,
    let two writers succeed, the later erasing the earlier, in 5 versions of 200.)"""
    jvm = spark._jvm
    log = tmp_path / "_delta_log"
    log.mkdir()
    hadoop_conf = spark._jsparkSession.sessionState().newHadoopConf()
    count, versions = 4, 25
    start = threading.Barrier(count)
    won: dict[int, list[int]] = {version: [] for version in range(versions)}

    def publish(writer: int) -> None:
        store = jvm.market_spread.runtime.PutIfAbsentLogStore(hadoop_conf)
        for version in range(versions):
            lines = jvm.java.util.ArrayList()
            lines.add(f"writer {writer}")
            target = jvm.org.apache.hadoop.fs.Path(f"file:{log}/{version:020d}.json")
            start.wait()
            try:
                store.write(target, lines.iterator(), False, hadoop_conf)
                won[version].append(writer)
            except Py4JJavaError as error:
                assert error.java_exception.getClass().getName() == "java.nio.file.FileAlreadyExistsException"

    threads = [Background(publish, writer) for writer in range(count)]
    for thread in threads:
        thread.join()
    assert [len(winners) for winners in won.values()] == [1] * versions, won
    assert all((log / f"{v:020d}.json").read_text() == f"writer {won[v][0]}\n" for v in won)
    assert sorted(p.name for p in log.iterdir()) == [f"{v:020d}.json" for v in won]  # the losers' files gone


class Background(threading.Thread):
    """`work` on a thread of its own; join() re-raises what it raised."""

    def __init__(self, work, *args) -> None:
        super().__init__(daemon=True)
        self.work, self.args, self.error = work, args, None
        self.start()

    def run(self) -> None:
        try:
            self.work(*self.args)
        except BaseException as error:  # noqa: BLE001 - handed to the joining thread
            self.error = error

    def join(self, timeout: float | None = 120) -> None:
        super().join(timeout)
        assert not self.is_alive(), "the background work did not finish"
        if self.error is not None:
            raise self.error
