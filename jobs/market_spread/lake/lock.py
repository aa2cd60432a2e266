"""One writer per lake: the stream's lock file on a local disk, a lease on object storage (also
taken by `maintain` for its exclusive work). `writer_lock(lake)` picks the one the lake needs."""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from market_spread.errors import MarketSpreadError
from market_spread.runtime.lease import Lease, LeaseBusy, Proof
from market_spread.runtime.processes import process_start_time, record_alive, this_host
from market_spread.runtime.storage import Location, S3Path
from market_spread.runtime.stream_contract import LOCK_FILE


class LakeBusy(MarketSpreadError):
    pass


@dataclass
class WriterLock:
    """One writer per lake: an exclusive flock on LAKE/_stream.lock.

    The kernel drops the lock when the holder dies, even by SIGKILL. The Spark JVM outlives its
    Python driver by a moment (it exits when its stdin closes), so the lock file also names the JVM's
    pid and a new writer waits for that JVM to be gone before it writes.

    Each process is recorded as host, pid and start time (psutil's create_time): after a reboot or a
    container restart a recorded pid may belong to an unrelated process, which must not block the
    lake. A record of another host is stale here: we hold the flock, so its driver is gone, and its
    JVM exits with its driver (on a host whose pids we cannot check anyway).
    """

    path: Path
    handle: IO[str] | None = None

    def acquire(self, wait_for_jvm_s: float = 60.0) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise LakeBusy(f"another stream is already writing this lake ({holder})") from None
        handle.seek(0)
        previous = _read_json(handle.read())
        jvm = previous.get("jvm_pid")

        def jvm_alive() -> bool:
            if not jvm or previous.get("host", this_host()) != this_host():
                return False
            return record_alive(previous, "jvm_pid", "jvm_started")

        deadline = time.monotonic() + wait_for_jvm_s
        while jvm_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        if jvm_alive():
            handle.close()
            raise LakeBusy(f"the Spark JVM (pid {jvm}) of a previous stream on this lake is still running")
        self.handle = handle
        self.record()

    def record(self, **extra: object) -> None:
        assert self.handle is not None
        info = {
            "pid": os.getpid(),
            "pid_started": process_start_time(),
            "host": this_host(),
            "since": datetime.now(UTC).isoformat(),
            **extra,
        }
        jvm_pid = extra.get("jvm_pid")
        if isinstance(jvm_pid, int):
            info["jvm_started"] = process_start_time(int(jvm_pid))
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(json.dumps(info))
        self.handle.flush()

    def check(self) -> None:
        """The flock is held until this process dies: nothing to prove before a commit."""

    def release(self) -> None:
        if self.handle is not None:
            self.handle.seek(0)
            self.handle.truncate()
            self.handle.close()
            self.handle = None


class LeaseLock:
    """The lake's lease (runtime.lease) behind WriterLock's methods: LakeBusy when another writer holds it."""

    def __init__(self, lake: S3Path) -> None:
        self.lease = Lease(lake)

    def acquire(self, wait_for_jvm_s: float = 60.0) -> None:
        try:
            self.lease.acquire(wait_for_jvm_s)
        except LeaseBusy as exc:
            raise LakeBusy(str(exc)) from None

    def record(self, **extra: object) -> None:
        self.lease.record(**extra)

    def check(self) -> Proof:
        """The lease's proof, right before a commit try; the commit asks it again after (`still_held`)."""
        return self.lease.check()

    def release(self) -> None:
        self.lease.release()


def writer_lock(lake: Location) -> "WriterLock | LeaseLock":
    """The lake's single-writer guard: a lease on object storage, the flock'd file on a local disk."""
    if isinstance(lake, S3Path):
        return LeaseLock(lake)
    lake.mkdir(parents=True, exist_ok=True)
    return WriterLock(lake / LOCK_FILE)


def _read_json(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
