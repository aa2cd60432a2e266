"""feeds.generate.write_backlog lands its pairs in order, as a stream taking one file per batch sees it."""

from __future__ import annotations

import os

from market_spread.feeds.generate import Generator, land_after, write_backlog


def _ms(path) -> int:
    return os.stat(path).st_mtime_ns // 1_000_000


def test_backlog_pairs_are_modified_in_strictly_increasing_milliseconds(tmp_path):
    # Small pairs are written faster than a millisecond each: without land_after, many would tie.
    write_backlog(tmp_path, Generator(["AAPL", "MSFT"], seed=3), 200, 200, 100, "t")
    for feed in ("quotes", "orders"):
        times = [_ms(tmp_path / feed / f"t-{k:05d}.jsonl") for k in range(100)]
        assert all(a < b for a, b in zip(times, times[1:])), f"{feed}: pairs out of order or tied in ms"
    for k in range(100):  # within a pair, the quotes land no later than the orders
        assert _ms(tmp_path / "quotes" / f"t-{k:05d}.jsonl") <= _ms(tmp_path / "orders" / f"t-{k:05d}.jsonl")


def test_land_after_moves_only_files_that_are_not_later(tmp_path):
    early, late = tmp_path / "early", tmp_path / "late"
    for path, ms in ((early, 5_000), (late, 9_000)):
        path.write_text("x\n")
        os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))
    assert land_after(7_000, [early, late]) == 9_000
    assert (_ms(early), _ms(late)) == (7_001, 9_000)


def test_pairs_are_cut_where_the_written_millisecond_moves_on():
    # Lines carry milliseconds: 1,400 and 1,600 µs are both "...001Z", so a cut between them would put
    # a quote in a later file with the time of an order in an earlier one.
    from market_spread.feeds.generate import split_in_time

    events = [("quotes", 1_000, "q1"), ("orders", 1_400, "o1"), ("quotes", 1_600, "q2"), ("orders", 2_100, "o2")]
    parts = split_in_time(events, 2)
    assert [[line for _, _, line in part] for part in parts] == [["q1", "o1", "q2"], ["o2"]]
