"""Kafka latency at 1,000 events/s: cold effect or steady? Rates run in order; per-batch times printed."""
import sys, time
from pathlib import Path
import market_spread.stream.query as q
from market_spread.runtime.spark import build_session
from market_spread.stream.kafka_source import session_conf
import market_spread_tools.bench_kafka as bk

orig = q.start_query
def start_query(spark, spec, on_batch):
    t0 = time.time()
    def wrapped(r):
        print(f"  batch {r.batch_id} at {time.time()-t0:6.2f}s: {r.input_lines} lines in {r.seconds:.2f}s jobs {r.spark_jobs} "
              + " ".join(f"{k}={v}" for k, v in r.phases_ms.items()), flush=True)
        on_batch(r)
    return orig(spark, spec, wrapped)
q.start_query = start_query
rates = tuple(int(x) for x in sys.argv[1].split(","))
spark = build_session("kafka-check", shuffle_partitions=4, extra_conf=session_conf(), long_running=True)
symbols = [f"S{i:04d}" for i in range(3000)]
out = bk.kafka_latency(spark, Path("/tmp/exp/kc"), rates, float(sys.argv[2]) if len(sys.argv) > 2 else 12, symbols)
for r, v in out.items(): print(r, v["p50"], v["p95"], v["p99"], v["ticks"], v["ticks_behind"])
