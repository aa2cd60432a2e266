"""Loading the Great Expectations suites of `expectations/` strictly.

GX builds an ExpectationSuite by dropping, with a log line only, every expectation it cannot
construct. A typo in a suite file would then validate less than it claims and still pass. Here each
entry is checked and built on its own, and any problem stops the run with the file and entry named.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from market_spread.errors import MarketSpreadError
from market_spread.runtime.paths import default_expectations

if TYPE_CHECKING:
    from great_expectations.core.expectation_suite import ExpectationSuite

DEFAULT_EXPECTATIONS_DIR = default_expectations()
# Suite name -> the lake table it validates; the file is expectations/<name>.json.
SUITE_TABLES: dict[str, str] = {"alerts": "alerts", "symbol_state": "symbol_state"}

_SUITE_KEYS = {"name", "expectations", "meta", "notes", "id", "suite_parameters"}
_ENTRY_KEYS = {"type", "kwargs", "meta", "notes", "description", "severity", "id"}
# The kwargs that identify an expectation for a reader, in the order they are shown.
_KEY_KWARGS = (
    "column",
    "column_A",
    "column_B",
    "column_list",
    "value_set",
    "value",
    "min_value",
    "max_value",
    "strict_min",
    "strict_max",
    "or_equal",
)


class SuiteFileError(MarketSpreadError, ValueError):
    """A suite file that cannot be used as written; the message names the file."""


@dataclass(frozen=True)
class ExpectationInfo:
    """What the runner needs of one expectation besides GX: its readable name and criticality."""

    name: str
    critical: bool


@dataclass
class LoadedSuite:
    path: Path
    suite: "ExpectationSuite"
    infos: list[ExpectationInfo]  # in file order, one per expectation
    parameters: tuple[str, ...]  # $PARAMETER names the suite uses


def _fmt_value(value: Any) -> str:
    if isinstance(value, dict) and "$PARAMETER" in value:
        return f"${value['$PARAMETER']}"
    if isinstance(value, (list, tuple, set)):
        items = [str(v) for v in value]
        shown = items[:6] + (["..."] if len(items) > 6 else [])
        return "[" + ", ".join(shown) + "]"
    return str(value)


def describe(entry: dict) -> str:
    """A readable, stable name for an expectation: type, key kwargs and row condition."""
    etype = entry.get("type", "?")
    kwargs = entry.get("kwargs") or {}
    if etype == "unexpected_rows_expectation":
        text = entry.get("description") or " ".join(str(kwargs.get("unexpected_rows_query", "")).split())[:80]
        return f"{etype}: {text}"
    parts = [f"{k}={_fmt_value(kwargs[k])}" for k in _KEY_KWARGS if k in kwargs]
    text = f"{etype}({', '.join(parts)})"
    if kwargs.get("row_condition"):
        text += f" where {kwargs['row_condition']}"
    return text


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_suite(path: str | Path, parameters: Iterable[str], expected_name: str | None = None) -> LoadedSuite:
    """Read one suite file and build it with GX, failing loudly on anything GX would drop.

    `parameters` are the suite parameter names the runner supplies; a suite asking for another one
    (a typo such as `$symbol`) is an error here rather than a failed expectation at run time.
    """
    from great_expectations.core.expectation_suite import ExpectationSuite

    path = Path(path)
    where = str(path)
    raw = _read_suite_file(path, expected_name)
    name, entries = raw["name"], raw["expectations"]
    supplied = set(parameters)
    built: list[Any] = []
    infos: list[ExpectationInfo] = []
    used: set[str] = set()
    for index, entry in enumerate(entries, start=1):
        label = f"{where}: expectation #{index}"
        expectation, info, wanted = _build_entry(entry, label, supplied)
        used |= wanted
        built.append(expectation)
        if info.name in {i.name for i in infos}:
            raise SuiteFileError(f"{label} ({entry['type']}) duplicates another expectation: {info.name}")
        infos.append(info)

    try:
        suite = ExpectationSuite(name=name, expectations=built, meta=raw.get("meta"), notes=raw.get("notes"))
    except Exception as exc:  # noqa: BLE001 - GX raises pydantic, GX and plain errors alike: reported as the file's
        raise SuiteFileError(f"{where}: suite is invalid: {_one_line(exc)}") from None
    # The check GX does not do: every entry of the file made it into the suite.
    if len(suite.expectations) != len(entries):
        raise SuiteFileError(f"{where}: GX loaded {len(suite.expectations)} of {len(entries)} expectations")
    return LoadedSuite(path=path, suite=suite, infos=infos, parameters=tuple(sorted(used)))


def _read_suite_file(path: Path, expected_name: str | None) -> dict:
    """The suite file's JSON object, with a name (the expected one, if given) and a non-empty list
    of expectations, and no key this loader does not know."""
    where = str(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuiteFileError(f"{where}: suite file not found") from None
    except json.JSONDecodeError as exc:
        raise SuiteFileError(f"{where}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise SuiteFileError(f"{where}: a suite file holds a JSON object with name and expectations")
    unknown = set(raw) - _SUITE_KEYS
    if unknown:
        raise SuiteFileError(f"{where}: unknown top-level key(s) {sorted(unknown)}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise SuiteFileError(f"{where}: missing suite name")
    if expected_name is not None and name != expected_name:
        raise SuiteFileError(f"{where}: suite name is {name!r}, expected {expected_name!r}")
    entries = raw.get("expectations")
    if not isinstance(entries, list) or not entries:
        raise SuiteFileError(f"{where}: 'expectations' must be a non-empty list")
    return raw


def _build_entry(entry: Any, label: str, supplied: set[str]) -> tuple[Any, ExpectationInfo, set[str]]:
    """One entry of the file built by GX on its own: the expectation, its name and criticality, and
    the suite parameters it uses (all of them `supplied`). `label` names the entry in errors."""
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    if not isinstance(entry, dict):
        raise SuiteFileError(f"{label} is not a JSON object")
    label += f" ({entry.get('type', 'no type')})"
    unknown = set(entry) - _ENTRY_KEYS
    if unknown:
        raise SuiteFileError(f"{label}: unknown key(s) {sorted(unknown)}")
    if not isinstance(entry.get("type"), str) or not isinstance(entry.get("kwargs"), dict):
        raise SuiteFileError(f"{label}: needs a string 'type' and an object 'kwargs'")
    meta = entry.get("meta")
    if not isinstance(meta, dict) or not isinstance(meta.get("critical"), bool):
        raise SuiteFileError(f"{label}: meta.critical must be true or false")
    severity = "critical" if meta["critical"] else "warning"
    if entry.get("severity", severity) != severity:
        raise SuiteFileError(f"{label}: severity {entry['severity']!r} contradicts meta.critical")
    try:
        config = ExpectationConfiguration(
            type=entry["type"],
            kwargs=entry["kwargs"],
            meta=meta,
            notes=entry.get("notes"),
            description=entry.get("description"),
            # GX's own severity mirrors meta.critical in Data Docs; its setter takes the str value too.
            severity=severity,  # type: ignore[arg-type]  # GX's signature says FailureSeverity
        )
        expectation = config.to_domain_obj()
    except Exception as exc:  # noqa: BLE001 - GX raises pydantic, GX and plain errors alike
        raise SuiteFileError(f"{label} is invalid: {_one_line(exc)}") from None
    wanted = set(expectation.suite_parameter_options)
    missing = wanted - supplied
    if missing:
        raise SuiteFileError(f"{label} uses unknown suite parameter(s) {sorted(missing)}; supplied: {sorted(supplied)}")
    return expectation, ExpectationInfo(name=describe(entry), critical=meta["critical"]), wanted


def load_suites(directory: str | Path | None, parameters: Iterable[str]) -> dict[str, LoadedSuite]:
    """Both suites of the product, by name, from `directory` (default: the project's expectations/)."""
    directory = Path(directory) if directory is not None else DEFAULT_EXPECTATIONS_DIR
    params = tuple(parameters)
    return {name: load_suite(directory / f"{name}.json", params, expected_name=name) for name in SUITE_TABLES}
