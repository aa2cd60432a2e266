"""Where the 2M-line parse's time goes: variants timed with a noop write, alternating."""
import sys, time
from pathlib import Path
from market_spread.runtime.spark import build_session
from market_spread.feeds.generate import Generator, write_backlog
from market_spread.transforms import parsing
from pyspark.sql import functions as F

work = Path("/tmp/exp/pb"); landing = work / "landing"
symbols = [f"S{i:04d}" for i in range(3000)]
if not (landing / "orders").exists():
    gen = Generator(symbols, seed=42, profile="wallaroo", wide_share=0.05)
    write_backlog(landing, gen, 1_000_000, 1_000_000, 40, "bench")
spark = build_session(long_running=True, extra_conf={"spark.sql.shuffle.partitions": "4"})
def raw():
    def feed(name):
        return spark.read.text(str(landing / name)).select(F.lit(name).alias("stream"), "value",
            F.col("_metadata.file_path").alias("source_file"))
    return feed("quotes").unionByName(feed("orders"))
def v_read():
    return raw()
def v_json():
    r = parsing.nonblank_lines(raw())
    q = r.where("stream='quotes'").select(F.from_json("line", parsing._typed_schema(parsing.QUOTE_FIELDS)).alias("j"))
    o = r.where("stream='orders'").select(F.from_json("line", parsing._typed_schema(parsing.ORDER_FIELDS)).alias("j"))
    return q.select("j.*").select("symbol","bid").unionByName(o.select("j.*").select("symbol","price"), allowMissingColumns=True)
def v_jsonstr():
    r = parsing.nonblank_lines(raw())
    q = r.where("stream='quotes'").select(F.from_json("line", parsing._raw_schema(parsing.QUOTE_FIELDS)).alias("j"))
    o = r.where("stream='orders'").select(F.from_json("line", parsing._raw_schema(parsing.ORDER_FIELDS)).alias("j"))
    return q.select("j.*").select("symbol","bid").unionByName(o.select("j.*").select("symbol","price"), allowMissingColumns=True)
def v_full():
    return parsing.parse_lines(parsing.nonblank_lines(raw()), symbols)
variants = {"read": v_read, "json": v_json, "jsonstr": v_jsonstr, "full": v_full}
names = sys.argv[1].split(",") if len(sys.argv) > 1 else list(variants)
for n in names: variants[n]().write.format("noop").mode("overwrite").save()  # warm
for rnd in range(int(sys.argv[2]) if len(sys.argv) > 2 else 2):
    for n in (names if rnd % 2 == 0 else names[::-1]):
        t = time.perf_counter(); variants[n]().write.format("noop").mode("overwrite").save()
        print(f"{n}: {time.perf_counter()-t:.2f}s", flush=True)
