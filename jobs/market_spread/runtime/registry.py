"""The settings registry's machinery: `Setting`, `declare`, `value` and the parsers.

The product's declarations are in runtime/settings.py, which re-exports all of this: import
`market_spread.runtime.settings`, so that every declaration is loaded before a value is read.
Standard library only: the DAG files import it, and parsing a DAG must not load Spark.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from market_spread.errors import SettingError
from market_spread.runtime.env import ENV_PREFIX, FALSE_WORDS, TRUE_WORDS  # noqa: F401 - re-exported by settings

AIRFLOW_PREFIX = "market_spread_"  # an orchestration setting's Airflow Variable: market_spread_<name>

# Who reads a setting (the `used_by` words): a command's name, or one of these groups.
SPARK = "every Spark command (stream, validate, sql, maintain, bench)"
CLUSTER = "every Spark command, on a non-local master"
AIRFLOW = "the Airflow DAGs"
SPARK_COMMANDS = frozenset({"stream", "validate", "sql", "maintain", "bench"})


@dataclass(frozen=True)
class Setting:
    name: str
    parse: Callable[[str], Any]
    default: Any
    meaning: str
    used_by: tuple[str, ...]
    # The default as the docs show it, when `default` alone would not say it (a computed path).
    shown_default: str | None = None
    # Orchestration settings: the Airflow Variable read before the environment.
    airflow_variable: str | None = None
    # Passed on to the jobs the DAGs start (orchestration.jobs.child_env); other variables are not.
    to_jobs: bool = False
    # The module that declared it (the product's runtime.settings, or the tools' own).
    origin: str = ""

    @property
    def kind(self) -> str:
        """The values it accepts, in words (the parser's `kind`)."""
        return getattr(self.parse, "kind", "text")

    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if self.default is None:
            return "(none)"
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        return str(self.default)


SETTINGS: dict[str, Setting] = {}


def declare(
    name: str,
    parse: Callable[[str], Any],
    default: Any,
    meaning: str,
    used_by: tuple[str, ...],
    *,
    shown_default: str | None = None,
    airflow_variable: str | None = None,
    to_jobs: bool = False,
) -> Setting:
    """Add a variable to the registry: how its text is parsed (a function raising ValueError with
    the reason; the `kind` decorator says what it accepts, for the docs), its default when unset or blank, what
    it means and who reads it (command names or SPARK, CLUSTER, AIRFLOW)."""
    if name in SETTINGS:
        raise ValueError(f"setting declared twice: {name}")
    origin = sys._getframe(1).f_globals.get("__name__", "")  # the product's registry, or the tools'
    SETTINGS[name] = declared = Setting(
        name, parse, default, meaning, tuple(used_by), shown_default, airflow_variable, to_jobs, origin
    )
    return declared


def setting(name: str) -> Setting:
    """The declaration of `name`; KeyError names a variable nobody declared."""
    try:
        return SETTINGS[name]
    except KeyError:
        raise KeyError(f"{name} is not declared in the settings registry (runtime/settings.py)") from None


def parse_text(name: str, raw: str, source: str | None = None) -> Any:
    """`raw` (from the environment, or from `source` such as an Airflow Variable) parsed as `name`
    declares; its default when blank. SettingError names the source and the accepted values."""
    declared = setting(name)
    if raw is None or not str(raw).strip():
        return declared.default
    try:
        return declared.parse(str(raw).strip())
    except (ValueError, TypeError) as exc:
        raise SettingError(f"{source or 'environment variable ' + name}={raw!r}: {exc}") from None


def value(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The variable's parsed value, or its default when unset or blank; SettingError when malformed
    (KeyError when `name` is not declared)."""
    return parse_text(name, (os.environ if environ is None else environ).get(name, ""))


def check_for(command: str, environ: Mapping[str, str] | None = None) -> None:
    """Parse every variable `command` reads (SettingError on the first malformed one), so a bad value
    stops the command before it starts work, not in the middle of a micro-batch."""
    groups = {command} | ({SPARK, CLUSTER} if command in SPARK_COMMANDS else set())
    for name, declared in SETTINGS.items():
        if groups.intersection(declared.used_by):
            value(name, environ)


# --------------------------------------------------------------------------------------------
# Parsers: `text -> value`, raising ValueError with the reason; `kind` says what they accept.


def kind(description: str) -> Callable[[Callable[[str], Any]], Callable[[str], Any]]:
    """Decorate a parser with what it accepts, in words (the docs' "Accepts" column)."""

    def mark(parse: Callable[[str], Any]) -> Callable[[str], Any]:
        parse.kind = description  # type: ignore[attr-defined]
        return parse

    return mark


@kind("text")
def text(raw: str) -> str:
    return raw


@kind("a path")
def path(raw: str) -> Path:
    return Path(raw).expanduser()


@kind("a folder, or an S3 URI (s3://bucket/prefix)")
def place(raw: str) -> "Path | str":
    """A local folder as a Path; an S3 URI kept as text (runtime.storage.location reads both)."""
    if raw.lower().startswith(("s3://", "s3a://")):
        if not raw.split("://", 1)[1].split("/", 1)[0]:
            raise ValueError("an S3 URI names a bucket: s3://bucket/prefix")
        return raw
    return path(raw)


@kind("true or false (also yes/no, on/off, 1/0)")
def boolean(raw: str) -> bool:
    """true/false (or yes/no, on/off, 1/0) as the CLI reads switches; anything else is an error."""
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"not a boolean: {raw!r} (use true/false or on/off)")


def whole(minimum: int = 0, of: str = "", maximum: int | None = None) -> Callable[[str], int]:
    """A whole number at least `minimum` and at most `maximum` (`of`: what it counts, for the message)."""
    what = f"a whole number{' of ' + of if of else ''} >= {minimum}" + (f" and <= {maximum}" if maximum else "")

    @kind(what)
    def parse(raw: str) -> int:
        if not re.fullmatch(r"[+-]?\d+", raw.strip()) or not minimum <= int(raw) <= (maximum or int(raw)):
            raise ValueError(f"must be {what}, not {raw!r}")
        return int(raw)

    return parse


@kind("a number > 0")
def positive_number(raw: str) -> float:
    number = float(raw)
    if not number > 0:
        raise ValueError(f"must be > 0: {raw!r}")
    return number


def non_negative_number(raw: str) -> float:
    number = float(raw)
    if not number >= 0:
        raise ValueError(f"must be >= 0: {raw!r}")
    return number


def one_of(*choices: str) -> Callable[[str], str]:
    """One of `choices`, in any case; the value is lower case."""
    listed = f"{', '.join(choices[:-1])} or {choices[-1]}"

    @kind(" | ".join(choices))
    def parse(raw: str) -> str:
        word = raw.strip().lower()
        if word not in choices:
            raise ValueError(f"must be {listed}, not {word!r}")
        return word

    return parse


@kind("a JVM size: a whole number with an optional unit (k, m, g, t)")
def size(raw: str) -> str:
    if not re.fullmatch(r"\d+([kmgtp]b?|b)?", raw.strip().lower()):
        raise ValueError(f"not a size such as 512m or 2g: {raw!r}")
    return raw.strip()


@kind("a port number (0: any free port)")
def port(raw: str) -> int:
    if not raw.strip().isdigit() or int(raw) > 65535:
        raise ValueError(f"not a port number: {raw!r}")
    return int(raw)


@kind("a port number (0: off)")
def port_or_off(raw: str) -> int:
    return port(raw)


@kind("ALL | DEBUG | INFO | WARN | ERROR | FATAL | OFF | TRACE")
def log_level(raw: str) -> str:
    level = raw.strip().upper()
    if level not in ("ALL", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF", "TRACE"):
        raise ValueError(f"not a log level (WARN, INFO, ERROR...): {raw!r}")
    return level


@kind("a path, or off (also false, 0, none)")
def archive_or_off(raw: str) -> str:
    return "off" if raw.strip().lower() in ("off", "false", "0", "none") else raw
