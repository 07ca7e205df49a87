"""Operating-system errors are one line naming the path and the cause, exit 2 (1 for a fault of
the machine), and leave nothing behind: a full file system (a small tmpfs when root can mount
one; else a file-size limit, which fails writes the same way), a read-only file system,
permission denied, an output that is a folder, a missing folder, an output on another file
system than its temporary (a mount point)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.traces.errors import BlocklabError
from blocklab.traces.safety import SystemFault, os_error

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "traces" / "samples" / "tracefs-fio-loop0-vda.txt.xz"
BLOCKLAB = [sys.executable, "-c", "from blocklab.pipeline.cli import main; main()"]
IS_ROOT = os.geteuid() == 0


def _can_mount() -> bool:
    if not IS_ROOT or shutil.which("mount") is None:
        return False
    d = Path(f"/tmp/blocklab-mount-probe-{os.getpid()}")
    d.mkdir(exist_ok=True)
    try:
        ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(d)],
                            capture_output=True).returncode == 0
        if ok:
            subprocess.run(["umount", str(d)], check=True)
        return ok
    finally:
        d.rmdir()


CAN_MOUNT = _can_mount()
needs_mount = pytest.mark.skipif(not CAN_MOUNT, reason="needs root that may mount a tmpfs")


@contextlib.contextmanager
def _mounted(tmp_path: Path, options: str):
    """A tmpfs mounted with ``options`` at tmp_path/small, unmounted at the end."""
    d = tmp_path / "small"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(d)], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)


@pytest.fixture
def tmpfs(tmp_path):
    """A 24 KiB tmpfs: too small for any of the outputs written into it."""
    with _mounted(tmp_path, "size=24k,mode=0777") as d:
        yield d


def _parallel_trace(tmp_path: Path) -> tuple[Path, Path]:
    """A trace of 100,000 requests in bursts that parallel replay can cut, and its array."""
    from .test_parallel_replay import ARRAY, bursts, write_trace

    (tmp_path / "a.toml").write_text(ARRAY)
    return (write_trace(tmp_path / "t.parquet", bursts(20, 5000, 2_000_000, 2_000_000_000)),
            tmp_path / "a.toml")


def _one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("blocklab: error: ") and "Traceback" not in stderr
    return lines[0]


def _run(args: list[str], limit_bytes: int | None = None, user: bool = False,
         env: dict[str, str] | None = None):
    """A real blocklab process (with a file-size limit: a fake full file system)."""
    def limit() -> None:
        if limit_bytes is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # then write() fails with EFBIG
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    cmd = [*BLOCKLAB, *args]
    if user:  # root ignores file modes: run as nobody to meet them
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, preexec_fn=limit,
                          env={**os.environ, **(env or {})},
                          timeout=600)


# --- full file system


@needs_mount
@pytest.mark.parametrize("command", [
    ["ingest", str(SAMPLE), "-o", "{d}/t.parquet"],
    ["synth", "ior", "-o", "{d}/s.parquet", "-N", "16", "-s", "200", "-z"],
])
def test_full_tmpfs(tmpfs, command):
    res = _run([a.format(d=tmpfs) for a in command])
    assert res.returncode == 2, res.stderr
    line = _one_line(res.stderr)
    assert str(tmpfs) in line and "no space left on the device (ENOSPC)" in line, line
    assert list(tmpfs.iterdir()) == []


@needs_mount
@pytest.mark.replays
def test_a_run_its_disk_cannot_hold_is_refused_before_the_disk_fills(tmp_path, monkeypatch):
    """A replay into a 4 MiB file system of a trace whose run files need about 8: refused once
    its first bytes are written, naming the run folder, the need and the room (not a full
    disk an hour into a big replay), and nothing left behind."""
    from blocklab.pipeline import replay as replay_mod
    from blocklab.pipeline.synth import synth_iometer

    trace = tmp_path / "io.parquet"
    synth_iometer(trace, requests=400_000, random_pct=100, capacity="64GiB")
    with _mounted(tmp_path, "size=4m") as small:
        monkeypatch.setattr(replay_mod, "ROOM_CHECK_BYTES", 1)  # after the first chunk
        res = runner.invoke(app, ["replay", str(trace), "--array",
                                  str(ROOT / "examples" / "arrays" / "raid6-4p2-x8.toml"),
                                  "-o", str(small / "run")])
        assert res.exit_code == 2, res.output
        line = _one_line(res.stderr)
        m = re.search(r": 400,000 requests need about ([\d.]+) MB of run files \(ios.parquet\) "
                      r"\(([\d.]+) bytes a request over the first ([\d,]+)\), and its disk has "
                      r"([\d.]+) MB free", line)
        assert m and line.startswith(f"blocklab: error: {small / 'run'}: "), line
        assert float(m[1]) == pytest.approx(float(m[2]) * 400_000 / 1e6, rel=0.02, abs=0.1)
        assert float(m[1]) > float(m[4]) and float(m[4]) <= 4.2, line
        assert 0 < int(m[3].replace(",", "")) < 400_000
        assert list(small.iterdir()) == []


@needs_mount
@pytest.mark.replays
def test_a_parallel_run_its_disk_cannot_hold_is_refused(tmp_path, monkeypatch):
    """--workers 2 into a 3 MiB file system, the run's files about 2 MB: the segments' parts
    fit, but they and the run's files joined from them do not. Refused on the client when the
    first part is in, the need counted twice, and nothing left behind (the parallel replay
    did not check: it ran until the disk filled, at the join)."""
    from blocklab.pipeline import parallel as parallel_mod

    trace, array = _parallel_trace(tmp_path)
    with _mounted(tmp_path, "size=3m") as small:
        monkeypatch.setattr(parallel_mod, "ROOM_CHECK_BYTES", 1)  # at the first part
        res = runner.invoke(app, ["replay", str(trace), "--array", str(array),
                                  "-o", str(small / "run"), "--workers", "2"])
        assert res.exit_code == 2, res.output
        line = _one_line(res.stderr)
        m = re.search(r": 100,000 requests need about ([\d.]+) MB of run files and, until they "
                      r"are joined, the segments' parts \(([\d.]+) bytes a request over the "
                      r"first ([\d,]+)\), and its disk has ([\d.]+) MB free", line)
        assert m and line.startswith(f"blocklab: error: {small / 'run'}: "), line
        assert float(m[1]) == pytest.approx(2 * float(m[2]) * 100_000 / 1e6, rel=0.02, abs=0.1)
        assert float(m[1]) > float(m[4]) > 3.0, line  # the parts already in count as room
        assert 0 < int(m[3].replace(",", "")) < 100_000
        assert list(small.iterdir()) == []


@needs_mount
@pytest.mark.replays
def test_a_parallel_replay_onto_a_full_disk_is_one_line(tmp_path):
    """--workers 2 into a 256 KiB file system: the segments cannot write their parts. Dask ran
    each failed segment again (RETRIES) and the workers' logs printed its traceback, five
    times, before a line naming the trace and the raw OSError; now one line names the run
    folder and the cause, and nothing is left."""
    trace, array = _parallel_trace(tmp_path)
    with _mounted(tmp_path, "size=256k") as small:
        res = _run(["replay", str(trace), "--array", str(array), "-o",
                    str(small / "run"), "--workers", "2"])
        assert res.returncode == 2, res.stderr
        line = _one_line(res.stderr)
        assert line == (f"blocklab: error: {small / 'run'}: no space left on the device "
                        "(ENOSPC)"), line
        assert list(small.iterdir()) == []


def test_file_size_limit_as_a_full_disk(tmp_path):
    """Without root: a file-size limit fails the writes as a full disk does (EFBIG)."""
    out = tmp_path / "o"
    out.mkdir()
    res = _run(["synth", "ior", "-o", str(out / "s.parquet"), "-N", "16", "-s", "200", "-z"],
               limit_bytes=32 << 10)
    assert res.returncode == 2, res.stderr
    line = _one_line(res.stderr)
    assert str(out / "s.parquet") in line and "file too large" in line, line
    assert list(out.iterdir()) == []


# --- read-only, permission denied, a folder in the way, a missing folder, a mount point


@needs_mount
def test_read_only_file_system(tmpfs):
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    res = runner.invoke(app, ["ingest", str(SAMPLE), "-o", str(tmpfs / "t.parquet")])
    assert res.exit_code == 2
    line = _one_line(res.stderr)
    assert str(tmpfs / "t.parquet") in line and "read-only file system (EROFS)" in line


@pytest.mark.skipif(IS_ROOT and shutil.which("setpriv") is None,
                    reason="root ignores file modes and setpriv is missing")
def test_permission_denied():
    # a folder every user may enter (pytest's tmp_path is its owner's only)
    top = Path(tempfile.mkdtemp(prefix="blocklab-perm-"))
    try:
        top.chmod(0o755)
        d = top / "locked"
        d.mkdir(mode=0o555)
        d.chmod(0o555)
        # an MSR CSV: its reader compiles nothing, so nobody's empty Numba cache costs nothing
        src = top / "in.csv"
        src.write_text("128166372003061629,hm,1,Read,3154152960,32768,1985\n" * 50)
        src.chmod(0o644)
        cache = top / "numba"
        cache.mkdir(mode=0o777)
        cache.chmod(0o777)
        env = {"NUMBA_CACHE_DIR": str(cache)}
        res = _run(["ingest", str(src), "-o", str(d / "t.parquet")], user=IS_ROOT, env=env)
        if IS_ROOT and "No module named 'blocklab'" in res.stderr:
            # the checkout (an editable install) sits in a folder nobody may enter, as a clone
            # under `mktemp -d` does: this test cannot run blocklab as another user there
            pytest.skip("the checkout is not readable by user nobody")
        assert res.returncode == 2, res.stderr
        line = _one_line(res.stderr)
        assert str(d / "t.parquet") in line and "permission denied (EACCES)" in line, line
        assert list(d.iterdir()) == []
        # an input the user may not read: the same, naming the input
        src.chmod(0o600)
        res = _run(["ingest", str(src), "-o", str(top / "t.parquet")], user=IS_ROOT, env=env)
        assert res.returncode == 2, res.stderr
        line = _one_line(res.stderr)
        assert f"{src}: permission denied (EACCES)" in line, line
    finally:
        (top / "locked").chmod(0o755)
        shutil.rmtree(top)


def test_output_is_a_folder(tmp_path):
    (tmp_path / "t.parquet").mkdir()
    res = runner.invoke(app, ["ingest", str(SAMPLE), "-o", str(tmp_path / "t.parquet")])
    assert res.exit_code == 2
    line = _one_line(res.stderr)
    assert f"{tmp_path / 't.parquet'}: is a folder, expected a file" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]


def test_missing_folder(tmp_path):
    res = runner.invoke(app, ["ingest", str(SAMPLE), "-o", str(tmp_path / "no" / "t.parquet")])
    assert res.exit_code == 2
    line = _one_line(res.stderr)
    assert str(tmp_path / "no" / "t.parquet") in line and "(ENOENT)" in line
    assert list(tmp_path.iterdir()) == []


@needs_mount
def test_output_on_another_device_than_its_temporary(tmp_path):
    """An output that is a mount point (here a file bind-mounted from elsewhere) cannot be
    replaced by renaming its temporary, which is on the folder's file system."""
    other = tmp_path / "other.parquet"
    other.write_bytes(b"old")
    dest = tmp_path / "t.parquet"
    dest.write_bytes(b"")
    subprocess.run(["mount", "--bind", str(other), str(dest)], check=True)
    try:
        res = runner.invoke(app, ["ingest", str(SAMPLE), "-o", str(dest)])
    finally:
        subprocess.run(["umount", str(dest)], check=False)
    assert res.exit_code == 2
    line = _one_line(res.stderr)
    assert str(dest) in line and "mount point" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.parquet", "t.parquet"]
    assert other.read_bytes() == b"old"


