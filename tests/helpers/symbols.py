"""The symbol universe of the tests and the symbol files the commands read."""

from __future__ import annotations

from pathlib import Path

SYMBOLS = ["AAPL", "MSFT", "IBM", "GOOG", "TSLA"]


def symbols_file(folder: Path, symbols: list[str], comment: str | None = None) -> Path:
    """`folder/symbols.txt`, one symbol a line, after a `# comment` line when one is given."""
    path = folder / "symbols.txt"
    head = f"# {comment}\n" if comment is not None else ""
    path.write_text(head + "\n".join(symbols) + "\n")
    return path
