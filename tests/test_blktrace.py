"""blktrace binary ingest: requests known by construction, per-CPU sets and merged dumps,
both byte orders, and agreement with blkparse (Debian's blktrace package) on the same files."""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blocklab.pipeline.ingest import ingest
from blocklab.traces import schema as S

from .blktrace_writer import Event, Request, pack, write_merged, write_percpu
from .conftest import needs, read_rows

DEVS = [S.make_dev(8, 0), S.make_dev(8, 16), S.make_dev(253, 1)]
COMMS = {100: "writer", 101: "kworker/0:1H", 102: "postgres"}
FLAG_BITS = {"sync": S.FLAG_SYNC, "fua": S.FLAG_FUA, "meta": S.FLAG_META,
             "rahead": S.FLAG_RAHEAD}


@st.composite
def requests(draw, max_size=30):
    n = draw(st.integers(1, max_size))
    ncpu = draw(st.integers(1, 4))
    out = []
    flush_on = set()
    for k in range(n):
        dev = draw(st.sampled_from(DEVS))
        op = draw(st.sampled_from(["read", "write", "write", "discard", "flush"]))
        if op == "flush" and dev in flush_on:
            op = "write"  # one flush per device keeps the expected pairing unambiguous
        q = draw(st.integers(1, 2_000_000))
        g, i, d = q + draw(st.integers(0, 500)), 0, 0
        merged = []
        sector = k * 4096 + 64  # disjoint ranges
        if op == "flush":
            flush_on.add(dev)
            sector, nbytes = 0, 0
        else:
            nbytes = draw(st.integers(1, 256)) * 512
            if op != "discard":
                end = sector + nbytes // 512
                nm = draw(st.integers(0, 2))
                times = sorted(g + draw(st.integers(0, 100)) for _m in range(nm))
                for t in times:  # back merges in time order extend the end
                    b = draw(st.integers(1, 64)) * 512
                    merged.append((t, end, b))
                    end += b // 512
        last = max([g] + [t for t, _s, _b in merged])
        i = last + draw(st.integers(0, 500))
        d = i + draw(st.integers(1, 500))
        requeue = d + draw(st.integers(1, 100)) if draw(st.booleans()) else None
        c = (requeue or d) + draw(st.integers(2, 100_000))
        flags = tuple(f for f in FLAG_BITS if draw(st.booleans())) if op in ("read", "write") else ()
        out.append(Request(
            dev=dev, sector=sector, nbytes=nbytes + sum(b for _t, _s, b in merged), op=op,
            pid=draw(st.sampled_from(list(COMMS))), cpu=draw(st.integers(0, ncpu - 1)),
            q=q, g=g, i=i, d=d, c=c, flags=flags, merged=merged, requeue_at=requeue,
            remapped_from=S.make_dev(8, 1) if op != "flush" and draw(st.booleans()) else None,
            error=draw(st.sampled_from([0, 0, 0, -5])),
        ))
    return out, ncpu


OPS = {"read": S.OP_READ, "write": S.OP_WRITE, "discard": S.OP_DISCARD, "flush": S.OP_FLUSH}


def expected(reqs: list[Request]) -> list[dict]:
    t0 = min(r.q for r in reqs)
    rows = []
    for r in reqs:
        flags = 0
        for f in r.flags:
            flags |= FLAG_BITS[f]
        if r.requeue_at is not None:
            flags |= S.FLAG_REQUEUED
        if r.remapped_from is not None:
            flags |= S.FLAG_REMAPPED
        rows.append({
            "time_ns": r.q - t0, "device": r.dev, "sector": r.sector, "size_bytes": r.nbytes,
            "op": OPS[r.op], "flags": flags, "getrq_ns": r.g - t0, "insert_ns": r.i - t0,
            "issue_ns": r.last_issue - t0, "complete_ns": r.c - t0, "latency_ns": r.c - r.q,
            "merges": len(r.merged), "pid": r.pid, "comm": COMMS[r.pid], "stream": None,
            "error": r.error, "stream_seq": None, "outstanding": None, "think_ns": None,
            "phase": None,  # the closed-loop columns: none in a captured trace
        })
    return sorted(rows, key=lambda x: (x["time_ns"], x["device"], x["sector"]))


def canon(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda x: (x["time_ns"], x["device"], x["sector"]))


SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(data=requests(), endian=st.sampled_from(["<", ">"]))
def test_percpu_set_pairs_into_the_requests_it_was_made_from(tmp_path_factory, data, endian):
    reqs, ncpu = data
    d = tmp_path_factory.mktemp("bt")
    write_percpu(d / "dev", reqs, COMMS, ncpu, endian)
    out = d / "out.parquet"
    res = ingest([str(d / "dev")], str(out))
    assert res.format == "blktrace"
    assert canon(read_rows(out)) == expected(reqs)


