"""Configuration: each setting comes from the Airflow Variable `market_spread_<name>`, else from the
environment variable `MARKET_SPREAD_<NAME>`, else from the default below. Relative paths are taken
from the project root.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

from market_spread.runtime.env import ENV_PREFIX, FALSE_WORDS, TRUE_WORDS
from market_spread.runtime.paths import project_home

VAR_PREFIX = "market_spread_"


def parse_bool(text: str) -> bool:
    """true/false (or yes/no, on/off, 1/0) as the CLI reads switches; anything else is an error."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"not a boolean: {text!r} (use true/false)")


def _positive(convert: Callable[[str], float]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        value = convert(text)
        if not value > 0:
            raise ValueError(f"must be > 0: {text!r}")
        return value

    return parse


def _path(text: str) -> Path:
    path = Path(text).expanduser()
    return path if path.is_absolute() else project_home() / path


def _optional(text: str) -> str | None:
    return text.strip() or None


def _source(text: str) -> str:
    value = text.strip().lower()
    if value not in ("files", "kafka"):
        raise ValueError(f"expected files or kafka, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"must be >= 0: {text!r}")
    return value


@dataclass(frozen=True)
class Settings:
    """Everything the DAGs need; see the module docstring for where each value comes from."""

    lake: Path = field(default_factory=lambda: project_home() / "data" / "lake", metadata={"parse": _path})
    landing: Path = field(default_factory=lambda: project_home() / "data" / "landing", metadata={"parse": _path})
    docs: Path = field(default_factory=lambda: project_home() / "data" / "quality", metadata={"parse": _path})
    symbols: str | None = field(default=None, metadata={"parse": _optional})
    master: str | None = field(default=None, metadata={"parse": _optional})
    max_spread: str | None = field(default=None, metadata={"parse": _optional})
    max_spread_ratio: str | None = field(default=None, metadata={"parse": _optional})
    # The stream
    stream_enabled: bool = field(default=True, metadata={"parse": parse_bool})
    interval: float = field(default=5.0, metadata={"parse": _positive(float)})
    stall_seconds: float = field(default=300.0, metadata={"parse": _positive(float)})
    # Before its first batch a job starts a JVM, recovers and takes the whole backlog: more slack.
    startup_seconds: float = field(default=900.0, metadata={"parse": _positive(float)})
    stop_timeout: float = field(default=180.0, metadata={"parse": _positive(float)})
    # One summary line per this many batches in the task log (per-batch figures: batch_metrics).
    progress_every: int = field(default=20, metadata={"parse": _positive(int)})
    # The demo feed
    feed_enabled: bool = field(default=True, metadata={"parse": parse_bool})
    feed_rate: float = field(default=20.0, metadata={"parse": _positive(float)})
    feed_seconds: float = field(default=50.0, metadata={"parse": _positive(float)})
    feed_tick: float = field(default=5.0, metadata={"parse": _positive(float)})
    # Kafka instead of the landing folder (`make run SOURCE=kafka` sets these for its broker)
    source: str = field(default="files", metadata={"parse": _source})
    bootstrap_servers: str | None = field(default=None, metadata={"parse": _optional})
    quotes_topic: str | None = field(default=None, metadata={"parse": _optional})
    orders_topic: str | None = field(default=None, metadata={"parse": _optional})
    # Maintenance
    retain_hours: int = field(default=168, metadata={"parse": _positive(int)})
    maintenance_window: bool = field(default=True, metadata={"parse": parse_bool})
    maintenance_min_files: int = field(default=32, metadata={"parse": _non_negative_int})
    # Quote history kept by maintain, in days; 0 keeps everything.
    quote_retention_days: int = field(default=0, metadata={"parse": _non_negative_int})


def resolve_settings(lookup: Callable[[str], str | None] | None = None) -> Settings:
    """Settings from `lookup(variable_name)` (Airflow Variables by default), the environment, defaults.

    A malformed value raises ValueError naming where it came from: a bad setting should fail the
    task loudly rather than run the job with a value nobody chose.
    """
    lookup = lookup or airflow_variable
    values: dict[str, Any] = {}
    for f in fields(Settings):
        var_name, env_name = VAR_PREFIX + f.name, ENV_PREFIX + f.name.upper()
        raw, source = lookup(var_name), f"Variable {var_name}"
        if raw is None or str(raw).strip() == "":
            raw, source = os.environ.get(env_name), f"environment {env_name}"
        if raw is None or str(raw).strip() == "":
            continue
        try:
            values[f.name] = f.metadata["parse"](str(raw))
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None
    return Settings(**values)


def in_airflow_task() -> bool:
    """True inside a running Airflow task (where Variables can be asked for)."""
    runner = sys.modules.get("airflow.sdk.execution_time.task_runner")
    return runner is not None and getattr(runner, "SUPERVISOR_COMMS", None) is not None


def airflow_variable(name: str) -> str | None:
    """An Airflow Variable's value; None when unset or outside a task (CLI, tests).

    Inside a task an API error propagates: silently falling back to defaults could point the job
    at the wrong lake.
    """
    if not in_airflow_task():
        return None
    from airflow.sdk import Variable

    value = Variable.get(name, default=None)
    return None if value is None else str(value)

