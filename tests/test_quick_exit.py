"""``blocklab`` leaves without Python's teardown of the interpreter once a command is done
(pipeline/cli ``_exit_quickly``), and still does what a normal exit does that shows outside
the process: exit handlers run, output is flushed, the status is the command's, a thread
still working is waited for. Each case runs the real entry point in a new process."""

from __future__ import annotations

import subprocess
import sys

import pytest

PRELUDE = """
import atexit, sys, threading, time
from pathlib import Path
class Teardown:
    def __del__(self):
        print("torn down", flush=True)
keep = Teardown()  # only the interpreter's teardown deletes it
atexit.register(lambda: print("exit handler ran", flush=True))
"""


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    src = PRELUDE + code + "\nfrom blocklab.pipeline.cli import main\nmain()\n"
    return subprocess.run([sys.executable, "-c", src, *args], capture_output=True, text=True,
                          timeout=120)


def test_a_finished_command_skips_the_teardown_but_runs_the_exit_handlers():
    r = _run("", "formats")
    assert r.returncode == 0, r.stderr
    assert "blktrace" in r.stdout  # the command's output, flushed
    assert r.stdout.rstrip().endswith("exit handler ran")
    assert "torn down" not in r.stdout


def test_the_status_of_a_failed_command_is_kept(tmp_path):
    r = _run("", "trace", "stats", str(tmp_path / "missing.parquet"))
    assert r.returncode == 2
    assert "missing.parquet" in r.stderr and r.stderr.count("\n") == 1
    assert "exit handler ran" in r.stdout and "torn down" not in r.stdout


@pytest.mark.parametrize("daemon", [False, True])
def test_a_thread_still_working_is_waited_for_as_python_would(tmp_path, daemon):
    """A thread that is not a daemon still runs when the command returns: Python's own exit
    (which waits for it) takes over; a daemon thread is not waited for, as by Python."""
    flag = tmp_path / "written"
    # the thread writes once the command has returned (not after a fixed time, which a loaded
    # machine's slow command outlasted): a daemon thread 2 s later, when the process is long
    # gone; a thread Python waits for 0.2 s later
    r = _run(f"""
import blocklab.pipeline.cli as cli
returned = threading.Event()
command = cli.app
def app():
    try:
        command()
    finally:
        returned.set()
cli.app = app
def late():
    returned.wait()
    time.sleep({2.0 if daemon else 0.2})
    Path({str(flag)!r}).write_text("done")
threading.Thread(target=late, daemon={daemon}).start()
""", "formats")
    assert r.returncode == 0, r.stderr
    assert flag.exists() is (not daemon)
    assert ("torn down" in r.stdout) is (not daemon)


_THREADS = ("import os, blocklab.pipeline.cli, numpy; "
            "print(len(os.listdir('/proc/self/task')))")


@pytest.mark.parametrize("setting, threads", [(None, 1), ("2", 2)])
def test_the_command_starts_one_blas_thread_unless_told(setting, threads):
    """NumPy's OpenBLAS threads (one a core, spinning after import) are not started by a
    command: its process has only its main thread once NumPy is in, unless the user set
    OPENBLAS_NUM_THREADS, which is kept (OpenBLAS counts the caller as one of them)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if setting is not None:
        env["OPENBLAS_NUM_THREADS"] = setting
    out = subprocess.run([sys.executable, "-c", _THREADS], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert int(out) == threads