@SETTINGS
@given(data=requests(), endian=st.sampled_from(["<", ">"]))
def test_merged_dump_equals_percpu_set(tmp_path_factory, data, endian):
    reqs, ncpu = data
    d = tmp_path_factory.mktemp("bt")
    write_merged(d / "all.bin", reqs, COMMS, endian)
    out = d / "out.parquet"
    ingest([str(d / "all.bin")], str(out))
    assert canon(read_rows(out)) == expected(reqs)


def _blkparse(base: Path, out: Path, *extra: str) -> str:
    subprocess.run(["blkparse", "-i", str(base), "-o", str(out), *extra], check=True,
                   capture_output=True)
    return out.read_text()


@needs("blkparse")
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=requests(), endian=st.sampled_from(["<", ">"]))
def test_blkparse_reads_our_files_as_we_do(tmp_path_factory, data, endian):
    """blkparse's text of the binary, ingested, gives the same table as the binary itself,
    also with ``-t`` (each event's time since the request's previous one, in parentheses:
    "sector (elapsed) [error]" on a flush's completion, which was taken for a passthrough
    command and dropped); and its own completion counts (its summary) equal ours."""
    reqs, ncpu = data
    d = tmp_path_factory.mktemp("bt")
    write_percpu(d / "dev", reqs, COMMS, ncpu, endian)
    text = _blkparse(d / "dev", d / "dev.txt")
    _blkparse(d / "dev", d / "dev-t.txt", "-t")
    ingest([str(d / "dev")], str(d / "bin.parquet"))
    res = ingest([str(d / "dev.txt")], str(d / "txt.parquet"))
    assert res.format == "blkparse"
    assert ingest([str(d / "dev-t.txt")], str(d / "txt-t.parquet")).format == "blkparse"
    bin_rows, txt_rows = read_rows(d / "bin.parquet"), read_rows(d / "txt.parquet")
    assert canon(txt_rows) == canon(bin_rows)
    assert canon(read_rows(d / "txt-t.parquet")) == canon(bin_rows)
    # with several CPUs blkparse ends with a Total block, with one only its CPU0 block
    start = text.index("Total (") if "Total (" in text else re.search(r"^CPU\d+ \(", text, re.M).start()
    total = text[start:]
    reads = int(re.search(r"Reads Completed:\s+(\d+)", total).group(1))
    writes = int(re.search(r"Writes Completed:\s+(\d+)", total).group(1))
    assert reads == sum(r["op"] == S.OP_READ for r in bin_rows)
    # blkparse counts everything with the write category (discards, flushes) as a write
    assert writes == sum(r["op"] != S.OP_READ for r in bin_rows)


def test_split_and_front_merge(tmp_path):
    dev = DEVS[0]
    ev = [
        Event(10, "Q", dev, 1000, 64 * 512, "write", 100, 0),
        Event(11, "X", dev, 1000, 64 * 512, "write", 100, 0, pdu=struct.pack(">Q", 1032)),
        Event(12, "G", dev, 1000, 32 * 512, "write", 100, 0),
        Event(13, "G", dev, 1032, 32 * 512, "write", 100, 0),
        Event(14, "Q", dev, 992, 8 * 512, "write", 100, 0),
        Event(14, "F", dev, 992, 8 * 512, "write", 100, 0),
        Event(15, "D", dev, 992, 40 * 512, "write", 100, 0),
        Event(16, "D", dev, 1032, 32 * 512, "write", 100, 0),
        Event(20, "C", dev, 992, 40 * 512, "write", 100, 0),
        Event(21, "C", dev, 1032, 32 * 512, "write", 100, 0),
    ]
    (tmp_path / "x.blktrace.0").write_bytes(b"".join(pack(e, k) for k, e in enumerate(ev)))
    ingest([str(tmp_path / "x")], str(tmp_path / "o.parquet"))
    rows = read_rows(tmp_path / "o.parquet")
    assert [(r["sector"], r["size_bytes"], r["merges"], r["time_ns"]) for r in rows] == [
        (992, 40 * 512, 1, 0),  # the front merge moved the start; arrival stays the first Q
        (1032, 32 * 512, 0, 0),  # the split's second half was queued with the first (one bio)
    ]
    assert all(r["flags"] & S.FLAG_SPLIT for r in rows)


