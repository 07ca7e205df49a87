"""Ingest decodes the next chunk on a worker thread (issue 21, deliverable 5): the trace, the
counts and every error (message, file, byte offset or line) are those of the serial decode
(``BLOCKLAB_DECODE_THREADS=0``), for blktrace per-CPU sets and merged dumps, blkparse and
tracefs text, whole or damaged, with and without --skip-bad, at chunk sizes that cut records
and lines everywhere. A regular file read through a memory map of it (``Input.mapped``) gives
what reading it gives (``BLOCKLAB_MMAP=0``), its sha256 included, and keeps few of its pages
resident."""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path
from unittest import mock

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import blocklab.traces.formats.blktrace as B
import blocklab.traces.io as io_mod
from blocklab.pipeline.ingest import ingest
from blocklab.traces import schema as S
from blocklab.traces.errors import BlocklabError

from .blktrace_writer import Request, write_merged, write_percpu
from .conftest import needs
from .fuzzing import damaged, fuzz_settings, ingest_samples

SAMPLES = {k: v for k, v in ingest_samples().items() if k in ("blktrace", "blkparse", "tracefs")}


@contextlib.contextmanager
def _threads(n: int, chunk: int):
    """Decode with ``n`` worker threads (0: serial) and chunks of ``chunk`` bytes."""
    old = os.environ.get("BLOCKLAB_DECODE_THREADS")
    os.environ["BLOCKLAB_DECODE_THREADS"] = str(n)
    try:
        with mock.patch.object(B, "CHUNK_BYTES", chunk), \
                mock.patch.object(io_mod, "CHUNK_BYTES", chunk):
            yield
    finally:
        if old is None:
            os.environ.pop("BLOCKLAB_DECODE_THREADS", None)
        else:
            os.environ["BLOCKLAB_DECODE_THREADS"] = old


class _Counting:
    """The decode pool, counting the chunks handed to it (the parallel path did run)."""

    def __init__(self) -> None:
        self.submitted = 0
        self._pool = io_mod.decode_pool()

    def submit(self, *args, **kw):
        self.submitted += 1
        return self._pool.submit(*args, **kw)


def _result(sources: list[str], out: Path, skip_bad: int, fmt: str):
    """(table, counts, sources) of the ingest, or the error's text (and no output)."""
    try:
        res = ingest(sources, str(out), fmt=fmt, skip_bad=skip_bad)
    except BlocklabError as e:
        assert not out.exists()
        return f"{type(e).__name__}: {e}"
    return pq.read_table(out), res.counts, res.sources


def _outcome(sources: list[str], out: Path, threads: int, chunk: int, skip_bad: int = 0,
             fmt: str = "auto"):
    """``_result`` with ``threads`` decode threads; and the chunks decoded ahead."""
    pool = _Counting()
    with _threads(threads, chunk), mock.patch.object(io_mod, "decode_pool", lambda: pool), \
            mock.patch.object(B, "decode_pool", lambda: pool), \
            mock.patch("blocklab.traces.formats.textevents.decode_pool", lambda: pool):
        return _result(sources, out, skip_bad, fmt), pool.submitted


def _same(a, b) -> None:
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
        return
    assert a[1] == b[1]
    assert a[0].equals(b[0])


def _requests(n: int) -> list[Request]:
    reqs = []
    for k in range(n):
        t = 1000 * k + 1
        merged = [(t + 5, 64 + 4096 * k + 8, 4096)] if k % 7 == 0 else []
        reqs.append(Request(S.make_dev(8, 16 * (k % 2)), 64 + 4096 * k, 8192 if merged else 4096,
                            "write" if k % 3 else "read", 100 + k % 4, k % 4, q=t, g=t + 2,
                            i=t + 30, d=t + 40, c=t + 900 + 37 * (k % 11), merged=merged,
                            requeue_at=t + 500 if k % 13 == 0 else None))
    return reqs


