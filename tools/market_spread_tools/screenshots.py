"""The README's screenshots, made from a neutral run: `make screenshots`.

    .venv/bin/python -m market_spread_tools.screenshots [--out docs]

Starts `market-spread-run` on a free port over a new `data/screenshots/` (relative paths, inside
the project, so no page shows this machine's folders), unpauses the stream and the demo feed, lets
them run until the Stream page has a few minutes of charts, runs the quality DAG once (it passes),
then logs in with a headless Chromium and saves each page of SHOTS as a PNG. Every PNG carries the
text the page showed (a `page-text` chunk: `page_text()` reads it back), so a test can tell that no
screenshot shows an absolute path of the machine that made it (tests/unit/test_screenshots.py).
Needs Debian's `chromium` and `chromium-driver` (`make test` installs them).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from market_spread.runtime.paths import project_home

TEXT_KEY = "page-text"


@dataclass(frozen=True)
class Shot:
    """One screenshot: the file, how to reach the page from the UI's home, and its caption (what a
    healthy page shows; the README prints it under the image)."""

    file: str
    entry: str  # the navigation link's text ("" for the DAG list itself)
    frame: str  # the title of the iframe holding the page ("" when none)
    caption: str


SHOTS = (
    Shot(
        "airflow-grid.png",
        "",
        "",
        "The four DAGs: the stream's run lasting as long as the stream, the feed's, and a green quality run.",
    ),
    Shot(
        "stream-page.png",
        "Stream",
        "Stream",
        "The Stream page of a healthy stream: state running, the last batch seconds old, input waiting near zero, "
        "and per-minute charts of input rate, batch time, latency and alerts.",
    ),
    Shot(
        "data-quality.png",
        "Data quality",
        "Data quality",
        "Data Docs inside the UI: each validation of the alerts and symbol_state suites green, newest first.",
    ),
)


def say(text: str) -> None:
    print(f"screenshots: {text}", flush=True)


def wait(what: str, check: Callable[[], Any], timeout: float, proc: subprocess.Popen, every: float = 2) -> Any:
    """`check()`'s first true value; RuntimeError when `proc` exits first or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if proc.poll() is not None:
            raise RuntimeError(f"market-spread-run exited ({proc.returncode}) waiting for {what}")
        time.sleep(every)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")


def start(work: Path, port: int) -> subprocess.Popen:
    """`market-spread-run` from the project home with every path relative to it, DAGs paused."""
    relative = work.relative_to(project_home())
    env = dict(
        os.environ,
        PORT=str(port),
        MARKET_SPREAD_AIRFLOW_HOME=str(relative / "airflow"),
        MARKET_SPREAD_LAKE=str(relative / "lake"),
        MARKET_SPREAD_LANDING=str(relative / "landing"),
        MARKET_SPREAD_DOCS=str(relative / "quality"),
        MARKET_SPREAD_START_PAUSED="1",
        MARKET_SPREAD_FEED_TICK="2",
        MARKET_SPREAD_QUALITY_SCHEDULE="0 0 1 1 *",  # the one run is the one triggered here
    )
    log = open(work / "run.log", "wb")  # noqa: SIM115 - the child writes it for its whole life
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "market-spread-run")],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=str(project_home()),
        start_new_session=True,
    )


def prepare(work: Path, port: int, proc: subprocess.Popen, minutes: float) -> str:
    """Healthy Airflow, the stream and feed running `minutes`, one passing quality run: the password."""
    from market_spread_tools.airflow_client import PASSWORD_FILE, USER, api_token, healthy, http_json, set_paused

    wait("Airflow", lambda: healthy(port), 300, proc)
    password = json.loads((work / "airflow" / PASSWORD_FILE).read_text())[USER]
    token = api_token(port, password)
    api = f"http://127.0.0.1:{port}/api/v2"
    for dag in ("market_spread_stream", "market_spread_feed"):
        wait(f"{dag} parsed", partial(_exists, api, token, dag), 180, proc)
        set_paused(port, token, dag, False)
    say("stream and feed unpaused; waiting for batches")
    wait("the first alerts", lambda: any((work / "lake" / "alerts" / "_delta_log").glob("0*.json")), 900, proc)
    say(f"letting the feed run {minutes:g} min for the charts")
    time.sleep(60 * minutes)
    set_paused(port, token, "market_spread_quality", False)
    run = http_json("POST", f"{api}/dags/market_spread_quality/dagRuns", {"logical_date": None}, token)
    run_id = run["dag_run_id"]
    state = wait(
        "the quality run",
        lambda: _finished(api, token, run_id),
        900,
        proc,
        every=5,
    )
    if state != "success":
        raise RuntimeError(f"the quality run ended {state}: a screenshot of a failed run is no healthy page")
    return password