def test_partial_completion_keeps_request_in_flight(tmp_path):
    dev = DEVS[0]
    ev = [
        Event(10, "Q", dev, 1000, 16 * 512, "read", 100, 0),
        Event(11, "G", dev, 1000, 16 * 512, "read", 100, 0),
        Event(12, "D", dev, 1000, 16 * 512, "read", 100, 0),
        Event(20, "C", dev, 1000, 8 * 512, "read", 100, 0),
        Event(30, "C", dev, 1008, 8 * 512, "read", 100, 0),
    ]
    (tmp_path / "p.blktrace.0").write_bytes(b"".join(pack(e, k) for k, e in enumerate(ev)))
    ingest([str(tmp_path / "p")], str(tmp_path / "o.parquet"))
    (row,) = read_rows(tmp_path / "o.parquet")
    assert (row["sector"], row["size_bytes"], row["complete_ns"]) == (1000, 16 * 512, 20)


def test_unfinished_and_orphan_requests_are_flagged(tmp_path):
    dev = DEVS[0]
    ev = [
        Event(5, "C", dev, 5000, 8 * 512, "write", 0, 0),  # began before the trace
        Event(10, "Q", dev, 1000, 8 * 512, "read", 100, 0),  # never completes
        Event(12, "D", dev, 2000, 8 * 512, "read", 100, 0),  # issued, its queue not traced
        Event(14, "C", dev, 2000, 8 * 512, "read", 100, 0),
    ]
    (tmp_path / "u.blktrace.0").write_bytes(b"".join(pack(e, k) for k, e in enumerate(ev)))
    res = ingest([str(tmp_path / "u")], str(tmp_path / "o.parquet"))
    rows = {r["sector"]: r for r in read_rows(tmp_path / "o.parquet")}
    assert rows[5000]["flags"] & S.FLAG_PARTIAL and rows[5000]["time_ns"] == 0
    assert rows[1000]["flags"] & S.FLAG_INCOMPLETE and rows[1000]["complete_ns"] is None
    assert rows[2000]["flags"] & S.FLAG_PARTIAL and rows[2000]["latency_ns"] == 2
    assert res.counts["incomplete"] == 1


def test_many_requests_in_flight_grow_the_state(tmp_path):
    """Far more requests in flight than the initial pairing capacity (1024): none is lost."""
    dev = DEVS[0]
    n = 40_000
    blob = bytearray()
    k = 0
    for j in range(n):
        blob += pack(Event(j, "Q", dev, j * 8, 4096, "write", 100, 0), k)
        k += 1
    for j in range(n):
        blob += pack(Event(n + j, "C", dev, j * 8, 4096, "write", 100, 0), k)
        k += 1
    (tmp_path / "f.blktrace.0").write_bytes(bytes(blob))
    res = ingest([str(tmp_path / "f")], str(tmp_path / "o.parquet"))
    assert res.requests == n
    rows = read_rows(tmp_path / "o.parquet")
    assert all(r["latency_ns"] == n for r in rows)
    assert [r["sector"] for r in rows] == [j * 8 for j in range(n)]


@pytest.mark.parametrize("endian", ["<", ">"])
def test_timestamp_notify_gives_wall_clock_start(tmp_path, endian):
    dev = DEVS[0]
    note = struct.pack(endian + "IIQQIIIIIHH", 0x65617407, 0, 1000, 0, 0,
                       1 | ((1 << 10) << 16), 0, 0, 0, 0, 8) + struct.pack(endian + "II", 1700000000, 500)
    ev = [Event(2000, "Q", dev, 8, 4096, "read", 1, 0), Event(3000, "C", dev, 8, 4096, "read", 1, 0)]
    blob = note + b"".join(pack(e, k + 1, endian) for k, e in enumerate(ev))
    (tmp_path / "w.blktrace.0").write_bytes(blob)
    ingest([str(tmp_path / "w")], str(tmp_path / "o.parquet"))
    from blocklab.traces.store import open_trace

    _pf, meta = open_trace(tmp_path / "o.parquet")
    # the note says: trace time 1000 ns is 1700000000 s + 500 ns; the first request is 1000 later
    assert meta.start_utc == "2023-11-14T22:13:20.000001+00:00"


def _v8(ev: Event, seq: int, endian: str = "<", cat2: int = 0) -> bytes:
    """The same record in the version-8 layout (struct blk_io_trace2, 64 bytes)."""
    from .blktrace_writer import TA, categories

    action = TA[ev.action] | (categories(ev.op, ev.flags, ev.action) << 16) | (cat2 << 32)
    return struct.pack(endian + "IIQQIIQIIHH12x", 0x65617408, seq, ev.time, ev.sector, ev.nbytes,
                       ev.pid, action, ev.dev, ev.cpu, ev.error & 0xFFFF, len(ev.pdu)) + ev.pdu


