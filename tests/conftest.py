"""Shared fixtures: one SparkSession for the whole run (starting one costs seconds)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def spark():
    from market_spread.runtime.spark import build_session

    try:  # Spark's Kafka connector too, when fetched, so tests can stream from a broker in-process
        from market_spread.stream.kafka_source import session_conf

        extra = session_conf()
    except SystemExit:
        extra = {}
    session = build_session("market-spread-tests", master="local[2]", shuffle_partitions=2, extra_conf=extra)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def wallaroo_dir() -> Path:
    path = Path(os.environ.get("MARKET_SPREAD_WALLAROO_DATA", SHARED / "wallaroo"))
    if not path.is_dir():
        pytest.skip(f"Wallaroo data not found at {path}")
    return path
