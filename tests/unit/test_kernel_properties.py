"""The batch kernel (kernel.steps, over Arrow) against the independent reference engine
(market_spread_tools.reference, event at a time), on random micro-batches: the same alerts, the same
newest quote per symbol, and every line in exactly one place (contract 5.2 to 5.5). In process, no
Spark: the kernel's steps are called as stream.driver_batch calls them."""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from market_spread.domain.rules import Thresholds
from market_spread.kernel import columns, steps
from market_spread.kernel.layout import QUOTE_TYPES
from market_spread.lake.tables import arrow_schema
from market_spread_tools.reference import STREAMS, ReferenceResult, run_reference
from tests.helpers.records import T0, at, order, quote
from tests.helpers.symbols import SYMBOLS


class Q(NamedTuple):
    """A quote line's fields; `t` is its transact_time text."""

    symbol: str
    t: str
    bid: str
    offer: str
    seq: int | None = None


class Order(NamedTuple):
    order_id: str
    symbol: str
    t: str
    seq: int | None = None


Batch = tuple[list[Q], list[Order]]

UNKNOWN = "ZZZZ"  # outside the universe: its lines go to quarantine as unknown_symbol
# Mostly the three quoted symbols. Hypothesis favours the ends of a list, so the rare ones sit in the
# middle: SYMBOLS[3] (in the universe, never quoted: no_market_data for sure) and UNKNOWN.
QUOTED = st.sampled_from([*SYMBOLS[:3], UNKNOWN, *SYMBOLS[:3]])
ORDERED = st.sampled_from([*SYMBOLS[:3], SYMBOLS[3], SYMBOLS[0], UNKNOWN, *SYMBOLS[1:3]])
DEFAULTS = Thresholds()  # 0.05 and 0.05: the threshold edges below are drawn for these
NOW = datetime(2026, 11, 23, 15, tzinfo=T0.tzinfo)
STATE = ["symbol", "bid", "offer", "quote_time", "seq", "should_reject_trades"]  # lake.state.NEWEST_COLUMNS

# Reproducible in CI: the same examples every run, no example database on disk.
PROPERTY = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- the batches -----------------------------------------------------------------------------------


def _spelled(seconds: float, timespec: str) -> str:
    """The instant `seconds` after T0 in another spelling (no or 6 fractional digits): the text
    differs from `at`'s, the time does not."""
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec=timespec).replace("+00:00", "Z")


# Few distinct instants (half seconds), so same-time quotes, ties and orders at a quote's time are common.
TICKS = st.integers(0, 6).map(lambda n: n / 2)
TIMES = st.one_of(
    TICKS.map(at),
    TICKS.map(lambda s: _spelled(s, "microseconds")),
    st.integers(0, 3).map(lambda s: _spelled(s, "seconds")),
)
SEQS = st.none() | st.integers(-1, 3)  # a negative seq still beats none
UNIT = Decimal("0.00000001")  # prices are drawn in units of 1e-8: at most 8 fractional digits
SPREADS = st.sampled_from([0, 4_999_999, 5_000_000, 5_000_001]) | st.integers(-(10**8), 10**8)


def _text(units: int) -> str:
    """A price as plain JSON number text ('1.5', '100', '0.00000001'), never through a float."""
    return format((units * UNIT).normalize(), "f")


@st.composite
def prices(draw: st.DrawFn) -> tuple[str, str]:
    """Bid and offer: any spread, crossed (negative), locked (zero), at max_spread or at ratio * mid."""
    if draw(st.integers(0, 2)) == 0:
        # spread = 2m and bid = 39m give mid = 40m, whose 5% is 2m: exactly at the ratio (or 1e-8
        # under); 2m below 0.05 so that the ratio, not max_spread, decides.
        m = draw(st.integers(1, 2_499_999))
        bid, spread = 39 * m, 2 * m - draw(st.integers(0, 1))
    else:
        bid = draw(st.integers(1, 2 * 10**8) | st.integers(1, 10**18 - 10**8 - 1))  # offer stays < 1e10
        spread = max(draw(SPREADS), 1 - bid)  # the offer stays positive
    return _text(bid), _text(bid + spread)


