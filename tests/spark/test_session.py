"""The session's JVM: what build_session asked for is what the driver JVM runs with."""

from __future__ import annotations

import functools
import shutil
import subprocess
import threading
import time

import pytest

from market_spread.runtime.jvm_archive import archive_path
from market_spread.runtime.spark import batch_jobs, in_background, session_jars, spark_jobs_so_far
from market_spread.stream.query import LOCAL_CHECKPOINT_WRITER
from tests.helpers.cli import market_spread


def test_the_driver_jvm_maps_the_class_archive_setup_wrote(spark):
    archive = archive_path(session_jars())
    if archive is None or not archive.is_file():
        pytest.skip("no class archive (make setup writes it; MARKET_SPREAD_CDS_ARCHIVE=off disables it)")
    jvm = spark.sparkContext._jvm
    args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in args
    # Mapped, not only asked for (the JVM ignores an archive that does not match it): the archive
    # is among the files mapped into the JVM's memory.
    jcmd = shutil.which("jcmd")
    if jcmd is None:
        pytest.skip("no jcmd to ask the JVM what it mapped")
    pid = jvm.java.lang.ProcessHandle.current().pid()
    info = subprocess.run([jcmd, str(pid), "VM.info"], capture_output=True, text=True, timeout=60).stdout
    assert [line for line in info.splitlines() if line.endswith(str(archive)) and "-XX:" not in line]
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


def test_dataframe_calls_capture_no_python_call_site(spark, monkeypatch):
    """PySpark's call-site capture (on by default) cost four round trips to the JVM and a failed
    `import IPython` on every DataFrame and Column call: most of a small batch's Python side
    (docs/performance.md). The session turns it off."""
    from pyspark.errors import utils as error_utils
    from pyspark.sql import functions as F

    def captured(depth: int) -> str:
        raise AssertionError("a call site was captured")

    monkeypatch.setattr(error_utils, "_capture_call_site", captured)
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert spark.range(3).select((F.col("id") + 1).alias("x")).where(F.col("x") > 1).count() == 2


def test_a_damaged_class_archive_is_set_aside_and_the_command_still_runs(tmp_path):
    """A truncated archive crashes the JVM at start (SIGBUS): the command moves it aside and starts
    without it, with a warning, instead of failing."""
    import os

    good = archive_path(session_jars())
    damaged = tmp_path / "driver.jsa"
    damaged.write_bytes((good.read_bytes()[:50_000_000]) if good and good.is_file() else b"\0" * 4096)
    env = {**os.environ, "MARKET_SPREAD_CDS_ARCHIVE": str(damaged)}
    done = market_spread(
        "stream",
        "--landing",
        str(tmp_path / "in"),
        "--lake",
        str(tmp_path / "lake"),
        "--available-now",
        env=env,
        cwd=tmp_path,
        timeout=300,
    )  # the crash report lands there
    assert done.returncode == 0, done.stderr[-2000:]
    assert "did not start with the class archive" in done.stderr and "stopped" in done.stdout
    assert not damaged.exists() and (tmp_path / "driver.jsa.bad").exists()


