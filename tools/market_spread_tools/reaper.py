"""Processes of one `make run`: find them, stop them, and leave nothing behind.

What counts as "started by us" is tracked two ways, so nothing can slip out of the final sweep:
the launcher registers as a child subreaper (a process whose parent died, even one that called
setsid, is re-parented to it and stays in its tree), and every process started for the run
inherits the environment variable RUN_MARKER with a value unique to it (Airflow's components,
workers and task processes, the CLI jobs and their Spark JVMs all pass the environment on), which
the sweep also looks for in /proc, in case something ever leaves the tree.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import signal
import time
from collections.abc import Callable
from pathlib import Path

import psutil

# In the environment of every process started for one run. registry: product (the Airflow jobs
# pass it on to the CLI jobs, market_spread.orchestration.jobs.child_env); here it is read from
# other processes' environments in /proc, never from our own.
RUN_MARKER = "MARKET_SPREAD_RUN_ID"
_PR_SET_CHILD_SUBREAPER = 36


def say(message: str) -> None:
    print(f"market-spread-run: {message}", flush=True)


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def new_run_id() -> str:
    return f"{os.getpid()}-{secrets.token_hex(8)}"


def marked(run_id: str | None) -> list:
    """Processes (other than this one) whose environment carries RUN_MARKER=run_id."""
    if not run_id:
        return []
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(RUN_MARKER) == run_id:  # registry: product
                found.append(proc)
        except psutil.Error:  # gone, a zombie, or not ours to read
            pass
    return found


def descendants(run_id: str | None = None) -> list:
    """Every process below this one, plus (given run_id) every process marked with it."""
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


def still_running(procs: list) -> list:
    """Those still running; a zombie (exited, waiting to be reaped) counts as gone."""
    alive = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.Error:
            pass
    return alive


def wait_gone(procs: list, timeout: float) -> list:
    """Wait until every process has exited (zombies count as exited); returns the survivors.

    Not psutil.wait_procs: most of these are not our children, and for those it waits until the
    pid disappears, which for a zombie whose parent is busy can be never.
    """
    deadline = time.monotonic() + timeout
    while True:
        reap()
        alive = still_running(procs)
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.2)


def _short_command(cmd: list[str]) -> list[str]:
    """The command line as a person would type it: `market-spread stream`, `airflow worker`, `java Main`."""
    if cmd[1:2] == ["-c"] and len(cmd) > 2 and "market_spread.cli.main" in cmd[2]:
        return ["market-spread", *cmd[3:]]  # orchestration.jobs.cli_argv
    if Path(cmd[0]).name.startswith("python") and len(cmd) > 1 and cmd[1].endswith("/airflow"):
        return ["airflow", *cmd[2:]]
    if Path(cmd[0]).name == "java":
        main = next((a for a in cmd if a.startswith("org.apache.")), "")
        return ["java", main, *([a for a in cmd if a.endswith("pyspark-shell")][:1])]
    return cmd


def describe(proc) -> str:
    """`pid state command line` (shortened), for the shutdown log."""
    try:
        with proc.oneshot():
            cmd = proc.cmdline()
            status = proc.status()
    except psutil.Error:
        return f"{proc.pid} (gone)"
    if not cmd:
        text = f"[{proc.name() if proc.is_running() else '?'}]"
    else:
        cmd = _short_command(cmd)
        text = " ".join([Path(cmd[0]).name, *cmd[1:]])
    return f"{proc.pid} {status} {text[:140]}"


def kinds(procs: list[str]) -> str:
    """`3 x airflow worker, 1 x java` style summary of what was stopped (from `describe` texts)."""
    counts: dict[str, int] = {}
    for text in procs:
        words = text.split(" ", 2)[2].split() if text.count(" ") >= 2 else ["?"]
        kind = " ".join(words[:2]) if words[0] in ("airflow", "market-spread") else words[0]
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} x {kind}" for kind, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _launcher_alive(run_id: str) -> bool:
    """The launcher whose pid starts run_id still runs (and is a launcher, not a reused pid)."""
    launcher = run_id.split("-", 1)[0]
    try:
        return launcher.isdigit() and any(
            "market-spread-run" in part for part in psutil.Process(int(launcher)).cmdline()
        )
    except psutil.Error:
        return False


def leftovers_of_dead_runs(home: Path) -> list:
    """Processes of an earlier run on this AIRFLOW_HOME whose launcher is gone (killed with -9,
    say): a stale scheduler or stream would fight the new one over the database and the lake."""
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            env = proc.environ()
        except psutil.Error:
            continue
        run_id = env.get(RUN_MARKER, "")  # registry: product
        # AIRFLOW_HOME: Airflow's own variable, in that process's environment.
        if not run_id or env.get("AIRFLOW_HOME") != str(home):
            continue
        if not _launcher_alive(run_id):
            found.append(proc)
    return found


def stop_leftovers_of_dead_runs(home: Path, out: Callable[[str], None] = say) -> int:
    stale = still_running(leftovers_of_dead_runs(home))
    if stale:
        out(f"stopping {len(stale)} process(es) left by an earlier run on {home} whose launcher is gone:")
        for p in stale:
            out(f"  {describe(p)}")
        for p in stale:
            with contextlib.suppress(psutil.Error):
                p.terminate()
        for p in wait_gone(stale, 15.0):
            with contextlib.suppress(psutil.Error):
                p.kill()
        wait_gone(stale, 5.0)
    return len(stale)


def _is_cli(proc) -> bool:
    try:
        cmd = proc.cmdline()
    except Exception:  # noqa: BLE001 - a process gone or out of reach is not ours to stop
        return False
    return any("market_spread.cli.main" in part or part.endswith("/market-spread") for part in cmd[:3])


def _signal(procs: list, signum: int) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signum)


def _terminate_new_jobs(jobs: list, signalled: set, grace: float, out: Callable[[str], None]) -> None:
    """SIGTERM the jobs not signalled yet, saying so."""
    fresh = [p for p in jobs if p not in signalled]
    if not fresh:
        return
    if not signalled:
        out(f"stopping {len(fresh)} job(s) (the stream finishes its batch in flight; up to {grace:.0f}s)")
    else:
        out(f"stopping {len(fresh)} job(s) started meanwhile")
    for proc in fresh:
        out(f"  SIGTERM {describe(proc)}")
        _signal([proc], signal.SIGTERM)
        signalled.add(proc)


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
    signalled: set = set()
    deadline = time.monotonic() + grace
    quiet_since: float | None = None
    jobs: list = []
    while time.monotonic() < deadline and not fast():
        reap()
        jobs = still_running([p for p in descendants(run_id) if _is_cli(p)])
        _terminate_new_jobs(jobs, signalled, grace, out)
        if jobs:
            quiet_since = None
        else:
            now = time.monotonic()
            quiet_since = quiet_since or now
            if scheduler is None or not still_running([scheduler]) or now - quiet_since >= settle:
                return []
        time.sleep(0.5)
    return jobs


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
    stopped: dict = {}
    started = time.monotonic()
    rounds = 0
    while True:
        reap()
        procs = still_running(descendants(run_id))
        if not procs:
            return list(stopped.values()), []
        if rounds and time.monotonic() - started > limit + grace + 10:
            return list(stopped.values()), procs
        rounds += 1
        for proc in procs:
            stopped.setdefault(proc, describe(proc))
        hurry = time.monotonic() - started > limit
        _signal(procs, signal.SIGKILL if hurry else signal.SIGTERM)
        resisting = wait_gone(procs, 5.0 if hurry else grace)
        if resisting:
            out(
                f"round {rounds}: SIGKILL to {len(resisting)} process(es) still running after SIGTERM: "
                + "; ".join(describe(p) for p in resisting)
            )
            for proc in resisting:
                with contextlib.suppress(psutil.Error):
                    proc.kill()
            wait_gone(resisting, 5.0)
