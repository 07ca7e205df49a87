"""``blocklab report``: one self-contained HTML page of Altair charts over run folders.

The page has a summary table (the ``compare`` query) and the charts: bandwidth and IOPS over
time with failures marked and rebuild windows shaded (``bandwidth``, ``rebuild-windows``),
the latency CDF per operation on a log axis (``latency-cdf``), percentiles side by side across
runs (``latency-summary``), a per-drive utilization heatmap (``drive-utilization``) and, when
the runs form a size sweep (each run one transfer size, at least two sizes), bandwidth against
transfer size (``size-sweep``). Every figure comes from a named query over the same views as
``blocklab query``.

For a sweep's output folder (``blocklab sweep run -o OUT``; it has ``sweep.json``) the page
opens with the sweep: its points (the summary Parquet, one row per point with the axis values),
the failed points, and for each axis the headline figures against it (p99 and mean latency,
MB/s, IOPS, and the rebuild window when the points had failures), one line per value of the
next axis (in a cross sweep; other axes' values as further lines).

The page opens from disk with no network: the Vega, Vega-Lite and vega-embed JavaScript that
vl-convert ships is inlined, and each chart's data is inlined in its spec. When every chart has
been drawn the page sets ``data-charts-drawn`` on its body to the number of charts (and
``data-charts-error`` if one failed), for tests and scripts. ``--png DIR`` and ``--svg DIR``
write each chart through vl-convert, also offline.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import json
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import altair as alt
import pyarrow as pa
import vl_convert as vlc

from blocklab.traces.errors import BlocklabError
from blocklab.traces.safety import make_folders, not_an_input, output_lock
from blocklab.traces.store import atomic_output

from . import __version__
from .query import Source, connect, fetch, find_sources, named
from .sweep import is_sweep, read_points
from .sweepfile import value_text

#: Points aimed at per run on the time axis of the bandwidth chart and the heatmap.
TIME_POINTS = 150
HEAT_BINS = 200
PERCENTILES = (("p50", "p50_ms"), ("p90", "p90_ms"), ("p99", "p99_ms"), ("p99.9", "p999_ms"))
#: A sweep's headline figures (summary columns) drawn against each axis, with their titles.
SWEEP_METRICS = (("p99_ms", "p99 latency (ms)"), ("mean_ms", "mean latency (ms)"),
                 ("mb_per_s", "MB/s"), ("iops", "IOPS"),
                 ("rebuild_window_s", "rebuild window (s)"))


@dataclasses.dataclass
class Chart:
    """One chart of the page: its id (file stem of --png/--svg), heading and spec."""

    id: str
    title: str
    spec: dict[str, Any]
    note: str = ""


@dataclasses.dataclass
class ReportResult:
    output: str
    runs: list[str]
    charts: list[str]
    png: list[str]
    svg: list[str]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _rows(t: pa.Table) -> list[dict[str, Any]]:
    out = []
    for r in t.to_pylist():
        out.append({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                    for k, v in r.items()})
    return out


def _nice_step(span: float, points: int) -> float:
    """The smallest of 1, 2, 5 x 10^k seconds (at least 1 ms) giving at most ``points``."""
    want = max(span / max(points, 1), 1e-3)
    k = math.floor(math.log10(want))
    for m in (1, 2, 5, 10):
        step = m * 10.0 ** k
        if step >= want * (1 - 1e-12):
            return float(f"{step:.12g}")
    return 10.0 ** (k + 1)


def _vl_version() -> str | None:
    """The Vega-Lite version of Altair's schema if vl-convert has it (else vl-convert's
    newest)."""
    want = alt.SCHEMA_VERSION.lstrip("v").split(".")
    mm = ".".join(want[:2])
    return mm if mm in vlc.get_vegalite_versions() else None


def _bundle() -> str:
    """vega-embed, Vega-Lite and Vega as one script that sets window.vegaEmbed."""
    # vl-convert's stub marks the snippet as required; None gives its default snippet
    return vlc.javascript_bundle(vl_version=_vl_version())  # type: ignore[call-arg]


def _spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    with alt.data_transformers.disable_max_rows():
        return chart.to_dict()


# ---------------------------------------------------------------------------------------------
# charts


def _bandwidth_chart(bw: list[dict[str, Any]], windows: list[dict[str, Any]],
                     step: float) -> alt.TopLevelMixin:
    data = alt.Data(values=bw)
    x = alt.X("t_s:Q", title="time (s)", axis=alt.Axis(labelOverlap="greedy"))
    color = alt.Color("run:N", title="run")
    dash = alt.StrokeDash("op:N", title="op")
    tip = ["run:N", "op:N", "t_s:Q", "mb_per_s:Q", "iops:Q"]
    panels = []
    for field, title in (("mb_per_s", f"MB/s (per {step:g} s)"),
                         ("iops", f"IOPS (per {step:g} s)")):
        lines = alt.Chart(data).mark_line(interpolate="step-after").encode(
            x=x, y=alt.Y(f"{field}:Q", title=title), color=color, strokeDash=dash,
            tooltip=tip).properties(width=760, height=200)
        if windows:
            wdata = alt.Data(values=windows)
            # shaded in the colour of the run's lines (the layers share the colour scale)
            shade = alt.Chart(wdata).mark_rect(opacity=0.15).encode(
                x="failure_s:Q", x2="window_end_s:Q", color=color,
                tooltip=["run:N", "group:N", "drive:Q", "failure_s:Q", "window_s:Q",
                         "rebuild_done:N"])
            rule = alt.Chart(wdata).mark_rule(strokeWidth=2, strokeDash=[6, 3]).encode(
                x="failure_s:Q", color=color)
            panels.append(alt.layer(shade, rule, lines))
        else:
            panels.append(lines)
    return alt.vconcat(*panels)


def _cdf_chart(cdf: list[dict[str, Any]]) -> alt.TopLevelMixin:
    pts = [r for r in cdf if r["latency_ms"] is not None and r["latency_ms"] > 0]
    return alt.Chart(alt.Data(values=pts)).mark_line().encode(
        x=alt.X("latency_ms:Q", scale=alt.Scale(type="log"), title="latency (ms, log)"),
        y=alt.Y("fraction:Q", title="fraction of requests", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("run:N", title="run"),
        tooltip=["run:N", "op:N", "fraction:Q", "latency_ms:Q"],
    ).properties(width=360, height=260).facet(column=alt.Column("op:N", title="op"))


def _percentile_chart(summary: list[dict[str, Any]]) -> alt.TopLevelMixin:
    rows = []
    for r in summary:
        if r["size_class_bytes"] is not None:
            continue
        for label, key in PERCENTILES:
            if r[key] is not None and r[key] > 0:
                rows.append({"run": r["run"], "op": r["op"], "percentile": label,
                             "latency_ms": r[key]})
    # bars on a log axis need a base above zero: the power of ten at or below the least
    floor = 10.0 ** math.floor(math.log10(min([r["latency_ms"] for r in rows] + [1.0])))
    return alt.Chart(alt.Data(values=rows)).mark_bar().encode(
        x=alt.X("percentile:N", sort=[p for p, _k in PERCENTILES], title=None),
        xOffset=alt.XOffset("run:N"),
        y=alt.Y("latency_ms:Q", scale=alt.Scale(type="log", domainMin=floor),
                title="latency (ms, log)"),
        y2=alt.datum(floor),
        color=alt.Color("run:N", title="run"),
        tooltip=["run:N", "op:N", "percentile:N", "latency_ms:Q"],
    ).properties(width=360, height=260).facet(column=alt.Column("op:N", title="op"))


def _heatmap(util: list[dict[str, Any]]) -> alt.TopLevelMixin:
    rows = [{**r, "t_end_s": r["t_s"] + r["interval_s"]} for r in util]
    top = max([1.0] + [float(r["busy_fraction"]) for r in rows])
    return alt.Chart(alt.Data(values=rows)).mark_rect().encode(
        x=alt.X("t_s:Q", title="time (s)"), x2="t_end_s:Q",
        y=alt.Y("drive:O", title="drive"),
        color=alt.Color("busy_fraction:Q", title="busy",
                        scale=alt.Scale(domain=[0, top], scheme="viridis")),
        tooltip=["run:N", "drive:O", "group:N", "t_s:Q", "busy_fraction:Q",
                 "queue_depth:Q", "iops:Q", "mb_per_s:Q"],
    ).properties(width=760, height=alt.Step(12)).facet(
        row=alt.Row("run:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left")))


def _size_chart(sweep: list[dict[str, Any]]) -> alt.TopLevelMixin:
    base = alt.Chart(alt.Data(values=sweep)).encode(
        x=alt.X("size_bytes:Q", scale=alt.Scale(type="log", base=2),
                title="transfer size (bytes, log2)"),
        y=alt.Y("mb_per_s:Q", title="MB/s"),
        color=alt.Color("op:N", title="op"),
        tooltip=["run:N", "op:N", "size_bytes:Q", "mb_per_s:Q", "iops:Q", "p99_ms:Q"])
    return alt.layer(base.mark_line(), base.mark_point(filled=True)).properties(
        width=560, height=300)


def is_size_sweep(sweep: list[dict[str, Any]]) -> bool:
    """Runs form a size sweep when every run has one transfer size and there are two or more
    sizes."""
    sizes = {r["run"]: r["size_bytes"] for r in sweep}
    return bool(sizes) and None not in sizes.values() and len(set(sizes.values())) >= 2


def _busy_end_s(sources: list[Source]) -> float:
    """When the last drive-busy interval of any run ends (s)."""
    con = connect(sources)
    try:
        _cols, rows = fetch(con, "SELECT max(time_ns + interval_ns) FROM drive_busy", None,
                            "drive-busy", sources)
    finally:
        con.close()
    return float(rows[0][0] or 0) / 1e9 if rows else 0.0


def build(sources: list[Source]) -> tuple[list[dict[str, Any]], list[Chart], dict[str, Any]]:
    """The summary rows (``compare``), the charts, and other tables of the page."""

    def ask(name: str, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
        # a connection per query: what DuckDB keeps of one query's work (pinned in its buffer
        # pool) does not count against the next one's memory limit (measured: over a 10 M
        # request run, the fifth query of one connection ran out of its 1 GB)
        con = connect(sources)
        try:
            return _rows(named(con, name, sources, params))
        finally:
            con.close()

    compare = ask("compare")
    durations = [v for r in compare if r["metric"] == "duration_s"
                 for k, v in r.items() if k != "metric" and v is not None]
    span = max(durations, default=1.0)
    step = _nice_step(span, TIME_POINTS)
    bw = ask("bandwidth", {"interval_s": repr(step)})
    rw = ask("rebuild-windows")
    phases = ask("phases") if rw else []
    # the shading stops where the chart's data does: a rebuild that outlasts the trace (an
    # hour after a minute of requests) otherwise stretched the time axis until the lines
    # filled 3 % of the chart; the table gives the whole window
    chart_end = max((r["t_s"] for r in bw), default=0.0) + step
    for w in rw:
        w["window_end_s"] = max(w["failure_s"], min(w["failure_s"] + (w["window_s"] or 0.0),
                                                    chart_end))
    cdf = ask("latency-cdf")
    summary = ask("latency-summary")
    native = max([(s.run.interval_ns or 0) if s.run else 0 for s in sources] + [1]) / 1e9
    # the drives' time, not the host's: a rebuild or an initialization keeps them busy long
    # after the last request (measured: a rebuild of 2,845 s after 2.1 s of requests drew
    # 71,304 cells at the run's own interval, a 13.5 MB page, 23 s)
    bins = math.ceil(max(span, _busy_end_s(sources)) / native) if native > 0 else 1
    heat_iv = 0.0 if bins <= HEAT_BINS else native * math.ceil(bins / HEAT_BINS)
    util = ask("drive-utilization", {"interval_s": repr(heat_iv)})
    sweep = ask("size-sweep")
    charts = [
        Chart("bandwidth", "Bandwidth and IOPS over time", _spec(_bandwidth_chart(bw, rw, step)),
              "Host requests by completion time; dashed rule: a failure, shaded in the "
              "run's colour: until its rebuild ended, or to the chart's end where the rebuild "
              "outlasted the requests (the table above has the whole window)." if rw else
              "Host requests by completion time; no failures in these runs."),
        Chart("latency-cdf", "Latency distribution", _spec(_cdf_chart(cdf)),
              "Fraction of requests completed within a latency, per operation."),
        Chart("percentiles", "Latency percentiles across runs",
              _spec(_percentile_chart(summary))),
    ]
    if util:
        charts.append(Chart("utilization", "Drive utilization", _spec(_heatmap(util)),
                            "Busy time over each interval, per drive."))
    if is_size_sweep(sweep):
        charts.append(Chart("size-sweep", "Bandwidth against transfer size",
                            _spec(_size_chart(sweep))))
    return compare, charts, {"rebuild_windows": rw, "phases": phases}


# ---------------------------------------------------------------------------------------------
# a sweep's output folder


@dataclasses.dataclass
class SweepPart:
    """A sweep output folder: its axes, the summary rows of its points, its failed points."""

    folder: str
    mode: str
    axes: list[dict[str, Any]]  # sweep.json: key, name, values
    points: list[dict[str, Any]]
    failed: list[dict[str, Any]]


def read_sweep(folder: str | os.PathLike[str]) -> SweepPart:
    info, table = read_points(folder)
    failed = []
    for f in sorted(Path(folder).glob("*.error.json")):
        try:
            e = json.loads(f.read_text())
        except (OSError, ValueError):  # (JSON errors and bytes that are not UTF-8 alike)
            continue
        if not isinstance(e, dict):
            continue
        failed.append({"point": e.get("point"), "name": e.get("name"), "error": e.get("error")})
    return SweepPart(str(folder), str(info.get("mode", "cross")), list(info.get("axes", [])),
                     _rows(table), failed)


def _sweep_chart(part: SweepPart, axis: dict[str, Any], metrics: list[tuple[str, str]]
                 ) -> tuple[alt.TopLevelMixin, str]:
    """The headline figures against one axis: one panel per figure, one line per value of
    the next axis that varies (cross sweeps)."""
    name = axis["name"]
    others = [a for a in part.axes if a["name"] != name and len(a["values"]) > 1]
    color = others[0] if others and part.mode == "cross" else None
    rest = [a for a in others if a is not color]
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool)
                  for v in axis["values"])
    rows = []
    for p in part.points:
        r = {k: p.get(k) for k, _t in metrics}
        r.update(run=p["run"], point=p["point_name"],
                 x=p[name] if numeric else value_text(p[name]))
        if color is not None:
            r["line"] = value_text(p[color["name"]])
        r["others"] = " ".join(f"{a['name']}={value_text(p[a['name']])}" for a in rest)
        rows.append(r)
    x = (alt.X("x:Q", title=name, scale=alt.Scale(zero=False)) if numeric else
         alt.X("x:O", title=name, sort=[value_text(v) for v in axis["values"]]))
    tip = [alt.Tooltip("point:N", title="point"), alt.Tooltip("run:N", title="run")]
    panels = []
    for key, title in metrics:
        enc: dict[str, Any] = {"x": x, "y": alt.Y(f"{key}:Q", title=title),
                               "detail": "others:N",
                               "tooltip": [*tip, alt.Tooltip(f"{key}:Q", title=title)]}
        if color is not None:
            enc["color"] = alt.Color("line:N", title=color["name"],
                                     sort=[value_text(v) for v in color["values"]])
        panels.append(alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(**enc)
                      .properties(width=340, height=200))
    note = (f"One line per {color['name']}" if color is not None else "One line") + (
        f" (and per {', '.join(a['name'] for a in rest)})" if rest else "") + \
        "; each point's figures come from its summary row (the compare query)."
    return alt.concat(*panels, columns=2), note


def sweep_charts(part: SweepPart, prefix: str = "sweep") -> list[Chart]:
    """One chart per axis with two or more values."""
    metrics = [(k, t) for k, t in SWEEP_METRICS
               if any(p.get(k) is not None for p in part.points)]
    charts: list[Chart] = []
    if not part.points or not metrics:
        return charts
    for a in part.axes:
        if len(a["values"]) < 2:
            continue
        chart, note = _sweep_chart(part, a, metrics)
        charts.append(Chart(f"{prefix}-{a['name']}", f"Headline figures against {a['name']}",
                            _spec(chart), note))
    return charts


def _sweep_html(part: SweepPart) -> list[str]:
    names = [a["name"] for a in part.axes]
    shape = " x ".join(str(len(a["values"])) for a in part.axes) or "1"
    axes = ", ".join(f"{a['name']} ({a['key']}): {', '.join(value_text(v) for v in a['values'])}"
                     for a in part.axes)
    cols = ["run", *names, "requests", "mean_ms", "p50_ms", "p99_ms", "mb_per_s", "iops"]
    if any(p.get("rebuild_window_s") is not None for p in part.points):
        cols.append("rebuild_window_s")
    out = [f"<h2>Sweep {html.escape(part.folder)}</h2>",
           f'<p class="note">{len(part.points)} point(s) finished, {len(part.failed)} failed; '
           f"{html.escape(part.mode)} of {shape}: {html.escape(axes)}. Runs are named by "
           "point id; the summary is <code>summary/**/*.parquet</code> (hive partitioning)."
           "</p>",
           _table([{c: p.get(c) for c in cols} for p in part.points], cols)]
    if part.failed:
        out += ["<h3>Failed points</h3>", _table(part.failed, ["point", "name", "error"])]
    return out


# ---------------------------------------------------------------------------------------------
# the page


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}"
        if abs(v) >= 1000:
            return f"{v:,.1f}"
        return f"{v:.4g}" if abs(v) < 1 else f"{v:.3f}"
    return str(v)


def _table(rows: list[dict[str, Any]], cols: list[str] | None = None) -> str:
    if not rows:
        return "<p>(none)</p>"
    cols = cols or list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(
        f'<td class="{"num" if isinstance(r.get(c), int | float) else "txt"}">'
        f"{html.escape(_fmt(r.get(c)))}</td>" for c in cols) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _json_safe(text: str) -> str:
    """JSON text that cannot close the <script> element it is inlined in."""
    return text.replace("</", "<\\/").replace("<!--", "<\\u0021--")


def _js_safe(text: str) -> str:
    """JavaScript that cannot close its <script> element: only the sequences the HTML parser
    acts on are escaped (a blanket "</" escape would change regular expressions)."""
    text = re.sub(r"</(script)", r"<\\/\1", text, flags=re.IGNORECASE)
    return re.sub(r"<!--", r"<\\!--", text)


_CSS = """
body { font-family: sans-serif; margin: 1.5em 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
p.note { color: #555; font-size: 0.9em; } code { font-size: 0.95em; }
"""

_DRAW = """
(function () {
  var specs = JSON.parse(document.getElementById('blocklab-specs').textContent);
  var ids = Object.keys(specs);
  Promise.all(ids.map(function (id) {
    return vegaEmbed('#chart-' + id, specs[id], {renderer: 'svg', actions: false});
  })).then(function () {
    document.body.setAttribute('data-charts-drawn', String(ids.length));
  }).catch(function (e) {
    document.body.setAttribute('data-charts-error', String(e && e.message || e));
    console.error(e);
  });
})();
"""


def render_html(sources: list[Source], compare: list[dict[str, Any]], charts: list[Chart],
                extra: dict[str, Any], title: str | None = None) -> str:
    """The page's HTML text."""
    title = title or "blocklab report: " + ", ".join(s.name for s in sources[:4]) + (
        f" and {len(sources) - 4} more" if len(sources) > 4 else "")
    runs = [{"run": s.name, "trace": s.run.trace.path if s.run and s.run.trace else "",
             "array": s.run.array.path if s.run and s.run.array else "",
             "requests": s.run.counts.requests if s.run and s.run.counts else None,
             "blocklab": s.run.blocklab_version if s.run else None} for s in sources]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>", f"<style>{_CSS}</style>",
        f"<script>{_js_safe(_bundle())}</script>",
        "</head><body>", f"<h1>{html.escape(title)}</h1>",
        "<h2>Summary</h2>",
        '<p class="note">Headline figures per run (the <code>compare</code> query): MB/s are '
        "10<sup>6</sup> bytes per second from the first arrival to the last completion; "
        "latencies in ms.</p>",
        _table(compare),
        "<h2>Runs</h2>", _table(runs),
    ]
    for part in extra.get("sweeps") or []:
        parts += _sweep_html(part)
    rw = extra.get("rebuild_windows") or []
    if rw:
        parts += ["<h2>Failures and rebuilds</h2>",
                  '<p class="note">The <code>rebuild-windows</code> query.</p>',
                  _table(rw, ["run", "group", "drive", "failure_s", "rebuild_end_s",
                              "window_s", "window_host_s", "rebuild_done", "before_mb_per_s",
                              "window_mb_per_s", "mb_per_s_ratio", "before_p99_ms",
                              "window_p99_ms", "p99_ratio"])]
        ph = [r for r in extra.get("phases") or [] if r["requests"]]
        if ph:
            parts += ['<p class="note">Per operation before the first failure, while '
                      "rebuilding and after (the <code>phases</code> query): MB/s and IOPS "
                      "over the part of the phase in which the operation was active.</p>",
                      _table(ph, ["run", "phase", "op", "requests", "mb_per_s", "iops",
                                  "mean_ms", "p99_ms"])]
    for c in charts:
        parts.append(f"<h2>{html.escape(c.title)}</h2>")
        if c.note:
            parts.append(f'<p class="note">{html.escape(c.note)}</p>')
        parts.append(f'<div class="chart" id="chart-{c.id}"></div>')
    specs = json.dumps({c.id: c.spec for c in charts}, separators=(",", ":"))
    parts += [
        f'<script type="application/json" id="blocklab-specs">{_json_safe(specs)}</script>',
        f"<script>{_DRAW}</script>",
        f'<p class="note">blocklab {html.escape(__version__)}</p>',
        "</body></html>",
    ]
    return "\n".join(parts)


def _write(path: Path, data: bytes) -> None:
    with atomic_output(path) as tmp:
        tmp.write_bytes(data)


def report(paths: Iterable[str | os.PathLike[str]], output: str | os.PathLike[str],
           png_dir: str | os.PathLike[str] | None = None,
           svg_dir: str | os.PathLike[str] | None = None,
           title: str | None = None) -> ReportResult:
    """Write the report page for the run folders ``paths`` to ``output`` (and each chart as
    PNG/SVG into ``png_dir``/``svg_dir``). The page is locked from the start: a second
    report writing it meanwhile stops with one line (traces/safety.py)."""
    out = Path(output)
    paths = list(paths)
    if out.parent and not out.parent.is_dir():
        raise BlocklabError(f"-o {out}: the folder {out.parent} does not exist")
    not_an_input(out, paths)  # (--png/--svg add CHART.png files: no run's file has such names)
    with output_lock(output):
        made: list[Path] = []
        try:
            return _report(list(paths), output, png_dir, svg_dir, title, made)
        except BaseException:  # stopped or failed: no charts of a page that was not written
            for f in reversed(made):
                with contextlib.suppress(OSError):
                    f.rmdir() if f.is_dir() else f.unlink()
            raise


def _report(paths: list[str | os.PathLike[str]], output: str | os.PathLike[str],
            png_dir: str | os.PathLike[str] | None, svg_dir: str | os.PathLike[str] | None,
            title: str | None, made: list[Path]) -> ReportResult:
    try:
        sources = find_sources(paths)
    except BlocklabError as e:
        raise BlocklabError(f"report: {e}") from None
    traces = [s.name for s in sources if s.kind == "trace"]
    if traces:
        raise BlocklabError(f"report: {traces[0]} is a trace; the report reads run folders "
                            "(blocklab replay -o RUN)")
    if not sources:
        raise BlocklabError("report: no run folder given")
    compare, charts, extra = build(sources)
    sweeps = [read_sweep(p) for p in paths if is_sweep(p)]
    extra["sweeps"] = sweeps
    charts = [c for i, part in enumerate(sweeps)
              for c in sweep_charts(part, "sweep" if len(sweeps) == 1 else f"sweep{i + 1}")
              ] + charts
    page = render_html(sources, compare, charts, extra, title)
    out = Path(output)
    pngs: list[str] = []
    svgs: list[str] = []
    vl = _vl_version()
    for folder, kind, dest in ((png_dir, "png", pngs), (svg_dir, "svg", svgs)):
        if folder is None:
            continue
        d = Path(folder)
        if not d.exists():
            made.append(d)  # removed again (when empty) if the report fails
        make_folders(d)
        for c in charts:
            f = d / f"{c.id}.{kind}"
            try:
                data = (vlc.vegalite_to_png(c.spec, vl_version=vl) if kind == "png"
                        else vlc.vegalite_to_svg(c.spec, vl_version=vl).encode())
            except Exception as e:  # vl-convert raises ValueError with the Vega message
                raise BlocklabError(f"report: chart {c.id}: {kind}: {e}") from None
            _write(f, data)
            made.append(f)
            dest.append(str(f))
    _write(out, page.encode())
    return ReportResult(output=str(out), runs=[s.name for s in sources],
                        charts=[c.id for c in charts], png=pngs, svg=svgs)


# ---------------------------------------------------------------------------------------------
# the miss-ratio curve of `blocklab cache mrc --html`


def mrc_chart(result: dict[str, Any]) -> Chart:
    """The LRU miss-ratio curve (miss ratio against cache size, log axis; all, read and write
    accesses), with the working set marked: the size from which only cold misses are left."""
    curve = result["curve"]
    rows = []
    for k, size in enumerate(curve["size_bytes"]):
        for label, key in (("all", "miss_ratio"), ("read", "read_miss_ratio"),
                           ("write", "write_miss_ratio")):
            v = curve[key][k]
            if v is not None:
                rows.append({"cache_mib": size / 2**20, "miss_ratio": v, "accesses": label})
    lines = alt.Chart(alt.Data(values=rows)).mark_line(point=True).encode(
        x=alt.X("cache_mib:Q", scale=alt.Scale(type="log"), title="cache size (MiB)"),
        y=alt.Y("miss_ratio:Q", scale=alt.Scale(domain=[0, 1]), title="miss ratio"),
        color=alt.Color("accesses:N", title="accesses"),
        tooltip=["accesses:N", "cache_mib:Q", "miss_ratio:Q"])
    wss = [{"wss_mib": result["working_set_bytes"] / 2**20, "label": "working set"}]
    rule = alt.Chart(alt.Data(values=wss)).mark_rule(strokeDash=[6, 3]).encode(
        x="wss_mib:Q", tooltip=["label:N", "wss_mib:Q"])
    text = alt.Chart(alt.Data(values=wss)).mark_text(align="left", dx=4, dy=-6, y=0).encode(
        x="wss_mib:Q", text="label:N")
    spec = _spec(alt.layer(lines, rule, text).properties(width=640, height=320))
    note = (f"{result['method']}; {result['block_bytes']} B blocks; {result['accesses']:,} "
            f"block accesses of {result['requests']:,} requests; working set "
            f"{result['working_set_bytes'] / 2**20:,.1f} MiB")
    return Chart("mrc", "LRU miss-ratio curve", spec, note)


def write_mrc_page(result: dict[str, Any], output: str | os.PathLike[str],
                   title: str | None = None) -> str:
    """One self-contained HTML page with the miss-ratio curve and its table; returns the
    path written (atomically, owner-only)."""
    chart = mrc_chart(result)
    title = title or f"blocklab cache mrc: {result['trace']}"
    curve = result["curve"]
    table = [{"cache_bytes": s, "miss_ratio": curve["miss_ratio"][k],
              "read_miss_ratio": curve["read_miss_ratio"][k],
              "write_miss_ratio": curve["write_miss_ratio"][k]}
             for k, s in enumerate(curve["size_bytes"])]
    specs = json.dumps({chart.id: chart.spec}, separators=(",", ":"))
    page = "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>", f"<style>{_CSS}</style>",
        f"<script>{_js_safe(_bundle())}</script>", "</head><body>",
        f"<h1>{html.escape(title)}</h1>", f"<h2>{html.escape(chart.title)}</h2>",
        f'<p class="note">{html.escape(chart.note)}</p>',
        f'<div class="chart" id="chart-{chart.id}"></div>', _table(table),
        f'<script type="application/json" id="blocklab-specs">{_json_safe(specs)}</script>',
        f"<script>{_DRAW}</script>",
        f'<p class="note">blocklab {html.escape(__version__)}</p>', "</body></html>"])
    out = Path(output)
    if out.parent and not out.parent.is_dir():
        raise BlocklabError(f"--html {out}: the folder {out.parent} does not exist")
    # the page must not replace the trace it describes (it did, `--html T.parquet`, exit 0)
    not_an_input(out, [result["trace"]])
    _write(out, page.encode())
    return str(out)
