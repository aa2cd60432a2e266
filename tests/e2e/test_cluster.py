"""`stream --master spark://…` on a real Spark standalone cluster (a master and two workers on
127.0.0.1, from the pip-installed Spark): the same tables as a local run, also when a worker dies
mid-run (issue 8), and with landing, lake and checkpoint only on an S3 server (issue 41)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from market_spread.feeds.generate import Generator, write_backlog
from market_spread.runtime.cluster_conf import is_local, session_conf
from market_spread_tools.cluster import LocalCluster
from market_spread_tools.spark_auth import secret_of
from tests.helpers.cli import CLI
from tests.helpers.lake import comparable_tables, metrics_totals, read_table, stream
from tests.helpers.landing import land, land_pair
from tests.helpers.net import not_loopback, tree
from tests.helpers.records import order, quote
from tests.helpers.symbols import symbols_file

SYMBOLS = [f"S{i:02d}" for i in range(12)]
PAIRS = 3  # landing file pairs (quotes + orders), landed one by one in the kill test


@pytest.fixture(scope="module")
def data(tmp_path_factory, spark):
    """The feeds, and the tables a local run makes of them (the reference)."""
    root = tmp_path_factory.mktemp("cluster-data")
    source = root / "source"
    write_backlog(source, Generator(SYMBOLS, seed=8, wide_share=0.3), 240, 240, PAIRS, "a")
    # Bad lines too, so that the quarantine is compared as well; named to land with pair 0.
    land(
        source,
        "quotes",
        ['{"symbol": "S01"', quote("ZZZ", "2026-11-23T14:30:00Z", "1.00", "1.01")],
        name="bad-00000.jsonl",
    )
    land(source, "orders", ["[1, 2]", order("X-1", "S02", "2026-11-23T14:30:00Z", side="HOLD")], name="bad-00000.jsonl")
    symbols = symbols_file(root, SYMBOLS)
    reference = root / "reference-lake"
    assert stream(spark, source, reference, symbols=SYMBOLS) == 0
    expected = comparable_tables(spark, reference)
    assert expected["alerts"] and expected["quarantine"] and expected["symbol_state"]
    return {
        "source": source,
        "symbols": symbols,
        "expected": expected,
        "totals": metrics_totals(spark, reference),
        "root": root,
    }


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory) -> dict[str, Path]:
    """A Python for the executors that cannot import the project from its environment: it leaves a
    mark if it ever starts. With the driver placement (the default on this cluster) a batch's logic
    runs in the driver, so executors must start no Python worker at all."""
    return _python_without_project(tmp_path_factory.mktemp("executor-python"))


@pytest.fixture(scope="module")
def shipped_python(tmp_path_factory) -> dict[str, Path]:
    """The same, for the executors placement: its Python workers start (the mark), and the kernel
    they run comes from the archive the driver ships (spark.submit.pyFiles), not from the environment."""
    return _python_without_project(tmp_path_factory.mktemp("shipped-python"))


def _python_without_project(root: Path) -> dict[str, Path]:
    blocker = root / "block" / "market_spread"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('the project is not installed on executors')\n")
    mark = root / "python-worker-started"
    wrapper = root / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"touch '{mark}'\n"
        f"PYTHONPATH='{root / 'block'}'${{PYTHONPATH:+:$PYTHONPATH}}\n"
        "export PYTHONPATH\n"
        f"exec '{sys.executable}' \"$@\"\n"
    )
    wrapper.chmod(0o755)
    return {"python": wrapper, "mark": mark}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, worker_cores=1, worker_memory="1g")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
        # No orphans: no process is left in any group the cluster started (workers, executors,
        # their Python workers).
        assert not cluster.leftovers(), f"processes left behind in the groups of {cluster.leftovers()}"


@pytest.fixture(scope="module")
def refused_drivers(cluster: LocalCluster, tmp_path_factory) -> Iterator[dict[str, Driver]]:
    """The drivers the master must refuse (test_a_driver_with_another_secret_or_none_is_refused_by_the_master):
    one with another secret, one with none. Each spends a minute idle on Spark's fixed retry schedule
    (3 registration tries, 20 s apart, hard-coded in StandaloneAppClient) before it gives up, so they
    start side by side as soon as the cluster is up (two_workers asks for them too) and that minute
    passes during this file's other tests instead of in a test of its own (76 s of the CI run of
    2026-12-06). Killed at the end if still running."""
    root = tmp_path_factory.mktemp("refused-drivers")
    wrong = root / "wrong-conf"
    wrong.mkdir(mode=0o700)
    empty = root / "empty-conf"
    empty.mkdir()
    (wrong / "spark-defaults.conf").write_text("spark.authenticate true\nspark.authenticate.secret not-the-secret\n")
    (wrong / "spark-defaults.conf").chmod(0o600)
    cases = {
        "another secret": {"SPARK_CONF_DIR": str(wrong)},
        "no secret (checks off)": {"SPARK_CONF_DIR": str(empty), "MARKET_SPREAD_SPARK_AUTH": "off"},
    }
    drivers = {case: Driver(cluster, root / case.split()[0], changes) for case, changes in cases.items()}
    try:
        yield drivers
    finally:
        for driver in drivers.values():
            driver.kill()


@pytest.fixture
def two_workers(cluster: LocalCluster, refused_drivers: dict[str, Driver]) -> LocalCluster:
    """The cluster with two live workers (one may have been killed by an earlier test)."""
    while len(cluster.running_workers()) < 2:
        cluster.add_worker(wait=False)
    cluster.wait_for_workers(2)
    return cluster


class Stream:
    """`market-spread stream` as a child process in a session of its own; output read as it comes."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            if self.proc.poll() is not None:
                self._reader.join(5)
                raise AssertionError(
                    f"the stream exited ({self.proc.returncode}) before {what}:\n{self.output[-6000:]}"
                )
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}:\n{self.output[-6000:]}")

    def finish(self, timeout: float) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        finally:
            self.kill()
        self._reader.join(5)
        return rc

    def kill(self) -> None:
        """Whatever happens, leave no driver (nor its JVM) behind."""
        if _kill_session(self.proc):
            self.proc.wait(timeout=30)


