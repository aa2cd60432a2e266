"""Flags shared by several commands, and the symbol universe."""
from __future__ import annotations

import argparse
from decimal import Decimal
from pathlib import Path
from typing import Callable

from market_spread.domain.rules import DEFAULT_MAX_SPREAD, DEFAULT_MAX_SPREAD_RATIO, parse_threshold
from market_spread.runtime.paths import default_symbols

DEFAULT_SYMBOLS = default_symbols()


def add_lake(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", required=True, help="folder of the Delta tables")


def add_symbols(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--symbols", default=str(DEFAULT_SYMBOLS), help="symbol universe, one per line (default: include/symbols.txt)"
    )


def _threshold(name: str):
    def convert(text: str) -> Decimal:
        try:
            return parse_threshold(text, name)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def add_thresholds(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-spread", type=_threshold("--max-spread"), default=DEFAULT_MAX_SPREAD,
        help="reject when offer - bid >= this (default 0.05)",
    )
    parser.add_argument(
        "--max-spread-ratio", type=_threshold("--max-spread-ratio"), default=DEFAULT_MAX_SPREAD_RATIO,
        help="reject when offer - bid >= this x mid (default 0.05)",
    )


def whole_number(minimum: int, unit: str = "", note: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number >= minimum, with a one-line reason otherwise."""
    units = f" of {unit}" if unit else ""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number{units}: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}{' ' + unit if unit else ''}{note}: {text!r}")
        return value

    return convert


def load_symbols(path: str | Path) -> list[str]:
    """The universe: one symbol per line; blank lines and #-comments skipped; order kept, no repeats."""
    path = Path(path)
    if not path.is_file():
        from market_spread.cli.main import UsageError

        raise UsageError(f"symbol file not found: {path}")
    seen: dict[str, None] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        symbol = line.split("#", 1)[0].strip()
        if symbol:
            seen.setdefault(symbol, None)
    if not seen:
        from market_spread.cli.main import UsageError

        raise UsageError(f"symbol file is empty: {path}")
    return list(seen)
