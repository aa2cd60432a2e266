"""Landing files written the way producers write them: aside under a dot name, then renamed in,
so that the stream never lists a half-written file."""
from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

_counter = itertools.count()


def _encoded(line: str | bytes | dict) -> bytes:
    if isinstance(line, bytes):
        return line
    text = json.dumps(line) if isinstance(line, dict) else line
    return text.encode("utf-8", "surrogateescape")


def land(landing: Path, feed: str, lines: list, name: str | None = None) -> Path:
    """Write `landing/feed/name`, one line each: dicts JSON-encoded, strings and bytes as they are.
    Unnamed files get increasing names, so that they list in the order they were landed."""
    folder = landing / feed
    folder.mkdir(parents=True, exist_ok=True)
    name = name or f"f{next(_counter):06d}.jsonl"
    temp = folder / f".{name}.tmp"
    temp.write_bytes(b"".join(_encoded(line) + b"\n" for line in lines))
    temp.replace(folder / name)
    return folder / name


def land_file(path: Path, landing: Path, feed: str) -> Path:
    """Land a copy of an existing file under its own name."""
    target = landing / feed / path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.parent / f".{target.name}.tmp"
    shutil.copyfile(path, temp)
    temp.replace(target)
    return target


def land_pair(source: Path, landing: Path, k: int) -> None:
    """Land file pair k of a generated backlog (`*-0000k.jsonl`), quotes first, so that every quote
    lands no later than the orders it affects (contract 5.8)."""
    for feed in ("quotes", "orders"):
        for path in sorted((source / feed).glob(f"*-{k:05d}.jsonl")):
            land_file(path, landing, feed)
