"""What a validate run found: one outcome per expectation, per suite and for the whole run."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal

from market_spread.lake import tables as lake_mod
from market_spread.quality.results_table import RESULTS_TABLE


@dataclass
class ExpectationOutcome:
    name: str
    critical: bool
    success: bool
    unexpected_count: int | None
    observed: str  # a short human detail: sample unexpected values, observed value or the error


@dataclass
class SuiteOutcome:
    suite: str
    table: str
    from_version: int | None  # alerts: rows appended after this version; None = from the start
    to_version: int | None  # the table version validated (inclusive)
    rows: int
    outcomes: list[ExpectationOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(o.success for o in self.outcomes if o.critical)

    @property
    def failed(self) -> list[ExpectationOutcome]:
        return [o for o in self.outcomes if not o.success]


@dataclass
class Summary:
    """What one validate run found; `passed` is the exit status an orchestrator should act on."""

    run_id: str
    lake: str
    validated_at: dt.datetime
    max_spread: Decimal
    max_spread_ratio: Decimal
    suites: list[SuiteOutcome]
    docs_index: str
    mark_before: int | None
    mark_after: int | None

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.suites)

    @property
    def failed_critical(self) -> list[str]:
        return [o.name for s in self.suites for o in s.outcomes if o.critical and not o.success]

    def text(self) -> str:
        lines = [
            f"validate run {self.run_id} on {self.lake} "
            f"(max_spread={self.max_spread}, max_spread_ratio={self.max_spread_ratio})"
        ]
        for s in self.suites:
            ok = sum(1 for o in s.outcomes if o.success)
            if s.suite == "alerts":
                start = "the start" if s.from_version is None else f"version {s.from_version}"
                scope = f"{s.rows} alert(s) appended after {start} up to version {s.to_version}"
            else:
                scope = f"{s.rows} row(s) at version {s.to_version}"
            status = "PASSED" if s.passed else "FAILED"
            lines.append(
                f"suite {s.suite}: {status}, {ok}/{len(s.outcomes)} expectations passed, "
                f"{len(s.failed)} failed ({scope})"
            )
            for note in s.notes:
                lines.append(f"  note: {note}")
            for o in s.failed:
                level = "CRITICAL" if o.critical else "warning"
                count = "" if o.unexpected_count is None else f", {o.unexpected_count} unexpected"
                detail = f": {o.observed}" if o.observed else ""
                lines.append(f"  {level} {o.name}{count}{detail}")
        mark = "none" if self.mark_after is None else f"version {self.mark_after}"
        lines.append(f"alerts high-water mark: {mark}")
        lines.append(f"quality_results: {lake_mod.table_path(self.lake, RESULTS_TABLE)}")
        lines.append(f"Data Docs: {self.docs_index}")
        if self.passed:
            lines.append("result: PASSED (every critical expectation holds)")
        else:
            lines.append(f"result: FAILED ({len(self.failed_critical)} critical expectation(s) failed)")
        return "\n".join(lines)
