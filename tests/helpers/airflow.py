"""Where the tests run Airflow: only in child processes, each with a private AIRFLOW_HOME, so these
tests never touch ~/airflow nor the project's .airflow, and a metadata DB is created only where
dag.test needs one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.paths import DAGS, ROOT


def airflow_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of an Airflow child process on `home`, parsing this checkout's dags/."""
    env = dict(os.environ)
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "PATH": str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


def wait_for(what: str, predicate, timeout: float, proc: subprocess.Popen, log: Path, every: float = 3.0):
    """`predicate()`'s first true value, polled every `every` s; the test fails, with the tail of
    `log`, when `proc` (a `market-spread-run`) exits first or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc.poll() is not None:
            pytest.fail(f"market-spread-run exited ({proc.returncode}) waiting for {what}:\n{log.read_text()[-3000:]}")
        time.sleep(every)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}:\n{log.read_text()[-3000:]}")


def start_run(env: dict[str, str], log: Path) -> subprocess.Popen:
    """`market-spread-run` (airflow standalone and the product) in a session of its own, its output
    in `log`: stop it with tests/helpers/processes.stop."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(Path(sys.executable).parent / "market-spread-run")],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(ROOT),
            start_new_session=True,
        )
