"""Where the tests run Airflow: only in child processes, each with a private AIRFLOW_HOME, so these
tests never touch ~/airflow nor the project's .airflow, and a metadata DB is created only where
dag.test needs one."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.helpers.paths import DAGS


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