def _kill_session(proc: subprocess.Popen) -> bool:
    """SIGKILL the session `proc` leads (the driver and its JVM) if any of it is left; whether it was."""
    if proc.poll() is not None and not _group_alive(proc.pid):
        return False
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _stream(
    cluster: LocalCluster,
    landing: Path | str,
    lake: Path | str,
    symbols: Path,
    python: Path,
    *mode: str,
    extra_env: dict[str, str] | None = None,
) -> Stream:
    env = dict(os.environ, **(extra_env or {}))
    env.update(
        {
            "PYSPARK_PYTHON": str(python),
            # Executors reach the driver on the loopback, like the workers (cluster.session_conf).
            "MARKET_SPREAD_DRIVER_HOST": "127.0.0.1",
            "MARKET_SPREAD_DRIVER_MEMORY": "1g",
            "PYTHONUNBUFFERED": "1",
            # The cluster's spark-defaults.conf: spark.authenticate and its secret (issue 44).
            "SPARK_CONF_DIR": str(cluster.conf_dir),
            # The driver's quick JIT (C1 only) also for the --interval streams, stopped within minutes:
            # the optimising compiler's start-up work never pays back here (runtime/spark.py QUICK_JIT).
            "MARKET_SPREAD_JIT": os.environ.get("MARKET_SPREAD_JIT", "quick"),
        }
    )
    argv = CLI + [
        "stream",
        "--landing",
        str(landing),
        "--lake",
        str(lake),
        "--symbols",
        str(symbols),
        "--master",
        cluster.master_url,
        *mode,
    ]
    return Stream(argv, env)


def _counts(totals: dict[str, int]) -> dict[str, int]:
    return {k: totals[k] for k in ("quotes", "orders", "alerts", "quarantined")}


def _app_dirs(cluster: LocalCluster) -> dict[str, set[str]]:
    """Application ids each worker ran an executor for (its work dir holds one folder per app)."""
    return {name: {p.name for p in work.glob("app-*")} for name, work in cluster.worker_dirs.items()}


def _new_apps(cluster: LocalCluster, before: dict[str, set[str]]) -> dict[str, set[str]]:
    """Application ids each worker ran an executor for since `before` (an `_app_dirs` of then)."""
    return {name: apps - before.get(name, set()) for name, apps in _app_dirs(cluster).items()}


def _executor_logs(cluster: LocalCluster, worker: str, app: str) -> str:
    """The stderr of the executors `worker` ran for application `app`."""
    return "".join(p.read_text(errors="replace") for p in (cluster.worker_dirs[worker] / app).glob("*/stderr"))


