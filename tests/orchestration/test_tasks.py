"""What the task bodies do: the maintenance hold, `maintain` beside a live stream, and `dag.test()`
of the maintenance DAG on a real small lake (Airflow in a child process, see
tests/helpers/airflow.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from market_spread.orchestration import tasks
from market_spread.orchestration.jobs import cli_argv
from market_spread.orchestration.probes import small_file_counts
from tests.helpers.airflow import airflow_env
from tests.helpers.lake import read_table
from tests.helpers.paths import DAGS


def test_hold_expires() -> None:
    now = time.time()
    hold = json.dumps({"reason": "maintenance window", "until": now + 60})
    assert tasks.active_hold({tasks.HOLD_VARIABLE: hold}.get, now) == "maintenance window"
    assert tasks.active_hold({tasks.HOLD_VARIABLE: hold}.get, now + 61) is None
    assert tasks.active_hold({}.get, now) is None


# --------------------------------------------------------------------------------------------
# Maintenance helpers


def test_conflicts_are_retried_with_backoff() -> None:
    from market_spread.lake.maintenance import is_conflict, with_conflict_retries

    calls, sleeps, said = [], [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("[DELTA_CONCURRENT_APPEND] ConcurrentAppendException: Files were added")
        return "ok"

    assert with_conflict_retries(flaky, 5, "alerts: optimize", sleep=sleeps.append, out=said.append) == "ok"
    assert len(calls) == 3 and len(sleeps) == 2 and sleeps[1] > sleeps[0] * 0.5
    assert "write conflict" in said[0]
    assert not is_conflict(ValueError("no such table"))
    with pytest.raises(ValueError):
        with_conflict_retries(lambda: (_ for _ in ()).throw(ValueError("boom")), 5, "x", sleep=sleeps.append)


def test_maintain_rejects_bad_arguments(tmp_path) -> None:
    cli = cli_argv("maintain")
    proc = subprocess.run(cli + ["--lake", str(tmp_path), "--retain-hours", "0"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--retain-hours" in proc.stderr
    proc = subprocess.run(cli + ["--lake", str(tmp_path / "missing")], capture_output=True, text=True)
    assert proc.returncode == 2 and "lake not found" in proc.stderr


# --------------------------------------------------------------------------------------------
# A real small lake: maintain beside a "live stream", and dag.test() of maintenance


@pytest.fixture(scope="module")
def small_lake(spark, tmp_path_factory) -> Path:
    """The product's tables, written in several small appends (so there is something to compact)."""
    from market_spread.lake import tables as lake_mod

    lake = tmp_path_factory.mktemp("dag_lake") / "lake"
    lake_mod.ensure_tables(spark, lake)
    alerts = (
        "SELECT 'O-' || CAST(id AS STRING) AS order_id, CAST(id AS BIGINT) AS account, 'AAPL' AS symbol, "
        "'BUY' AS side, CAST(100 AS DECIMAL(18,8)) AS qty, CAST(189.13 AS DECIMAL(18,8)) AS price, "
        "TIMESTAMP'2026-11-23 14:30:00' AS order_time, 'no_market_data' AS reason, "
        "CAST(NULL AS DECIMAL(18,8)) AS bid, CAST(NULL AS DECIMAL(18,8)) AS offer, "
        "CAST(NULL AS TIMESTAMP) AS quote_time, current_timestamp() AS detected_at, {b}L AS batch_id, "
        "CAST(id AS BIGINT) AS order_seq, CAST(NULL AS BIGINT) AS quote_seq FROM range({b} * 10, {b} * 10 + 3)"
    )
    metrics = (
        "SELECT id AS batch_id, current_timestamp() AS started_at, current_timestamp() AS finished_at, "
        "0L AS quotes, 3L AS orders, 3L AS alerts, 0L AS quarantined, 3L AS input_lines, 0L AS late_symbols, "
        "1L AS parse_ms, 1L AS check_ms, 1L AS write_ms, 1L AS merge_ms FROM range(4)"
    )
    for b in range(4):  # four appends: four small files for OPTIMIZE to compact
        spark.sql(alerts.format(b=b)).coalesce(1).write.format("delta").mode("append").save(
            lake_mod.table_path(lake, "alerts")
        )
    spark.sql(metrics).coalesce(1).write.format("delta").mode("append").save(lake_mod.table_path(lake, "batch_metrics"))
    return lake


def _delta_versions(table: Path) -> list[str]:
    return sorted(p.name for p in (table / "_delta_log").glob("*.json"))


