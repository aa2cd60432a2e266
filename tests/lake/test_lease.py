"""One writer per lake on object storage: the lease (runtime/lease.py, lake/lock.py) against a real
S3 server. No Spark: the lease is what decides, before any commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from market_spread.lake.lock import LakeBusy, LeaseLock, writer_lock
from market_spread.runtime.lease import LEASE_FOLDER, Lease, LeaseBusy, LeaseLost, generations, lease_live, read_lease
from market_spread.runtime.storage import location


@pytest.fixture
def lake(object_store):
    with object_store.environ():
        yield location(object_store.uri("lease"))


def _foreign_holder(lake, generation: int, expires_in: float, host: str = "another-host") -> None:
    """A lease generation written by a writer on another machine (its pid means nothing here)."""
    expires = datetime.now(UTC) + timedelta(seconds=expires_in)
    record = {
        "host": host,
        "pid": 1,
        "pid_started": 0.0,
        "generation": generation,
        "expires_at": expires.isoformat(),
        "renewed_at": datetime.now(UTC).isoformat(),
        "ttl_seconds": 30.0,
    }
    assert (lake / LEASE_FOLDER / f"{generation:010d}.json").create(json.dumps(record).encode())


def test_a_second_writer_is_refused_at_once_and_takes_over_after_a_release(lake):
    first = writer_lock(lake)
    assert isinstance(first, LeaseLock)
    first.acquire()
    try:
        began = time.monotonic()
        with pytest.raises(LakeBusy, match=r"another stream is already writing this lake \(its lease: host "):
            writer_lock(lake).acquire()
        assert time.monotonic() - began < 5
        first.check()  # the holder still proves it holds the lease
    finally:
        first.release()
    assert read_lease(lake)["released"] is True
    second = writer_lock(lake)
    second.acquire()  # at once: a released lease keeps no one out
    second.release()
    assert generations(lake)[-1] == 2


def test_a_dead_writer_of_another_host_is_taken_over_only_once_its_lease_expired(lake):
    _foreign_holder(lake, 1, expires_in=2.0)
    with pytest.raises(LeaseBusy, match="another-host"):
        Lease(lake, ttl=30.0).acquire()
    time.sleep(2.2)
    taker = Lease(lake, ttl=30.0)
    taker.acquire()
    try:
        assert taker.generation == 2 and read_lease(lake)["pid"] != 1
    finally:
        taker.release()


def test_of_two_contenders_for_an_expired_lease_exactly_one_wins(lake):
    _foreign_holder(lake, 1, expires_in=-1.0)
    contenders = [Lease(lake, ttl=30.0) for _ in range(4)]
    outcomes: list[str] = []
    gate = threading.Barrier(len(contenders))

    def contend(lease: Lease) -> None:
        gate.wait()
        try:
            lease.acquire()
            outcomes.append("won")
        except Exception as exc:  # noqa: BLE001 - each loser names why
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=contend, args=(c,)) for c in contenders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert outcomes.count("won") == 1, outcomes
        assert set(outcomes) == {"won", "LeaseBusy"}
        assert generations(lake)[-1] == 2
    finally:
        for c in contenders:
            if c.generation is not None:
                c.release()


def test_a_crashed_writer_of_this_host_is_taken_over_at_once(lake, object_store):
    """A SIGKILLed holder leaves an unexpired lease; its pid (and start time) say it is gone."""
    code = (
        "from market_spread.lake.lock import writer_lock; from market_spread.runtime.storage import location; "
        f"import os, signal; lock = writer_lock(location({str(lake)!r})); lock.acquire(); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    subprocess.run([sys.executable, "-c", code], env={**os.environ, **object_store.env}, timeout=60)
    record = read_lease(lake)
    assert record and not record.get("released")
    assert not lease_live(record)  # unexpired, but its process is gone
    began = time.monotonic()
    taker = Lease(lake)
    taker.acquire()
    taker.release()
    assert time.monotonic() - began < 5


def test_a_holder_whose_lease_was_taken_over_commits_nothing_more(lake):
    holder = Lease(lake, ttl=30.0)
    holder.acquire()
    try:
        holder.check()
        _foreign_holder(lake, holder.generation + 1, expires_in=30.0)  # taken over (its lease had looked expired)
        holder.renew()
        with pytest.raises(LeaseLost, match="took the lake's lease over"):
            holder.check()
    finally:
        holder.release()
    assert read_lease(lake)["host"] == "another-host"  # the release left the new holder's lease alone


def test_a_holder_that_cannot_renew_stops_before_its_lease_could_expire(lake, monkeypatch):
    holder = Lease(lake, ttl=3.0)
    holder.acquire()
    try:

        def unreachable() -> None:
            raise ConnectionError("object store unreachable")

        monkeypatch.setattr(holder, "renew", unreachable)
        holder.check()
        record = read_lease(lake)
        expires = datetime.fromisoformat(record["expires_at"]).timestamp()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                holder.check()
            except LeaseLost:
                break
            time.sleep(0.05)
        else:
            pytest.fail("check() kept passing without renewals")
        # It stopped a third of the lease before anyone else could take the lake over.
        assert expires - time.time() >= holder.margin - 0.5
    finally:
        monkeypatch.undo()
        holder.release()
