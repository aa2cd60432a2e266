"""The Stream page's HTML: the state at a glance and six per-minute charts drawn as inline SVG on the
server (no script library, no font or style from elsewhere: it renders with no internet). A few
lines of inline script refresh the panel every REFRESH_SECONDS while the page is open.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime

from market_spread.orchestration.stream_status import WINDOWS, StreamStatus

REFRESH_SECONDS = 10
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 560, 170, 52, 12, 26, 24
BLUE, ORANGE, RED, GREY = "#2563eb", "#ea580c", "#dc2626", "#6b7280"

# key, title, unit, [(series, label, colour)], drawn as bars
CHARTS = (
    ("input_rate", "Input rate", "lines/s", [("input_rate", "lines/s", BLUE)], False),
    ("batch_duration", "Batch duration", "s", [("batch_mean", "mean", BLUE), ("batch_max", "max", ORANGE)], False),
    ("latency", "End-to-end latency", "s", [("latency_mean", "mean", BLUE), ("latency_max", "max", ORANGE)], False),
    ("alerts", "Alerts per minute", "alerts", [("alerts", "alerts", BLUE)], True),
    ("quarantined", "Quarantined lines per minute", "lines", [("quarantined", "lines", ORANGE)], True),
    ("backlog", "Backlog: input not yet committed", "", [("backlog", "waiting", BLUE)], False),
)


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}".rstrip("0").rstrip(".") if value else "0"


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%H:%M")


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def chart(
    key: str, title: str, unit: str, minutes: list[int], lines: list[tuple[str, list, str]], bars: bool = False
) -> str:
    """One chart as an <svg>: `lines` are (label, per-minute values or None, colour)."""
    n, width, height = len(minutes), WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    present = [v for _, values, _ in lines for v in values if v is not None]
    top = max(present, default=0.0) * 1.1 or 1.0
    step = width / max(n, 1)

    def x(i: int) -> float:
        return LEFT + (i + 0.5) * step

    def y(v: float) -> float:
        return TOP + height - (v / top) * height

    marks = []
    for _label, values, colour in lines:
        if bars:
            marks += [
                f'<rect x="{x(i) - step * 0.4:.1f}" y="{y(v):.1f}" width="{max(step * 0.8, 1):.1f}" '
                f'height="{TOP + height - y(v):.1f}" fill="{colour}"/>'
                for i, v in enumerate(values)
                if v
            ]
            continue
        run: list[str] = []
        for i, v in enumerate([*values, None]):
            if v is not None:
                run.append(f"{x(i):.1f},{y(v):.1f}")
                continue
            if len(run) == 1:
                cx, cy = run[0].split(",")
                marks.append(f'<circle cx="{cx}" cy="{cy}" r="2.5" fill="{colour}"/>')
            elif run:
                marks.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour}" stroke-width="1.8"/>')
            run = []
    latest = next((v for v in reversed(lines[0][1]) if v is not None), None)
    now_text = f" · latest {_fmt(latest)} {unit}".rstrip() if latest is not None else " · no data yet"
    legend = (
        "".join(f'<tspan fill="{c}" dx="10">■ {html.escape(label)}</tspan>' for label, _, c in lines)
        if len(lines) > 1
        else ""
    )
    ticks = "".join(
        f'<text x="{x(i):.1f}" y="{HEIGHT - 6}" text-anchor="middle">{_clock(minutes[i])}</text>'
        for i in sorted({0, n // 2, n - 1})
        if n
    )
    points = sum(v is not None for v in lines[0][1])
    return (
        f'<svg class="chart" data-chart="{key}" data-points="{points}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{html.escape(title)}"><text x="{LEFT}" y="15" class="title">{html.escape(title)}'
        f'<tspan class="now">{html.escape(now_text)}</tspan>{legend}</text>'
        f'<line x1="{LEFT}" y1="{TOP + height}" x2="{LEFT + width}" y2="{TOP + height}" class="axis"/>'
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT + width}" y2="{TOP}" class="grid"/>'
        f'<text x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end">{_fmt(top)}</text>'
        f'<text x="{LEFT - 6}" y="{TOP + height}" text-anchor="end">0</text>{ticks}{"".join(marks)}</svg>'
    )


def _state(status: StreamStatus) -> tuple[str, str, str]:
    """(css class, word, sentence) of the stream's state."""
    stalled = status.stalled
    if stalled:
        return "bad", "STALLED", stalled
    if status.holder is None:
        return "off", "NOT RUNNING", "no stream holds the lake: the market_spread_stream DAG starts one within a minute"
    if status.last_batch is None:
        return "wait", "STARTING", "the stream runs and has committed no batch yet"
    return "ok", "RUNNING", f"last batch committed {_ago(status.last_batch_age or 0.0)}"


