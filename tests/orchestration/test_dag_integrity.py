"""The DAG files: they parse fast, without I/O or native libraries, into the DAGs we expect.

Airflow is imported only in a child process (see tests/helpers/airflow.py).
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tests.helpers.airflow import airflow_env
from tests.helpers.paths import DAGS, ROOT

from market_spread.orchestration import tasks

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
for path in sorted(dags.glob("*.py")):
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

bag = DagBag(dag_folder=str(dags))
dags_info = {}
for dag_id, d in bag.dags.items():
    dags_info[dag_id] = {
        "file": Path(d.fileloc).name,
        "tags": sorted(d.tags or []),
        "max_active_runs": d.max_active_runs,
        "catchup": d.catchup,
        "tasks": {t.task_id: {"owner": t.owner, "retries": t.retries, "teardown": t.is_teardown, "pool": t.pool}
                  for t in d.tasks},
        "timetable": type(d.timetable).__name__,
        "schedule": getattr(d.timetable, "expression", None),
    }
stats = {Path(s.file).name: s.duration.total_seconds() if hasattr(s.duration, "total_seconds") else s.duration
         for s in bag.dagbag_stats}
NATIVE = ("pyspark", "py4j", "pyarrow", "deltalake", "great_expectations", "polars")
native = sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in NATIVE})
print(json.dumps({"files": result, "import_errors": {k: str(v) for k, v in bag.import_errors.items()},
                  "dags": dags_info, "stats": stats, "native": native}))
"""


@pytest.fixture(scope="module")
def integrity(tmp_path_factory) -> dict:
    home = tmp_path_factory.mktemp("airflow_home")
    proc = subprocess.run(
        [sys.executable, "-c", INTEGRITY_SCRIPT, str(DAGS)],
        env=airflow_env(home), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_dag_file_imports_fast_without_io(integrity: dict) -> None:
    assert integrity["import_errors"] == {}
    assert set(integrity["files"]) == {f"{d}.py" for d in EXPECTED_DAGS}
    for name, info in integrity["files"].items():
        assert info["seconds"] < 2.0, f"{name} took {info['seconds']:.2f}s to import"
        assert info["io"] == [], f"{name} does I/O at import: {info['io']}"
    for name, seconds in integrity["stats"].items():
        assert seconds < 2.0, f"DagBag parsed {name} in {seconds:.2f}s"
    # Parsing loads no Spark, Arrow, delta-rs or GX: the DAG processor stays small and fast.
    assert integrity["native"] == [], f"DAG files load native libraries at parse time: {integrity['native']}"


def test_lake_jobs_share_one_pool(integrity: dict) -> None:
    pools = {(dag_id, task_id): t["pool"] for dag_id, info in integrity["dags"].items() for task_id, t in info["tasks"].items()}
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

