"""``blocklab trace iostat``: a case computed by hand, the plain-Python reference of the kernel
counters (tests/reference/iostat.py) on random traces and on the real tracefs capture in
../shared/traces (block-layer issue and completion times), run folders (host volume and
drive operations), and bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.ingest import ingest
from blocklab.pipeline.iostat import iostat, parse_interval
from blocklab.traces import store
from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import RUN_SCHEMAS, format_dev, make_dev

from .golden import make_run
from .reference import iostat as ref

runner = CliRunner()
FIGURES = ("r/s", "w/s", "rkB/s", "wkB/s", "rrqm/s", "wrqm/s", "r_await", "w_await", "aqu-sz",
           "rareq-sz", "wareq-sz", "%util")
S = 1_000_000_000


def write(path: Path, reqs: list[tuple], linux: bool = True, latency_only: bool = False,
          no_completion: bool = False) -> Path:
    """A trace of (device, op, arrival_ns, complete_ns, size_bytes, merges) rows."""
    n = len(reqs)
    cols = store.empty_columns(n)
    dev, op, a, c, size, merges = (np.array([r[k] for r in reqs]) for k in range(6))
    cols.update(time_ns=a.astype(np.int64), device=dev.astype(np.uint32),
                sector=np.arange(n, dtype=np.int64) * 64, size_bytes=size.astype(np.int64),
                op=op.astype(np.uint8), flags=np.zeros(n, np.uint16),
                merges=merges.astype(np.int32))
    if not no_completion:
        if latency_only:
            cols["latency_ns"] = (c - a).astype(np.int64)
        else:
            cols["complete_ns"] = c.astype(np.int64)
            cols["issue_ns"] = a.astype(np.int64)
    meta = store.TraceMeta(source_format="test", linux_devices=linux)
    with store.TraceWriter(path, meta) as w:
        w.write(store.columns_to_batch(cols))
    return path


def check(rows: list[dict], want: list[dict], where: str = "") -> None:
    got = {(r["device"], round(r["t_s"], 9)): r for r in rows}
    assert len(got) == len(rows) == len(want), (where, len(rows), len(want))
    for w in want:
        g = got[(w["device"], round(w["t_s"], 9))]
        assert math.isclose(g["interval_s"], w["interval_s"], rel_tol=1e-12), (where, w)
        for f in FIGURES:
            assert math.isclose(g[f], w[f], rel_tol=1e-9, abs_tol=1e-9), (where, w, f, g[f])


def test_a_case_computed_by_hand(tmp_path):
    d0, d1 = make_dev(8, 0), make_dev(8, 16)
    # 8,0: a read 0.2-0.6 s (4 KiB, 1 merge), a write 0.5-1.5 s (8 KiB), a read 1.8-1.9 s
    # (16 KiB, 2 merges); 8,16: a write 0.1-0.3 s (512 B). The run ends at 1.9 s: intervals
    # [0, 1) and [1, 1.9).
    path = write(tmp_path / "t.parquet", [
        (d0, 0, int(0.2 * S), int(0.6 * S), 4096, 1),
        (d0, 1, int(0.5 * S), int(1.5 * S), 8192, 0),
        (d0, 0, int(1.8 * S), int(1.9 * S), 16384, 2),
        (d1, 1, int(0.1 * S), int(0.3 * S), 512, 0),
    ])
    r = iostat(path, 1.0)
    rows = {(x["device"], x["t_s"]): x for x in r.rows}
    assert [(x["t_s"], x["device"]) for x in r.rows] == [
        (0.0, "8,0"), (0.0, "8,16"), (1.0, "8,0"), (1.0, "8,16")]
    a = rows[("8,0", 0.0)]
    # completed in [0, 1): the read (0.4 s in queue and service; 4 KiB; one merge).
    # in progress: the read 0.4 s + the write 0.5 s = 0.9 request-seconds; busy 0.2-1.0
    assert (a["r/s"], a["w/s"], a["rkB/s"], a["rrqm/s"]) == (1, 0, 4, 1)
    assert a["r_await"] == pytest.approx(400) and a["rareq-sz"] == 4 and a["w_await"] == 0
    assert a["aqu-sz"] == pytest.approx(0.9) and a["%util"] == pytest.approx(80)
    b = rows[("8,0", 1.0)]
    # [1, 1.9), 0.9 s long: the write (1000 ms, 8 KiB) and the second read (100 ms, 16 KiB,
    # 2 merges); in progress 0.5 + 0.1 request-seconds; busy 1.0-1.5 and 1.8-1.9
    assert b["interval_s"] == pytest.approx(0.9)
    assert b["r/s"] == pytest.approx(1 / 0.9) and b["w/s"] == pytest.approx(1 / 0.9)
    assert b["rkB/s"] == pytest.approx(16 / 0.9) and b["wkB/s"] == pytest.approx(8 / 0.9)
    assert b["rrqm/s"] == pytest.approx(2 / 0.9) and b["wrqm/s"] == 0
    assert b["r_await"] == pytest.approx(100) and b["w_await"] == pytest.approx(1000)
    assert b["aqu-sz"] == pytest.approx(0.6 / 0.9) and b["%util"] == pytest.approx(60 / 0.9)
    assert b["rareq-sz"] == 16 and b["wareq-sz"] == 8
    c = rows[("8,16", 0.0)]
    assert c["w/s"] == 1 and c["wkB/s"] == 0.5 and c["w_await"] == pytest.approx(200)
    assert c["%util"] == pytest.approx(20) and c["aqu-sz"] == pytest.approx(0.2)
    assert all(rows[("8,16", 1.0)][f] == 0 for f in FIGURES)
    idle = {x["device"]: x for x in r.idle}
    # 8,0 is busy 0.2-1.5 and 1.8-1.9: one idle period of 300 ms in 1.7 s
    assert idle["8,0"]["busy_periods"] == 2 and idle["8,0"]["idle_periods"] == 1
    assert idle["8,0"]["max_ms"] == pytest.approx(300) and idle["8,0"]["0.1-1s"] == 1
    assert idle["8,0"]["idle_fraction"] == pytest.approx(0.3 / 1.7)
    assert idle["8,16"]["idle_periods"] == 0 and idle["8,16"]["mean_ms"] is None
    # the same with --device, and from latency_ns alone (no complete_ns)
    only = iostat(path, 1.0, "8:16")
    assert {x["device"] for x in only.rows} == {"8,16"} and len(only.rows) == 2
    lat = write(tmp_path / "lat.parquet", [
        (d0, 0, int(0.2 * S), int(0.6 * S), 4096, 1), (d0, 1, int(0.5 * S), int(1.5 * S),
                                                       8192, 0)], latency_only=True)
    assert iostat(lat, 1.0).rows[0]["aqu-sz"] == pytest.approx(0.9)


reqs_st = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 3 * S),
              st.integers(0, S), st.sampled_from([512, 4096, 65536]), st.integers(0, 3)),
    min_size=1, max_size=40)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reqs_st, st.sampled_from([0.25, 0.7, 1.0, 5.0]))
def test_against_the_reference_property(tmp_path_factory, reqs, interval_s):
    rows = [(make_dev(8, 16 * d), op, a, a + lat, size, m) for d, op, a, lat, size, m in reqs]
    path = write(tmp_path_factory.mktemp("p") / "t.parquet", rows)
    got = iostat(path, interval_s)
    rr = [ref.Req(format_dev(d), op, a, c, size, m) for d, op, a, c, size, m in rows]
    check(got.rows, ref.iostat(rr, round(interval_s * S)), f"interval {interval_s}")
    check_idle(got.idle, rr)


BUCKETS = {"<0.1ms": (0, 1e5), "0.1-1ms": (1e5, 1e6), "1-10ms": (1e6, 1e7),
           "10-100ms": (1e7, 1e8), "0.1-1s": (1e8, 1e9), ">=1s": (1e9, math.inf)}


def check_idle(idle: list[dict], rr: list[ref.Req]) -> None:
    """Every idle-times figure of every device against the reference's idle periods, with
    NumPy's mean and quantiles: busy time is first arrival to last completion less the gaps."""
    gaps = ref.idle_periods(rr)
    assert sorted(x["device"] for x in idle) == sorted(gaps)
    for x in idle:
        g = np.array(gaps[x["device"]], dtype=float)
        mine = [r for r in rr if r.device == x["device"] and r.complete_ns >= r.arrival_ns]
        span = max(r.complete_ns for r in mine) - min(r.arrival_ns for r in mine)
        assert x["idle_periods"] == len(g) and x["busy_periods"] == len(g) + 1
        assert x["idle_s"] == pytest.approx(g.sum() / 1e9, abs=1e-12)
        assert x["busy_s"] == pytest.approx((span - g.sum()) / 1e9, abs=1e-12)
        for name, (lo, hi) in BUCKETS.items():
            assert x[name] == int(((g >= lo) & (g < hi)).sum()), (name, x)
        if not len(g):
            assert x["mean_ms"] is None and x["p90_ms"] is None
            continue
        assert x["idle_fraction"] == pytest.approx(g.sum() / span)
        assert x["mean_ms"] == pytest.approx(g.mean() / 1e6)
        assert x["max_ms"] == pytest.approx(g.max() / 1e6)
        for key, f in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99)):
            assert x[key] == pytest.approx(np.quantile(g, f) / 1e6), (key, x)