@st.composite
def quotes(draw: st.DrawFn) -> Q:
    bid, offer = draw(prices())
    return Q(draw(QUOTED), draw(TIMES), bid, offer, draw(SEQS))


@st.composite
def batches(draw: st.DrawFn) -> list[Batch]:
    """One to three micro-batches of quotes and orders; order ids unique across them."""
    drawn = []
    for n in range(draw(st.integers(1, 3))):
        qs = draw(st.lists(quotes(), max_size=12))
        keys = draw(st.lists(st.tuples(ORDERED, TIMES, SEQS), max_size=6))
        drawn.append((qs, [Order(f"O-{n}-{i}", *k) for i, k in enumerate(keys)]))
    return drawn


def _lines(batch: Batch) -> dict[str, list[str]]:
    qs, os = batch
    return {
        "quotes": [quote(q.symbol, q.t, q.bid, q.offer, q.seq) for q in qs],
        "orders": [order(o.order_id, o.symbol, o.t, seq=o.seq) for o in os],
    }


# --- the two engines -------------------------------------------------------------------------------


@dataclass
class KernelRun:
    alerts: list[dict[str, Any]] = field(default_factory=list)
    quotes: list[dict[str, Any]] = field(default_factory=list)
    orders: list[dict[str, Any]] = field(default_factory=list)
    quarantine: list[dict[str, Any]] = field(default_factory=list)
    state: dict[str, dict[str, Any]] = field(default_factory=dict)


LINE_COLUMNS = ("stream", "value", "source_file")


def _table(batch: Batch, n: int) -> pa.Table:
    """A batch's landing lines as the stream hands them to the kernel; orders first, as the order's
    own batch counts in full whatever the order of its files."""
    rows = [(s, line, f"b{n}/{s}/part.jsonl") for s in reversed(STREAMS) for line in _lines(batch)[s]]
    return pa.table({c: pa.array([r[i] for r in rows], pa.string()) for i, c in enumerate(LINE_COLUMNS)})


def run_kernel(drawn: list[Batch], thresholds: Thresholds = DEFAULTS) -> KernelRun:
    """The driver's steps batch after batch: parse, check the orders against this batch's quotes and
    every earlier one (the stream's state and history), merge each batch's newest quotes into the state."""
    run, history = KernelRun(), pa.schema(list(QUOTE_TYPES.items())).empty_table()
    state = history
    for n, batch in enumerate(drawn):
        parsed = steps.parse(_table(batch, n), frozenset(SYMBOLS))
        cols = parsed.columns
        history = pa.concat_tables([history, cols.quotes])
        alerts = steps.check(cols.orders, history, thresholds, n, NOW, arrow_schema("alerts"))
        state = columns.newest(pa.concat_tables([state, columns.newest(cols.quotes)]))
        run.alerts += alerts.to_pylist()
        run.quotes += cols.quotes.to_pylist()
        run.orders += cols.orders.to_pylist()
        run.quarantine += parsed.quarantine.to_pylist()
    rows = steps.newest(state, thresholds, arrow_schema("quotes"), STATE).to_pylist()
    run.state = {r.pop("symbol"): r for r in rows}
    return run


def run_oracle(drawn: list[Batch], folder: Path, thresholds: Thresholds = DEFAULTS) -> ReferenceResult:
    """The reference engine over the same lines, written as landing files (a quotes and an orders
    file per micro-batch)."""
    files: list[list[Path]] = []
    for n, batch in enumerate(drawn):
        files.append([])
        for stream, lines in _lines(batch).items():
            path = folder / f"b{n}" / stream / "part.jsonl"
            path.parent.mkdir(parents=True)
            path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            files[-1].append(path)
    return run_reference(files, SYMBOLS, thresholds.max_spread, thresholds.max_spread_ratio)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("oracle")


def both(drawn: list[Batch], scratch: Path, thresholds: Thresholds = DEFAULTS) -> tuple[KernelRun, ReferenceResult]:
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        return run_kernel(drawn, thresholds), run_oracle(drawn, Path(folder), thresholds)


# --- what is compared ------------------------------------------------------------------------------

ALERT_FIELDS = ("order_id", "reason", "bid", "offer", "quote_time", "order_seq", "quote_seq")


