"""Process helpers shared by the stream and the Airflow side (standard library only: cheap to import)."""
from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            # rsplit: the process name in parentheses may itself contain ") ".
            return stat.read().rsplit(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True