def test_idle_times_of_known_gaps(tmp_path):
    """One device idle for 0.05, 0.5, 2, 3, 20, 200 and 1500 ms between 1 ms requests (one
    gap in each length bucket, two in 1-10 ms): the mean is their sum over 7, p90 is
    numpy.quantile's linear interpolation 200 + 0.4 x 1300 ms = 720 ms."""
    gaps_ms = [0.05, 0.5, 2, 3, 20, 200, 1500]
    t, reqs = 0, []
    for g in [*gaps_ms, 0]:
        reqs.append((make_dev(8, 0), 0, t, t + 1_000_000, 4096, 0))
        t += 1_000_000 + round(g * 1e6)
    got = iostat(write(tmp_path / "t.parquet", reqs), 1.0)
    (x,) = got.idle
    assert x["idle_periods"] == 7 and x["busy_periods"] == 8
    assert x["p90_ms"] == pytest.approx(720) and x["mean_ms"] == pytest.approx(1725.55 / 7)
    assert x["busy_s"] == pytest.approx(0.008) and x["idle_s"] == pytest.approx(1.72555)
    assert [x[k] for k in BUCKETS] == [1, 1, 2, 1, 1, 1]
    check_idle(got.idle, [ref.Req(format_dev(d), o, a, c, s, m) for d, o, a, c, s, m in reqs])


def test_a_request_completing_on_the_last_interval_boundary(tmp_path):
    """The run ends when its last request completes: one that completes exactly on an
    interval's boundary counts in the interval that ends there (the last one), not in one
    past the run's end. One read from 0.2 s to exactly 1.0 s at --interval 1s: one interval,
    r/s 1, r_await 800 ms, %util 80."""
    d0, d1 = make_dev(8, 0), make_dev(8, 16)
    one = write(tmp_path / "one.parquet", [(d0, 0, int(0.2 * S), S, 4096, 0)])
    (row,) = iostat(one, 1.0).rows
    assert (row["t_s"], row["interval_s"], row["r/s"], row["rkB/s"]) == (0, 1, 1, 4)
    assert row["r_await"] == pytest.approx(800) and row["%util"] == pytest.approx(80)
    assert row["aqu-sz"] == pytest.approx(0.8)
    # completions on every boundary of 0.5 s on two devices, the last at 2.0 s
    reqs = [(d0, 0, 0, S // 2, 4096, 0), (d1, 1, S // 4, S, 8192, 1),
            (d0, 1, S, 3 * S // 2, 512, 0), (d1, 0, S // 2, 2 * S, 65536, 2),
            (d0, 0, 3 * S // 2, 2 * S, 4096, 1)]
    path = write(tmp_path / "edges.parquet", reqs)
    rr = [ref.Req(format_dev(d), op, a, c, size, m) for d, op, a, c, size, m in reqs]
    got = iostat(path, 0.5)
    check(got.rows, ref.iostat(rr, S // 2), "boundaries")
    for op, key in ((0, "r/s"), (1, "w/s")):  # every request is counted once
        assert sum(r[key] * r["interval_s"] for r in got.rows) == pytest.approx(
            sum(x[1] == op for x in reqs))


def test_real_capture(shared, tmp_path):
    """The tracefs capture of fio on a loop device: the figures as the kernel counters define
    them, and the totals its README states (7,0 completed 633 reads and 889 writes)."""
    out = tmp_path / "cap.parquet"
    ingest([str(shared / "traces" / "tracefs-fio-loop0-vda.txt")], str(out))
    t = pq.read_table(out, columns=["device", "op", "time_ns", "complete_ns", "size_bytes",
                                    "merges"]).to_pylist()
    rr = [ref.Req(format_dev(x["device"]), x["op"], x["time_ns"], x["complete_ns"],
                  x["size_bytes"], x["merges"] or 0) for x in t if x["complete_ns"] is not None]
    for interval_s in (0.1, 1.0):
        got = iostat(out, interval_s)
        check(got.rows, ref.iostat(rr, round(interval_s * S)), f"capture {interval_s}")
        dev = [x for x in got.rows if x["device"] == "7,0"]
        assert round(sum(x["r/s"] * x["interval_s"] for x in dev)) == 633
        assert round(sum(x["w/s"] * x["interval_s"] for x in dev)) == 889
        # fio wrote 64 MiB of 1 MiB writes and 825 small random ones on 7,0
        assert sum(x["wkB/s"] * x["interval_s"] for x in dev) > 64 * 1024
    gaps = ref.idle_periods(rr)
    for x in got.idle:
        assert x["idle_periods"] == len(gaps[x["device"]])
        assert x["idle_s"] == pytest.approx(sum(gaps[x["device"]]) / 1e9)
    res = runner.invoke(app, ["trace", "iostat", str(out), "--interval", "500ms", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["interval_s"] == 0.5 and {r["device"] for r in doc["rows"]} == {"7,0", "254,0"}


def test_cli_streams_a_long_answer(tmp_path):
    """An answer of many intervals: --json writes the very text ``json.dumps`` gives of the
    whole result (``iostat``, every row in memory, against the reference above), row by row;
    the table shows the first and last rows of it and says how many there are."""
    rng = np.random.default_rng(4)
    reqs = []
    for k in range(300):  # 300 requests on two devices over 150 s: 300 rows at 1 s
        a = k * S // 2 + int(rng.integers(0, S // 4))
        reqs.append((make_dev(8, 16 * (k % 2)), k % 3 == 0, a, a + int(rng.integers(1, S // 5)),
                     4096 * int(rng.integers(1, 9)), int(rng.integers(0, 3))))
    path = write(tmp_path / "t.parquet", reqs)
    whole = iostat(path, 1.0)
    assert len(whole.rows) >= 290
    res = runner.invoke(app, ["trace", "iostat", str(path), "--json"])
    assert res.exit_code == 0, res.output
    assert res.stdout == json.dumps(whole.as_dict(), indent=2) + "\n"
    res = runner.invoke(app, ["trace", "iostat", str(path), "--max-rows", "10"])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("\u2502")]
    shown = [tuple(c.strip() for c in ln.strip("\u2502").split("\u2502")[:2]) for ln in lines]
    want = [(f"{r['t_s']:.3f}", r["device"]) for r in whole.rows]
    assert shown == [*want[:5], ("\u2026", "\u2026"), *want[-5:]] + shown[11:]
    assert f"({len(whole.rows):,} iostat rows, 10 shown" in res.stderr
    one = write(tmp_path / "one.parquet", reqs[:1])
    res = runner.invoke(app, ["trace", "iostat", str(one), "--json", "-i", "10s"])
    assert res.exit_code == 0 and res.stdout == json.dumps(iostat(one, 10.0).as_dict(),
                                                           indent=2) + "\n"


def test_run_folder_host_and_drives(tmp_path):
    run = make_run(tmp_path / "run", {"arrival_ns": [0, 200_000_000, 1_300_000_000],
                                      "latency_ns": [300_000_000, 900_000_000, 50_000_000],
                                      "op": [0, 1, 0], "size_bytes": [4096, 8192, 4096]})
    res = runner.invoke(app, ["trace", "iostat", str(run), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert {r["device"] for r in doc["rows"]} == {"host"}
    assert any("no drive_ops.parquet" in n for n in doc["notes"])
    host = [ref.Req("host", 0, 0, 300_000_000, 4096), ref.Req("host", 1, 200_000_000,
                                                              1_100_000_000, 8192),
            ref.Req("host", 0, 1_300_000_000, 1_350_000_000, 4096)]
    ops = [(0, 0, 10_000_000, 20_000_000, 100_000_000, 8, False),
           (1, 1, 210_000_000, 250_000_000, 1_000_000_000, 16, True),
           (0, -1, 50_000_000, 120_000_000, 150_000_000, 128, False)]
    n = len(ops)
    pq.write_table(pa.table({
        "drive": np.array([o[0] for o in ops], np.int32),
        "request": np.array([o[1] for o in ops], np.int64),
        "kind": np.zeros(n, np.uint8),
        "queued_ns": np.array([o[2] for o in ops], np.int64),
        "start_ns": np.array([o[3] for o in ops], np.int64),
        "complete_ns": np.array([o[4] for o in ops], np.int64),
        "sector": np.zeros(n, np.int64),
        "sectors": np.array([o[5] for o in ops], np.int64),
        "write": np.array([o[6] for o in ops]),
        "cache_hit": np.zeros(n, bool)}, schema=RUN_SCHEMAS["drive_ops"]),
        run / "drive_ops.parquet")
    got = iostat(run, 0.5)
    drives = [ref.Req(f"drive {o[0]}", int(o[6]), o[2], o[4], o[5] * 512) for o in ops]
    check(got.rows, ref.iostat(host + drives, S // 2), "run")
    assert {x["device"] for x in got.rows} == {"host", "drive 0", "drive 1"}
    assert {x["device"] for x in iostat(run, 0.5, "1").rows} == {"drive 1"}
    assert {x["device"] for x in iostat(run, 0.5, "host").rows} == {"host"}


def test_parse_interval():
    assert parse_interval("1s") == 1 and parse_interval("500ms") == 0.5
    assert parse_interval("2") == 2 and parse_interval("100us") == pytest.approx(1e-4)
    assert parse_interval("1m") == 60
    for bad in ("0", "0s", "-1s", "fast", "1 parsec"):
        with pytest.raises(BlocklabError, match="--interval"):
            parse_interval(bad)
    # the units it takes, all of them (the message offered three, where 168h and 7d work)
    assert parse_interval("7d") == 7 * 86400 and parse_interval("168h") == 7 * 86400
    with pytest.raises(BlocklabError, match="units ns, us, ms, s, m or min, h, d"):
        parse_interval("7x")


def test_capture_max_size_above_0():
    """--max-size 0 wrote an empty trace with exit 0."""
    from blocklab.pipeline.capture import parse_size

    assert parse_size("64K") == 65536 and parse_size("2G") == 2 << 30
    for bad in ("0", "0K"):
        with pytest.raises(BlocklabError, match="expected a size above 0"):
            parse_size(bad)
    with pytest.raises(BlocklabError, match="not a whole number of bytes"):  # (was 0 bytes)
        parse_size("0.0001")


def test_bad_input(tmp_path):
    d0 = make_dev(8, 0)
    good = write(tmp_path / "t.parquet", [(d0, 0, 0, 1000, 4096, 0)])
    none = write(tmp_path / "none.parquet", [(d0, 0, 0, 1000, 4096, 0)], no_completion=True)
    # a request at 2e8 s: 2e8 intervals of 1 s, two devices
    long = write(tmp_path / "long.parquet", [(d0, 0, 0, 1000, 4096, 0),
                                             (make_dev(8, 16), 0, 2 * 10**17, 2 * 10**17 + 1,
                                              4096, 0)])
    for args, words in (
            ([str(good), "--interval", "0"], "--interval 0"),
            ([str(good), "--interval", "-2s"], "--interval -2s"),
            ([str(good), "--interval", "soon"], "--interval soon"),
            ([str(good), "--device", "9:9"], "--device 9:9: no such device"),
            # a grid that filled the disk with DuckDB's temporary files
            ([str(good), "--interval", "1ns"], "expected a duration of at least 1us"),
            ([str(long)], "more than 100,000,000"),
            ([str(none)], "no completion times"),
            ([str(tmp_path / "missing.parquet")], "no such file")):
        res = runner.invoke(app, ["trace", "iostat", *args])
        assert res.exit_code == 2, (args, res.output)
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("blocklab: error:"), res.output
        assert words in lines[0], (words, lines[0])
        assert "Traceback" not in res.output
    assert not list(tmp_path.glob(".*tmp*"))


def test_query_iostat_of_a_trace_without_completions_says_why_it_has_no_rows(tmp_path):
    """``query T iostat`` (and idle-times) of a trace without completion times answers with
    no rows, as its device view has none, and says why as ``trace iostat``'s error does
    (it printed a bare "(no rows)"); a trace with them says nothing more."""
    d0 = make_dev(8, 0)
    none = write(tmp_path / "none.parquet", [(d0, 0, 0, 1000, 4096, 0)], no_completion=True)
    good = write(tmp_path / "good.parquet", [(d0, 0, 0, 1000, 4096, 0)])
    for name in ("iostat", "idle-times"):
        res = runner.invoke(app, ["query", str(none), name])
        assert res.exit_code == 0, res.output
        note = res.stderr.strip().replace("\n", " ")
        assert note.startswith(f"(no rows: trace {none}: no completion times"), note
        res = runner.invoke(app, ["query", str(good), str(none), name])
        assert res.exit_code == 0, res.output
        assert res.stderr == "", res.stderr  # good.parquet's rows: an answer, no note
    res = runner.invoke(app, ["query", str(good), "iostat"])
    assert res.exit_code == 0 and "no completion" not in res.output
    # no rows for another reason: a trace whose completions are its latencies has them, and a
    # query that does not read the device view does not need them
    lat = write(tmp_path / "lat.parquet", [(d0, 0, 0, 1000, 4096, 0)], latency_only=True)
    empty = write(tmp_path / "empty.parquet", [], no_completion=True)
    for args in ([str(lat), "iostat", "-p", "device=9:9"], [str(empty), "trace-sizes"]):
        res = runner.invoke(app, ["query", *args])
        assert res.exit_code == 0 and "no rows" in res.stderr, (args, res.output)
        assert "no completion" not in res.stderr, (args, res.stderr)


def test_the_row_limit_counts_every_device(tmp_path, monkeypatch):
    """MAX_ROWS is the rows of the whole answer, an interval's row for each device: three
    devices to 4.5 s at 1 s are 5 rows each and 15 in all, refused under a limit of 10 that
    each device alone is within (one device, 5 rows, is answered)."""
    from blocklab.pipeline import iostat as mod

    monkeypatch.setattr(mod, "MAX_ROWS", 10)
    end = 9 * S // 2
    three = write(tmp_path / "three.parquet", [(make_dev(8, 16 * d), 0, 0, end, 4096, 0)
                                               for d in range(3)])
    with pytest.raises(BlocklabError, match=r"15 rows .*more than 10;"):
        iostat(three, 1.0)
    one = write(tmp_path / "one.parquet", [(make_dev(8, 0), 0, 0, end, 4096, 0)])
    assert len(iostat(one, 1.0).rows) == 5
    res = runner.invoke(app, ["trace", "iostat", str(three)])
    assert res.exit_code == 2 and "15 rows" in res.output, res.output


def test_many_identical_requests(tmp_path):
    """A million requests at 20,000 instants 0.1 ms apart (about 50 at each), each in progress
    for 50 us: busy 50 us at each instant, idle between. The queries before took a request's
    busy period from two windows that ordered identical requests each their own way, and
    counted 1.019 to 1.023 busy seconds for 1.000, changing from run to run."""
    n = 1_000_000
    rng = np.random.default_rng(4)
    arrival = np.sort(rng.integers(0, 20_000, n) * 100_000)
    run = make_run(tmp_path / "run", {"arrival_ns": arrival, "latency_ns": np.full(n, 50_000),
                                      "op": rng.integers(0, 2, n), "size_bytes": np.full(n, 4096)})
    instants = np.unique(arrival)
    got = iostat(run, 1.0)
    busy_ns = len(instants) * 50_000
    busy_s = busy_ns / S
    assert sum(r["%util"] / 100 * r["interval_s"] for r in got.rows) == pytest.approx(busy_s)
    (idle,) = got.idle
    assert idle["busy_periods"] == len(instants) and idle["idle_periods"] == len(instants) - 1
    assert idle["busy_s"] == busy_s
    assert idle["idle_s"] == int(instants[-1] - instants[0] + 50_000 - busy_ns) / S
    assert idle["max_ms"] == pytest.approx(np.diff(instants).max() / 1e6 - 0.05)
