"""A Polars as-of script over a landing folder: the columnar baseline of the benchmark's throughput.

Reads every quotes and orders file (`scan_ndjson`), takes prices from the number's text as exact
decimals (read as text, cast to DECIMAL(18,8)), picks each order's quote with `join_asof` by symbol
(the latest at or before the order's time; exact ties of time by seq, bid, offer), and counts the
alerts the reject rule gives. Valid input only: the benchmark's generated backlogs.

    python -m market_spread_tools.polars_asof LANDING   # prints {"alerts": N, "seconds": S}
"""

from __future__ import annotations

import json
import sys
import time

PRICE = "0.05"


def alerts(landing: str) -> int:
    import polars as pl

    price = pl.Decimal(18, 8)
    text = {name: pl.String for name in ("bid", "offer", "qty", "price")}
    quotes = pl.scan_ndjson(
        f"{landing}/quotes/*.jsonl",
        schema={
            "symbol": pl.String,
            "transact_time": pl.String,
            "bid": text["bid"],
            "offer": text["offer"],
            "seq": pl.Int64,
        },
    )
    orders = pl.scan_ndjson(
        f"{landing}/orders/*.jsonl",
        schema={
            "order_id": pl.String,
            "account": pl.Int64,
            "symbol": pl.String,
            "side": pl.String,
            "qty": text["qty"],
            "price": text["price"],
            "transact_time": pl.String,
            "seq": pl.Int64,
        },
    )
    when = pl.col("transact_time").str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", time_unit="us", time_zone="UTC").alias("t")
    quotes = quotes.with_columns(when, pl.col("bid").cast(price), pl.col("offer").cast(price)).sort(
        ["symbol", "t", "seq", "bid", "offer"], nulls_last=False
    )
    orders = orders.with_columns(when).sort(["symbol", "t"])
    checked = orders.join_asof(quotes.select(["symbol", "t", "bid", "offer"]), on="t", by="symbol", strategy="backward")
    spread = pl.col("offer") - pl.col("bid")
    limit = pl.lit(PRICE).cast(price)
    wide = (spread > 0) & ((spread >= limit) | ((spread + spread) >= limit * (pl.col("bid") + pl.col("offer"))))
    return checked.filter(pl.col("bid").is_null() | wide).select(pl.len()).collect().item()


def main() -> None:
    began = time.perf_counter()
    found = alerts(sys.argv[1])
    print(json.dumps({"alerts": found, "seconds": round(time.perf_counter() - began, 3)}))


if __name__ == "__main__":
    main()