def _facts(status: StreamStatus) -> list[tuple[str, str]]:
    last, holder, waiting = status.last_batch, status.holder, status.waiting
    batch = (
        (
            f"#{last['batch_id']}, committed {_ago(status.last_batch_age or 0.0)} "
            f"({datetime.fromtimestamp(last['finished_at'], tz=UTC):%Y-%m-%d %H:%M:%S} UTC)"
        )
        if last
        else "none yet"
    )
    writer = (
        f"pid {holder.get('pid')} on {holder.get('host')} since {holder.get('since', '?')}"
        if holder
        else "no live stream"
    )
    if status.waiting_error:
        queued = f"unknown: {status.waiting_error}"
    elif waiting is None or not waiting.count:
        queued = "nothing waits"
    else:
        queued = f"{waiting.count} {waiting.unit}, the oldest for {waiting.age(status.now):.0f}s"
    health = status.health
    written = _ago(max(0.0, status.now - float(health["written_at"]))) if health.get("written_at") else "none yet"
    return [
        ("Last batch", batch),
        ("Lake writer", writer),
        (
            "Checkpoint",
            f"{status.checkpoint} (last committed batch "
            f"{status.checkpoint_batch if status.checkpoint_batch is not None else 'none'})",
        ),
        ("Source", status.input_label),
        ("Input waiting", queued),
        ("Stall limit", f"{status.limit:.0f}s without a batch while input waits (market_spread_stall_seconds)"),
        ("Health record", f"written {written}"),
        ("Metrics endpoint", health.get("metrics_endpoint") or health.get("metrics_note") or "off"),
        ("Table writers", _writers(health.get("writers") or {})),
        ("Alerts topic", _alerts_topic(health.get("alerts_topic"))),
    ]


def _alerts_topic(topic: dict | None) -> str:
    """Where alerts are published (`stream --alerts-topic`) and how far behind the table it is."""
    if not topic:
        return "off (stream --alerts-topic publishes every alert to Kafka)"
    through = topic.get("published_through")
    lag = topic.get("unpublished")
    line = (
        f"{topic.get('topic')} at {topic.get('servers')}: published through batch "
        f"{through if through is not None else 'unknown yet'}, "
        f"{lag if lag is not None else 'unknown'} alert row(s) unpublished"
    )
    return line + (f"; waiting: {topic['problem']}" if topic.get("problem") else "")


def _writers(writers: dict) -> str:
    """Which library commits to each table, and why a table left delta-rs (the features it has)."""
    if not writers:
        return "not known yet (the next batch says)"
    return "; ".join(
        f"{table}: {entry.get('writer')}" + (f" ({entry['why']})" if entry.get("why") else "")
        for table, entry in sorted(writers.items())
    )


def panel(status: StreamStatus, window_name: str, base: str) -> str:
    """The refreshable part of the page: state, facts, window links, charts."""
    css, word, sentence = _state(status)
    facts = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in _facts(status))
    links = " ".join(
        f'<a href="{base}/?window={w}"{" class=current" if w == window_name else ""}>{w}</a>' for w in WINDOWS
    )
    values, minutes = status.series.values, status.series.minutes
    charts = []
    for key, title, unit, spec, bars in CHARTS:
        unit = unit or ("records" if status.source == "kafka" else "files")
        charts.append(
            chart(key, title, unit, minutes, [(label, values[name], colour) for name, label, colour in spec], bars)
        )
    stall_class = " stalled" if css == "bad" else ""
    return (
        f'<div class="state {css}" data-state="{word.lower().replace(" ", "-")}"><b>{word}</b> '
        f"{html.escape(sentence)}</div><dl>{facts}</dl>"
        f'<p class="window">Window: {links} · per minute, UTC · latency: landing (or Kafka produce) time to '
        f'commit · refreshed {_clock(status.now)}:{int(status.now) % 60:02d}</p><div class="charts{stall_class}">{"".join(charts)}</div>'
    )


STYLE = """body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.2rem;color:#111827}
h1{font-size:1.4rem;margin:0 0 .8rem}.state{padding:.6rem .9rem;border-radius:6px;margin-bottom:.8rem}
.ok{background:#dcfce7}.bad{background:#fee2e2;color:#991b1b;border:2px solid #dc2626}.off{background:#e5e7eb}
.wait{background:#fef9c3}dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;margin:0 0 .8rem}
dt{color:#4b5563}dd{margin:0;font-family:ui-monospace,monospace;font-size:.9rem;word-break:break-all}
.window a{margin:0 .2rem}.window a.current{font-weight:bold;text-decoration:none;color:#111827}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(440px,1fr));gap:.8rem}
.chart{width:100%;height:auto;border:1px solid #e5e7eb;border-radius:6px;font-size:11px;fill:#374151}
.stalled .chart[data-chart=backlog]{border:2px solid #dc2626}.title{font-weight:600;font-size:12px}
.now{font-weight:normal;fill:#6b7280}.axis{stroke:#9ca3af}.grid{stroke:#e5e7eb;stroke-dasharray:3 3}"""

SCRIPT = """const panel=document.getElementById('panel');setInterval(async()=>{try{
const r=await fetch(panel.dataset.src,{credentials:'same-origin',cache:'no-store'});
if(r.ok){panel.innerHTML=await r.text();}}catch(e){}},REFRESH_MS);""".replace("REFRESH_MS", str(REFRESH_SECONDS * 1000))


def page(status: StreamStatus, window_name: str, base: str) -> str:
    """The whole page; its panel is fetched again from `base`/panel every REFRESH_SECONDS."""
    src = html.escape(f"{base}/panel?window={window_name}")
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>Stream</title><style>{STYLE}</style></head>'
        f'<body><h1>Stream</h1><div id="panel" data-src="{src}">{panel(status, window_name, base)}</div>'
        f"<script>{SCRIPT}</script></body></html>"
    )
