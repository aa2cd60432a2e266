"""The validate task's return value: figures of its own run only, the batches its alerts suite validated, and
the run's Data Docs page (the failed suite's first). Tables written with delta-rs: no Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from market_spread.orchestration.quality_summary import run_id_from, summarize, validation_page


def _results(lake: Path, rows: list[tuple]) -> None:
    names = [
        "run_id",
        "suite",
        "expectation",
        "critical",
        "success",
        "rows_validated",
        "from_version",
        "to_version",
        "batches",
        "run_passed",
    ]
    write_deltalake(str(lake / "quality_results"), pa.Table.from_pylist([dict(zip(names, r)) for r in rows]))


def _page(docs: Path, suite: str, run_id: str) -> str:
    page = docs / "validations" / suite / run_id / "20260101T000000.000000Z" / f"lake-{suite}.html"
    page.parent.mkdir(parents=True)
    page.write_text("<html></html>")
    return page.relative_to(docs).as_posix()


def test_summary_of_a_failed_run(tmp_path: Path) -> None:
    lake, docs = tmp_path / "lake", tmp_path / "docs"
    _results(
        lake,
        [
            ("old", "alerts", "a", True, True, 10, None, 3, "0-2", True),  # batches 0..2, an earlier run
            ("old", "symbol_state", "s", True, True, 5, None, 1, None, True),
            ("new", "alerts", "a", True, False, 7, 3, 6, "3-5,7", False),  # batches 3..5 and 7 checked
            ("new", "alerts", "b", False, True, 7, 3, 6, "3-5,7", False),
            ("new", "symbol_state", "s", True, True, 5, None, 2, None, False),
        ],
    )
    (docs / "index.html").parent.mkdir(parents=True)
    (docs / "index.html").write_text("<html></html>")
    _page(docs, "symbol_state", "new")
    alerts_page = _page(docs, "alerts", "new")
    lines = ["running: market-spread validate", "validate run new on /lake (max_spread=0.05, ...)", "result: FAILED"]
    assert summarize(lake, docs, lines) == {
        "run_id": "new",
        "passed": False,
        "suites": {
            "alerts": {"expectations_passed": 1, "expectations_failed": 1, "rows": 7},
            "symbol_state": {"expectations_passed": 1, "expectations_failed": 0, "rows": 5},
        },
        "expectations_passed": 2,
        "expectations_failed": 1,
        "batches_checked": 4,
        "data_docs_page": alerts_page,
    }


def test_a_run_that_printed_nothing_links_the_sites_index(tmp_path: Path) -> None:
    assert run_id_from(["Traceback (most recent call last):"]) is None
    summary = summarize(tmp_path / "lake", tmp_path / "docs", ["error: no Delta table alerts"])
    assert summary["run_id"] is None and summary["data_docs_page"] is None and not summary["passed"]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.html").write_text("<html></html>")
    assert validation_page(tmp_path / "docs", None) == "index.html"
    assert validation_page(tmp_path / "docs", "a*[?]") == "index.html"  # no glob from a run id
