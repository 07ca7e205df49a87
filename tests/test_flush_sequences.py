"""Flush sequences (block/blk-flush.c): on a device with a volatile write cache, a request with
a preflush, or with FUA the device lacks, is ended by the kernel only after its flushes: the
block layer issues its own flush requests (``D FN``, ``C FN``), the data step, and then a
completion of 0 bytes at the request's sector. The request's row ends there, and that last
completion is no request of its own (it was a 0-byte write "that began before the trace").

tests/data/blktrace/flush-sequence.blktrace.1 holds 15 real records (Linux 6.18, the ftrace
``blk`` tracer in binary mode, struct blk_io_trace v7) cut from a capture made for this test:
a jbd2 commit block on a loop device without FUA (7,2: ``Q FWFSM 229418 + 2`` ... ``C WSM
229418 [0]``) and an empty preflush on virtio (254,0). The other cases are written with
tests/blktrace_writer.py, each sequence as the kernel's code issues it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np

from blocklab.kernels import pairing as K
from blocklab.pipeline.ingest import ingest
from blocklab.traces import schema as S
from blocklab.traces.formats.base import ReadContext
from blocklab.traces.formats.paired import SEQ_WAIT_NS, Pairer

from .blktrace_writer import Event, pack
from .conftest import ROOT, needs, read_rows

REAL = ROOT / "tests" / "data" / "blktrace" / "flush-sequence.blktrace.1"
LOOP, VDA = S.make_dev(7, 2), S.make_dev(254, 0)
DEV = S.make_dev(8, 0)


def _ingest(tmp_path: Path, src: Path | str) -> tuple[list[dict], dict]:
    out = tmp_path / "o.parquet"
    res = ingest([str(src)], str(out))
    return read_rows(out), res.counts


def _write(path: Path, events: list[Event]) -> Path:
    path.write_bytes(b"".join(pack(e, k) for k, e in enumerate(events)))
    return path


def _by_time(rows: list[dict]) -> list[tuple]:
    return [(r["time_ns"], r["sector"], r["size_bytes"], r["op"], r["complete_ns"],
             bool(r["flags"] & S.FLAG_PARTIAL)) for r in rows]


def test_a_real_flush_sequence_ends_at_the_kernels_last_completion(tmp_path):
    rows, counts = _ingest(tmp_path, REAL)
    # times from the records (blkparse -t shows them): 0 = the loop write's Q
    assert _by_time(rows) == [
        # the commit block: queued at 0, its data done at 866,382, ended after the post-flush
        (0, 229418, 1024, S.OP_WRITE, 1_001_352, False),
        # the block layer's own pre-flush and post-flush: no Q, so first seen at their issue
        (7_231, 0, 0, S.OP_FLUSH, 761_788, True),
        # the empty preflush on vda: its flush completed at 740,557, the request at 741,418
        (699_575, 0, 0, S.OP_FLUSH, 741_418, False),
        (870_969, 0, 0, S.OP_FLUSH, 1_000_451, True),
    ]
    (w,) = [r for r in rows if r["op"] == S.OP_WRITE]
    assert (w["device"], w["issue_ns"], w["latency_ns"]) == (LOOP, 767_567, 1_001_352)
    assert w["flags"] == S.FLAG_PREFLUSH | S.FLAG_FUA | S.FLAG_SYNC | S.FLAG_META
    assert [r["device"] for r in rows if not r["flags"] & S.FLAG_PARTIAL] == [LOOP, VDA]
    assert "flush_ends" not in counts and "incomplete" not in counts


@needs("blkparse")
def test_blkparse_text_of_the_same_records_gives_the_same_rows(tmp_path):
    """blkparse names a process it has no name for "(null)": no name, as in the binary."""
    (tmp_path / "b").mkdir()
    (tmp_path / "t").mkdir()
    (tmp_path / "flush.blktrace.0").write_bytes(b"")  # (blkparse starts at CPU 0's file)
    shutil.copy(REAL, tmp_path / "flush.blktrace.1")
    text = tmp_path / "flush.txt"
    subprocess.run(["blkparse", "-i", str(tmp_path / "flush"), "-o", str(text)], check=True,
                   capture_output=True)
    assert "[(null)]" in text.read_text()
    binary, _ = _ingest(tmp_path / "b", REAL)
    parsed, _ = _ingest(tmp_path / "t", text)
    assert parsed == binary and all(r["comm"] is None for r in parsed)


def test_a_set_whose_first_cpu_file_is_empty_is_read_by_its_name(tmp_path):
    """blktrace leaves an empty NAME.blktrace.N for a CPU that traced nothing; the set's
    format is its first file with content's (it was 'unknown format' for the empty one)."""
    (tmp_path / "flush.blktrace.0").write_bytes(b"")
    shutil.copy(REAL, tmp_path / "flush.blktrace.1")
    rows, _ = _ingest(tmp_path, tmp_path / "flush")
    assert len(rows) == 4 and sum(r["op"] == S.OP_WRITE for r in rows) == 1


def _ev(t, action, sector, nbytes, op, flags=()):
    return Event(t, action, DEV, sector, nbytes, op, 100, 0, flags)


def test_preflushes_pending_together_share_one_flush_and_end_each_at_its_own(tmp_path):
    """Two empty preflushes queued while no flush runs: the kernel runs one flush for both,
    then ends each (blk_flush_complete_seq for every request on the running list)."""
    ev = [_ev(10, "Q", 0, 0, "flush", ("sync",)), _ev(11, "G", 0, 0, "flush", ("sync",)),
          _ev(12, "Q", 0, 0, "flush", ("sync",)), _ev(13, "G", 0, 0, "flush", ("sync",)),
          _ev(20, "D", 0, 0, "flush"), _ev(50, "C", 0, 0, "flush"),
          _ev(51, "C", 0, 0, "write", ("sync",)), _ev(52, "C", 0, 0, "write", ("sync",))]
    rows, counts = _ingest(tmp_path, _write(tmp_path / "p.blktrace.0", ev))
    assert [(r["time_ns"], r["op"], r["complete_ns"]) for r in rows] == [
        (0, S.OP_FLUSH, 41), (2, S.OP_FLUSH, 42)]
    assert "incomplete" not in counts and "flush_ends" not in counts


