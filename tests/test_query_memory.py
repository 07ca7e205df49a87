"""The named queries that ran out of DuckDB's memory limit, over three million requests under a
50 MB limit (BLOCKLAB_DUCKDB_MEMORY) on one thread, each checked against NumPy on the same
requests: idle-times, iostat, workload and rebuild-windows. Before their rewrites each failed
here (Out of Memory: windows over a device's or run's whole stream, a LATERAL join holding
every request, a hash join built on ios), and now each answers under 40 MB here too;
tests/test_exact_quantiles.py does the same for latency-summary. One thread, because DuckDB's
memory for an operator grows with its threads.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from blocklab.pipeline.query import connect, find_sources, named

from .golden import event, make_run

N = 3_000_000
IV = 1_000_000_000  # iostat interval, ns
EXTENT = 2048  # sectors (extent_kib 1024)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    """A run of N requests: Poisson arrivals (100 us apart on average; 300 s), log-normal
    latencies (median 22 us: busy and idle periods alike), reads and writes of 4 and 64 KiB
    over 2^25 sectors, a third of them following on from the request before (same operation,
    the next sector); a drive failure a third in, its rebuild to two thirds, with progress
    events between."""
    rng = np.random.default_rng(21)
    arr = np.cumsum(rng.exponential(100_000, N)).astype(np.int64)
    lat = rng.lognormal(10, 1.5, N).astype(np.int64)
    op = rng.integers(0, 2, N).astype(np.uint8)
    size = rng.choice(np.array([4096, 65536]), N)
    sector = rng.integers(0, 1 << 22, N) * 8
    follow = np.flatnonzero(rng.random(N - 1) < 0.33) + 1
    follow = follow[np.diff(follow, prepend=-1) > 1]  # never two in a row
    op[follow] = op[follow - 1]
    sector[follow] = sector[follow - 1] + size[follow - 1] // 512
    t0, t1 = int(arr[-1]) // 3, 2 * int(arr[-1]) // 3
    events = [event(t0, "failure", drive=1), event(t0 + 1000, "rebuild_start", drive=1)]
    events += [{**event(t0 + (t1 - t0) * k // 10, "rebuild_progress", drive=1),
                "fraction": k / 10} for k in range(1, 10)]
    events.append(event(t1, "rebuild_end", drive=1))
    run = make_run(tmp_path_factory.mktemp("mem") / "run",
                   {"arrival_ns": arr, "latency_ns": lat, "op": op, "size_bytes": size,
                    "sector": sector}, events=events)
    return run, {"a": arr, "c": arr + lat, "lat": lat, "op": op, "size": size, "sector": sector,
                 "t0": np.int64(t0), "t1": np.int64(t1)}


def ask(run: Path, name: str, monkeypatch, memory: str = "50MB", **params) -> list[dict]:
    monkeypatch.setenv("BLOCKLAB_DUCKDB_MEMORY", memory)
    sources = find_sources([run])
    con = connect(sources, threads=1)
    try:
        rows = named(con, name, sources, {k: str(v) for k, v in params.items()}).to_pylist()
    finally:
        con.close()
    return rows


def idle_gaps(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Idle periods: in (arrival, completion) order, the time from the latest completion so
    far to an arrival after it."""
    o = np.lexsort((c, a))
    a, c = a[o], c[o]
    before = np.maximum.accumulate(c)[:-1]
    nxt = a[1:]
    return (nxt - before)[nxt > before]


