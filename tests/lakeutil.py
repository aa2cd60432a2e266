"""Test helpers: land files, run the stream in-process on the shared session, read tables back."""
from __future__ import annotations

import itertools
import json
import shutil
from decimal import Decimal
from pathlib import Path

from market_spread.domain.rules import Thresholds
from market_spread.lake import tables as lake_mod
from market_spread.stream.query import StreamSpec, run_query

SYMBOLS = ["AAPL", "MSFT", "IBM", "GOOG", "TSLA"]
_counter = itertools.count()


def land(landing: Path, feed: str, lines: list, name: str | None = None) -> Path:
    """Write a landing file atomically; dict lines are JSON-encoded, strings are written as they are."""
    folder = landing / feed
    folder.mkdir(parents=True, exist_ok=True)
    name = name or f"f{next(_counter):06d}.jsonl"
    text = "".join((json.dumps(l) if isinstance(l, dict) else l) + "\n" for l in lines)
    temp = folder / f".{name}.tmp"
    temp.write_bytes(text.encode("utf-8", "surrogateescape"))
    temp.replace(folder / name)
    return folder / name


def land_pair(source: Path, landing: Path, k: int) -> None:
    """Land file pair k of a generated backlog (`*-0000k.jsonl`) the way producers do: each file
    written aside under a dot name and renamed in, quotes first, so that every quote lands no
    later than the orders it affects (contract 5.8)."""
    for feed in ("quotes", "orders"):
        for path in sorted((source / feed).glob(f"*-{k:05d}.jsonl")):
            target = landing / feed / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            temp = target.parent / f".{target.name}.tmp"
            shutil.copyfile(path, temp)
            temp.replace(target)


def quote(symbol: str, t: str, bid: str, offer: str, seq: int | None = None) -> str:
    """A quote line with prices written as exact JSON numbers (never through float)."""
    seq_part = f', "seq": {seq}' if seq is not None else ""
    return f'{{"symbol": "{symbol}", "transact_time": "{t}", "bid": {bid}, "offer": {offer}{seq_part}}}'


def order(order_id: str, symbol: str, t: str, side: str = "BUY", qty: str = "100", price: str = "1.00",
          account: int = 7, seq: int | None = None) -> str:
    seq_part = f', "seq": {seq}' if seq is not None else ""
    return (
        f'{{"order_id": "{order_id}", "account": {account}, "symbol": "{symbol}", "side": "{side}", '
        f'"qty": {qty}, "price": {price}, "transact_time": "{t}"{seq_part}}}'
    )


def stream(spark, landing: Path, lake: Path, symbols=SYMBOLS, max_spread="0.05", max_spread_ratio="0.05") -> int:
    spec = StreamSpec(lake=Path(lake), symbols=list(symbols), landing=Path(landing),
                      thresholds=Thresholds(Decimal(max_spread), Decimal(max_spread_ratio)))
    return run_query(spark, spec)


def rows(spark, lake: Path, table: str, drop=("detected_at", "updated_at", "batch_id", "started_at", "finished_at")) -> list[dict]:
    df = spark.read.format("delta").load(lake_mod.table_path(lake, table))
    keep = [c for c in df.columns if c not in drop]
    return sorted((r.asDict() for r in df.select(*keep).collect()), key=lambda d: json.dumps(d, default=str, sort_keys=True))


def alerts_by_order(spark, lake: Path) -> dict[str, dict]:
    return {r["order_id"]: r for r in rows(spark, lake, "alerts")}


PROCESSING_COLUMNS = ("detected_at", "updated_at", "batch_id", "started_at", "finished_at")


def assert_same_tables(spark, lake, reference, tables=("alerts", "symbol_state", "quotes")) -> None:
    """The product tables of two lakes hold the same rows (any order), processing-time columns aside."""
    from pyspark.testing import assertDataFrameEqual

    def frame(root: Path, table: str):
        df = spark.read.format("delta").load(lake_mod.table_path(root, table))
        return df.drop(*[c for c in PROCESSING_COLUMNS if c in df.columns])

    for table in tables:
        assertDataFrameEqual(frame(lake, table), frame(reference, table))


def comparable_tables(spark, lake: Path) -> dict[str, list[dict]]:
    """Every product table minus processing-time columns: equal across cuttings, runs and crashes."""
    out = {t: rows(spark, lake, t) for t in lake_mod.TABLES if t != "batch_metrics"}
    out["quarantine"] = [{k: v for k, v in r.items() if k != "source_file"} | {"file": Path(r["source_file"]).name} for r in out["quarantine"]]
    return out


def metrics_totals(spark, lake: Path) -> dict[str, int]:
    df = spark.read.format("delta").load(lake_mod.table_path(lake, "batch_metrics"))
    row = df.selectExpr("sum(quotes) q", "sum(orders) o", "sum(alerts) a", "sum(quarantined) x", "count(*) n").first()
    return {"quotes": row.q or 0, "orders": row.o or 0, "alerts": row.a or 0, "quarantined": row.x or 0, "batches": row.n}
