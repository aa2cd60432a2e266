"""How an `--available-now` run cuts a large backlog of landing files into batches, without
changing an answer.

Why: one batch of ten million events holds them all in memory at once and takes minutes; batches
of about a million events each take seconds. But a batch limit applies to each feed's folder on its
own (Spark's `maxFilesPerTrigger`), so a cut could put an orders file in a batch ahead of a quotes
file that landed before it (contract 5.2, 5.9). The backlog is cut only when its files come in
pairs that landed in turn: quotes file i, then orders file i, then quotes file i + 1 (as `generate`
and `replay` write them, and as producers that write a pair per interval do). Then N pairs a batch
keeps every quote file in the batch of, or before, every orders file that landed after it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from market_spread.runtime.storage import Location, S3Path

# About a million events a batch: a few seconds each on the driver, a few hundred MB of memory.
BATCH_BYTES = 128 << 20


@dataclass(frozen=True)
class Landed:
    name: str
    modified: float
    size: int


def files_per_batch(landing: Location, listed: dict[str, list[Landed]] | None = None) -> int | None:
    """File pairs a batch for a backlog worth cutting (over 1.5 x BATCH_BYTES, in pairs that landed
    in turn); None to take it in one batch."""
    listed = listed if listed is not None else {feed: _listing(landing / feed) for feed in ("quotes", "orders")}
    quotes, orders = (sorted(listed[feed], key=lambda f: (f.modified, f.name)) for feed in ("quotes", "orders"))
    total = sum(f.size for f in quotes + orders)
    if total <= 1.5 * BATCH_BYTES or not _in_turn(quotes, orders):
        return None
    return max(1, math.floor(len(quotes) * BATCH_BYTES / total))


def _in_turn(quotes: list[Landed], orders: list[Landed]) -> bool:
    """Quotes file i landed no later than orders file i, which landed no later than quotes file i+1."""
    if len(quotes) != len(orders) or not quotes:
        return False
    for i, (q, o) in enumerate(zip(quotes, orders)):
        if q.modified > o.modified or (i + 1 < len(quotes) and o.modified > quotes[i + 1].modified):
            return False
    return True


def _listing(folder: Location) -> list[Landed]:
    """The landing files of a folder (`*.jsonl`, not hidden), with their times and sizes."""
    if isinstance(folder, S3Path):
        return [
            Landed(obj.name, info.modified.timestamp(), info.size)
            for obj, info in folder.listing()
            if obj.parent == folder and _landing_name(obj.name)
        ]
    try:
        with os.scandir(folder) as entries:
            return [
                Landed(e.name, e.stat().st_mtime, e.stat().st_size)
                for e in entries
                if _landing_name(e.name) and e.is_file()
            ]
    except OSError:
        return []


def _landing_name(name: str) -> bool:
    return name.endswith(".jsonl") and not name.startswith((".", "_"))
