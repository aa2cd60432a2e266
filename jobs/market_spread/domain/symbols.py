"""The symbol universe: the symbols the product knows, read from a file of one symbol per line."""

from __future__ import annotations

from pathlib import Path

from market_spread.errors import UsageError


def load_symbols(path: str | Path) -> list[str]:
    """The universe: one symbol per line; blank lines and #-comments skipped; order kept, no repeats.
    UsageError when the file is missing or names no symbol."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"symbol file not found: {path}")
    seen: dict[str, None] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        symbol = line.split("#", 1)[0].strip()
        if symbol:
            seen.setdefault(symbol, None)
    if not seen:
        raise UsageError(f"symbol file is empty: {path}")
    return list(seen)
