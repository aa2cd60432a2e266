"""`stream --placement`: the kernel (market_spread.kernel) is the one place a rule lives, whichever
process runs it: a rule changed there changes what both placements answer."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import market_spread
from tests.helpers.cli import market_spread as run_cli
from tests.helpers.lake import rows, stream
from tests.helpers.landing import land
from tests.helpers.records import at, order, quote
from tests.helpers.symbols import symbols_file

# Wide by max_spread (0.06 >= 0.05), not by the ratio (0.06 < 0.05 x mid 100.03): the rule is an OR.
QUOTES = [quote("AAPL", at(0), "100.00", "100.06")]
ORDERS = [order("wide-by-spread", "AAPL", at(1))]


def _changed_kernel(root: Path) -> Path:
    """A copy of the package whose reject rule needs both limits (AND instead of OR)."""
    package = Path(market_spread.__file__).parent
    copy = root / "pkg" / "market_spread"
    shutil.copytree(package, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    columns = copy / "kernel" / "columns.py"
    text = columns.read_text()
    assert text.count("pc.or_(wide, ratio)") == 1
    columns.write_text(text.replace("pc.or_(wide, ratio)", "pc.and_(wide, ratio)"))
    return copy.parent


def test_a_rule_changed_in_the_kernel_changes_both_placements(spark, tmp_path):
    landing = tmp_path / "landing"
    land(landing, "quotes", QUOTES)
    land(landing, "orders", ORDERS)
    symbols = symbols_file(tmp_path, ["AAPL"])
    assert stream(spark, landing, tmp_path / "as-shipped", symbols=["AAPL"]) == 0
    assert [a["order_id"] for a in rows(spark, tmp_path / "as-shipped", "alerts")] == ["wide-by-spread"]

    # The child processes (the driver and, locally, Spark's Python workers) import the changed copy.
    env = dict(os.environ, PYTHONPATH=str(_changed_kernel(tmp_path)), MARKET_SPREAD_METRICS_PORT="0")
    for placement in ("driver", "executors"):
        lake = tmp_path / placement
        args = ["stream", "--landing", str(landing), "--lake", str(lake), "--symbols", str(symbols)]
        done = run_cli(*args, "--available-now", "--placement", placement, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert rows(spark, lake, "alerts") == [], f"{placement}: the changed rule accepts the order"
        (metrics,) = rows(spark, lake, "batch_metrics")
        assert metrics["placement"] == placement and metrics["orders"] == 1
