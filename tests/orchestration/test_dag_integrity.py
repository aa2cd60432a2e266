"""The DAG files: they parse fast, without I/O or native libraries, into the DAGs we expect.

Airflow is imported only in a child process (see tests/helpers/airflow.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from market_spread.orchestration import tasks
from tests.helpers.airflow import airflow_env
from tests.helpers.paths import DAGS, ROOT

EXPECTED_DAGS = {"market_spread_stream", "market_spread_quality", "market_spread_maintenance", "market_spread_feed"}


# --------------------------------------------------------------------------------------------
# DAG integrity (one child process parses everything)

INTEGRITY_SCRIPT = r"""
import importlib.util, json, sys, time
from pathlib import Path

dags = Path(sys.argv[1])
import airflow.sdk  # noqa: F401  (warm the imports the DAG processor has warm as well)
from airflow.sdk import dag, task  # noqa: F401
import market_spread.orchestration.tasks  # noqa: F401
from airflow.dag_processing.dagbag import DagBag

IO_EVENTS = ("open", "os.listdir", "os.scandir", "os.remove", "os.rename", "os.mkdir", "os.system",
             "subprocess.Popen", "os.posix_spawn", "os.fork", "os.exec", "socket.connect",
             "socket.getaddrinfo", "sqlite3.connect", "urllib.Request", "shutil.rmtree", "shutil.copyfile")
recording = {"on": False, "events": [], "file": "", "cache": ""}

def hook(event, args):
    if recording["on"] and event in IO_EVENTS:
        first = str(args[0]) if args else ""
        # Reading the DAG file itself (or its bytecode) is how it gets imported.
        if first != recording["file"] and not first.startswith(recording["cache"]):
            recording["events"].append(f"{event} {first}"[:200])

sys.addaudithook(hook)
result = {}
# The last argument is a probe that does I/O at import: the hook must see it, or it proves nothing.
for path in [*sorted(dags.glob("*.py")), Path(sys.argv[2])]:
    def load(name):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    load(f"warm_{path.stem}")  # first import compiles it and loads whatever it imports
    recording.update(on=True, events=[], file=str(path), cache=str(path.parent / "__pycache__" / path.stem) + ".")
    began = time.perf_counter()
    load(f"check_{path.stem}")
    seconds = time.perf_counter() - began
    recording["on"] = False
    result[path.name] = {"seconds": seconds, "io": recording["events"]}
probe = result.pop(Path(sys.argv[2]).name)

bag = DagBag(dag_folder=str(dags))

def assets_in(condition):
    # The assets of a schedule's asset condition: an Asset, or AssetAll/AssetAny of them.
    if condition is None:
        return []
    if hasattr(condition, "objects"):
        return [a for o in condition.objects for a in assets_in(o)]
    return [condition]

def asset_info(a):
    return {"type": type(a).__name__, "name": getattr(a, "name", None), "uri": getattr(a, "uri", None),
            "watchers": [{"name": w.name, "trigger": list(w.trigger.serialize())} for w in getattr(a, "watchers", [])]}

dags_info = {}
for dag_id, d in bag.dags.items():
    dags_info[dag_id] = {
        "file": Path(d.fileloc).name,
        "tags": sorted(d.tags or []),
        "doc_md": d.doc_md or "",
        "max_active_runs": d.max_active_runs,
        "catchup": d.catchup,
        "tasks": {t.task_id: {"owner": t.owner, "retries": t.retries, "teardown": t.is_teardown, "pool": t.pool,
                              "outlets": [asset_info(a) for a in t.outlets]}
                  for t in d.tasks},
        "timetable": type(d.timetable).__name__,
        "schedule": getattr(d.timetable, "expression", None),
        "time_schedule": [type(getattr(d.timetable, "timetable", None)).__name__,
                          getattr(getattr(d.timetable, "timetable", None), "expression", None)],
        "schedule_assets": [asset_info(a) for a in assets_in(getattr(d.timetable, "asset_condition", None))],
    }
stats = {Path(s.file).name: s.duration.total_seconds() if hasattr(s.duration, "total_seconds") else s.duration
         for s in bag.dagbag_stats}
NATIVE = ("pyspark", "py4j", "pyarrow", "deltalake", "great_expectations", "polars")
native = sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in NATIVE})
print(json.dumps({"files": result, "probe": probe, "import_errors": {k: str(v) for k, v in bag.import_errors.items()},
                  "dags": dags_info, "stats": stats, "native": native}))
