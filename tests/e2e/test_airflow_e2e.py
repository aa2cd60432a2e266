"""End to end: `market-spread-run` (Airflow standalone) on a free port with a private AIRFLOW_HOME and
lake; DAGs unpaused through the REST API v2; alerts land; the stream's JVM is killed and the stream
DAG brings the job back; Ctrl-C (SIGINT) leaves no process behind. The quality DAG's runs in a live
`market-spread-run`, failed and passed, and their reports are tests/e2e/test_data_docs_ui.py's.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from market_spread.orchestration.jobs import cli_argv
from market_spread.orchestration.probes import live_stream
from market_spread_tools import launcher as run
from tests.helpers.airflow import start_run, wait_for
from tests.helpers.net import listening, not_loopback, tree
from tests.helpers.paths import ROOT
from tests.helpers.processes import stop

pytestmark = pytest.mark.slow


def ours(home: Path, lake: Path) -> list:
    """Every process started for this test (they all inherit its AIRFLOW_HOME or lake)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            env = proc.environ()
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        if env.get("MARKET_SPREAD_AIRFLOW_HOME") == str(home) or env.get("MARKET_SPREAD_LAKE") == str(lake):
            if proc.pid != os.getpid():
                found.append(proc)
    return found


def streams(home: Path, lake: Path) -> list:
    return [p for p in ours(home, lake) if "stream" in (p.info.get("cmdline") or [])]


def task_log_lines(api: str, token: str, dag_id: str, task_id: str, state: str) -> list[str]:
    """The log lines of the latest task instance in `state`, as the UI gets them through the API
    (the source notes left out)."""
    from urllib.parse import quote

    tis = run.http_json(
        "GET", f"{api}/dags/{dag_id}/dagRuns/~/taskInstances?task_id={task_id}&state={state}", token=token
    )["task_instances"]
    assert tis, f"no {state} {dag_id}.{task_id}"
    ti = tis[-1]
    url = f"{api}/dags/{dag_id}/dagRuns/{quote(ti['dag_run_id'], safe='')}/taskInstances/{task_id}/logs/{ti['try_number']}"
    content = run.http_json("GET", url, token=token, timeout=60)["content"]
    lines = [entry.get("event", "") if isinstance(entry, dict) else str(entry) for entry in content]
    return [line for line in lines if line and not line.startswith("::")]


