"""The Airflow REST API as `make run` uses it: the admin login, health, tokens, the lake jobs' pool
and unpausing our DAGs. Standard library only (urllib), against 127.0.0.1:<port>."""

from __future__ import annotations

import json
import os
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from market_spread.orchestration.tasks import LAKE_JOBS_POOL, LAKE_JOBS_POOL_DESCRIPTION

USER = "admin"
PASSWORD_FILE = "simple_auth_manager_passwords.json.generated"  # Airflow 3.3's default name


def ensure_password(home: Path) -> str:
    """The admin password: generated once into AIRFLOW_HOME, mode 0600, reused afterwards."""
    home.mkdir(parents=True, exist_ok=True)
    os.chmod(home, 0o700)
    path = home / PASSWORD_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        os.chmod(path, 0o600)
        try:
            passwords = json.loads(path.read_text(encoding="utf-8") or "{}")
        except ValueError:
            passwords = {}
        if USER in passwords:
            return str(passwords[USER])
        passwords[USER] = secrets.token_urlsafe(18)
        path.write_text(json.dumps(passwords) + "\n", encoding="utf-8")
        return passwords[USER]
    password = secrets.token_urlsafe(18)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps({USER: password}) + "\n")
    return password


# Methods whose repetition changes nothing: asked again, with a longer wait, when the API server
# (busy on a 2-core machine) does not answer in time.
IDEMPOTENT = frozenset({"GET", "PATCH", "PUT"})
RETRY_TIMEOUT_FACTORS = (1, 2, 3)


def http_json(method: str, url: str, body: dict | None = None, token: str | None = None, timeout: float = 10) -> dict:
    data = None if body is None else json.dumps(body).encode()
    factors = RETRY_TIMEOUT_FACTORS if method in IDEMPOTENT else (1,)
    for attempt, factor in enumerate(factors, start=1):
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout * factor) as response:
                raw = response.read()
            return json.loads(raw) if raw else {}
        except (TimeoutError, urllib.error.URLError) as exc:
            timed_out = isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError)
            if not timed_out or attempt == len(factors):
                raise
    raise AssertionError("unreachable")  # the loop returns or raises


def healthy(port: int) -> bool:
    """Every Airflow component reports healthy through the API."""
    try:
        health = http_json("GET", f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=3)
    except (OSError, ValueError, urllib.error.URLError):
        return False
    parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
    return all((health.get(p) or {}).get("status") == "healthy" for p in parts)


def api_token(port: int, password: str, user: str = USER) -> str:
    return http_json("POST", f"http://127.0.0.1:{port}/auth/token", {"username": user, "password": password})[
        "access_token"
    ]


def set_paused(port: int, token: str, dag_id: str, paused: bool) -> None:
    http_json("PATCH", f"http://127.0.0.1:{port}/api/v2/dags/{dag_id}", {"is_paused": paused}, token)


def our_dag_ids(dags: Path) -> list[str]:
    # Each file is named after its DAG (checked by tests/orchestration/test_dag_integrity.py).
    return sorted(p.stem for p in dags.glob("market_spread_*.py"))


def ensure_pool(port: int, token: str) -> None:
    """The pool that serialises the lake jobs (validate, maintain): 1 slot. Tasks of a pool that does
    not exist are never queued, so it is created before the DAGs are unpaused, then read back."""
    body = {"name": LAKE_JOBS_POOL, "slots": 1, "description": LAKE_JOBS_POOL_DESCRIPTION, "include_deferred": False}
    url = f"http://127.0.0.1:{port}/api/v2/pools"
    try:
        http_json("POST", url, body, token)
    except urllib.error.HTTPError as exc:
        if exc.code != 409:  # 409: it exists (an earlier run); make sure it still has one slot
            raise
        http_json("PATCH", f"{url}/{LAKE_JOBS_POOL}", body, token)
    slots = http_json("GET", f"{url}/{LAKE_JOBS_POOL}", token=token).get("slots")
    if slots != 1:
        raise ValueError(f"the {LAKE_JOBS_POOL} pool reads back with {slots} slot(s), not 1")


class SetupError(RuntimeError):
    """What the DAGs need could not be set up in Airflow: the run cannot work and must stop."""


# Seconds between attempts: a busy machine's API may answer 500 for a while after it reports healthy.
RETRY_DELAYS = (1.0, 2.0, 4.0, 8.0, 15.0)


def retried(
    action: Callable[[], None],
    what: str,
    delays: Sequence[float] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    out: Callable[[str], None] = print,
) -> None:
    """`action` until it succeeds, waiting `delays` (None: RETRY_DELAYS) between attempts;
    SetupError naming `what` and the last error when every attempt failed."""
    delays = RETRY_DELAYS if delays is None else delays
    last: Exception | None = None
    for attempt, delay in enumerate((*delays, None), start=1):
        try:
            action()
            return
        except (OSError, urllib.error.URLError, KeyError, ValueError) as exc:
            last = exc
        if delay is None:
            break
        out(f"could not {what} (attempt {attempt}: {last}); retrying in {delay:g}s")
        sleep(delay)
    raise SetupError(f"could not {what} after {len(delays) + 1} attempts: {last}")


def unpause_ours(port: int, token: str, dags: Path) -> list[str]:
    """Unpause our DAGs known to Airflow (new ones are created unpaused anyway)."""
    done = []
    for dag_id in our_dag_ids(dags):
        try:
            set_paused(port, token, dag_id, False)
            done.append(dag_id)
        except urllib.error.HTTPError as exc:
            if exc.code != 404:  # 404: not parsed yet; it will be created unpaused
                raise
    return done
