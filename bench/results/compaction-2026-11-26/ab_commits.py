"""A/B: delta-rs commits to quotes-like and batch_metrics-like tables as the file count grows,
without compaction and with the stream's compaction every 100 commits; arms interleaved commit by commit."""
import random, statistics, sys, time, shutil, datetime as dt, json
import pyarrow as pa
from deltalake import write_deltalake
sys.path.insert(0, sys.argv[1])
from market_spread.lake import compaction, delta_rs, tables as lake_mod

N = int(sys.argv[2]); root = sys.argv[3]
shutil.rmtree(root, ignore_errors=True)
syms = [f"S{i:04d}" for i in range(3000)]
rng = random.Random(1)
def quotes(b):
    n = 1000; t0 = dt.datetime(2026, 11, 26, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=b)
    px = [rng.randint(10**9, 2*10**9) for _ in range(n)]
    return pa.table({"symbol": [rng.choice(syms) for _ in range(n)],
                     "bid": pa.array(px, pa.int64()), "offer": pa.array([p + rng.randint(0, 10**7) for p in px], pa.int64()),
                     "quote_time": pa.array([t0] * n, pa.timestamp("us", tz="UTC")), "seq": pa.array(range(n), pa.int64()),
                     "batch_id": pa.array([b] * n, pa.int64()), "quote_date": pa.array([t0.date()] * n, pa.date32())})
def metrics(b):
    return pa.table({"batch_id": pa.array([b], pa.int64()), "x": pa.array([b * 7], pa.int64())})
arms = {}
for arm in ("none", "every100"):
    lake = f"{root}/{arm}"
    for name, part, rows in (("quotes", ["quote_date"], quotes(0)), ("batch_metrics", None, metrics(0))):
        write_deltalake(lake_mod.table_path(lake, name), rows, partition_by=part, configuration={k: v for k, v in lake_mod.table_properties(name).items() if k != "delta.checkpointRetentionDuration"} | {"delta.logRetentionDuration": "interval 1 minute", "delta.deletedFileRetentionDuration": "interval 1 minute"})
    arms[arm] = (lake, compaction.Compactor(lake, every=100) if arm == "every100" else None)
times = {a: {"quotes": [], "batch_metrics": []} for a in arms}
cmp_ms = []
for b in range(1, N + 1):
    q, m = quotes(b), metrics(b)
    for arm in (arms if b % 2 else list(arms)[::-1]):
        lake, comp = arms[arm]
        t = time.perf_counter(); delta_rs.append_table(lake_mod.table_path(lake, "quotes"), q, b); times[arm]["quotes"].append((time.perf_counter() - t) * 1000)
        t = time.perf_counter(); delta_rs.append_table(lake_mod.table_path(lake, "batch_metrics"), m, b); times[arm]["batch_metrics"].append((time.perf_counter() - t) * 1000)
        if comp:
            comp.wrote(["quotes", "batch_metrics"])
            done = comp.run({"quotes": b, "batch_metrics": b})
            if done: cmp_ms.append((b, done.table, done.files_removed, done.ms))
    if b in (100, 500, 1000, 2000, 3000, 4000, 5000, 6000, 8000, 10000) and b <= N:
        line = {arm: {t: round(statistics.median(v[b - 50:b]), 1) for t, v in times[arm].items()} for arm in arms}
        files = {arm: {t: compaction.data_files(lake_mod.table_path(arms[arm][0], t)) for t in ("quotes", "batch_metrics")} for arm in arms}
        print(b, json.dumps(line), json.dumps(files), flush=True)
print("compactions (batch, table, files, ms):", cmp_ms[:4], "...", cmp_ms[-4:])
print("compaction ms median/max:", statistics.median(c[3] for c in cmp_ms), max(c[3] for c in cmp_ms))
