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
    # README: 839 completions on 254,0 (one began before the capture: flagged partial)
    assert c[VDA][1] == 839
    rows = [r for r in read_rows(out) if r["device"] == VDA and r["flags"] & S.FLAG_PARTIAL]
    assert len(rows) == 1
    _pf, meta = open_trace(out)
    assert meta.sources[0]["name"] == "tracefs-fio-loop0-vda.txt"
    assert len(meta.sources[0]["sha256"]) == 64


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
