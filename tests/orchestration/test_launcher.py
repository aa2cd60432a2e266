"""`make run`'s process reaper (market_spread_tools.reaper): what the launcher stops on Ctrl-C and at start."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

SWEEP_SCRIPT = r"""
import json, subprocess, sys, time
from market_spread_tools import reaper as run

assert run.become_subreaper()
# One ignores SIGTERM (and so does its child), one is a setsid orphan (re-parented to us), and one
# starts a new orphan when it is told to stop: that one only exists after the first snapshot.
subprocess.Popen(["bash", "-c", "trap '' TERM; sleep 300 & wait"])
subprocess.Popen(["bash", "-c", "setsid sleep 300 &"]).wait()
subprocess.Popen(["bash", "-c", "trap 'setsid sleep 301 & exit 0' TERM; sleep 300 & wait"])
time.sleep(1)
lines = []
stopped, left = run.sweep(grace=1.0, out=lines.append)
print(json.dumps({"stopped": stopped, "left": [p.pid for p in left], "lines": lines,
                  "after": [run.describe(p) for p in run.still_running(run.descendants())]}))
"""


def test_sweep_leaves_nothing_not_even_late_orphans() -> None:
    """What `make run` does last on Ctrl-C: rounds until a snapshot finds nothing alive."""
    began = time.monotonic()
    out = subprocess.run([sys.executable, "-c", SWEEP_SCRIPT], capture_output=True, text=True, timeout=60, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["left"] == [] and result["after"] == [], result
    assert sum(text.split(" ", 2)[2] == "sleep 301" for text in result["stopped"]) == 1, result  # the late orphan
    assert any("SIGKILL" in line and "trap '' TERM" in line for line in result["lines"]), result
    assert time.monotonic() - began < 20


MARKED_SCRIPT = r"""
import json, os, subprocess, sys, time
from market_spread_tools import reaper as run

# Not a subreaper here: a double-forked setsid child leaves our tree (it is re-parented to init),
# so only the run's environment marker can find it.
run_id = run.new_run_id()
env = dict(os.environ, **{run.RUN_MARKER: run_id})
quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
subprocess.Popen(["bash", "-c", "setsid sleep 302 &"], env=env, **quiet).wait()
subprocess.Popen(["bash", "-c", "setsid sleep 303 &"], **quiet).wait()  # unmarked: not ours to stop
time.sleep(0.5)
escaped = {p.pid: p.cmdline() for p in run.marked(run_id)}
in_tree = [p.pid for p in run.descendants()]
stopped, left = run.sweep(grace=1.0, out=lambda _: None, run_id=run_id)
print(json.dumps({"escaped": list(escaped.values()), "in_tree": [pid for pid in escaped if pid in in_tree],
                  "stopped": stopped, "left": [p.pid for p in left], "after": [p.pid for p in run.still_running(run.marked(run_id))]}))
"""


def test_sweep_finds_processes_outside_the_tree_by_run_marker() -> None:
    import psutil

    try:
        out = subprocess.run(
            [sys.executable, "-c", MARKED_SCRIPT], capture_output=True, text=True, timeout=60, check=True
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["escaped"] == [["sleep", "302"]] and result["in_tree"] == [], result
        assert [text.split(" ", 2)[2] for text in result["stopped"]] == ["sleep 302"], result
        assert result["left"] == [] and result["after"] == [], result
    finally:
        for proc in psutil.process_iter(["cmdline"]):
            if proc.info["cmdline"] in (["sleep", "302"], ["sleep", "303"]):
                proc.kill()


STALE_SCRIPT = r"""
import json, os, subprocess, sys, time
from pathlib import Path
from market_spread_tools import reaper as run

home = Path(sys.argv[1])
# A launcher that died (its pid is gone) left a process behind on this AIRFLOW_HOME; another run
# on another home and one of a live launcher (this process, named like one) are left alone.
dead = subprocess.Popen(["true"]); dead.wait()
def start(run_id, airflow_home, tag):
    env = dict(os.environ, AIRFLOW_HOME=str(airflow_home), **{run.RUN_MARKER: run_id})
    return subprocess.Popen(["bash", "-c", f"exec -a {tag} sleep 300"], env=env)
