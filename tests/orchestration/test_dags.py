"""The DAGs and what they call: integrity, the supervisor, maintenance; `dag.test()` on a real lake.

Airflow is imported only in child processes with a private AIRFLOW_HOME, so these tests never touch
~/airflow nor the project's .airflow, and a metadata DB is created only where dag.test needs one.
"""
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
from market_spread.runtime.paths import project_home

from market_spread.orchestration import tasks as orch

ROOT = Path(__file__).resolve().parents[2]
DAGS = ROOT / "dags"
EXPECTED_DAGS = {"market_spread_stream", "market_spread_quality", "market_spread_maintenance", "market_spread_feed"}


def airflow_env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "PATH": str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


# --------------------------------------------------------------------------------------------
# DAG integrity (one child process parses everything)

INTEGRITY_SCRIPT = r"""
import importlib.util, json, sys, time
from pathlib import Path

dags = Path(sys.argv[1])
import airflow.sdk  # noqa: F401  (warm the imports the DAG processor has warm as well)
from airflow.sdk import dag, task  # noqa: F401
import market_spread.orchestration.tasks  # noqa: F401
from airflow.dag_processing.dagbag import DagBag

IO_EVENTS = ("open", "os.listdir", "os.scandir", "os.remove", "os.rename", "os.mkdir", "os.system",
             "subprocess.Popen", "os.posix_spawn", "os.fork", "os.exec", "socket.connect",
             "socket.getaddrinfo", "sqlite3.connect", "urllib.Request", "shutil.rmtree", "shutil.copyfile")
recording = {"on": False, "events": [], "file": "", "cache": ""}

def hook(event, args):
    if recording["on"] and event in IO_EVENTS:
        first = str(args[0]) if args else ""
        # Reading the DAG file itself (or its bytecode) is how it gets imported.
        if first != recording["file"] and not first.startswith(recording["cache"]):
            recording["events"].append(f"{event} {first}"[:200])

sys.addaudithook(hook)
result = {}
for path in sorted(dags.glob("*.py")):
    def load(name):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    load(f"warm_{path.stem}")  # first import compiles it and loads whatever it imports
    recording.update(on=True, events=[], file=str(path), cache=str(path.parent / "__pycache__" / path.stem) + ".")
    began = time.perf_counter()
    load(f"check_{path.stem}")
    seconds = time.perf_counter() - began
    recording["on"] = False
    result[path.name] = {"seconds": seconds, "io": recording["events"]}

bag = DagBag(dag_folder=str(dags))
dags_info = {}
for dag_id, d in bag.dags.items():
    dags_info[dag_id] = {
        "file": Path(d.fileloc).name,
        "tags": sorted(d.tags or []),
        "max_active_runs": d.max_active_runs,
        "catchup": d.catchup,
        "tasks": {t.task_id: {"owner": t.owner, "retries": t.retries, "teardown": t.is_teardown, "pool": t.pool}
                  for t in d.tasks},
        "timetable": type(d.timetable).__name__,
        "schedule": getattr(d.timetable, "expression", None),
    }
stats = {Path(s.file).name: s.duration.total_seconds() if hasattr(s.duration, "total_seconds") else s.duration
         for s in bag.dagbag_stats}
NATIVE = ("pyspark", "py4j", "pyarrow", "deltalake", "great_expectations", "polars")
native = sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in NATIVE})
print(json.dumps({"files": result, "import_errors": {k: str(v) for k, v in bag.import_errors.items()},
                  "dags": dags_info, "stats": stats, "native": native}))
"""


