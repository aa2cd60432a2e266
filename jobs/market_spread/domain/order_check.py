"""The as-of check of orders, in pure Python: each order against the quote current at its time.

The same choice as transforms.asof (Spark): among the candidate quotes of the order's symbol whose
time is at or before the order's, the highest by rules.quote_key (a quote at the order's own time
counts). Choosing the candidates (the batch's quotes, the stored state, late history) is the
stream's business (stream.driver_batch).
"""
from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from typing import Iterable

from market_spread.domain.certain_lines import Order, Quote
from market_spread.domain.rules import Thresholds, quote_key, should_reject


def key(q: Quote) -> tuple:
    return quote_key(q.time, q.seq, q.bid, q.offer)


def newest_by_symbol(quotes: Iterable[Quote]) -> dict[str, Quote]:
    """Each symbol's highest quote by rules.quote_key."""
    newest: dict[str, Quote] = {}
    for q in quotes:
        old = newest.get(q.symbol)
        if old is None or key(q) > key(old):
            newest[q.symbol] = q
    return newest


def as_of(orders: list[Order], candidates: dict[str, list[Quote]]) -> list[Quote | None]:
    """For each order (in order), the quote current at its time among its symbol's candidates."""
    ordered = {s: sorted(qs, key=key) for s, qs in candidates.items()}
    times = {s: [q.time for q in qs] for s, qs in ordered.items()}
    chosen: list[Quote | None] = []
    for o in orders:
        at = bisect_right(times.get(o.symbol, ()), o.time)
        chosen.append(ordered[o.symbol][at - 1] if at else None)
    return chosen


def reason(quote: Quote | None, thresholds: Thresholds) -> str | None:
    """The alert's reason for an order checked against `quote`, or None when the order may trade."""
    if quote is None:
        return "no_market_data"
    return "wide_spread" if should_reject(quote.bid, quote.offer, thresholds.max_spread, thresholds.max_spread_ratio) else None


def spans(orders: Iterable[Order]) -> dict[str, tuple[int, int]]:
    """Each symbol's first and last order time (microseconds)."""
    times: dict[str, list[int]] = defaultdict(list)
    for o in orders:
        times[o.symbol].append(o.time)
    return {s: (min(t), max(t)) for s, t in times.items()}
