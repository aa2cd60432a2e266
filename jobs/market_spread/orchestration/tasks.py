"""What the Airflow DAGs call: configuration, the stream supervisor, its health check, job runners.

DAG files stay thin and do no I/O at import; everything that touches files, processes or Airflow
Variables happens here, at task run time. Module-level imports are the standard library only, so
parsing a DAG file stays fast (no pyspark, no airflow-core).

Configuration: each setting comes from the Airflow Variable `market_spread_<name>`, else from the
environment variable `MARKET_SPREAD_<NAME>`, else from the default below. Relative paths are taken
from the project root. Every CLI command runs as a child process (`python -m market_spread.cli.main`)
so that a Spark JVM never lives inside an Airflow worker and can always be stopped.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from market_spread.runtime.env import ENV_PREFIX, FALSE_WORDS, TRUE_WORDS
from market_spread.runtime.paths import project_home
from market_spread.runtime.processes import pid_alive, record_alive  # pid_alive: kept importable from here for callers
from market_spread.runtime.stream_contract import EXIT_LAKE_BUSY, LOCK_FILE

VAR_PREFIX = "market_spread_"
# The Airflow pool (1 slot) that serialises the lake's other writers: validate appends
# quality_results, maintain rewrites files; two JVMs committing to one Delta table on a local file
# system can overwrite each other's commit. A pool slot, not a lock awaited inside a worker slot.
LAKE_JOBS_POOL = "lake_jobs"
LAKE_JOBS_POOL_DESCRIPTION = "market-spread: validate and maintain write the lake one at a time"
HOLD_VARIABLE = "market_spread_stream_hold"
START_DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)
OWNER = "data-platform"

log = logging.getLogger("market_spread.orchestration.tasks")
Logger = Callable[[str], None]


def _bool(text: str) -> bool:
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"not a boolean: {text!r} (use true/false)")


def _positive(convert: Callable[[str], float]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = convert(text)
        if not value > 0:
            raise ValueError(f"must be > 0: {text!r}")
        return value

    return parse


def _path(text: str) -> Path:
    path = Path(text).expanduser()
    return path if path.is_absolute() else project_home() / path


def _optional(text: str) -> str | None:
    return text.strip() or None


def _source(text: str) -> str:
    value = text.strip().lower()
    if value not in ("files", "kafka"):
        raise ValueError(f"expected files or kafka, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"must be >= 0: {text!r}")
    return value


@dataclass(frozen=True)
class Settings:
    """Everything the DAGs need; see the module docstring for where each value comes from."""

    lake: Path = field(default_factory=lambda: project_home() / "data" / "lake", metadata={"parse": _path})
    landing: Path = field(default_factory=lambda: project_home() / "data" / "landing", metadata={"parse": _path})
    docs: Path = field(default_factory=lambda: project_home() / "data" / "quality", metadata={"parse": _path})
    symbols: str | None = field(default=None, metadata={"parse": _optional})
    master: str | None = field(default=None, metadata={"parse": _optional})
    max_spread: str | None = field(default=None, metadata={"parse": _optional})
    max_spread_ratio: str | None = field(default=None, metadata={"parse": _optional})
    # The stream
    stream_enabled: bool = field(default=True, metadata={"parse": _bool})
    interval: float = field(default=5.0, metadata={"parse": _positive(float)})
    stall_seconds: float = field(default=300.0, metadata={"parse": _positive(float)})
    # Before its first batch a job starts a JVM, recovers and takes the whole backlog: more slack.
    startup_seconds: float = field(default=900.0, metadata={"parse": _positive(float)})
    stop_timeout: float = field(default=180.0, metadata={"parse": _positive(float)})
    # One summary line per this many batches in the task log (per-batch figures: batch_metrics).
    progress_every: int = field(default=20, metadata={"parse": _positive(int)})
    # The demo feed
    feed_enabled: bool = field(default=True, metadata={"parse": _bool})
    feed_rate: float = field(default=20.0, metadata={"parse": _positive(float)})
    feed_seconds: float = field(default=50.0, metadata={"parse": _positive(float)})
    feed_tick: float = field(default=5.0, metadata={"parse": _positive(float)})
    # Kafka instead of the landing folder (`make run SOURCE=kafka` sets these for its broker)
    source: str = field(default="files", metadata={"parse": _source})
    bootstrap_servers: str | None = field(default=None, metadata={"parse": _optional})
    quotes_topic: str | None = field(default=None, metadata={"parse": _optional})
    orders_topic: str | None = field(default=None, metadata={"parse": _optional})
    # Maintenance
    retain_hours: int = field(default=168, metadata={"parse": _positive(int)})
    maintenance_window: bool = field(default=True, metadata={"parse": _bool})
    maintenance_min_files: int = field(default=32, metadata={"parse": _non_negative_int})
    # Quote history kept by maintain, in days; 0 keeps everything.
    quote_retention_days: int = field(default=0, metadata={"parse": _non_negative_int})


def resolve_settings(lookup: Callable[[str], str | None] | None = None) -> Settings:
    """Settings from `lookup(variable_name)` (Airflow Variables by default), the environment, defaults.

    A malformed value raises ValueError naming where it came from: a bad setting should fail the
    task loudly rather than run the job with a value nobody chose.
    """
    lookup = lookup or airflow_variable
    values: dict[str, Any] = {}
    for f in fields(Settings):
        var_name, env_name = VAR_PREFIX + f.name, ENV_PREFIX + f.name.upper()
        raw, source = lookup(var_name), f"Variable {var_name}"
        if raw is None or str(raw).strip() == "":
            raw, source = os.environ.get(env_name), f"environment {env_name}"
        if raw is None or str(raw).strip() == "":
            continue
        try:
            values[f.name] = f.metadata["parse"](str(raw))
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None
    return Settings(**values)


def in_airflow_task() -> bool:
    """True inside a running Airflow task (where Variables can be asked for)."""
    runner = sys.modules.get("airflow.sdk.execution_time.task_runner")
    return runner is not None and getattr(runner, "SUPERVISOR_COMMS", None) is not None


def airflow_variable(name: str) -> str | None:
    """An Airflow Variable's value; None when unset or outside a task (CLI, tests).

    Inside a task an API error propagates: silently falling back to defaults could point the job
    at the wrong lake.
    """
    if not in_airflow_task():
        return None
    from airflow.sdk import Variable

    value = Variable.get(name, default=None)
    return None if value is None else str(value)


# --------------------------------------------------------------------------------------------
# Child processes


# Not `python -m market_spread.cli.main`: as __main__, cli.py's UsageError is another class than the
# one the commands raise, and a bad argument would end in a traceback instead of exit 2.
CLI_CODE = "import sys; from market_spread.cli.main import main; sys.exit(main())"


def cli_argv(command: str, *args: str) -> list[str]:
    """The product CLI run by this interpreter (the venv's), whatever PATH says."""
    return [sys.executable, "-c", CLI_CODE, command, *args]


def show(argv: list[str]) -> str:
    """A command line as a person would type it."""
    if argv[1:3] == ["-c", CLI_CODE]:
        argv = ["market-spread", *argv[3:]]
    return " ".join(argv)


_PR_SET_PDEATHSIG = 1
try:
    _libc = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:  # not glibc: children then rely on process-group signals only
    _libc = None


def _child_setup() -> None:
    # Runs in the child between fork and exec: if the task process dies (even by SIGKILL), the job
    # gets SIGTERM and stops after its batch instead of living on unsupervised.
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    # Background shells start children with SIGINT ignored; the CLI relies on it for Ctrl-C.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> list[int]:
    """Signal a process and all its descendants (the Spark JVM is a grandchild of the CLI)."""
    import psutil  # an Airflow dependency; only needed when something must be killed

    try:
        root = psutil.Process(pid)
        victims = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return []
    hit = []
    for proc in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(sig)
            hit.append(proc.pid)
    psutil.wait_procs(victims, timeout=10)
    return hit


class Job:
    """A CLI child process whose output lines are collected by a reader thread."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        child_env = dict(os.environ if env is None else env)
        child_env["PYTHONUNBUFFERED"] = "1"  # progress lines must reach the task log as they happen
        self.argv = argv
        self.started = time.time()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
            env=child_env,
            cwd=str(project_home()),
            preexec_fn=_child_setup,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name=f"job-{self.proc.pid}", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_lines(self, wait: float) -> list[str]:
        """Lines printed so far, waiting up to `wait` seconds for the first one."""
        out: list[str] = []
        try:
            item = self.lines.get(timeout=wait)
            while True:
                if item is not None:
                    out.append(item)
                item = self.lines.get_nowait()
        except queue.Empty:
            pass
        return out

    def poll(self) -> int | None:
        return self.proc.poll()

    def finish_output(self) -> list[str]:
        self._reader.join(timeout=5)
        return self.next_lines(0)

    def stop(self, timeout: float, logger: Logger) -> int:
        """SIGTERM (the CLI finishes its batch in flight), wait, then kill the whole tree."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while self.poll() is None and time.monotonic() < deadline:
                for line in self.next_lines(0.5):
                    logger(line)
            if self.poll() is None:
                logger(f"pid {self.pid} did not stop within {timeout:.0f}s after SIGTERM: killing it and its children")
                kill_tree(self.pid)
        rc = self.proc.wait()
        for line in self.finish_output():
            logger(line)
        return rc


# What a job needs of the task's environment to run Python, Java and Spark. Nothing else reaches it:
# the Airflow services' environment holds the metadata database URL, the Fernet, JWT and API keys.
CHILD_BASE_VARS = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "JAVA_HOME", "VIRTUAL_ENV",
    "PYTHONPATH", "HADOOP_HOME", "HADOOP_CONF_DIR", "JAVA_TOOL_OPTIONS",
})
CHILD_BASE_PREFIXES = ("LC_", "SPARK_", "PYSPARK_")
# MARKET_SPREAD_* variables read by code rather than by a flag (runtime/spark.py and paths.py, the
# local cluster, the pipeline's write threads, and the run id make run's final sweep looks for).
CHILD_RUNTIME_VARS = frozenset(ENV_PREFIX + n for n in (
    "MASTER", "JARS", "SHUFFLE_PARTITIONS", "SPARK_UI", "SPARK_LOG_LEVEL", "DRIVER_MEMORY", "DRIVER_HOST",
    "DRIVER_BIND_ADDRESS", "DRIVER_PORT", "BLOCK_MANAGER_PORT", "EXECUTOR_MEMORY", "EXECUTOR_CORES",
    "CORES_MAX", "EVENT_LOG_DIR", "WRITE_THREADS", "RUN_ID", "HOME", "KAFKA_JARS", "BROKER_JARS", "CODEGEN_CACHE",
    "ADAPTIVE",
))
# The flags of the commands the DAGs run (tests/unit/test_config.py checks this against the parsers):
# their variables reach the job, and only those of its own command.
COMMAND_FLAGS: dict[str, tuple[str, ...]] = {
    "stream": ("--archive", "--available-now", "--bootstrap-servers", "--checkpoint", "--interval", "--lake",
               "--landing", "--master", "--max-files-per-batch", "--max-records-per-batch", "--max-spread",
               "--max-spread-ratio", "--orders-topic", "--progress-every", "--quotes-topic", "--source",
               "--starting-offsets", "--symbols"),
    "generate": ("--duration", "--files", "--kafka", "--landing", "--orders", "--orders-topic", "--partitions",
                 "--profile", "--quotes", "--quotes-topic", "--rate", "--seed", "--start", "--symbols", "--tick",
                 "--wide-share"),
    "validate": ("--docs", "--expectations", "--full", "--lake", "--max-spread", "--max-spread-ratio",
                 "--orphan-grace-seconds", "--symbols"),
    "maintain": ("--attempts", "--lake", "--master", "--quote-retention-days", "--retain-hours", "--tables"),
}


