"""`market-spread-run` (what `make run` calls): the embedded default deployment.

Airflow standalone (SQLite, LocalExecutor) with `AIRFLOW_HOME=./.airflow`, the DAGs of `./dags`
unpaused, UI and API on 127.0.0.1:$PORT (default 8080) behind a login, data under `./data`.
Ctrl-C stops everything this started: first the scheduler (so that no new run starts a job while
we stop the others: the stream and feed DAGs run every minute, quality whenever alerts land), then the jobs (the
stream finishes the batch in flight, so the next start resumes from its checkpoint with nothing to
replay), then the rest of Airflow, then anything left, the Spark JVMs included, in rounds until
nothing is left (each process stopped is logged).

The Airflow REST API calls live in `airflow_client`, finding and stopping the run's processes in
`reaper`; this module starts things and decides the order in which they stop.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from market_spread.errors import SettingError
from market_spread.orchestration.probes import live_stream
from market_spread.orchestration.settings import Settings, resolve_settings
from market_spread.orchestration.tasks import LAKE_JOBS_POOL, LAKE_JOBS_POOL_DESCRIPTION
from market_spread.runtime.storage import S3Path
from market_spread_tools.airflow_client import (  # noqa: F401 - http_json, set_paused: tests reach the API here
    PASSWORD_FILE,
    USER,
    SetupError,
    api_token,
    ensure_password,
    ensure_pool,
    healthy,
    http_json,
    our_dag_ids,
    retried,
    set_paused,
    unpause_ours,
)
from market_spread_tools.airflow_loopback import shim_dir
from market_spread_tools.reaper import (
    RUN_MARKER,
    become_subreaper,
    descendants,
    describe,
    kinds,
    new_run_id,
    reap,
    say,
    still_running,
    stop_jobs,
    stop_leftovers_of_dead_runs,
    sweep,
    wait_gone,
)
from market_spread_tools.settings import source, value
from market_spread_tools.store_run import StorePlan, start_store, stop_store, storage_is_s3

if TYPE_CHECKING:
    from market_spread.feeds.broker import BrokerProcess

# A checkout tool: the project is the checkout this file sits in (tools/market_spread_tools/).
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def airflow_env(home: Path, port: int, dags: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of `airflow standalone` and everything it starts."""
    env = dict(os.environ if base is None else base)
    venv_bin = str(Path(sys.executable).parent)
    url = f"http://127.0.0.1:{port}"
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "MARKET_SPREAD_HOME": str(PROJECT_ROOT),  # registry: product (set here for every job)
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
            **airflow_metrics(),
            "NO_COLOR": "1",
            # standalone starts its components as `airflow ...` from PATH: first a wrapper that
            # keeps the log servers (every interface) off, then the venv's (airflow_loopback).
            "PATH": os.pathsep.join([str(shim_dir(home, Path(venv_bin) / "airflow")), venv_bin, env.get("PATH", "")]),
        }
    )
    return env


def airflow_metrics(statsd_port: int | None = None) -> dict[str, str]:
    """Airflow's own metrics as StatsD datagrams to 127.0.0.1:STATSD_PORT (docs/operations.md,
    Metrics), through a connected socket that opens nothing beyond the loopback; {} when the port is 0."""
    port = value("STATSD_PORT") if statsd_port is None else statsd_port
    if not port:
        return {}
    return {
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
        "AIRFLOW__METRICS__STATSD_PORT": str(port),
        "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
        "AIRFLOW__METRICS__STATSD_CUSTOM_CLIENT_PATH": "market_spread.orchestration.statsd_client.ConnectedStatsClient",
    }


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


# --------------------------------------------------------------------------------------------
# Stopping, in order: scheduler, jobs, Airflow, then whatever is left


def _airflow_scheduler(standalone: subprocess.Popen):
    """The `airflow scheduler` process started by standalone, if it runs."""
    try:
        children = psutil.Process(standalone.pid).children()
    except psutil.Error:
        return None
    for child in still_running(children):
        try:
            if "scheduler" in child.cmdline()[1:4]:
                return child
        except psutil.Error:
            pass
    return None


def stop_scheduler(standalone: subprocess.Popen, out: Callable[[str], None] = say):
    """SIGTERM the scheduler first: it schedules and queues nothing more, and it waits for the tasks
    already running (the jobs, stopped next) before it exits. Returns it (or None)."""
    scheduler = _airflow_scheduler(standalone)
    if scheduler is not None:
        out("stopping the Airflow scheduler (no new runs or tasks)")
        try:
            scheduler.send_signal(signal.SIGTERM)
        except psutil.Error:
            return None
    return scheduler