def test_session_conf_is_empty_for_local_masters_and_maps_the_environment():
    assert is_local("local[*]") and is_local("local") and not is_local("spark://h:7077")
    assert session_conf("local[2]", {"MARKET_SPREAD_EXECUTOR_MEMORY": "3g"}) == {}
    env = {
        "MARKET_SPREAD_EXECUTOR_MEMORY": "3g",
        "MARKET_SPREAD_DRIVER_HOST": "10.0.0.5",
        "MARKET_SPREAD_CORES_MAX": "4",
        "PYSPARK_PYTHON": "python3",
    }
    conf = session_conf("spark://spark-master:7077", env)
    shipped = conf.pop("spark.submit.pyFiles")
    assert conf == {"spark.executor.memory": "3g", "spark.driver.host": "10.0.0.5", "spark.cores.max": "4"}
    # The package's modules go to the executors (the kernel of the executors placement).
    with zipfile.ZipFile(shipped) as archive:
        assert "market_spread/kernel/steps.py" in archive.namelist()
    # A loopback master runs its executors here: they get the driver's interpreter unless told otherwise.
    env = {}
    session_conf("spark://127.0.0.1:7077", env)
    assert env["PYSPARK_PYTHON"] == sys.executable


@pytest.mark.slow
def test_cluster_run_gives_the_same_tables_as_a_local_run(tmp_path, spark, data, two_workers, executor_python):
    cluster = two_workers
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    shutil.copytree(data["source"], landing)
    before = _app_dirs(cluster)
    run = _stream(cluster, landing, lake, data["symbols"], executor_python["python"], "--available-now")
    rc = run.finish(timeout=900)
    assert rc == 0, run.output[-6000:]
    assert comparable_tables(spark, lake) == data["expected"]
    assert _counts(metrics_totals(spark, lake)) == _counts(data["totals"])
    # With the product's routing the backlog stays on the driver's path (no Spark job): the
    # executors' 2 cores are not more than this machine's (what bench part cluster measures).
    if (os.cpu_count() or 1) >= 2:
        jobs = [r.spark_jobs for r in read_table(spark, lake, "batch_metrics").select("spark_jobs").collect()]
        assert jobs and set(jobs) == {0}, jobs

    # The application ran on the cluster: both workers started an executor of it.
    new = _new_apps(cluster, before)
    ran = [name for name, apps in new.items() if apps]
    assert len(ran) == 2, f"executors ran on {ran} only"


@pytest.mark.slow
def test_a_cluster_stream_listens_on_loopback_with_authentication_and_survives_a_killed_worker(
    tmp_path, spark, data, two_workers, shipped_python
):
    cluster = two_workers
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    source = data["source"]
    checkpoint = lake / "_checkpoints" / "stream"
    land_pair(source, landing, 0)
    before = _app_dirs(cluster)
    # Every batch's kernel in Spark's tasks (the executors placement): the killed worker's executor
    # has some of batch 1's.
    in_tasks = {"MARKET_SPREAD_PLACEMENT": "executors"}
    run = _stream(
        cluster, landing, lake, data["symbols"], shipped_python["python"], "--interval", "1", extra_env=in_tasks
    )
    try:
        run.wait_for(lambda: any(l.startswith("batch 0:") for l in run.lines), 900, "batch 0")
        _assert_loopback_and_authenticated(run, cluster, before)  # issue 44, on the running stream
        land_pair(source, landing, 1)
        # Batch 1 is planned (its offsets are written) before any of its tasks run: kill then.
        run.wait_for(lambda: (checkpoint / "offsets" / "1").exists(), 300, "batch 1 to start")
        victim = cluster.running_workers()[0]
        cluster.kill_worker(victim, signal.SIGKILL)
        run.wait_for(lambda: "Lost executor" in run.output, 300, "the application to notice the lost worker")
        lost_at = next(i for i, l in enumerate(run.lines) if "Lost executor" in l)
        for k in range(2, PAIRS):
            land_pair(source, landing, k)  # files keep landing
        run.wait_for(
            lambda: any(l.startswith("batch ") for l in run.lines[lost_at:]), 900, "a batch on the surviving worker"
        )
        assert len(cluster.alive_workers()) == 1
        run.proc.send_signal(signal.SIGTERM)
        assert run.finish(timeout=600) == 0, run.output[-6000:]
    finally:
        run.kill()
    # The surviving worker's executor fetched the Delta JARs from the driver (spark.jars is shipped,
    # not preinstalled), and ran the kernel from the archive the driver ships.
    new = _new_apps(cluster, before)
    (survivor,) = [name for name, apps in new.items() if apps and name != victim]
    (app,) = new[survivor]
    logs = _executor_logs(cluster, survivor, app)
    assert "Fetching spark://" in logs and "delta-spark_" in logs, f"{survivor}: no Delta JAR fetched"
    assert shipped_python["mark"].exists(), "no Python worker started on an executor"
    # Whatever the stopped stream left: drain it on the one surviving worker, in its tasks too.
    drain = _stream(
        cluster, landing, lake, data["symbols"], shipped_python["python"], "--available-now", extra_env=in_tasks
    )
    assert drain.finish(timeout=900) == 0, drain.output[-6000:]
    # The executors placement gives the local run's tables, the kernel imported from the shipped
    # archive (the executors' Python cannot import the project from its environment).
    assert comparable_tables(spark, lake) == data["expected"]
    # batch_metrics still adds up to the tables (how rows fall into batches may differ).
    assert _counts(metrics_totals(spark, lake)) == _counts(data["totals"])
    metrics = read_table(spark, lake, "batch_metrics").select("placement", "spark_jobs").collect()
    assert {r.placement for r in metrics} == {"executors"} and all(r.spark_jobs > 0 for r in metrics), metrics


