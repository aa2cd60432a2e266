"""One writer per lake on object storage: a lease, since S3 has no file locks (contract 5.7).

The lease is a sequence of objects `LAKE/_stream_lease/<generation>.json`, each created with
put-if-absent (`If-None-Match: *`), so of two contenders for the same generation exactly one
wins. The newest generation is the lease; it names its holder (host, pid, process start time, the
JVM's pid) and an expiry, which the holder renews every `ttl/6` seconds by rewriting its own object.

- A contender takes the next generation only when the newest one is released, expired (by the
  contender's clock), or held by a process of this host that is gone (a restart after a crash does not
  wait for the expiry: the pid and its start time say the holder is dead; its JVM is waited for).
- The holder proves it still holds the lease right before each commit try (`check`, which gives a
  `Proof`): its last successful renewal is younger than `ttl - margin`, and no newer generation
  exists. Otherwise it raises LeaseLost and commits nothing. A contender waits for the full `ttl`
  after the last renewal it could have seen, so the holder stops at least `margin` seconds before
  anyone else may start, with clocks that agree to within that margin.
- A renewal is fenced: it extends the lease only if it saw no newer generation before rewriting its
  own object and its write ended while the lease was still valid. A renewal that comes later (the
  store unreachable for longer than `ttl - margin`) extends nothing: a contender may have read the
  lapsed record and be about to take the next generation. Either way the lease is lost for good.
- After each commit try the commit asks the proof again (`Proof.still_held`): a try that ended
  after the lease lapsed (it outlived what was left of it) raises LeaseLost, so the stream stops at
  once and says so. With fenced renewals a lease still valid at the try's end was held throughout.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from market_spread.errors import MarketSpreadError
from market_spread.runtime.processes import process_start_time, record_alive, this_host
from market_spread.runtime.settings import value
from market_spread.runtime.storage import S3Path

LEASE_FOLDER = "_stream_lease"
_DIGITS = 10


class LeaseBusy(MarketSpreadError):
    """Another live writer holds the lease."""


class LeaseLost(MarketSpreadError, RuntimeError):
    """This writer can no longer prove it holds the lease: it must not commit."""


def _now() -> datetime:
    return datetime.now(UTC)


def generations(lake: S3Path) -> list[int]:
    """The lease's generations present under the lake, oldest first."""
    names = (child.name for child in (lake / LEASE_FOLDER).iterdir())
    return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())


def _object(lake: S3Path, generation: int) -> S3Path:
    return lake / LEASE_FOLDER / f"{generation:0{_DIGITS}d}.json"