def alerts_of(rows: list[dict[str, Any]]) -> list[tuple]:
    """Alerts as comparable tuples, sorted (their order is no part of the contract)."""
    return sorted((tuple(r[f] for f in ALERT_FIELDS) for r in rows), key=repr)


def state_of(state: dict[str, dict[str, Any]]) -> dict[str, tuple]:
    return {s: tuple(row[c] for c in STATE[1:]) for s, row in state.items()}


def _micros(text: str) -> int:
    return int((datetime.fromisoformat(text) - datetime(1970, 1, 1, tzinfo=T0.tzinfo)) / timedelta(microseconds=1))


def expected_rows(drawn: list[Batch]) -> tuple[Counter, Counter, Counter]:
    """What the lines must become: the valid quotes and orders (their keys), and the raw lines of
    the unknown symbols with their stream."""
    qs = Counter(
        (q.symbol, _micros(q.t), Decimal(q.bid), Decimal(q.offer), q.seq)
        for b in drawn
        for q in b[0]
        if q.symbol in SYMBOLS
    )
    os = Counter((o.order_id, o.symbol, _micros(o.t), o.seq) for b in drawn for o in b[1] if o.symbol in SYMBOLS)
    bad = Counter(
        (s, line) for b in drawn for s, lines in _lines(b).items() for line in lines if f'"{UNKNOWN}"' in line
    )
    return qs, os, bad


# --- the named edge cases --------------------------------------------------------------------------

WIDE, NARROW = ("1", "2"), ("1", "1.01")
EDGE_CASES: dict[str, list[Batch]] = {
    "quote at the order's very time": [
        ([Q("AAPL", at(1), *WIDE), Q("AAPL", at(2), *NARROW)], [Order("same-time", "AAPL", at(1))])
    ],
    "ties in time broken by seq, then bid, then offer": [
        (
            [
                Q("AAPL", at(1), *WIDE, seq=1),
                Q("AAPL", at(1), *NARROW, seq=2),  # the higher seq wins: accepted
                Q("MSFT", at(1), "0.5", "2", seq=1),
                Q("MSFT", at(1), *NARROW, seq=1),  # same seq, the higher bid wins: accepted
                Q("IBM", at(1), *NARROW),
                Q("IBM", at(1), *WIDE),  # same seq and bid, the higher offer wins: wide
            ],
            [Order("seq", "AAPL", at(1)), Order("bid", "MSFT", at(2)), Order("offer", "IBM", at(1))],
        )
    ],
    "crossed quote never rejects": [([Q("AAPL", at(0), "2", "1")], [Order("crossed", "AAPL", at(1))])],
    "locked quote never rejects": [([Q("AAPL", at(0), "1.5", "1.5")], [Order("locked", "AAPL", at(1))])],
    "spread exactly at max_spread": [
        (
            [Q("AAPL", at(0), "100", "100.05"), Q("MSFT", at(0), "100", "100.04999999")],
            [Order("at-max", "AAPL", at(0)), Order("under-max", "MSFT", at(0))],
        )
    ],
    "spread exactly at ratio * mid": [
        (
            [Q("AAPL", at(0), "0.39", "0.41"), Q("MSFT", at(0), "0.39", "0.40999999")],
            [Order("at-ratio", "AAPL", at(0)), Order("under-ratio", "MSFT", at(0))],
        )
    ],
    "order without market data": [
        ([Q("AAPL", at(2), *WIDE)], [Order("before-any", "AAPL", at(1)), Order("never-quoted", "GOOG", at(1))])
    ],
    "late order older than the newest quote, late quote older than the state": [
        ([Q("AAPL", at(1), *NARROW), Q("AAPL", at(3), *WIDE)], []),
        ([Q("AAPL", at(2), *WIDE)], [Order("late", "AAPL", at(1.5)), Order("sees-late-quote", "AAPL", at(2.5))]),
    ],
    "unknown symbol line": [([Q(UNKNOWN, at(0), *WIDE)], [Order("unknown", UNKNOWN, at(0))])],
    "missing seq vs present seq": [
        (
            [Q("AAPL", at(1), *NARROW, seq=-1), Q("AAPL", at(1), "1", "3"), Q("MSFT", at(1), *WIDE, seq=0)],
            [Order("seq-over-none", "AAPL", at(1), seq=5), Order("seq-zero", "MSFT", _spelled(1, "seconds"))],
        )
    ],
}

