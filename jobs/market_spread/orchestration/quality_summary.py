"""What the validate task returns and shows: a small summary of one `market-spread validate` run
(suites, expectations passed and failed, batches checked) and the run's Data Docs page, read from
the command's output and the quality_results table (delta-rs, no Spark)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from market_spread.runtime.storage import Location

URL_PREFIX = "/data-quality"  # where the UI plugin's app is mounted (ui_plugin)
PAGE_XCOM_KEY = "data_docs_page"  # the run's page relative to the docs folder, for the "Data Docs" link
RUN_LINE = re.compile(r"^validate run (?P<run_id>\S+) on ")
RESULTS_TABLE = "quality_results"


def run_id_from(lines: Iterable[str]) -> str | None:
    """The run id `validate` prints on its summary's first line, or None (it died before)."""
    for line in lines:
        found = RUN_LINE.match(line.strip())
        if found:
            return found["run_id"]
    return None


def _results(lake: Location, run_id: str | None) -> list[dict[str, Any]]:
    """All quality_results rows (a small table), or [] without one."""
    path = lake / RESULTS_TABLE
    if run_id is None or not any((path / "_delta_log").glob("[0-9]*.json")):
        return []
    from market_spread.runtime.storage import open_delta, read_rows

    return read_rows(open_delta(path)).to_pylist()


def _batches_checked(run: list[dict[str, Any]]) -> int:
    """How many batches this run's alerts suite validated: its `batches` ranges ("0-2,5")."""
    alerts = next((r for r in run if r["suite"] == "alerts"), None)
    ranges = (part.partition("-") for part in ((alerts or {}).get("batches") or "").split(",") if part)
    return sum(int(hi or lo) - int(lo) + 1 for lo, _, hi in ranges)


def validation_page(docs: Location, run_id: str | None, prefer: str | None = None) -> str | None:
    """The run's validation page relative to `docs` (the `prefer` suite's when there), else the
    site's index, else None. GX writes validations/<suite>/<run name>/<run time>/<batch>.html.
    On S3 only the index is looked for (an S3Path globs one level: a pattern with `/` matches nothing)."""
    if run_id and isinstance(docs, Path):
        pages = sorted(docs.glob(f"validations/*/{glob_escape(run_id)}/*/*.html"))
        pages.sort(key=lambda p: p.relative_to(docs).parts[1] != prefer)
        if pages:
            return pages[0].relative_to(docs).as_posix()
    return "index.html" if (docs / "index.html").is_file() else None


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def summarize(lake: Location, docs: Location, lines: list[str]) -> dict[str, Any]:
    """The task's return value: run id, passed, per-suite figures, totals, batches, Data Docs page."""
    run_id = run_id_from(lines)
    rows = _results(lake, run_id)
    run = [r for r in rows if r["run_id"] == run_id]
    suites: dict[str, dict[str, Any]] = {}
    for r in run:
        suite = suites.setdefault(r["suite"], {"expectations_passed": 0, "expectations_failed": 0, "rows": 0})
        suite["expectations_passed" if r["success"] else "expectations_failed"] += 1
        suite["rows"] = int(r["rows_validated"] or 0)
    failed_suite = next((r["suite"] for r in run if not r["success"] and r["critical"]), None)
    return {
        "run_id": run_id,
        "passed": bool(run) and all(r["run_passed"] for r in run),
        "suites": suites,
        "expectations_passed": sum(s["expectations_passed"] for s in suites.values()),
        "expectations_failed": sum(s["expectations_failed"] for s in suites.values()),
        "batches_checked": _batches_checked(run),
        "data_docs_page": validation_page(docs, run_id, failed_suite or "alerts"),
    }
