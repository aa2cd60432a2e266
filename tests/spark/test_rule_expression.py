"""The reject rule as a Spark SQL expression agrees with the Python rule, on random prices."""

from __future__ import annotations

from decimal import Decimal as D

from hypothesis import given, settings
from hypothesis import strategies as st

from market_spread.domain.rules import Thresholds, reject_sql
from market_spread_tools.reference import should_reject

prices = st.decimals(min_value=D("0.00000001"), max_value=D("9999999999.99999999"), places=8)
THRESHOLDS = [(D("0.05"), D("0.05")), (D("0"), D("0.00000001")), (D("0.01"), D("1.5")), (D("12.5"), D("0"))]


@settings(max_examples=3, deadline=None)
@given(st.lists(st.tuples(prices, prices), min_size=100, max_size=100))
def test_spark_expression_agrees_with_python_rule(spark, cases):
    cases += [(D("1.10"), D("1.15")), (D("0.50"), D("0.53")), (D("1.00"), D("1.04")), (D("2"), D("2"))]
    df = spark.createDataFrame(cases, "bid DECIMAL(18,8), offer DECIMAL(18,8)")
    exprs = [f"{reject_sql('bid', 'offer', Thresholds(ms, mr))} AS r{i}" for i, (ms, mr) in enumerate(THRESHOLDS)]
    got = [tuple(r) for r in df.selectExpr(*exprs).collect()]
    expected = [tuple(should_reject(b, o, ms, mr) for ms, mr in THRESHOLDS) for b, o in cases]
    assert got == expected


def test_field_by_field_quote_order_agrees_with_the_struct_order(spark):
    """quote_key_greater_sql (delta-rs's MERGE condition) orders quotes exactly as quote_key_sql."""
    from itertools import product

    from market_spread.domain.rules import quote_key_greater_sql, quote_key_sql

    times = ["2026-11-23 14:30:00", "2026-11-23 14:30:00.000001"]
    quotes = [(t, s, b, o) for t, s, b, o in product(times, [None, 0, 7], [D("1.1"), D("1.2")], [D("1.3"), D("1.4")])]
    pairs = [(*a, *b) for a in quotes for b in quotes]
    df = spark.createDataFrame(
        pairs,
        "t1 STRING, s1 BIGINT, b1 DECIMAL(18,8), o1 DECIMAL(18,8), t2 STRING, s2 BIGINT, b2 DECIMAL(18,8), o2 DECIMAL(18,8)",
    ).selectExpr(
        "named_struct('quote_time', CAST(t1 AS TIMESTAMP), 'seq', s1, 'bid', b1, 'offer', o1) AS s",
        "named_struct('quote_time', CAST(t2 AS TIMESTAMP), 'seq', s2, 'bid', b2, 'offer', o2) AS t",
    )
    rows = df.selectExpr(
        f"{quote_key_sql('s.')} > {quote_key_sql('t.')} AS struct_order",
        f"{quote_key_greater_sql('s.', 't.')} AS field_order",
    ).collect()
    assert len(rows) == len(quotes) ** 2 == 576
    assert sum(r.struct_order for r in rows) == len(quotes) * (len(quotes) - 1) // 2  # a strict total order
    assert all(r.struct_order == r.field_order for r in rows)