def stop_standalone(proc: subprocess.Popen, grace: float) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)  # standalone stops its components on KeyboardInterrupt
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass


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
        waited = wait_gone([scheduler], 20.0) if scheduler is not None else []
        if scheduler is None or waited:
            time.sleep(3)
    if not fast():
        out("stopping Airflow")
        stop_standalone(proc, 40.0)
    stopped, left = sweep(3.0 if fast() else 10.0, out=out, run_id=run_id)
    if stopped:
        out(f"terminated {len(stopped)} leftover process(es): {kinds(stopped)}")
    reap()
    left = still_running(left + [p for p in descendants(run_id) if p not in left])
    for p in left:
        out(f"still running: {describe(p)}")
    return left


# --------------------------------------------------------------------------------------------
# The Kafka broker of `make run SOURCE=kafka`


def source_is_kafka() -> bool:
    """`make run SOURCE=kafka` (or MARKET_SPREAD_SOURCE=kafka): run a broker beside Airflow.
    SettingError when the variable is neither files nor kafka."""
    chosen = value("SOURCE")
    if chosen is None:
        raw = os.environ.get("MARKET_SPREAD_SOURCE", "")  # registry: product
        try:
            chosen = source(raw) if raw.strip() else "files"
        except ValueError as exc:
            raise SettingError(f"environment variable MARKET_SPREAD_SOURCE={raw!r}: {exc}") from None
    return chosen == "kafka"


def start_kafka(env: dict[str, str]) -> BrokerProcess:
    """Start `market-spread broker` on 127.0.0.1 (KAFKA_PORT, default 9092; data in data/kafka,
    kept across runs), create the topics (the feeds' and `alerts`), and point the stream and feed DAGs at it through `env`.

    The broker is not a CLI job: `shutdown` stops it in its final sweep, after the stream has
    finished its batch in flight and Airflow is gone. It carries RUN_MARKER like every process of
    the run, so a run killed hard has it stopped by the next `make run`.
    """
    from market_spread.feeds.broker import BrokerProcess, port_open
    from market_spread.feeds.producer import ensure_topics

    port = value("KAFKA_PORT")
    if port_open(port) or port_open(port + 1000):
        raise RuntimeError(f"port {port} or {port + 1000} on 127.0.0.1 is in use: stop what holds it or set KAFKA_PORT")
    data = PROJECT_ROOT / "data" / "kafka"
    broker = BrokerProcess(data, port, port + 1000, log=PROJECT_ROOT / "data" / "kafka-broker.out", env=env)
    say(f"starting the Kafka broker on 127.0.0.1:{port} (data {data}; log {broker.log})")
    broker.start()
    # The stream never creates its alerts topic (contract 4b): the run makes it beside the feeds'.
    ensure_topics(broker.bootstrap, ["quotes", "orders", "alerts"])
    # registry: product (set here for the stream and feed jobs, which read them)
    env["MARKET_SPREAD_SOURCE"] = "kafka"
    env["MARKET_SPREAD_BOOTSTRAP_SERVERS"] = broker.bootstrap
    env["MARKET_SPREAD_ALERTS_TOPIC"] = "alerts"
    return broker


# --------------------------------------------------------------------------------------------
# One run: check, start, wait for Ctrl-C, stop


@dataclass(frozen=True)
class Launch:
    """What one `make run` was asked for, from the environment (market_spread_tools.settings)."""

    port: int
    home: Path  # AIRFLOW_HOME; overridable so that tests can run a private instance beside a real one
    start_paused: bool
    kafka: bool
    dags: Path = PROJECT_ROOT / "dags"
    store: StorePlan | None = None  # STORAGE=s3: the S3 server that holds landing and lake

    @classmethod
    def from_environment(cls) -> "Launch":
        home = value("MARKET_SPREAD_AIRFLOW_HOME") or PROJECT_ROOT / ".airflow"
        store = StorePlan.for_project(PROJECT_ROOT) if storage_is_s3() else None
        return cls(
            port=value("PORT"),
            home=Path(home).resolve(),
            start_paused=value("MARKET_SPREAD_START_PAUSED"),
            kafka=source_is_kafka(),
            store=store,
        )

    @property
    def log_path(self) -> Path:
        return self.home / "logs" / "standalone.log"


def preflight(launch: Launch) -> Settings | None:
    """Stop what a dead run left, refuse a taken port or a stream already running; None: refused.
    With STORAGE=s3 this process's environment (which Airflow and the jobs inherit) points at the
    S3 server, and its lake is checked once the server runs (start_run)."""
    stop_leftovers_of_dead_runs(launch.home)
    if not port_free(launch.port):
        say(f"error: port {launch.port} on 127.0.0.1 is in use: stop what holds it or run `make run PORT=8081`")
        return None
    if launch.store is not None:
        launch.store.apply(os.environ)
        return resolve_settings()
    settings = resolve_settings()
    return None if stream_running(settings) else settings