"""


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("lake") / "a lake"  # never created: parsing does no I/O


# A DAG file that reads a file when imported: what the audit hook must catch.
PROBE = "from pathlib import Path\nSETTINGS = Path(__file__).with_name('settings.txt').read_text()\n"


@pytest.fixture(scope="module")
def integrity(tmp_path_factory, lake: Path) -> dict:
    home = tmp_path_factory.mktemp("airflow_home")
    probe = tmp_path_factory.mktemp("probe") / "probe_dag_with_io.py"
    probe.write_text(PROBE)
    probe.with_name("settings.txt").write_text("x")
    proc = subprocess.run(
        [sys.executable, "-c", INTEGRITY_SCRIPT, str(DAGS), str(probe)],
        env=airflow_env(home, MARKET_SPREAD_LAKE=str(lake)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_dag_file_imports_without_io(integrity: dict) -> None:
    # No wall-time bound (it measures the machine): I/O and native libraries are what make parsing slow.
    assert integrity["import_errors"] == {}
    assert set(integrity["files"]) == {f"{d}.py" for d in EXPECTED_DAGS}
    assert any("settings.txt" in e for e in integrity["probe"]["io"]), f"the hook missed the probe's read: {integrity}"
    for name, info in integrity["files"].items():
        assert info["io"] == [], f"{name} does I/O at import: {info['io']}"
    # Parsing loads no Spark, Arrow, delta-rs or GX: the DAG processor stays small and fast.
    assert integrity["native"] == [], f"DAG files load native libraries at parse time: {integrity['native']}"


def test_lake_jobs_share_one_pool(integrity: dict) -> None:
    pools = {
        (dag_id, task_id): t["pool"]
        for dag_id, info in integrity["dags"].items()
        for task_id, t in info["tasks"].items()
    }
    assert pools[("market_spread_quality", "validate")] == tasks.LAKE_JOBS_POOL
    assert pools[("market_spread_maintenance", "maintain")] == tasks.LAKE_JOBS_POOL
    assert pools[("market_spread_stream", "supervise_stream")] != tasks.LAKE_JOBS_POOL
    compose = (ROOT / "docker-compose.yaml").read_text()
    assert f"airflow pools set {tasks.LAKE_JOBS_POOL} 1" in compose  # the compose deployment creates it too


def test_dags_have_tags_owner_retries(integrity: dict) -> None:
    dags = integrity["dags"]
    assert set(dags) == EXPECTED_DAGS
    for dag_id, info in dags.items():
        assert info["file"] == f"{dag_id}.py", "run.py finds DAG ids by file name"
        assert "market-spread" in info["tags"], dag_id
        assert info["max_active_runs"] == 1, dag_id
        assert info["catchup"] is False, dag_id
        for task_id, t in info["tasks"].items():
            assert t["owner"] == tasks.OWNER, (dag_id, task_id)
            assert t["retries"] >= 1, (dag_id, task_id)


def test_stream_dag_restarts_within_two_minutes(integrity: dict) -> None:
    stream = integrity["dags"]["market_spread_stream"]
    assert stream["schedule"] == "* * * * *"
    assert set(stream["tasks"]) == {"supervise_stream"}
    maintenance = integrity["dags"]["market_spread_maintenance"]
    assert maintenance["tasks"]["release_stream"]["teardown"] is True


# --------------------------------------------------------------------------------------------
# Scheduled by data: stream -> alerts -> quality -> quality_results (orchestration/assets.py)


def _alerts(lake: Path) -> dict:
    return {
        "type": "Asset",
        "name": "market_spread_alerts",
        "uri": (lake / "alerts").as_uri(),
        "watchers": [
            {
                "name": "market_spread_new_alerts",
                "trigger": [
                    "market_spread.orchestration.alerts_trigger.NewAlertsTrigger",
                    {
                        "table": str(lake / "alerts"),
                        "poll_seconds": 10.0,
                        "throttle_seconds": 120.0,
                        "quality_dag_id": "market_spread_quality",
                    },
                ],
            }
        ],
    }


def test_quality_dag_runs_on_new_alerts_or_its_cron(integrity: dict, lake: Path) -> None:
    quality = integrity["dags"]["market_spread_quality"]
    assert quality["timetable"] == "AssetOrTimeSchedule"
    # The safety net: MARKET_SPREAD_QUALITY_SCHEDULE's default, now hourly.
    assert quality["time_schedule"] == ["CronTriggerTimetable", "0 * * * *"]
    assert quality["schedule_assets"] == [_alerts(lake)]
    assert _alerts(lake)["uri"].startswith("file:///") and "a%20lake" in _alerts(lake)["uri"]
    # One run at a time: with Airflow's one queued asset-triggered run, the backlog is bounded.
    assert quality["max_active_runs"] == 1


def test_validate_records_quality_results(integrity: dict, lake: Path) -> None:
    outlets = integrity["dags"]["market_spread_quality"]["tasks"]["validate"]["outlets"]
    assert outlets == [
        {
            "type": "Asset",
            "name": "market_spread_quality_results",
            "uri": (lake / "quality_results").as_uri(),
            "watchers": [],
        }
    ]


def test_the_stream_writes_the_alerts_asset(integrity: dict, lake: Path) -> None:
    # The same definition as the quality DAG's schedule, watcher included: Airflow keeps one per asset.
    assert integrity["dags"]["market_spread_stream"]["tasks"]["supervise_stream"]["outlets"] == [_alerts(lake)]
    for dag_id in ("market_spread_feed", "market_spread_maintenance"):
        assert all(not t["outlets"] for t in integrity["dags"][dag_id]["tasks"].values()), dag_id


def test_the_stream_dag_explains_its_endless_run_in_the_ui(integrity: dict) -> None:
    """The UI shows doc_md on the DAG's page: a newcomer sees one run that never ends while Next Run
    moves, and reads why there."""
    doc = " ".join(integrity["dags"]["market_spread_stream"]["doc_md"].split())
    assert "One run lasts as long as the stream" in doc
    assert "a new run starts only in the minute after the stream ended" in doc