# Issue 44: every channel of the cluster is authenticated with the secret LocalCluster generated
# once, and the secret shows on no command line.
AUTH_ON = "SecurityManager: authentication enabled"


def _leaks(secret: str) -> list[str]:
    """Command lines of this machine's processes that show the secret."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if secret in " ".join(proc.info.get("cmdline") or []):
            found.append(f"{proc.pid} {' '.join(proc.info['cmdline'])[:160]}")
    return found


class Driver:
    """`stream --available-now` against the cluster with these environment changes, started at once
    (a session of its own); `result` waits for its exit code, output and seconds from start to exit."""

    def __init__(self, cluster: LocalCluster, tmp_path: Path, env_changes: dict[str, str | None]) -> None:
        (tmp_path / "landing" / "quotes").mkdir(parents=True, exist_ok=True)
        (tmp_path / "landing" / "orders").mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, MARKET_SPREAD_DRIVER_HOST="127.0.0.1", MARKET_SPREAD_DRIVER_MEMORY="1g")
        for name, value in env_changes.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        self.began = time.monotonic()
        self.proc = subprocess.Popen(
            CLI
            + [
                "stream",
                "--landing",
                str(tmp_path / "landing"),
                "--lake",
                str(tmp_path / "lake"),
                "--master",
                cluster.master_url,
                "--available-now",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        self.output, self.seconds = "", 0.0
        # Read as it comes (no pipe fills up) and timed at its exit, however late `result` is called.
        self._waiter = threading.Thread(target=self._wait, daemon=True)
        self._waiter.start()

    def _wait(self) -> None:
        out, err = self.proc.communicate()
        self.seconds = time.monotonic() - self.began
        self.output = out + err

    def result(self, timeout: float) -> tuple[int, str, float]:
        """Exit code, output and seconds; AssertionError (the driver killed) if still running
        `timeout` s after its start."""
        self._waiter.join(max(0.0, self.began + timeout - time.monotonic()))
        if self._waiter.is_alive():
            self.kill()
            raise AssertionError(f"the driver still ran {timeout:.0f} s after its start")
        return self.proc.returncode, self.output, self.seconds

    def kill(self) -> None:
        _kill_session(self.proc)
        self._waiter.join(30)


def _refused(
    cluster: LocalCluster, tmp_path: Path, env_changes: dict[str, str | None], timeout: float
) -> tuple[int, str, float]:
    """`stream` against the cluster with these environment changes: exit code, output, seconds."""
    return Driver(cluster, tmp_path, env_changes).result(timeout)


def test_the_cluster_runs_with_authentication_and_keeps_its_secret_private(cluster, tmp_path):
    defaults = cluster.conf_dir / "spark-defaults.conf"
    assert cluster.conf_dir.stat().st_mode & 0o777 == 0o700 and defaults.stat().st_mode & 0o777 == 0o600
    secret = secret_of(cluster.conf_dir)
    assert len(secret) >= 32
    for name in cluster.procs:
        assert AUTH_ON in (cluster.workdir / "logs" / f"{name}.log").read_text(errors="replace"), name
    assert _leaks(secret) == []
    # A driver that has no secret is refused at once, before any JVM starts, in one line.
    empty = tmp_path / "empty-conf"
    empty.mkdir()
    rc, output, seconds = _refused(cluster, tmp_path, {"SPARK_CONF_DIR": str(empty)}, 120)
    assert rc == 2, output
    assert output.startswith("market-spread stream: error: Spark master spark://"), output
    assert "Spark's RPC authentication is not configured" in output and len(output.strip().splitlines()) == 1, output


@pytest.mark.slow
def test_a_driver_with_another_secret_or_none_is_refused_by_the_master(cluster, refused_drivers):
    # Spark retries the master 3 times, 20 s apart, then gives up: a bounded wait, then a clear error.
    # The drivers were started with the cluster (refused_drivers): by now most of that minute is over.
    for case, driver in refused_drivers.items():
        rc, output, seconds = driver.result(300)
        assert rc == 2, f"{case}: {output[-4000:]}"
        errors = [l for l in output.splitlines() if l.startswith("market-spread stream: error: ")]
        assert len(errors) == 1 and "did not accept this driver" in errors[0], f"{case}: {output[-4000:]}"
        assert seconds < 240, f"{case}: {seconds:.0f} s"
    assert len(cluster.alive_workers()) >= 1


def _assert_loopback_and_authenticated(run, cluster, before: dict) -> None:
    """Master, workers, executors, driver and its JVM: none reachable from the network, the secret on
    no command line, and the executors of this application with authentication on too."""
    procs = tree([run.proc.pid, *(p.pid for p in cluster.procs.values() if p.poll() is None)])
    assert not_loopback(procs) == []
    assert _leaks(secret_of(cluster.conf_dir)) == []
    new = _new_apps(cluster, before)
    logs = [p for name, apps in new.items() for app in apps for p in (cluster.worker_dirs[name] / app).glob("*/stderr")]
    assert logs and all(AUTH_ON in p.read_text(errors="replace") for p in logs), logs


def _land_with_an_s3_client(store, source: Path, landing: str) -> int:
    """Each generated landing file as one object (a PUT is atomic: no half-written file is listed)."""
    s3, prefix = store.client(), landing.split("/", 3)[3]
    files = sorted(source.rglob("*.jsonl"))
    for path in files:
        s3.put_object(
            Bucket=store.bucket, Key=f"{prefix}/{path.relative_to(source).as_posix()}", Body=path.read_bytes()
        )
    return len(files)


@pytest.mark.slow
def test_a_cluster_stream_with_landing_lake_and_checkpoint_only_on_s3(
    tmp_path, data, two_workers, executor_python, object_store
):
    """No shared disk: the driver and both workers' executors reach landing, lake and checkpoint on the
    S3 server only. The workers were started without any AWS variable: the executors get the S3
    settings from the driver (spark.hadoop.fs.s3a.*), like the Delta JARs (spark.jars)."""
    import psutil

    from market_spread.runtime.storage import location

    cluster = two_workers
    for name in cluster.running_workers():
        worker_env = psutil.Process(cluster.procs[name].pid).environ()
        assert worker_env.get("AWS_ENDPOINT_URL") != object_store.endpoint, f"{name} knows the S3 server by itself"
    landing, lake = object_store.uri("cluster-landing"), object_store.uri("cluster-lake")
    assert _land_with_an_s3_client(object_store, data["source"], landing) == 2 * PAIRS + 2
    before = _app_dirs(cluster)
    run = _stream(
        cluster,
        landing,
        lake,
        data["symbols"],
        executor_python["python"],
        "--available-now",
        extra_env=object_store.env,
    )
    rc = run.finish(timeout=900)
    assert rc == 0, run.output[-6000:]

    with object_store.environ():
        # Read back with delta-rs and compared to the local run's lake (the oracle), read the same way.
        reference = data["root"] / "reference-lake"
        assert comparable_tables(None, lake) == comparable_tables(None, reference)
        assert _counts(metrics_totals(None, lake)) == _counts(data["totals"])
        assert any((location(lake) / "_checkpoints" / "stream" / "commits").iterdir()), "checkpoint not on S3"
    # Both workers ran executors of this application, which fetched the S3A connector from the driver.
    new = _new_apps(cluster, before)
    ran = [name for name, apps in new.items() if apps]
    assert len(ran) == 2, f"executors ran on {ran} only"
    for name in ran:
        (app,) = new[name]
        logs = _executor_logs(cluster, name, app)
        assert "hadoop-aws-" in logs and "Fetching spark://" in logs, f"{name}: the S3A connector was not fetched"
    assert not executor_python["mark"].exists(), "an executor started a Python worker"
    # Nothing of the lake, its checkpoint or the landing is a local file: not here, not in the cluster's folders.
    for root in (tmp_path, cluster.workdir):
        local = [
            p for p in root.rglob("*") if p.name in ("_delta_log", "_checkpoints", "_stream_lease", "quotes", "orders")
        ]
        assert local == [], local