@pytest.fixture(scope="module")
def integrity(tmp_path_factory) -> dict:
    home = tmp_path_factory.mktemp("airflow_home")
    proc = subprocess.run(
        [sys.executable, "-c", INTEGRITY_SCRIPT, str(DAGS)],
        env=airflow_env(home), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_dag_file_imports_fast_without_io(integrity: dict) -> None:
    assert integrity["import_errors"] == {}
    assert set(integrity["files"]) == {f"{d}.py" for d in EXPECTED_DAGS}
    for name, info in integrity["files"].items():
        assert info["seconds"] < 2.0, f"{name} took {info['seconds']:.2f}s to import"
        assert info["io"] == [], f"{name} does I/O at import: {info['io']}"
    for name, seconds in integrity["stats"].items():
        assert seconds < 2.0, f"DagBag parsed {name} in {seconds:.2f}s"
    # Parsing loads no Spark, Arrow, delta-rs or GX: the DAG processor stays small and fast.
    assert integrity["native"] == [], f"DAG files load native libraries at parse time: {integrity['native']}"


def test_lake_jobs_share_one_pool(integrity: dict) -> None:
    pools = {(dag_id, task_id): t["pool"] for dag_id, info in integrity["dags"].items() for task_id, t in info["tasks"].items()}
    assert pools[("market_spread_quality", "validate")] == orch.LAKE_JOBS_POOL
    assert pools[("market_spread_maintenance", "maintain")] == orch.LAKE_JOBS_POOL
    assert pools[("market_spread_stream", "supervise_stream")] != orch.LAKE_JOBS_POOL
    compose = (ROOT / "docker-compose.yaml").read_text()
    assert f"airflow pools set {orch.LAKE_JOBS_POOL} 1" in compose  # the compose deployment creates it too


def test_dags_have_tags_owner_retries(integrity: dict) -> None:
    dags = integrity["dags"]
    assert set(dags) == EXPECTED_DAGS
    for dag_id, info in dags.items():
        assert info["file"] == f"{dag_id}.py", "run.py finds DAG ids by file name"
        assert "market-spread" in info["tags"], dag_id
        assert info["max_active_runs"] == 1, dag_id
        assert info["catchup"] is False, dag_id
        for task_id, t in info["tasks"].items():
            assert t["owner"] == orch.OWNER, (dag_id, task_id)
            assert t["retries"] >= 1, (dag_id, task_id)


def test_stream_dag_restarts_within_two_minutes(integrity: dict) -> None:
    stream = integrity["dags"]["market_spread_stream"]
    assert stream["schedule"] == "* * * * *"
    assert set(stream["tasks"]) == {"supervise_stream"}
    maintenance = integrity["dags"]["market_spread_maintenance"]
    assert maintenance["tasks"]["release_stream"]["teardown"] is True


# --------------------------------------------------------------------------------------------
# Configuration


def test_settings_precedence_and_paths(monkeypatch) -> None:
    monkeypatch.setenv("MARKET_SPREAD_INTERVAL", "2.5")
    monkeypatch.setenv("MARKET_SPREAD_LAKE", "somewhere/lake")
    monkeypatch.delenv("MARKET_SPREAD_FEED_ENABLED", raising=False)
    variables = {"market_spread_interval": "7", "market_spread_feed_enabled": "false"}
    settings = orch.resolve_settings(variables.get)
    assert settings.interval == 7.0  # a Variable wins over the environment
    assert settings.feed_enabled is False
    assert settings.lake == project_home() / "somewhere" / "lake"  # relative to the project
    assert settings.landing == project_home() / "data" / "landing"
    assert settings.retain_hours >= 168
    with pytest.raises(ValueError, match="Variable market_spread_stall_seconds"):
        orch.resolve_settings({"market_spread_stall_seconds": "-1"}.get)
    with pytest.raises(ValueError, match="not a boolean"):
        orch.resolve_settings({"market_spread_stream_enabled": "maybe"}.get)


def test_outside_airflow_variables_are_not_asked() -> None:
    assert orch.airflow_variable("market_spread_lake") is None


def test_hold_expires() -> None:
    now = time.time()
    hold = json.dumps({"reason": "maintenance window", "until": now + 60})
    assert orch.active_hold({orch.HOLD_VARIABLE: hold}.get, now) == "maintenance window"
    assert orch.active_hold({orch.HOLD_VARIABLE: hold}.get, now + 61) is None
    assert orch.active_hold({}.get, now) is None


# --------------------------------------------------------------------------------------------
# Health check and supervisor, with a stand-in for the stream (no Spark)

FAKE_STREAM = r"""
import signal, sys, time
mode = sys.argv[1]
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
print("market-spread stream: fake", flush=True)
batch = 0
while not stop:
    if mode == "die" and batch == 2:
        print("boom", flush=True)
        sys.exit(7)
    if mode == "busy":
        sys.exit(3)
    if mode != "hang" or batch == 0:
        print(f"batch {batch}: 10 lines, 5 quotes, 5 orders, 1 alerts, 0 quarantined in 0.01s", flush=True)
        batch += 1
    time.sleep(0.2)
time.sleep(0.3)  # the batch in flight
print("market-spread stream: stopped", flush=True)
"""


def _fake(tmp_path: Path, mode: str) -> list[str]:
    script = tmp_path / "fake_stream.py"
    script.write_text(FAKE_STREAM)
    return [sys.executable, str(script), mode]


def _settings(tmp_path: Path, **kw) -> orch.Settings:
    return orch.Settings(lake=tmp_path / "lake", landing=tmp_path / "landing", **kw)


def test_health_check_flags_only_waiting_input(tmp_path) -> None:
    landing = tmp_path / "landing"
    t0 = time.time()
    for feed in ("quotes", "orders"):
        (landing / feed).mkdir(parents=True)
        os.utime(landing / feed, (t0 - 50, t0 - 50))
    health = orch.StreamHealth(landing, stall_seconds=10, startup_seconds=10, started=t0)
    assert health.check(now=t0 + 100) is None  # nothing arrived: idle, not stalled
    f = landing / "orders" / "a.jsonl"
    f.write_text("{}\n")
    os.utime(f, (t0 + 200, t0 + 200))
    os.utime(landing / "orders", (t0 + 200, t0 + 200))
    assert health.check(now=t0 + 205) is None  # waiting 5 s < 10 s
    assert "no batch progress" in health.check(now=t0 + 300)
    assert health.observe_line("batch 3: 1 lines, 1 quotes, 0 orders, 0 alerts, 0 quarantined in 0.50s", now=t0 + 301)
    assert health.last_batch_id == 3
    assert health.check(now=t0 + 400) is None  # the batch took the file
    slow_start = orch.StreamHealth(landing, stall_seconds=10, startup_seconds=1000, started=t0)
    assert slow_start.check(now=t0 + 300) is None  # before the first batch, more slack
    os.utime(landing / "quotes", (t0 + 500, t0 + 500))  # a file left the folder: no new input
    assert health.check(now=t0 + 600) is None
    assert not health.observe_line("market-spread stream: something else")


def test_supervisor_stops_on_request(tmp_path) -> None:
    requests = iter([None, None, "the DAG is paused"])
    lines: list[str] = []
    outcome = orch.supervise_stream(
        _settings(tmp_path), lambda: next(requests, "again"), lines.append,
        stop_check_every=0.5, argv=_fake(tmp_path, "ok"),
    )
    assert outcome.reason.startswith("stopped: the DAG is paused (exit 0)")
    assert outcome.batches >= 1
    assert any(line.startswith("batch 0:") for line in lines)  # progress reaches the task log
    assert "market-spread stream: stopped" in lines


def test_supervisor_fails_when_the_job_dies(tmp_path) -> None:
    with pytest.raises(orch.StreamFailed, match="exited with code 7 after 2 batches"):
        orch.supervise_stream(_settings(tmp_path), lambda: None, lambda _: None, argv=_fake(tmp_path, "die"))


def test_supervisor_reports_a_busy_lake(tmp_path) -> None:
    with pytest.raises(orch.StreamFailed, match="another writer holds the lake"):
        orch.supervise_stream(_settings(tmp_path), lambda: None, lambda _: None, argv=_fake(tmp_path, "busy"))


def test_supervisor_stops_a_stalled_job_and_fails(tmp_path) -> None:
    landing = tmp_path / "landing"
    settings = _settings(tmp_path, stall_seconds=1.0, startup_seconds=1.0, stop_timeout=5.0)
    (landing / "quotes").mkdir(parents=True)
    seen: list[str] = []

    calls = {"n": 0}

    def drop_a_file() -> None:
        # Lands after the job's only batch: then nothing ever takes it.
        calls["n"] += 1
        if calls["n"] == 3:
            (landing / "quotes" / "q.jsonl").write_text("{}\n")
        return None

    began = time.monotonic()
    with pytest.raises(orch.StreamFailed, match="stream stalled"):
        orch.supervise_stream(
            settings, drop_a_file, seen.append, stop_check_every=0.5, health_check_every=0.5,
            argv=_fake(tmp_path, "hang"),
        )
    assert time.monotonic() - began < 30
    assert any("health check failed" in line for line in seen)
    assert "market-spread stream: stopped" in seen  # it got SIGTERM and ended, not orphaned


def test_supervisor_never_leaves_the_job_behind(tmp_path) -> None:
    def interrupt() -> str | None:
        raise KeyboardInterrupt

    pid_file = tmp_path / "pid"
    argv = [sys.executable, "-c", f"import os,time; open({str(pid_file)!r},'w').write(str(os.getpid())); time.sleep(60)"]
    with pytest.raises(KeyboardInterrupt):
        orch.supervise_stream(_settings(tmp_path, stop_timeout=2.0), _ticker(interrupt), lambda _: None,
                              stop_check_every=0.3, argv=argv)
    pid = int(pid_file.read_text())
    assert not orch.pid_alive(pid)


SWEEP_SCRIPT = r"""
import json, subprocess, sys, time
from market_spread_tools import launcher as run

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
                  "after": [run.describe(p) for p in run._alive(run.descendants())]}))
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
from market_spread_tools import launcher as run

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
                  "stopped": stopped, "left": [p.pid for p in left], "after": [p.pid for p in run._alive(run.marked(run_id))]}))
"""


def test_sweep_finds_processes_outside_the_tree_by_run_marker() -> None:
    import psutil

    try:
        out = subprocess.run([sys.executable, "-c", MARKED_SCRIPT], capture_output=True, text=True, timeout=60, check=True)
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
from market_spread_tools import launcher as run

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
    out = subprocess.run([sys.executable, "-c", STALE_SCRIPT, str(tmp_path / "home")],
                         capture_output=True, text=True, timeout=60, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["n"] == 1 and result["stale"] is not None and result["other"] is None, result
    assert "earlier run" in result["lines"][0], result


def _ticker(then):
    calls = {"n": 0}

    def check():
        calls["n"] += 1
        return None if calls["n"] == 1 else then()

    return check


def test_run_job_logs_every_line() -> None:
    lines: list[str] = []
    rc = orch.run_job([sys.executable, "-c", "print('a'); print('b'); raise SystemExit(3)"], lines.append)
    assert rc == 3
    assert lines[-2:] == ["a", "b"]


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
    cli = orch.cli_argv("maintain")
    proc = subprocess.run(cli + ["--lake", str(tmp_path), "--retain-hours", "0"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--retain-hours" in proc.stderr
    proc = subprocess.run(cli + ["--lake", str(tmp_path / "missing")], capture_output=True, text=True)
    assert proc.returncode == 2 and "lake not found" in proc.stderr


# --------------------------------------------------------------------------------------------
# A real small lake: maintain beside a "live stream", and dag.test() of quality and maintenance


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
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from market_spread.stream.job import WriterLock
            lock = WriterLock(Path({str(small_lake)!r}) / "_stream.lock")
            lock.acquire()
            print("locked", flush=True)
            time.sleep(600)
        """)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = _delta_versions(small_lake / "alerts")
        proc = subprocess.run(
            [*orch.cli_argv("maintain"), "--lake", str(small_lake),
             "--tables", "alerts", "--master", "local[1]"],
            capture_output=True, text=True, timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "compaction skipped" in proc.stdout
        assert "alerts: vacuum:" in proc.stdout and "optimize" not in proc.stdout
        assert _delta_versions(small_lake / "alerts") == before  # no commit at all beside the writer
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait(10)


def test_maintain_applies_quote_retention_only_with_the_writer_lock(spark, tmp_path) -> None:
    import datetime as dt

    from market_spread.lake import tables as lake_mod
    from market_spread.lake.maintenance import quote_cutoff

    lake = tmp_path / "lake"
    lake_mod.ensure_tables(spark, lake)
    today = dt.datetime.now(dt.timezone.utc).date()
    days = [today - dt.timedelta(days=n) for n in (0, 2, 40, 400)]
    quotes = " UNION ALL ".join(
        f"SELECT 'AAPL' AS symbol, CAST(1.1 AS DECIMAL(18,8)) AS bid, CAST(1.2 AS DECIMAL(18,8)) AS offer, "
        f"TIMESTAMP'{d} 14:30:00' AS quote_time, {i}L AS seq, 0L AS batch_id, false AS should_reject_trades, "
        f"DATE'{d}' AS quote_date" for i, d in enumerate(days)
    )
    spark.sql(quotes).write.format("delta").mode("append").save(lake_mod.table_path(lake, "quotes"))
    assert quote_cutoff(30, today) == today - dt.timedelta(days=30)

    def kept() -> list:
        return sorted(r[0] for r in spark.read.format("delta").load(lake_mod.table_path(lake, "quotes"))
                      .select("quote_date").collect())

    argv = [*orch.cli_argv("maintain"), "--lake", str(lake), "--tables", "quotes", "--master", "local[1]"]
    env = dict(os.environ, MARKET_SPREAD_QUOTE_RETENTION_DAYS="30")  # from the environment, as the DAG may set it
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time
            from pathlib import Path
            from market_spread.stream.job import WriterLock
            lock = WriterLock(Path({str(lake)!r}) / "_stream.lock")
            lock.acquire()  # kept referenced: the flock lives as long as the handle
            print("locked", flush=True)
            time.sleep(600)
        """)],
        stdout=subprocess.PIPE, text=True,
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
        capture_output=True, text=True, timeout=900,
    )
    result = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and result, (proc.stdout[-4000:], proc.stderr[-4000:])
    return json.loads(result[-1][len("RESULT "):]) | {"_log": proc.stdout + proc.stderr}


@pytest.fixture(scope="module")
def dag_runs(small_lake: Path, tmp_path_factory) -> dict:
    """One child process, one metadata DB: dag.test() of maintenance, then of quality on the result."""
    tmp = tmp_path_factory.mktemp("dag_test")
    dag_ids = ["market_spread_maintenance"]
    try:
        import market_spread.quality.validate  # noqa: F401

        dag_ids.append("market_spread_quality")
    except ModuleNotFoundError:
        pass
    before = orch.small_file_counts(small_lake)
    result = _dag_test(
        tmp, small_lake, dag_ids, MARKET_SPREAD_MAINTENANCE_MIN_FILES="0", MARKET_SPREAD_DOCS=str(tmp / "docs")
    )
    return result | {"_files_before": before, "_docs": tmp / "docs"}


def test_maintenance_dag_compacts_the_lake(dag_runs: dict, small_lake: Path) -> None:
    run = dag_runs["market_spread_maintenance"]
    log = dag_runs["_log"]
    assert run["state"] == "success", log[-4000:]
    assert run["tasks"] == {"hold_stream": "success", "maintain": "success", "release_stream": "success"}
    assert "holding the writer lock: compaction and vacuum" in log
    assert "alerts: optimize: 4 files compacted into 1" in log
    # Vacuum keeps what was removed less than 7 days ago: the 4 small files stay, beside the new one.
    assert orch.small_file_counts(small_lake)["alerts"] == dag_runs["_files_before"]["alerts"] + 1
    assert not (small_lake / "_stream.lock").read_text().strip()  # writer lock released
    assert "hold released" in log


def test_quality_dag_validates_the_lake(dag_runs: dict) -> None:
    if "market_spread_quality" not in dag_runs:
        pytest.skip("validate (market_spread.quality.validate) not built yet")
    run = dag_runs["market_spread_quality"]
    log = dag_runs["_log"]
    assert "Data Docs: " in log
    # The lake above is synthetic but consistent: its alerts are valid no_market_data rejections.
    assert run == {"state": "success", "tasks": {"validate": "success"}}, log[-6000:]
    assert (dag_runs["_docs"] / "index.html").is_file()


def test_stream_task_log_is_one_summary_per_n_batches() -> None:
    from types import SimpleNamespace

    from market_spread.stream.job import ProgressSummary

    lines: list[str] = []
    summary = ProgressSummary(every=20, max_seconds=3600, out=lines.append)
    for b in range(45):
        summary(SimpleNamespace(batch_id=b, input_lines=3, quotes=1, orders=2, alerts=1, quarantined=0, seconds=0.5))
    summary.flush()
    assert lines == [
        "batch 19: 20 batches (0-19): 60 lines, 20 quotes, 40 orders, 20 alerts, 0 quarantined; last in 0.50s",
        "batch 39: 20 batches (20-39): 60 lines, 20 quotes, 40 orders, 20 alerts, 0 quarantined; last in 0.50s",
        "batch 44: 5 batches (40-44): 15 lines, 5 quotes, 10 orders, 5 alerts, 0 quarantined; last in 0.50s",
    ]
    # The supervisor's health check counts the batches a summary stands for.
    health = orch.StreamHealth(Path("/nonexistent"), 300)
    for line in lines:
        assert health.observe_line(line)
    assert (health.batches, health.last_batch_id) == (45, 44)
    assert health.observe_line("batch 45: 3 lines, 1 quotes, 2 orders, 1 alerts, 0 quarantined in 0.40s")
    assert health.batches == 46
    # A batch that no other follows is still reported within max_seconds, so the stall check never starves.
    slow: list[str] = []
    summary = ProgressSummary(every=20, max_seconds=0.3, out=slow.append)
    summary(SimpleNamespace(batch_id=7, input_lines=1, quotes=1, orders=0, alerts=0, quarantined=0, seconds=9.0))
    assert slow == []
    time.sleep(1.0)
    assert slow == ["batch 7: 1 batches (7-7): 1 lines, 1 quotes, 0 orders, 0 alerts, 0 quarantined; last in 9.00s"]

    argv = orch.stream_argv(orch.Settings())
    assert argv[argv.index("--progress-every") + 1] == "20"
    assert orch.resolve_settings(lambda name: "5" if name == "market_spread_progress_every" else None).progress_every == 5
