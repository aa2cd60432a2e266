"""The reject rule, the order of quotes and the as-of choice over Arrow columns: the driver's one
implementation of each (Spark's is its SQL, domain.rules; the reference engine and the Great
Expectations suites stay the independent checks).

Quotes are tables of (symbol, bid, offer, time, seq): prices DECIMAL(18,8), time in microseconds
since the epoch (UTC), seq a 64-bit integer or null. Orders have symbol and time (and any other
columns). Pure: no I/O, no Spark; Arrow's kernels and NumPy.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from market_spread.domain.rules import Thresholds

PRICE = pa.decimal128(18, 8)
TIME = pa.timestamp("us", tz="UTC")  # a time as the lake stores it (Delta's TIMESTAMP)


def rejects(bid: pa.Array, offer: pa.Array, thresholds: Thresholds) -> pa.Array:
    """Whether trades against each quote must be rejected: spread = offer - bid > 0 and (spread >=
    max_spread or spread >= ratio * mid), as 2 * spread >= ratio * (bid + offer): no division, exact
    in DECIMAL128 (38 digits hold every product here). A crossed or locked quote never rejects."""
    spread = pc.subtract(offer, bid)
    wide = pc.greater_equal(spread, pa.scalar(thresholds.max_spread, PRICE))
    ratio = pc.greater_equal(
        pc.add(spread, spread), pc.multiply(pa.scalar(thresholds.max_spread_ratio, PRICE), pc.add(bid, offer))
    )
    return pc.and_(pc.greater(spread, pa.scalar(Decimal(0), PRICE)), pc.or_(wide, ratio))


def sort_by_key(quotes: pa.Table) -> pa.Table:
    """Quotes ordered by symbol, then by the quote key: later time, then a seq over none, then the
    higher seq, then (exact ties) the higher bid and offer. A total order over the quote's own
    fields, so the winner never depends on how the input was cut into files or batches."""
    return quotes.take(_key_order(quotes))


def _key_order(quotes: pa.Table) -> np.ndarray:
    """The positions of `quotes` in sort_by_key's order: one NumPy lexsort over integer keys (the
    symbol's rank, the time, whether a seq is given, the seq, the prices' unscaled integers)."""
    if quotes.num_rows == 0:
        return np.zeros(0, np.int64)
    symbols = quotes["symbol"].combine_chunks()
    names = pc.unique(symbols).sort()
    seq = quotes["seq"].combine_chunks()
    keys = [
        _unscaled(quotes["offer"]),
        _unscaled(quotes["bid"]),
        pc.fill_null(seq, 0).to_numpy(zero_copy_only=False),
        pc.is_valid(seq).to_numpy(zero_copy_only=False),
        quotes["time"].combine_chunks().to_numpy(zero_copy_only=False),
        pc.index_in(symbols, value_set=names).to_numpy(zero_copy_only=False),
    ]
    return np.lexsort(keys)  # the last key first


def _unscaled(prices: pa.ChunkedArray) -> np.ndarray:
    """DECIMAL(18,8) values as their unscaled 64-bit integers (18 digits fit in 63 bits): the low
    word of each 128-bit value, for ordering."""
    array = pc.fill_null(prices.combine_chunks(), pa.scalar(Decimal(0), PRICE))
    words = np.frombuffer(array.buffers()[1], dtype=np.int64)
    return words[2 * array.offset : 2 * (array.offset + len(array)) : 2]


def newest(quotes: pa.Table) -> pa.Table:
    """Each symbol's highest quote by the quote key (sort_by_key's last of each symbol)."""
    ranked = sort_by_key(quotes)
    symbols = ranked["symbol"].combine_chunks()
    if len(symbols) == 0:
        return ranked
    last = np.flatnonzero(pc.not_equal(symbols[1:], symbols[:-1]).to_numpy(zero_copy_only=False))
    return ranked.take(np.append(last, len(symbols) - 1))


def as_of(orders: pa.Table, candidates: pa.Table) -> pa.Table:
    """For each order (in order), its chosen quote's columns (null where none): the highest quote
    key among its symbol's candidates whose time is at or before the order's (a quote at the
    order's very time counts)."""
    ranked = sort_by_key(candidates)
    names = pc.unique(ranked["symbol"])
    c_code = pc.index_in(ranked["symbol"], value_set=names).to_numpy(zero_copy_only=False).astype(np.int64)
    o_code = pc.index_in(orders["symbol"], value_set=names).to_numpy(zero_copy_only=False)
    known = ~np.isnan(o_code) if o_code.dtype.kind == "f" else np.ones(len(o_code), bool)
    o_code = np.where(known, np.nan_to_num(o_code), -1).astype(np.int64)
    c_time, o_time = ranked["time"].to_numpy(), orders["time"].to_numpy()
    # (symbol, time) as one sortable integer: the time's rank among all times in the batch.
    times, rank = np.unique(np.concatenate([c_time, o_time]), return_inverse=True)
    span = len(times) + 1
    c_comp = c_code * span + rank[: len(c_time)]
    o_comp = o_code * span + rank[len(c_time) :]
    at = np.searchsorted(c_comp, o_comp, side="right") - 1
    found = known & (at >= 0) & (c_code[np.clip(at, 0, None)] == o_code) if len(c_code) else np.zeros(len(o_code), bool)
    return ranked.take(pa.array(np.where(found, at, 0), mask=~found))
