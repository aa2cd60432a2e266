"""A Spark standalone master and workers on this machine (a developer tool).

`LocalCluster` starts them from the pip-installed Spark, for trying the cluster path by hand
(`python -m market_spread_tools.cluster --workers 2`) and for tests. The driver's cluster settings
are product code: `market_spread.runtime.cluster_conf`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from market_spread_tools.spark_auth import ensure_spark_defaults


def spark_class() -> Path:
    """`spark-class` of the pip-installed Spark (the same version the driver uses)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class LocalCluster:
    """A Spark standalone master and workers on this machine, each in a process group of its own.

    A worker's executors (and their Python workers) are its children and share its group, so
    `kill_worker` takes a worker down the way a lost machine goes, and `stop` leaves nothing behind.
    """

    workdir: Path
    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port
    webui_port: int = 0
    daemon_memory: str = "256m"  # master and worker JVMs only bookkeep
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    worker_dirs: dict[str, Path] = field(default_factory=dict)
    _next_worker: int = 0

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    @property
    def conf_dir(self) -> Path:
        """SPARK_CONF_DIR of the daemons, and of any driver: spark.authenticate and the secret."""
        return self.workdir / "conf"

    @property
    def webui_url(self) -> str:
        return f"http://{self.host}:{self.webui_port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # Every daemon binds and advertises this address, never the host name's.
        env["SPARK_LOCAL_IP"] = self.host
        env["SPARK_DAEMON_MEMORY"] = self.daemon_memory
        env["SPARK_CONF_DIR"] = str(self.conf_dir)  # RPC authentication on (spark_auth)
        return env

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                [str(spark_class()), *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(),
                start_new_session=True,
            )
        self.procs[name] = proc
        return proc

    def start(self, timeout: float = 180.0) -> "LocalCluster":
        self.workdir.mkdir(parents=True, exist_ok=True)
        ensure_spark_defaults(self.conf_dir)
        self.port = self.port or free_port(self.host)
        self.webui_port = self.webui_port or free_port(self.host)
        try:
            self._spawn(
                "master",
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    self.host,
                    "--port",
                    str(self.port),
                    "--webui-port",
                    str(self.webui_port),
                ],
            )
            self._wait(lambda: self.state() is not None, timeout, "the master's web UI")
            for _ in range(self.workers):
                self.add_worker(wait=False)
            self.wait_for_workers(self.workers, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def add_worker(self, wait: bool = True, timeout: float = 180.0) -> str:
        name = f"worker-{self._next_worker}"
        self._next_worker += 1
        work = self.workdir / name
        work.mkdir(parents=True, exist_ok=True)
        self.worker_dirs[name] = work
        self._spawn(
            name,
            [
                "org.apache.spark.deploy.worker.Worker",
                self.master_url,
                "--host",
                self.host,
                "--cores",
                str(self.worker_cores),
                "--memory",
                self.worker_memory,
                "--work-dir",
                str(work),
                "--webui-port",
                str(free_port(self.host)),
            ],
        )
        if wait:
            self.wait_for_workers(len(self.running_workers()), timeout)
        return name

    def running_workers(self) -> list[str]:
        return [n for n, p in self.procs.items() if n.startswith("worker-") and p.poll() is None]

    def kill_worker(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal a worker's whole process group: the worker JVM, its executors, their Python workers."""
        proc = self.procs[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        proc.wait(timeout=60)

    def state(self) -> dict | None:
        """The master's JSON status, or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as response:
                return json.load(response)
        except (OSError, ValueError):
            return None

    def alive_workers(self) -> list[dict]:
        state = self.state() or {}
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

    def wait_for_workers(self, count: int, timeout: float = 180.0) -> None:
        self._wait(lambda: len(self.alive_workers()) >= count, timeout, f"{count} registered workers")

    def _wait(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            master = self.procs.get("master")
            if master is not None and master.poll() is not None:
                raise RuntimeError(
                    f"the Spark master exited (code {master.returncode}); see {self.workdir / 'logs' / 'master.log'}"
                )
            if predicate():
                return
            time.sleep(0.5)
        raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}; logs in {self.workdir / 'logs'}")

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM every group (workers first), then SIGKILL whatever is left."""
        order = sorted(self.procs, key=lambda n: n == "master")
        for name in order:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.procs[name].pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for name in order:
            proc = self.procs[name]
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            # Also when the leader is gone: an executor may still hold the group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        # Killed members of a group vanish a moment later (once reaped): wait for every group to empty.
        deadline = time.monotonic() + 15
        while self.leftovers() and time.monotonic() < deadline:
            time.sleep(0.1)

    def leftovers(self) -> list[str]:
        """Names of the daemons whose process group still has a live member."""
        left = []
        for name, proc in self.procs.items():
            try:
                os.killpg(proc.pid, 0)
                left.append(name)
            except ProcessLookupError:
                pass
        return left

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """`python -m market_spread_tools.cluster`: a local standalone cluster until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m market_spread_tools.cluster", description=main.__doc__)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    parser.add_argument("--memory", default="1g", help="memory per worker (default 1g)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7077)
    parser.add_argument("--webui-port", type=int, default=8081)
    parser.add_argument("--dir", default="data/spark-cluster", help="work and log folder (default data/spark-cluster)")
    args = parser.parse_args(argv)
    stop = {"now": False}

    def request_stop(_signum, _frame) -> None:
        stop["now"] = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, request_stop)
    cluster = LocalCluster(
        Path(args.dir).resolve(),
        workers=args.workers,
        worker_cores=args.cores,
        worker_memory=args.memory,
        host=args.host,
        port=args.port,
        webui_port=args.webui_port,
    )
    cluster.start()
    try:
        print(
            f"Spark master {cluster.master_url} with {args.workers} workers; UI {cluster.webui_url}; "
            f"logs {cluster.workdir / 'logs'}. Drivers need SPARK_CONF_DIR={cluster.conf_dir} (the secret). "
            "Ctrl-C stops it.",
            flush=True,
        )
        while not stop["now"]:
            if cluster.procs["master"].poll() is not None:
                print("the master exited", file=sys.stderr)
                return 1
            time.sleep(0.5)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
