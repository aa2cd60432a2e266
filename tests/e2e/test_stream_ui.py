"""The Stream page as an operator on call reaches it: `market-spread-run` (a live `airflow standalone`,
private AIRFLOW_HOME and ports) with the stream and the demo feed DAGs unpaused; Debian's headless
Chromium logs in, opens "Stream" in the navigation and watches the charts fill while the feed runs
(the panel refreshes itself, no reload). Every request the browser makes stays on 127.0.0.1; plain
HTTP without a login is refused. Airflow's own StatsD metrics reach a UDP server on the loopback.

MARKET_SPREAD_UI_SCREENSHOT=docs/stream-page.png saves the screenshot the README shows.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from importlib import metadata
from pathlib import Path

import pytest

from tests.helpers.airflow import wait_for
from tests.helpers.browser import (
    PASSWORD_FILE,
    USER,
    chrome,
    free_port,
    http,
    log_in,
    requested,
    require_browser,
    wait_until,
)
from tests.helpers.paths import ROOT
from tests.helpers.processes import stop

pytestmark = pytest.mark.slow
PLUGIN = "market_spread.orchestration.ui_plugin:MarketSpreadUiPlugin"
LIVE_DAGS = ("market_spread_stream", "market_spread_feed")


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


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    """A live Airflow whose stream and feed DAGs run; yields what the tests need."""
    require_browser()
    if not any(e.value == PLUGIN for e in metadata.entry_points(group="airflow.plugins")):
        pytest.fail("the UI plugin's entry point is not installed: run `make setup`")
    tmp = tmp_path_factory.mktemp("stream-ui")
    home, port, statsd = tmp / "airflow", free_port(), StatsdServer()
    env = dict(
        os.environ,
        PORT=str(port),
        MARKET_SPREAD_AIRFLOW_HOME=str(home),
        MARKET_SPREAD_START_PAUSED="1",
        MARKET_SPREAD_LAKE=str(tmp / "lake"),
        MARKET_SPREAD_LANDING=str(tmp / "landing"),
        MARKET_SPREAD_DOCS=str(tmp / "docs"),
        MARKET_SPREAD_MASTER="local[1]",
        MARKET_SPREAD_METRICS_PORT=str(free_port()),
        STATSD_PORT=str(statsd.port),
        MARKET_SPREAD_FEED_TICK="2",
    )  # a file pair every 2 s: minutes fill sooner
    log = tmp / "run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "market-spread-run")],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(ROOT),
            start_new_session=True,
        )
    try:
        yield _started(proc, log, home, port) | {
            "statsd": statsd,
            "metrics_port": int(env["MARKET_SPREAD_METRICS_PORT"]),
        }
    finally:
        stop(proc, timeout=180)
        statsd.close()


def _started(proc, log: Path, home: Path, port: int) -> dict:
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        status, raw = http("GET", f"{base}/api/v2/monitor/health")
        parts = ("metadatabase", "scheduler", "dag_processor")
        return status == 200 and all((json.loads(raw).get(p) or {}).get("status") == "healthy" for p in parts)

    wait_for("Airflow to be healthy", healthy, 300, proc, log, every=1)
    password = json.loads((home / PASSWORD_FILE).read_text())[USER]
    token = json.loads(http("POST", f"{base}/auth/token", {"username": USER, "password": password})[1])["access_token"]
    for dag in LIVE_DAGS:
        wait_for(
            f"{dag} to be parsed",
            lambda dag=dag: http("GET", f"{base}/api/v2/dags/{dag}", token=token)[0] == 200,
            180,
            proc,
            log,
            every=1,
        )
        status, raw = http("PATCH", f"{base}/api/v2/dags/{dag}", {"is_paused": False}, token)
        assert status == 200, raw[:300]
    return {"base": base, "token": token, "password": password, "log": log, "proc": proc}


def _status(airflow: dict) -> dict:
    status, raw = http("GET", f"{airflow['base']}/stream-health/status.json?window=15m", token=airflow["token"])
    assert status == 200, raw[:300]
    return json.loads(raw)


def test_plain_http_needs_a_login(airflow) -> None:
    for path in ("/stream-health/", "/stream-health/panel", "/stream-health/status.json"):
        status, body = http("GET", airflow["base"] + path)
        assert status in (401, 403), (path, status)
        assert b"batch" not in body
    status, body = http("GET", f"{airflow['base']}/stream-health/?window=2h", token=airflow["token"])
    assert status == 400 and b"window must be one of" in body


def test_a_person_watches_the_charts_fill(airflow, tmp_path) -> None:
    from selenium.webdriver.common.by import By

    base = airflow["base"]
    # The stream's first batch: a JVM to start and the feed's first files (a few minutes on 2 cores).
    wait_for("the first batch", lambda: _status(airflow)["last_batch"], 900, airflow["proc"], airflow["log"], every=5)
    session = chrome()
    try:
        log_in(session, base, airflow["password"])
        wait_until(session, lambda s: s.find_element(By.XPATH, "//a[normalize-space()='Stream']")).click()
        wait_until(session, lambda s: "/plugin/stream" in s.current_url)
        frame = wait_until(session, lambda s: s.find_element(By.CSS_SELECTOR, "iframe[title='Stream']"))
        session.switch_to.frame(frame)
        state = wait_until(session, lambda s: s.find_element(By.CSS_SELECTOR, "#panel .state"))
        assert state.get_attribute("data-state") == "running", state.text

        def points(chart: str) -> int:
            return int(session.find_element(By.CSS_SELECTOR, f"svg[data-chart={chart}]").get_attribute("data-points"))

        def refreshed() -> str:
            return session.find_element(By.CSS_SELECTOR, "#panel .window").text

        first, stamp = points("input_rate"), refreshed()
        assert first >= 1 and points("alerts") >= 1 and points("batch_duration") >= 1
        # Without a reload: the panel refreshes itself and the next minutes of the feed appear.
        wait_until(session, lambda s: points("input_rate") > first and points("latency") >= 1, timeout=300)
        assert refreshed() != stamp
        assert session.find_element(By.CSS_SELECTOR, "#panel .state").get_attribute("data-state") == "running"
        text = session.find_element(By.ID, "panel").text
        assert "Lake writer" in text and "no live stream" not in text and "Metrics endpoint" in text
        session.switch_to.default_content()
        time.sleep(1)
        shot = os.environ.get("MARKET_SPREAD_UI_SCREENSHOT")
        assert session.save_screenshot(str(ROOT / shot) if shot else str(tmp_path / "stream-page.png"))
        urls = requested(session)
    finally:
        session.quit()
    assert any("/stream-health/panel?window=" in u for u in urls), "the panel was refreshed over the network"
    outside = [u for u in urls if not u.startswith((base + "/", "data:", "blob:", "about:"))]
    assert outside == [], f"requests left 127.0.0.1: {outside[:10]}"


def test_airflows_own_metrics_arrive_and_the_stream_serves_its_own(airflow) -> None:
    statsd = airflow["statsd"]
    wait_for(
        "Airflow's StatsD metrics",
        lambda: any(line.startswith("airflow.") for line in statsd.lines),
        120,
        airflow["proc"],
        airflow["log"],
        every=1,
    )
    assert any(line.startswith("airflow.scheduler_heartbeat:") for line in statsd.lines), statsd.lines[:20]
    status, body = http("GET", f"http://127.0.0.1:{airflow['metrics_port']}/metrics")
    assert status == 200 and b"market_spread_batches_total" in body
    assert _status(airflow)["metrics_endpoint"] == f"http://127.0.0.1:{airflow['metrics_port']}/metrics"
