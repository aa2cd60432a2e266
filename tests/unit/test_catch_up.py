"""stream.catch_up: a backlog is cut into batches only where the cut cannot change an answer."""

from __future__ import annotations

from market_spread.stream.catch_up import BATCH_BYTES, Landed, files_per_batch

MB = 1 << 20


def pairs(n: int, size: int, order_delay: float = 0.5) -> dict[str, list[Landed]]:
    return {
        "quotes": [Landed(f"p{i:03d}.jsonl", float(i), size) for i in range(n)],
        "orders": [Landed(f"p{i:03d}.jsonl", i + order_delay, size) for i in range(n)],
    }


def test_a_large_backlog_of_pairs_in_turn_is_cut_into_batches_of_about_batch_bytes():
    n = files_per_batch(None, pairs(40, 8 * MB))  # 640 MB in 40 pairs
    assert n is not None and abs(n * 2 * 8 * MB - BATCH_BYTES) <= 16 * MB


def test_a_small_backlog_or_one_whose_files_do_not_land_in_turn_is_one_batch():
    assert files_per_batch(None, pairs(4, 8 * MB)) is None  # 64 MB: one batch
    late = pairs(40, 8 * MB, order_delay=1.5)  # orders file i lands after quotes file i + 1
    assert files_per_batch(None, late) is None
    uneven = pairs(40, 8 * MB)
    uneven["orders"].pop()
    assert files_per_batch(None, uneven) is None
