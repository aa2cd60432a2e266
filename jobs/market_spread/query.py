"""`market-spread sql`: query the lake's tables by name (each Delta table is a view of its name)."""
from __future__ import annotations

import argparse
import csv
import json
import sys
from datetime import date, datetime
from decimal import Decimal

from .options import add_lake


def configure(parser: argparse.ArgumentParser) -> None:
    add_lake(parser)
    parser.add_argument("--format", choices=("table", "json", "csv"), default="table", help="output format (default table)")
    parser.add_argument("query", help='a Spark SQL query, e.g. "SELECT reason, count(*) FROM alerts GROUP BY reason"')


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return str(value)


def _json_value(value: object) -> object:
    if isinstance(value, Decimal):
        return str(value)  # exact: never through a float
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return value


def render(columns: list[str], rows: list[tuple], fmt: str, out=sys.stdout) -> None:
    if fmt == "json":
        for row in rows:
            out.write(json.dumps({c: _json_value(v) for c, v in zip(columns, row)}) + "\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_text(v) for v in row] for row in rows])
    else:
        cells = [[_text(v) for v in row] for row in rows]
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
        out.write(line + "\n")
        out.write("| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths)) + " |\n")
        out.write(line + "\n")
        for r in cells:
            out.write("| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |\n")
        out.write(line + "\n")
        out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .cli import UsageError
    from .lake import existing_tables

    if not existing_tables(Path(args.lake)):
        raise UsageError(f"no Delta tables under --lake {args.lake}")
    from pyspark.errors import AnalysisException, ParseException

    from .lake import register_views
    from .spark import build_session

    spark = build_session("market-spread-sql", extra_conf={"spark.sql.shuffle.partitions": "2"})
    try:
        register_views(spark, args.lake)
        try:
            df = spark.sql(args.query)
            rows = [tuple(r) for r in df.collect()]
        except (AnalysisException, ParseException) as exc:
            first = str(exc).strip().splitlines()[0]
            print(f"market-spread sql: error: {first}", file=sys.stderr)
            return 1
        render(df.columns, rows, args.format)
        return 0
    finally:
        spark.stop()
