"""DuckDB's spill folder for this process: owner-only, removed with the command, and the
folders of processes that died without removing theirs removed by the next (pipeline/query.py
points DuckDB's temp_directory here)."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from blocklab.traces import safety

_spill: list[str] = []  # this process's spill folder, while it exists


def _remove_dead_spills() -> None:
    """Remove this user's spill folders of processes that are gone: a killed process (a Dask
    worker stopped with SIGKILL) left its folder in $TMPDIR (a review found three)."""
    for p in Path(tempfile.gettempdir()).glob("blocklab-duckdb-*-*"):
        pid = p.name.split("-")[2]
        with contextlib.suppress(OSError):
            if pid.isdigit() and p.stat().st_uid == os.getuid() and \
                    not safety.pid_alive(int(pid)):
                shutil.rmtree(p, ignore_errors=True)


def spill_folder() -> str:
    """This process's DuckDB spill folder, made owner-only (``$TMPDIR/blocklab-duckdb-PID-*``,
    mode 0700): spilled sorts and aggregates hold a trace's rows, and DuckDB made its own
    folder 0755 and the files in it 0644 (0666 under umask 000) in a shared /tmp. DuckDB
    removes its files when a connection closes, not a folder it did not make: the folder goes
    when the command ends (stopped too: safety.on_stop) or the process exits."""
    if _spill and os.path.isdir(_spill[0]):
        return _spill[0]
    _remove_dead_spills()
    path = tempfile.mkdtemp(prefix=f"blocklab-duckdb-{os.getpid()}-")  # (0700, ours alone)
    _spill[:] = [path]
    atexit.register(shutil.rmtree, path, True)
    safety.on_stop(lambda: shutil.rmtree(path, ignore_errors=True))
    return path


