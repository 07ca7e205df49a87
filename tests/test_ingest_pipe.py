"""Ingest reads a trace from a pipe (a named pipe, /dev/stdin, a shell's process substitution)
as a stream, once, with the same result as from the file: the format is told from the first
bytes without seeking back to them. Before, the first 8 bytes were read and the file seeked
back to 0, which a pipe cannot do ("blocklab: error: blocklab: File or stream is not
seekable.", naming no file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest

SAMPLE = Path(__file__).resolve().parents[1] / "traces" / "samples" / "tracefs-fio-loop0-vda.txt.xz"
BLOCKLAB = [sys.executable, "-m", "blocklab.pipeline.cli"]


def _ingest(src: str, out: Path, **kw) -> dict:
    p = subprocess.run([*BLOCKLAB, "ingest", src, "-o", str(out), "--json"], capture_output=True,
                       text=True, **kw)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _feed(fifo: Path, data: bytes) -> threading.Thread:
    def write() -> None:
        try:
            with open(fifo, "wb") as f:
                for i in range(0, len(data), 1 << 16):  # several writes: the reader sees pieces
                    f.write(data[i : i + (1 << 16)])
        except BrokenPipeError:  # the reader stopped (the old code, at its seek)
            pass

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("compressed", [True, False])
def test_a_named_pipe_ingests_as_the_file_does(tmp_path, compressed):
    import lzma

    data = SAMPLE.read_bytes() if compressed else lzma.decompress(SAMPLE.read_bytes())
    src = tmp_path / "trace.txt"
    src.write_bytes(data)
    want = _ingest(str(src), tmp_path / "file.parquet")

    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    t = _feed(fifo, data)
    got = _ingest(str(fifo), tmp_path / "pipe.parquet", timeout=120)
    t.join(timeout=10)

    assert got["requests"] == want["requests"] > 0
    assert got["sources"][0]["sha256"] == want["sources"][0]["sha256"]
    assert got["sources"][0]["bytes"] == want["sources"][0]["bytes"] == len(data)
    assert got["input_bytes"] == len(data)
    a = pq.read_table(tmp_path / "file.parquet")
    b = pq.read_table(tmp_path / "pipe.parquet")
    assert a.equals(b)


@pytest.mark.parametrize("compressed", [True, False])
@pytest.mark.parametrize("src", ["/dev/stdin", "-"])
def test_standard_input_ingests(tmp_path, src, compressed):
    """Standard input redirected from a file, compressed or not (a regular file then: not
    mapped by the name ``-``, which once read a file of that name in the current folder)."""
    import lzma

    plain = tmp_path / "trace.txt"
    plain.write_bytes(lzma.decompress(SAMPLE.read_bytes()))
    sample = SAMPLE if compressed else plain
    (tmp_path / "-").write_bytes(b"not this file\n")  # a decoy in the current folder
    want = _ingest(str(sample), tmp_path / "file.parquet")
    with open(sample, "rb") as f:
        got = _ingest(src, tmp_path / "stdin.parquet", stdin=f, timeout=120, cwd=tmp_path)
    assert got["requests"] == want["requests"]
    assert got["sources"][0]["sha256"] == want["sources"][0]["sha256"]
    assert pq.read_table(tmp_path / "stdin.parquet").equals(
        pq.read_table(tmp_path / "file.parquet"))


def test_a_pipe_shorter_than_a_format_header_is_one_line(tmp_path):
    fifo = tmp_path / "tiny"
    os.mkfifo(fifo)
    t = _feed(fifo, b"abc")
    p = subprocess.run([*BLOCKLAB, "ingest", str(fifo), "-o", str(tmp_path / "t.parquet")],
                       capture_output=True, text=True, timeout=60)
    t.join(timeout=10)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and str(fifo) in lines[0], p.stderr
    assert not (tmp_path / "t.parquet").exists()


def test_standard_input_given_twice_is_one_line(tmp_path):
    p = subprocess.run([*BLOCKLAB, "ingest", "-", "-", "-o", str(tmp_path / "x.parquet")],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)
    assert p.returncode == 2 and p.stderr.strip() == "blocklab: error: -: standard input given twice"
