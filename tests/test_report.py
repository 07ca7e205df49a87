"""``blocklab report``: the page renders in headless Chromium (Debian's chromium, no network)
without console messages and draws every chart; its charts carry what the named queries say;
PNG and SVG come out offline through vl-convert; bad input fails in one line."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.query import run_query
from blocklab.pipeline.report import _nice_step, is_size_sweep

from . import golden
from .conftest import needs
from .golden import make_run

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

runner = CliRunner()


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return golden.build(tmp_path_factory.mktemp("rep"))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """Three runs of one transfer size each (4 KiB, 64 KiB, 1 MiB): a size sweep."""
    root = tmp_path_factory.mktemp("sweep")
    rng = np.random.default_rng(7)
    for s in (4096, 65536, 1 << 20):
        n = 80
        make_run(root / f"{s // 1024}k", {
            "arrival_ns": np.sort(rng.integers(0, 3_000_000_000, n)),
            "latency_ns": rng.integers(500_000, 2_000_000, n) + s * 20,
            "op": rng.integers(0, 2, n), "size_bytes": np.full(n, s)},
            busy={"drive": np.repeat(np.arange(2), 3), "time_ns": np.tile(np.arange(3), 2) * 10**9,
                  "busy_ns": rng.integers(0, 10**9, 6)})
    return root


def _report(args: list[str]) -> dict:
    res = runner.invoke(app, ["report", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def _specs(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="blocklab-specs">(.*?)</script>', page,
                  re.S)
    assert m
    return json.loads(m.group(1))


def _values(spec: dict) -> list[list[dict]]:
    """Every inline data set of a (possibly layered / concatenated) Vega-Lite spec."""
    found = []

    def walk(x):
        if isinstance(x, dict):
            if isinstance(x.get("data"), dict) and "values" in x["data"]:
                found.append(x["data"]["values"])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(spec)
    return found


def chromium(page: Path, tmp: Path) -> tuple[str, str]:
    """Load ``page`` in headless Chromium with name resolution disabled (no network); the DOM
    after scripts ran, and Chromium's log (console messages appear as CONSOLE lines)."""
    profile = tmp / "chromium-profile"
    profile.mkdir(exist_ok=True)
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND",
           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=60000",
           "--dump-dom", page.as_uri()]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout, p.stderr


def _body_attrs(dom: str) -> dict:
    """The attributes of the page's body element (script text is not parsed for tags)."""
    found: list[dict] = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag == "body":
                found.append(dict(attrs))

    P().feed(dom)
    assert len(found) == 1
    return found[0]


def _check_drawn(dom: str, log: str, charts: list[str]) -> dict[str, str]:
    console = [line for line in log.splitlines() if ":CONSOLE" in line]
    assert not console, console
    body = _body_attrs(dom)
    assert body == {"data-charts-drawn": str(len(charts))}, body
    parts = {}
    for i, c in enumerate(charts):
        start = dom.index(f'id="chart-{c}"')
        end = min([dom.index(f'id="chart-{d}"') for d in charts[i + 1:]]
                  + [dom.index('id="blocklab-specs"')])
        part = dom[start:end]
        assert "<svg" in part, c
        marks = re.findall(r'class="mark-(\w+)', part)
        assert marks, c
        assert len(re.findall(r"<path", part)) > 0, c
        parts[c] = part
    return parts


@needs("chromium")
def test_page_renders_every_chart_offline(work, tmp_path):
    out = tmp_path / "report.html"
    r = _report([str(work / "runs"), "-o", str(out)])
    assert r["charts"] == ["bandwidth", "latency-cdf", "percentiles", "utilization"]
    page = out.read_text()
    # self-contained: no tag of the page (script bodies aside) loads anything
    tags = re.sub(r"(<script[^>]*>).*?</script>", r"\1", page, flags=re.S)
    assert tags.count("<script") == 3
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", tags)
    dom, log = chromium(out, tmp_path)
    parts = _check_drawn(dom, log, r["charts"])
    # the failure of raid5 is marked: a rect layer (the rebuild window) and a rule
    assert "mark-rect" in parts["bandwidth"] and "mark-rule" in parts["bandwidth"]
    assert "mark-rect" in parts["utilization"]