def quick_start_query() -> str:
    """The `market-spread sql` line of the README's quick start."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text[text.index("## Quick start") : text.index("## The two commands")]
    (line,) = [line for line in block.splitlines() if line.startswith(".venv/bin/market-spread sql ")]
    return line


def test_airflow_runs_supervises_and_stops_cleanly(tmp_path) -> None:
    home, lake, landing, docs = tmp_path / "airflow", tmp_path / "lake", tmp_path / "landing", tmp_path / "docs"
    port = run.free_port()
    api = f"http://127.0.0.1:{port}/api/v2"
    env = dict(os.environ)
    env.update(
        {
            "PORT": str(port),
            "MARKET_SPREAD_AIRFLOW_HOME": str(home),
            "MARKET_SPREAD_START_PAUSED": "1",  # the test unpauses through the REST API
            "MARKET_SPREAD_LAKE": str(lake),
            "MARKET_SPREAD_LANDING": str(landing),
            "MARKET_SPREAD_DOCS": str(docs),
            "MARKET_SPREAD_MASTER": "local[2]",
            "MARKET_SPREAD_INTERVAL": "3",
            "MARKET_SPREAD_FEED_RATE": "20",
            "MARKET_SPREAD_FEED_SECONDS": "40",
        }
    )
    # A small backlog, so the first batch already has alerts to find.
    subprocess.run(
        [*cli_argv("generate"), "--landing", str(landing), "--quotes", "300", "--orders", "300", "--files", "2"],
        check=True,
        capture_output=True,
        env=env,
        timeout=60,
    )
    log = tmp_path / "run.log"
    began = time.monotonic()
    timings: dict[str, float] = {}
    proc = start_run(env, log)
    try:
        wait_for("Airflow to be healthy", lambda: run.healthy(port), 240, proc, log, every=1)
        timings["airflow ready"] = time.monotonic() - began
        password_file = home / run.PASSWORD_FILE
        assert password_file.stat().st_mode & 0o777 == 0o600
        password = json.loads(password_file.read_text())[run.USER]
        # The banner comes once the DAGs are handled, a moment after the API is healthy.
        banner = wait_for(
            "the login banner", lambda: "login: admin" in log.read_text() and log.read_text(), 60, proc, log, every=1
        )
        assert f"login: admin / {password}" in banner
        assert banner.count(password) == 1, "the login is printed once"

        # No anonymous access, and a wrong password gets no token.
        import urllib.error

        with pytest.raises(urllib.error.HTTPError) as anonymous:
            run.http_json("GET", f"{api}/dags")
        assert anonymous.value.code in (401, 403)
        with pytest.raises(urllib.error.HTTPError):
            run.api_token(port, "not-the-password")
        token = run.api_token(port, password)

        def listed() -> dict:
            dags = run.http_json("GET", f"{api}/dags?dag_id_pattern=market_spread", token=token)["dags"]
            return {d["dag_id"]: d for d in dags} if len(dags) >= 4 else {}

        dags = wait_for("the 4 DAGs to be parsed", listed, 120, proc, log, every=1)
        assert all(d["is_paused"] for d in dags.values())  # MARKET_SPREAD_START_PAUSED
        for dag_id in ("market_spread_stream", "market_spread_feed"):
            run.set_paused(port, token, dag_id, False)
        assert not run.http_json("GET", f"{api}/dags/market_spread_stream", token=token)["is_paused"]

        def alerts() -> int:
            # A committed version, not just the log folder: the stream creates its tables side by
            # side, and delta-rs refuses a log that holds no commit yet ("No files in log segment").
            if not any((lake / "alerts" / "_delta_log").glob("[0-9]*.json")):
                return 0
            from deltalake import DeltaTable

            return DeltaTable(str(lake / "alerts")).to_pyarrow_table(columns=["order_id"]).num_rows

        wait_for("alerts in the lake", alerts, 600, proc, log, every=1)
        timings["alerts"] = time.monotonic() - began
        # The README's quick start: its first query, on this run's lake.
        query = quick_start_query().replace("--lake data/lake", f"--lake {lake}")
        answered = subprocess.run(
            [*cli_argv(*shlex.split(query)[1:])], capture_output=True, text=True, env=env, timeout=120
        )
        assert answered.returncode == 0 and "| alerts" in answered.stdout, answered.stderr[-2000:]
        assert "note: running on Spark SQL" not in answered.stderr, "the quick start's query needs no JVM"
        assert len(streams(home, lake)) == 1
        # Issue 44: while the stream writes alerts, nothing started for this run listens beyond the
        # loopback: not the driver's JVM, not Airflow's log servers (off: --skip-serve-logs).
        procs = tree([proc.pid, *ours(home, lake)])
        assert any(p.pid == int(live_stream(lake)["jvm_pid"]) for p in procs)
        assert listening(procs) and not_loopback(procs) == [], not_loopback(procs)
        assert not {8793, 8794} & {port for _, _, port in listening(procs)}
        # Task logs still reach the UI without the log servers: from the local files.
        assert task_log_lines(api, token, "market_spread_stream", "supervise_stream", "running")

        # Kill the stream's JVM: the job dies, its task fails, the next run starts a new job.
        before = live_stream(lake)
        assert before and before.get("jvm_pid"), before
        os.kill(int(before["jvm_pid"]), signal.SIGKILL)
        killed_at = time.monotonic()

        def restarted() -> bool:
            # Back = a new driver holding the lake with its Spark JVM up (a batch after that can take
            # minutes on a busy 2-core machine: recovery replays the batch the kill interrupted).
            now = live_stream(lake)
            assert len(streams(home, lake)) <= 1, "two streams on one lake"
            return bool(now and now.get("pid") != before["pid"] and now.get("jvm_pid"))

        wait_for("the stream to come back", restarted, 240, proc, log, every=1)
        timings["restart after JVM kill"] = time.monotonic() - killed_at
        new_job_started = [
            r
            for r in run.http_json(
                "GET", f"{api}/dags/market_spread_stream/dagRuns?order_by=-run_after&limit=5", token=token
            )["dag_runs"]
        ]
        assert any(r["state"] == "failed" for r in new_job_started), "the death of the job shows as a failed run"
    finally:
        # Ctrl-C, as a user would; then nothing of ours may be left.
        stop_began = time.monotonic()
        stop(proc)
        left = ours(home, lake)
        for p in left:
            p.kill()
        timings["shutdown"] = time.monotonic() - stop_began
        text = log.read_text()
        print("timings:", {k: round(v) for k, v in timings.items()})
        print("shutdown log:", text[text.rfind("market-spread-run: stopping (") :][-3000:])
    assert proc.returncode == 0, log.read_text()[-3000:]
    assert left == [], f"processes left running: {[(p.pid, p.info['cmdline']) for p in left]}"
    assert "nothing left running" in log.read_text()
    assert live_stream(lake) is None
