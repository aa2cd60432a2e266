"""The Stream page without a live Airflow: a lake whose batch_metrics is a real Delta table (written
with delta-rs, the product's columns), the stream's health record and writer lock as the stream
writes them, a landing folder; the page served by the plugin's app. Its figures, its states
(running, stalled, not running), Airflow's login in front of it, and nothing loaded from outside.
The browser test (tests/e2e/test_stream_ui.py) shows the same page over a live stream."""

from __future__ import annotations

import json
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from market_spread.orchestration import ui_plugin
from market_spread.orchestration.stream_status import WINDOWS
from market_spread.runtime.processes import process_start_time, this_host
from market_spread.runtime.stream_contract import LOCK_FILE
from market_spread.runtime.stream_health import MinuteSeries, write_health


def _minute() -> int:
    """The current minute's start, far enough from its end that the page is read within it."""
    if time.time() % 60 > 50:
        time.sleep(61 - time.time() % 60)
    return int(time.time() // 60) * 60


def _metrics(lake: Path, batches: list[tuple[float, float, int, int, int]]) -> None:
    """batch_metrics rows: (started, finished, input_lines, alerts, quarantined) in unix seconds."""
    import pyarrow as pa
    from deltalake import write_deltalake

    stamp = pa.timestamp("us", tz="UTC")
    times = lambda i: [datetime.fromtimestamp(b[i], tz=UTC) for b in batches]  # noqa: E731
    table = pa.table(
        {
            "batch_id": pa.array(range(len(batches)), pa.int64()),
            "started_at": pa.array(times(0), stamp),
            "finished_at": pa.array(times(1), stamp),
            "quotes": pa.array([b[2] // 2 for b in batches], pa.int64()),
            "orders": pa.array([b[2] - b[2] // 2 for b in batches], pa.int64()),
            "alerts": pa.array([b[3] for b in batches], pa.int64()),
            "quarantined": pa.array([b[4] for b in batches], pa.int64()),
            "input_lines": pa.array([b[2] for b in batches], pa.int64()),
        }
    )
    write_deltalake(str(lake / "batch_metrics"), table, mode="append")


def _live_lock(lake: Path) -> None:
    """The writer lock as a live stream leaves it: this test's own process stands for the stream."""
    record = {
        "pid": os.getpid(),
        "pid_started": process_start_time(),
        "host": this_host(),
        "since": "2026-01-01T00:00:00",
    }
    (lake / LOCK_FILE).write_text(json.dumps(record))


def _health(lake: Path, latencies: list[tuple[float, float]], backlog: list[tuple[float, int]]) -> None:
    series = MinuteSeries()
    for t, seconds in latencies:
        series.add_latency(t, seconds)
    for t, count in backlog:
        series.add_backlog(t, count)
    write_health(
        lake,
        {"written_at": time.time() - 3, "metrics_endpoint": "http://127.0.0.1:9407/metrics", "minutes": series.rows()},
    )


@pytest.fixture()
def place(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    lake, landing = tmp_path / "lake", tmp_path / "landing"
    for folder in (lake, landing / "quotes", landing / "orders"):
        folder.mkdir(parents=True)
    monkeypatch.setenv("MARKET_SPREAD_LAKE", str(lake))
    monkeypatch.setenv("MARKET_SPREAD_LANDING", str(landing))
    monkeypatch.setenv("MARKET_SPREAD_STALL_SECONDS", "300")
    monkeypatch.setattr(ui_plugin, "_server_variable", lambda name: None)  # no metadata DB here
    ui_plugin._settings_cache.clear()
    return lake, landing


def client(authorized: bool = True) -> TestClient:
    app = ui_plugin.create_stream_app()
    if authorized:
        app.dependency_overrides[ui_plugin.require_stream_reader] = lambda: None
    return TestClient(app, root_path="/stream-health")


def _chart(page: str, key: str) -> str:
    found = re.search(rf'<svg class="chart" data-chart="{key}" data-points="(\d+)".*?</svg>', page)
    assert found, f"no {key} chart"
    return found.group(0)


def test_a_running_stream_shows_its_minutes(place) -> None:
    lake, _ = place
    minute = _minute()
    # Two batches in the minute three minutes ago, one in the current minute.
    _metrics(
        lake,
        [
            (minute - 170, minute - 169, 600, 4, 1),
            (minute - 150, minute - 149, 1200, 6, 0),
            (minute + 0.1, minute + 0.2, 60, 1, 2),
        ],
    )
    _health(lake, [(minute - 169, 2.0), (minute - 149, 4.0), (minute + 0.2, 0.5)], [(minute - 160, 3), (minute, 0)])
    _live_lock(lake)
    response = client().get("/?window=15m")
    assert response.status_code == 200
    page = response.text
    assert 'data-state="running"' in page and "#2, committed" in page
    assert f"pid {os.getpid()} on {this_host()}" in page
    assert 'data-points="2"' in _chart(page, "input_rate")  # two minutes with batches
    status = client().get("/status.json?window=15m").json()
    assert status["minutes"][-1] == minute and len(status["minutes"]) == 15
    series = status["series"]
    three_ago = status["minutes"].index(minute - 180)
    assert series["alerts"][three_ago] == 10 and series["quarantined"][three_ago] == 1
    assert series["input_rate"][three_ago] == pytest.approx(1800 / 60)
    assert series["batch_max"][three_ago] == pytest.approx(1.0, abs=0.01)
    assert series["latency_max"][three_ago] == 4.0 and series["latency_mean"][three_ago] == 3.0
    assert series["backlog"][three_ago] == 3 and series["backlog"][-1] == 0
    assert series["alerts"][-1] == 1 and series["alerts"][-2] is None
    assert status["stalled"] is None and status["waiting"]["count"] == 0
    assert status["metrics_endpoint"] == "http://127.0.0.1:9407/metrics"


def test_a_stalled_stream_is_red(place) -> None:
    lake, landing = place
    now = time.time()
    _metrics(lake, [(now - 401, now - 400, 10, 0, 0)])
    _live_lock(lake)
    waiting = landing / "orders" / "o.jsonl"
    waiting.write_text("{}\n")
    os.utime(waiting, (now - 350, now - 350))  # landed after the last batch began, 350 s ago
    page = client().get("/").text
    assert 'data-state="stalled"' in page and 'class="state bad"' in page
    assert re.search(r"no batch for 4\d\ds while 1 files wait, the oldest for 3\d\ds \(&gt; 300s\)", page), page
    assert '<div class="charts stalled">' in page  # the backlog chart framed in red
    os.utime(waiting, (now - 100, now - 100))  # input that has not waited past the limit: no stall
    assert 'data-state="running"' in client().get("/").text


def test_without_a_stream_or_a_lake_the_page_says_so(place) -> None:
    page = client().get("/?window=24h").text
    assert 'data-state="not-running"' in page and "Last batch</dt><dd>none yet" in page
    assert all(f'data-chart="{key}" data-points="0"' in page for key in ("input_rate", "latency", "backlog"))


def test_a_window_it_does_not_offer_is_one_line(place) -> None:
    response = client().get("/?window=2h")
    assert response.status_code == 400
    assert response.json() == {"detail": "window must be one of 15m, 1h, 6h, 24h, not '2h'"}


def test_it_needs_a_login_and_loads_nothing_from_outside(place) -> None:
    for path in ("/", "/panel", "/status.json"):
        assert client(authorized=False).get(path).status_code in (401, 403), path
    response = client().get("/")
    assert "default-src 'self'" in response.headers["content-security-policy"]
    assert not re.search(r"""(?:src|href)=["']https?://""", response.text)
    # Refreshed from the same server, on the window it opened on (no stream yet: 15 minutes).
    assert 'data-src="/stream-health/panel?window=15m"' in response.text
    assert client().get("/panel?window=6h").text.startswith('<div class="state')


def test_registered_beside_data_quality() -> None:
    plugin = ui_plugin.MarketSpreadUiPlugin
    prefixes = [app["url_prefix"] for app in plugin.fastapi_apps]
    assert prefixes == ["/data-quality", "/stream-health"]
    stream = [view for view in plugin.external_views if view["name"] == "Stream"]
    assert stream == [
        {
            "name": "Stream",
            "href": "/stream-health/",
            "destination": "nav",
            "url_route": "stream",
            "nav_top_level": True,
        }
    ]


def test_a_quiet_window_still_knows_the_last_batch(place) -> None:
    lake, landing = place
    now = time.time()
    _metrics(lake, [(now - 7300, now - 7200, 10, 0, 0)])  # two hours ago; no health record
    _live_lock(lake)
    taken = landing / "orders" / "old.jsonl"  # a file that batch took (it landed before it began)
    taken.write_text("{}\n")
    os.utime(taken, (now - 7400, now - 7400))
    status = client().get("/status.json?window=15m").json()
    assert status["last_batch"]["batch_id"] == 0 and 7199 < status["last_batch_age_seconds"] < 7300
    assert status["waiting"]["count"] == 0 and status["stalled"] is None  # an idle stream, not a stalled one
    assert 'data-state="running"' in client().get("/?window=15m").text


def test_a_broker_out_of_reach_is_said_not_a_failed_page(place, monkeypatch) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    monkeypatch.setenv("MARKET_SPREAD_SOURCE", "kafka")
    monkeypatch.setenv("MARKET_SPREAD_BOOTSTRAP_SERVERS", f"127.0.0.1:{closed}")
    response = client().get("/")
    assert response.status_code == 200
    assert re.search(rf"Input waiting</dt><dd>unknown: Kafka at 127.0.0.1:{closed}", response.text), response.text[
        :3000
    ]
    assert f"kafka 127.0.0.1:{closed}" in response.text


def test_an_endpoint_that_could_not_open_says_why_and_what_to_do(place) -> None:
    lake, _ = place
    write_health(
        lake,
        {
            "written_at": time.time() - 3,
            "metrics_endpoint": None,
            "metrics_note": "none: port 9407 in use: set MARKET_SPREAD_METRICS_PORT",
            "minutes": MinuteSeries().rows(),
        },
    )
    page = client().get("/").text
    assert "Metrics endpoint</dt><dd>none: port 9407 in use: set MARKET_SPREAD_METRICS_PORT</dd>" in page
    assert client().get("/status.json").json()["metrics_note"].startswith("none: port 9407 in use")


def test_the_page_opens_on_a_window_that_fits_a_young_stream(place) -> None:
    lake, _ = place
    for age, opens_on in ((60, "15m"), (14 * 60, "15m"), (2 * 3600, "1h")):
        write_health(lake, {"written_at": time.time(), "started_at": time.time() - age, "minutes": []})
        page = client().get("/").text
        assert f'?window={opens_on}" class=current>{opens_on}</a>' in page, (age, opens_on)
        assert len(client().get("/status.json").json()["minutes"]) == WINDOWS[opens_on]
    assert '?window=6h" class=current' in client().get("/?window=6h").text  # a window asked for is kept


def test_each_tables_writer_and_why_it_left_delta_rs_are_shown(place) -> None:
    """The stream's health record names each table's writer (lake.protocol): the page says which
    library commits to each table and the features that sent a table to delta-spark."""
    lake, _ = place
    writers = {
        "alerts": {"writer": "delta-spark", "why": "domainMetadata, rowTracking"},
        "quotes": {"writer": "delta-rs", "why": ""},
    }
    write_health(lake, {"written_at": time.time() - 3, "minutes": MinuteSeries().rows(), "writers": writers})
    page = client().get("/").text
    assert "Table writers</dt><dd>alerts: delta-spark (domainMetadata, rowTracking); quotes: delta-rs</dd>" in page
    assert client().get("/status.json").json()["writers"] == writers


def test_the_alerts_topic_and_its_lag_are_shown(place) -> None:
    """With `stream --alerts-topic` the health record carries the publisher's state (sinks.alerts_topic):
    the page says where alerts go, how far they are published and how many rows wait, and why."""
    lake, _ = place
    topic = {"topic": "alerts", "servers": "127.0.0.1:9092", "published_through": 12, "unpublished": 40}
    write_health(lake, {"written_at": time.time() - 3, "minutes": MinuteSeries().rows(), "alerts_topic": topic})
    page = client().get("/").text
    assert (
        "Alerts topic</dt><dd>alerts at 127.0.0.1:9092: published through batch 12, 40 alert row(s) unpublished</dd>"
        in page
    )
    write_health(lake, {"written_at": time.time() - 3, "minutes": MinuteSeries().rows()})
    assert "Alerts topic</dt><dd>off (stream --alerts-topic" in client().get("/").text