@needs("chromium")
def test_size_sweep_page(sweep, tmp_path):
    out = tmp_path / "sweep.html"
    r = _report([str(sweep), "-o", str(out), "--title", "sweep"])
    assert r["charts"] == ["bandwidth", "latency-cdf", "percentiles", "utilization",
                           "size-sweep"]
    dom, log = chromium(out, tmp_path)
    parts = _check_drawn(dom, log, r["charts"])
    assert "mark-symbol" in parts["size-sweep"] and "mark-line" in parts["size-sweep"]
    assert "<title>sweep</title>" in dom


def test_charts_carry_the_queries_answers(work, tmp_path):
    out = tmp_path / "r.html"
    _report([str(work / "runs"), "-o", str(out)])
    page = out.read_text()
    specs = _specs(page)
    runs = str(work / "runs")
    # bandwidth: the step the report chose, and the query's rows at that step
    cmp = {r["metric"]: r for r in run_query([runs], "compare").rows()}
    step = _nice_step(max(cmp["duration_s"]["raid0"], cmp["duration_s"]["raid5"]), 150)
    bw = run_query([runs], "bandwidth", params={"interval_s": repr(step)}).rows()
    data = _values(specs["bandwidth"])
    assert bw in data
    windows = [d for d in data if d and "failure_s" in d[0]]
    assert windows and all(len(w) == 1 for w in windows)
    w = windows[0][0]
    assert (w["run"], w["failure_s"], w["window_end_s"]) == (
        "raid5", golden.FAILURE_NS / 1e9, golden.REBUILD_END_NS / 1e9)
    cdf = run_query([runs], "latency-cdf").rows()
    assert [r for r in cdf if r["latency_ms"] > 0] in _values(specs["latency-cdf"])
    util = run_query([runs], "drive-utilization").rows()
    got = _values(specs["utilization"])[0]
    assert [{k: v for k, v in g.items() if k != "t_end_s"} for g in got] == util
    pct = _values(specs["percentiles"])[0]
    summ = run_query([runs], "latency-summary").rows()
    p99 = {(r["run"], r["op"]): r["p99_ms"] for r in summ if r["size_class_bytes"] is None}
    assert {(r["run"], r["op"]): r["latency_ms"] for r in pct
            if r["percentile"] == "p99"} == p99
    # the summary table at the top is the compare query
    top = page.index("<h2>Summary</h2>")
    assert top < page.index('id="chart-bandwidth"')
    table = page[top:page.index("</table>", top)]
    assert "<th>raid0</th>" in table and "<th>raid5</th>" in table
    assert f"{int(cmp['requests']['raid0']):,}" in table
    assert "<h2>Failures and rebuilds</h2>" in page


def test_png_and_svg(work, tmp_path):
    out = tmp_path / "r.html"
    r = _report([str(work / "runs"), "-o", str(out), "--png", str(tmp_path / "png"),
                 "--svg", str(tmp_path / "svg")])
    assert [Path(p).name for p in r["png"]] == [f"{c}.png" for c in r["charts"]]
    assert [Path(p).name for p in r["svg"]] == [f"{c}.svg" for c in r["charts"]]
    for p in r["png"]:
        data = Path(p).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        w, h = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert w > 200 and h > 100, p
    for p in r["svg"]:
        root = ET.parse(p).getroot()
        assert root.tag.endswith("svg")
        assert len(list(root.iter("{http://www.w3.org/2000/svg}path"))) > 0, p
    for p in [out, *map(Path, r["png"] + r["svg"])]:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600


def test_size_sweep_detection():
    rows = [{"run": "a", "size_bytes": 4096}, {"run": "b", "size_bytes": 8192}]
    assert is_size_sweep(rows)
    assert not is_size_sweep(rows[:1])
    assert not is_size_sweep([*rows, {"run": "c", "size_bytes": None}])
    assert not is_size_sweep([{"run": "a", "size_bytes": 4096}, {"run": "b", "size_bytes": 4096}])


def test_nice_step():
    assert _nice_step(10.0, 150) == 0.1
    assert _nice_step(3600.0, 150) == 50.0
    assert _nice_step(0.0, 150) == 0.001
    for span in (1.0, 7.3, 99.0, 12345.0):
        s = _nice_step(span, 150)
        assert span / s <= 150 and span / (s / 2.5) > 150 * 0.999
    # answers of 2 x 10^k: 30 s in 150 points is 0.2 s steps, 2.5 h in 100 points 100 s / 2
    assert _nice_step(30.0, 150) == 0.2 and _nice_step(0.27, 150) == 0.002
    assert _nice_step(18_000.0, 100) == 200.0


@settings(max_examples=300, deadline=None)
@given(span=st.floats(0.0, 1e7), points=st.integers(1, 1000))
def test_nice_step_is_the_smallest_nice_step_that_fits(span, points):
    """The function's definition, by brute force: the smallest of {1, 2, 5} x 10^k (and at
    least 1 ms) at or above span / points, so that span / step is at most ``points``."""
    want = max(span / points, 1e-3)
    nice = sorted(m * 10.0 ** k for m in (1, 2, 5) for k in range(-3, 9))
    best = next(s for s in nice if s >= want * (1 - 1e-12))
    assert _nice_step(span, points) == pytest.approx(best, rel=1e-12)


def test_bad_input(work, tmp_path):
    out = tmp_path / "x.html"
    res = runner.invoke(app, ["report", str(work / "trace.parquet"), "-o", str(out)])
    assert res.exit_code == 2 and "is a trace" in res.output
    bad = tmp_path / "old"
    make_run(bad, {"arrival_ns": [0], "latency_ns": [1], "op": [0], "size_bytes": [512]},
             version=0)
    res = runner.invoke(app, ["report", str(bad), "-o", str(out)])
    assert res.exit_code == 2
    line = res.output.strip()
    assert len(line.splitlines()) == 1 and f"run {bad}" in line and "schema version 0" in line
    res = runner.invoke(app, ["report", str(work / "runs"), "-o",
                              str(tmp_path / "no" / "such" / "x.html")])
    assert res.exit_code == 2 and "does not exist" in res.output
    assert not out.exists() and not list(tmp_path.glob(".x.html*"))


def test_the_utilization_chart_spans_the_drives_time_in_bounded_cells(tmp_path):
    """Requests for 2 s, drives busy for 3,000 s (a rebuild after the last request): the
    utilization chart covers the 3,000 s in at most HEAT_BINS intervals a drive. It was sized
    from the requests' 2 s and kept the run's own 10 ms intervals: 300,000 cells a drive (a
    rebuild of 2,845 s after 2.1 s of requests made a 13.5 MB page in 23 s)."""
    from blocklab.pipeline.report import HEAT_BINS

    n, iv, cells = 50, 10_000_000, 300_000
    t = np.arange(cells, dtype=np.int64) * iv
    make_run(tmp_path / "run", {
        "arrival_ns": np.linspace(0, 2e9, n).astype(np.int64),
        "latency_ns": np.full(n, 1_000_000), "op": np.zeros(n), "size_bytes": np.full(n, 4096)},
        busy={"drive": np.zeros(cells, np.int32), "time_ns": t, "busy_ns": np.full(cells, iv)},
        drives=1, interval_ns=iv)
    out = tmp_path / "r.html"
    _report([str(tmp_path / "run"), "-o", str(out)])
    util = _values(_specs(out.read_text())["utilization"])[0]
    assert 0 < len(util) <= HEAT_BINS, len(util)
    assert max(r["t_s"] + r["interval_s"] for r in util) >= cells * iv / 1e9
    assert sum(r["busy_fraction"] * r["interval_s"] for r in util) == pytest.approx(cells * iv / 1e9)
