"""One live Airflow for the UI tests of a pytest worker: `market-spread-run` (a live `airflow
standalone`, private AIRFLOW_HOME and ports) over a small lake, every DAG paused at start. Each UI test
file unpauses what it needs (tests/e2e/test_data_docs_ui.py the quality DAG, then pauses it again;
tests/e2e/test_stream_ui.py the stream and the feed); tests/conftest.py's SHARED_GROUPS puts those
files on one worker, one after the other, so Airflow starts once for both. Airflow's StatsD metrics
go to a UDP server on the loopback. The tests of `make run`'s own start and stop
(tests/e2e/test_airflow_e2e.py) start their own."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

from market_spread.orchestration.datadocs_assets import ASSETS_ENV, assets_dir, missing
from market_spread.orchestration.jobs import cli_argv
from market_spread_tools.airflow_client import healthy
from tests.helpers.airflow import start_run, wait_for
from tests.helpers.browser import PASSWORD_FILE, USER, free_port, http, require_browser
from tests.helpers.processes import stop

PLUGIN = "market_spread.orchestration.ui_plugin:MarketSpreadUiPlugin"


class StatsdServer:
    """A UDP server on the loopback keeping every datagram (Airflow's StatsD metrics)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.5)
        self.lines: list[str] = []
        self.closed = threading.Event()
        threading.Thread(target=self._receive, daemon=True).start()

    @property
    def port(self) -> int:
        return self.sock.getsockname()[1]

    def _receive(self) -> None:
        while not self.closed.is_set():
            try:
                self.lines += self.sock.recv(65536).decode(errors="replace").splitlines()
            except OSError:
                continue

    def close(self) -> None:
        self.closed.set()
        self.sock.close()


@dataclass
class LiveAirflow:
    """What the UI tests reach: the base URL, an API token, the admin's password, the run's log."""

    base: str
    token: str
    password: str
    proc: subprocess.Popen
    log: Path
    docs: Path
    statsd: StatsdServer
    metrics_port: int

    def api(self, method: str, path: str, body: dict | None = None) -> dict:
        """A REST call that must succeed; a busy SQLite metadata DB answers 500 now and then."""
        for _ in range(5):
            status, raw = http(method, self.base + path, body, self.token)
            if status < 500:
                break
            time.sleep(3)
        assert status < 300, (method, path, status, raw[:500])
        return json.loads(raw) if raw else {}

    def close(self) -> None:
        """Stop `market-spread-run` (Ctrl-C twice: its quick shutdown, which sweeps what is left) and
        the StatsD server; again is a no-op. The orderly shutdown is test_airflow_e2e's subject; here
        it took 80 s of a worker's time."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            time.sleep(1)
        stop(self.proc, timeout=180)
        self.statsd.close()

    def set_paused(self, dag: str, paused: bool) -> None:
        """Pause or unpause `dag`, once the DAG processor has parsed it."""
        wait_for(
            f"{dag} to be parsed",
            lambda: http("GET", f"{self.base}/api/v2/dags/{dag}", token=self.token)[0] == 200,
            180,
            self.proc,
            self.log,
            every=1,
        )
        self.api("PATCH", f"/api/v2/dags/{dag}", {"is_paused": paused})


def _plugin_path(tmp: Path) -> str:
    """An extra sys.path entry registering the plugin's entry point when the installed package
    predates it (a venv not set up again since pyproject.toml gained it); '' when registered."""
    if any(e.value == PLUGIN for e in metadata.entry_points(group="airflow.plugins")):
        return ""
    info = tmp / "shim" / "market_spread_ui_entry_point-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: market-spread-ui-entry-point\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[airflow.plugins]\nmarket_spread = {PLUGIN}\n")
    return str(tmp / "shim")


def _small_lake(tmp: Path, env: dict[str, str]) -> None:
    """A lake with alerts, as the stream writes it (one batch), for the quality runs; the live stream
    resumes from its checkpoint later."""
    landing, lake = tmp / "landing", tmp / "lake"
    for command in (
        ["generate", "--landing", str(landing), "--quotes", "300", "--orders", "300", "--files", "1"],
        ["stream", "--landing", str(landing), "--lake", str(lake), "--available-now"],
    ):
        subprocess.run(cli_argv(*command), check=True, capture_output=True, env=env, timeout=900)


def _environment(tmp: Path, port: int, statsd: StatsdServer, metrics_port: int) -> dict[str, str]:
    env = dict(
        os.environ,
        PORT=str(port),
        MARKET_SPREAD_AIRFLOW_HOME=str(tmp / "airflow"),
        MARKET_SPREAD_START_PAUSED="1",
        MARKET_SPREAD_LAKE=str(tmp / "lake"),
        MARKET_SPREAD_LANDING=str(tmp / "landing"),
        MARKET_SPREAD_DOCS=str(tmp / "docs"),
        MARKET_SPREAD_MASTER="local[1]",
        MARKET_SPREAD_METRICS_PORT=str(metrics_port),
        STATSD_PORT=str(statsd.port),
        MARKET_SPREAD_FEED_TICK="2",  # a file pair every 2 s: the Stream page's minutes fill sooner
        # Yearly: no scheduled quality run but the one an unpause may start (the year's first tick).
        MARKET_SPREAD_QUALITY_SCHEDULE="0 0 1 1 *",
    )
    if missing(assets_dir()):  # `make setup` fetches them; a bare checkout fetches its own copy
        from market_spread_tools.datadocs_assets import fetch

        fetch(tmp / "assets")
        env[ASSETS_ENV] = str(tmp / "assets")
    shim = _plugin_path(tmp)
    if shim:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (shim, env.get("PYTHONPATH", "")) if p)
    return env


@contextmanager
def running(tmp: Path) -> Iterator[LiveAirflow]:
    """Start `market-spread-run` in `tmp`, wait until Airflow is healthy; stop it at the end."""
    require_browser()
    port, metrics_port, statsd = free_port(), free_port(), StatsdServer()
    env = _environment(tmp, port, statsd, metrics_port)
    _small_lake(tmp, env)
    log = tmp / "run.log"
    proc = start_run(env, log)
    airflow = LiveAirflow(f"http://127.0.0.1:{port}", "", "", proc, log, tmp / "docs", statsd, metrics_port)
    try:
        wait_for("Airflow to be healthy", lambda: healthy(port), 300, proc, log, every=1)
        airflow.password = json.loads((tmp / "airflow" / PASSWORD_FILE).read_text())[USER]
        raw = http("POST", f"{airflow.base}/auth/token", {"username": USER, "password": airflow.password})[1]
        airflow.token = json.loads(raw)["access_token"]
        yield airflow
    finally:
        airflow.close()


def require_plugin() -> None:
    if not any(e.value == PLUGIN for e in metadata.entry_points(group="airflow.plugins")):
        pytest.fail("the UI plugin's entry point is not installed: run `make setup`")
