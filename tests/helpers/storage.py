"""Where a test keeps its data: a local folder or a fresh prefix on the run's S3 server, so that one
test body runs on both (issue 41: the scenarios shared with local disk, not copied).

    def test_x(place, spark):                 # place: the fixture `place` (tests/conftest.py), "local" or "s3"
        landing, lake = place / "landing", place / "lake"   # Path or S3Path (runtime.storage.location)
        land(landing, "quotes", [...])        # tests/helpers/landing.py writes through both
        market_spread("stream", "--lake", str(lake), ...)   # the child inherits the AWS variables
        place.open_delta(lake / "alerts")     # delta-rs reads both

An "s3" place sets the AWS variables of the server in this process for the test (children inherit
them, location() and delta-rs read them) and, when the test uses the shared `spark` session, its S3A
settings at run time: Spark copies its SQL conf into the Hadoop conf of every file source, Delta
log and streaming checkpoint, and Hadoop keeps one S3A FileSystem per bucket, so one server per
worker process (the session fixture `object_store`) is what every s3 test of that worker uses.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from market_spread.runtime.storage import Location, S3Path, location, open_delta


@dataclass
class Place:
    """A test's root: `kind` "local" (under tmp_path) or "s3" (a fresh s3:// prefix)."""

    kind: str
    root: Location
    tmp: Path  # a local folder for what stays local (symbol files, logs, reference lakes)

    @property
    def s3(self) -> bool:
        return self.kind == "s3"

    def __truediv__(self, part: str) -> Location:
        return self.root / part

    def __str__(self) -> str:
        return str(self.root)

    @staticmethod
    def open_delta(table: Location) -> Any:
        """delta-rs's DeltaTable of `table`, local or on S3."""
        return open_delta(table)


def arg(place: Location) -> str:
    """A location as a command-line argument: `s3://...` for S3 (as a user types it), else the path."""
    return place.uri("s3") if isinstance(place, S3Path) else str(place)


def remove(place: Location) -> None:
    """Delete a folder and everything under it, locally or on S3."""
    if isinstance(place, S3Path):
        place.rmtree()
    else:
        shutil.rmtree(place)


def spark_s3a_settings(spark, config) -> None:
    """Point the running session's S3A connector at `config` (runtime.storage.S3Config): the SQL conf
    Spark copies into every Hadoop conf it makes (spark.hadoop.X given at build time is X there)."""
    for key, setting in config.hadoop_conf().items():
        spark.conf.set(key.removeprefix("spark.hadoop."), setting)


def make_place(kind: str, tmp_path: Path, request, monkeypatch) -> Place:
    """The `place` fixture's body (tests/conftest.py): an s3 place starts the worker's server on
    first use and sets its variables (and the shared session's S3A settings) for this test."""
    if kind == "local":
        return Place(kind, tmp_path / "data", tmp_path)
    store = request.getfixturevalue("object_store")
    for name, setting in store.env.items():
        monkeypatch.setenv(name, setting)
    if "spark" in request.fixturenames:
        spark_s3a_settings(request.getfixturevalue("spark"), store.config)
    return Place(kind, location(store.uri("t")), tmp_path)