def stream_running(settings: Settings) -> bool:
    """True (said) when a stream already writes the lake."""
    holder = live_stream(settings.lake)
    if holder:
        say(f"error: a stream is already running on {settings.lake} (pid {holder.get('pid')}): stop it first")
    return bool(holder)


def count_signals() -> dict[str, int]:
    """Ctrl-C (or SIGTERM, SIGHUP) counted: the first stops in order, a second hurries."""
    stopping = {"count": 0}

    def on_signal(signum, _frame) -> None:
        stopping["count"] += 1
        if stopping["count"] > 1:
            say("stopping faster (second signal)")

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    return stopping


def metrics_line(env: dict[str, str]) -> str:
    """Where the stream will serve its metrics, or why it cannot: the port taken (by a stream started
    by hand, say) or 0. Probed now; the stream says the same on the Stream page when it starts."""
    from market_spread.observation.metrics import off_reason

    host, port = value("MARKET_SPREAD_METRICS_HOST", env), value("MARKET_SPREAD_METRICS_PORT", env)
    if not port:
        return "off (MARKET_SPREAD_METRICS_PORT=0)"
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            return f"none: {off_reason(host, port, exc)}"
    return f"http://{host}:{port}/metrics (the stream's, once it runs)"


def banner(launch: Launch, password: str, settings: Settings, env: dict[str, str], broker, seconds: float) -> str:
    """What a person needs once Airflow is up: the login, the DAGs, where the data goes."""
    paused = " (paused: MARKET_SPREAD_START_PAUSED)" if launch.start_paused else " (unpaused)"
    landing = settings.landing  # on the S3 server with a store
    source_line = (
        f"  kafka       {env['MARKET_SPREAD_BOOTSTRAP_SERVERS']} (topics quotes, orders; alerts published to alerts; data {broker.data})"
        if broker
        else f"  landing     {landing.uri('s3') if launch.store and isinstance(landing, S3Path) else landing}"
    )
    store = launch.store
    store_lines = (
        [
            f"  S3 server   {store.endpoint} (bucket {store.bucket}; data {store.data}; log {store.log})",
            f"  data docs   {settings.docs}",
        ]
        if store
        else []
    )
    alerts = (
        store.sql_hint()
        if store
        else f'.venv/bin/market-spread sql --lake {settings.lake} "SELECT reason, count(*) FROM alerts GROUP BY reason"'
    )
    return "\n".join(
        [
            "",
            f"  Airflow UI  http://127.0.0.1:{launch.port}   login: {USER} / {password}",
            f"              (password kept in {launch.home / PASSWORD_FILE}, mode 0600)",
            f"  DAGs        {', '.join(our_dag_ids(launch.dags))}{paused}",
            f"  lake        {store.lake if store else settings.lake}",
            source_line,
            *store_lines,
            f"  alerts      {alerts}",
            f"  metrics     {metrics_line(env)}",
            f"  ready after {seconds:.0f}s; Ctrl-C stops everything",
            "",
        ]
    )


def on_ready(launch: Launch, password: str) -> None:
    """Once Airflow is healthy: the lake jobs' pool checked (created before the scheduler started,
    see prepare_airflow), then our DAGs unpaused (unless asked not to); retried with backoff, and
    SetupError when that cannot be done: a run without its pool would never check anything."""

    def setup() -> None:
        token = api_token(launch.port, password)
        ensure_pool(launch.port, token)
        if not launch.start_paused:
            unpause_ours(launch.port, token, launch.dags)

    retried(setup, f"create the {LAKE_JOBS_POOL} pool and unpause the DAGs through the Airflow API", out=say)
    cfg = launch.home / "airflow.cfg"
    if cfg.exists():
        os.chmod(cfg, 0o600)  # it holds the generated secret keys


