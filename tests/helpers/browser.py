"""A person at the Airflow UI: Debian's headless Chromium driven by Selenium, with its network log,
and plain HTTP to the same server (tests/e2e/test_stream_ui.py)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import urllib.error
import urllib.request

import pytest

USER = "admin"
PASSWORD_FILE = "simple_auth_manager_passwords.json.generated"  # Airflow 3.3's SimpleAuthManager


def require_browser() -> tuple[str, str]:
    """(chromium, chromedriver); the test skips, saying why, without them."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.skip(
            "Debian's chromium and chromium-driver are not installed (make test installs them: "
            "apt-get install chromium chromium-driver)"
        )
    pytest.importorskip("selenium", reason="selenium is not installed (make setup installs the dev extra)")
    return chromium, driver


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method: str, url: str, body: dict | None = None, token: str | None = None) -> tuple[int, bytes]:
    """(status, body); 0 when nothing answers yet."""
    request = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(), method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def chrome(window: str = "1440,1300"):
    """A headless Chromium (`window`: width,height) that resolves no name but 127.0.0.1 and logs
    every request."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = require_browser()
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium fetch a browser or driver
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        f"--window-size={window}",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    session = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    session.set_page_load_timeout(120)
    return session


def wait_until(session, condition, timeout: float = 90):
    """`condition(session)`'s first true value; an element gone stale (a panel that replaced itself
    between finding it and reading it, as the Stream page does every 10 s) is asked for again."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    ignored = (NoSuchElementException, StaleElementReferenceException)
    return WebDriverWait(session, timeout, poll_frequency=1, ignored_exceptions=ignored).until(condition)


def log_in(session, base: str, password: str) -> None:
    """Airflow's login form, as a person fills it."""
    from selenium.webdriver.common.by import By

    session.get(base + "/")
    wait_until(session, lambda s: s.find_element(By.NAME, "username")).send_keys(USER)
    session.find_element(By.NAME, "password").send_keys(password)
    session.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until(session, lambda s: s.get_cookie("_token"))


def requested(session) -> list[str]:
    """Every URL the browser asked for since the last call (pages, frames, scripts, fetches)."""
    urls = []
    for entry in session.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls
