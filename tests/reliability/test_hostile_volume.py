"""Hostile input by size: one huge line (valid and not), and a file of very many lines, through the
`stream` command as a process. The stream survives, every non-blank line lands in exactly one place,
and the memory of the process tree (driver + Spark JVM) stays under a stated bound.

Default: 3 MB lines and a 100,000-line file; MARKET_SPREAD_RELIABILITY=full: 10 MB lines and a
1,000,000-line file."""

from __future__ import annotations

import random

import pytest

from market_spread.feeds.generate import Generator, write_atomically
from tests.helpers.campaign import FULL, Job
from tests.helpers.lake import metrics_totals, rows
from tests.helpers.records import bad_lines
from tests.helpers.symbols import SYMBOLS, symbols_file

BIG_LINE = (10 if FULL else 3) * 2**20
MANY_LINES = 1_000_000 if FULL else 100_000
# The driver heap is 2 GB (spark.driver.memory); the whole tree must stay well within 3 GB: the
# input is never gathered in the Python driver, and a long line costs a few copies of itself.
RSS_BOUND_MB = 3072


@pytest.mark.slow
def test_huge_line_and_many_lines_survive_with_bounded_memory(spark, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    symbols = symbols_file(tmp_path, SYMBOLS)
    rng = random.Random(7)
    gen = Generator(SYMBOLS, seed=41, wide_share=0.4)
    events = gen.events(MANY_LINES // 2, MANY_LINES // 2)
    quotes = [line for feed, _, line in events if feed == "quotes"]
    orders = [line for feed, _, line in events if feed == "orders"]
    bad = bad_lines(rng, MANY_LINES // 100, "many")
    # One file each: valid lines with 1% bad ones scattered through it, and blank lines (ignored).
    for feed, valid, extra in (("quotes", quotes, bad[: len(bad) // 2]), ("orders", orders, bad[len(bad) // 2 :])):
        mixed = list(valid)
        for line in extra:
            mixed.insert(rng.randrange(len(mixed) + 1), line)
        write_atomically(landing / feed, "many.jsonl", mixed + ["", "   "])
    huge_valid = (
        '{"symbol": "AAPL", "transact_time": "2026-11-23T14:29:00Z", "bid": 1, "offer": 2, "seq": 0, '
        f'"note": "{"n" * BIG_LINE}"}}'
    )
    huge_bad = '{"symbol": "AAPL", "transact_time": "2026-11-23T14:29:00Z", "bid": ' + "9" * BIG_LINE
    write_atomically(landing / "quotes", "huge.jsonl", [huge_valid, huge_bad])

    job = Job(
        ["stream", "--landing", str(landing), "--lake", str(lake), "--symbols", str(symbols), "--available-now"],
        tmp_path / "stream.log",
    )
    assert job.wait(1800) == 0, job.tail()

    totals = metrics_totals(spark, lake)
    non_blank = len(quotes) + len(orders) + len(bad) + 2
    assert totals["quotes"] + totals["orders"] + totals["quarantined"] == non_blank
    assert (totals["quotes"], totals["orders"], totals["quarantined"]) == (len(quotes) + 1, len(orders), len(bad) + 1)
    quarantine = rows(spark, lake, "quarantine")
    assert len(quarantine) == len(bad) + 1
    assert max(len(r["raw"]) for r in quarantine) == len(huge_bad), "the huge line is kept whole"
    peak_mb = job.peak_rss / 2**20
    print(
        f"\nhostile volume: {non_blank} non-blank lines ({MANY_LINES} in one file, two of {BIG_LINE / 2**20:.0f} MB): "
        f"{totals['quotes']} quotes + {totals['orders']} orders + {totals['quarantined']} quarantined; "
        f"peak memory {peak_mb:.0f} MB (bound {RSS_BOUND_MB} MB)"
    )
    assert peak_mb < RSS_BOUND_MB
