"""from_json (per-row InputStreamReader) against other JSON parses of the same 2M lines, noop sink."""
import sys, time
from pathlib import Path
from market_spread.runtime.spark import build_session
from market_spread.transforms import parsing
from pyspark.sql import functions as F
landing = Path("/tmp/exp/pb/landing")
import os
spark = build_session(long_running=True, extra_conf={"spark.driver.extraClassPath": os.environ["PATCH"]} if os.environ.get("PATCH") else None)
print("parser class from", spark._jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.json.CreateJacksonParser$").getProtectionDomain().getCodeSource().getLocation().toString())
QS = parsing._typed_schema(parsing.QUOTE_FIELDS); OS = parsing._typed_schema(parsing.ORDER_FIELDS)
def text(name):
    return spark.read.text(str(landing / name)).select(F.lit(name).alias("stream"), F.col("value").alias("line"),
        F.col("_metadata.file_path").alias("source_file"))
def out(q, o):
    return q.select("symbol", "bid", "transact_time").unionByName(o.select("symbol", "price", "transact_time"), allowMissingColumns=True)
def v_fromjson():
    return out(text("quotes").select(F.from_json("line", QS).alias("j")).select("j.*"),
               text("orders").select(F.from_json("line", OS).alias("j")).select("j.*"))
def v_datasource():
    return out(spark.read.schema(QS).json(str(landing / "quotes")), spark.read.schema(OS).json(str(landing / "orders")))
def v_variant():
    def g(df, cols):
        v = df.select(F.parse_json("line").alias("v"))
        return v.select(*[F.expr(f"try_variant_get(v, '$.{c}', '{t}')").alias(c) for c, t in cols])
    return out(g(text("quotes"), [("symbol", "string"), ("bid", "decimal(38,8)"), ("transact_time", "string")]),
               g(text("orders"), [("symbol", "string"), ("price", "decimal(38,8)"), ("transact_time", "string")]))
variants = {k[2:]: v for k, v in globals().items() if k.startswith("v_")}
names = sys.argv[1].split(",")
for n in names: variants[n]().write.format("noop").mode("overwrite").save()
for rnd in range(int(sys.argv[2])):
    for n in (names if rnd % 2 == 0 else names[::-1]):
        t = time.perf_counter(); variants[n]().write.format("noop").mode("overwrite").save()
        print(f"{n}: {time.perf_counter()-t:.2f}s", flush=True)
