"""`market-spread-run` (what `make run` calls): the embedded default deployment.

Airflow standalone (SQLite, LocalExecutor) with `AIRFLOW_HOME=./.airflow`, the DAGs of `./dags`
unpaused, UI and API on 127.0.0.1:$PORT (default 8080) behind a login, data under `./data`.
Ctrl-C stops everything this started: first the scheduler (so that no new run starts a job while
we stop the others: the stream, feed and quality DAGs run every minute), then the jobs (the
stream finishes the batch in flight, so the next start resumes from its checkpoint with nothing to
replay), then the rest of Airflow, then anything left, the Spark JVMs included, in rounds until
nothing is left (each process stopped is logged).

What counts as "started by us" is tracked two ways, so nothing can slip out of the final sweep:
this process registers as a child subreaper (a process whose parent died, even one that called
setsid, is re-parented here and stays in our tree), and every process started for this run
inherits the environment variable MARKET_SPREAD_RUN_ID with a value unique to it (Airflow's
components, workers and task processes, the CLI jobs and their Spark JVMs all pass the environment
on), which the sweep also looks for in /proc, in case something ever leaves the tree.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

from market_spread.orchestration.probes import live_stream
from market_spread.orchestration.settings import resolve_settings
from market_spread.runtime.env import TRUE_WORDS
from market_spread_tools.airflow_loopback import shim_dir

# A checkout tool: the project is the checkout this file sits in (tools/market_spread_tools/).
PROJECT_ROOT = Path(__file__).resolve().parents[2]
USER = "admin"
PASSWORD_FILE = "simple_auth_manager_passwords.json.generated"  # Airflow 3.3's default name
RUN_MARKER = "MARKET_SPREAD_RUN_ID"  # in the environment of every process started for one run
_PR_SET_CHILD_SUBREAPER = 36


def say(message: str) -> None:
    print(f"market-spread-run: {message}", flush=True)


def airflow_env(home: Path, port: int, dags: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of `airflow standalone` and everything it starts."""
    env = dict(os.environ if base is None else base)
    venv_bin = str(Path(sys.executable).parent)
    url = f"http://127.0.0.1:{port}"
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "MARKET_SPREAD_HOME": str(PROJECT_ROOT),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            # LocalExecutor forks this many workers up front (~130 MB each): 4 DAGs need few.
            "AIRFLOW__CORE__PARALLELISM": "8",
            # New DAG files are found within seconds instead of 5 minutes.
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "30",
            # Loopback only; the workers reach the execution API on the same port.
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__BASE_URL": url,
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
            # Logins required: one admin, password generated into a file only its owner can read.
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / PASSWORD_FILE),
            # A task left "running" by a hard stop is failed after this, so the stream DAG (one run at
            # a time) is free to restart the job soon after the next start.
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "90",
            "AIRFLOW__API__EXPOSE_CONFIG": "False",
            "NO_COLOR": "1",
            # standalone starts its components as `airflow ...` from PATH: first a wrapper that
            # keeps the log servers (every interface) off, then the venv's (airflow_loopback).
            "PATH": os.pathsep.join([str(shim_dir(home, Path(venv_bin) / "airflow")), venv_bin, env.get("PATH", "")]),
        }
    )
    return env


def ensure_password(home: Path) -> str:
    """The admin password: generated once into AIRFLOW_HOME, mode 0600, reused afterwards."""
    home.mkdir(parents=True, exist_ok=True)
    os.chmod(home, 0o700)
    path = home / PASSWORD_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        os.chmod(path, 0o600)
        try:
            passwords = json.loads(path.read_text(encoding="utf-8") or "{}")
        except ValueError:
            passwords = {}
        if USER in passwords:
            return str(passwords[USER])
        passwords[USER] = secrets.token_urlsafe(18)
        path.write_text(json.dumps(passwords) + "\n", encoding="utf-8")
        return passwords[USER]
    password = secrets.token_urlsafe(18)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps({USER: password}) + "\n")
    return password


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_json(method: str, url: str, body: dict | None = None, token: str | None = None, timeout: float = 10) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        raw = response.read()
    return json.loads(raw) if raw else {}


def healthy(port: int) -> bool:
    """Every Airflow component reports healthy through the API."""
    try:
        health = http_json("GET", f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=3)
    except (OSError, ValueError, urllib.error.URLError):
        return False
    parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
    return all((health.get(p) or {}).get("status") == "healthy" for p in parts)


def api_token(port: int, password: str, user: str = USER) -> str:
    return http_json("POST", f"http://127.0.0.1:{port}/auth/token", {"username": user, "password": password})["access_token"]


