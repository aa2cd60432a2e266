"""The data-quality reports as a person reaches them: `market-spread-run` (a live `airflow standalone`,
private AIRFLOW_HOME and port) over a small lake; two quality runs, the first failing (thresholds that
contradict the stream's verdicts), the second passing; then Debian's headless Chromium, through
Selenium, logs in, opens "Data quality" in the navigation and sees the latest suite results, styled,
and opens each validate task's "Data Docs" link. Every request the browser makes stays on
127.0.0.1. Plain HTTP too: anonymous -> refused, logged in -> 200, `../` -> refused.

MARKET_SPREAD_UI_SCREENSHOT=docs/data-quality.png saves the screenshot the README shows.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from http.client import HTTPConnection
from importlib import metadata
from pathlib import Path
from urllib.parse import quote

import pytest

from market_spread.orchestration.datadocs_assets import ASSETS_ENV, assets_dir, missing
from market_spread.orchestration.jobs import cli_argv
from tests.helpers.airflow import wait_for
from tests.helpers.browser import PASSWORD_FILE, USER, chrome, free_port, http, log_in, require_browser, wait_until
from tests.helpers.browser import requested as urls_requested
from tests.helpers.paths import ROOT
from tests.helpers.processes import stop

pytestmark = pytest.mark.slow
DAG = "market_spread_quality"
PLUGIN = "market_spread.orchestration.ui_plugin:MarketSpreadUiPlugin"


def _api(method: str, url: str, token: str, body: dict | None = None) -> dict:
    for _ in range(5):  # a busy SQLite metadata DB answers 500 now and then ("database is locked")
        status, raw = http(method, url, body, token)
        if status < 500:
            break
        time.sleep(3)
    assert status < 300, (method, url, status, raw[:500])
    return json.loads(raw) if raw else {}


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
    """A lake with alerts, as the stream writes it (one batch)."""
    landing, lake = tmp / "landing", tmp / "lake"
    for command in (
        ["generate", "--landing", str(landing), "--quotes", "300", "--orders", "300", "--files", "1"],
        ["stream", "--landing", str(landing), "--lake", str(lake), "--available-now"],
    ):
        subprocess.run(cli_argv(*command), check=True, capture_output=True, env=env, timeout=900)


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    """A live Airflow over a lake validated twice; yields what the tests need."""
    require_browser()
    tmp = tmp_path_factory.mktemp("ui")
    home, port = tmp / "airflow", free_port()
    env = dict(
        os.environ,
        PORT=str(port),
        MARKET_SPREAD_AIRFLOW_HOME=str(home),
        MARKET_SPREAD_START_PAUSED="1",
        MARKET_SPREAD_LAKE=str(tmp / "lake"),
        MARKET_SPREAD_LANDING=str(tmp / "landing"),
        MARKET_SPREAD_DOCS=str(tmp / "docs"),
        MARKET_SPREAD_MASTER="local[1]",
        # Yearly: no scheduled run but the one an unpause may start (the year's first tick).
        MARKET_SPREAD_QUALITY_SCHEDULE="0 0 1 1 *",
    )
    if missing(assets_dir()):  # `make setup` fetches them; a bare checkout fetches its own copy
        from market_spread_tools.datadocs_assets import fetch

        fetch(tmp / "assets")
        env[ASSETS_ENV] = str(tmp / "assets")
    shim = _plugin_path(tmp)
    if shim:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (shim, env.get("PYTHONPATH", "")) if p)
    _small_lake(tmp, env)
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
        yield _start_and_validate(proc, log, home, port, tmp)
    finally:
        # Its shutdown is not what this file tests (test_airflow_e2e does): a short grace, then the group.
        stop(proc, timeout=20)


def _quality_run(base: str, token: str, proc, log, run_id: str | None = None) -> dict:
    """Wait for the end of quality run `run_id` (triggered here when None) and of any other run."""
    if run_id is None:
        run_id = _api("POST", f"{base}/api/v2/dags/{DAG}/dagRuns", token, {"logical_date": None})["dag_run_id"]
    url = f"{base}/api/v2/dags/{DAG}/dagRuns/{quote(run_id, safe='')}"

    def ended() -> dict | None:
        found = _api("GET", url, token)
        return found if found["state"] in ("success", "failed") else None

    finished = wait_for(f"quality run {run_id}", ended, 900, proc, log, every=1)
    active = f"{base}/api/v2/dags/{DAG}/dagRuns?state=queued&state=running"
    wait_for("no other quality run", lambda: _api("GET", active, token)["total_entries"] == 0, 900, proc, log, every=1)
    ti = _api("GET", f"{url}/taskInstances/validate", token)
    links = _api("GET", f"{url}/taskInstances/validate/links", token)["extra_links"]
    return {"run_id": run_id, "state": finished["state"], "ti": ti, "link": links.get("Data Docs")}


def _first_run(base: str, token: str, proc, log) -> str | None:
    """The run the unpause starts (the cron's latest tick: catchup=False schedules it), if one comes
    within a minute; None if not, and the failing run is then triggered by hand."""

    def listed() -> str | None:
        runs = _api("GET", f"{base}/api/v2/dags/{DAG}/dagRuns?order_by=run_after", token)["dag_runs"]
        return runs[0]["dag_run_id"] if runs else None

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        found = listed()
        if found:
            return found
        time.sleep(1)
    return None


def _start_and_validate(proc, log: Path, home: Path, port: int, tmp: Path) -> dict:
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        status, raw = http("GET", f"{base}/api/v2/monitor/health")
        parts = ("metadatabase", "scheduler", "dag_processor")
        return status == 200 and all((json.loads(raw).get(p) or {}).get("status") == "healthy" for p in parts)

    wait_for("Airflow to be healthy", healthy, 300, proc, log, every=1)
    password = json.loads((home / PASSWORD_FILE).read_text())[USER]
    token = json.loads(http("POST", f"{base}/auth/token", {"username": USER, "password": password})[1])["access_token"]
    wait_for(
        "the quality DAG to be parsed",
        lambda: http("GET", f"{base}/api/v2/dags/{DAG}", token=token)[0] == 200,
        180,
        proc,
        log,
        every=1,
    )
    # Thresholds far above the stream's: its wide-spread verdicts now look wrong, a critical failure.
    # Set before unpausing, so that a scheduled run the unpause may start fails the same way.
    wrong = {"market_spread_max_spread": "1000", "market_spread_max_spread_ratio": "1000"}
    for key, value in wrong.items():
        _api("POST", f"{base}/api/v2/variables", token, {"key": key, "value": value})
    _api("PATCH", f"{base}/api/v2/dags/{DAG}", token, {"is_paused": False})
    # The unpause starts the yearly cron's latest tick: that run is the failing one. (A run triggered
    # here as well queued behind it, max_active_runs=1: a third validate, about a minute, for nothing.)
    failed = _quality_run(base, token, proc, log, _first_run(base, token, proc, log))
    for key in wrong:
        _api("DELETE", f"{base}/api/v2/variables/{key}", token)
    passed = _quality_run(base, token, proc, log)
    return {
        "base": base,
        "token": token,
        "password": password,
        "failed": failed,
        "passed": passed,
        "docs": tmp / "docs",
        "log": log,
    }


def test_validate_returns_a_summary_and_links_its_page_failed_runs_included(airflow) -> None:
    failed, passed = airflow["failed"], airflow["passed"]
    assert failed["state"] == "failed" and passed["state"] == "success", airflow["log"].read_text()[-3000:]
    for run in (failed, passed):
        assert run["link"] and run["link"].startswith("/data-quality/docs/validations/"), run
        page = run["link"][len("/data-quality/docs/") :]
        assert (airflow["docs"] / page).is_file()
    assert failed["link"] != passed["link"]
    xcom = _api(
        "GET",
        f"{airflow['base']}/api/v2/dags/{DAG}/dagRuns/{passed['run_id']}/taskInstances/validate/"
        "xcomEntries/return_value",
        airflow["token"],
    )
    summary = xcom["value"] if isinstance(xcom["value"], dict) else json.loads(xcom["value"])
    assert summary["passed"] is True and summary["expectations_failed"] == 0
    assert summary["expectations_passed"] > 0 and set(summary["suites"]) == {"alerts", "symbol_state"}
    assert summary["batches_checked"] >= 1
    assert passed["link"].endswith(summary["data_docs_page"])


def test_plain_http_needs_a_login_and_stays_inside_the_site(airflow) -> None:
    base, token = airflow["base"], airflow["token"]
    page = airflow["passed"]["link"]
    for path in (
        "/data-quality/",
        "/data-quality/docs/index.html",
        page,
        "/data-quality/assets/bootstrap@4.3.1/dist/css/bootstrap.min.css",
    ):
        status, body = http("GET", base + path)
        assert status in (401, 403), (path, status)
        assert b"Validation" not in body
    assert http("GET", base + page, token=token)[0] == 200
    status, body = http("GET", f"{base}/data-quality/docs/index.html", token=token)
    assert status == 200 and b"/data-quality/assets/" in body and b"https://cdn" not in body
    host = base.removeprefix("http://")
    for path in (
        "/data-quality/docs/../../../../../../etc/passwd",
        "/data-quality/docs/..%2F..%2F..%2Fetc%2Fpasswd",
        "/data-quality/docs/gx/great_expectations.yml",
        "/data-quality/assets/..%2F..%2Fpyproject.toml",
        f"/data-quality/docs/{'%2E%2E/' * 8}etc/passwd",
    ):
        connection = HTTPConnection(host, timeout=30)  # sends the path as written
        connection.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        body = response.read()
        connection.close()
        assert response.status in (400, 403, 404), (path, response.status)
        assert b"root:" not in body and b"[project]" not in body and b"stores" not in body


@pytest.fixture(scope="module")
def browser(airflow):
    session = chrome("1440,1000")
    try:
        yield session
    finally:
        session.quit()


def _styled_report(session, expect: str) -> str:
    """The report in the current frame: its text, once Bootstrap's styles apply."""
    from selenium.webdriver.common.by import By

    wait_until(session, lambda s: expect in s.find_element(By.TAG_NAME, "body").text)
    # Bootstrap 4 makes .navbar a flex box; without its stylesheet the element stays a block.
    display = session.execute_script("return getComputedStyle(document.querySelector('.navbar')).display")
    assert display == "flex", "the report is not styled: Bootstrap's CSS did not load"
    return session.find_element(By.TAG_NAME, "body").text


def test_a_person_sees_the_reports_in_the_ui(airflow, browser, tmp_path) -> None:
    from selenium.webdriver.common.by import By

    base = airflow["base"]
    log_in(browser, base, airflow["password"])
    # "Data quality" in the navigation, the site framed inside the UI.
    entry = wait_until(browser, lambda s: s.find_element(By.XPATH, "//a[normalize-space()='Data quality']"))
    entry.click()
    # The UI mirrors the framed page in its own address (/plugin/data-quality/<the frame's path>).
    wait_until(browser, lambda s: "/plugin/data-quality" in s.current_url)
    frame = wait_until(browser, lambda s: s.find_element(By.CSS_SELECTOR, "iframe[title='Data quality']"))
    browser.switch_to.frame(frame)
    text = _styled_report(browser, "alerts")
    passed_run = airflow["passed"]["link"].split("/")[-3]  # .../<suite>/<GX run name>/<time>/<page>
    assert passed_run in text, "the latest validation is listed"
    browser.switch_to.default_content()
    time.sleep(2)  # let the frame's last fonts and images arrive before the picture
    shot = os.environ.get("MARKET_SPREAD_UI_SCREENSHOT")
    assert browser.save_screenshot(str(ROOT / shot) if shot else str(tmp_path / "data-quality.png"))

    # Each run's "Data Docs" button, as the task instance page shows it (the failed run's too).
    for run, verdict in ((airflow["failed"], "Failed"), (airflow["passed"], "Succeeded")):
        browser.get(f"{base}/dags/{DAG}/runs/{quote(run['run_id'], safe='')}/tasks/validate/details")
        button = wait_until(browser, lambda s: s.find_element(By.XPATH, "//a[normalize-space()='Data Docs']"))
        href = button.get_attribute("href")
        assert href == base + run["link"], (href, run["link"])
        browser.get(href)
        assert re.search(rf"Status:\s*{verdict}", _styled_report(browser, "Expectation Validation Result"))

    requested = urls_requested(browser)
    assert any("/data-quality/assets/bootstrap@4.3.1/" in u for u in requested)  # the log saw the styles
    outside = [u for u in requested if not u.startswith((base + "/", "data:", "blob:", "about:"))]
    assert outside == [], f"requests left 127.0.0.1: {outside[:10]}"