def test_fua_emulated_waits_for_the_post_flush_and_native_fua_does_not(tmp_path):
    """FUA on a device without it: the kernel strips the flag from the data step and ends the
    request after a post-flush. A device with FUA keeps the flag and ends it at the data."""
    fua = ("fua", "sync")
    ev = [_ev(10, "Q", 800, 4096, "write", fua), _ev(11, "G", 800, 4096, "write", fua),
          _ev(12, "I", 800, 4096, "write", ("sync",)), _ev(13, "D", 800, 4096, "write", ("sync",)),
          _ev(30, "C", 800, 4096, "write", ("sync",)), _ev(31, "D", 0, 0, "flush"),
          _ev(60, "C", 0, 0, "flush"), _ev(61, "C", 800, 0, "write", ("sync",)),
          # native FUA: one completion
          _ev(70, "Q", 900, 4096, "write", fua), _ev(71, "G", 900, 4096, "write", fua),
          _ev(72, "I", 900, 4096, "write", fua), _ev(73, "D", 900, 4096, "write", fua),
          _ev(90, "C", 900, 4096, "write", fua)]
    rows, counts = _ingest(tmp_path, _write(tmp_path / "f.blktrace.0", ev))
    writes = [(r["time_ns"], r["sector"], r["complete_ns"]) for r in rows if r["op"] == S.OP_WRITE]
    assert writes == [(0, 800, 51), (60, 900, 80)]
    assert "flush_ends" not in counts


def test_without_the_requests_queueing_a_sequence_end_makes_no_row_and_is_counted(tmp_path):
    """A capture of request events only (blocklab capture without --bio-queue) sees the data
    step with its flags stripped: the row ends there, and the 0-byte end is counted, not a
    0-byte write that began before the trace."""
    ev = [_ev(10, "I", 800, 4096, "write", ("sync",)), _ev(11, "D", 800, 4096, "write", ("sync",)),
          _ev(30, "C", 800, 4096, "write", ("sync",)), _ev(61, "C", 800, 0, "write", ("sync",))]
    rows, counts = _ingest(tmp_path, _write(tmp_path / "r.blktrace.0", ev))
    assert [(r["sector"], r["size_bytes"], r["complete_ns"]) for r in rows] == [(800, 4096, 20)]
    assert counts["flush_ends"] == 1


def test_a_sequence_whose_end_never_comes_ends_at_its_data(tmp_path):
    """A trace without the ends (a synthetic one): the row completes at its data step, not as
    incomplete."""
    pre = ("preflush", "sync")
    ev = [_ev(10, "Q", 800, 4096, "write", pre), _ev(11, "G", 800, 4096, "write", pre),
          _ev(12, "D", 800, 4096, "write", ("sync",)), _ev(30, "C", 800, 4096, "write", ("sync",)),
          _ev(40, "Q", 900, 4096, "read"), _ev(41, "D", 900, 4096, "read"),
          _ev(42, "C", 900, 4096, "read")]
    rows, counts = _ingest(tmp_path, _write(tmp_path / "n.blktrace.0", ev))
    assert [(r["sector"], r["complete_ns"], r["flags"] & S.FLAG_INCOMPLETE) for r in rows] == [
        (800, 20, 0), (900, 32, 0)]
    assert "incomplete" not in counts


def test_a_sequence_waits_for_its_end_at_most_seq_wait_ns():
    """Its rows are not held back longer: a sweep SEQ_WAIT_NS after the data step releases
    the request completed there, and the end that comes later is counted."""
    ctx = ReadContext()
    pairer = Pairer(expect_queue=True, ctx=ctx)

    def events(*rows):
        m = np.zeros((len(rows), K.TE_NCOLS), np.int64)
        for k, (t, act, op, flags, sector, nbytes) in enumerate(rows):
            m[k] = (t, DEV, act, op, flags, sector, nbytes, 100, 0, 0)
        return m

    W, R = S.OP_WRITE, S.OP_READ
    pre = S.FLAG_PREFLUSH | S.FLAG_SYNC
    pairer.feed(events((10, K.A_QUEUE, W, pre, 800, 4096), (11, K.A_GETRQ, W, pre, 800, 4096),
                       (12, K.A_ISSUE, W, S.FLAG_SYNC, 800, 4096),
                       (30, K.A_COMPLETE, W, S.FLAG_SYNC, 800, 4096)))
    assert pairer.sweep().shape[1] == 0  # waiting for its end: nothing released
    late = 30 + SEQ_WAIT_NS
    pairer.feed(events((late, K.A_QUEUE, R, 0, 900, 4096)))
    assert pairer.sweep().shape[1] == 0  # not yet SEQ_WAIT_NS since the data step
    pairer.feed(events((late + 1, K.A_ISSUE, R, 0, 900, 4096)))
    cols = pairer.sweep()
    assert cols[K.R_SECTOR].tolist() == [800] and cols[K.R_COMPLETE].tolist() == [30]
    pairer.feed(events((late + 2, K.A_COMPLETE, R, 0, 900, 4096),
                       (late + 3, K.A_COMPLETE, W, S.FLAG_SYNC, 800, 0)))
    cols = pairer.sweep(final=True)
    assert cols[K.R_SECTOR].tolist() == [900]
    assert ctx.counts == {"flush_ends": 1}
