"""The benchmark's report: the targets of the performance issue against a run's figures, what
limits the figures, and summary.md (tables, targets, plots) written beside latest.json."""

from __future__ import annotations

import statistics

from market_spread_tools.bench_phases import split_keys, split_rows
from market_spread_tools.bench_sql import sql_lines, sql_targets

DEFAULTS = "run with the product's defaults: StreamSpec's default trigger, no interval set by the bench"


def targets(results: dict) -> list[tuple[str, str, bool]]:
    """The targets of the performance issue against the figures of this run: (target, measured, met)."""
    out = []
    tp = results.get("throughput")
    if tp:
        ev, ref, ceil = tp["throughput_events_per_s"], tp["reference_events_per_s"], tp["batch_ceiling_events_per_s"]
        out += [
            (">= 2x the event-at-a-time reference", f"{ev / ref:.2f}x", ev >= 2 * ref),
            (">= 70 % of the Spark batch ceiling", f"{100 * ev / ceil:.0f} %", 10 * ev >= 7 * ceil),
        ]
        own = tp.get("stream_command_events_per_s")
        if own:
            out.append(("stream command (own process) >= 2x the reference", f"{own / ref:.2f}x", own >= 2 * ref))
    g = results.get("batch_time_growth") or {}
    if g.get("median_batch_seconds") is not None:
        out.append(
            (
                "median 2,000-event micro-batch <= 1.0 s",
                f"{g['median_batch_seconds']} s",
                g["median_batch_seconds"] <= 1.0,
            )
        )
    for rate, limit in (("1000", 2000), ("10000", 3000)):
        at = (results.get("latency_ms") or {}).get(rate)
        if at:
            p99, behind = at.get("p99"), at.get("files_behind", 0)
            out.append(
                (
                    f"p99 latency <= {limit // 1000} s at {int(rate):,} events/s",
                    f"{p99} ms" + (f", {behind} file pairs behind" if behind else ""),
                    p99 is not None and p99 <= limit and not behind,
                )
            )
    at50 = (results.get("latency_ms") or {}).get("50000")
    if at50:
        out.append(
            (
                "keeps up at 50,000 events/s",
                f"{at50.get('files_behind', 0)} file pairs behind",
                not at50.get("files_behind"),
            )
        )
    if g.get("growth_ratio") is not None:
        out.append(
            (
                f"batch time after {g.get('last', 'the last')} batches <= 1.1x that after {g.get('first', 'the first')}",
                f"{g['growth_ratio']}x",
                g["growth_ratio"] <= 1.1,
            )
        )
    if results.get("storage"):
        out += storage_targets(results["storage"])
    return out + issue43_targets(results) + sql_targets(results) + universe_targets(results)


def _p50_p99(at: dict, behind_key: str) -> tuple[str, bool]:
    p50, p99, behind = at.get("p50"), at.get("p99"), at.get(behind_key, 0)
    return (
        f"p50 {p50} ms, p99 {p99} ms" + (f", {behind} behind" if behind else ""),
        p50 is not None and p99 is not None and not behind,
    )


def issue43_targets(results: dict) -> list[tuple[str, str, bool]]:
    """Issue 43's targets (latency with the product's defaults, batch-time tail, idle cost)."""
    out = []
    for source, key, behind_key in (
        ("files", "latency_ms", "files_behind"),
        ("Kafka", "kafka_latency_ms", "ticks_behind"),
    ):
        for rate in ("1000", "10000"):
            at = (results.get(key) or {}).get(rate)
            if at:
                measured, ok = _p50_p99(at, behind_key)
                out.append(
                    (
                        f"{source}, {int(rate):,} events/s: p50 <= 0.5 s and p99 <= 1.0 s (product defaults)",
                        measured,
                        ok and at["p50"] <= 500 and at["p99"] <= 1000,
                    )
                )
    at50 = (results.get("latency_ms") or {}).get("50000")
    if at50:
        measured, ok = _p50_p99(at50, "files_behind")
        out.append(
            ("files, 50,000 events/s: keeps up, p99 <= 2 s (product defaults)", measured, ok and at50["p99"] <= 2000)
        )
    g = results.get("growth") or {}
    tail = g.get("batch_time_after_warmup") or {}
    if tail.get("max") is not None and g.get("growth_ratio") is not None:
        out.append(
            (
                f"growth run: no batch over 1.5 s after the first {tail.get('warmup_batches', 10)}, growth <= 1.1x",
                f"max {tail['max']} s over {tail['batches']} batches, {g['growth_ratio']}x",
                tail["max"] <= 1.5 and g["growth_ratio"] <= 1.1,
            )
        )
    idle = results.get("idle") or {}
    for source in ("files", "kafka"):
        pct = (idle.get(source) or {}).get("cpu_percent_of_one_core")
        if pct is not None:
            out.append(
                (
                    f"idle stream ({source}, no input for {idle['seconds']:.0f} s, product defaults) <= 5 % of one core",
                    f"{pct} %",
                    pct <= 5,
                )
            )
    return out


