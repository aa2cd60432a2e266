"""`market-spread sql`: a read-only Spark SQL query over the lake's tables by name."""
from __future__ import annotations

import argparse

import click

from market_spread.cli.options import lake
from market_spread.cli.params import choice, env_command, options

opt = options("sql")


@env_command("sql")
@lake("sql")
@opt("--format", type=choice("table", "json", "csv"), default="table", help="output format (default table)")
@click.argument("query")
def command(**params) -> int:
    """QUERY: a Spark SQL query, e.g. "SELECT reason, count(*) FROM alerts GROUP BY reason"."""
    from market_spread.lake.query import run

    return run(argparse.Namespace(**params))
