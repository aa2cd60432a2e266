"""The reject rule as a Spark SQL expression agrees with the Python rule, on random prices."""
from __future__ import annotations

from decimal import Decimal as D

from hypothesis import given, settings
from hypothesis import strategies as st

from market_spread.domain.rules import Thresholds, reject_sql, should_reject

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
