"""Screenshot of the Airflow UI of `make run`: logs in through the login form and saves the list of
DAGs (the four market_spread_* DAGs with their recent runs) or another page as a PNG for the README.

Not a project dependency: it needs a headless Chromium and Selenium, installed aside, e.g.

    apt-get install -y chromium chromium-driver
    python3 -m pip install --target /tmp/sel selenium

then, with `make run` up (the password is in .airflow/simple_auth_manager_passwords.json.generated):

    PYTHONPATH=/tmp/sel python3 docs/screenshot_airflow.py \
        --url http://127.0.0.1:8080 --password-file .airflow/simple_auth_manager_passwords.json.generated \
        --out docs/airflow-grid.png

Options: --page (default /dags, the list; /dags/market_spread_stream for that DAG's grid),
--user (admin), --password instead of --password-file, --wait seconds for the page to render.
The PNG is re-encoded as a palette image so it stays well under 400 KB.
"""
from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--user", default="admin")
    secret = parser.add_mutually_exclusive_group()
    secret.add_argument("--password")
    secret.add_argument("--password-file", default=".airflow/simple_auth_manager_passwords.json.generated")
    parser.add_argument("--page", default="/dags")
    parser.add_argument("--out", default=str(Path(__file__).with_name("airflow-grid.png")))
    parser.add_argument("--wait", type=float, default=8.0, help="seconds for the page to render")
    parser.add_argument("--size", default="1400,1000", help="window width,height")
    return parser.parse_args(argv)


def browser(size: str):
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size={size}"):
        options.add_argument(flag)
    if Path("/usr/bin/chromium").exists():
        options.binary_location = "/usr/bin/chromium"
    service = webdriver.ChromeService(executable_path="/usr/bin/chromedriver") if Path("/usr/bin/chromedriver").exists() else None
    return webdriver.Chrome(options=options, service=service)


def log_in(driver, url: str, user: str, password: str, timeout: float = 60) -> None:
    """Airflow 3's SimpleAuthManager form (/auth/login): username, password, "Sign in"; on success
    the page stores the token in the `_token` cookie and goes back to the UI."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{url}/auth/login")
    wait = WebDriverWait(driver, timeout)
    field = wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "input[name=username]")))
    field.send_keys(user)
    driver.find_element(By.CSS_SELECTOR, "input[type=password]").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda d: d.get_cookie("_token") is not None)


def shrink_png(png: bytes) -> bytes:
    """Re-encode as an optimised 256-colour palette PNG (UI screenshots lose nothing visible)."""
    try:
        from PIL import Image
    except ImportError:
        return png
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue() if out.tell() < len(png) else png


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    password = args.password
    if password is None:
        password = json.loads(Path(args.password_file).read_text(encoding="utf-8"))[args.user]
    url = args.url.rstrip("/")
    driver = browser(args.size)
    try:
        log_in(driver, url, args.user, password)
        driver.get(url + args.page)
        time.sleep(args.wait)  # the grid loads its runs with a few API calls after the page itself
        png = shrink_png(driver.get_screenshot_as_png())
    finally:
        driver.quit()
    out = Path(args.out)
    out.write_bytes(png)
    print(f"saved {out} ({len(png) // 1024} KB) of {url + args.page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
