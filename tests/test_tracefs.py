"""tracefs text: the real capture in ../shared gives exactly the counts its README states; old
and new kernel line formats; lost-event lines; the bundled compressed copy."""

from __future__ import annotations

from pathlib import Path

import duckdb

from blocklab.pipeline.ingest import ingest
from blocklab.traces import schema as S
from blocklab.traces.store import open_trace

from .conftest import ROOT, read_rows

LOOP = S.make_dev(7, 0)
VDA = S.make_dev(254, 0)


def _counts(path: Path) -> dict:
    q = f"""
    SELECT device, count(*) n, count(complete_ns) done,
           count(*) FILTER (WHERE op = 0) r,
           count(*) FILTER (WHERE op = 1 AND (flags & {S.FLAG_SYNC}) > 0) ws
    FROM '{path}' GROUP BY device"""
    return {d: (n, done, r, ws) for d, n, done, r, ws in duckdb.sql(q).fetchall()}


def test_real_capture_counts(shared, tmp_path):
    out = tmp_path / "t.parquet"
    res = ingest([str(shared / "traces" / "tracefs-fio-loop0-vda.txt")], str(out))
    assert res.format == "tracefs"
    c = _counts(out)
    # README: 1522 issues and completions on 7,0: 633 reads (R), 889 writes (WS)
    assert c[LOOP] == (1522, 1522, 633, 889)
    # README: 839 completions on 254,0. One ends an empty preflush's flush sequence (the
    # block layer's flush "FF" issued and completed, then "WS () 0 + 0"): no request of its
    # own, counted (it was a 0-byte write flagged partial); the capture has no Q events, so
    # no row is partial
    assert c[VDA][1] + res.counts["flush_ends"] == 839 and res.counts["flush_ends"] == 1
    rows = [r for r in read_rows(out) if r["device"] == VDA and r["flags"] & S.FLAG_PARTIAL]
    assert rows == []
    _pf, meta = open_trace(out)
    assert meta.sources[0]["name"] == "tracefs-fio-loop0-vda.txt"
    import hashlib

    src = shared / "traces" / "tracefs-fio-loop0-vda.txt"
    assert meta.sources[0]["sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert meta.sources[0]["bytes"] == src.stat().st_size


def test_bundled_sample_equals_shared_copy(shared, tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    ingest([str(shared / "traces" / "tracefs-fio-loop0-vda.txt")], str(a))
    ingest([str(ROOT / "traces" / "samples" / "tracefs-fio-loop0-vda.txt.xz")], str(b))
    assert read_rows(a) == read_rows(b)


def test_device_filter(shared, tmp_path):
    out = tmp_path / "t.parquet"
    ingest([str(shared / "traces" / "tracefs-fio-loop0-vda.txt")], str(out), device="7:0")
    assert set(_counts(out)) == {LOOP}


OLD_KERNEL = """\
# tracer: nop
#
          <idle>-0     [001] d.h1   100.000500: block_rq_complete: 8,0 W () 5000 + 8 [0]
     kworker/0:1-40    [000] ....   100.001000: block_rq_insert: 8,0 W 0 () 2048 + 8 [kworker/0:1]
     kworker/0:1-40    [000] d..1   100.001010: block_rq_issue: 8,0 W 0 () 2048 + 8 [kworker/0:1]
CPU:1 [LOST 12 EVENTS]
          <idle>-0     [001] d.h1   100.002000: block_rq_complete: 8,0 W () 2048 + 8 [0]
       dd-5555  ( 5555) [002] ....   100.003000: block_bio_queue: 8,0 R 4096 + 256 [dd]
       dd-5555  ( 5555) [002] ....   100.003001: block_getrq: 8,0 R 4096 + 256 [dd]
       dd-5555  ( 5555) [002] ....   100.003005: block_rq_issue: 8,0 RA 131072 () 4096 + 256 [dd]
     sched_switch_noise-1 [000] ....   100.003100: sched_switch: prev_comm=a prev_pid=1
          <idle>-0     [002] d.h1   100.004005: block_rq_complete: 8,0 RA () 4096 + 256 [-5]
"""


def test_old_kernel_lines_tgid_and_lost_events(tmp_path):
    src = tmp_path / "old.trace"
    src.write_text(OLD_KERNEL)
    out = tmp_path / "t.parquet"
    res = ingest([str(src)], str(out))
    assert res.format == "tracefs"
    assert res.counts["lost_events"] == 12
    rows = read_rows(out)
    assert [(r["sector"], r["size_bytes"], r["op"]) for r in rows] == [
        (5000, 4096, S.OP_WRITE), (2048, 4096, S.OP_WRITE), (4096, 131072, S.OP_READ)]
    orphan, write, read = rows
    assert orphan["flags"] & S.FLAG_PARTIAL and orphan["time_ns"] == 0
    assert (write["insert_ns"], write["issue_ns"], write["complete_ns"]) == (500_000, 510_000, 1_500_000)
    assert write["comm"] == "kworker/0:1" and write["pid"] == 40
    assert read["time_ns"] == 2_500_000 and read["getrq_ns"] == 2_501_000
    assert read["latency_ns"] == 1_005_000 and read["error"] == -5
    assert read["flags"] & S.FLAG_RAHEAD and read["comm"] == "dd" and read["pid"] == 5555


# --- Hypothesis round trip: requests -> tracefs lines (old or new kernel format) -> ingest


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

RWBS = {S.OP_READ: "R", S.OP_WRITE: "W", S.OP_DISCARD: "D", S.OP_FLUSH: "FF"}


@st.composite
def tracefs_requests(draw):
    n = draw(st.integers(1, 40))
    reqs = []
    for k in range(n):
        op = draw(st.sampled_from([S.OP_READ, S.OP_WRITE, S.OP_WRITE, S.OP_DISCARD]))
        nsec = draw(st.integers(1, 2048))
        t_ins = draw(st.integers(0, 10**9)) * 1000  # whole microseconds: tracefs prints us
        has_insert = draw(st.booleans())
        t_iss = t_ins + draw(st.integers(0, 5000)) * 1000
        t_cmp = t_iss + draw(st.integers(1, 10**6)) * 1000
        sync = draw(st.booleans()) and op == S.OP_WRITE
        reqs.append(dict(dev=draw(st.sampled_from([(8, 0), (259, 3)])), sector=8 + 4096 * k,
                         nsec=nsec, op=op, sync=sync, ins=t_ins if has_insert else None,
                         iss=t_iss, cmp=t_cmp, pid=draw(st.sampled_from([11, 12])),
                         err=draw(st.sampled_from([0, 0, -5]))))
    return reqs


def write_tracefs(reqs, new_format: bool) -> str:
    comms = {11: "fio", 12: "kworker/u8:2"}
    lines = []
    for r in reqs:
        rwbs = RWBS[r["op"]] + ("S" if r["sync"] else "")
        dev = f"{r['dev'][0]},{r['dev'][1]}"
        prio = " be,0,4" if new_format else ""
        nbytes = r["nsec"] * 512 if new_format else 0
        head = f"{r['sector']} + {r['nsec']}{prio}"
        comm = comms[r["pid"]]
        if r["ins"] is not None:
            lines.append((r["ins"], 0, f"{comm}-{r['pid']} [000] ..... {{t}}: block_rq_insert: "
                          f"{dev} {rwbs} {nbytes} () {head} [{comm}]"))
        lines.append((r["iss"], 1, f"{comm}-{r['pid']} [001] ..... {{t}}: block_rq_issue: "
                      f"{dev} {rwbs} {nbytes} () {head} [{comm}]"))
        lines.append((r["cmp"], 2, f"<idle>-0 [001] d.h1. {{t}}: block_rq_complete: "
                      f"{dev} {rwbs} () {head} [{r['err']}]"))
    lines.sort(key=lambda x: (x[0], x[1]))
    out = []
    for t, _k, text in lines:
        us = t // 1000
        out.append(text.replace("{t}", f"{us // 10**6}.{us % 10**6:06d}"))
    return "\n".join(out) + "\n"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reqs=tracefs_requests(), new_format=st.booleans())
def test_tracefs_round_trip(tmp_path_factory, reqs, new_format):
    d = tmp_path_factory.mktemp("tf")
    (d / "t.txt").write_text(write_tracefs(reqs, new_format))
    res = ingest([str(d / "t.txt")], str(d / "t.parquet"))
    assert res.format == "tracefs"
    got = sorted(read_rows(d / "t.parquet"), key=lambda r: (r["device"], r["sector"]))
    first = {id(r): r["ins"] if r["ins"] is not None else r["iss"] for r in reqs}
    t0 = min(first.values())
    want = sorted(reqs, key=lambda r: (S.make_dev(*r["dev"]), r["sector"]))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        arrival = first[id(w)]
        assert g["device"] == S.make_dev(*w["dev"])
        assert (g["sector"], g["size_bytes"], g["op"]) == (w["sector"], w["nsec"] * 512, w["op"])
        assert g["time_ns"] == arrival - t0
        assert g["insert_ns"] == (None if w["ins"] is None else w["ins"] - t0)
        assert g["issue_ns"] == w["iss"] - t0
        assert g["complete_ns"] == w["cmp"] - t0
        assert g["latency_ns"] == w["cmp"] - arrival
        assert bool(g["flags"] & S.FLAG_SYNC) == w["sync"]
        assert g["pid"] == w["pid"] and g["error"] == w["err"]
        assert g["comm"] == {11: "fio", 12: "kworker/u8:2"}[w["pid"]]


NEW_RWBS = """\
 fio-1 [000] ..... 10.000001: block_rq_issue: 259,0 ZA 4096 () 524288 + 8 none,0,0 [fio]
 fio-1 [000] ..... 10.000002: block_rq_issue: 259,0 ZRA 0 () 0 + 0 none,0,0 [fio]
 fio-1 [000] ..... 10.000003: block_rq_issue: 259,0 WSU 16384 () 2048 + 32 none,0,0 [fio]
 <idle>-0 [001] ..s.. 10.000101: block_rq_complete: 259,0 ZA () 524288 + 8 none,0,0 [0]
 <idle>-0 [001] ..s.. 10.000102: block_rq_complete: 259,0 ZRA () 0 + 0 none,0,0 [0]
 <idle>-0 [001] ..s.. 10.000103: block_rq_complete: 259,0 WSU () 2048 + 32 none,0,0 [0]
"""


def test_zoned_and_atomic_rwbs(tmp_path):
    """Recent kernels print zone operations (ZA, ZR, ZRA, ZF, ZO, ZC) and U for atomic writes."""
    src = tmp_path / "z.txt"
    src.write_text(NEW_RWBS)
    ingest([str(src)], str(tmp_path / "z.parquet"))
    rows = read_rows(tmp_path / "z.parquet")
    assert [(r["sector"], r["op"]) for r in rows] == [
        (524288, S.OP_WRITE), (0, S.OP_OTHER), (2048, S.OP_WRITE)]
    assert all(r["complete_ns"] is not None for r in rows)
