"""Cross-check: the stream and the event-at-a-time reference give identical alerts and state, on
replayed Wallaroo data (the default placement: the kernel in the driver process) and on generated
data, over several seeds and ways of cutting files and runs, each seed on the placement it names."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path

import pytest

from market_spread.cli.main import main as cli_main
from market_spread.domain.symbols import load_symbols
from market_spread.feeds.generate import Generator, write_backlog
from market_spread_tools import reference
from tests.helpers.lake import read_table, rows, stream
from tests.helpers.landing import land_file
from tests.helpers.paths import ROOT
from tests.helpers.symbols import SYMBOLS

ALERT_KEYS = (
    "order_id",
    "account",
    "symbol",
    "side",
    "qty",
    "price",
    "order_time",
    "reason",
    "bid",
    "offer",
    "quote_time",
    "order_seq",
    "quote_seq",
)


def _naive(value):
    return value.replace(tzinfo=None) if hasattr(value, "tzinfo") and value is not None and value.tzinfo else value


def _norm(alert: dict) -> tuple:
    return tuple(_naive(alert[k]) if not isinstance(alert[k], Decimal) else alert[k].normalize() for k in ALERT_KEYS)


def _spark_alerts(spark, lake: Path) -> list[tuple]:
    return sorted(_norm(a) for a in rows(spark, lake, "alerts"))


def _reference_alerts(result) -> list[tuple]:
    return sorted(_norm(a) for a in result.alerts)


def _spark_state(spark, lake: Path) -> dict:
    return {
        r["symbol"]: (r["bid"], r["offer"], r["quote_time"], r["seq"], r["should_reject_trades"])
        for r in rows(spark, lake, "symbol_state")
    }


def _reference_state(result) -> dict:
    return {
        s: (v["bid"], v["offer"], _naive(v["quote_time"]), v["seq"], v["should_reject_trades"])
        for s, v in result.state.items()
    }


def _replay(landing: Path, nbbo: list[Path], orders: list[Path]) -> None:
    assert (
        cli_main(["replay", "--landing", str(landing), "--nbbo", *map(str, nbbo), "--orders", *map(str, orders)]) == 0
    )


@pytest.mark.parametrize(
    "nbbo, trades, reasons",
    [
        # The 1000-record demo quotes no wide market: its alerts are orders of symbols without quotes.
        (
            "history/demos/marketspread/1000nbbo-fixish.msg",
            "history/demos/marketspread/1000trades-fixish.msg",
            {"no_market_data"},
        ),
        ("converted/small-nbbo-fixish.msg", "converted/small-trades-fixish.msg", {"wide_spread"}),
    ],
)
def test_replayed_wallaroo_demo_matches_the_reference(spark, tmp_path, wallaroo_dir, nbbo, trades, reasons):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    _replay(landing, [wallaroo_dir / nbbo], [wallaroo_dir / trades])
    symbols = load_symbols(wallaroo_dir / "examples" / "python" / "market_spread" / "symbols.txt")
    symbols = sorted(set(symbols) | set(load_symbols(ROOT / "include" / "symbols.txt")))
    assert stream(spark, landing, lake, symbols=symbols) == 0
    expected = reference.run_reference_landing(landing, symbols)
    got = _spark_alerts(spark, lake)
    assert got == _reference_alerts(expected)
    assert got and {a[ALERT_KEYS.index("reason")] for a in got} == reasons
    assert _spark_state(spark, lake) == _reference_state(expected)
    quarantined = read_table(spark, lake, "quarantine").count()
    assert quarantined == len(expected.quarantined)


@pytest.mark.parametrize(
    "seed, profile, files, placement",
    [(1, "default", 1, "driver"), (2, "wallaroo", 5, "executors"), (3, "default", 9, "driver")],
)
def test_generated_data_matches_the_reference_over_cuttings_and_runs(spark, tmp_path, seed, profile, files, placement):
    source = tmp_path / "source"
    gen = Generator(SYMBOLS, seed=seed, wide_share=0.4, profile=profile)
    write_backlog(source, gen, 800, 800, files, f"x{seed}")
    # Some late orders: a file of orders from before the current state, landed last.
    late_gen = Generator(SYMBOLS, seed=seed + 100, wide_share=0.4, profile=profile)
    write_backlog(source, late_gen, 0, 100, 1, "z-late")
    (source / "quotes" / "z-late-00000.jsonl").unlink()

    pairs = sorted((source / "orders").glob("*.jsonl"))
    rng = random.Random(seed)
    cut_points = sorted(rng.sample(range(1, len(pairs)), k=min(2, len(pairs) - 1))) if len(pairs) > 1 else []
    runs = [pairs[a:b] for a, b in zip([0] + cut_points, cut_points + [len(pairs)])]

    landing, lake = tmp_path / "landing", tmp_path / "lake"
    batches = []
    for run_files in runs:
        batch = []
        for orders_file in run_files:
            for feed, src in (("quotes", source / "quotes" / orders_file.name), ("orders", orders_file)):
                if src.exists():
                    batch.append(land_file(src, landing, feed))
        batches.append(batch)
        assert stream(spark, landing, lake, placement=placement) == 0
    placed = {r.placement for r in read_table(spark, lake, "batch_metrics").select("placement").collect()}
    assert placed == {placement}, f"seed {seed} ran on {placed}"
    expected = reference.run_reference(batches, SYMBOLS)
    got = _spark_alerts(spark, lake)
    assert got and got == _reference_alerts(expected)
    assert _spark_state(spark, lake) == _reference_state(expected)
