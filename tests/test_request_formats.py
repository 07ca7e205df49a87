"""The one-request-per-line formats (MSR, SPC, Alibaba, Tencent, fio v2/v3, DiskSim, MQSim,
DiskSim validate): Hypothesis round trips through independent writers, detection by content
under compression, chunk boundaries, bad input, real data and real fio."""

from __future__ import annotations

import gzip
import json
import lzma
import shutil
import subprocess

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.ingest import ingest
from blocklab.traces import schema as S
from blocklab.traces.store import open_trace

from . import request_writers as W
from .conftest import read_rows

runner = CliRunner()
OPS = {"read": S.OP_READ, "write": S.OP_WRITE, "discard": S.OP_DISCARD, "flush": S.OP_FLUSH,
       "datasync": S.OP_FLUSH}  # (fio's sync and datasync actions are both flushes)

# format -> (time quantum ns, max devices, ops, size quantum, has latency, stream kind)
SPEC = {
    "msr": (100, 4, ["read", "write"], 1, True, "host"),
    "spc": (1000, 3, ["read", "write"], 1, False, "dev"),
    "alibaba": (1000, 4, ["read", "write"], 1, False, None),
    "tencent": (10**9, 4, ["read", "write"], 512, False, "dev"),
    "fio3": (1000, 2, ["read", "write", "discard", "flush", "datasync"], 1, False, "dev"),
    "fio2": (1000, 2, ["read", "write", "discard", "flush", "datasync"], 1, False, "dev"),
    "disksim": (1, 8, ["read", "write"], 512, False, None),
    "mqsim": (1, 8, ["read", "write"], 512, False, None),
    "disksim-validate": (1000, 1, ["read", "write"], 512, True, None),
}
FORMAT_NAME = {"fio3": "fio", "fio2": "fio"}
FILES = ["/dev/sdb", "/mnt/data.bin"]  # fio reads names with %s: no blanks


@st.composite
def workload(draw, fmt):
    quantum, ndev, ops, size_q, has_lat, _stream = SPEC[fmt]
    n = draw(st.integers(1, 60))
    # gaps of up to several of the format's time quanta (Tencent's is a whole second)
    gaps = draw(st.lists(st.integers(0, max(10**7, 4 * quantum)), min_size=n, max_size=n))
    t = 0
    reqs = []
    for k in range(n):
        t += gaps[k] // quantum * quantum
        op = draw(st.sampled_from(ops))
        size = draw(st.integers(1, 2048)) * 512 if size_q == 512 else draw(st.integers(1, 2**20))
        r = {"t": t, "dev": draw(st.integers(0, ndev - 1)), "op": op,
             "sector": draw(st.integers(0, 2**40)), "size": size,
             "host": draw(st.sampled_from(["hm", "web", "prxy"])), "hit": draw(st.booleans())}
        if op in ("flush", "datasync"):
            r["sector"], r["size"] = 0, 0
        if has_lat:
            r["latency"] = draw(st.integers(1, 10**6)) * 1000 if fmt == "disksim-validate" \
                else draw(st.integers(0, 10**6)) * 100
        reqs.append(r)
    if fmt == "disksim-validate":  # closed loop: the next arrival follows completion + idle
        t = 0
        for r in reqs:
            r["t"] = t
            t += r["latency"] + draw(st.integers(0, 10**4)) * 1000
    return reqs


def write(fmt: str, reqs: list[dict]) -> str:
    if fmt == "fio3":
        return W.fio_v3(reqs, FILES)
    if fmt == "fio2":
        return W.fio_v2(reqs, FILES)
    return getattr(W, fmt.replace("-", "_") if fmt != "disksim-validate" else "validate")(reqs)


