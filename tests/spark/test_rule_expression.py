"""The state MERGE's condition in its two SQL spellings (Spark's struct order, and the field-by-field
form the delta-rs commits record) orders quotes alike."""

from __future__ import annotations

from decimal import Decimal as D


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