stale = start(f"{dead.pid}-x", home, "stale")
other = start(f"{dead.pid}-y", home.parent / "elsewhere", "other")
time.sleep(0.5)
lines = []
n = run.stop_leftovers_of_dead_runs(home, out=lines.append)
time.sleep(0.2)
print(json.dumps({"n": n, "stale": stale.poll(), "other": other.poll(), "lines": lines}))
other.kill()
"""


def test_leftovers_of_a_killed_launcher_are_stopped_at_start(tmp_path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", STALE_SCRIPT, str(tmp_path / "home")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["n"] == 1 and result["stale"] is not None and result["other"] is None, result
    assert "earlier run" in result["lines"][0], result


def test_the_launch_is_read_from_the_environment_through_the_settings_registry(tmp_path, monkeypatch) -> None:
    """PORT, SOURCE, MARKET_SPREAD_AIRFLOW_HOME and MARKET_SPREAD_START_PAUSED are declared once
    (market_spread_tools.settings) and checked there: a malformed one is a one-line error."""
    import pytest

    from market_spread.errors import SettingError
    from market_spread.runtime.settings import SETTINGS
    from market_spread_tools import launcher

    assert {"PORT", "SOURCE", "KAFKA_PORT", "MARKET_SPREAD_AIRFLOW_HOME", "MARKET_SPREAD_START_PAUSED"} <= set(SETTINGS)
    for name in (
        "PORT",
        "SOURCE",
        "KAFKA_PORT",
        "MARKET_SPREAD_AIRFLOW_HOME",
        "MARKET_SPREAD_START_PAUSED",
        "MARKET_SPREAD_SOURCE",
        "STORAGE",
        "S3_PORT",
    ):
        monkeypatch.delenv(name, raising=False)
    default = launcher.Launch.from_environment()
    assert (default.port, default.home, default.start_paused, default.kafka, default.store) == (
        8080,
        launcher.PROJECT_ROOT / ".airflow",
        False,
        False,
        None,
    )
    monkeypatch.setenv("PORT", "8089")
    monkeypatch.setenv("MARKET_SPREAD_AIRFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MARKET_SPREAD_START_PAUSED", "yes")
    monkeypatch.setenv("MARKET_SPREAD_SOURCE", "Kafka")
    chosen = launcher.Launch.from_environment()
    assert (chosen.port, chosen.home, chosen.start_paused, chosen.kafka) == (8089, tmp_path / "home", True, True)
    monkeypatch.setenv("SOURCE", "files")  # `make run SOURCE=...` wins over MARKET_SPREAD_SOURCE
    assert not launcher.Launch.from_environment().kafka
    for name, bad in (
        ("PORT", "eighty"),
        ("SOURCE", "s3"),
        ("MARKET_SPREAD_START_PAUSED", "maybe"),
        ("STORAGE", "nfs"),
    ):
        monkeypatch.setenv(name, bad)
        with pytest.raises(SettingError, match=name):
            launcher.Launch.from_environment()
        monkeypatch.delenv(name)
    monkeypatch.setenv("STORAGE", "s3")  # S3_PORT is read for STORAGE=s3 only
    monkeypatch.setenv("S3_PORT", "0")
    with pytest.raises(SettingError, match="S3_PORT"):
        launcher.Launch.from_environment()


class _FakeAirflow:
    """Airflow's REST API as `make run` uses it, on 127.0.0.1: healthy, a token, DAGs to unpause,
    and a pools endpoint that answers 500 to the first `failures` creations."""

    def __init__(self, failures: int) -> None:
        import http.server
        import threading

        fake = self
        self.failures, self.posts, self.pool, self.unpaused = failures, 0, None, []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def answer(self, code: int, body: dict) -> None:
                raw = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                if self.path == "/api/v2/monitor/health":
                    part = {"status": "healthy"}
                    return self.answer(
                        200, dict.fromkeys(("metadatabase", "scheduler", "triggerer", "dag_processor"), part)
                    )
                if self.path == "/api/v2/pools/lake_jobs" and fake.pool is not None:
                    return self.answer(200, fake.pool)
                return self.answer(404, {"detail": "not found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                if self.path == "/auth/token":
                    return self.answer(201, {"access_token": "token"})
                fake.posts += 1
                if fake.posts <= fake.failures:
                    return self.answer(500, {"detail": "database is locked"})
                fake.pool = body
                return self.answer(201, body)

            def do_PATCH(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                fake.unpaused.append(self.path.rsplit("/", 1)[-1])
                return self.answer(200, {})

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_a_failed_pool_creation_is_retried_until_the_pool_exists(tmp_path, monkeypatch, capsys) -> None:
    """Issue 42: a first 500 from the pools endpoint no longer leaves the run without its pool (and
    every quality run "scheduled" for good): it is retried, the pool is read back, the DAGs unpaused."""
    from market_spread_tools import airflow_client, launcher

    monkeypatch.setattr(airflow_client, "RETRY_DELAYS", (0.01,) * 5, raising=False)
    fake = _FakeAirflow(failures=2)
    try:
        launch = launcher.Launch(port=fake.port, home=tmp_path / "home", start_paused=False, kafka=False)
        launcher.on_ready(launch, "secret")
    finally:
        fake.server.shutdown()
    assert fake.posts == 3
    assert fake.pool is not None and fake.pool["name"] == "lake_jobs" and fake.pool["slots"] == 1
    assert sorted(fake.unpaused) == launcher.our_dag_ids(launch.dags) and "market_spread_quality" in fake.unpaused
    assert "retrying" in capsys.readouterr().out


def test_a_pool_that_cannot_be_created_stops_the_run_with_an_error(tmp_path, monkeypatch, capsys) -> None:
    from market_spread_tools import airflow_client, launcher

    monkeypatch.setattr(airflow_client, "RETRY_DELAYS", (0.01,) * 3, raising=False)
    fake = _FakeAirflow(failures=100)
    proc = subprocess.Popen(["sleep", "60"])  # stands for Airflow standalone
    try:
        launch = launcher.Launch(port=fake.port, home=tmp_path / "home", start_paused=False, kafka=False)
        run = launcher.Running(proc, {launcher.RUN_MARKER: "test"}, None)
        code = launcher.wait_for_stop(launch, run, "secret", None, {"count": 0})
    finally:
        fake.server.shutdown()
        proc.kill()
        proc.wait()
    out = capsys.readouterr().out
    assert code == 1, out
    assert fake.posts == 4 and fake.pool is None and fake.unpaused == []
    assert (
        "error: could not create the lake_jobs pool and unpause the DAGs through the Airflow API after 4 "
        "attempts: HTTP Error 500"
    ) in out
    assert "warning" not in out


def test_the_pool_is_created_with_the_cli_before_standalone_starts(tmp_path, monkeypatch, capsys) -> None:
    """`airflow db migrate`, then `airflow pools set`, on the run's AIRFLOW_HOME, before the
    scheduler exists; a failure there is an error and nothing is started."""
    from market_spread_tools import launcher

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    fake = bin_dir / "airflow"
    fake.write_text(
        f'#!/bin/bash\necho "$AIRFLOW_HOME $*" >> {calls}\n'
        '[ "$1" != pools ] || [ -z "$FAIL_POOLS" ] || { echo "pool: database is locked" >&2; exit 3; }\n'
    )
    fake.chmod(0o755)
    monkeypatch.setattr(launcher.sys, "executable", str(bin_dir / "python"))
    env = {"AIRFLOW_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    assert launcher.prepare_airflow(env) is None
    lines = calls.read_text().splitlines()
    assert lines[0] == f"{tmp_path / 'home'} db migrate"
    assert lines[1].startswith(f"{tmp_path / 'home'} pools set lake_jobs 1 ")
    error = launcher.prepare_airflow({**env, "FAIL_POOLS": "1"})
    assert error == "`airflow pools set` exited with code 3: pool: database is locked"

    started = []
    monkeypatch.setattr(launcher, "airflow_env", lambda *a: {**env, "FAIL_POOLS": "1"})
    monkeypatch.setattr(launcher, "start_standalone", lambda *a: started.append(a))
    launch = launcher.Launch(port=8099, home=tmp_path / "home", start_paused=False, kafka=False)
    assert launcher.start_run(launch) is None and started == []
    assert "error: `airflow pools set` exited with code 3" in capsys.readouterr().out


def test_storage_s3_points_the_run_at_its_own_s3_server(tmp_path, monkeypatch) -> None:
    """`make run STORAGE=s3`: a server on a free loopback port (or S3_PORT) with its data in
    data/object-store; Airflow and its jobs get its AWS variables (its own keys, never a real
    account's) and landing and lake on it; the Data Docs stay local."""
    import os

    from market_spread.feeds.object_store import DEFAULT_ACCESS_KEY, DEFAULT_SECRET_KEY
    from market_spread.orchestration.settings import resolve_settings
    from market_spread.runtime.paths import project_home
    from market_spread.runtime.storage import S3Path
    from market_spread_tools import launcher

    for name in ("S3_PORT", "MARKET_SPREAD_DOCS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("STORAGE", "S3")
    plan = launcher.Launch.from_environment().store
    assert plan is not None and launcher.port_free(plan.port)
    assert (plan.data, plan.log) == (
        launcher.PROJECT_ROOT / "data" / "object-store",
        launcher.PROJECT_ROOT / "data" / "object-store.out",
    )
    monkeypatch.setenv("S3_PORT", "9123")
    plan = launcher.Launch.from_environment().store
    assert plan.endpoint == "http://127.0.0.1:9123"

    # A real account's variables in the caller's environment reach neither the server nor the jobs.
    env = {
        "AWS_ACCESS_KEY_ID": "AKIAREAL",
        "AWS_SECRET_ACCESS_KEY": "real",
        "AWS_SESSION_TOKEN": "t",
        "AWS_PROFILE": "prod",
        "MARKET_SPREAD_LAKE": "/elsewhere/lake",
        "PATH": "/usr/bin",
    }
    plan.apply(env)
    assert env == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9123",
        "AWS_ACCESS_KEY_ID": DEFAULT_ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": DEFAULT_SECRET_KEY,
        "AWS_REGION": "us-east-1",
        "MARKET_SPREAD_LAKE": "s3://market-spread/lake",
        "MARKET_SPREAD_LANDING": "s3://market-spread/landing",
        "PATH": "/usr/bin",
    }
    # The DAGs read them so: landing and lake on the server, the Data Docs in data/quality.
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = resolve_settings(lambda _name: None)
    assert isinstance(settings.lake, S3Path) and settings.lake.uri("s3") == "s3://market-spread/lake"
    assert settings.landing.uri("s3") == "s3://market-spread/landing"
    assert settings.docs == project_home() / "data" / "quality"
    # The banner says where things are and how to query the lake with the server's variables.
    launch = launcher.Launch(port=8099, home=tmp_path / "home", start_paused=False, kafka=False, store=plan)
    text = launcher.banner(launch, "pw", settings, env, None, 42.0)
    assert "  lake        s3://market-spread/lake" in text and "  landing     s3://market-spread/landing" in text
    assert f"  S3 server   http://127.0.0.1:9123 (bucket market-spread; data {plan.data}; log {plan.log})" in text
    assert (
        f"AWS_ENDPOINT_URL=http://127.0.0.1:9123 AWS_ACCESS_KEY_ID={DEFAULT_ACCESS_KEY} "
        f"AWS_SECRET_ACCESS_KEY={DEFAULT_SECRET_KEY} .venv/bin/market-spread sql --lake s3://market-spread/lake"
    ) in text
    assert os.environ.get("STORAGE") == "S3"


def test_the_s3_server_of_a_run_starts_and_is_stopped_last_not_as_a_job(tmp_path) -> None:
    """The server the launcher starts reports ready; the job stopper (which stops the CLI jobs first,
    while the stream finishes its batch on this server) does not take it for a job."""
    import psutil

    from market_spread.feeds.broker import free_port, port_open
    from market_spread_tools import reaper, store_run

    plan = store_run.StorePlan(free_port(), tmp_path / "data", tmp_path / "store.out")
    env = {**__import__("os").environ, reaper.RUN_MARKER: "test-store"}
    began = time.monotonic()
    store = store_run.start_store(plan, env)
    try:
        assert port_open(plan.port) and (plan.data / "market-spread").is_dir()
        tree = [psutil.Process(store.pid), *psutil.Process(store.pid).children(recursive=True)]
        assert not any(reaper._is_cli(p) for p in tree), [p.cmdline() for p in tree]
        assert store_run.READY + plan.endpoint in plan.log.read_text()
    finally:
        store_run.stop_store(store)
    assert store.returncode == 0 and not port_open(plan.port)
    assert time.monotonic() - began < 60


def _stalling_server(stalls: int, stall_seconds: float):
    """A local HTTP server whose first `stalls` requests get no answer for `stall_seconds` (as a busy
    Airflow API server's); later ones {"ok": true}. Returns the server and the methods it saw."""
    import http.server
    import threading

    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def _answer(self) -> None:
            seen.append(self.command)
            if len(seen) <= stalls:
                time.sleep(stall_seconds)
            raw = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = _answer

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def test_a_read_the_api_server_does_not_answer_in_time_is_asked_again_a_creation_is_not() -> None:
    """CI once failed on one GET that a busy Airflow API server left unanswered for 10 s: reads are
    asked again with a longer wait; a POST, which could have taken effect, is not repeated."""
    import urllib.error

    from market_spread_tools import airflow_client

    server, seen = _stalling_server(stalls=1, stall_seconds=0.6)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/api/v2/dags/x"
        assert airflow_client.http_json("GET", url, timeout=0.3) == {"ok": True}
        assert seen == ["GET", "GET"]
    finally:
        server.shutdown()
    server, seen = _stalling_server(stalls=1, stall_seconds=0.6)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/api/v2/pools"
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            airflow_client.http_json("POST", url, {"name": "p"}, timeout=0.3)
        assert seen == ["POST"]
    finally:
        server.shutdown()


def test_the_banner_names_the_metrics_endpoint_or_why_there_is_none() -> None:
    import socket

    from market_spread_tools.launcher import metrics_line

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert metrics_line({"MARKET_SPREAD_METRICS_PORT": str(port)}) == (
            f"none: port {port} in use: set MARKET_SPREAD_METRICS_PORT"
        )
    assert metrics_line({"MARKET_SPREAD_METRICS_PORT": str(port)}).startswith(f"http://127.0.0.1:{port}/metrics")
    assert metrics_line({"MARKET_SPREAD_METRICS_PORT": "0"}) == "off (MARKET_SPREAD_METRICS_PORT=0)"
