"""One writer per output (issue 22): while a command writes an output, a second command writing
the same path stops with one line and exit 2, and touches nothing; what killed writers left
(``.NAME.tmp-PID`` of a process that is gone, a lock file of a SIGKILLed holder) is removed by
the next run, while a live writer's temporary is left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.traces import safety

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "traces" / "samples" / "tracefs-fio-loop0-vda.txt.xz"
ARRAY = ROOT / "tests" / "arrays" / "spc1-small.toml"
BLOCKLAB = [sys.executable, "-c", "from blocklab.pipeline.cli import main; main()"]

HOLDER = """
import sys, time
from blocklab.traces.safety import output_lock
with output_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


def _hold(path: Path) -> subprocess.Popen:
    """Another process that holds ``path``'s lock until it is killed."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "held"
    return p


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _refused(res, dest: Path) -> None:
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("blocklab: error: ")
    assert f"{dest}: another blocklab command is writing it now" in lines[0], lines[0]


@pytest.mark.parametrize("command", ["ingest", "synth"])
def test_second_writer_refused(tmp_path, command):
    dest = tmp_path / "t.parquet"
    args = {"ingest": ["ingest", str(SAMPLE), "-o", str(dest)],
            "synth": ["synth", "iometer", "-o", str(dest), "--requests", "100",
                      "--capacity", "1GiB"]}[command]
    holder = _hold(dest)
    try:
        res = runner.invoke(app, args)
        _refused(res, dest)
        assert not dest.exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == [".t.parquet.lock"]
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    # the holder was killed: its lock file stays, unlocked; the next run takes it and removes it
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]


def test_two_real_ingests_of_one_output(tmp_path):
    """A real ingest stopped (SIGSTOP) while it writes: a second ingest of the same output is
    refused; the first, continued, finishes and its file is whole."""
    src = tmp_path / "big.trace"  # MQSim ASCII, long enough to be caught writing
    n = 400_000
    src.write_text("".join(f"{1000 * k} {k % 4} {8 * k} 8 {k % 2}\n" for k in range(n)))
    dest = tmp_path / "out" / "t.parquet"
    dest.parent.mkdir()
    first = subprocess.Popen([*BLOCKLAB, "ingest", str(src), "-o", str(dest)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        tmp = dest.with_name(f".t.parquet.tmp-{first.pid}")
        deadline = time.monotonic() + 120
        while not tmp.exists() and first.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        first.send_signal(signal.SIGSTOP)
        assert first.poll() is None and tmp.exists(), "the first ingest ended too soon"
        res = runner.invoke(app, ["ingest", str(src), "-o", str(dest)])
        _refused(res, dest)
        first.send_signal(signal.SIGCONT)
        _o, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err
    assert sorted(p.name for p in dest.parent.iterdir()) == ["t.parquet"]
    from blocklab.traces.store import open_trace

    pf, _ = open_trace(dest)
    assert pf.metadata.num_rows == n


def test_stale_temporaries_removed_live_ones_kept(tmp_path):
    dest = tmp_path / "t.parquet"
    dead = tmp_path / f".t.parquet.tmp-{_dead_pid()}"
    dead.write_bytes(b"partial")
    dead_dir = tmp_path / f".t.parquet.tmp-{_dead_pid()}"
    dead_dir.mkdir()
    (dead_dir / "ios.parquet").write_bytes(b"partial")
    other = tmp_path / f".other.parquet.tmp-{_dead_pid()}"  # another output's: not ours
    other.write_bytes(b"partial")
    live_proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live = tmp_path / f".t.parquet.tmp-{live_proc.pid}"
        live.write_bytes(b"being written")
        assert safety.stale_temporaries(dest) == sorted([dead, dead_dir])
        res = runner.invoke(app, ["ingest", str(SAMPLE), "-o", str(dest)])
        assert res.exit_code == 0, res.output
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            [live.name, other.name, "t.parquet"])
    finally:
        live_proc.kill()
        live_proc.wait()


def test_lock_is_reentrant_within_a_process_and_removed(tmp_path):
    dest = tmp_path / "page.html"
    with safety.output_lock(dest), safety.output_lock(dest):
        assert (tmp_path / ".page.html.lock").exists()
    assert list(tmp_path.iterdir()) == []


def test_lock_file_replaced_under_a_waiter(tmp_path):
    """A lock file removed by its holder after a waiter opened it: the waiter must not count
    the removed file's lock as the output's (it locks the file that is there now)."""
    dest = tmp_path / "x"
    lock = safety.lock_path(dest)
    lock.write_bytes(b"")
    stale_fd = os.open(lock, os.O_RDWR)
    os.unlink(lock)  # as a holder does on release
    try:
        with safety.output_lock(dest):
            assert lock.exists() and os.stat(lock).st_ino != os.fstat(stale_fd).st_ino
    finally:
        os.close(stale_fd)
