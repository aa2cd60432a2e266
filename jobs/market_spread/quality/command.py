"""`market-spread validate`: the command line of validate_lake. Exits 0 only when every critical
expectation of both suites holds, 1 when one fails. Spark and GX are imported inside run()."""
from __future__ import annotations

import argparse
from pathlib import Path

from market_spread.cli.options import load_symbols


def grace_seconds(text: str) -> float:
    """--orphan-grace-seconds: a number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise ValueError(f"must be >= 0 seconds: {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from market_spread.cli.main import UsageError
    from market_spread.quality.suites import SuiteFileError, load_suites
    from market_spread.domain.rules import Thresholds
    from market_spread.quality.validate import ValidateOptions, _check_lake, validate_lake

    lake = Path(args.lake)
    _check_lake(lake)  # before starting Spark: a wrong path answers at once
    symbols = load_symbols(args.symbols)
    try:
        suites = load_suites(args.expectations, ["symbols"])
    except SuiteFileError as exc:
        raise UsageError(str(exc)) from None

    from pyspark.sql import SparkSession

    from market_spread.runtime.spark import build_session

    # In-process callers (tests, an Airflow task) already have a session: use the default one, the
    # session GX itself picks up with getOrCreate(), without build_session resetting its settings.
    owned = SparkSession.getActiveSession() is None
    spark = build_session("market-spread-validate") if owned else SparkSession.builder.getOrCreate()
    try:
        options = ValidateOptions(
            docs=Path(args.docs), full=args.full, thresholds=Thresholds(args.max_spread, args.max_spread_ratio),
            orphan_grace_s=args.orphan_grace_seconds,
        )
        summary = validate_lake(spark, lake, symbols, options, suites)
    finally:
        if owned:
            spark.stop()
    print(summary.text(), flush=True)
    return 0 if summary.passed else 1
