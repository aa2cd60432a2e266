"""Landing files written the way producers write them: aside under a dot name, then renamed in,
so that the stream never lists a half-written file; on S3 one PUT each (an object is whole once
listed). `landing` may be a Path, an S3Path or an s3:// URI (runtime.storage.location)."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

from market_spread.runtime.storage import Location, S3Path, location

_counter = itertools.count()


def _encoded(line: str | bytes | dict) -> bytes:
    if isinstance(line, bytes):
        return line
    text = json.dumps(line) if isinstance(line, dict) else line
    return text.encode("utf-8", "surrogateescape")


def _put(target: Location, data: bytes) -> Location:
    if isinstance(target, S3Path):
        target.write_bytes(data)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.parent / f".{target.name}.tmp"
    temp.write_bytes(data)
    temp.replace(target)
    return target


def land(landing: "Location | str", feed: str, lines: list, name: str | None = None) -> Location:
    """Write `landing/feed/name`, one line each: dicts JSON-encoded, strings and bytes as they are.
    Unnamed files get increasing names, so that they list in the order they were landed."""
    name = name or f"f{next(_counter):06d}.jsonl"
    return _put(location(landing) / feed / name, b"".join(_encoded(line) + b"\n" for line in lines))


def land_file(path: Path, landing: "Location | str", feed: str) -> Location:
    """Land a copy of an existing local file under its own name."""
    target = location(landing) / feed / path.name
    if isinstance(target, S3Path):
        return _put(target, path.read_bytes())
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.parent / f".{target.name}.tmp"
    shutil.copyfile(path, temp)
    temp.replace(target)
    return target


def land_pair(source: Path, landing: "Location | str", k: int) -> None:
    """Land file pair k of a generated backlog (`*-0000k.jsonl`), quotes first, so that every quote
    lands no later than the orders it affects (contract 5.8)."""
    for feed in ("quotes", "orders"):
        for path in sorted((source / feed).glob(f"*-{k:05d}.jsonl")):
            land_file(path, landing, feed)
