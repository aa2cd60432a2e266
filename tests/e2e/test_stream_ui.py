"""The Stream page as an operator on call reaches it: the worker's live Airflow (`market-spread-run`,
tests/helpers/live_airflow.py) with the stream and the demo feed DAGs unpaused; Debian's headless
Chromium logs in, opens "Stream" in the navigation and watches the charts fill while the feed runs
(the panel refreshes itself, no reload). Every request the browser makes stays on 127.0.0.1; plain
HTTP without a login is refused. Airflow's own StatsD metrics reach a UDP server on the loopback.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.helpers.airflow import wait_for
from tests.helpers.browser import chrome, http, log_in, requested, wait_until
from tests.helpers.live_airflow import require_plugin

pytestmark = pytest.mark.slow
LIVE_DAGS = ("market_spread_stream", "market_spread_feed")


@pytest.fixture(scope="module")
def airflow(live_airflow_for_module):
    """The worker's live Airflow with the stream and feed DAGs unpaused; what the tests need."""
    live_airflow = live_airflow_for_module
    require_plugin()
    for dag in LIVE_DAGS:
        live_airflow.set_paused(dag, False)
    return {
        "base": live_airflow.base,
        "token": live_airflow.token,
        "password": live_airflow.password,
        "log": live_airflow.log,
        "proc": live_airflow.proc,
        "statsd": live_airflow.statsd,
        "metrics_port": live_airflow.metrics_port,
    }


def _live_batch(airflow: dict) -> bool:
    """A batch of the live stream: the small lake's own (batch 0, an earlier run) does not count."""
    status = _status(airflow)
    return bool(status["writer"] and status["last_batch"] and status["last_batch"]["batch_id"] >= 1)


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
    wait_for(
        "the live stream's first batch", lambda: _live_batch(airflow), 900, airflow["proc"], airflow["log"], every=1
    )
    session = chrome()
    try:
        log_in(session, base, airflow["password"])
        wait_until(session, lambda s: s.find_element(By.XPATH, "//a[normalize-space()='Stream']")).click()
        wait_until(session, lambda s: "/plugin/stream" in s.current_url)
        frame = wait_until(session, lambda s: s.find_element(By.CSS_SELECTOR, "iframe[title='Stream']"))
        session.switch_to.frame(frame)
        state = wait_until(
            session, lambda s: s.find_element(By.CSS_SELECTOR, "#panel .state").get_attribute("data-state")
        )
        assert state == "running", state

        def points(chart: str) -> int:
            # Read afresh in one wait: the panel replaces itself every 10 s (stale elements).
            css = f"svg[data-chart={chart}]"
            return int(wait_until(session, lambda s: s.find_element(By.CSS_SELECTOR, css).get_attribute("data-points")))

        def refreshed() -> str:
            return wait_until(session, lambda s: s.find_element(By.CSS_SELECTOR, "#panel .window").text)

        first, stamp = points("input_rate"), refreshed()
        assert first >= 1 and points("alerts") >= 1 and points("batch_duration") >= 1
        # Without a reload: the panel refreshes itself and the next minutes of the feed appear.
        wait_until(session, lambda s: points("input_rate") > first and points("latency") >= 1, timeout=300)
        assert refreshed() != stamp
        assert (
            wait_until(session, lambda s: s.find_element(By.CSS_SELECTOR, "#panel .state").get_attribute("data-state"))
            == "running"
        )
        text = session.find_element(By.ID, "panel").text
        assert "Lake writer" in text and "no live stream" not in text and "Metrics endpoint" in text
        session.switch_to.default_content()
        time.sleep(1)
        assert session.save_screenshot(str(tmp_path / "stream-page.png"))  # kept for a failed run's reader
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
