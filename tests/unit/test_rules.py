"""The reject rule in plain Python: exact decimal arithmetic, thresholds, quote ordering (no Spark)."""

from __future__ import annotations

from decimal import Decimal as D

import pytest

from market_spread.domain.rules import parse_threshold
from market_spread_tools.reference import quote_key, should_reject


@pytest.mark.parametrize(
    "bid, offer, expected, why",
    [
        ("1.10", "1.15", True, "spread exactly 0.05: binary floats would say 0.04999..."),
        ("0.50", "0.53", True, "0.03 < 0.05 but >= 5% of mid 0.515"),
        ("1.00", "1.04", False, "0.04 and under 5% of mid"),
        ("1.05", "1.05", False, "locked market never rejects"),
        ("1.10", "1.00", False, "crossed market never rejects"),
        ("1000", "1001", True, "Wallaroo's always-reject quote"),
        ("100.00", "100.01", False, "tight"),
        ("0.00000001", "0.00000002", True, "spread equal to 0.67 x mid"),
    ],
)
def test_reject_rule_edge_cases(bid, offer, expected, why):
    assert should_reject(D(bid), D(offer)) is expected, why


def test_float_arithmetic_would_get_the_edge_wrong():
    # The reason the rule is decimal: in binary floating point 1.15 - 1.10 < 0.05.
    assert 1.15 - 1.10 < 0.05
    assert should_reject(D("1.10"), D("1.15"))


def test_thresholds_are_configurable():
    assert not should_reject(D("1.10"), D("1.15"), max_spread=D("0.06"), max_spread_ratio=D("0.5"))
    assert should_reject(D("1.00"), D("1.01"), max_spread=D("0.01"), max_spread_ratio=D("1"))


@pytest.mark.parametrize("text", ["abc", "-1", "NaN", "Infinity", "0.000000001", "1e11"])
def test_bad_thresholds_are_refused(text):
    with pytest.raises(ValueError):
        parse_threshold(text)


def test_quote_key_orders_by_time_then_seq_then_prices():
    assert quote_key(2, None, D(1), D(2)) > quote_key(1, 99, D(1), D(2))
    assert quote_key(1, 5, D(1), D(2)) > quote_key(1, None, D(9), D(9))  # a seq beats none
    assert quote_key(1, 6, D(1), D(2)) > quote_key(1, 5, D(9), D(9))
    assert quote_key(1, 5, D(2), D(3)) > quote_key(1, 5, D(1), D(3))  # exact ties: by prices
