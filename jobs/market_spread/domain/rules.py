"""The reject rule's thresholds and the decimal limits of prices (the rule itself is the kernel's:
kernel.columns; the reference engine in market_spread_tools has a plain-Python one, as the
independent check); and the order of quotes as the state MERGE's condition, which the table's
writers (delta-rs, or delta-spark where the protocol asks for it) apply to stored rows.

spread = offer - bid, mid = (bid + offer) / 2
reject  = spread > 0 AND (spread >= max_spread OR spread >= max_spread_ratio * mid)
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import cast

DEFAULT_MAX_SPREAD = Decimal("0.05")
DEFAULT_MAX_SPREAD_RATIO = Decimal("0.05")
SCALE = 8
PRICE_LIMIT = Decimal("1e10")  # DECIMAL(18,8) holds 10 integer digits


def parse_threshold(text: str, name: str = "threshold") -> Decimal:
    """A threshold as an exact decimal: finite, >= 0, at most 8 fractional digits."""
    try:
        value = Decimal(str(text).strip())
    except InvalidOperation:
        raise ValueError(f"{name} must be a decimal number, got {text!r}") from None
    if not value.is_finite() or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {text!r}")
    if value >= PRICE_LIMIT or -cast(int, value.as_tuple().exponent) > SCALE:  # finite: an int exponent
        raise ValueError(f"{name} must fit DECIMAL(18,8), got {text!r}")
    return value


@dataclass(frozen=True)
class Thresholds:
    """The two thresholds of the reject rule: they always travel together."""

    max_spread: Decimal = DEFAULT_MAX_SPREAD
    max_spread_ratio: Decimal = DEFAULT_MAX_SPREAD_RATIO


DEFAULT_THRESHOLDS = Thresholds()


def quote_key_sql(prefix: str = "") -> str:
    """The total order of quotes (kernel.columns.sort_by_key) as a Spark SQL struct (structs compare
    field by field): later time, then a seq over none, then the higher seq, bid, offer."""
    p = prefix
    return (
        f"named_struct('t', {p}quote_time, 'has_seq', {p}seq IS NOT NULL, "
        f"'seq', coalesce({p}seq, 0L), 'bid', {p}bid, 'offer', {p}offer)"
    )


def quote_key_greater_sql(a: str = "s.", b: str = "t.") -> str:
    """`quote_key(a) > quote_key(b)` spelled out field by field, for SQL engines that cannot compare
    structs (DataFusion); the state's commits record it as their MERGE condition (lake.state, which
    applies it in Arrow). The same order as `quote_key_sql`:
    a later time, then a seq over none, then the higher seq, bid, offer. Quote times are never null."""

    def has_seq(p: str) -> str:
        return f"CASE WHEN {p}seq IS NULL THEN 0 ELSE 1 END"

    pairs = [
        (f"{a}quote_time", f"{b}quote_time"),
        (has_seq(a), has_seq(b)),
        (f"coalesce({a}seq, 0)", f"coalesce({b}seq, 0)"),
        (f"{a}bid", f"{b}bid"),
        (f"{a}offer", f"{b}offer"),
    ]

    def greater(rest: list[tuple[str, str]]) -> str:
        (x, y), *tail = rest
        return f"{x} > {y}" if not tail else f"({x} > {y} OR ({x} = {y} AND {greater(tail)}))"

    return greater(pairs)