@pytest.mark.parametrize("chunk", [997, 1 << 14])
def test_percpu_set_decoded_in_parallel_equals_serial(tmp_path, chunk):
    """Four per-CPU files, cut into many chunks: the files decode ahead on the worker thread,
    and the trace is the serial decode's, row for row."""
    write_percpu(tmp_path / "d", _requests(600), {100: "fio", 101: "dd"}, 4)
    serial, n0 = _outcome([str(tmp_path / "d")], tmp_path / "serial.parquet", 0, chunk)
    parallel, n1 = _outcome([str(tmp_path / "d")], tmp_path / "parallel.parquet", 1, chunk)
    assert n0 == 0 and n1 > 4  # the serial path used no worker; the parallel one did
    _same(serial, parallel)
    assert parallel[0].num_rows == 600


@needs("blkparse")
def test_blkparse_text_parsed_in_parallel_equals_serial(tmp_path):
    """blkparse's own text of a per-CPU set, parsed in 4 KiB chunks ahead of the pairing."""
    write_percpu(tmp_path / "d", _requests(400), {100: "fio"}, 4)
    txt = tmp_path / "d.txt"
    subprocess.run(["blkparse", "-i", str(tmp_path / "d"), "-o", str(txt)], check=True,
                   capture_output=True)
    serial, n0 = _outcome([str(txt)], tmp_path / "s.parquet", 0, 4096)
    parallel, n1 = _outcome([str(txt)], tmp_path / "p.parquet", 1, 4096)
    assert n0 == 0 and n1 > 10
    _same(serial, parallel)
    assert parallel[0].num_rows == 400


@fuzz_settings(60)
@given(st.sampled_from(sorted(SAMPLES)), st.data(), st.sampled_from([0, 2]),
       st.sampled_from([61, 257, 4096]))
def test_damaged_inputs_parallel_equals_serial(name, data, skip_bad, chunk):
    """Damaged samples: the same trace and counts, or the same one-line error (file, byte
    offset or line), whether the next chunk decodes ahead or not."""
    blob, fmt = SAMPLES[name]
    bad, _how = data.draw(damaged(blob))
    with tempfile.TemporaryDirectory(prefix="blocklab-par-") as t:
        src = Path(t) / "in.dat"
        src.write_bytes(bad)
        serial, _ = _outcome([str(src)], Path(t) / "s.parquet", 0, chunk, skip_bad, fmt)
        parallel, _ = _outcome([str(src)], Path(t) / "p.parquet", 1, chunk, skip_bad, fmt)
    _same(serial, parallel)


def _mapped_outcome(sources: list[str], out: Path, mapped: bool, chunk: int, skip_bad: int,
                    fmt: str = "auto"):
    """``_result`` through a map of the file or by reads."""
    with _threads(1, chunk), mock.patch.dict(os.environ, {"BLOCKLAB_MMAP": str(int(mapped))}):
        return _result(sources, out, skip_bad, fmt)


@fuzz_settings(90)
@given(st.sampled_from(sorted(SAMPLES)), st.data(), st.sampled_from([0, 2]),
       st.sampled_from([61, 257, 4096]))
def test_a_mapped_file_ingests_as_a_read_one(name, data, skip_bad, chunk):
    """A blktrace binary, blkparse text or tracefs text, whole or damaged, read through a map
    of it in windows that cut its records and lines anywhere: the same trace, counts and
    sha256 (hashlib's, of the file) as read, or the same one-line error (its line number or
    byte offset)."""
    blob, fmt = SAMPLES[name]
    bad = data.draw(st.one_of(st.just(blob), damaged(blob).map(lambda d: d[0])))
    with tempfile.TemporaryDirectory(prefix="blocklab-map-") as t:
        src = Path(t) / "in.dat"
        src.write_bytes(bad)
        with mock.patch.object(io_mod.Input, "mapped", _spy_mapped(calls := [])):
            mapped = _mapped_outcome([str(src)], Path(t) / "m.parquet", True, chunk,
                                     skip_bad, fmt)
        read = _mapped_outcome([str(src)], Path(t) / "r.parquet", False, chunk, skip_bad, fmt)
    assert any(m is not None for m in calls) == bool(bad)  # (an empty file is not mapped)
    if isinstance(mapped, str) or isinstance(read, str):
        assert mapped == read
        return
    assert mapped[0].equals(read[0]) and mapped[1] == read[1]
    assert mapped[2] == read[2]
    assert mapped[2][0]["sha256"] == hashlib.sha256(bad).hexdigest()
    assert mapped[2][0]["bytes"] == len(bad)


