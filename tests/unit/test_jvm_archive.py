"""The driver JVM's class-data-sharing archive: which options a session's JVM gets."""

from __future__ import annotations

from market_spread.runtime import jvm_archive


def test_the_archive_is_mapped_only_when_it_exists_and_can_be_turned_off(tmp_path, monkeypatch):
    archive = tmp_path / "driver.jsa"
    monkeypatch.setenv(jvm_archive.VARIABLE, str(archive))
    monkeypatch.delenv(jvm_archive.DUMP_VARIABLE, raising=False)
    assert jvm_archive.java_options([]) == "", "no archive yet: the JVM starts as it always did"
    archive.write_bytes(b"")
    assert jvm_archive.java_options([]) == "", "an empty file is no archive"
    archive.write_bytes(b"x")
    assert jvm_archive.java_options([]).startswith(f"-XX:SharedArchiveFile={archive} ")
    assert "-Xlog:cds=off" in jvm_archive.java_options([]), "the JVM's notes stay out of command output"
    monkeypatch.setenv(jvm_archive.VARIABLE, "off")
    assert jvm_archive.archive_path([]) is None and jvm_archive.java_options([]) == ""
    monkeypatch.setenv(jvm_archive.DUMP_VARIABLE, str(tmp_path / "new.jsa"))
    assert jvm_archive.java_options([]).startswith(f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'} ")


def test_the_default_archive_is_keyed_by_java_spark_and_jars(monkeypatch, tmp_path):
    monkeypatch.delenv(jvm_archive.VARIABLE, raising=False)
    monkeypatch.setenv("MARKET_SPREAD_HOME", str(tmp_path))
    one = jvm_archive.archive_path(["/x/delta-spark_2.13-4.4.1.jar"])
    assert one.parent == tmp_path / ".cache" / "jvm" and one.suffix == ".jsa"
    assert jvm_archive.archive_path(["/y/delta-spark_2.13-4.4.1.jar"]) == one, "the folder of the JARs does not matter"
    assert jvm_archive.archive_path(["/x/delta-spark_2.13-4.5.0.jar"]) != one, "other JARs: another archive"


def test_the_quick_jit_is_for_short_processes_unless_told(monkeypatch):
    from market_spread.runtime.spark import QUICK_JIT, jit_options

    monkeypatch.delenv("MARKET_SPREAD_JIT", raising=False)
    assert jit_options(long_running=False) == QUICK_JIT and "TieredStopAtLevel=1" in QUICK_JIT
    assert jit_options(long_running=True) == "", "a continuous stream keeps the optimising compiler"
    monkeypatch.setenv("MARKET_SPREAD_JIT", "full")
    assert jit_options(long_running=False) == ""
    monkeypatch.setenv("MARKET_SPREAD_JIT", "quick")
    assert jit_options(long_running=True) == QUICK_JIT
    monkeypatch.setenv("MARKET_SPREAD_JIT", "fast")
    import pytest

    from market_spread.errors import SettingError

    with pytest.raises(SettingError, match="auto, quick or full"):
        jit_options(long_running=False)


def test_a_big_landing_backlog_counts_its_feed_files_only(tmp_path):
    from market_spread.stream.query import landing_backlog_bytes

    assert landing_backlog_bytes(tmp_path / "nowhere") == 0
    (tmp_path / "quotes").mkdir()
    (tmp_path / "quotes" / "q1.jsonl").write_bytes(b"x" * 100)
    (tmp_path / "quotes" / ".q2.jsonl.tmp").write_bytes(b"x" * 1000)  # not yet landed: not read
    (tmp_path / "quotes" / "notes.txt").write_bytes(b"x" * 1000)
    (tmp_path / "quotes" / "_hidden.jsonl").write_bytes(b"x" * 1000)
    (tmp_path / "orders").mkdir()
    (tmp_path / "orders" / "o1.jsonl").write_bytes(b"x" * 50)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.jsonl").write_bytes(b"x" * 1000)
    assert landing_backlog_bytes(tmp_path) == 150
