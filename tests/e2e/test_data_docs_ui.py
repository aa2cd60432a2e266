"""The data-quality reports as a person reaches them: the worker's live Airflow (`market-spread-run`,
tests/helpers/live_airflow.py) over its small lake; two quality runs, the first failing (thresholds that
contradict the stream's verdicts), the second passing; then Debian's headless Chromium, through
Selenium, logs in, opens "Data quality" in the navigation and sees the latest suite results, styled,
and opens each validate task's "Data Docs" link. Every request the browser makes stays on
127.0.0.1. Plain HTTP too: anonymous -> refused, logged in -> 200, `../` -> refused.
"""

from __future__ import annotations

import json
import re
import time
from http.client import HTTPConnection
from urllib.parse import quote

import pytest

from tests.helpers.airflow import wait_for
from tests.helpers.browser import chrome, http, log_in, wait_until
from tests.helpers.browser import requested as urls_requested
from tests.helpers.live_airflow import LiveAirflow

pytestmark = pytest.mark.slow
DAG = "market_spread_quality"


@pytest.fixture(scope="module")
def airflow(live_airflow_for_module):
    """The worker's live Airflow after two quality runs over its small lake, the first failing;
    the quality DAG is paused again after them, so that no later run replaces the latest report."""
    live_airflow = live_airflow_for_module
    # Thresholds far above the stream's: its wide-spread verdicts now look wrong, a critical failure.
    # Set before unpausing, so that a scheduled run the unpause may start fails the same way.
    wrong = {"market_spread_max_spread": "1000", "market_spread_max_spread_ratio": "1000"}
    for key, value in wrong.items():
        live_airflow.api("POST", "/api/v2/variables", {"key": key, "value": value})
    live_airflow.set_paused(DAG, False)
    # The unpause starts the yearly cron's latest tick: that run is the failing one. (A run triggered
    # here as well queued behind it, max_active_runs=1: a third validate, about a minute, for nothing.)
    failed = _quality_run(live_airflow, _first_run(live_airflow))
    for key in wrong:
        live_airflow.api("DELETE", f"/api/v2/variables/{key}")
    passed = _quality_run(live_airflow)
    live_airflow.set_paused(DAG, True)
    return {
        "base": live_airflow.base,
        "token": live_airflow.token,
        "password": live_airflow.password,
        "failed": failed,
        "passed": passed,
        "docs": live_airflow.docs,
        "log": live_airflow.log,
    }


def _quality_run(airflow: LiveAirflow, run_id: str | None = None) -> dict:
    """Wait for the end of quality run `run_id` (triggered here when None) and of any other run."""
    if run_id is None:
        run_id = airflow.api("POST", f"/api/v2/dags/{DAG}/dagRuns", {"logical_date": None})["dag_run_id"]
    url = f"/api/v2/dags/{DAG}/dagRuns/{quote(run_id, safe='')}"

    def ended() -> dict | None:
        found = airflow.api("GET", url)
        return found if found["state"] in ("success", "failed") else None

    finished = wait_for(f"quality run {run_id}", ended, 900, airflow.proc, airflow.log, every=1)
    active = f"/api/v2/dags/{DAG}/dagRuns?state=queued&state=running"
    wait_for(
        "no other quality run",
        lambda: airflow.api("GET", active)["total_entries"] == 0,
        900,
        airflow.proc,
        airflow.log,
        every=1,
    )
    ti = airflow.api("GET", f"{url}/taskInstances/validate")
    links = airflow.api("GET", f"{url}/taskInstances/validate/links")["extra_links"]
    return {"run_id": run_id, "state": finished["state"], "ti": ti, "link": links.get("Data Docs")}


def _first_run(airflow: LiveAirflow) -> str | None:
    """The run the unpause starts (the cron's latest tick: catchup=False schedules it), if one comes
    within a minute; None if not, and the failing run is then triggered by hand."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and airflow.proc.poll() is None:
        runs = airflow.api("GET", f"/api/v2/dags/{DAG}/dagRuns?order_by=run_after")["dag_runs"]
        if runs:
            return runs[0]["dag_run_id"]
        time.sleep(1)
    return None


def test_validate_returns_a_summary_and_links_its_page_failed_runs_included(airflow, live_airflow) -> None:
    failed, passed = airflow["failed"], airflow["passed"]
    assert failed["state"] == "failed" and passed["state"] == "success", airflow["log"].read_text()[-3000:]
    for run in (failed, passed):
        assert run["link"] and run["link"].startswith("/data-quality/docs/validations/"), run
        page = run["link"][len("/data-quality/docs/") :]
        assert (airflow["docs"] / page).is_file()
    assert failed["link"] != passed["link"]
    xcom = live_airflow.api(
        "GET", f"/api/v2/dags/{DAG}/dagRuns/{passed['run_id']}/taskInstances/validate/xcomEntries/return_value"
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
    assert browser.save_screenshot(str(tmp_path / "data-quality.png"))  # kept for a failed run's reader

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
