"""Options shared by several commands and their value checks."""

from __future__ import annotations

from collections.abc import Callable

from market_spread.cli.params import Converted, number, options
from market_spread.domain.rules import DEFAULT_MAX_SPREAD, DEFAULT_MAX_SPREAD_RATIO, parse_threshold
from market_spread.errors import UsageError
from market_spread.runtime.paths import default_symbols
from market_spread.runtime.storage import Location, location
from market_spread.runtime.stream_contract import PLACEMENTS  # noqa: F401 - `stream --placement`

DEFAULT_SYMBOLS = default_symbols()


def whole_number(minimum: int, unit: str = "", note: str = "") -> Converted:
    """A whole number >= minimum, with a one-line reason otherwise."""
    units = f" of {unit}" if unit else ""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"not a whole number{units}: {text!r}") from None
        if value < minimum:
            raise ValueError(f"must be >= {minimum}{' ' + unit if unit else ''}{note}: {text!r}")
        return value

    return Converted(convert, "integer")


def ranged(kind: type, low: float, high: float) -> Converted:
    """A number in [low, high]."""

    def convert(text: str):
        value = number(kind).convert(text, None, None)
        if not low <= value <= high:
            raise ValueError(f"must be between {low:g} and {high:g}")
        return value

    return Converted(convert, kind.__name__)


def _threshold(flag: str) -> Converted:
    return Converted(lambda text: parse_threshold(text, flag), "decimal")


def lake(command: str) -> Callable:
    return options(command)("--lake", required=True, help="folder of the Delta tables")


def symbols(command: str) -> Callable:
    return options(command)(
        "--symbols", default=str(DEFAULT_SYMBOLS), help="symbol universe, one per line (default: include/symbols.txt)"
    )


def master(command: str) -> Callable:
    return options(command)("--master", help="Spark master URL (default local[*])")


def thresholds(command: str) -> Callable:
    opt = options(command)

    def decorate(f: Callable) -> Callable:
        f = opt(
            "--max-spread-ratio",
            type=_threshold("--max-spread-ratio"),
            default=DEFAULT_MAX_SPREAD_RATIO,
            help="reject when offer - bid >= this x mid (default 0.05)",
        )(f)
        return opt(
            "--max-spread",
            type=_threshold("--max-spread"),
            default=DEFAULT_MAX_SPREAD,
            help="reject when offer - bid >= this (default 0.05)",
        )(f)

    return decorate


def place(text: str | None) -> Location | None:
    """A path option's value: a local path or an S3 location (runtime.storage); None when not given."""
    if not text:
        return None
    try:
        return location(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def required_place(text: str, flag: str) -> Location:
    """`place` of an option that always has a value (required, or with a default): an empty one is refused."""
    found = place(text)
    if found is None:
        raise UsageError(f"{flag} is empty: give a folder or an s3:// location")
    return found