# --- the mapping itself


@pytest.mark.parametrize("code,status,words", [
    (errno.ENOSPC, 2, "no space left"), (errno.EACCES, 2, "permission denied"),
    (errno.EROFS, 2, "read-only"), (errno.EISDIR, 2, "is a folder"),
    (errno.EXDEV, 2, "another file system"), (errno.EBUSY, 2, "mount point"), (errno.EIO, 1, "Input/output error"),
    (errno.ENOMEM, 1, "memory"),
])
def test_os_error_lines(code, status, words):
    e = os_error(OSError(code, os.strerror(code)), "/data/out.parquet")
    assert isinstance(e, BlocklabError)
    assert isinstance(e, SystemFault) == (status == 1)
    assert getattr(e, "exit_status", 2) == status
    assert str(e).startswith("/data/out.parquet: ") and words.lower() in str(e).lower()
    assert f"({errno.errorcode[code]})" in str(e)


def test_pyarrow_style_error_without_errno():
    # pyarrow raises OSError("... error: No space left on device") with no errno set
    e = os_error(OSError("Error writing bytes to file. Detail: [errno 28] No space left on "
                         "device"), "/data/out.parquet")
    assert str(e) == "/data/out.parquet: no space left on the device (ENOSPC)"


def test_a_trace_writer_that_cannot_open_its_file_is_one_line_naming_the_output(tmp_path,
                                                                               monkeypatch):
    """pyarrow failing to open the temporary (a full disk, as pyarrow words it) comes out as
    one line naming the output, and leaves nothing: as a failure later in the write does."""
    import errno

    from blocklab.traces import store
    from blocklab.traces.errors import BlocklabError

    def no_space(path, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(store.pq, "ParquetWriter", no_space)
    out = tmp_path / "t.parquet"
    with pytest.raises(BlocklabError) as e:
        store.TraceWriter(out, store.TraceMeta(source_format="test"))
    assert str(e.value) == f"{out}: no space left on the device (ENOSPC)"
    assert list(tmp_path.iterdir()) == []
