"""Keep a file source's metadata log from growing for ever.

Spark's file source remembers every file it has read in `CHECKPOINT/sources/N/`: one entry (about
200 bytes) per file, compacted every 10 batches into `<batch>.compact`, which holds every entry
ever written. Spark 4.1 has no retention for it. With `stream --archive` the landing folder only
holds files not yet committed, so an entry for a file that has left it guards nothing: Spark
lists the folder, and a file that is not there cannot be read twice.

`trim_source_logs` drops such entries from the latest compact file when a stream starts (the
writer lock held, no query running) and, in a long run, every `trim_interval()` batches from
inside the batch: foreachBatch runs on the query's own thread, the one that writes this log, so
nothing writes it meanwhile, and the next compaction reads the trimmed file. It keeps every entry
of the last two committed batches and of any batch not committed yet (a replay after a crash reads
its files from this log), every entry whose file is still in place, and every entry whose folder
is gone (an unmounted landing folder must not look like an emptied one). The rewrite is atomic: a
kill leaves the old file or the new one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from market_spread.runtime import settings
from market_spread.runtime.checkpoint_files import last_committed, rewrite
from market_spread.runtime.storage import Location

# Entries of batches this close to the last committed one are always kept.
KEEP_LAST_BATCHES = 2
TRIM_EVERY_VARIABLE = "MARKET_SPREAD_SOURCE_LOG_TRIM_EVERY"


def trim_interval() -> int:
    """Batches between two trims in a running stream (default 1,000: under two hours at the
    default 5-second trigger), so that a trim stays short (measured: docs/performance.md, row 'the
    file source's log trimmed every 1,000 batches')."""
    return settings.value(TRIM_EVERY_VARIABLE)  # SettingError unless a whole number of batches >= 1


@dataclass(frozen=True)
class TrimResult:
    folder: Location
    compact_file: str
    kept: int
    dropped: int


def _local_path(uri: str) -> Path | None:
    """The local path of a `file:` URI (or a plain path); None for any other scheme."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path))
    return None


def _guards_nothing(entry: dict, cutoff: int) -> bool:
    """True when the entry is old enough and its file has left a folder that still exists."""
    if int(entry["batchId"]) > cutoff:
        return False
    path = _local_path(entry["path"])
    return path is not None and path.parent.is_dir() and not path.exists()


def _latest_compact(folder: Location) -> Location | None:
    compacts = [p for p in folder.glob("*.compact") if p.name[: -len(".compact")].isdigit()]
    return max(compacts, key=lambda p: int(p.name[: -len(".compact")]), default=None)


def trim_source_log(folder: Location, last_committed: int) -> TrimResult | None:
    """Trim one source's log folder; None when there is nothing to do or it is not a file source's log."""
    compact = _latest_compact(folder)
    if compact is None:
        return None
    text = compact.read_text(encoding="utf-8")
    version, *lines = text.split("\n")
    if not version.startswith("v"):
        return None
    cutoff = last_committed - KEEP_LAST_BATCHES
    kept: list[str] = []
    for line in lines:
        if not line:
            continue
        try:
            entry = json.loads(line)
            drop = _guards_nothing(entry, cutoff)
        except (ValueError, KeyError, TypeError):
            return None  # not the format we know: leave the log as Spark wrote it
        if not drop:
            kept.append(line)
    dropped = sum(1 for line in lines if line) - len(kept)
    if dropped == 0:
        return None
    rewrite(compact, "\n".join([version, *kept]))
    return TrimResult(folder, compact.name, len(kept), dropped)


def _name(place: Location) -> str:
    return place.name  # siblings: in the order of their paths


def trim_source_logs(checkpoint: Location) -> list[TrimResult]:
    """Trim every file source's log under a stream checkpoint (see the module's docstring)."""
    last = last_committed(checkpoint)
    sources = checkpoint / "sources"
    if last is None or not sources.is_dir():
        return []
    results = [trim_source_log(folder, last) for folder in sorted(sources.iterdir(), key=_name) if folder.is_dir()]
    return [r for r in results if r is not None]