def test_maintain_beside_a_live_stream_only_vacuums(small_lake: Path) -> None:
    # A stand-in stream holding the writer lock the way `stream` does.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from market_spread.lake.lock import WriterLock
            lock = WriterLock(Path({str(small_lake)!r}) / "_stream.lock")
            lock.acquire()
            print("locked", flush=True)
            time.sleep(600)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = _delta_versions(small_lake / "alerts")
        proc = subprocess.run(
            [*cli_argv("maintain"), "--lake", str(small_lake), "--tables", "alerts", "--master", "local[1]"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "compaction skipped" in proc.stdout
        assert "alerts: vacuum:" in proc.stdout and "optimize" not in proc.stdout
        assert _delta_versions(small_lake / "alerts") == before  # no commit at all beside the writer
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait(10)


def test_maintain_applies_quote_retention_only_with_the_writer_lock(spark, place) -> None:
    """On local disk (the flock) and on S3 (the lease): the holder's lock keeps the retention out;
    once the lock is free (on local disk) the retention applies."""
    import datetime as dt

    from market_spread.lake import tables as lake_mod
    from market_spread.lake.maintenance import quote_cutoff
    from tests.helpers.storage import arg

    lake = place / "lake"
    lake_mod.ensure_tables(spark, lake)
    today = dt.datetime.now(dt.UTC).date()
    days = [today - dt.timedelta(days=n) for n in (0, 2, 40, 400)]
    quotes = " UNION ALL ".join(
        f"SELECT 'AAPL' AS symbol, CAST(1.1 AS DECIMAL(18,8)) AS bid, CAST(1.2 AS DECIMAL(18,8)) AS offer, "
        f"TIMESTAMP'{d} 14:30:00' AS quote_time, {i}L AS seq, 0L AS batch_id, false AS should_reject_trades, "
        f"DATE'{d}' AS quote_date"
        for i, d in enumerate(days)
    )
    spark.sql(quotes).write.format("delta").mode("append").save(lake_mod.table_path(lake, "quotes"))
    assert quote_cutoff(30, today) == today - dt.timedelta(days=30)

    def kept() -> list:
        return sorted(r[0] for r in read_table(spark, lake, "quotes").select("quote_date").collect())

    argv = [*cli_argv("maintain"), "--lake", arg(lake), "--tables", "quotes", "--master", "local[1]"]
    env = dict(os.environ, MARKET_SPREAD_QUOTE_RETENTION_DAYS="30")  # from the environment, as the DAG may set it
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import time
            from market_spread.lake.lock import writer_lock
            from market_spread.runtime.storage import location
            lock = writer_lock(location({arg(lake)!r}))  # the flock, or the lease on S3
            lock.acquire()  # kept referenced: the flock lives as long as the handle
            print("locked", flush=True)
            time.sleep(600)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "retention skipped: a stream holds the lake" in proc.stdout
        assert kept() == sorted(days)
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait(10)
    if place.s3:  # the lock is what differs between the storages; the retention itself, once
        return
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "retention 30 days: 2 rows before" in proc.stdout
    assert kept() == sorted(days[:2])


DAG_TEST_SCRIPT = r"""
import json, sys
from pathlib import Path
from airflow.utils import db
db.initdb()
out = {}
for path in sys.argv[1:]:
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(dag_folder=path)
    dag = bag.dags[Path(path).stem]
    run = dag.test()
    tis = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    out[dag.dag_id] = {"state": str(run.state), "tasks": tis}
print("RESULT " + json.dumps(out))
"""


def _dag_test(tmp_path: Path, lake: Path, dag_ids: list[str], **env: str) -> dict:
    home = tmp_path / "airflow_home"
    proc = subprocess.run(
        [sys.executable, "-c", DAG_TEST_SCRIPT, *[str(DAGS / f"{d}.py") for d in dag_ids]],
        env=airflow_env(home, MARKET_SPREAD_LAKE=str(lake), MARKET_SPREAD_MASTER="local[1]", **env),
        capture_output=True,
        text=True,
        timeout=900,
    )
    result = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and result, (proc.stdout[-4000:], proc.stderr[-4000:])
    return json.loads(result[-1][len("RESULT ") :]) | {"_log": proc.stdout + proc.stderr}


@pytest.fixture(scope="module")
def dag_runs(small_lake: Path, tmp_path_factory) -> dict:
    """dag.test() of the maintenance DAG in a child process with its own metadata DB. (The quality
    DAG's runs, failed and passed, are tests/e2e/test_data_docs_ui.py's, in a live Airflow.)"""
    tmp = tmp_path_factory.mktemp("dag_test")
    before = small_file_counts(small_lake)
    result = _dag_test(tmp, small_lake, ["market_spread_maintenance"], MARKET_SPREAD_MAINTENANCE_MIN_FILES="0")
    return result | {"_files_before": before}


def test_maintenance_dag_compacts_the_lake(dag_runs: dict, small_lake: Path) -> None:
    run = dag_runs["market_spread_maintenance"]
    log = dag_runs["_log"]
    assert run["state"] == "success", log[-4000:]
    assert run["tasks"] == {"hold_stream": "success", "maintain": "success", "release_stream": "success"}
    assert "holding the writer lock: compaction and vacuum" in log
    assert "alerts: optimize: 4 files compacted into 1" in log
    # Vacuum keeps what was removed less than 7 days ago: the 4 small files stay, beside the new one.
    assert small_file_counts(small_lake)["alerts"] == dag_runs["_files_before"]["alerts"] + 1
    assert not (small_lake / "_stream.lock").read_text().strip()  # writer lock released
    assert "hold released" in log