def universe_targets(results: dict) -> list[tuple[str, str, bool]]:
    """Issue 66's targets for the universe part: 200,000 symbols' median batch against 300's, the
    latency at 200,000, the p99 at 1,000,000 (a universe with file pairs behind misses its target)."""
    u = results.get("universe") or {}
    if not u:
        return []  # the part did not run
    rows, out = u.get("universes") or {}, []
    if u.get("ratio_200000_300") is not None:
        out.append(
            (
                "universe: median batch, 200,000 symbols <= 1.5x 300",
                f"{u['ratio_200000_300']}x",
                u["ratio_200000_300"] <= 1.5,
            )
        )
    for n, p50_ms, p99_ms in (("200000", 500, 1000), ("1000000", None, 1500)):
        r = rows.get(n)
        limit = (f"p50 <= {p50_ms / 1000} s, " if p50_ms else "") + f"p99 <= {p99_ms / 1000} s"
        name = f"universe: {int(n):,} symbols at {u['rate']:,} events/s, {limit}"
        if r and r.get("failed"):
            out.append((name, f"the stream's process died ({r['failed']})", False))
        if not r or r.get("p99") is None:
            continue
        measured, ok = _p50_p99(r, "files_behind")
        ok = ok and r["p99"] <= p99_ms and (p50_ms is None or r["p50"] <= p50_ms)
        out.append((name, measured, ok))
    return out


