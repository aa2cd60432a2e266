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


def _stall_renewals(holder: Lease) -> None:
    """The holder's renewal thread stops, as if the store had not answered it (a stalled writer)."""
    holder._stop.set()
    assert holder._thread is not None
    holder._thread.join(10)


def test_a_stalled_holder_renewing_after_a_takeover_extends_nothing(lake, monkeypatch):
    """Renewals stall past the ttl; a contender takes the next generation just after the stalled
    holder listed the generations (so its listing shows none newer): its renewal must not extend."""
    import market_spread.runtime.lease as lease_mod

    holder = Lease(lake, ttl=2.0)
    holder.acquire()
    _stall_renewals(holder)
    holder.check()
    mine = read_lease(lake)
    time.sleep(2.1)  # past the ttl: the record has expired for everyone
    contender = Lease(lake, ttl=30.0)
    listed = lease_mod.generations

    taken: list[int] = []

    def listing_then_takeover(where):
        found = listed(where)
        if not taken:
            taken.append(1)
            contender.acquire()  # between the holder's listing and its write
        return found

    monkeypatch.setattr(lease_mod, "generations", listing_then_takeover)
    try:
        holder.renew()
        monkeypatch.setattr(lease_mod, "generations", listed)
        assert contender.generation == holder.generation + 1
        contender_generation = contender.generation
        with pytest.raises(LeaseLost, match=r"lapsed before it could be renewed .*commits nothing more and stops$"):
            holder.check()
        # Its object was not rewritten, and a later renewal that sees the newer generation changes nothing.
        assert json.loads(lease_mod._object(lake, holder.generation).read_text())["expires_at"] == mine["expires_at"]
        holder.renew()
        with pytest.raises(LeaseLost):
            holder.check()
        contender.check()
    finally:
        holder.release()
        contender.release()
    assert read_lease(lake)["generation"] == contender_generation == generations(lake)[-1]


def test_a_lapsed_lease_is_lost_for_good_even_with_no_newer_generation(lake):
    holder = Lease(lake, ttl=1.5)
    holder.acquire()
    try:
        _stall_renewals(holder)
        time.sleep(holder.ttl - holder.margin + 0.1)
        with pytest.raises(LeaseLost, match="could not be renewed"):
            holder.check()
        holder.renew()  # the store answers again: too late, a contender may be taking it
        assert generations(lake)[-1] == holder.generation  # nobody took it, yet
        with pytest.raises(LeaseLost):
            holder.check()
    finally:
        holder.release()


def _kept_table(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    from market_spread.lake.commits import BatchMark, KeptTable, Upkeep

    rows = pa.table({"n": pa.array([1], pa.int64())})
    write_deltalake(str(tmp_path / "t"), rows)
    return KeptTable(str(tmp_path / "t"), Upkeep()), BatchMark("lease-test", 7), rows


def test_a_commit_try_that_outlives_the_lease_stops_the_stream(lake, tmp_path):
    """The proof is asked again once the try has ended: a try that ran past what was left of the
    lease raises LeaseLost (the commit itself may have landed: the txn mark makes a restart safe)."""
    from deltalake import write_deltalake

    holder = Lease(lake, ttl=1.5)
    holder.acquire()
    kept, mark, rows = _kept_table(tmp_path)

    def slow_append(table) -> None:
        time.sleep(holder.ttl - holder.margin + 0.1)  # longer than the whole validity of one renewal
        write_deltalake(table, rows, mode="append", commit_properties=mark.commit_properties())

    try:
        kept.commit(slow_append, mark, holder.check)  # renewals running: the lease held throughout
        assert kept.current().version() == 1
        _stall_renewals(holder)
        began = time.monotonic()
        with pytest.raises(
            LeaseLost, match=r"^a commit took \d+\.\d s, longer than the \d+\.\d s the lake's lease had"
        ):
            kept.commit(slow_append, mark, holder.check)
        assert time.monotonic() - began < 2 * holder.ttl  # at once, not after the commit's retries
        with pytest.raises(LeaseLost):
            holder.check()  # and for good
    finally:
        holder.release()
        kept.upkeep.settle()
