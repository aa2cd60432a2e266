"""`market-spread sql`: a read-only query over the lake's tables by name (DataFusion or Spark SQL)."""

from __future__ import annotations

import click

from market_spread.cli.options import lake, required_place
from market_spread.cli.params import choice, env_command, options
from market_spread.lake.query import ENGINES, QuerySpec, query_lake

opt = options("sql")


@env_command("sql")
@lake("sql")
@opt("--format", type=choice("table", "json", "csv"), default="table", help="output format (default table)")
@opt(
    "--engine",
    type=choice(*ENGINES),
    default="auto",
    help="auto: a plain query on delta-rs's DataFusion (no JVM), anything else on Spark SQL; "
    "fast: DataFusion only; spark: Spark SQL only (default auto)",
)
@click.argument("query")
def command(lake: str, format: str, engine: str, query: str) -> int:  # noqa: A002 - the option's name
    """QUERY: a Spark SQL query, e.g. "SELECT reason, count(*) FROM alerts GROUP BY reason"."""
    return query_lake(QuerySpec(required_place(lake, "--lake"), query, format, engine))
