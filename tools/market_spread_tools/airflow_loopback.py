"""Keep `airflow standalone`'s components off the network (issue 44).

The scheduler and the triggerer each start a log server (ports 8793 and 8794) that binds every
interface, with no setting to change that (airflow/utils/serve_logs/core.py in Airflow 3.3). Only
`--skip-serve-logs` turns it off, and standalone starts its components as plain `airflow scheduler`
and `airflow triggerer` found on PATH. So `market-spread-run` puts first on standalone's PATH a small
`airflow` that adds the flag to those two commands and runs the real one for everything else.

Nothing is lost: with LocalExecutor on one machine the UI and API read task logs from the local
files (FileTaskHandler.read); for a running task they also ask the log server and, when none
answers, only note it in the log's sources.
"""

from __future__ import annotations

import shlex
from pathlib import Path

SCRIPT = """#!/bin/sh
# Written by market-spread-run (market_spread_tools/airflow_loopback.py): Airflow's log servers
# listen on every interface; with LocalExecutor on one machine nothing needs them.
case "$1" in
  scheduler|triggerer) exec {real} "$@" --skip-serve-logs ;;
esac
exec {real} "$@"
"""


def shim_dir(home: Path, real: Path) -> Path:
    """A folder under AIRFLOW_HOME holding the `airflow` wrapper for `real`, to put first on PATH."""
    folder = home / "bin"
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "airflow"
    text = SCRIPT.format(real=shlex.quote(str(real)))
    if not script.is_file() or script.read_text() != text:
        script.write_text(text)
    script.chmod(0o755)
    return folder