# What the contract (section 5) says each edge case's orders get: the property then holds the
# reference engine to the kernel, and this holds both to the contract. An order not listed is accepted.
CONTRACT_ALERTS: dict[str, dict[str, str]] = {
    "quote at the order's very time": {"same-time": "wide_spread"},
    "ties in time broken by seq, then bid, then offer": {"offer": "wide_spread"},
    "crossed quote never rejects": {},
    "locked quote never rejects": {},
    "spread exactly at max_spread": {"at-max": "wide_spread"},
    "spread exactly at ratio * mid": {"at-ratio": "wide_spread"},
    "order without market data": {"before-any": "no_market_data", "never-quoted": "no_market_data"},
    "late order older than the newest quote, late quote older than the state": {"sees-late-quote": "wide_spread"},
    "unknown symbol line": {},
    "missing seq vs present seq": {"seq-zero": "wide_spread"},
}


def edge_cases(test):
    """Every named edge case as an explicit example of `test`, run before the random ones."""
    for drawn in EDGE_CASES.values():
        test = example(drawn=drawn)(test)
    return test


# --- the properties --------------------------------------------------------------------------------


def assert_each_line_lands_once(drawn: list[Batch], kernel: KernelRun, oracle: ReferenceResult) -> None:
    """Each line is a valid quote, a valid order or a quarantine row, once (contract 5.5), in both."""
    quotes_, orders_, bad = expected_rows(drawn)
    assert Counter((r["symbol"], r["time"], r["bid"], r["offer"], r["seq"]) for r in kernel.quotes) == quotes_
    assert Counter((r["order_id"], r["symbol"], r["time"], r["seq"]) for r in kernel.orders) == orders_
    assert Counter((r["stream"], r["raw"]) for r in kernel.quarantine) == bad
    assert {r["reason"] for r in kernel.quarantine} <= {"unknown_symbol"}
    assert (oracle.quotes, oracle.orders) == (len(kernel.quotes), len(kernel.orders))
    assert Counter(oracle.quarantined) == Counter((s, raw, "unknown_symbol") for s, raw in bad.elements())


# One run of both engines per example serves the three claims: each claim a test of its own would
# run the engines three times over (the file would no longer be quick on two cores).
@PROPERTY
@edge_cases
@given(drawn=batches())
def test_kernel_gives_the_reference_engines_alerts_and_newest_quotes_and_places_each_line_once(
    drawn: list[Batch], scratch: Path
) -> None:
    kernel, oracle = both(drawn, scratch)
    assert alerts_of(kernel.alerts) == alerts_of(oracle.alerts)
    assert state_of(kernel.state) == state_of(oracle.state)
    assert_each_line_lands_once(drawn, kernel, oracle)


@pytest.mark.parametrize("name", EDGE_CASES)
def test_each_named_edge_case_gives_the_contracts_alerts(name: str, scratch: Path) -> None:
    kernel, oracle = both(EDGE_CASES[name], scratch)
    for alerts in (kernel.alerts, oracle.alerts):
        assert {a["order_id"]: a["reason"] for a in alerts} == CONTRACT_ALERTS[name]


THRESHOLDS = st.builds(
    Thresholds,
    st.sampled_from(["0", "0.00000001", "0.01", "0.05", "1"]).map(Decimal),
    st.sampled_from(["0", "0.001", "0.05", "0.5"]).map(Decimal),
)


@PROPERTY
@given(drawn=batches(), thresholds=THRESHOLDS)
def test_kernel_alerts_and_state_equal_the_reference_engines_under_other_thresholds(
    drawn: list[Batch], thresholds: Thresholds, scratch: Path
) -> None:
    # Zero thresholds reject every positive spread; the rule must still spare crossed and locked quotes.
    kernel, oracle = both(drawn, scratch, thresholds)
    assert alerts_of(kernel.alerts) == alerts_of(oracle.alerts)
    assert state_of(kernel.state) == state_of(oracle.state)
