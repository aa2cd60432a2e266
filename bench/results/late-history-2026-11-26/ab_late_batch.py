"""A/B on a copy of the growth run's lake: one 2,000-event batch with late orders through the
product's process_batch, late history read the old way (whole lookback days) or the new way."""
import importlib.util, os, shutil, statistics, sys, time
sys.path[:0] = ["/work/main/jobs", "/work/main/tools"]
from deltalake import DeltaTable
from market_spread.domain.rules import Thresholds
from market_spread.runtime.spark import build_session
from market_spread.stream import batch as pipeline, check as check_mod
from market_spread.lake import delta_rs
from market_spread.lake.state_mirror import StateMirror
from market_spread_tools.bench import _symbols
from decimal import Decimal

src, lake = "/tmp/exp/g10k/work/growth/lake", "/tmp/exp/lateab/lake"
shutil.rmtree(lake, ignore_errors=True)
def tolerant(a, b):
    try:
        shutil.copy2(a, b)
    except FileNotFoundError:  # removed by the live run's log clean-up meanwhile
        pass
for t in ("quotes", "symbol_state", "alerts", "batch_metrics", "quarantine"):
    if not os.path.isdir(f"{src}/{t}"): continue
    shutil.copytree(f"{src}/{t}/_delta_log", f"{lake}/{t}/_delta_log", copy_function=tolerant)  # the log first: every file it names exists
    shutil.copytree(f"{src}/{t}", f"{lake}/{t}", ignore=shutil.ignore_patterns("_delta_log"), dirs_exist_ok=True, copy_function=tolerant)
last = max(DeltaTable(f"{lake}/batch_metrics").to_pyarrow_table(columns=["batch_id"])["batch_id"].to_pylist())
print("copied lake at batch", last, flush=True)
spec = importlib.util.spec_from_file_location("old_state", "/tmp/exp/lateab/old_state.py")
old = importlib.util.module_from_spec(spec); spec.loader.exec_module(old)
new_fn = check_mod.late_history_rows
spark = build_session("late-ab", shuffle_partitions=4)
settings = pipeline.BatchSettings(lake, _symbols(3_000), Thresholds(Decimal("0.05"), Decimal("0.05")))
landing = "/tmp/exp/g10k/work/growth/landing"
state = StateMirror(spark, lake)
committed = None
results = {"old": [], "new": []}
bid = last + 1
for rnd in range(int(sys.argv[1])):
    for arm in (("old", "new") if rnd % 2 else ("new", "old")):
        k = last - 1 - rnd  # an older pair: its orders are late against the state
        check_mod.late_history_rows = old.late_history_rows if arm == "old" else new_fn
        q, o = f"{landing}/quotes/g-{k:05d}.jsonl", f"{landing}/orders/g-{k:05d}.jsonl"
        batch = spark.read.text(q).selectExpr("'quotes' AS stream", "value", f"'{q}' AS source_file") \
            .unionByName(spark.read.text(o).selectExpr("'orders' AS stream", "value", f"'{o}' AS source_file"))
        committed = committed if committed is not None else __import__("market_spread.lake.tables", fromlist=["x"]).committed_batches(spark, lake)
        r = pipeline.process_batch(batch, bid, settings, committed, state, expect_small=True)
        bid += 1
        results[arm].append(r)
        print(arm, f"batch {r.batch_id}: {r.seconds:.2f}s late_symbols {r.late_symbols} alerts {r.alerts} phases {r.phases_ms}", flush=True)
for arm, rs in results.items():
    rs = rs[1:]  # the first of each arm warms up
    print(arm, "median s", round(statistics.median(r.seconds for r in rs), 3), "check", statistics.median(r.phases_ms["check"] for r in rs),
          "write", statistics.median(r.phases_ms["write"] for r in rs), "late", [r.late_symbols for r in rs])
