"""Shared fixtures: one SparkSession for the whole run (starting one costs seconds)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

# The helpers' own asserts (tables compared, processes left behind) explain themselves as tests' do.
pytest.register_assert_rewrite("tests.helpers")

from tests.helpers.paths import ROOT  # noqa: E402  (after the rewrite hook, as pytest requires)

SHARED = ROOT.parent / "shared"

# Every JVM the tests start (Spark sessions, `stream` children, the streams Airflow launches) lives
# seconds to minutes: the optimising compiler (C2) never pays back there and takes cores from the
# other worker, so the quick JIT (C1 only; runtime/spark.py) for all of them. A test that needs
# another sets the variable itself; compiled code changes no result.
os.environ.setdefault("MARKET_SPREAD_JIT", "quick")


def _one_placement_on_s3(config, items) -> None:
    """Drop the executors placement's S3 run of tests that take both `place` and `placement`, but for
    those marked `every_place`: S3 and the placement are independent, so one such scenario each."""
    keep, drop = [], []
    for item in items:
        params = getattr(item, "callspec", None)
        params = params.params if params is not None else {}
        on_both = params.get("place") == "s3" and params.get("placement") == "executors"
        (drop if on_both and item.get_closest_marker("every_place") is None else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """`make test`'s time with its set-up (the Makefile notes when it began), above pytest's own total."""
    began = os.environ.get("MARKET_SPREAD_TEST_BEGAN")
    if began and not hasattr(config, "workerinput"):
        seconds = time.time() - float(began)
        terminalreporter.write_line(f"make test: {seconds:.0f} s with set-up, {seconds / 60:.1f} min (budget 20)")


@pytest.fixture(scope="session")
def spark():
    from market_spread.runtime.spark import build_session

    try:  # Spark's Kafka connector too, when fetched, so tests can stream from a broker in-process
        from market_spread.errors import UsageError
        from market_spread.sources.kafka_source import session_conf

        extra = session_conf()
    except (UsageError, SystemExit):  # the connector is missing (SystemExit: Delta's JARs, runtime.spark)
        extra = {}
    session = build_session("market-spread-tests", master="local[2]", shuffle_partitions=2, extra_conf=extra)
    yield session
    session.stop()


@pytest.fixture(params=["driver", "executors"])
def placement(request) -> str:
    """Where the stream runs each batch's kernel (`stream --placement`): the driver process or Spark's
    tasks. Tests of the contract's semantics take it; with `place` as well, the S3 run is on the
    driver only, unless the test is marked `every_place` (pytest_collection_modifyitems)."""
    return request.param


@pytest.fixture(scope="session")
def object_store(tmp_path_factory):
    """A real S3 server (`market-spread object-store`) for the run: tests/helpers/s3.py's ObjectStore
    (`.endpoint`, `.env`, `.bucket`, `.uri(prefix)`, `.environ()`)."""
    from tests.helpers.s3 import object_store as running

    with running(tmp_path_factory) as store:
        yield store


@pytest.fixture(params=["local", "s3"])
def place(request, tmp_path, monkeypatch):
    """Where a test keeps its data, once on local disk and once on the run's S3 server (started on
    first use in this worker): tests/helpers/storage.py's Place (`place / "lake"`, `.s3`, `.tmp`)."""
    from tests.helpers.storage import make_place

    return make_place(request.param, tmp_path, request, monkeypatch)


@pytest.fixture(scope="session")
def live_airflow(tmp_path_factory):
    """One live Airflow a worker (`market-spread-run`, every DAG paused at start) for the UI tests,
    whose files SHARED_GROUPS below runs on one worker: tests/helpers/live_airflow.py's LiveAirflow.
    Use it through `live_airflow_for_module`, which stops it once the group's last file is done."""
    from tests.helpers.live_airflow import running

    with running(tmp_path_factory.mktemp("live-airflow")) as airflow:
        yield airflow