def test_idle_times(big, monkeypatch):
    run, r = big
    g = idle_gaps(r["a"], r["c"])
    (row,) = ask(run, "idle-times", monkeypatch)
    span = int(r["c"].max() - r["a"].min())
    assert row["idle_periods"] == len(g) and row["busy_periods"] == len(g) + 1
    assert row["idle_s"] == int(g.sum()) / 1e9
    assert row["busy_s"] == (span - int(g.sum())) / 1e9
    assert row["max_ms"] == g.max() / 1e6
    for col, q in (("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99)):
        assert row[col] == pytest.approx(np.quantile(g, q) / 1e6, rel=1e-12)
    assert row["<0.1ms"] == int((g < 100_000).sum())
    assert row["0.1-1ms"] == int(((g >= 100_000) & (g < 1_000_000)).sum())


def test_iostat(big, monkeypatch):
    run, r = big
    # 60 MB: iostat reads the requests from Parquet in several scans at once rather than
    # keep a copy on the temporary disk (queries/iostat.sql r_all); a window over a device's
    # whole stream, what failed here, holds 3 M x (device, arrival, completion) and more
    rows = ask(run, "iostat", monkeypatch, memory="60MB")
    a, c, op = r["a"], r["c"], r["op"]
    last = (int(c.max()) - 1) // IV
    assert [x["t_s"] for x in rows] == [k * IV / 1e9 for k in range(last + 1)]
    length = np.array([x["interval_s"] for x in rows]) * 1e9
    k = np.minimum(c // IV, last)
    reads = np.bincount(k[op == 0], minlength=last + 1)
    assert np.array_equal(np.round([x["r/s"] for x in rows] * length / 1e9), reads)
    # busy time: the span less the idle periods; time in progress: every request's latency
    g = idle_gaps(a, c)
    busy = sum(x["%util"] / 100 * x["interval_s"] for x in rows)
    assert busy == pytest.approx((c.max() - a.min() - g.sum()) / 1e9, rel=1e-9)
    queue = sum(x["aqu-sz"] * x["interval_s"] for x in rows)
    assert queue == pytest.approx((c - a).sum() / 1e9, rel=1e-9)
    # per interval: the busy periods (a sweep in arrival order) cut at the intervals' bounds
    o = np.lexsort((c, a))
    sa, sc = a[o], c[o]
    reach = np.maximum.accumulate(sc)
    starts = np.flatnonzero(np.r_[True, sa[1:] > reach[:-1]])
    s, e = sa[starts], np.r_[reach[starts[1:] - 1], reach[-1]]
    busy_k = np.zeros(last + 1, np.int64)
    one = (s // IV == (e - 1) // IV) & (e > s)
    np.add.at(busy_k, s[one] // IV, e[one] - s[one])
    for s0, e0 in zip(s[~one & (e > s)].tolist(), e[~one & (e > s)].tolist(), strict=True):
        for kk in range(s0 // IV, (e0 - 1) // IV + 1):
            busy_k[kk] += min(e0, (kk + 1) * IV) - max(s0, kk * IV)
    util = np.array([x["%util"] for x in rows])
    assert np.allclose(util, 100 * busy_k / length, rtol=1e-12, atol=1e-9)


def test_workload(big, monkeypatch):
    run, r = big
    rows = ask(run, "workload", monkeypatch)
    got = {(x["section"], x["item"]): x["value"] for x in rows}
    a, op, sector, size = r["a"], r["op"], r["sector"], r["size"]
    end = sector + (size + 511) // 512
    assert got[("summary", "requests")] == N
    seq = 0
    for o in (0, 1):  # one device: the previous request of the same operation, in time order
        m = op == o
        oo = np.lexsort((end[m], sector[m], a[m]))
        s, e = sector[m][oo], end[m][oo]
        seq += int((s[1:] == e[:-1]).sum())
    assert got[("summary", "sequential_fraction")] == pytest.approx(seq / N, rel=1e-12)
    gaps = np.diff(np.sort(a))
    assert got[("summary", "interarrival_mean_ms")] == pytest.approx(gaps.mean() / 1e6,
                                                                     rel=1e-12)
    assert got[("summary", "interarrival_cv")] == pytest.approx(gaps.std() / gaps.mean(),
                                                                rel=1e-12)
    for item, q in (("interarrival_p50_ms", 0.5), ("interarrival_p99_ms", 0.99)):
        assert got[("summary", item)] == pytest.approx(np.quantile(gaps, q) / 1e6, rel=1e-12)

    def union_bytes(s: np.ndarray, e: np.ndarray) -> int:
        o = np.lexsort((e, s))
        s, e = s[o], e[o]
        reach = np.maximum.accumulate(e)
        new = np.r_[True, s[1:] > reach[:-1]]
        gaps = (s[1:] - reach[:-1])[new[1:]]
        return 512 * int(reach[-1] - s[0] - gaps.sum())

    assert got[("summary", "working_set_bytes")] == union_bytes(sector, end)
    assert got[("summary", "working_set_read_bytes")] == union_bytes(sector[op == 0],
                                                                     end[op == 0])
    assert got[("summary", "working_set_write_bytes")] == union_bytes(sector[op == 1],
                                                                      end[op == 1])
    ext, n = np.unique(sector // EXTENT * EXTENT, return_counts=True)
    top = np.lexsort((ext, -n))[:10]
    hot = [(x["item"], x["value"]) for x in rows if x["section"] == "hottest_extents"]
    assert hot == [(f"0:{ext[i]}", float(n[i])) for i in top]


def test_rebuild_windows(big, monkeypatch):
    run, r = big
    (row,) = ask(run, "rebuild-windows", monkeypatch)
    c, lat = r["c"], r["lat"]
    inside = (c >= r["t0"]) & (c < r["t1"])
    before = c < r["t0"]
    assert row["window_requests"] == int(inside.sum())
    assert row["before_requests"] == int(before.sum())
    assert row["window_p99_ms"] == pytest.approx(np.quantile(lat[inside], 0.99) / 1e6,
                                                 rel=1e-12)
    assert row["before_p99_ms"] == pytest.approx(np.quantile(lat[before], 0.99) / 1e6,
                                                 rel=1e-12)


def test_a_file_read_several_times_is_parsed_once(tmp_path):
    """A query that reads one Parquet file several times (compare reads ios.parquet five
    times) parses its footer once: each scan held its own parse outside DuckDB's memory
    limit, about 150 MB for a 1,000 M-request run (15,261 row groups), and compare over two
    such runs peaked at 2.1 GB. Here 20,000 row groups: five scans grow the process by less
    than one scan's share, where five parses grew it by five."""
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 200_000
    t = pa.table({c: np.arange(n, dtype=np.int64) for c in ("a", "b", "c", "d", "e", "f")})
    path = tmp_path / "many.parquet"
    pq.write_table(t, path, row_group_size=10)
    code = f"""
from blocklab.pipeline.query import duck
def rss():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0])
con = duck(threads=1)
scan = "SELECT count(*) FROM read_parquet('{path}') WHERE a < 0"
r0 = rss(); con.execute(scan).fetchall(); r1 = rss()
con.execute(" UNION ALL ".join([scan] * 5)).fetchall(); r5 = rss()
print(r1 - r0, r5 - r1)
"""
    one, five = map(int, subprocess.run([sys.executable, "-c", code], capture_output=True,
                                        text=True, check=True).stdout.split())
    assert one > 5_000, one  # KiB: the parse is large enough to see
    assert five < one / 2, (one, five)


def test_a_full_temporary_disk_is_said_as_such(big, monkeypatch, tmp_path):
    """DuckDB says "Out of Memory Error: failed to offload data block" when the spill no
    longer fits its temporary folder (BLOCKLAB_DUCKDB_TEMP_MAX, else 90 % of the disk's free
    space), which reads as too little RAM: the command says the temporary disk is full, where
    it is (TMPDIR) and what to do, on one line, exit 2, writing nothing to stdout."""
    from typer.testing import CliRunner

    from blocklab.pipeline.cli import app

    run, _r = big
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("BLOCKLAB_DUCKDB_MEMORY", "100MB")  # (it spills past this)
    monkeypatch.setenv("BLOCKLAB_DUCKDB_TEMP_MAX", "2MB")
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # (it keeps the first TMPDIR it read)
    res = CliRunner().invoke(app, ["query", str(run), "workload", "-f", "csv"])
    assert res.exit_code == 2, res.output
    (line,) = res.output.strip().splitlines()
    assert line.startswith(f"blocklab: error: query workload over {run}: temporary disk "
                           f"full: DuckDB spills what passes its 100MB memory limit into "
                           f"{tmp_path}, up to BLOCKLAB_DUCKDB_TEMP_MAX=2MB, and that is full ("
                           ), line
    assert "raise it, or set TMPDIR" in line


def test_a_disk_filled_by_another_writer_is_said_as_full():
    """Before DuckDB's own cap, the disk itself may fill (another writer on it, or a query
    that spills fast): DuckDB says "IO Error: Could not write file ...tmp: No space left on
    device", said the same way (seen by the walk-through filling /tmp)."""
    from blocklab.pipeline.query import _disk_full

    line = _disk_full('IO Error: Could not write file "/tmp/blocklab-duckdb-x/duckdb_temp_'
                      'storage-4.tmp": No space left on device')
    assert line.startswith("temporary disk full: DuckDB spills what passes its "), line
    assert "set TMPDIR to a folder on a disk with more room" in line
    other = 'IO Error: Could not write file "/data/out.parquet": No space left on device'
    assert _disk_full(other) == other  # (an output's own disk: said as it is)


@pytest.mark.parametrize("kind", ["BIGINT", "DOUBLE", "DECIMAL(12,3)"])
def test_interval_gaps_of_any_number_type(kind):
    """interval_gaps (queries/_macros.sql), open to --sql, over starts and ends of any number
    type and groups of any type, with ties of equal start, intervals without an end (null c)
    and thousands of intervals a group (many buckets), against a plain-Python sweep in
    (start, null end last) order. Its buckets are packed with the group's number: a DOUBLE
    start once made fractional buckets and no gap at all (found by review)."""
    from blocklab.pipeline.query import duck

    rng = np.random.default_rng(8)
    n = 5000
    g = rng.choice(np.array(["x", "y", "z"]), n)
    a = rng.integers(0, 20_000, n)
    c = a + rng.integers(0, 6, n)
    nul = rng.random(n) < 0.03
    want = []
    for grp in ("x", "y", "z"):
        m = g == grp
        order = sorted(zip(a[m], nul[m], c[m], strict=True))  # (start, no end last)
        reach = None
        for s, no_end, e in order:
            if reach is not None and s > reach:
                want.append((grp, float(reach), float(s)))
            if not no_end:
                reach = e if reach is None else max(reach, e)
    con = duck(threads=1)
    try:
        con.execute("CREATE TABLE t (g VARCHAR, a BIGINT, c BIGINT)")
        con.executemany("INSERT INTO t VALUES (?, ?, ?)",
                        [(str(x), int(y), None if z else int(w))
                         for x, y, w, z in zip(g, a, c, nul, strict=True)])
        got = con.sql(f"WITH s AS (SELECT g, CAST(a AS {kind}) AS a, "
                      f"CAST(c AS {kind}) AS c FROM t) "
                      "SELECT g, s, e FROM interval_gaps('s')").fetchall()
    finally:
        con.close()
    assert len(want) > 100
    assert sorted((x, float(s), float(e)) for x, s, e in got) == sorted(want)