def read_lease(lake: S3Path) -> dict[str, Any]:
    """The newest generation's record ({} when the lake has no lease or it is unreadable)."""
    found = generations(lake)
    if not found:
        return {}
    try:
        record = json.loads(_object(lake, found[-1]).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def lease_live(record: dict[str, Any], now: datetime | None = None) -> bool:
    """Whether a lease record still keeps others out: not released, not expired, and (when its
    holder ran on this host) its driver or JVM still running."""
    if not record or record.get("released"):
        return False
    try:
        expires = datetime.fromisoformat(record["expires_at"])
    except (KeyError, TypeError, ValueError):
        return False
    if (now or _now()) >= expires:
        return False
    if record.get("host") != this_host():
        return True
    return record_alive(record) or (bool(record.get("jvm_pid")) and record_alive(record, "jvm_pid", "jvm_started"))


@dataclass
class Lease:
    """This process's hold on a lake's lease (acquire, renew in the background, check, release)."""

    lake: S3Path
    ttl: float = field(default_factory=lambda: value("MARKET_SPREAD_LEASE_SECONDS"))
    generation: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    _valid_until: float = 0.0
    _lost: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _write: threading.Lock = field(default_factory=threading.Lock)

    @property
    def margin(self) -> float:
        return self.ttl / 3

    def acquire(self, wait_for_jvm_s: float = 60.0) -> None:
        """Take the next generation, or LeaseBusy naming the live holder."""
        found = generations(self.lake)
        newest = found[-1] if found else 0
        if newest:
            record = self._wait_for_jvm(read_lease(self.lake), wait_for_jvm_s)
            if lease_live(record):
                raise LeaseBusy(_holder_text(record))
        self.info = {
            "pid": os.getpid(),
            "pid_started": process_start_time(),
            "host": this_host(),
            "since": _now().isoformat(),
        }
        started = time.monotonic()
        if not _object(self.lake, newest + 1).create(self._payload(newest + 1)):
            raise LeaseBusy(f"another writer took the lease at the same moment: {_holder_text(read_lease(self.lake))}")
        self.generation, self._valid_until = newest + 1, started + self.ttl - self.margin
        for old in found[:-1]:  # generations before the previous one guard nothing
            _object(self.lake, old).unlink(missing_ok=True)
        self._thread = threading.Thread(target=self._renew_loop, name="lease-renewal", daemon=True)
        self._thread.start()

    def _wait_for_jvm(self, record: dict[str, Any], wait_s: float) -> dict[str, Any]:
        """A dead driver's JVM of this host may still write for a moment: wait until it is gone."""
        if record.get("host") != this_host() or not record.get("jvm_pid") or record_alive(record):
            return record
        deadline = time.monotonic() + wait_s
        while record_alive(record, "jvm_pid", "jvm_started") and time.monotonic() < deadline:
            time.sleep(0.2)
        return record

    def _payload(self, generation: int) -> bytes:
        expires = _now() + timedelta(seconds=self.ttl)
        return json.dumps(
            {
                **self.info,
                "generation": generation,
                "ttl_seconds": self.ttl,
                "expires_at": expires.isoformat(),
                "renewed_at": _now().isoformat(),
            }
        ).encode()

    def record(self, **extra: object) -> None:
        """Add to the holder's record (the JVM's pid): written at once."""
        self.info.update(extra)
        jvm_pid = extra.get("jvm_pid")
        if isinstance(jvm_pid, int):
            self.info["jvm_started"] = process_start_time(int(jvm_pid))
        self.renew()

    def renew(self) -> None:
        """Rewrite this generation with a new expiry, fenced: only while no newer generation exists
        and the lease has not lapsed (else it is lost for good; see the module)."""
        assert self.generation is not None
        with self._write:
            if self._lost:
                return
            started = time.monotonic()
            if generations(self.lake)[-1:] != [self.generation]:
                self._lost = "another writer took the lake's lease over"
                return
            if started < self._valid_until:
                _object(self.lake, self.generation).write_bytes(self._payload(self.generation))
            if time.monotonic() >= self._valid_until:
                self._lost = (
                    f"the lake's lease lapsed before it could be renewed (no renewal for {self.ttl - self.margin:.0f} s: "
                    "object store unreachable?), so another writer may have taken it"
                )
                return
            self._valid_until = started + self.ttl - self.margin

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl / 6):
            try:
                self.renew()
            except Exception as exc:  # noqa: BLE001 - the store unreachable: check() decides, by the clock
                print(f"market-spread stream: warning: could not renew the lake's lease: {exc}", flush=True)

    def check(self) -> "Proof":
        """LeaseLost unless this process can still prove it holds the lease (see the module); the
        proof, which the commit asks again once its try has ended (`Proof.still_held`)."""
        # No lock: a renewal in flight holds it for its requests; a commit must not wait for them.
        now, until = time.monotonic(), self._valid_until
        if not self._lost and now >= until:
            self._lost = (
                f"the lake's lease could not be renewed for {self.ttl - self.margin:.0f} s (object store unreachable?)"
            )
        if self._lost:
            raise LeaseLost(f"{self._lost}: this stream commits nothing more and stops")
        return Proof(self, now, until)

    def still_held(self, proof: "Proof") -> None:
        """LeaseLost when the commit try `proof` began is over and the lease lapsed meanwhile (or was
        lost): the try outlived what was left of the lease, and this stream stops at once."""
        now = time.monotonic()
        if not self._lost and now >= self._valid_until:
            self._lost = (
                f"a commit took {now - proof.at:.1f} s, longer than the {proof.until - proof.at:.1f} s "
                "the lake's lease had left when it began"
            )
        if self._lost:
            raise LeaseLost(f"{self._lost}: this stream commits nothing more and stops")

    def release(self) -> None:
        """Stop renewing and mark this generation released (unless another writer took over)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.generation is None:
            return
        with self._write:
            if not self._lost and generations(self.lake)[-1:] == [self.generation]:
                record = json.loads(self._payload(self.generation))
                _object(self.lake, self.generation).write_text(json.dumps({**record, "released": True}))
        self.generation = None


@dataclass(frozen=True)
class Proof:
    """What one check proved: the lease held at `at` and, unless renewed, until `until` (monotonic
    seconds). `still_held()` after the commit try: LeaseLost if the try outlived the lease."""

    lease: Lease | None
    at: float = 0.0
    until: float = 0.0

    def still_held(self) -> None:
        if self.lease is not None:
            self.lease.still_held(self)


NO_PROOF = Proof(None)  # a guard with nothing to prove afterwards (the lock file on a local disk)


def prove(guard: Callable[[], object] | None) -> Proof:
    """Run a commit's guard (the stream's proof that it holds the lake, right before a try) and
    keep what it proved, for the check after the try."""
    proof = guard() if guard is not None else None
    return proof if isinstance(proof, Proof) else NO_PROOF


def _holder_text(record: dict[str, Any]) -> str:
    if not record:
        return "another stream is already writing this lake (its lease: holder unknown)"
    return (
        f"another stream is already writing this lake (its lease: host {record.get('host')}, "
        f"pid {record.get('pid')}, renewed {record.get('renewed_at')}, expires {record.get('expires_at')})"
    )