def prepare_airflow(env: dict[str, str]) -> str | None:
    """Before standalone starts its scheduler: the metadata database migrated and the lake jobs'
    pool created by the CLI on the same AIRFLOW_HOME, so that no task ever waits on a missing pool
    (standalone's own migration then finds nothing to do). An error message, or None."""
    airflow = str(Path(sys.executable).parent / "airflow")
    for args in (["db", "migrate"], ["pools", "set", LAKE_JOBS_POOL, "1", LAKE_JOBS_POOL_DESCRIPTION]):
        command = f"airflow {args[0]} {args[1]}"
        try:
            done = subprocess.run([airflow, *args], env=env, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"`{command}` failed: {exc}"
        if done.returncode != 0:
            last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
            return f"`{command}` exited with code {done.returncode}: {last}"
    return None


@dataclass(frozen=True)
class Running:
    """What `start_run` started: Airflow standalone, its environment (every process of the run
    inherits it, RUN_MARKER included), the broker of SOURCE=kafka and the S3 server of STORAGE=s3."""

    proc: subprocess.Popen
    env: dict[str, str]
    broker: BrokerProcess | None
    store: subprocess.Popen | None = None

    @property
    def run_id(self) -> str:
        return self.env[RUN_MARKER]


def start_run(launch: Launch) -> Running | None:
    """Airflow's database and pool, the broker (SOURCE=kafka), then Airflow standalone; None when
    one of the first two cannot be done (nothing is left running then)."""
    env = airflow_env(launch.home, launch.port, launch.dags)
    env[RUN_MARKER] = new_run_id()
    say(f"preparing Airflow (database migration, the {LAKE_JOBS_POOL} pool)")
    error = prepare_airflow(env)
    if error is not None:
        say(f"error: {error}")
        return None
    store = start_s3(launch, env)
    if launch.store is not None and store is None:
        return None
    broker = None
    if launch.kafka:
        try:
            broker = start_kafka(env)
        except (RuntimeError, ConnectionError, SettingError) as exc:  # SettingError: KAFKA_PORT
            say(f"error: {exc}")
            if store is not None:
                stop_store(store)
            return None
    if launch.start_paused:
        env["AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION"] = "True"
    say(
        f"starting Airflow standalone on http://127.0.0.1:{launch.port} (AIRFLOW_HOME={launch.home}; log {launch.log_path})"
    )
    return Running(start_standalone(env, launch.log_path), env, broker, store)


def start_s3(launch: Launch, env: dict[str, str]) -> subprocess.Popen | None:
    """STORAGE=s3: the S3 server (data kept in data/object-store), then the check that no stream
    already writes its lake; None (said, nothing left running) when either fails, or without STORAGE=s3."""
    plan = launch.store
    if plan is None:
        return None
    say(f"starting the S3 server on {plan.endpoint} (data {plan.data}; log {plan.log})")
    try:
        store = start_store(plan, env)
    except RuntimeError as exc:
        say(f"error: {exc}")
        return None
    if stream_running(resolve_settings()):
        stop_store(store)
        return None
    return store


def wait_for_stop(launch: Launch, run: Running, password: str, settings: Settings, stopping: dict[str, int]) -> int:
    """Until a signal (0) or Airflow's exit (1); the banner once Airflow is healthy."""
    started = time.monotonic()
    ready = False
    while not stopping["count"]:
        if run.proc.poll() is not None:
            say(f"error: Airflow exited with code {run.proc.returncode}; see {launch.log_path}")
            return 1
        if not ready and healthy(launch.port):
            ready = True
            try:
                on_ready(launch, password)
            except SetupError as exc:
                say(f"error: {exc}; stopping")
                return 1
            print(banner(launch, password, settings, run.env, run.broker, time.monotonic() - started), flush=True)
        reap()
        time.sleep(1)
    return 0


def stop_run(run: Running, stopping: dict[str, int]) -> bool:
    """Everything this run started, in order; True when nothing is left running."""
    say("stopping (Ctrl-C again to hurry)")
    left = shutdown(run.proc, fast=lambda: stopping["count"] > 1, run_id=run.run_id)
    if run.broker is not None and run.broker.alive():  # normally already stopped by the final sweep
        say("stopping the Kafka broker")
        run.broker.stop()
    if run.store is not None and run.store.poll() is None:  # likewise
        say("stopping the S3 server")
        stop_store(run.store)
    if left:
        say(f"error: still running: {[p.pid for p in left]}")
        return False
    say("stopped; nothing left running. `make run` resumes from the checkpoint.")
    return True


def main() -> int:
    try:
        launch = Launch.from_environment()
    except SettingError as exc:
        say(f"error: {exc}")
        return 1
    os.umask(0o077)  # everything written below (.airflow, data/) is readable by its owner only
    # As every job gets it (airflow_env): the banner and the lake check then name the jobs' paths.
    os.environ["MARKET_SPREAD_HOME"] = str(PROJECT_ROOT)  # registry: product
    settings = preflight(launch)
    if settings is None:
        return 1
    password = ensure_password(launch.home)
    if not become_subreaper():
        say("warning: could not become a child subreaper: orphaned processes may escape the final sweep")
    stopping = count_signals()
    run = start_run(launch)
    if run is None:
        return 1
    exit_code = 0
    try:
        exit_code = wait_for_stop(launch, run, password, settings, stopping)
    finally:
        if not stop_run(run, stopping):
            exit_code = exit_code or 1
    return exit_code


if __name__ == "__main__":
    raise SystemExit(main())