@pytest.fixture(scope="module")
def live_airflow_for_module(request, live_airflow):
    """The worker's live Airflow for one file of the "live-airflow" group; stopped when the group's
    last collected file ends, not at the end of the session: its stream, feed and Airflow's own
    processes would otherwise keep two cores busy while this worker runs its other files (about 10
    minutes in the run of 2026-12-06)."""
    yield live_airflow
    done = _GROUP_DONE.setdefault("live-airflow", set())
    done.add(request.node.nodeid.split("::", 1)[0])
    if done >= _GROUP_FILES.get("live-airflow", set()):
        live_airflow.close()


@pytest.fixture(scope="session")
def wallaroo_dir() -> Path:
    path = Path(os.environ.get("MARKET_SPREAD_WALLAROO_DATA", SHARED / "wallaroo"))
    if not path.is_dir():
        pytest.skip(f"Wallaroo data not found at {path}")
    return path


# The files that take longest (serial durations of 2026-11-26 on this 2-core machine), longest
# first: `make test` gives each of its two workers one file at a time in collection order, so these
# start at once instead of leaving a lone multi-minute campaign at the end of the run. xdist hands a
# worker its next file as soon as it has 2 tests or fewer left, so the first worker takes files 1
# and 3, the second files 2 and 4: the two one-test campaigns must stay first and second, or both
# land on one worker again (about 7 + 4 minutes in the run of 2026-11-27).
LONGEST_FIRST = (
    "tests/reliability/test_crash_campaign_s3.py",  # 2 kills on S3
    "tests/reliability/test_crash_campaign.py",  # 2 kills on local disk
    "tests/e2e/test_cluster.py",  # a cluster and five drivers (the two refused ones wait ~60 s beside the rest)
    "tests/stream/test_kafka.py",
    "tests/stream/test_alerts_topic.py",  # about a minute: a broker, three streams, a broker outage
    "tests/stream/test_pipeline.py",
    "tests/e2e/test_airflow_e2e.py",
    "tests/e2e/test_data_docs_ui.py",
    "tests/e2e/test_stream_ui.py",  # about 6 minutes: Airflow, the stream's JVM, two minutes of the feed
    "tests/stream/test_metrics.py",  # about 2.5 minutes: two streams and a broker
    "tests/orchestration/test_tasks.py",
    "tests/quality/test_quality.py",
    "tests/lake/test_sql_cli.py",
    "tests/reliability/test_disk_full.py",
    "tests/e2e/test_bench.py",
    # Shorter (tests of 25-45 s), but late in collection order: there one of them can be a worker's
    # last file while the other has seconds of unit tests left (xdist's scheduling replayed with the
    # 25 longest durations of the run of 2026-11-27 and estimates for the rest: a minute of one idle
    # worker at the end, 15 s with these here).
    "tests/stream/test_stream_cli.py",
    "tests/stream/test_source_order.py",
    "tests/reliability/test_hostile_volume.py",
)


# Files that share a session fixture too costly to build twice on one worker: each group runs on one
# worker, one file after the other; every other file is a group of its own (--dist loadfile).
SHARED_GROUPS = {
    "tests/e2e/test_data_docs_ui.py": "live-airflow",
    "tests/e2e/test_stream_ui.py": "live-airflow",
}
# Each group's files among the collected tests, and those this worker has finished.
_GROUP_FILES: dict[str, set[str]] = {}
_GROUP_DONE: dict[str, set[str]] = {}


def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile with SHARED_GROUPS' files as one unit (xdist's own loadgroup marks do not take
    with pytest 9, whose node ids can no longer be rewritten)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return SHARED_GROUPS.get(path, path)

    return FileGroups(config, log)


def pytest_collection_modifyitems(config, items) -> None:
    _one_placement_on_s3(config, items)
    missing = [path for path in LONGEST_FIRST if not (ROOT / path).is_file()]
    if missing:  # a renamed file would silently lose its place
        raise pytest.UsageError(f"tests/conftest.py LONGEST_FIRST names files that do not exist: {missing}")
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path in SHARED_GROUPS:
            _GROUP_FILES.setdefault(SHARED_GROUPS[path], set()).add(path)
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    # A stable sort: tests keep their order within a file, the other files theirs after these.
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