def child_env(settings: Settings, command: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a `command` job: the base variables, Spark's and Java's, the runtime
    MARKET_SPREAD_* ones and the variables of that command's flags; nothing else. A Spark master
    set by Variable reaches every command (build_session reads MARKET_SPREAD_MASTER)."""
    from market_spread.cli.main import env_names  # standard library only: cheap

    environ = dict(os.environ if environ is None else environ)
    wanted = set(CHILD_BASE_VARS) | set(CHILD_RUNTIME_VARS)
    for flag in COMMAND_FLAGS[command]:
        wanted.update(env_names(flag, command))
    env = {k: v for k, v in environ.items() if k in wanted or k.startswith(CHILD_BASE_PREFIXES)}
    if settings.master:
        env[f"{ENV_PREFIX}MASTER"] = settings.master
    return env


def run_job(argv: list[str], logger: Logger, timeout: float | None = None, env: dict[str, str] | None = None) -> int:
    """Run a CLI command to its end, every output line into the task log; stop it on any exit path."""
    job = Job(argv, env)
    logger("running: " + show(argv))
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while job.poll() is None:
            for line in job.next_lines(1.0):
                logger(line)
            if deadline is not None and time.monotonic() > deadline:
                logger(f"{show(argv)} ran longer than {timeout:.0f}s: stopping it")
                job.stop(60, logger)
                return 124
        for line in job.finish_output():
            logger(line)
        return job.proc.wait()
    finally:
        if job.poll() is None:  # an exception or a signal reached us: never leave the job behind
            job.stop(30, logger)


# --------------------------------------------------------------------------------------------
# The lake: who writes it, is it progressing


def read_stream_lock(lake: Path) -> dict[str, Any]:
    try:
        value = json.loads((lake / LOCK_FILE).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def live_stream(lake: Path) -> dict[str, Any] | None:
    """The lock record of the stream (or maintain) writing this lake, if its driver or JVM lives.

    Reads the record only (never takes the lock), so probing cannot make a starting stream fail.
    A process counts only if it is the recorded one (same start time, see processes.record_alive):
    a pid reused after a restart does not. A record of another host counts as live (it cannot be
    checked here; callers only wait or skip compaction on it, and `maintain` takes the flock anyway).
    """
    info = read_stream_lock(lake)
    alive = record_alive(info, "pid", "pid_started") or record_alive(info, "jvm_pid", "jvm_started")
    return info if alive else None


def last_batch(lake: Path) -> dict[str, Any] | None:
    """The newest row of batch_metrics, read with delta-rs (no Spark), or None if none yet."""
    path = lake / "batch_metrics"
    if not (path / "_delta_log").is_dir():
        return None
    from deltalake import DeltaTable

    table = DeltaTable(str(path)).to_pyarrow_table(columns=["batch_id", "finished_at", "quotes", "orders", "alerts"])
    if table.num_rows == 0:
        return None
    rows = table.to_pylist()
    return max(rows, key=lambda r: r["batch_id"])


def delta_tables(lake: Path) -> list[str]:
    if not lake.is_dir():
        return []
    return sorted(p.name for p in lake.iterdir() if (p / "_delta_log").is_dir())


def _newest_landing_change(landing: Path) -> float:
    # A folder's mtime moves whenever a file is renamed into it: O(1) however many files it holds.
    stamps = [(landing / feed).stat().st_mtime for feed in ("quotes", "orders") if (landing / feed).is_dir()]
    return max(stamps, default=0.0)


def _oldest_landing_file_after(landing: Path, since: float) -> float | None:
    oldest = None
    for feed in ("quotes", "orders"):
        folder = landing / feed
        if not folder.is_dir():
            continue
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.startswith(".") or not entry.name.endswith(".jsonl"):
                    continue
                with contextlib.suppress(OSError):
                    mtime = entry.stat().st_mtime
                    if mtime > since and (oldest is None or mtime < oldest):
                        oldest = mtime
    return oldest


# `batch N: ... in S.SSs` per batch, or `batch N: K batches (M-N): ...; last in S.SSs` per summary.
PROGRESS_LINE = re.compile(r"^batch (?P<batch>\d+):(?: (?P<count>\d+) batches \()?.*?(?: in (?P<seconds>[0-9.]+)s)?\s*$")


@dataclass
class StreamHealth:
    """Batch progress of one stream process, from its stdout, against the input waiting for it.

    The stream is *stalled* when a landing file arrived after the last batch began and has waited
    longer than `stall_seconds` (`startup_seconds` until the process completes its first batch)
    with no batch completed since. No input means nothing to do, never a stall, so an idle feed
    does not raise false alarms.
    """

    landing: Path
    stall_seconds: float
    startup_seconds: float = 900.0
    started: float = field(default_factory=time.time)
    batches: int = 0
    last_batch_id: int | None = None
    last_progress: float = 0.0  # wall time the last completed batch began (or the process start)
    pending_since: float | None = None

    def __post_init__(self) -> None:
        self.last_progress = self.started

    def observe_line(self, line: str, now: float | None = None) -> bool:
        match = PROGRESS_LINE.match(line.strip())
        if not match:
            return False
        now = time.time() if now is None else now
        took = float(match.group("seconds") or 0.0)
        self.batches += int(match.group("count") or 1)
        self.last_batch_id = int(match.group("batch"))
        self.last_progress = max(self.last_progress, now - took)
        self.pending_since = None
        return True

    def check(self, now: float | None = None) -> str | None:
        """None when healthy, else why the stream counts as stalled."""
        now = time.time() if now is None else now
        limit = self.stall_seconds if self.batches else max(self.stall_seconds, self.startup_seconds)
        try:
            changed = _newest_landing_change(self.landing)
        except OSError:
            return None
        if changed > self.last_progress and self.pending_since is None:
            self.pending_since = changed
        if self.pending_since is None or now - self.pending_since <= limit:
            return None
        # Confirm with the files themselves (a folder also changes when files leave it).
        oldest = _oldest_landing_file_after(self.landing, self.last_progress)
        if oldest is None:
            self.pending_since = None
            return None
        self.pending_since = oldest
        if now - oldest <= limit:
            return None
        last = f"last batch {self.last_batch_id}" if self.batches else "no batch since it started"
        setting = "stall_seconds" if self.batches else "startup_seconds"
        return (
            f"no batch progress for {now - self.last_progress:.0f}s ({last}) while input has waited "
            f"{now - oldest:.0f}s (> {setting} {limit:.0f}s)"
        )


class StreamFailed(Exception):
    """The stream died, stalled or could not start: the task must fail visibly."""


@dataclass
class StreamOutcome:
    reason: str
    batches: int
    last_batch_id: int | None


def source_args(settings: Settings, producer: bool = False) -> list[str]:
    """Where the stream reads (and the feed writes): the landing folder, or Kafka topics."""
    if settings.source != "kafka":
        return ["--landing", str(settings.landing)]
    if not settings.bootstrap_servers:
        raise ValueError(f"{VAR_PREFIX}source is kafka but {VAR_PREFIX}bootstrap_servers is not set")
    args = ["--kafka", settings.bootstrap_servers] if producer else \
        ["--source", "kafka", "--bootstrap-servers", settings.bootstrap_servers]
    for flag, value in (("--quotes-topic", settings.quotes_topic), ("--orders-topic", settings.orders_topic)):
        if value:
            args += [flag, value]
    return args


def stream_argv(settings: Settings) -> list[str]:
    args = [*source_args(settings), "--lake", str(settings.lake), "--interval", f"{settings.interval:g}",
            "--progress-every", str(settings.progress_every)]
    for flag, value in (
        ("--symbols", settings.symbols),
        ("--master", settings.master),
        ("--max-spread", settings.max_spread),
        ("--max-spread-ratio", settings.max_spread_ratio),
    ):
        if value:
            args += [flag, value]
    return cli_argv("stream", *args)


def supervise_stream(
    settings: Settings,
    should_stop: Callable[[], str | None],
    logger: Logger = log.info,
    stop_check_every: float = 10.0,
    health_check_every: float = 5.0,
    argv: list[str] | None = None,
) -> StreamOutcome:
    """Run `market-spread stream` until asked to stop, and watch it.

    Returns when the stream was stopped on request (`should_stop()` gave a reason: it gets SIGTERM
    and finishes its batch in flight) or stopped by a signal from outside (exit 0). Raises
    StreamFailed when it exits with an error, the lake is held by another writer, or the health
    check finds it stalled (the stalled process is stopped first, so a restart can take the lake).
    """
    reason = should_stop()
    if reason:
        return StreamOutcome(f"not started: {reason}", 0, None)
    settings.lake.mkdir(parents=True, exist_ok=True)
    health = StreamHealth(settings.landing, settings.stall_seconds, settings.startup_seconds)
    argv = argv or stream_argv(settings)
    job = Job(argv, child_env(settings, "stream"))
    logger(f"started stream pid {job.pid}: {show(argv)}")
    next_stop_check = time.monotonic() + stop_check_every
    next_health_check = time.monotonic() + health_check_every
    try:
        while True:
            for line in job.next_lines(1.0):
                logger(line)
                health.observe_line(line)
            rc = job.poll()
            if rc is not None:
                for line in job.finish_output():
                    logger(line)
                    health.observe_line(line)
                if rc == 0:
                    return StreamOutcome("stopped by a signal from outside", health.batches, health.last_batch_id)
                if rc == EXIT_LAKE_BUSY:
                    holder = read_stream_lock(settings.lake)
                    raise StreamFailed(f"another writer holds the lake {settings.lake}: {holder or 'unknown'}")
                raise StreamFailed(
                    f"the stream exited with code {rc} after {health.batches} batches"
                    + (f" (last batch {health.last_batch_id})" if health.last_batch_id is not None else "")
                )
            now = time.monotonic()
            if now >= next_stop_check:
                next_stop_check = now + stop_check_every
                reason = should_stop()
                if reason:
                    logger(f"stopping the stream: {reason}; waiting up to {settings.stop_timeout:.0f}s for the batch in flight")
                    rc = job.stop(settings.stop_timeout, logger)
                    return StreamOutcome(f"stopped: {reason} (exit {rc})", health.batches, health.last_batch_id)
            if now >= next_health_check:
                next_health_check = now + health_check_every
                stalled = health.check()
                if stalled:
                    logger(f"health check failed: {stalled}; stopping the stalled stream")
                    job.stop(min(settings.stop_timeout, 60.0), logger)
                    raise StreamFailed(f"stream stalled: {stalled}")
    finally:
        if job.poll() is None:
            # A signal or an error ended the supervision: take the stream down with us.
            job.stop(min(settings.stop_timeout, 30.0), logger)


# --------------------------------------------------------------------------------------------
# Coordination between the stream and maintenance (Airflow Variable as the switch)


def active_hold(lookup: Callable[[str], str | None] | None = None, now: float | None = None) -> str | None:
    """The reason the stream is held (maintenance window), or None. Expired holds are ignored, so a
    maintenance run that died before releasing cannot keep the stream down for good."""
    raw = (lookup or airflow_variable)(HOLD_VARIABLE)
    if not raw:
        return None
    try:
        hold = json.loads(raw)
        until = float(hold.get("until", 0))
        reason = str(hold.get("reason", "held"))
    except (ValueError, AttributeError, TypeError):
        return f"{HOLD_VARIABLE} is set"
    return reason if until > (time.time() if now is None else now) else None


def data_docs_location(docs: Path) -> str:
    index = docs / "index.html"
    if not index.is_file():
        found = sorted(docs.glob("**/index.html"), key=lambda p: len(p.parts)) if docs.is_dir() else []
        index = found[0] if found else index
    return index.as_uri() if index.is_file() else str(docs)


def tables_changed_since(lake: Path, tables: tuple[str, ...], since: datetime | None) -> bool:
    """Did any of these tables commit after `since`? (the `_delta_log` folder's mtime; O(1))"""
    if since is None:
        return True
    stamp = since.timestamp()
    for name in tables:
        with contextlib.suppress(OSError):
            if (lake / name / "_delta_log").stat().st_mtime >= stamp:
                return True
    return False


def small_file_counts(lake: Path) -> dict[str, int]:
    """Data files on disk per table (live or tombstoned): what compaction and vacuum act on."""
    counts = {}
    for name in delta_tables(lake):
        total = 0
        for root, dirs, files in os.walk(lake / name):
            dirs[:] = [d for d in dirs if d != "_delta_log"]
            total += sum(1 for f in files if f.endswith(".parquet"))
        counts[name] = total
    return counts


# --------------------------------------------------------------------------------------------
# Task bodies: what each DAG's task runs (they import airflow.sdk, so only inside a task)


def _task_logger() -> Logger:
    task_log = logging.getLogger("airflow.task")
    return task_log.info


def _dag_paused(dag_id: str) -> bool:
    from airflow.sdk import get_current_context

    ti = get_current_context()["ti"]
    return bool(ti.get_dag(dag_id).is_paused)


def stream_task(dag_id: str = "market_spread_stream") -> str:
    """Task body of market_spread_stream: supervise one stream until stopped; fail when it dies."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    logger = _task_logger()
    settings = resolve_settings()

    def should_stop() -> str | None:
        try:
            if _dag_paused(dag_id):
                return f"the DAG {dag_id} is paused"
            # Two lookups every check, not the whole configuration.
            enabled = airflow_variable(f"{VAR_PREFIX}stream_enabled") or os.environ.get(f"{ENV_PREFIX}STREAM_ENABLED")
            if enabled and not _bool(enabled):
                return f"{VAR_PREFIX}stream_enabled is false"
            return active_hold()
        except Exception as exc:  # a hiccup of the API must not take the stream down
            logger(f"stop check failed, carrying on: {exc}")
            return None

    logger(
        f"lake {settings.lake}, "
        + (f"kafka {settings.bootstrap_servers}, " if settings.source == "kafka" else f"landing {settings.landing}, ")
        + f"interval {settings.interval:g}s, "
        f"stall after {settings.stall_seconds:g}s ({settings.startup_seconds:g}s before the first batch)"
    )
    try:
        outcome = supervise_stream(settings, should_stop, logger)
    except StreamFailed as exc:
        # No retry inside this run: the next scheduled run (every minute) starts a fresh stream,
        # and this run stays red in the grid as the record of the incident.
        raise AirflowFailException(str(exc)) from None
    summary = f"{outcome.reason}; {outcome.batches} batches" + (
        f", last batch {outcome.last_batch_id}" if outcome.last_batch_id is not None else ""
    )
    logger(summary)
    if outcome.reason.startswith("not started"):
        raise AirflowSkipException(summary)
    return summary


def feed_task() -> str:
    """Task body of market_spread_feed: land synthetic files at a modest rate for a while."""
    from airflow.sdk.exceptions import AirflowSkipException

    logger = _task_logger()
    settings = resolve_settings()
    if not settings.feed_enabled:
        raise AirflowSkipException(f"Variable {VAR_PREFIX}feed_enabled is false")
    args = [
        *source_args(settings, producer=True),
        "--rate", f"{settings.feed_rate:g}",
        "--duration", f"{settings.feed_seconds:g}",
        "--tick", f"{settings.feed_tick:g}",
        "--seed", str(int(time.time()) % 1_000_000),  # new orders every run, same symbol universe
    ]
    if settings.symbols:
        args += ["--symbols", settings.symbols]
    rc = run_job(cli_argv("generate", *args), logger, timeout=settings.feed_seconds + 120, env=child_env(settings, "generate"))
    if rc != 0:
        raise RuntimeError(f"generate exited with code {rc}")
    return f"landed {settings.feed_seconds:g}s of feed at {settings.feed_rate:g} events/s"


def quality_task() -> str:
    """Task body of market_spread_quality: validate new alerts; fail on critical violations."""
    from airflow.sdk import get_current_context
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    logger = _task_logger()
    settings = resolve_settings()
    if not (settings.lake / "alerts" / "_delta_log").is_dir():
        raise AirflowSkipException(f"no alerts table in {settings.lake} yet")
    previous = get_current_context().get("prev_start_date_success")
    # A lazy proxy: compare through its value, never with `is None`.
    since = datetime.fromtimestamp(previous.timestamp(), tz=timezone.utc) if previous else None
    if not tables_changed_since(settings.lake, ("alerts", "symbol_state", "batch_metrics"), since):
        raise AirflowSkipException(f"no new commits to alerts, symbol_state or batch_metrics since the last check ({since})")
    args = ["--lake", str(settings.lake), "--docs", str(settings.docs)]
    for flag, value in (
        ("--symbols", settings.symbols),
        ("--max-spread", settings.max_spread),  # judge alerts by the thresholds the stream used
        ("--max-spread-ratio", settings.max_spread_ratio),
    ):
        if value:
            args += [flag, value]
    rc = run_job(cli_argv("validate", *args), logger, timeout=3600, env=child_env(settings, "validate"))
    docs = data_docs_location(settings.docs)
    logger(f"Data Docs: {docs}")
    if rc == 1:
        raise AirflowFailException(f"critical expectations failed on {settings.lake}; see the Data Docs at {docs}")
    if rc != 0:
        raise RuntimeError(f"validate exited with code {rc}; Data Docs at {docs}")
    return docs


def hold_stream_task() -> str:
    """Task of market_spread_maintenance: ask the stream to stop for the compaction window."""
    from airflow.sdk import Variable
    from airflow.sdk.exceptions import AirflowSkipException

    logger = _task_logger()
    settings = resolve_settings()
    counts = small_file_counts(settings.lake)
    busy = {t: n for t, n in counts.items() if n >= settings.maintenance_min_files}
    if not busy:
        raise AirflowSkipException(
            f"nothing to maintain: no table has {settings.maintenance_min_files}+ data files ({counts or 'no tables'})"
        )
    logger(f"tables to maintain: {busy}")
    if not settings.maintenance_window:
        logger("maintenance window disabled: maintain runs beside the stream and skips compaction while it runs")
        return "no window"
    until = time.time() + settings.stop_timeout + 4 * 3600  # outlives any sane maintenance, not forever
    Variable.set(HOLD_VARIABLE, json.dumps({"reason": "maintenance window (market_spread_maintenance)", "until": until}))
    try:
        deadline = time.monotonic() + settings.stop_timeout + 60
        while (holder := live_stream(settings.lake)) and time.monotonic() < deadline:
            logger(f"waiting for the stream (pid {holder.get('pid')}) to finish its batch and stop")
            time.sleep(5)
    except BaseException:
        # The teardown only runs after a successful setup: do not leave the stream held.
        Variable.delete(HOLD_VARIABLE)
        raise
    if holder:
        logger("the stream is still running: maintain will skip compaction and only vacuum")
        return "stream still running"
    logger("the lake is free: compaction can run")
    return "held"


def maintain_task() -> str:
    """Task of market_spread_maintenance: `market-spread maintain` (in the lake_jobs pool)."""
    logger = _task_logger()
    settings = resolve_settings()
    args = ["--lake", str(settings.lake), "--retain-hours", str(settings.retain_hours),
            "--quote-retention-days", str(settings.quote_retention_days)]
    if settings.master:
        args += ["--master", settings.master]
    rc = run_job(cli_argv("maintain", *args), logger, timeout=4 * 3600, env=child_env(settings, "maintain"))
    if rc != 0:
        raise RuntimeError(f"maintain exited with code {rc}")
    return "maintained"


def release_stream_task() -> str:
    """Teardown of market_spread_maintenance: lift the hold; the stream DAG restarts the job."""
    from airflow.sdk import Variable

    logger = _task_logger()
    if airflow_variable(HOLD_VARIABLE) is None:
        return "no hold to release"
    Variable.delete(HOLD_VARIABLE)
    logger("hold released: market_spread_stream starts the stream again within a minute")
    return "released"


def default_args(**overrides: Any) -> dict[str, Any]:
    from datetime import timedelta

    args: dict[str, Any] = {"owner": OWNER, "retries": 1, "retry_delay": timedelta(seconds=30)}
    args.update(overrides)
    return args


def schedule_from_env(name: str, default: str) -> str:
    """A DAG's schedule (cron or preset) from MARKET_SPREAD_<NAME>_SCHEDULE: read at parse time,
    so it comes from the environment (no Variable lookups while parsing)."""
    return os.environ.get(f"{ENV_PREFIX}{name.upper()}_SCHEDULE", "").strip() or default
