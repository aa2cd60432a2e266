"""Which file source a stream checkpoint holds where, and the one-time move to orders first.

Spark lists a query's sources one after the other when it plans a batch (and, for available-now,
when the run starts), in the order the query names them. Listed quotes first, a quote file and then
its order file landing between the two listings would put the order in a batch without its quote:
the order is checked against an older quote, or gets `no_market_data` (contract 5.2). Listed orders
first, every order file in a batch landed before the quotes folder was listed, and so did every
quote that landed before it. The stream therefore names orders first.

Spark keys a checkpoint's sources by position (`sources/0`, `sources/1`, and the offset lines of
`offsets/N` in that order), so a checkpoint written quotes first is moved once: copied, its two
source folders and offset lines swapped in the copy, and the copy swapped in by two renames. A kill
at any point leaves the old checkpoint or the new one, and the next start finishes or redoes the
move. `LAYOUT_FILE` records the layout; a checkpoint without it and with offsets is quotes first.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from market_spread.errors import MarketSpreadError
from market_spread.runtime.checkpoint_files import offset_files, rewrite
from market_spread.runtime.storage import Location, S3Path

# The stream's sources in the order the query names them (and Spark lists them).
LISTING_ORDER = ("orders", "quotes")
LEGACY_ORDER = ("quotes", "orders")
LAYOUT_FILE = "market-spread-sources.json"


class CheckpointLayoutError(MarketSpreadError, RuntimeError):
    """A checkpoint this version cannot move to its source order: a person must look at it."""


def _staging(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".orders-first")


def _retired(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".quotes-first")


def _has_history(checkpoint: Location) -> bool:
    """Offsets, or a source log a planning left before its offsets were written (a kill then)."""
    logs = (
        p for n in ("0", "1") if (checkpoint / "sources" / n).is_dir() for p in (checkpoint / "sources" / n).iterdir()
    )
    return bool(offset_files(checkpoint)) or any(not p.name.startswith(".") for p in logs)


def recorded_order(checkpoint: Location) -> tuple[str, ...] | None:
    """The source order the checkpoint records; None when it records none."""
    try:
        return tuple(json.loads((checkpoint / LAYOUT_FILE).read_text(encoding="utf-8"))["sources"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointLayoutError(f"{checkpoint / LAYOUT_FILE} is not readable: {exc}") from None


def _write_layout(checkpoint: Location, order: tuple[str, ...]) -> None:
    rewrite(checkpoint / LAYOUT_FILE, json.dumps({"sources": list(order)}) + "\n")


def _finish_interrupted_move(checkpoint: Path) -> None:
    staging, retired = _staging(checkpoint), _retired(checkpoint)
    if staging.exists():
        if not checkpoint.exists() and recorded_order(staging) == LISTING_ORDER:
            staging.rename(checkpoint)  # killed between the two renames: the copy is complete
        else:
            shutil.rmtree(staging)  # killed while copying: start the move again
    if retired.exists() and checkpoint.exists():
        shutil.rmtree(retired)


def _swapped(path: Location) -> str:
    """The offsets file's text with its two source lines swapped; refuses any other shape."""
    lines = path.read_text(encoding="utf-8").split("\n")
    trailing = lines[-1] == ""
    body = lines[:-1] if trailing else lines
    if len(body) != 4 or not body[0].startswith("v") or not all('"logOffset"' in l for l in body[2:]):
        raise CheckpointLayoutError(
            f"{path}: not the offsets of two file sources (version line, metadata, two logOffset lines); "
            "this version cannot move the checkpoint to orders-first"
        )
    return "\n".join(body[:2] + [body[3], body[2]] + ([""] if trailing else []))


def _move_to_orders_first(checkpoint: Path) -> None:
    staging, retired = _staging(checkpoint), _retired(checkpoint)
    swapped = {path.name: _swapped(path) for path in offset_files(checkpoint)}  # refuses before any copy
    shutil.copytree(checkpoint, staging)
    sources = staging / "sources"
    first, second = sources / "0", sources / "1"
    parked = sources / ".0.moving"
    if first.exists():
        first.rename(parked)
    if second.exists():
        second.rename(first)
    if parked.exists():
        parked.rename(second)
    for name, text in swapped.items():
        rewrite(staging / "offsets" / name, text)
    _write_layout(staging, LISTING_ORDER)  # last: marks the copy complete
    checkpoint.rename(retired)
    staging.rename(checkpoint)
    shutil.rmtree(retired)


def prepare(checkpoint: Location) -> str | None:
    """Make a file-source checkpoint list orders first; returns a line to print when it moved one.

    Call with the lake's writer lock held and no query running on the checkpoint."""
    if not isinstance(checkpoint, S3Path):  # a move is only ever made on a local disk (below)
        _finish_interrupted_move(checkpoint)
    order = recorded_order(checkpoint) if checkpoint.exists() else None
    if order == LISTING_ORDER:
        return None
    if order is not None and order != LEGACY_ORDER:
        raise CheckpointLayoutError(f"{checkpoint / LAYOUT_FILE} records an unknown source order {order}")
    if order is None and not _has_history(checkpoint):
        checkpoint.mkdir(parents=True, exist_ok=True)  # a new checkpoint: written orders first from the start
        _write_layout(checkpoint, LISTING_ORDER)
        return None
    batches = len(offset_files(checkpoint))
    if isinstance(checkpoint, S3Path):  # only a checkpoint copied there from an older release
        raise CheckpointLayoutError(
            f"{checkpoint} lists quotes before orders (an older release's layout) and cannot be moved on object "
            "storage: copy it to a local disk, start the stream there once with --available-now, and copy it back"
        )
    _move_to_orders_first(checkpoint)
    return (
        f"moved the checkpoint {checkpoint} ({batches:,} batches) to list orders before quotes, so that an "
        "order never enters a batch ahead of a quote that landed before it"
    )
