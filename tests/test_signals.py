"""Signals (issue 22): SIGINT, SIGTERM and SIGHUP sent at a random point of a real run of every
command that writes stop it with exit 128 + signal, one line, and nothing left: no output, no
temporary file or folder, no lock. A SIGKILLed run cannot clean up: the next run of the same
output removes what it left. Real processes, not in-process calls, because signals are the
point. (capture is the exception by design: a signal is how a capture without --duration is
ended, and it keeps the file; see docs/bad-input.md.)"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.traces import safety

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
ARRAY = ROOT / "tests" / "arrays" / "spc1-small.toml"
BLOCKLAB = [sys.executable, "-c", "from blocklab.pipeline.cli import main; main()"]
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
RNG = random.Random(22)  # the random points: reproducible, different for every run

SCENARIO = '''name = "tiny"
title = "one small case"
study = "none: a signal test"
setup = "two drives striped"
assumptions = "none"
[[case]]
name = "a"
label = "random 8 KiB"
measure = ["phases"]
workload = { generator = "iometer", transfer_size = "8KiB", read_pct = 70, random_pct = 100, outstanding = 4, requests = 300000 }
[case.array]
group = [{ name = "g", layout = "raid0", width = 2, stripe_unit = "64KiB", drive = "atlas10k" }]
'''


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("sig-inputs")
    mq = d / "big.trace"  # MQSim ASCII, 36 MB: about two seconds of ingest
    with mq.open("w") as f:
        for j in range(0, 1_500_000, 100_000):
            f.write("".join(f"{1000 * k} {k % 4} {8 * k} 8 {k % 2}\n"
                            for k in range(j, j + 100_000)))
    scen = d / "tiny.toml"
    scen.write_text(SCENARIO)
    return {"mqsim": mq, "scenario": scen}


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> dict[str, Path]:
    """A trace and its run folder (for replay and report)."""
    d = tmp_path_factory.mktemp("sig-replayed")
    trace = d / "t.parquet"
    res = runner.invoke(app, ["synth", "iometer", "-o", str(trace), "--requests", "1000000",
                              "--outstanding", "8", "--random-pct", "100", "--array",
                              str(ARRAY)])
    assert res.exit_code == 0, res.output
    run = d / "run"
    res = runner.invoke(app, ["replay", str(trace), "--array", str(ARRAY), "-o", str(run)])
    assert res.exit_code == 0, res.output
    return {"trace": trace, "run": run}


def _command(request, command: str, out: Path) -> tuple[list[str], Path]:
    """The command's arguments, and the path whose appearance says the run is writing (its
    output's lock: taken once the command's handlers are in place)."""
    inputs = request.getfixturevalue("inputs")
    if command == "ingest":
        return (["ingest", str(inputs["mqsim"]), "-o", str(out / "t.parquet")],
                out / ".t.parquet.lock")
    if command == "synth":
        return (["synth", "ior", "-o", str(out / "s.parquet"), "-N", "16", "-s", "4000",
                 "-t", "4k", "-b", "64k"], out / ".s.parquet.lock")
    if command == "scenario":
        return (["scenario", "run", str(inputs["scenario"]), "-o", str(out / "sc")],
                out / ".sc.lock")
    rep = request.getfixturevalue("replayed")
    if command == "replay":
        return (["replay", str(rep["trace"]), "--array", str(ARRAY), "-o", str(out / "run")],
                out / ".run.lock")
    assert command == "report"
    return (["report", str(rep["run"]), "-o", str(out / "r.html"), "--png", str(out / "png")],
            out / ".r.html.lock")


def _start(args: list[str]) -> subprocess.Popen:
    # its own session: a SIGINT for it must not reach pytest
    return subprocess.Popen([*BLOCKLAB, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for(p: subprocess.Popen, marker: Path, timeout: float = 600) -> bool:
    """Wait until ``marker`` appears (the run holds its output's lock: it is writing);
    False if the process ended first."""
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if p.poll() is not None:
            return False
        assert time.monotonic() < deadline, "the command never started writing"
        time.sleep(0.002)
    return True


def _everything_under(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


CASES = [(c, s) for c in ("ingest", "synth", "replay", "report", "scenario") for s in SIGNALS]


@pytest.mark.parametrize("command,sig", CASES, ids=[f"{c}-{s.name}" for c, s in CASES])
def test_signal_at_a_random_point(request, tmp_path, command, sig):
    out = tmp_path / "out"
    out.mkdir()
    args, marker = _command(request, command, out)
    p = _start(args)
    try:
        started = _wait_for(p, marker)
        assert started, p.communicate()
        # each command writes for a second or more; half the points fall in its first 3 ms
        # after taking the lock, where its writers are being set up (the windows between
        # taking a lock and the try that releases it are there)
        time.sleep(RNG.random() * RNG.choice((0.003, 0.3)))
        p.send_signal(sig)
        _o, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    if p.returncode == 0:  # it finished before the signal came: the output is whole
        pytest.skip(f"{command} ended before {sig.name} arrived (rare; the output is whole)")
    assert p.returncode == 128 + sig, (p.returncode, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    head = f"blocklab: stopped by {sig.name}; nothing half-written was kept"
    assert lines and lines[-1].startswith(head), err
    # what had been renamed into place before the stop is named, and is there (a scenario's
    # finished case runs)
    done = lines[-1][len(head):].removeprefix("; complete before the stop: ")
    assert lines[-1] == head or all(Path(x).exists() for x in done.split(", ")), err
    assert "Traceback" not in err and "Exception ignored" not in err
    # nothing half-written: no temporary, no lock; the output itself only if the signal came
    # after it was renamed into place (whole, then)
    left = _everything_under(out)
    assert not [x for x in left if ".tmp-" in x or x.endswith(".lock")], left
    final = {"ingest": "t.parquet", "synth": "s.parquet", "replay": "run", "report": "r.html",
             "scenario": "sc"}[command]
    if left:
        assert (out / final).exists(), left


def test_sigkill_leaves_a_temporary_the_next_run_removes(request, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    args, marker = _command(request, "replay", out)
    p = _start(args)
    try:
        assert _wait_for(p, marker), p.communicate()
        tmp = out / f".run.tmp-{p.pid}"
        deadline = time.monotonic() + 60
        while not tmp.exists():
            assert time.monotonic() < deadline
            time.sleep(0.002)
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert tmp.is_dir(), "SIGKILL cannot be cleaned up after by the process itself"
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert sorted(x.name for x in out.iterdir()) == ["run"]
    assert (out / "run" / "meta.json").is_file()


def test_signal_ignored_by_the_parent_stays_ignored(request, tmp_path):
    """nohup: a SIGHUP the parent ignores is not turned into a stop."""
    out = tmp_path / "out"
    out.mkdir()
    args, marker = _command(request, "ingest", out)
    p = subprocess.Popen([*BLOCKLAB, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        assert _wait_for(p, marker), p.communicate()
        p.send_signal(signal.SIGHUP)
        _o, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert sorted(x.name for x in out.iterdir()) == ["t.parquet"]


def test_the_console_script_keeps_an_ignored_sighup_ignored():
    """nohup again, through the console script (pipeline/entry.py, whose handlers cover the
    imports): SIGHUP every 5 ms from the start to the end, ignored by the parent, neither stops
    the command nor prints a word of it."""
    script = Path(sys.executable).parent / "blocklab"  # the console script pip wrote
    p = subprocess.Popen([str(script), "formats"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    deadline = time.monotonic() + 120
    while p.poll() is None and time.monotonic() < deadline:
        try:
            p.send_signal(signal.SIGHUP)
        except ProcessLookupError:
            break
        time.sleep(0.005)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and err == "", err
    assert "blktrace" in out


def test_a_stop_outside_the_command_is_told_once_by_where_it_came(capsys):
    """stopped(): the line depends on where the command was (before it ran: nothing written;
    after it returned: its output complete), and a second stop says nothing more."""
    from blocklab.pipeline.cli import _app

    res = CliRunner().invoke(app, ["formats"])
    assert res.exit_code == 0 and _app._phase[0] == "ended"  # a command that returned
    try:
        for phase, want in (("ended", "after the command ended; its output is complete"),
                            ("starting", "while starting; nothing was written")):
            _app._phase[0] = phase
            _app.stopped(signal.SIGTERM)
            _app.stopped(signal.SIGINT)  # once only
            assert capsys.readouterr().err == f"blocklab: stopped by SIGTERM {want}\n"
    finally:
        _app._phase[0] = "starting"


STOP_LINES = ("while starting; nothing was written", "; nothing half-written was kept",
              "after the command ended; its output is complete")


def test_a_signal_while_the_command_starts_is_told_in_one_line():
    """The console script, stopped at points through its start: the imports (a few tenths of
    a second), Typer building the commands, the command, its end. Every stop that reaches
    blocklab's code is one line and 128 + signal. Before, a Ctrl-C in the imports printed a
    KeyboardInterrupt traceback from them, and a stop while Typer read the options exited
    130 or 143 without a word. (A signal in the first milliseconds, while Python's own site
    module runs, is Python's: its traceback has no frame of blocklab's.)"""
    script = Path(sys.executable).parent / "blocklab"  # the console script pip wrote
    assert script.is_file(), script
    sources = [str(ROOT / d) for d in ("pipeline", "traces", "kernels")]
    told = 0
    for sig in (signal.SIGINT, signal.SIGTERM):
        for k in range(10):
            p = subprocess.Popen([str(script), "drives"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True, start_new_session=True)
            time.sleep(0.04 + 0.04 * k)
            p.send_signal(sig)
            _o, err = p.communicate(timeout=120)
            if "Traceback" in err:  # Python's, from before blocklab's handlers: no frame of
                # blocklab's but entry.py's own first imports (a loaded machine stopped one in
                # `import signal`, a frame "entry.py ..., in <module>")
                ours = [(f, fn) for f, fn in re.findall(r'File "([^"]+)", line \d+, in (\S+)',
                                                         err) if any(f.startswith(src)
                                                                     for src in sources)]
                assert all(f.endswith("entry.py") and fn == "<module>" for f, fn in ours), err
                continue
            if p.returncode in (0, -sig):  # ended first, or died in Python's own start
                continue
            assert p.returncode == 128 + sig, (p.returncode, err)
            lines = [ln for ln in err.splitlines() if ln.strip()]
            assert len(lines) == 1 and lines[0].startswith(f"blocklab: stopped by {sig.name}")
            assert any(lines[0].endswith(t) or t in lines[0] for t in STOP_LINES), lines
            told += "while starting" in lines[0]
    assert told, "no stop fell in the start: the points are too late for this machine"


def test_in_process_handlers_are_restored():
    before = {s: signal.getsignal(s) for s in SIGNALS}
    res = runner.invoke(app, ["formats"])
    assert res.exit_code == 0
    assert {s: signal.getsignal(s) for s in SIGNALS} == before
    assert os.getpid()  # the test process is untouched


def test_a_signal_during_a_wait_for_a_helper_thread_is_raised_once_it_returned():
    """A stopped scenario once died of a segmentation fault (the signal cut Thread.join, which
    then marked the running Parquet writer's thread stopped, and the clean-up closed the
    writer under it), and once hung (the signal cut an Event.wait inside threading's code
    and left its lock taken). safety.Worker's wait lets no signal into threading's code: the
    signal is raised when the thread has returned, and the next wait returns at once."""
    finished: list[bool] = []

    def target() -> None:
        time.sleep(0.3)  # the last row group's write, still going when the signal comes
        finished.append(True)

    worker = safety.Worker(target, "test-worker")
    # the signal from another thread while the main thread waits, as a user's Ctrl-C
    timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGHUP))
    with safety.signals_handled():
        timer.start()
        with pytest.raises(safety.Interrupted):
            worker.join()
        assert finished == [True] and not worker.is_alive()  # raised after the thread ended
        worker.join()  # the clean-up's wait
    timer.join()


def test_a_signal_while_numba_compiles_waits_until_the_kernel_is_loaded():
    """A signal raised inside Numba can land in an llvmlite callback, where it is dropped and
    LLVM goes on half done (the scenario-SIGHUP case once died of it in ``set_env``). The
    signal is held until the kernel is compiled, then raised in the caller."""
    from numba import njit
    from numba.extending import overload

    def arrives(x):  # pragma: no cover - only its overload runs
        raise AssertionError

    @overload(arrives)
    def _arrives(x):  # runs while Numba types the kernel: the signal comes mid-compile
        os.kill(os.getpid(), signal.SIGHUP)
        return lambda x: x + 1

    @njit
    def kernel(x):
        return arrives(x)

    with safety.signals_handled():
        with pytest.raises(safety.Interrupted) as e:
            kernel(1)
            time.sleep(2)  # the held signal is raised here, within milliseconds
    assert len(kernel.signatures) == 1  # the compile was not cut
    assert e.value.signum == signal.SIGHUP
    where = [entry.frame.f_globals["__name__"] for entry in e.traceback]
    assert where[-2:] == [__name__, "blocklab.traces.safety"], where  # in our code, by the retry
    assert not [w for w in where if w.split(".")[0] in ("numba", "llvmlite")], where
    assert kernel(2) == 3  # and the kernel works


def test_a_signal_held_for_numba_is_not_lost_in_a_critical_section_after_it():
    """A signal held while a kernel compiled, whose retry comes while a critical section runs
    (taking a lock, renaming an output), is raised after that section, not dropped."""
    from numba import njit
    from numba.extending import overload

    def arrives(x):  # pragma: no cover - only its overload runs
        raise AssertionError

    @overload(arrives)
    def _arrives(x):
        os.kill(os.getpid(), signal.SIGHUP)
        return lambda x: x * 2

    @njit
    def kernel(x):
        return arrives(x)

    with safety.signals_handled():
        with pytest.raises(safety.Interrupted):
            kernel(1)  # the signal is held while it compiles, then retried every 10 ms
            with safety.critical():  # entered within microseconds of the kernel's return
                time.sleep(0.1)  # the retry comes here: held on
            time.sleep(2)  # raised here, once the section is over
    assert kernel(3) == 6


def _taken(kind: str, out: Path) -> object:
    """Take ``out``'s lock and make its temporary the way ``kind``'s writer does, leaving the
    clean-up to nobody: what a signal landing right after does (in ``contextlib``'s
    ``__enter__`` once the generator has yielded, or after a constructor returned and before
    the caller's ``try``)."""
    from blocklab.traces import store

    if kind == "atomic_output":
        cm = store.atomic_output(out)
        cm.__enter__()
        return cm
    if kind == "AtomicFolder":
        return store.AtomicFolder(out)
    assert kind == "TraceWriter"
    return store.TraceWriter(out, store.TraceMeta(source_format="mqsim"))


@pytest.mark.parametrize("kind", ["atomic_output", "AtomicFolder", "TraceWriter"])
def test_a_stop_before_the_writers_try_still_removes_its_temporary_and_lock(tmp_path, kind):
    """A stopped ingest once left ``.t.parquet.lock`` and ``.t.parquet.tmp-PID`` (CI; about
    one stop in twenty within milliseconds of the lock, by hand): the signal came while
    TraceWriter's constructor started its thread, before any ``with`` or ``try`` could clean
    up. What a writer takes is registered as it is taken (safety.on_stop) and undone when the
    command ends, whoever missed it."""
    out = tmp_path / "out"
    with pytest.raises(safety.Interrupted):
        with safety.signals_handled():
            taken = _taken(kind, out)
            assert sorted(x.name for x in tmp_path.iterdir()), "nothing taken"
            raise safety.Interrupted(signal.SIGTERM)  # the signal, right here
    assert sorted(x.name for x in tmp_path.iterdir()) == [], "left behind"
    # the writer's own clean-up, should it run later (the collector closing the suspended
    # generator), undoes nothing twice: the lock's descriptor, closed once, may be another
    # file's by then
    with (tmp_path / "other").open("w") as other:
        if kind == "atomic_output":
            taken.gen.close()  # type: ignore[attr-defined]
        elif kind == "AtomicFolder":
            taken.fail(RuntimeError("late"))  # type: ignore[attr-defined]
        else:
            taken.abort()  # type: ignore[attr-defined]
        other.write("still open")
    assert (tmp_path / "other").read_text() == "still open"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["other"]


def test_a_helper_threads_critical_section_does_not_hold_the_main_threads_signal():
    """A helper thread (ingest reads ahead on one, and its reads pass through the hasher's
    critical ``put``) cannot be cut by a signal, so its critical section is nothing: a signal
    the main thread gets meanwhile is raised at once, and the count stays the main thread's
    own (a helper's ``+= 1`` beside the main thread's could lose one)."""
    inside, leave = threading.Event(), threading.Event()

    def helper() -> None:
        with safety.critical():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=helper)
    with safety.signals_handled():
        t.start()
        assert inside.wait(10)
        try:
            with pytest.raises(safety.Interrupted):
                os.kill(os.getpid(), signal.SIGHUP)
                time.sleep(2)  # raised here, within microseconds, not when the helper leaves
        finally:
            leave.set()
            t.join()
    assert safety._critical == [0]


# blocklab's main, with a signal that arrives exactly as TraceWriter.__exit__ is entered
_LANDS_IN_EXIT = """
import os, signal, sys, time
from blocklab.traces import store
orig = store.TraceWriter.__exit__
def __exit__(self, et, ev, tb):
    os.kill(os.getpid(), signal.{sig})  # the handler raises here, before the clean-up starts
    time.sleep(5)
    return orig(self, et, ev, tb)
store.TraceWriter.__exit__ = __exit__
sys.argv[0] = "blocklab"
from blocklab.pipeline.cli import main
main()
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_where_the_writers_clean_up_never_starts_leaves_nothing(tmp_path, sig):
    """What is still registered to be undone is undone at the exit: main left by os._exit,
    past signals_handled's own release_all, and about one Ctrl-C of a CSV ingest in five
    (landing as the writer's __exit__ began) left the lock and the temporary under "nothing
    half-written was kept" (found by a review of stops at random points)."""
    src = tmp_path / "in.trace"  # MQSim ASCII
    src.write_text("".join(f"{1000 * k} 0 {8 * k} 8 {k % 2}\n" for k in range(5000)))
    out = tmp_path / "out"
    out.mkdir()
    p = subprocess.run([sys.executable, "-c", _LANDS_IN_EXIT.format(sig=sig.name), "ingest",
                        str(src), "-o", str(out / "t.parquet")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 128 + sig, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert lines[-1] == f"blocklab: stopped by {sig.name}; nothing half-written was kept"
    assert _everything_under(out) == []


# blocklab's main, with a signal that arrives just as an output is renamed into place
_LANDS_AFTER_RENAME = """
import os, signal, sys, time
from blocklab.traces import store
orig = store.wrote
def wrote(path):
    orig(path)
    os.kill(os.getpid(), signal.SIGTERM)  # held by the rename's critical section, then raised
    time.sleep(5)
store.wrote = wrote
sys.argv[0] = "blocklab"
from blocklab.pipeline.cli import main
main()
"""


def test_a_stop_after_the_output_is_in_place_says_it_was_kept(tmp_path):
    """A signal just after the rename (a replay printing its summary, say) stops the command
    with its output complete and in place, and the message said "nothing half-written was
    kept" as if there were none (a fresh reader's review): it now names what was complete."""
    src = tmp_path / "in.trace"  # MQSim ASCII
    src.write_text("".join(f"{1000 * k} 0 {8 * k} 8 {k % 2}\n" for k in range(50)))
    out = tmp_path / "t.parquet"
    p = subprocess.run([sys.executable, "-c", _LANDS_AFTER_RENAME, "ingest", str(src), "-o",
                        str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 128 + signal.SIGTERM, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert lines[-1] == ("blocklab: stopped by SIGTERM; nothing half-written was kept; complete "
                         f"before the stop: {out}")
    assert pq.read_metadata(out).num_rows == 50
    assert sorted(x.name for x in tmp_path.iterdir()) == ["in.trace", "t.parquet"]
