"""Tables declared once (lake.tables.DECLARED): Spark's DDL, Delta's properties and the rows the
stream writes all come from the declaration, and rows are built by column name."""

from __future__ import annotations

import pyarrow as pa
import pytest

from market_spread.lake import tables as lake_mod
from market_spread.stream.batch_run import one_row

METRICS = {
    name: "driver" if name == "placement" else index
    for index, name in enumerate(lake_mod.arrow_schema("batch_metrics").names)
}


def test_the_ddl_and_arrow_schema_come_from_one_declaration():
    state = lake_mod.DECLARED["symbol_state"]
    assert state.ddl.startswith("symbol STRING NOT NULL, bid DECIMAL(18,8), offer DECIMAL(18,8), quote_time TIMESTAMP")
    # Rows are written with every column nullable (what delta-rs reads back); the DDL keeps NOT NULL.
    assert lake_mod.arrow_schema("symbol_state").field("symbol").nullable
    assert lake_mod.arrow_schema("alerts").field("price").type == pa.decimal128(18, 8)
    assert lake_mod.arrow_schema("alerts").field("order_time").type == pa.timestamp("us", tz="UTC")
    assert lake_mod.TABLES == tuple(lake_mod.DECLARED) == tuple(lake_mod.SCHEMAS)
    assert lake_mod.DECLARED["batch_metrics"].added_columns() == {
        "spark_jobs": "BIGINT",
        "placement": "STRING",
        "state_batch": "BIGINT",
    }
    props = lake_mod.table_properties("quotes")
    assert props["delta.checkpointInterval"] == "10"
    assert "quote_date" not in props["delta.dataSkippingStatsColumns"].split(",")  # the partition column
    assert "bid" not in props["delta.dataSkippingStatsColumns"].split(",")  # decimals: no bounds


def test_a_row_is_built_by_column_name_whatever_the_order():
    values = {name: index for name, index in reversed(METRICS.items())}
    row = one_row("batch_metrics", {**values, "started_at": None, "finished_at": None})
    assert row.schema == lake_mod.arrow_schema("batch_metrics")
    assert row.column("spark_jobs").to_pylist() == [METRICS["spark_jobs"]]
    assert row.column("batch_id").to_pylist() == [0]
    with pytest.raises(KeyError, match="spark_jobs"):
        one_row("batch_metrics", {k: v for k, v in values.items() if k != "spark_jobs"})
