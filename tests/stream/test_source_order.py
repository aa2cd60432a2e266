"""Orders are listed before quotes (contract 5.2 while files keep landing), and a checkpoint written
quotes first is moved to that order without losing or repeating a row."""

from __future__ import annotations

import json
import random
import time

from market_spread.feeds.generate import Generator, write_backlog
from market_spread.lake import state_writes
from market_spread.stream import checkpoint_layout as layout
from market_spread.stream.query import started
from market_spread.stream.spec import StreamSpec
from tests.helpers.lake import comparable_tables, metrics_totals, rows, stream
from tests.helpers.landing import land, land_pair
from tests.helpers.records import order, quote
from tests.helpers.symbols import SYMBOLS


def test_an_order_never_enters_a_batch_ahead_of_a_quote_that_landed_before_it(spark, tmp_path):
    # Each pair is a new symbol's only quote (wide) and then its order, landing while the stream plans
    # batches back to back. Listed quotes first, a pair landing between the two listings put the order in
    # a batch without its quote: about 1 in 100 orders came out 'no_market_data' here (4 of 400).
    pairs = 300
    symbols = [f"S{k:05d}" for k in range(pairs)]
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    spec = StreamSpec(lake=lake, symbols=symbols, landing=landing, available_now=False, interval=0.0)
    batches = []
    with started(spark, spec, on_batch=batches.append) as run:
        query = run.query
        try:
            rng = random.Random(3)
            for k, symbol in enumerate(symbols):
                land(landing, "quotes", [quote(symbol, "2026-11-23T14:30:00Z", "1.00", "2.00")], name=f"p{k:05d}.jsonl")
                land(landing, "orders", [order(f"O{k}", symbol, "2026-11-23T14:30:01Z")], name=f"p{k:05d}.jsonl")
                time.sleep(rng.uniform(0, 0.02))
            deadline = time.monotonic() + 300
            while sum(b.orders for b in batches) < pairs and time.monotonic() < deadline and query.isActive:
                time.sleep(0.2)
        finally:
            while run.busy.is_set():
                time.sleep(0.1)
            query.stop()
    assert query.exception() is None
    reasons = {}
    for r in rows(spark, lake, "alerts"):
        reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
    assert reasons == {"wide_spread": pairs}, reasons
    assert len(batches) >= 2, "the pairs must land across several batches for the test to mean anything"
    entries = (lake / "_checkpoints" / "stream" / "sources" / "0" / "0").read_text().splitlines()[1:]
    assert all("/orders/" in json.loads(e)["path"] for e in entries), "source 0 is the orders folder"


def test_a_quotes_first_checkpoint_is_moved_and_resumes_exactly(spark, tmp_path, monkeypatch):
    source = tmp_path / "source"
    write_backlog(source, Generator(SYMBOLS, seed=21, wide_share=0.4), 300, 300, 4, "g")
    # Pair 4 is a quote alone, after every order's time: it lands early in one run and changes no answer.
    land(source, "quotes", [quote("MSFT", "2026-11-24T14:30:00Z", "1.00", "1.50")], name="g-00004.jsonl")

    reference = tmp_path / "reference"
    for k in range(5):
        land_pair(source, reference / "landing", k)
    assert stream(spark, reference / "landing", reference / "lake") == 0

    # The version before this one: quotes named first, no layout file.
    root = tmp_path / "moved"
    landing, lake = root / "landing", root / "lake"
    checkpoint = lake / "_checkpoints" / "stream"
    monkeypatch.setattr(layout, "LISTING_ORDER", layout.LEGACY_ORDER)
    land_pair(source, landing, 0)
    land_pair(source, landing, 1)
    assert stream(spark, landing, lake) == 0
    land_pair(source, landing, 4)  # quotes only: the two sources' log offsets now differ
    assert stream(spark, landing, lake) == 0
    # Then a crash between the writes of a batch, leaving offsets without a commit (replayed after the move).
    land_pair(source, landing, 2)
    monkeypatch.setenv("MARKET_SPREAD_STATE_TRAIL_BATCHES", "1")  # the state committed in its batch
    real_merge = state_writes.merge_state

    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash between the writes of one micro-batch")

    monkeypatch.setattr(state_writes, "merge_state", crash)  # both placements commit through it
    assert stream(spark, landing, lake) == 1
    monkeypatch.setattr(state_writes, "merge_state", real_merge)
    (checkpoint / layout.LAYOUT_FILE).unlink()
    last = sorted((checkpoint / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))[-1]
    assert last.read_text().splitlines()[2:] == ['{"logOffset":2}', '{"logOffset":1}']
    assert not (checkpoint / "commits" / last.name).exists()

    monkeypatch.setattr(layout, "LISTING_ORDER", ("orders", "quotes"))
    land_pair(source, landing, 3)
    assert stream(spark, landing, lake) == 0
    assert layout.recorded_order(checkpoint) == ("orders", "quotes")
    assert last.read_text().splitlines()[2:] == ['{"logOffset":1}', '{"logOffset":2}']
    assert not layout._staging(checkpoint).exists() and not layout._retired(checkpoint).exists()
    assert comparable_tables(spark, lake) == comparable_tables(spark, reference / "lake")
    totals = metrics_totals(spark, lake)
    assert totals["alerts"] == len(rows(spark, lake, "alerts")) and totals["quotes"] == len(rows(spark, lake, "quotes"))
