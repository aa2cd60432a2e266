"""The settings registry: every environment variable the product reads, declared once.

Each `Setting` names the variable, how its text is parsed and checked, its default, what it means
and which commands read it. Code reads a variable only through `value(name)`, so every source is
checked the same way; docs/configuration.md is generated from this registry.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from market_spread.errors import SettingError


@dataclass(frozen=True)
class Setting:
    name: str
    parse: Callable[[str], Any]
    default: Any
    meaning: str
    used_by: tuple[str, ...]


SETTINGS: dict[str, Setting] = {}


def declare(name: str, parse: Callable[[str], Any], default: Any, meaning: str, used_by: tuple[str, ...]) -> Setting:
    if name in SETTINGS:
        raise ValueError(f"setting declared twice: {name}")
    SETTINGS[name] = setting = Setting(name, parse, default, meaning, used_by)
    return setting


def value(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The variable's parsed value, or its default when unset or blank; SettingError when malformed."""
    setting = SETTINGS[name]  # KeyError: the variable is not declared (a test catches this too)
    raw = (os.environ if environ is None else environ).get(name, "")
    if not raw.strip():
        return setting.default
    try:
        return setting.parse(raw.strip())
    except (ValueError, TypeError) as exc:
        raise SettingError(f"environment variable {name}={raw!r}: {exc}") from None