def set_paused(port: int, token: str, dag_id: str, paused: bool) -> None:
    http_json("PATCH", f"http://127.0.0.1:{port}/api/v2/dags/{dag_id}", {"is_paused": paused}, token)


def our_dag_ids(dags: Path) -> list[str]:
    # Each file is named after its DAG (checked by tests/orchestration/test_dag_integrity.py).
    return sorted(p.stem for p in dags.glob("market_spread_*.py"))


def ensure_pool(port: int, token: str) -> None:
    """The pool that serialises the lake jobs (validate, maintain): 1 slot. Tasks of a pool that does
    not exist are never queued, so it is created before the DAGs are unpaused."""
    from market_spread.orchestration.tasks import LAKE_JOBS_POOL, LAKE_JOBS_POOL_DESCRIPTION

    body = {"name": LAKE_JOBS_POOL, "slots": 1, "description": LAKE_JOBS_POOL_DESCRIPTION, "include_deferred": False}
    try:
        http_json("POST", f"http://127.0.0.1:{port}/api/v2/pools", body, token)
    except urllib.error.HTTPError as exc:
        if exc.code != 409:  # 409: it exists (an earlier run); make sure it still has one slot
            raise
        http_json("PATCH", f"http://127.0.0.1:{port}/api/v2/pools/{LAKE_JOBS_POOL}", body, token)


def unpause_ours(port: int, token: str, dags: Path) -> list[str]:
    """Unpause our DAGs known to Airflow (new ones are created unpaused anyway)."""
    done = []
    for dag_id in our_dag_ids(dags):
        try:
            set_paused(port, token, dag_id, False)
            done.append(dag_id)
        except urllib.error.HTTPError as exc:
            if exc.code != 404:  # 404: not parsed yet; it will be created unpaused
                raise
    return done


# --------------------------------------------------------------------------------------------
# Processes: start, track, stop


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _reset_signals() -> None:
    # A shell's background job starts with SIGINT ignored; standalone needs it to shut down.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def start_standalone(env: dict[str, str], log_path: Path) -> subprocess.Popen:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log_file:
        # Its own session: a Ctrl-C reaches only us, and we stop things in the right order.
        return subprocess.Popen(
            [str(Path(sys.executable).parent / "airflow"), "standalone"],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(PROJECT_ROOT),
            start_new_session=True,
            preexec_fn=_reset_signals,
        )


def new_run_id() -> str:
    return f"{os.getpid()}-{secrets.token_hex(8)}"


def marked(run_id: str | None) -> list:
    """Processes (other than this one) whose environment carries RUN_MARKER=run_id."""
    import psutil

    if not run_id:
        return []
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(RUN_MARKER) == run_id:
                found.append(proc)
        except psutil.Error:  # gone, a zombie, or not ours to read
            pass
    return found


def descendants(run_id: str | None = None) -> list:
    """Every process below this one, plus (given run_id) every process marked with it."""
    import psutil

    try:
        procs = psutil.Process().children(recursive=True)
    except psutil.NoSuchProcess:
        procs = []
    known = {p.pid for p in procs}
    return procs + [p for p in marked(run_id) if p.pid not in known]