def _exists(api: str, token: str, dag: str) -> bool:
    from market_spread_tools.airflow_client import http_json

    try:
        http_json("GET", f"{api}/dags/{dag}", token=token)
    except Exception:  # noqa: BLE001 - not parsed yet
        return False
    return True


def _finished(api: str, token: str, run_id: str) -> str | None:
    from market_spread_tools.airflow_client import http_json

    state = http_json("GET", f"{api}/dags/market_spread_quality/dagRuns/{run_id}", token=token)["state"]
    return state if state in ("success", "failed") else None


def browser(size: str = "1400,1000") -> Any:
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size={size}"):
        options.add_argument(flag)
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        raise RuntimeError(
            "Debian's chromium and chromium-driver are needed (apt-get install chromium chromium-driver)"
        )
    options.binary_location = chromium
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver))


def until(session: Any, check: Callable[[Any], Any], timeout: float = 60) -> Any:
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(session, timeout, ignored_exceptions=(WebDriverException,)).until(check)


def log_in(session: Any, base: str, password: str) -> None:
    from selenium.webdriver.common.by import By

    from market_spread_tools.airflow_client import USER

    session.get(base + "/")
    until(session, lambda s: s.find_element(By.NAME, "username")).send_keys(USER)
    session.find_element(By.NAME, "password").send_keys(password)
    session.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    until(session, lambda s: s.get_cookie("_token") is not None)


def shoot(session: Any, base: str, shot: Shot, settle: float = 6) -> tuple[bytes, str]:
    """The page of `shot` as a PNG and the text it shows (its frame's included)."""
    from selenium.webdriver.common.by import By

    session.get(base + "/dags")
    text = ""
    if shot.entry:
        until(session, lambda s: s.find_element(By.XPATH, f"//a[normalize-space()='{shot.entry}']")).click()
        frame = until(session, lambda s: s.find_element(By.CSS_SELECTOR, f"iframe[title='{shot.frame}']"))
        time.sleep(settle)  # the framed page fetches its figures after it loads
        session.switch_to.frame(frame)
        text = session.find_element(By.TAG_NAME, "body").text
        session.switch_to.default_content()
    else:
        time.sleep(settle)  # the list loads its runs with a few API calls after the page itself
    text = session.find_element(By.TAG_NAME, "body").text + "\n" + text
    return session.get_screenshot_as_png(), text


def with_text(png: bytes, text: str) -> bytes:
    """`png` re-encoded as a 256-colour palette (UI screenshots lose nothing visible), carrying
    `text` in a `page-text` chunk."""
    from PIL import Image, PngImagePlugin

    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    info = PngImagePlugin.PngInfo()
    info.add_itxt(TEXT_KEY, text)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True, pnginfo=info)
    return out.getvalue()


def page_text(png: Path) -> str | None:
    """The text a screenshot's page showed, as `with_text` stored it (None: not made by this tool)."""
    from PIL import Image

    with Image.open(png) as image:
        image.load()
        return image.text.get(TEXT_KEY) if hasattr(image, "text") else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(project_home() / "docs"), help="folder of the PNGs (default docs)")
    parser.add_argument("--minutes", type=float, default=4, help="minutes of feed before the shots (default 4)")
    args = parser.parse_args(argv)
    work = project_home() / "data" / "screenshots"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with socket.socket() as probe:  # a free port of the loopback
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    proc = start(work, port)
    say(f"market-spread-run on port {port}, its log in {work.relative_to(project_home()) / 'run.log'}")
    try:
        password = prepare(work, port, proc, args.minutes)
        session = browser()
        try:
            log_in(session, f"http://127.0.0.1:{port}", password)
            for shot in SHOTS:
                png, text = shoot(session, f"http://127.0.0.1:{port}", shot)
                target = Path(args.out) / shot.file
                target.write_bytes(with_text(png, text))
                say(f"saved {target} ({target.stat().st_size // 1024} KB)")
        finally:
            session.quit()
    finally:
        proc.send_signal(2)  # Ctrl-C, as a person stops make run
        proc.wait(300)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