def check(fmt: str, rows: list[dict], reqs: list[dict]) -> None:
    _q, _n, _o, _s, has_lat, stream = SPEC[fmt]
    assert len(rows) == len(reqs)
    t0 = reqs[0]["t"]
    hosts = list(dict.fromkeys(r["host"] for r in reqs))
    for g, w in zip(rows, reqs, strict=True):
        assert g["time_ns"] == w["t"] - t0
        assert g["device"] == w["dev"]
        assert g["sector"] == w["sector"]
        assert g["size_bytes"] == w["size"]
        assert g["op"] == OPS[w["op"]]
        if has_lat:
            assert g["latency_ns"] == w["latency"]
        if stream == "host":
            assert g["stream"] == hosts.index(w["host"])
        elif stream == "dev":
            assert g["stream"] == w["dev"]
        if fmt == "disksim-validate":
            assert bool(g["flags"] & S.FLAG_CACHE_HIT) == w["hit"]
            assert g["complete_ns"] == g["time_ns"] + w["latency"]


SETTINGS = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _roundtrip(tmp_path_factory, fmt, reqs, explicit: bool):
    d = tmp_path_factory.mktemp(fmt)
    src = d / "trace.in"
    src.write_text(write(fmt, reqs))
    out = d / "out.parquet"
    name = FORMAT_NAME.get(fmt, fmt)
    res = ingest([str(src)], str(out), fmt=name if explicit else "auto")
    assert res.format == name
    check(fmt, read_rows(out), reqs)
    return out


@pytest.mark.parametrize("fmt", list(SPEC))
def test_round_trip(tmp_path_factory, fmt):
    @SETTINGS
    @given(reqs=workload(fmt), explicit=st.booleans())
    def run(reqs, explicit):
        _roundtrip(tmp_path_factory, fmt, reqs, explicit)

    run()


def test_msr_wall_clock_and_host(tmp_path):
    reqs = [{"t": 0, "dev": 1, "op": "read", "sector": 8, "size": 4096, "host": "hm",
             "latency": 1000}]
    (tmp_path / "m.csv").write_text(W.msr(reqs))
    ingest([str(tmp_path / "m.csv")], str(tmp_path / "m.parquet"))
    _pf, meta = open_trace(tmp_path / "m.parquet")
    # FILETIME 128166372000000000 = 2007-02-22 ... 00:00:00 UTC
    assert meta.start_utc.startswith("2007-02-22T")
    assert meta.host == "hm"


def test_tencent_wall_clock_and_seconds(tmp_path):
    """Tencent's timestamps are whole seconds since 1970: 1538352000 is 2018-10-01 00:00:00
    UTC, the trace's start; requests 0, 1 and 7 s later are 0, 1e9 and 7e9 ns in, and the
    trace lasts 7 s."""
    from blocklab.pipeline.stats import trace_stats

    reqs = [{"t": s * 10**9, "dev": 3, "op": op, "sector": 8 * s, "size": 4096}
            for s, op in ((0, "read"), (1, "write"), (7, "read"))]
    (tmp_path / "t.csv").write_text(W.tencent(reqs))
    res = ingest([str(tmp_path / "t.csv")], str(tmp_path / "t.parquet"), fmt="tencent")
    assert res.format == "tencent"
    _pf, meta = open_trace(tmp_path / "t.parquet")
    assert meta.start_utc.startswith("2018-10-01T00:00:00")
    assert [r["time_ns"] for r in read_rows(tmp_path / "t.parquet")] == [0, 10**9, 7 * 10**9]
    assert trace_stats(tmp_path / "t.parquet")["duration_s"] == 7.0


@pytest.mark.parametrize("fmt", ["fio2", "fio3"])
def test_fio_sync_and_datasync_are_flushes(tmp_path, fmt):
    """fio's iolog actions sync and datasync (fsync, fdatasync) are both flushes."""
    reqs = [{"t": 0, "dev": 0, "op": "write", "sector": 8, "size": 4096},
            {"t": 1000, "dev": 0, "op": "datasync", "sector": 0, "size": 0},
            {"t": 2000, "dev": 1, "op": "flush", "sector": 0, "size": 0},
            {"t": 3000, "dev": 1, "op": "datasync", "sector": 0, "size": 0}]
    text = write(fmt, reqs)
    assert text.count(" datasync") == 2 and text.count(" sync") == 1
    (tmp_path / "f.log").write_text(text)
    ingest([str(tmp_path / "f.log")], str(tmp_path / "f.parquet"))
    rows = read_rows(tmp_path / "f.parquet")
    assert [r["op"] for r in rows] == [S.OP_WRITE, S.OP_FLUSH, S.OP_FLUSH, S.OP_FLUSH]
    assert [r["device"] for r in rows] == [0, 0, 1, 1]