def reap() -> None:
    """Collect exit statuses of adopted orphans (we are their subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def leftovers_of_dead_runs(home: Path) -> list:
    """Processes of an earlier run on this AIRFLOW_HOME whose launcher is gone (killed with -9,
    say): a stale scheduler or stream would fight the new one over the database and the lake."""
    import psutil

    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            env = proc.environ()
        except psutil.Error:
            continue
        run_id = env.get(RUN_MARKER, "")
        if not run_id or env.get("AIRFLOW_HOME") != str(home):
            continue
        launcher = run_id.split("-", 1)[0]
        try:
            alive = launcher.isdigit() and any("market-spread-run" in part for part in psutil.Process(int(launcher)).cmdline())
        except psutil.Error:
            alive = False
        if not alive:
            found.append(proc)
    return found


def stop_leftovers_of_dead_runs(home: Path, out: Callable[[str], None] = say) -> int:
    import psutil

    stale = _alive(leftovers_of_dead_runs(home))
    if stale:
        out(f"stopping {len(stale)} process(es) left by an earlier run on {home} whose launcher is gone:")
        for p in stale:
            out(f"  {describe(p)}")
        for p in stale:
            with contextlib.suppress(psutil.Error):
                p.terminate()
        for p in _wait_gone(stale, 15.0):
            with contextlib.suppress(psutil.Error):
                p.kill()
        _wait_gone(stale, 5.0)
    return len(stale)


def _is_cli(proc) -> bool:
    try:
        cmd = proc.cmdline()
    except Exception:
        return False
    return any("market_spread.cli.main" in part or part.endswith("/market-spread") for part in cmd[:3])


def _alive(procs: list) -> list:
    """Those still running; a zombie (exited, waiting to be reaped) counts as gone."""
    import psutil

    alive = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.Error:
            pass
    return alive


def _wait_gone(procs: list, timeout: float) -> list:
    """Wait until every process has exited (zombies count as exited); returns the survivors.

    Not psutil.wait_procs: most of these are not our children, and for those it waits until the
    pid disappears, which for a zombie whose parent is busy can be never.
    """
    deadline = time.monotonic() + timeout
    while True:
        reap()
        alive = _alive(procs)
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.2)


def describe(proc) -> str:
    """`pid state command line` (shortened), for the shutdown log."""
    import psutil

    try:
        with proc.oneshot():
            cmd = proc.cmdline()
            status = proc.status()
    except psutil.Error:
        return f"{proc.pid} (gone)"
    if not cmd:
        text = f"[{proc.name() if proc.is_running() else '?'}]"
    else:
        if cmd[1:2] == ["-c"] and len(cmd) > 2 and "market_spread.cli.main" in cmd[2]:
            cmd = ["market-spread", *cmd[3:]]  # orchestration.jobs.cli_argv
        elif Path(cmd[0]).name.startswith("python") and len(cmd) > 1 and cmd[1].endswith("/airflow"):
            cmd = ["airflow", *cmd[2:]]
        elif Path(cmd[0]).name == "java":
            main = next((a for a in cmd if a.startswith("org.apache.")), "")
            cmd = ["java", main, *([a for a in cmd if a.endswith("pyspark-shell")][:1])]
        text = " ".join([Path(cmd[0]).name, *cmd[1:]])
    return f"{proc.pid} {status} {text[:140]}"


def _airflow_scheduler(standalone: subprocess.Popen):
    """The `airflow scheduler` process started by standalone, if it runs."""
    import psutil

    try:
        children = psutil.Process(standalone.pid).children()
    except psutil.Error:
        return None
    for child in _alive(children):
        try:
            if "scheduler" in child.cmdline()[1:4]:
                return child
        except psutil.Error:
            pass
    return None


def stop_scheduler(standalone: subprocess.Popen, out: Callable[[str], None] = say):
    """SIGTERM the scheduler first: it schedules and queues nothing more, and it waits for the tasks
    already running (the jobs, stopped next) before it exits. Returns it (or None)."""
    import psutil

    scheduler = _airflow_scheduler(standalone)
    if scheduler is not None:
        out("stopping the Airflow scheduler (no new runs or tasks)")
        try:
            scheduler.send_signal(signal.SIGTERM)
        except psutil.Error:
            return None
    return scheduler


def stop_jobs(
    grace: float,
    out: Callable[[str], None] = say,
    fast: Callable[[], bool] = lambda: False,
    scheduler=None,
    settle: float = 5.0,
    run_id: str | None = None,
) -> list:
    """SIGTERM our CLI jobs (the stream ends after its batch in flight) and wait for them.

    A task still running can start another job meanwhile (a validate that waited for the lake's
    jobs lock, a task the scheduler had already handed to a worker): new jobs get SIGTERM too.
    Done when no job runs and the scheduler has exited (it waits for its tasks), or no job has run
    for `settle` seconds, or after `grace` seconds. Returns the jobs still running.
    """
    import psutil

    signalled: set = set()
    deadline = time.monotonic() + grace
    quiet_since: float | None = None
    jobs: list = []
    while time.monotonic() < deadline and not fast():
        reap()
        jobs = _alive([p for p in descendants(run_id) if _is_cli(p)])
        fresh = [p for p in jobs if p not in signalled]
        if fresh:
            if not signalled:
                out(f"stopping {len(fresh)} job(s) (the stream finishes its batch in flight; up to {grace:.0f}s)")
            else:
                out(f"stopping {len(fresh)} job(s) started meanwhile")
            for proc in fresh:
                out(f"  SIGTERM {describe(proc)}")
                try:
                    proc.send_signal(signal.SIGTERM)
                except psutil.Error:
                    pass
                signalled.add(proc)
        if jobs:
            quiet_since = None
        else:
            now = time.monotonic()
            quiet_since = quiet_since or now
            if scheduler is None or not _alive([scheduler]) or now - quiet_since >= settle:
                return []
        time.sleep(0.5)
    return jobs


def stop_standalone(proc: subprocess.Popen, grace: float) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)  # standalone stops its components on KeyboardInterrupt
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass


def _kinds(procs: list) -> str:
    """`3 x airflow worker, 1 x java` style summary of what was stopped."""
    counts: dict[str, int] = {}
    for text in procs:
        words = text.split(" ", 2)[2].split() if text.count(" ") >= 2 else ["?"]
        kind = " ".join(words[:2]) if words[0] in ("airflow", "market-spread") else words[0]
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} x {kind}" for kind, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def sweep(
    grace: float = 10.0,
    limit: float = 90.0,
    out: Callable[[str], None] = say,
    run_id: str | None = None,
) -> tuple[list[str], list]:
    """Terminate every process still below us (orphans included) or marked with run_id, then kill
    what resists.

    In rounds until a snapshot finds nothing alive: a process can fork after a snapshot, or leave
    children that are re-parented to us (the subreaper) only once it is gone, so one pass is not
    enough. SIGTERM first, SIGKILL after `grace` seconds (and for every process that shows up once
    `limit` seconds have passed). Returns (description of each process stopped, survivors).
    """
    import psutil

    stopped: dict = {}
    started = time.monotonic()
    rounds = 0
    while True:
        reap()
        procs = _alive(descendants(run_id))
        if not procs:
            return list(stopped.values()), []
        if rounds and time.monotonic() - started > limit + grace + 10:
            return list(stopped.values()), procs
        rounds += 1
        for proc in procs:
            stopped.setdefault(proc, describe(proc))
        hurry = time.monotonic() - started > limit
        for proc in procs:
            try:
                proc.send_signal(signal.SIGKILL if hurry else signal.SIGTERM)
            except psutil.Error:
                pass
        resisting = _wait_gone(procs, 5.0 if hurry else grace)
        if resisting:
            out(f"round {rounds}: SIGKILL to {len(resisting)} process(es) still running after SIGTERM: "
                + "; ".join(describe(p) for p in resisting))
            for proc in resisting:
                try:
                    proc.kill()
                except psutil.Error:
                    pass
            _wait_gone(resisting, 5.0)


def shutdown(
    proc: subprocess.Popen,
    out: Callable[[str], None] = say,
    fast: Callable[[], bool] = lambda: False,
    run_id: str | None = None,
) -> list:
    """Stop the scheduler, then the jobs, then Airflow, then anything left.

    Returns what is still alive (should be []).
    """
    if not fast():
        scheduler = stop_scheduler(proc, out)
        stop_jobs(150.0, out, fast, scheduler, run_id=run_id)
        # Let the supervising tasks report their result before Airflow goes away.
        waited = _wait_gone([scheduler], 20.0) if scheduler is not None else []
        if scheduler is None or waited:
            time.sleep(3)
    if not fast():
        out("stopping Airflow")
        stop_standalone(proc, 40.0)
    stopped, left = sweep(3.0 if fast() else 10.0, out=out, run_id=run_id)
    if stopped:
        out(f"terminated {len(stopped)} leftover process(es): {_kinds(stopped)}")
    reap()
    left = _alive(left + [p for p in descendants(run_id) if p not in left])
    for p in left:
        out(f"still running: {describe(p)}")
    return left


def source_is_kafka() -> bool:
    """`make run SOURCE=kafka` (or MARKET_SPREAD_SOURCE=kafka): run a broker beside Airflow."""
    value = (os.environ.get("SOURCE") or os.environ.get("MARKET_SPREAD_SOURCE") or "files").strip().lower()
    if value not in ("files", "kafka"):
        raise SystemExit(f"market-spread-run: error: SOURCE must be files or kafka, got {value!r}")
    return value == "kafka"


def start_kafka(env: dict[str, str]):
    """Start `market-spread broker` on 127.0.0.1 (KAFKA_PORT, default 9092; data in data/kafka,
    kept across runs), create the topics, and point the stream and feed DAGs at it through `env`.

    The broker is not a CLI job: `shutdown` stops it in its final sweep, after the stream has
    finished its batch in flight and Airflow is gone. It carries RUN_MARKER like every process of
    the run, so a run killed hard has it stopped by the next `make run`.
    """
    from market_spread.feeds.broker import BrokerProcess, port_open
    from market_spread.feeds.producer import ensure_topics

    port = int(os.environ.get("KAFKA_PORT") or 9092)
    if port_open(port) or port_open(port + 1000):
        raise RuntimeError(f"port {port} or {port + 1000} on 127.0.0.1 is in use: stop what holds it or set KAFKA_PORT")
    data = PROJECT_ROOT / "data" / "kafka"
    broker = BrokerProcess(data, port, port + 1000, log=PROJECT_ROOT / "data" / "kafka-broker.out", env=env)
    say(f"starting the Kafka broker on 127.0.0.1:{port} (data {data}; log {broker.log})")
    broker.start()
    ensure_topics(broker.bootstrap, ["quotes", "orders"])
    env["MARKET_SPREAD_SOURCE"] = "kafka"
    env["MARKET_SPREAD_BOOTSTRAP_SERVERS"] = broker.bootstrap
    return broker


def main() -> int:
    port = int(os.environ.get("PORT") or 8080)
    # Overridable so that tests can run a private instance beside a real one.
    home = Path(os.environ.get("MARKET_SPREAD_AIRFLOW_HOME") or PROJECT_ROOT / ".airflow").resolve()
    start_paused = os.environ.get("MARKET_SPREAD_START_PAUSED", "").strip().lower() in TRUE_WORDS
    dags = PROJECT_ROOT / "dags"
    os.umask(0o077)  # everything written below (.airflow, data/) is readable by its owner only
    stop_leftovers_of_dead_runs(home)
    if not port_free(port):
        say(f"error: port {port} on 127.0.0.1 is in use: stop what holds it or run `make run PORT=8081`")
        return 1
    settings = resolve_settings()
    holder = live_stream(settings.lake)
    if holder:
        say(f"error: a stream is already running on {settings.lake} (pid {holder.get('pid')}): stop it first")
        return 1
    password = ensure_password(home)
    if not become_subreaper():
        say("warning: could not become a child subreaper: orphaned processes may escape the final sweep")

    stopping = {"count": 0}

    def on_signal(signum, _frame) -> None:
        stopping["count"] += 1
        if stopping["count"] > 1:
            say("stopping faster (second signal)")

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    log_path = home / "logs" / "standalone.log"
    env = airflow_env(home, port, dags)
    run_id = env[RUN_MARKER] = new_run_id()
    broker = None
    if source_is_kafka():
        try:
            broker = start_kafka(env)
        except (RuntimeError, ConnectionError) as exc:
            say(f"error: {exc}")
            return 1
    if start_paused:
        env["AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION"] = "True"
    say(f"starting Airflow standalone on http://127.0.0.1:{port} (AIRFLOW_HOME={home}; log {log_path})")
    proc = start_standalone(env, log_path)
    started = time.monotonic()
    ready = False
    exit_code = 0
    try:
        while not stopping["count"]:
            if proc.poll() is not None:
                say(f"error: Airflow exited with code {proc.returncode}; see {log_path}")
                exit_code = 1
                break
            if not ready and healthy(port):
                ready = True
                unpaused: list[str] = []
                try:
                    token = api_token(port, password)
                    ensure_pool(port, token)
                    if not start_paused:
                        unpaused = unpause_ours(port, token, dags)
                except (OSError, urllib.error.URLError, KeyError, ValueError) as exc:
                    say(f"warning: could not create the lake_jobs pool or unpause the DAGs through the API: {exc}")
                cfg = home / "airflow.cfg"
                if cfg.exists():
                    os.chmod(cfg, 0o600)  # it holds the generated secret keys
                print(
                    "\n"
                    f"  Airflow UI  http://127.0.0.1:{port}   login: {USER} / {password}\n"
                    f"              (password kept in {home / PASSWORD_FILE}, mode 0600)\n"
                    f"  DAGs        {', '.join(our_dag_ids(dags))}"
                    + (" (paused: MARKET_SPREAD_START_PAUSED)" if start_paused else " (unpaused)") + "\n"
                    f"  lake        {settings.lake}\n"
                    + (f"  kafka       {env['MARKET_SPREAD_BOOTSTRAP_SERVERS']} (topics quotes, orders; data "
                       f"{broker.data})\n" if broker else f"  landing     {settings.landing}\n")
                    +
                    f"  alerts      .venv/bin/market-spread sql --lake {settings.lake} "
                    "\"SELECT reason, count(*) FROM alerts GROUP BY reason\"\n"
                    f"  ready after {time.monotonic() - started:.0f}s; Ctrl-C stops everything\n",
                    flush=True,
                )
            reap()
            time.sleep(1)
    finally:
        say("stopping (Ctrl-C again to hurry)")
        left = shutdown(proc, fast=lambda: stopping["count"] > 1, run_id=run_id)
        if broker is not None and broker.alive():  # normally already stopped by the final sweep
            say("stopping the Kafka broker")
            broker.stop()
        if left:
            say(f"error: still running: {[p.pid for p in left]}")
            exit_code = exit_code or 1
        else:
            say("stopped; nothing left running. `make run` resumes from the checkpoint.")
    return exit_code


if __name__ == "__main__":
    raise SystemExit(main())