def _spy_mapped(calls: list):
    real = io_mod.Input.mapped

    def mapped(self):
        m = real(self)
        calls.append(m)
        return m
    return mapped


def _rss_file_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssFile in /proc/self/status")


def test_a_mapped_file_keeps_few_pages_resident(tmp_path, monkeypatch):
    """A reader that goes through a 192 MiB map and says how far it has read leaves few of
    its pages resident (a map's pages count in the process's memory until unmapped): at the
    end well under the file, where keeping them would add all of it."""
    monkeypatch.setenv("BLOCKLAB_MMAP", "1")
    src = tmp_path / "big.bin"
    step = 8 << 20
    with open(src, "wb") as f:
        for k in range(24):
            f.write(bytes([k + 1]) * step)
    inp = io_mod.Input(src)
    inp.peek()
    m = inp.mapped()
    assert m is not None
    before = _rss_file_bytes()
    total = 0
    for a in range(0, len(m), step):
        total += int(m[a + 4095 : a + step : 4096].sum())  # every page touched
        inp.mapped_upto(a + step, a)
    grown = _rss_file_bytes() - before
    assert total == sum((k + 1) * (step // 4096) for k in range(24))
    src_info = inp.finish()
    assert src_info["sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    # the hash may lag behind the reader by its queue (4 windows), the unmapping by 8 MiB
    assert grown < 96 << 20, grown


def _ties(n: int) -> list[Request]:
    """Requests of four CPUs, 16 at each time: every event time is shared across the CPUs'
    files, and each request's events stay on its CPU."""
    reqs = []
    for k in range(n):
        t = 1000 * (k // 16) + 1
        reqs.append(Request(S.make_dev(8, 0), 64 + 8 * k, 4096, "write" if k % 2 else "read",
                            100, k % 4, q=t, g=t + 100, i=t + 200, d=t + 300, c=t + 700))
    return reqs


@pytest.mark.parametrize("mapped", [False, True])
def test_a_percpu_sets_ties_do_not_depend_on_where_its_chunks_end(tmp_path, mapped):
    """Events of one time in several per-CPU files go out together, by file, whatever the
    chunks: the trace read in chunks of 997, 1,500 or 4,096 bytes is the one read whole
    (ties were ordered by where a file's chunk ended, so a file's rows moved with the chunk
    size; seen by the review of the map, whose windows end elsewhere than reads)."""
    write_percpu(tmp_path / "d", _ties(480), {100: "fio"}, 4)
    whole = _mapped_outcome([str(tmp_path / "d")], tmp_path / "w.parquet", mapped, 1 << 24, 0)
    assert whole[0].num_rows == 480
    for chunk in (997, 1500, 4096):
        cut = _mapped_outcome([str(tmp_path / "d")], tmp_path / f"c{chunk}.parquet", mapped,
                              chunk, 0)
        assert cut[0].equals(whole[0]), chunk
        assert cut[1] == whole[1]


@pytest.mark.parametrize("mapped", [False, True])
@pytest.mark.parametrize("garbage", [3853, 3855, 3860, 3872, 5000])
def test_a_header_cut_by_a_chunks_end_after_bad_bytes_is_found(tmp_path, mapped, garbage):
    """Bad bytes skipped with --skip-bad, then a record whose magic the chunk's end cuts: the
    record is found (it was lost, and the bad bytes reported twice), so the trace and the
    count skipped are those of one whole chunk, read or mapped."""
    src = write_merged(tmp_path / "m.blktrace", _requests(60), {})
    blob = src.read_bytes()
    at = 4320  # a record boundary (90 records of 48 bytes)
    src.write_bytes(blob[:at] + b"\xee" * garbage + blob[at:])
    whole = _mapped_outcome([str(src)], tmp_path / "w.parquet", mapped, 1 << 24, 5)
    cut = _mapped_outcome([str(src)], tmp_path / "c.parquet", mapped, 4096, 5)
    assert not isinstance(whole, str), whole
    assert not isinstance(cut, str), cut
    assert whole[1]["skipped"] == 1
    assert cut[0].equals(whole[0]) and cut[1] == whole[1]


def _tangled(blob: bytes, lost: bool) -> bytes:
    """``blob``'s lines with every fourth pair swapped (the second of a pair runs backwards),
    a junk line after every seventh and, with ``lost``, a tracefs ``[LOST]`` line after every
    fifth: lines that stop a parse, or that it counts, anywhere a chunk may start."""
    out = []
    lines = blob.split(b"\n")
    for k, line in enumerate(lines):
        out.append(line)
        if k % 7 == 6:
            out.append(b"junk")
        if lost and k % 5 == 4:
            out.append(b"CPU:0 [LOST 3 EVENTS]")
    for k in range(0, len(out) - 1, 8):
        out[k], out[k + 1] = out[k + 1], out[k]
    return b"\n".join(out)


@pytest.mark.parametrize("name", ["blkparse", "tracefs"])
def test_chunks_parsed_before_the_last_time_is_known_are_the_serial_ones(tmp_path, name,
                                                                         monkeypatch):
    """Text parsed two chunks ahead starts without the last time of the chunk before
    (formats/textevents ``_serial``): with lines running backwards, junk and [LOST] lines at
    chunk starts, in chunks of 61, 257 and 1,000 bytes, the trace, the counts (lost events,
    lines skipped) and every error are the serial parse's, and some chunks were parsed
    again."""
    import blocklab.traces.formats.textevents as TE

    blob, fmt = SAMPLES[name]
    src = tmp_path / "in.txt"
    src.write_bytes(_tangled(blob, lost=name == "tracefs"))
    checks = []
    real = TE._serial

    def spy(result, assumed, last):
        checks.append(real(result, assumed, last))
        return checks[-1]

    monkeypatch.setattr(TE, "_serial", spy)
    for chunk in (61, 257, 1000):
        for skip_bad in (0, 10_000):
            case = f"{chunk}-{skip_bad}"
            serial, _ = _outcome([str(src)], tmp_path / f"s{case}.parquet", 0, chunk, skip_bad,
                                 fmt)
            parallel, n1 = _outcome([str(src)], tmp_path / f"p{case}.parquet", 1, chunk,
                                    skip_bad, fmt)
            _same(serial, parallel)
        assert n1 > 2  # (with lines skipped: an error stops at the first chunk)
        assert not isinstance(parallel, str) and parallel[0].num_rows > 0
        assert parallel[1]["skipped"] > 3
        if name == "tracefs":
            assert parallel[1]["lost_events"] > 0
    assert checks.count(False) > 0 and checks.count(True) > 0


@pytest.mark.parametrize("t", ["9223372036.854775808", "-9223372036.854775808",
                               "-9223372036.854775807", "-1.000000000"])
def test_a_time_at_the_edge_of_int64_parses_as_serially(tmp_path, t):
    """A line whose time is -2**63 (the parse's "no last time yet") or past int64, the first
    timed line of a chunk parsed ahead: the parallel parse took the line after it for the
    chunk's first (found by review: the serial parse said "time runs backwards" there, the
    parallel one ingested it); a time past int64 wrapped and is now a bad line."""
    lines = [f"  8,0    0  {k + 1:5d}  {t if k == 6 else f'{k}.000000000'}   100  Q   W "
             f"{64 + 8 * k} + 8 [fio]\n" for k in range(12)]
    src = tmp_path / "in.txt"
    src.write_text("".join(lines))
    for chunk in (60, 120, 200):
        for skip_bad in (0, 100):
            case = f"{chunk}-{skip_bad}"
            serial, _ = _outcome([str(src)], tmp_path / f"s{case}.parquet", 0, chunk, skip_bad,
                                 "blkparse")
            parallel, _ = _outcome([str(src)], tmp_path / f"p{case}.parquet", 1, chunk,
                                   skip_bad, "blkparse")
            _same(serial, parallel)