@pytest.mark.parametrize("comp", ["gzip", "xz", "zstd"])
def test_compressed_and_misnamed(tmp_path, comp):
    reqs = [{"t": k * 1000, "dev": k % 2, "op": "write", "sector": 8 * k, "size": 4096,
             "host": "h"} for k in range(100)]
    raw = W.alibaba(reqs).encode()
    pack = {"gzip": gzip.compress, "xz": lzma.compress,
            "zstd": zstandard.ZstdCompressor().compress}[comp]
    (tmp_path / "trace.parquet.txt").write_bytes(pack(raw))  # a name that lies
    res = ingest([str(tmp_path / "trace.parquet.txt")], str(tmp_path / "o.parquet"))
    assert res.format == "alibaba"
    check("alibaba", read_rows(tmp_path / "o.parquet"), reqs)


@pytest.mark.parametrize("fmt", ["msr", "mqsim", "fio3"])
def test_chunk_boundaries(tmp_path, monkeypatch, fmt):
    import blocklab.traces.io as io_mod

    reqs = [{"t": k * 1000, "dev": k % 2, "op": "read" if k % 3 else "write", "sector": 8 * k,
             "size": 512 * (1 + k % 7), "host": "hm", "latency": 500} for k in range(500)]
    (tmp_path / "t.in").write_text(write(fmt, reqs))
    fmt_name = FORMAT_NAME.get(fmt, fmt)
    ingest([str(tmp_path / "t.in")], str(tmp_path / "one.parquet"), fmt=fmt_name)
    monkeypatch.setattr(io_mod, "CHUNK_BYTES", 101)  # lines cut everywhere
    ingest([str(tmp_path / "t.in")], str(tmp_path / "many.parquet"), fmt=fmt_name)
    assert read_rows(tmp_path / "many.parquet") == read_rows(tmp_path / "one.parquet")
    # and a bad line deep in the file is still named by its true line number
    lines = (tmp_path / "t.in").read_text().splitlines()
    bad_at = 431
    lines[bad_at - 1] = "1,2,3" if fmt == "msr" else "x y z"
    (tmp_path / "bad.in").write_text("\n".join(lines) + "\n")
    res = runner.invoke(app, ["ingest", str(tmp_path / "bad.in"), "-o",
                              str(tmp_path / "bad.parquet"), "--format", fmt_name])
    assert res.exit_code == 2
    assert f"bad.in:{bad_at}:" in res.stderr


# --- bad input: one line naming the file and line, exit 2, nothing left behind

GOOD = {
    "msr": "128166372003061629,hm,1,Read,3154152960,32768,1985\n",
    "spc": "0,20941264,8192,W,0.551706\n",
    "alibaba": "3,R,4096,4096,1577836800000000\n",
    "tencent": "1538352000,8,8,1,1063\n",
    "mqsim": "1000 0 8 8 1\n",
    "fio": None,
}
BAD = [
    ("msr", "128166372003061630,hm,1,Read,3154152960\n", "missing fields"),
    ("msr", "128166372003061630,hm,1,Read,31541x2960,32768,1985\n", "not a number"),
    ("msr", "128166372003061630,hm,1,Erase,3154152960,32768,1985\n", "unknown operation"),
    ("spc", "0,20941264,-8192,W,0.551706\n", "negative or absurd size"),
    ("spc", "0,20941264,8192,W,0.000001\n", "time runs backwards"),
    ("alibaba", "3,R,4096,99999999999999999,1577836800000001\n", "negative or absurd size"),
    ("tencent", "1538352000,8,8,7,1063\n", "unknown operation"),
    ("mqsim", "1000 0 8 -8 1\n", "negative or absurd size"),
    ("mqsim", "1000 0 8 eight 1\n", "not a number"),
    ("mqsim", "999 0 8 8 1\n", "time runs backwards"),
    ("mqsim", "2000 0 8 999999999999 1\n", "negative or absurd size"),
    ("mqsim", "2000 0 8 8 7\n", "unknown request type (MQSim: 0 write, 1 read)"),
]


