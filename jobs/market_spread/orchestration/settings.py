"""Configuration of the DAGs: each setting comes from the Airflow Variable `market_spread_<name>`, else
from the environment variable `MARKET_SPREAD_<NAME>`, else from its default; all three are declared
in the settings registry (runtime/settings.py). Relative paths are taken from the project root.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from market_spread.runtime import settings as registry
from market_spread.runtime.paths import project_home
from market_spread.runtime.settings import AIRFLOW_PREFIX as VAR_PREFIX
from market_spread.runtime.settings import ENV_PREFIX
from market_spread.runtime.settings import boolean as parse_bool
from market_spread.runtime.storage import Location, is_s3, location

__all__ = ["Settings", "VAR_PREFIX", "airflow_variable", "in_airflow_task", "parse_bool", "resolve_settings"]


def _in_project(value: Any) -> Any:
    """A relative path is taken from the project home; an S3 URI becomes its S3Path; other values
    stay as they are."""
    if isinstance(value, Path) and not value.is_absolute():
        return project_home() / value
    if isinstance(value, str) and is_s3(value):
        return location(value)
    return value


def _declared(name: str) -> Any:
    """The field of the orchestration setting `name`, with the registry's default."""
    default = registry.setting(ENV_PREFIX + name.upper()).default
    if isinstance(default, Path):
        return field(default_factory=lambda: _in_project(default))
    return field(default=default)


@dataclass(frozen=True)
class Settings:
    """Everything the DAGs need; each field is declared in runtime/settings.py (type, default, meaning)."""

    lake: Location = _declared("lake")  # a local folder or an S3Path (runtime.storage)
    landing: Location = _declared("landing")
    docs: Location = _declared("docs")
    symbols: str | None = _declared("symbols")
    master: str | None = _declared("master")
    max_spread: str | None = _declared("max_spread")
    max_spread_ratio: str | None = _declared("max_spread_ratio")
    # The stream
    stream_enabled: bool = _declared("stream_enabled")
    interval: float = _declared("interval")
    stall_seconds: float = _declared("stall_seconds")
    # Before its first batch a job starts a JVM, recovers and takes the whole backlog: more slack.
    startup_seconds: float = _declared("startup_seconds")
    stop_timeout: float = _declared("stop_timeout")
    # One summary line per this many batches in the task log (per-batch figures: batch_metrics).
    progress_every: int = _declared("progress_every")
    # The demo feed
    feed_enabled: bool = _declared("feed_enabled")
    feed_rate: float = _declared("feed_rate")
    feed_seconds: float = _declared("feed_seconds")
    feed_tick: float = _declared("feed_tick")
    # Kafka instead of the landing folder (`make run SOURCE=kafka` sets these for its broker)
    source: str = _declared("source")
    bootstrap_servers: str | None = _declared("bootstrap_servers")
    quotes_topic: str | None = _declared("quotes_topic")
    orders_topic: str | None = _declared("orders_topic")
    alerts_topic: str | None = _declared("alerts_topic")  # `stream --alerts-topic` (with bootstrap_servers)
    # Maintenance
    retain_hours: int = _declared("retain_hours")
    maintenance_window: bool = _declared("maintenance_window")
    maintenance_min_files: int = _declared("maintenance_min_files")
    # Quote history kept by maintain, in days; 0 keeps everything.
    quote_retention_days: int = _declared("quote_retention_days")


def resolve_settings(lookup: Callable[[str], str | None] | None = None) -> Settings:
    """Settings from `lookup(variable_name)` (Airflow Variables by default), the environment, defaults.

    Both sources are checked by the registry's parser; a malformed value raises SettingError naming
    where it came from: a bad setting should fail the task loudly rather than run the job with a
    value nobody chose.
    """
    lookup = lookup or airflow_variable
    values: dict[str, Any] = {}
    for f in fields(Settings):
        env_name = ENV_PREFIX + f.name.upper()
        var_name = registry.setting(env_name).airflow_variable
        assert var_name is not None  # every setting of the DAGs has its Variable
        raw = lookup(var_name)
        if raw is not None and str(raw).strip():
            values[f.name] = _in_project(registry.parse_text(env_name, str(raw), f"Variable {var_name}"))
        else:
            values[f.name] = _in_project(registry.value(env_name))
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
