"""Process helpers shared by the stream and the Airflow side (cheap to import: psutil is loaded only
inside the functions that need it)."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from datetime import datetime
from typing import Any

# Two reads of one process's start time agree to the clock tick; a pid reused after a reboot or a
# container restart starts seconds to days apart. The slack covers the kernel's boot-time jitter.
START_TIME_SLACK_S = 1.0


def pid_alive(pid: int, started: float | None = None) -> bool:
    """True while `pid` runs (and, given `started`, is the process that started at that time);
    a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            # rsplit: the process name in parentheses may itself contain ") ".
            if stat.read().rsplit(") ", 1)[1][:1] == "Z":
                return False
    except (OSError, IndexError):
        pass
    if started is None:
        return True
    now_started = process_start_time(pid)
    return now_started is None or abs(now_started - started) <= START_TIME_SLACK_S


def process_start_time(pid: int | None = None) -> float | None:
    """When the process started (epoch seconds, psutil's create_time), or None if it cannot be read."""
    import psutil

    try:
        return psutil.Process(os.getpid() if pid is None else pid).create_time()
    except psutil.Error:
        return None


def this_host() -> str:
    return socket.gethostname()


def record_alive(record: Mapping[str, Any], pid_key: str = "pid", started_key: str = "pid_started") -> bool:
    """Whether the process a lock record names still runs: same host, same pid, same start time.

    A record of another host cannot be checked from here and counts as alive (callers that hold the
    lake's flock know better and decide for themselves). A record without a start time (written by
    an older version) still proves staleness when the pid's process started after the record was
    written (`since`): it cannot be the process that wrote it.
    """
    pid: Any = record.get(pid_key)
    if not (isinstance(pid, int) or str(pid or "").isdigit()):
        return False
    pid = int(pid)
    host = record.get("host")
    if host and host != this_host():
        return True
    started = record.get(started_key)
    if isinstance(started, (int, float)):
        return pid_alive(pid, float(started))
    if not pid_alive(pid):
        return False
    since = record.get("since")
    now_started = process_start_time(pid)
    if isinstance(since, str) and now_started is not None:
        try:
            written = datetime.fromisoformat(since).timestamp()
        except ValueError:
            return True
        return now_started <= written + START_TIME_SLACK_S
    return True