@pytest.mark.parametrize("fmt,line,msg", BAD)
def test_bad_line(tmp_path, fmt, line, msg):
    src = tmp_path / "in.txt"
    src.write_text(GOOD[fmt] * 3 + line + GOOD[fmt])
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    res = runner.invoke(app, ["ingest", str(src), "-o", str(out_dir / "t.parquet"),
                              "--format", fmt])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("blocklab: error: ")
    assert f"{src}:4:" in lines[0] and msg in lines[0], lines[0]
    assert list(out_dir.iterdir()) == []


@pytest.mark.parametrize("fmt", ["msr", "spc", "alibaba", "tencent", "mqsim"])
@pytest.mark.parametrize("good", [1, 2, 5])
def test_a_cut_last_line_is_reported_by_its_number(tmp_path, fmt, good):
    """A short file whose last line is cut (a capture interrupted, ``head -c``) is still
    recognised by its other lines, and the cut line is reported by its number, as with
    ``--format``; before, with a handful of lines, the cut one sank the 80 % rule and the
    file was 'unknown format'."""
    src = tmp_path / "cut.txt"
    line = GOOD[fmt]
    src.write_text(line * good + line[: len(line) // 2])
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    res = runner.invoke(app, ["ingest", str(src), "-o", str(out_dir / "t.parquet")])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"{src}:{good + 1}:" in lines[0], lines
    assert list(out_dir.iterdir()) == []


@pytest.mark.parametrize("text,fmt,rows", [
    ("Timestamp,Offset,Size,IOType,VolumeID\n1538323200,100,8,0,1", "tencent", 1),
    ("# a comment\n0.000 0 100 8 1", "disksim", 1),
    ("0 0 100 8 1\n1.5 0 200 8 0", "disksim", 2),
    (GOOD["msr"] * 2 + GOOD["msr"].strip(), "msr", 3),
])
def test_a_whole_file_without_its_last_newline_is_recognised_as_before(tmp_path, text, fmt,
                                                                        rows):
    """The second look without a last line that may be cut only comes when no format knows
    the whole file: a complete file without its final newline (a header or a comment and one
    line; a DiskSim file whose only decimal time is on its last line, which MQSim, tried
    first, would take without that line) is read as before, every line of it."""
    src = tmp_path / "whole.txt"
    src.write_text(text)
    res = runner.invoke(app, ["ingest", str(src), "-o", str(tmp_path / "o.parquet"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["format"] == fmt
    assert len(read_rows(tmp_path / "o.parquet")) == rows


def test_skip_bad_csv(tmp_path):
    src = tmp_path / "in.csv"
    good = GOOD["alibaba"]
    # 10 good lines, bad ones at lines 5 and 10 (auto-detection tolerates a few bad lines)
    src.write_text(good * 4 + "3,R,x,4096,1577836800000000\n" + good * 4
                   + "3,Q,4096,4096,1577836800000000\n" + good * 2)
    res = runner.invoke(app, ["ingest", str(src), "-o", str(tmp_path / "o.parquet"),
                              "--skip-bad", "2"])
    assert res.exit_code == 0, res.output
    assert "skipped 2 bad record" in res.stderr
    assert len(read_rows(tmp_path / "o.parquet")) == 10
    res = runner.invoke(app, ["ingest", str(src), "-o", str(tmp_path / "p.parquet"),
                              "--skip-bad", "1"])
    assert res.exit_code == 2 and f"{src}:10:" in res.stderr


def test_fio_unknown_action(tmp_path):
    src = tmp_path / "f.log"
    src.write_text("fio version 3 iolog\n0 /dev/sdb add\n10 /dev/sdb read 0 4096\n"
                   "20 /dev/sdb frobnicate 0 4096\n")
    res = runner.invoke(app, ["ingest", str(src), "-o", str(tmp_path / "o.parquet")])
    assert res.exit_code == 2 and f"{src}:4:" in res.stderr and "unknown fio" in res.stderr


# --- real data


def test_disksim_ascii_sample(shared, tmp_path):
    out = tmp_path / "t.parquet"
    res = ingest([str(shared / "traces" / "disksim-ascii-tpcc-small.trace")], str(out))
    assert res.format == "mqsim"
    rows = read_rows(out)
    reads = sum(r["op"] == S.OP_READ for r in rows)
    assert len(rows) == 6999
    assert reads / len(rows) == pytest.approx(0.626, abs=0.0005)
    assert rows[-1]["time_ns"] / 1e9 == pytest.approx(0.137, abs=0.001)
    assert len({r["device"] for r in rows}) == 16


@pytest.mark.parametrize("drive,count,mean_ms", [
    ("cheetah9LP", 10000, 4.273), ("atlas10k", 10000, 3.893),
    ("barracuda", 10000, 6.627), ("hp_c2247a", 9999, 15.298)])
def test_disksim_validation_traces(shared, tmp_path, drive, count, mean_ms):
    out = tmp_path / "t.parquet"
    res = ingest([str(shared / "validation" / "disksim" / f"{drive}.trace")], str(out))
    assert res.format == "disksim-validate"
    rows = read_rows(out)
    assert len(rows) == count
    mean = sum(r["latency_ns"] for r in rows) / len(rows) / 1e6
    assert mean == pytest.approx(mean_ms, abs=0.001)


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed (make test "
                    "installs the Debian package when run as root)")
def test_real_fio_iolog(tmp_path):
    data = tmp_path / "data.bin"
    log = tmp_path / "job.iolog"
    cmd = ["fio", "--name=t", f"--filename={data}", "--size=4M", "--rw=randrw",
           "--rwmixread=70", "--bssplit=4k/50:16k/30:64k/20", "--io_size=2M",
           "--ioengine=psync", f"--write_iolog={log}", "--output-format=json",
           "--randseed=7"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=tmp_path)
    job = json.loads(out.stdout[out.stdout.index("{"):])["jobs"][0]
    res = ingest([str(log)], str(tmp_path / "f.parquet"))
    assert res.format == "fio"
    rows = read_rows(tmp_path / "f.parquet")
    reads = [r for r in rows if r["op"] == S.OP_READ]
    writes = [r for r in rows if r["op"] == S.OP_WRITE]
    assert len(reads) == job["read"]["total_ios"]
    assert len(writes) == job["write"]["total_ios"]
    assert sum(r["size_bytes"] for r in reads) == job["read"]["io_bytes"]
    assert all(r["sector"] * 512 + r["size_bytes"] <= 4 << 20 for r in rows)


def test_sources_of_different_formats_merge(tmp_path):
    """An MSR file (with latencies and hosts) and an Alibaba file (without) merge by wall
    clock; columns one source lacks are null in its rows."""
    msr = [{"t": k * 2000, "dev": 0, "op": "read", "sector": 8 * k, "size": 4096, "host": "hm",
            "latency": 500} for k in range(5)]
    ali = [{"t": k * 2000 + 1000, "dev": 7, "op": "write", "sector": 8 * k, "size": 4096,
            "host": "x"} for k in range(5)]
    # put both on the same wall clock: Alibaba's start is 2020, MSR's 2007: shift MSR's
    offset_100ns = (W.ALIBABA_START_US * 10) - (W.MSR_START_FILETIME - 116_444_736_000_000_000)
    (tmp_path / "a.csv").write_text(W.msr([{**r, "t": r["t"] + offset_100ns * 100} for r in msr]))
    (tmp_path / "b.csv").write_text(W.alibaba(ali))
    ingest([str(tmp_path / "a.csv"), str(tmp_path / "b.csv")], str(tmp_path / "m.parquet"))
    rows = read_rows(tmp_path / "m.parquet")
    assert [r["device"] for r in rows] == [0, 7] * 5
    assert [r["time_ns"] for r in rows] == [k * 1000 for k in range(10)]
    assert all((r["latency_ns"] is None) == (r["device"] == 7) for r in rows)