def test_a_jvm_that_fails_for_another_reason_leaves_the_class_archive_in_place(tmp_path):
    """Only the archive's own failure sets it aside: a JVM that cannot start without it either (here
    a bad spark-submit option) fails the command and the archive is kept for the next start."""
    import os

    archive = tmp_path / "driver.jsa"
    archive.write_bytes(b"\0" * 4096)
    env = {
        **os.environ,
        "MARKET_SPREAD_CDS_ARCHIVE": str(archive),
        "PYSPARK_SUBMIT_ARGS": "--no-such-option pyspark-shell",
    }
    done = market_spread(
        "stream",
        "--landing",
        str(tmp_path / "in"),
        "--lake",
        str(tmp_path / "lake"),
        "--available-now",
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode != 0
    assert archive.is_file() and not (tmp_path / "driver.jsa.bad").exists()


def test_session_settings_are_restored_even_when_the_body_fails(spark):
    """One helper sets and restores the settings of a batch (its size's tuning, its commit tag): a
    failed batch must not leave its tag on the next commits, nor remove a value set before it."""
    from market_spread.lake.writes import USER_METADATA
    from market_spread.runtime.spark import session_settings

    session = spark.newSession()
    session.conf.set("spark.sql.shuffle.partitions", "3")
    with pytest.raises(RuntimeError):
        with session_settings(session, {"spark.sql.shuffle.partitions": "1", USER_METADATA: "x"}):
            assert session.conf.get("spark.sql.shuffle.partitions") == "1"
            assert session.conf.get(USER_METADATA) == "x"
            raise RuntimeError("the batch failed")
    assert session.conf.get("spark.sql.shuffle.partitions") == "3", "the earlier value, not Spark's default"
    assert session.conf.get(USER_METADATA, None) is None, "unset again"


def test_a_local_checkpoint_is_written_through_filesystem_and_one_on_s3_left_to_spark(spark, tmp_path):
    from market_spread.runtime.storage import location
    from market_spread.stream.query import CHECKPOINT_WRITER, LOCAL_CHECKPOINT_WRITER, use_checkpoint_writer

    try:
        use_checkpoint_writer(spark, location(tmp_path / "checkpoint"))
        assert spark.conf.get(CHECKPOINT_WRITER) == LOCAL_CHECKPOINT_WRITER
        # The class is Spark's own: a JVM look-up of the name finds it.
        assert spark.sparkContext._jvm.java.lang.Class.forName(LOCAL_CHECKPOINT_WRITER).getSimpleName() == (
            "FileSystemBasedCheckpointFileManager"
        )
        use_checkpoint_writer(spark, location("s3a://lake/_checkpoints/stream"))
        assert spark.conf.get(CHECKPOINT_WRITER, None) is None
    finally:
        spark.conf.unset(CHECKPOINT_WRITER)


def test_spark_writes_local_files_without_checksum_files(spark, tmp_path):
    """A `.crc` beside each file (and a `chmod` process for each of the two) is what the checksummed
    local file system costs: the checkpoint's logs through Spark's writer and a data file alike."""
    jvm = spark.sparkContext._jvm
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    log = jvm.org.apache.hadoop.fs.Path(str(tmp_path / "checkpoint" / "offsets" / "0"))
    writer = functools.reduce(getattr, LOCAL_CHECKPOINT_WRITER.split("."), jvm)  # the stream's, on a local disk
    manager = writer(log.getParent(), conf)
    manager.mkdirs(log.getParent())
    out = manager.createAtomic(log, True)
    out.write(bytearray(b"v1\n{}\n"))
    out.close()
    spark.range(3).write.parquet(str(tmp_path / "data"))
    written = [p.name for p in tmp_path.rglob("*") if p.is_file()]
    assert "0" in written and any(name.endswith(".parquet") for name in written)
    assert not [name for name in written if name.endswith(".crc")], written


def test_a_batch_counts_its_own_spark_jobs_not_the_background_ones(spark):
    first = spark_jobs_so_far(spark)
    background = threading.Thread(target=lambda: (in_background(spark), spark.range(10).collect()))
    background.start()
    background.join()
    before_own = spark_jobs_so_far(spark)
    spark.range(5).collect()  # this thread's jobs stay outside the group
    last = spark_jobs_so_far(spark)
    own = last - before_own
    assert before_own > first and own > 0
    # The group's jobs reach the status tracker through the listener bus, a moment after they start.
    deadline = time.monotonic() + 30
    while batch_jobs(spark, first, last) != own and time.monotonic() < deadline:
        time.sleep(0.1)
    assert batch_jobs(spark, first, last) == own
    assert batch_jobs(spark, None, last) is None
    assert batch_jobs(spark, last, last) == 0  # no job: the tracker is not asked