def universe_lines(results: dict) -> list[str]:
    """The universe part: one row per universe, side by side, and what the plan left out."""
    u = results.get("universe")
    if not u:
        return []
    lines = [
        f"Universe (landing files at {u['rate']:,} events/s, ticks of one {u['batch_lines']:,}-line file pair, quotes round "
        f"the universe; the state pre-filled by `stream --available-now` over one pair quoting every symbol once, then "
        f"the measured continuous run on the same lake; {DEFAULTS}):",
        "",
        "| symbols | median batch s (lines) | state write ms (share) | p50 ms | p99 ms | file pairs (behind) "
        "| peak MB (pre-fill) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n, r in u["universes"].items():
        if r.get("failed"):
            lines.append(f"| {int(n):,} | the stream's process died ({r['failed']}) | | | | | |")
            continue
        share = r["state_write_share"]
        lines.append(
            f"| {int(n):,} | {r['median_batch_s']} ({r['median_lines']}) | {r['state_write_ms']} "
            f"({'-' if share is None else f'{100 * share:.0f} %'}) | {r['p50']} | {r['p99']} "
            f"| {r['file_pairs']} ({r['files_behind']}) | {r['peak_mb']:,} ({r['prefill']['peak_mb']:,}) |"
        )
    lines.append("")
    if u.get("ratio_200000_300") is not None:
        lines += [f"Median batch, 200,000 symbols / 300: {u['ratio_200000_300']}x.", ""]
    if u.get("left_out"):
        left = ", ".join(f"{n:,}" for n in u["left_out"]["sizes"])
        lines += [f"Left out of this plan: {left} symbols ({u['left_out']['why']}).", ""]
    return lines


def storage_targets(st: dict) -> list[tuple[str, str, bool]]:
    """The object storage issue's targets: S3's median batch against local disk's of the same run,
    S3's p99 at 1,000 events/s."""
    ratio, lat = st["ratios"]["median_batch"], st["s3"]["latency"]
    p99, behind = lat.get("p99"), lat.get("files_behind", 0)
    return [
        (
            "S3: median 2,000-event batch <= 1.5x local disk's",
            f"{ratio}x ({st['s3']['median_batch_seconds']} s / {st['local']['median_batch_seconds']} s)",
            ratio is not None and ratio <= 1.5,
        ),
        (
            f"S3: p99 latency <= 2 s at {st.get('rate', 1000):,} events/s",
            f"{p99} ms" + (f", {behind} file pairs behind" if behind else ""),
            p99 is not None and p99 <= 2000 and not behind,
        ),
    ]


def storage_lines(results: dict) -> list[str]:
    """The table of the same figures on local disk and on the local S3 server, with their ratio."""
    st = results.get("storage")
    if not st:
        skipped = results.get("storage_skipped")
        return [f"S3 comparison: skipped ({skipped}).", ""] if skipped else []
    local, s3, r, rate = st["local"], st["s3"], st["ratios"], st.get("rate", 1000)
    behind = lambda d: d["latency"].get("files_behind", 0)  # noqa: E731
    return [
        f"Local disk against the local S3 server (`market-spread object-store`; S3 landing and lake under "
        f"{st['prefix']}), one after the other in this run:",
        "",
        "| figure | local disk | S3 | S3 / local |",
        "| --- | --- | --- | --- |",
        f"| median 2,000-event batch (s, over {s3['batches']} batches) | {local['median_batch_seconds']} | "
        f"{s3['median_batch_seconds']} | {r['median_batch']}x |",
        f"| p50 latency at {rate:,} events/s (ms) | {local['latency']['p50']} | {s3['latency']['p50']} | |",
        f"| p99 latency at {rate:,} events/s (ms) | {local['latency']['p99']} | {s3['latency']['p99']} | {r['p99']}x |",
        f"| file pairs behind at the end | {behind(local)} | {behind(s3)} | |",
        f"| throughput, {s3['throughput']['events']:,} events (events/s) | {local['throughput']['events_per_s']:,} | "
        f"{s3['throughput']['events_per_s']:,} | {r['throughput']}x |",
        "",
    ]


def limits(results: dict) -> list[str]:
    """What limits the figures, from this run's own measurements: for the summary of missed targets."""
    out = []
    tp = results.get("throughput")
    if tp and tp.get("seconds"):
        ph = tp["phases_ms"]
        share = lambda key: 100 * ph.get(key, 0) / (1000 * tp["seconds"])  # noqa: E731
        out.append(
            f"Throughput: of the stream's {tp['seconds']} s, parsing, validating, caching and counting the batch took "
            f"{share('parse'):.0f} %, the as-of check {share('check'):.0f} %, the concurrent writes (quote history, "
            f"alerts, quarantine and the state MERGE) {share('write'):.0f} % and the batch_metrics commit "
            f"{share('commit_metrics'):.0f} %. The batch ceiling ({tp['batch_ceiling_events_per_s']:,} events/s) has no "
            "state table, no quote history and one commit instead of five; the reference has no commit at all."
        )
    g = results.get("growth") or {}
    if g.get("batch_seconds"):
        floor = statistics.median(g["batch_seconds"][1:] or g["batch_seconds"])
        out.append(
            f"Latency: a micro-batch of 2,000 events takes {floor:.2f} s (median of the growth run, "
            f"{g.get('median_spark_jobs', '?')} Spark jobs each: "
            + (
                "parsed, checked and committed on the driver"
                if not g.get("median_spark_jobs")
                else "mostly planning the parse and the as-of check and their jobs"
            )
            + "), and Spark's engine adds its listing and checkpoint logs to each trigger; a landed file "
            "waits for the batch in flight and then for its own, so p99 is about two cycles."
        )
    out += split_limits(results)
    st = results.get("storage")
    if st:
        local, s3 = st["local"], st["s3"]
        out.append(
            f"S3: p99 at {st.get('rate', 1000):,} events/s {s3['latency']['p99']} ms against local disk's "
            f"{local['latency']['p99']} ms in the same run, the median 2,000-event batch {s3['median_batch_seconds']} s "
            f"against {local['median_batch_seconds']} s: what S3 adds is the difference; the rest is the batch time "
            "local disk has as well."
        )
    return out


def split_limits(results: dict) -> list[str]:
    """Where the slowest 1 % of ticks spend most, per source at its highest rate measured."""
    out = []
    for source, key in (("files", "latency_ms"), ("Kafka", "kafka_latency_ms")):
        rows = results.get(key) or {}
        rate = max(rows, key=int, default=None)
        slow = ((rows.get(rate) or {}).get("split_ms") or {}).get("slowest_1pct")
        if slow:
            assert rate is not None  # found under a rate
            parts = sorted(((v, k) for k, v in slow.items() if k not in ("latency", "ticks")), reverse=True)[:3]
            out.append(
                f"Latency ({source}, {int(rate):,} events/s): the slowest 1 % of ticks ({slow['latency']} ms on "
                "average) spend most in " + ", ".join(f"{k.replace('_', ' ')} {v} ms" for v, k in parts) + "."
            )
    return out


def _batch_times(row: dict) -> str:
    b = row.get("batch_seconds") or {}
    return f"{b['p50']} / {b['p99']} / {b['max']}" if b.get("batches") else ""


def split_lines(results: dict) -> list[str]:
    """Where the latency goes: the split of the median and p99 ticks and the slowest 1 % (mean), in ms."""
    rows = split_rows(results)
    if not rows:
        return []
    keys = split_keys([split for *_, split in rows])
    head = ["source", "events/s", "tick", "latency", *[k.replace("_", " ") for k in keys]]
    lines = [
        "Where a tick's latency goes (ms; `in progress`: the batch running when it landed, `seen`: until the "
        "listing or offset fetch of its batch ends, `engine`: Spark's getBatch, queryPlanning and walCommit, then "
        "the batch's phases, `other`: the rest):",
        "",
        "| " + " | ".join(head) + " |",
        "|" + " --- |" * len(head),
    ]
    lines += [
        f"| {source} | {rate:,} | {tick}"
        + (f" ({split['ticks']})" if "ticks" in split else "")
        + f" | {split['latency']} | "
        + " | ".join(str(split.get(k, 0.0)) for k in keys)
        + " |"
        for source, rate, tick, split in rows
    ]
    return lines + [""]


def idle_lines(results: dict) -> list[str]:
    idle = results.get("idle")
    if not idle:
        return []
    said = []
    for source in ("files", "kafka"):
        f = idle.get(source)
        if f and f.get("cpu_percent_of_one_core") is not None:
            said.append(
                f"{source} {f['cpu_percent_of_one_core']} % of one core (JVM {f['jvm_cpu_seconds']} s + Python "
                f"{f['python_cpu_seconds']} s of CPU over {f['wall_seconds']} s"
                + (
                    f"; the broker {f['broker_cpu_percent_of_one_core']} %, not counted"
                    if "broker_cpu_percent_of_one_core" in f
                    else ""
                )
                + ")"
            )
        elif f is not None:
            said.append(f"{source}: not measured (the warm-up batch did not come through)")
    if idle.get("kafka_skipped"):
        said.append(f"kafka skipped ({idle['kafka_skipped']})")
    return [f"Idle stream, no input for {idle['seconds']:.0f} s after one warm-up batch: " + "; ".join(said) + ".", ""]


def backlog_lines(tp: dict) -> list[str]:
    """Peak memory of the stream command and the Polars script, and the big backlog's row."""
    own, polars, big = tp.get("stream_command") or {}, tp.get("polars") or {}, tp.get("big_backlog")
    inside = tp.get("in_process_peak_mb") or {}
    lines = [
        f"Peak memory (MB, process tree): stream command {own.get('peak_mb')}, Polars script {polars.get('peak_mb')}"
        + (
            f"; in this process (its Python and JVM) the stream {inside.get('stream')}, the Spark batch job "
            f"{inside.get('ceiling')}, the reference {inside.get('reference')}"
            if inside
            else ""
        )
        + ".",
        "",
    ]
    if big:
        b, p = big["stream_command"], big["polars"]
        lines += [
            f"Backlog of {big['events']:,} events, stream command in its own process: {b['events_per_s']:,} events/s "
            f"over {b['batches']} batches (slowest {b['slowest_batch_seconds']} s), peak {b['peak_mb']:,} MB; "
            f"Polars {p['seconds']} s, peak {p['peak_mb']:,} MB; alerts agree: {big['alerts_agree']}.",
            "",
        ]
        lines += big_engine_lines(big)
    return lines


def big_engine_lines(big: dict) -> list[str]:
    """The big backlog's engines side by side: events/s and peak memory of each."""
    events, rows = big["events"], []
    b, p = big["stream_command"], big["polars"]
    rows.append(("stream command, own process (batch time)", b["events_per_s"], b["peak_mb"]))
    names = {"stream": "stream, in this process", "ceiling": "plain Spark batch job", "reference": "reference"}
    for key, name in names.items():
        e = (big.get("in_process") or {}).get(key)
        if e:
            rows.append((f"{name} (peak: this process)", round(e["events"] / e["seconds"]), e["peak_mb"]))
    rows.append(("Polars as-of script", round(events / p["seconds"]), p["peak_mb"]))
    if len(rows) == 2:
        return []
    return [
        f"The {events:,}-event backlog, engine by engine:",
        "",
        "| engine | events/s | peak MB |",
        "| --- | --- | --- |",
        *[f"| {name} | {rate:,} | {peak:,} |" for name, rate, peak in rows],
        "",
    ]


def topic_lines(results: dict) -> list[str]:
    """The alerts topic part: landing to committed and to visible in the topic, side by side."""
    topic = results.get("topic")
    if not topic:
        skipped = results.get("topic_skipped")
        return [f"Alerts topic: skipped ({skipped}).", ""] if skipped else []
    c, t = topic["committed_ms"], topic["topic_ms"]
    return [
        f"Alerts topic (`stream --alerts-topic`, landing files at {topic['rate']:,} events/s, {DEFAULTS}; "
        "target: visible p99 <= 1,000 ms):",
        "",
        "| landing to | p50 ms | p95 ms | p99 ms | file pairs |",
        "| --- | --- | --- | --- | --- |",
        f"| alerts committed (Delta) | {c['p50']} | {c['p95']} | {c['p99']} | {topic['file_pairs']} |",
        f"| alerts visible to a read_committed consumer | {t['p50']} | {t['p95']} | {t['p99']} | {t['file_pairs']} "
        f"(with alerts; {t['files_behind']} never seen) |",
        "",
    ]


def dirty_lines(dirty: dict | None) -> list[str]:
    """The dirty feeds' table: latency and the cost of a batch with quarantined lines."""
    if not dirty:
        return []
    lines = [
        f"Dirty feeds (bad lines of every kind the contract names among the feed's), {DEFAULTS}:",
        "",
        "| source | one bad line in | p50 ms | p99 ms | batch with quarantined lines / clean batch (median s) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for source in ("files", "kafka"):
        for every, d in dirty.get(source, {}).items():
            c = d["batch_cost"]
            lines.append(
                f"| {source} | {int(every):,} | {d['p50']} | {d['p99']} | {c['dirty_p50_s']} / {c['clean_p50_s']} "
                f"= {c['ratio']}x ({c['dirty_batches']} and {c['clean_batches']} batches) |"
            )
    return lines + [""]


def cluster_lines(c: dict | None) -> list[str]:
    """The cluster part: the backlog on the 2-worker cluster and the driver/executors crossover."""
    if not c:
        return []
    lines = [
        f"Local Spark cluster ({c['workers']} workers, {c['worker_cores']} core each; `stream --master spark://...` in its own process, peak memory of driver, daemons and executors):",
        "",
    ]
    b = c.get("backlog")
    if b:
        lines += [
            f"Backlog: {b['events']:,} events in {b['batches']} batch(es), {b['events_per_s']:,} events/s "
            f"({b['batch_seconds']} s of batches, slowest {b['slowest_batch_seconds']} s, {b['spark_jobs_per_batch']} Spark "
            f"jobs per batch), peak {b['peak_mb']:,} MB; alerts agree with the throughput part: {b.get('alerts_agree', 'n/a')}.",
            "",
        ]
    lines += [
        "| batch (events) | kernel on the driver: median batch s, events/s, peak MB | kernel in Spark's tasks: "
        "median batch s, events/s, peak MB | fastest |",
        "| --- | --- | --- | --- |",
    ]
    for r in c["crossover"]:
        figures = " | ".join(
            f"{r[p]['median_batch_seconds']}, {r[p]['events_per_s']:,}, {r[p]['peak_mb']:,}" if p in r else "not run"
            for p in ("driver", "executors")
        )
        lines.append(f"| {r['batch_events']:,} | {figures} | {r['faster']} |")
    at = c.get("crossover_batch_events")
    lines += [
        "",
        f"Crossover: {'a path on Spark executors fastest from ' + format(at, ',') + '-event batches' if at else 'none in the sizes measured (the driver fastest at each)'}; "
        f"alerts agree on every path: {c['alerts_agree']}.",
        "",
    ]
    return lines


def summary_markdown(results: dict, command: str) -> str:
    m = results["machine"]
    lines = [
        f"# Benchmark ({results['mode']}, {results['finished_at']})",
        "",
        f"Machine: {m['cores']} cores, {m['memory_gb']} GB, Python {m['python']}, PySpark {m['pyspark']}, "
        f"delta-spark {m['delta_spark']}. Reproduce: `{command}`.",
        "",
    ]
    tp = results.get("throughput")
    if tp:
        lines += [
            "| system | events/s |",
            "| --- | --- |",
            f"| stream --available-now (every Delta commit included) | {tp['throughput_events_per_s']:,} |",
            f"| stream command in its own process (batch time from batch_metrics) | {tp.get('stream_command_events_per_s') or 0:,} |",
            f"| Polars as-of script (scan_ndjson, join_asof, exact decimals) | {tp.get('polars_events_per_s') or 0:,} |",
            f"| Spark batch ceiling (one plain batch job) | {tp['batch_ceiling_events_per_s']:,} |",
            f"| reference, event at a time (Wallaroo's way) | {tp['reference_events_per_s']:,} |",
            "",
            f"{tp['events']:,} events in {tp['batches']} micro-batch(es); alerts agree across the three: "
            f"{tp['alerts_agree']}. Time per phase (ms): {tp['phases_ms']}. Spark jobs per batch (median): "
            f"{tp.get('spark_jobs_per_batch')}.",
            "",
        ]
        lines += backlog_lines(tp)
    lat = results.get("latency_ms")
    if lat:
        lines += [
            f"File source (file pair landed -> its alerts committed), {DEFAULTS}:",
            "",
            "| input rate (events/s) | p50 ms | p95 ms | p99 ms | file pairs measured | file pairs behind at the end "
            "| batch p50 / p99 / max s |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {int(r):,} | {d['p50']} | {d['p95']} | {d['p99']} | {d.get('file_pairs', '')} | {d.get('files_behind', 0)} "
            f"| {_batch_times(d)} |"
            for r, d in lat.items()
        ]
        lines.append("")
    klat = results.get("kafka_latency_ms")
    if klat:
        lines += [
            f"Kafka source (record produced -> its alerts committed; ticks of 0.25 s of input), {DEFAULTS}:",
            "",
            "| input rate (events/s) | p50 ms | p95 ms | p99 ms | ticks measured | ticks behind at the end "
            "| batch p50 / p99 / max s |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {int(r):,} | {d['p50']} | {d['p95']} | {d['p99']} | {d.get('ticks', '')} | {d.get('ticks_behind', 0)} "
            f"| {_batch_times(d)} |"
            for r, d in klat.items()
        ]
        lines.append("")
    elif results.get("kafka_latency_skipped"):
        lines += [f"Kafka latency: skipped ({results['kafka_latency_skipped']}).", ""]
    lines += dirty_lines(results.get("dirty"))
    lines += topic_lines(results)
    lines += split_lines(results)
    if results.get("batch_time_growth"):
        g = results["batch_time_growth"]
        lines += [
            f"Batch time after N batches (s): {g['batch_seconds_at']}; ratio last/first {g['growth_ratio']}; "
            f"median 2,000-event batch {g.get('median_batch_seconds')} s, {g.get('median_spark_jobs')} Spark jobs.",
            "",
        ]
        tail = g.get("batch_time_after_warmup") or {}
        if tail.get("batches"):
            lines += [
                f"Batch time after the first {tail['warmup_batches']} batches (s, over {tail['batches']} batches): "
                f"p50 {tail['p50']}, p99 {tail['p99']}, max {tail['max']}.",
                "",
            ]
    lines += idle_lines(results)
    if results.get("symbols_scaling"):
        lines += [f"Batch time (s, 20k events) by number of symbols: {results['symbols_scaling']}.", ""]
    lines += storage_lines(results)
    lines += cluster_lines(results.get("cluster"))
    lines += sql_lines(results)
    lines += universe_lines(results)
    lines += [f"Peak memory of the job: {results['peak_memory_mb']} MB.", ""]
    checks = targets(results)
    if checks:
        lines += ["| target | measured | met |", "| --- | --- | --- |"]
        lines += [f"| {name} | {value} | {'yes' if ok else 'no'} |" for name, value, ok in checks]
        lines.append("")
        if results.get("latency_ms") or results.get("kafka_latency_ms") or results.get("idle"):
            lines += [f"The latency and idle rows' streams {DEFAULTS}.", ""]
        if not all(ok for _, _, ok in checks) and limits(results):
            lines += ["## What limits it", ""] + [f"- {text}" for text in limits(results)]
            lines += ["", "More in docs/performance.md.", ""]
    lines += [f"![{p}]({p})" for p in results.get("plots", [])]
    return "\n".join(lines) + "\n"
