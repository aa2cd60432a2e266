"""`market-spread validate`'s entry point: a ValidateSpec in, an exit code out (0 only when every
critical expectation of both suites holds, 1 when one fails)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from market_spread.domain.symbols import load_symbols
from market_spread.errors import UsageError
from market_spread.quality.suites import SuiteFileError, load_suites
from market_spread.quality.validate import ValidateOptions, check_lake, validate_lake
from market_spread.runtime.spark import build_session
from market_spread.runtime.storage import Location


@dataclass(frozen=True)
class ValidateSpec:
    """One `validate` run: the lake, the symbol universe's file, and how to validate."""

    lake: Location  # a local folder or an S3 prefix
    symbols: Path
    options: ValidateOptions = field(default_factory=ValidateOptions)


def run_validation(spec: ValidateSpec) -> int:
    """Validate the lake and print the summary; the exit code. UsageError for a lake without the
    product's tables, a bad symbol file or a malformed suite file, before Spark starts."""
    check_lake(spec.lake)  # before starting Spark: a wrong path answers at once
    symbols = load_symbols(spec.symbols)
    try:
        suites = load_suites(spec.options.expectations_dir, ["symbols"])
    except SuiteFileError as exc:
        raise UsageError(str(exc)) from None
    # In-process callers (tests, an Airflow task) already have a session: use the default one, the
    # session GX itself picks up with getOrCreate(), without build_session resetting its settings.
    owned = SparkSession.getActiveSession() is None
    spark = build_session("market-spread-validate") if owned else SparkSession.builder.getOrCreate()
    try:
        summary = validate_lake(spark, spec.lake, symbols, spec.options, suites)
    finally:
        if owned:
            spark.stop()
    print(summary.text(), flush=True)
    return 0 if summary.passed else 1