@pytest.mark.parametrize("endian", ["<", ">"])
def test_version8_records_read_like_version7(tmp_path, endian):
    reqs = [Request(DEVS[0], 64 + 4096 * k, 4096 * (k + 1), "write" if k % 2 else "read", 100,
                    0, q=10 * k + 1, g=10 * k + 2, i=10 * k + 3, d=10 * k + 4, c=10 * k + 50,
                    flags=("sync",)) for k in range(5)]
    evs = sorted((e for r in reqs for e in r.events()), key=lambda e: e.time)
    (tmp_path / "v7.blktrace.0").write_bytes(b"".join(pack(e, k, endian) for k, e in enumerate(evs)))
    (tmp_path / "v8.blktrace.0").write_bytes(b"".join(_v8(e, k, endian) for k, e in enumerate(evs)))
    ingest([str(tmp_path / "v7")], str(tmp_path / "v7.parquet"))
    ingest([str(tmp_path / "v8")], str(tmp_path / "v8.parquet"))
    assert read_rows(tmp_path / "v8.parquet") == read_rows(tmp_path / "v7.parquet")
    assert len(read_rows(tmp_path / "v8.parquet")) == 5


def test_version8_zone_reset_is_other(tmp_path):
    dev = DEVS[0]
    evs = [Event(1, "Q", dev, 0, 0, "read", 1, 0), Event(2, "C", dev, 0, 0, "read", 1, 0)]
    blob = b"".join(_v8(e, k, cat2=1 << 2) for k, e in enumerate(evs))
    (tmp_path / "z.blktrace.0").write_bytes(blob)
    ingest([str(tmp_path / "z")], str(tmp_path / "z.parquet"))
    (row,) = read_rows(tmp_path / "z.parquet")
    assert row["op"] == S.OP_OTHER


def test_process_note_with_cgroup_id(tmp_path):
    """With cgroup tracing on, a notify record's payload starts with an 8-byte cgroup id."""
    dev = DEVS[0]
    pdu = struct.pack("<Q", 1) + b"cgproc".ljust(16, b"\0")
    note = struct.pack("<IIQQIIIIIHH", 0x65617407, 0, 0, 0, 0, 0 | (1 << 8) | ((1 << 10) << 16),
                       77, 0, 0, 0, len(pdu)) + pdu
    ev = [Event(10, "Q", dev, 8, 4096, "read", 77, 0), Event(20, "C", dev, 8, 4096, "read", 77, 0)]
    (tmp_path / "g.blktrace.0").write_bytes(note + b"".join(pack(e, k + 1) for k, e in enumerate(ev)))
    ingest([str(tmp_path / "g")], str(tmp_path / "g.parquet"))
    (row,) = read_rows(tmp_path / "g.parquet")
    assert row["comm"] == "cgproc"


def test_the_benchs_trace_written_in_blocks_is_one_trace(tmp_path, monkeypatch):
    """make bench writes its big blktrace file a block of requests at a time (tools/bench.py
    synth_blktrace): the blocks join into one file in time order, with sequence numbers that
    run on, each block the records drawn for it alone shifted in time past the block before
    by more than any latency; the file ingests to every request it was made of, none
    incomplete or skipped."""
    import numpy as np

    from blocklab.tools import bench

    monkeypatch.setattr(bench, "SYNTH_BLOCK", 100)
    path = tmp_path / "blocks.blktrace.0"
    assert bench.synth_blktrace(path, 250, seed=3) == 5 * 250
    recs = np.fromfile(path, dtype=bench.HEADER)
    assert (np.diff(recs["time"].astype(np.int64)) >= 0).all()
    assert recs["seq"].tolist() == list(range(len(recs)))
    end = 0
    for k, n in enumerate((100, 100, 50)):
        got = recs[500 * k : 500 * k + 5 * n]
        drawn = bench._synth_records(n, 3 + k, 0)
        shift = got["time"].astype(np.int64) - drawn["time"].astype(np.int64)
        assert len(set(shift.tolist())) == 1
        assert shift[0] == 0 if k == 0 else shift[0] >= end + 10_000_000 - 1000
        for f in bench.HEADER.names:
            if f not in ("time", "seq"):
                assert got[f].tolist() == drawn[f].tolist(), f
        end = int(got["time"][-1])
    r = ingest([str(path)], str(tmp_path / "t.parquet"))
    assert r.requests == 250 and r.counts.get("incomplete", 0) == 0
    assert r.counts.get("skipped", 0) == 0
