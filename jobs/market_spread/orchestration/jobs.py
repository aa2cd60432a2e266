"""Every CLI command runs as a child process (`market_spread.cli.main`, see cli_argv) so that a
Spark JVM never lives inside an Airflow worker and can always be stopped.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from market_spread.orchestration.settings import Settings
from market_spread.runtime.env import ENV_PREFIX
from market_spread.runtime.envnames import env_names
from market_spread.runtime.paths import project_home
from market_spread.runtime.settings import SETTINGS

# Where a job's output lines go: the task log, or a list in tests.
Logger = Callable[[str], None]


# The CLI's entry point by import rather than `-m`, so the child's code path is the console script's.
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
_libc: ctypes.CDLL | None
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
CHILD_BASE_VARS = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "JAVA_HOME",
        "VIRTUAL_ENV",
        "PYTHONPATH",
        "HADOOP_HOME",
        "HADOOP_CONF_DIR",
        "JAVA_TOOL_OPTIONS",
    }
)
CHILD_BASE_PREFIXES = ("LC_", "SPARK_", "PYSPARK_")
# MARKET_SPREAD_* variables read by code rather than by a flag: those the registry marks `to_jobs`
# (runtime/spark.py and paths.py, the local cluster, the pipeline's write threads, and the run id
# make run's final sweep looks for).
CHILD_RUNTIME_VARS = frozenset(s.name for s in SETTINGS.values() if s.to_jobs)
# The flags of the commands the DAGs run (tests/unit/test_config.py checks this against the parsers):
# their variables reach the job, and only those of its own command.
COMMAND_FLAGS: dict[str, tuple[str, ...]] = {
    "stream": (
        "--alerts-topic",
        "--archive",
        "--available-now",
        "--bootstrap-servers",
        "--checkpoint",
        "--interval",
        "--lake",
        "--landing",
        "--master",
        "--max-files-per-batch",
        "--max-records-per-batch",
        "--max-spread",
        "--max-spread-ratio",
        "--orders-topic",
        "--placement",
        "--progress-every",
        "--quotes-topic",
        "--source",
        "--starting-offsets",
        "--symbols",
    ),
    "generate": (
        "--duration",
        "--files",
        "--kafka",
        "--landing",
        "--orders",
        "--orders-topic",
        "--partitions",
        "--profile",
        "--quotes",
        "--quotes-topic",
        "--rate",
        "--seed",
        "--start",
        "--symbols",
        "--tick",
        "--wide-share",
    ),
    "validate": (
        "--docs",
        "--expectations",
        "--full",
        "--lake",
        "--max-spread",
        "--max-spread-ratio",
        "--orphan-grace-seconds",
        "--symbols",
    ),
    "maintain": ("--attempts", "--lake", "--master", "--quote-retention-days", "--retain-hours", "--tables"),
}


def child_env(settings: Settings, command: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a `command` job: the base variables, Spark's and Java's, the runtime
    MARKET_SPREAD_* ones and the variables of that command's flags; nothing else. A Spark master
    set by Variable reaches every command (build_session reads MARKET_SPREAD_MASTER)."""
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
