"""Where the 2M-line batch's parse phase goes: parse, keep (local checkpoint / cache), summary."""
import sys, time
from pathlib import Path
from pyspark import StorageLevel
from market_spread.runtime.spark import build_session, kept_for_batch
from market_spread.feeds.generate import Generator, write_backlog
from market_spread.transforms import parsing
from market_spread.stream.summary import summarize
from market_spread.domain.rules import Thresholds
from pyspark.sql import functions as F

work = Path("/tmp/exp/pb"); landing = work / "landing"
symbols = [f"S{i:04d}" for i in range(3000)]
if not (landing / "orders").exists():
    gen = Generator(symbols, seed=42, profile="wallaroo", wide_share=0.05)
    write_backlog(landing, gen, 1_000_000, 1_000_000, 40, "bench")
spark = build_session(long_running=True)
th = Thresholds()
def raw():
    def feed(name):
        return spark.read.text(str(landing / name)).select(F.lit(name).alias("stream"), "value",
            F.col("_metadata.file_path").alias("source_file"))
    return feed("quotes").unionByName(feed("orders"))
def parsed():
    return parsing.parse_lines(parsing.nonblank_lines(raw()), symbols)
def v_full():
    parsed().write.format("noop").mode("overwrite").save()
def v_summary():  # summary straight over the parse, nothing kept
    summarize(parsed(), th, per_symbol=False)
def v_keep_summary():  # the stream's parse phase
    with kept_for_batch(parsed()) as p:
        summarize(p, th, per_symbol=False)
def v_keep_count():
    with kept_for_batch(parsed()) as p:
        p.count()
def v_cache_summary():
    p = parsed().persist(StorageLevel.MEMORY_AND_DISK_DESER)
    summarize(p, th, per_symbol=False); p.unpersist()
def v_keepmem_summary():
    p = parsed().localCheckpoint(eager=False, storageLevel=StorageLevel.MEMORY_ONLY)
    summarize(p, th, per_symbol=False)
    spark.sparkContext._jsc.sc().unpersistRDD(p._jdf.logicalPlan().rdd().id(), False)
import shutil, itertools
sys.path.insert(0, "/work/main/tools")
from market_spread_tools.bench import _stream
_n = itertools.count()
def v_stream():
    lake = Path(f"/tmp/exp/kb/lake{next(_n)}"); res = []
    _stream(spark, landing, lake, symbols, on_batch=res.append)
    print("  stream phases", {k: v for k, v in res[0].phases_ms.items()}, res[0].seconds, flush=True)
    shutil.rmtree(lake, ignore_errors=True)
def gc_ms():
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    return sum(b.getCollectionTime() for b in beans)
def slim(df):  # a valid line's file name is not kept: the summary's file list is its own job here
    return df.withColumn("source_file", F.when(F.col("reason").isNotNull(), F.col("source_file")))
def v_keepslim_summary():
    with kept_for_batch(slim(parsed())) as p:
        summarize(p, th, per_symbol=False)
def v_count2():
    parsed().groupBy("stream", F.col("reason").isNull().alias("valid")).count().collect()
def v_count3():
    parsed().groupBy("stream", F.col("reason").isNull().alias("valid"), "source_file").count().collect()
def v_countonly():
    parsed().count()
def v_sumfiles():
    parsed().select("stream", F.col("reason").isNull().alias("valid"), F.col("source_file").alias("source")).groupBy("stream", "valid", "source").agg(F.count(F.lit(1)).alias("n")).toArrow()
def v_sumoff():  # the offset expressions, without max
    offset_like = F.substring("source_file", -1, 1).between("0", "9")
    source = F.when(offset_like, F.regexp_replace("source_file", "/[0-9]+$", "")).otherwise(F.col("source_file")).alias("source")
    parsed().select("stream", F.col("reason").isNull().alias("valid"), source).groupBy("stream", "valid", "source").agg(F.count(F.lit(1)).alias("n")).toArrow()
import functools
import market_spread.stream.batch as batch_mod
import market_spread.stream.summary as summary_mod
def v_stream_nooff():
    batch_mod.summarize = functools.partial(summary_mod.summarize, offsets=False)
    try:
        v_stream()
    finally:
        batch_mod.summarize = summary_mod.summarize
variants = {k[2:]: v for k, v in globals().items() if k.startswith("v_")}
names = sys.argv[1].split(",")
for n in names: variants[n]()  # warm
for rnd in range(int(sys.argv[2]) if len(sys.argv) > 2 else 2):
    for n in (names if rnd % 2 == 0 else names[::-1]):
        g0 = gc_ms(); t = time.perf_counter(); variants[n]()
        print(f"{n}: {time.perf_counter()-t:.2f}s (GC {gc_ms()-g0} ms)", flush=True)
