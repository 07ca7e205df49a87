"""Outputs written safely: one writer per output, temporaries of killed runs removed, signals
turned into a clean stop, and operating-system errors turned into one line for people.

Every command that writes uses these (through ``store.atomic_output``, ``store.TraceWriter``
and ``AtomicFolder``):

- **Temporary names.** An output ``DIR/NAME`` is written as ``DIR/.NAME.tmp-PID`` and renamed
  when complete. A run that is stopped removes its temporary; one that was SIGKILLed cannot, so
  the next run writing ``NAME`` removes every ``.NAME.tmp-PID`` whose process is gone.
- **One writer.** The output is locked (``flock`` on ``DIR/.NAME.lock``) for as long as it is
  written; a second command writing the same output meanwhile stops with one line. The lock
  file is removed by its holder, and a waiter that locked a removed file tries again.
- **Signals.** SIGINT, SIGTERM and SIGHUP raise ``Interrupted`` (a KeyboardInterrupt) in the
  main thread, so every ``except BaseException`` clean-up runs; the CLI exits 128 + signal.
  A signal that arrives while an output is being renamed into place (``critical``) is held
  until the rename is done, so an output is never half replaced; one that arrives while Numba
  loads or compiles a kernel is held until that kernel is loaded (an exception there can leave
  LLVM half done and crash the process).
- **Undo on stop.** What a writer takes (a lock, a temporary) is registered with ``on_stop``
  as it is taken and released by the writer's own clean-up; whatever a stopped command never
  reached the clean-up of is undone when the command ends (``signals_handled``). A signal's
  exception can land between the taking and the ``try`` that would undo it.
- **Operating-system errors** become a ``BlocklabError`` naming the path and the cause (exit
  2), or a ``SystemFault`` (exit 1) for faults of the machine rather than of the request.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from .errors import BlocklabError

_TMP = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>\d+)$")


def _named(dest: Path) -> Path:
    """``dest``, which must have a name to write under: ``-o ''`` is the current folder and
    ``-o /`` the root (pathlib's ValueError, a traceback, before)."""
    if not dest.name or dest.name in (".", ".."):
        raise BlocklabError(f"-o {str(dest)!r}: an output needs a name of its own (a file or "
                            "a folder to write, not the current, parent or root folder)")
    return dest


def temporary_name(dest: Path) -> Path:
    """The name ``dest`` is written under before it is complete: ``.NAME.tmp-PID`` beside it."""
    return _named(dest).with_name(f".{dest.name}.tmp-{os.getpid()}")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a zombie writes nothing more)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except (OSError, IndexError):  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def stale_temporaries(dest: Path) -> list[Path]:
    """Temporaries of ``dest`` (``.NAME.tmp-PID`` beside it) whose process is gone."""
    dest = Path(dest)
    out = []
    with contextlib.suppress(OSError):
        for p in dest.parent.iterdir():
            m = _TMP.match(p.name)
            if m and m["name"] == dest.name and int(m["pid"]) != os.getpid() \
                    and not pid_alive(int(m["pid"])):
                out.append(p)
    return sorted(out)


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def remove_stale(dest: Path) -> list[str]:
    """Remove what killed runs writing ``dest`` left; returns what was removed."""
    gone = []
    for p in stale_temporaries(dest):
        _remove(p)
        gone.append(str(p))
    return gone


def clean_temporaries(folder: Path) -> list[str]:
    """Remove every temporary (``.NAME.tmp-PID``) under ``folder``, at any depth, whoever
    wrote it. Only for a caller that holds ``folder``'s lock: then no one else writes there."""
    gone = []
    for root, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            if _TMP.match(name):
                p = Path(root) / name
                _remove(p)
                gone.append(str(p))
        dirs[:] = [d for d in dirs if not _TMP.match(d)]
    return gone


# ---------------------------------------------------------------------------------------------
# what a stopped command must undo

_undo: dict[int, Callable[[], None]] = {}
_undo_lock = threading.Lock()
_undo_count = [0]


def on_stop(undo: Callable[[], None]) -> int:
    """Register ``undo`` (remove a temporary, release a lock) as soon as what it undoes is
    taken, and return its token. It runs once: where the writer cleans up (``release``), or,
    should the writer never get there, when the command ends (``release_all``, from
    ``signals_handled``).

    A writer's ``try``/``finally`` cannot cover everything: a signal's exception can land
    after a constructor took a lock and made a temporary and before the caller's ``try`` (the
    CALL's own check for signals, once the constructor has returned), or in ``contextlib``'s
    ``__enter__`` after the generator reached its ``yield`` (CPython bpo-29988). The
    generator's clean-up never runs then. tests/test_signals.py found it: about one ingest in
    twenty stopped within milliseconds of taking its lock left the lock and the temporary."""
    with _undo_lock:
        _undo_count[0] += 1
        token = _undo_count[0]
        _undo[token] = undo
    return token


def release(token: int, run: bool = True) -> None:
    """Undo what ``token`` registered, if not done already (``run=False``: the writer finished
    and there is nothing to undo, as for a temporary renamed into place)."""
    with _undo_lock:
        undo = _undo.pop(token, None)
    if undo is not None and run:
        undo()


_written: list[str] = []  # outputs renamed into place by this command (``wrote``)


def wrote(path: str | os.PathLike[str]) -> None:
    """Note an output renamed into place, complete: a signal after it stops the command with
    that output kept, and the message says so (it said "nothing half-written was kept" while a
    replay's complete run folder stayed)."""
    _written.append(str(path))


def written() -> list[str]:
    """The outputs this command renamed into place so far."""
    return list(_written)


def release_all() -> None:
    """Undo everything still registered, the newest first (a temporary before its lock)."""
    while True:
        with _undo_lock:
            if not _undo:
                return
            undo = _undo.pop(max(_undo))
        with contextlib.suppress(Exception):
            undo()


# ---------------------------------------------------------------------------------------------
# one writer per output

_held: dict[str, int] = {}
_held_lock = threading.Lock()


class OutputBusy(BlocklabError):
    """Another process holds the output's lock."""


@contextlib.contextmanager
def hold_lock(lockfile: Path, busy: str, remove: bool = True) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lockfile`` (made if missing), or raise OutputBusy with
    the message ``busy``. Re-entrant within a process (a report locks its page, then writes it
    with atomic_output, which locks it again). With ``remove`` the file is unlinked before it is
    released, so no lock file stays behind."""
    key = os.path.abspath(lockfile)
    with _held_lock:
        if key in _held:
            _held[key] += 1
            nested = True
        else:
            nested = False
    if nested:
        try:
            yield
        finally:
            with _held_lock:
                _held[key] -= 1
        return
    token = None
    try:
        with critical():  # a signal waits until the lock is held (and released by finally)
            fd = _acquire(lockfile, busy)
            with _held_lock:
                _held[key] = 1
            token = on_stop(lambda: _unlock(lockfile, fd, key, remove))
        yield
    finally:
        if token is not None:
            release(token)


def _unlock(lockfile: Path, fd: int, key: str, remove: bool) -> None:
    with _held_lock:
        _held.pop(key, None)
    if remove:
        with contextlib.suppress(OSError):
            os.unlink(lockfile)
    os.close(fd)


def _acquire(lockfile: Path, busy: str) -> int:
    while True:
        try:
            fd = os.open(lockfile, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as e:
            # named as the output it locks: that is the path the user gave
            e.filename = None
            raise os_error(e, lockfile.parent / lockfile.name.removesuffix(".lock")
                           .removeprefix(".")) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputBusy(busy) from None
        # the holder before us may have removed the file after we opened it: then our lock
        # is on a file no one else can find; lock the one that is there now instead
        try:
            same = os.fstat(fd).st_ino == os.stat(lockfile).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def lock_path(dest: Path) -> Path:
    return _named(dest).with_name(f".{dest.name}.lock")


def make_folders(folder: Path) -> None:
    """Make ``folder`` and the folders above it that are missing, each readable by its owner
    only (0700): they hold run folders and reports of traces (``mkdir(parents=True)`` made
    the parents with the umask's mode, 0777 under umask 000). Existing folders keep theirs."""
    missing = []
    f = Path(folder)
    while not f.exists() and f != f.parent:
        missing.append(f)
        f = f.parent
    for f in reversed(missing):
        with contextlib.suppress(FileExistsError):  # (made meanwhile by another command)
            f.mkdir(mode=0o700)


@contextlib.contextmanager
def output_lock(dest: str | os.PathLike[str], make_parent: bool = False) -> Iterator[None]:
    """Hold ``dest``'s lock (``.NAME.lock`` beside it) while the body writes ``dest``, after
    removing the temporaries of killed runs that wrote it. With ``make_parent`` the folder
    ``dest`` goes in is made if missing (else a missing folder is a one-line error)."""
    dest = Path(dest)
    if make_parent:
        try:
            make_folders(dest.parent)
        except OSError as e:
            raise os_error(e, dest) from None
    with hold_lock(lock_path(dest), f"{dest}: another blocklab command is writing it now "
                   f"(it holds {lock_path(dest).name}); wait until it ends"):
        remove_stale(dest)
        yield


#: The files of an input folder (a run: meta.json and its Parquet tables; a sweep: sweep.json,
#: summary/) that commands read; a report written beside a run before is no input, and may be
#: written again.
_FOLDER_DATA = (".parquet", ".json", ".toml")


def not_an_input(output: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]],
                 folder: bool = False) -> None:
    """Refuse an ``output`` that would replace one of the command's ``inputs``: an output is
    renamed over its destination when complete, so the input would be gone, or, being read
    while it is replaced, read half old and half new. Refused: the same file (also through a
    link); an existing data file inside an input folder (a run folder's meta.json or Parquet
    files; a report beside the run, new or written before, is not refused); and with
    ``folder`` (an output folder replaced whole: a run, a scenario, a sweep), a folder that
    holds an input. Standard input (``-``) is no file."""
    out = Path(os.path.realpath(_named(Path(output))))
    for given in inputs:
        if str(given) == "-":
            continue
        src = Path(os.path.realpath(given))
        same = out == src or (out.exists() and src.exists() and os.path.samefile(out, src))
        if same:
            raise BlocklabError(f"{output}: is this command's input {given}; write the output "
                                "elsewhere (it would replace the input)")
        if src.is_dir() and src in out.parents and out.suffix in _FOLDER_DATA and out.exists():
            raise BlocklabError(f"{output}: is a file of the input folder {given}; write the "
                                "output elsewhere (it would replace that file)")
        if folder and out in src.parents:
            raise BlocklabError(f"{output}: holds this command's input {given}, and is "
                                "replaced whole; write the output elsewhere or move the input")


# ---------------------------------------------------------------------------------------------
# operating-system errors


class SystemFault(BlocklabError):
    """A fault of the machine (an I/O error, memory exhausted), not of what was asked:
    reported as one line with exit status 1."""

    exit_status = 1


_CAUSES = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large for the file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.EISDIR: "is a folder, expected a file",
    errno.ENOTDIR: "a part of the path is not a folder",
    errno.ENOENT: "no such file or folder",
    errno.EEXIST: "exists already",
    errno.ENOTEMPTY: "a folder that is not empty is in the way",
    errno.EXDEV: "on another file system than its temporary (a mount point?): write it "
                 "into a folder of one file system",
    errno.ENAMETOOLONG: "name too long",
    errno.ELOOP: "too many symbolic links",
    errno.EBUSY: "busy: a mount point (an output and its temporary beside it must be on one "
                 "file system), or in use",
    errno.ETXTBSY: "busy (a program being run)",
    errno.EMFILE: "too many open files",
}
#: errnos that are the machine's fault (exit 1), not the user's request (exit 2)
_FAULTS = {errno.EIO, errno.ENOMEM, errno.EMFILE, errno.ENFILE, errno.ENXIO, errno.ENODEV,
           errno.ESTALE}


def _errno_of(e: OSError) -> int | None:
    if e.errno is not None:
        return e.errno
    # pyarrow raises OSError("... error: No space left on device") without an errno
    text = str(e)
    for code in _CAUSES | dict.fromkeys(_FAULTS, ""):
        if os.strerror(code) in text:
            return code
    return None


def os_error(e: OSError, path: str | os.PathLike[str]) -> BlocklabError:
    """``e`` as one line naming the path and the cause (SystemFault for a machine fault).

    ``path`` is the output being written; the error's own file name, when it has one and it
    is not a temporary of ``path``, is named instead (it is where the fault is)."""
    code = _errno_of(e)
    where = str(path)
    if e.filename and not _TMP.match(Path(str(e.filename)).name):
        where = str(e.filename)
    cause = _CAUSES.get(code) if code is not None else None
    if cause is None:
        cause = os.strerror(code) if code is not None else (str(e).strip().splitlines()
                                                            or [type(e).__name__])[0]
    name = errno.errorcode.get(code, "") if code is not None else ""
    msg = f"{where}: {cause}" + (f" ({name})" if name else "")
    return SystemFault(msg) if code in _FAULTS else BlocklabError(msg)


# ---------------------------------------------------------------------------------------------
# signals

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread when SIGINT, SIGTERM or SIGHUP arrives (a KeyboardInterrupt,
    so code that stops cleanly on Ctrl-C stops cleanly on all three)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}"


_received: list[int] = []  # the signal that stopped this run (one at most)
_critical = [0]
_pending: list[int] = []
_depth = [0]  # signals_handled nesting
_raised = [False]  # Interrupted has been raised for the signal received
_RETRY_S = 0.01  # a signal held while Numba loads a kernel is tried again this often


def received() -> int | None:
    """The signal that stopped the command, if one did."""
    return _received[0] if _received else None


def _interrupt(signum: int) -> Interrupted:
    _raised[0] = True
    signal.setitimer(signal.ITIMER_REAL, 0)  # a held signal's retry is no longer needed
    return Interrupted(signum)


def _in_compiler(frame: Any) -> bool:
    """Whether Numba or llvmlite is on the main thread's stack (loading or compiling a kernel).

    An exception raised there is not safe: llvmlite calls back into Python from LLVM through
    ctypes (the object cache's hooks), and an exception in such a callback is printed and
    dropped, so LLVM goes on with a module it never got; Numba then writes a kernel's
    environment pointer to the address of a global that does not exist (address 0) and the
    process dies of a segmentation fault (numba/core/codegen.py ``set_env``; tests/test_signals.py
    found it, about one stopped run in a hundred)."""
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.split(".", 1)[0] in ("numba", "llvmlite"):
            return True
        frame = frame.f_back
    return False


def _hold() -> None:
    """Try the held signal again in a moment (SIGALRM): a kernel loads in milliseconds from
    the cache; one compiled afresh (a fresh install outside ``make setup``) holds the stop
    until that kernel is compiled."""
    signal.signal(signal.SIGALRM, _retry)
    signal.setitimer(signal.ITIMER_REAL, _RETRY_S)


def _retry(_signum: int, frame: Any) -> None:
    if not _received or _raised[0]:
        return  # raised meanwhile (check())
    if _critical[0] or _in_compiler(frame):
        _hold()  # not here either: try again (a critical section's end raises only what
        return  # came while it ran, not a signal held from before it)
    raise _interrupt(_received[0])


def _handler(signum: int, frame: Any) -> None:
    if _received:
        return  # already stopping: let the clean-up finish
    _received.append(signum)
    if _critical[0]:
        _pending.append(signum)
        return
    if _in_compiler(frame):
        _hold()
        return
    raise _interrupt(signum)


def check() -> None:
    """Raise Interrupted if a signal came and the command is still going on. The handler
    raises at once, but where it lands is chance: in a ctypes callback (llvmlite loading a
    kernel) the exception is printed and dropped, and the command would run on. So writers
    call this per batch and before renaming an output into place: after a signal, no output
    appears."""
    if _received and not _critical[0]:
        raise _interrupt(_received[0])


def _unraisable(hook):  # type: ignore[no-untyped-def]
    def quiet(u) -> None:  # type: ignore[no-untyped-def]
        if not isinstance(u.exc_value, Interrupted):  # the one dropped in a callback: check()
            hook(u)
    return quiet


@contextlib.contextmanager
def critical(raise_at_end: bool = True) -> Iterator[None]:
    """A section a signal must not cut (taking a lock, making or renaming a temporary): a
    signal that arrives meanwhile is raised when it ends, or with ``raise_at_end=False`` by the
    caller's next ``check()`` (when the end is not yet inside the caller's clean-up).

    On any thread but the main one it does nothing: Python runs signal handlers on the main
    thread only, so no signal's exception can cut a helper thread, and the count it keeps is
    the main thread's alone (a helper's ``+= 1`` beside the main thread's could lose one)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _critical[0] += 1
    try:
        yield
    finally:
        _critical[0] -= 1
    if not _critical[0] and _pending:
        sig = _pending.pop()
        if raise_at_end:
            raise _interrupt(sig)


@contextlib.contextmanager
def signals_handled(restore: bool = True) -> Iterator[None]:
    """Install the SIGINT/SIGTERM/SIGHUP handler for the body (main thread only; elsewhere, as
    in a worker thread, the body runs with the handlers it has), then restore the old ones
    (unless ``restore`` is False: a process's main, which sets what it wants on its way out)."""
    if threading.current_thread() is not threading.main_thread() or _depth[0]:
        yield  # a worker thread, or handled already (blocklab's main, then its command)
        return
    old = {s: signal.getsignal(s) for s in SIGNALS}
    old_alarm = signal.getsignal(signal.SIGALRM)  # _hold's retry uses SIGALRM
    _received.clear()
    _pending.clear()
    _written.clear()
    _raised[0] = False
    for s in SIGNALS:
        # a signal ignored by the parent (nohup's SIGHUP, a background job's SIGINT) stays so
        if old[s] is not signal.SIG_IGN:
            signal.signal(s, _handler)
    _depth[0] += 1
    hook = sys.unraisablehook
    sys.unraisablehook = _unraisable(hook)
    try:
        yield
    finally:
        _depth[0] -= 1
        release_all()  # what a stopped writer took and never reached the clean-up of
        signal.setitimer(signal.ITIMER_REAL, 0)  # no held signal's retry after the body
        if restore:
            sys.unraisablehook = hook
            for s, h in {**old, signal.SIGALRM: old_alarm}.items():
                signal.signal(s, h if h is not None else signal.SIG_DFL)
            _received.clear()  # a later call in this process starts afresh


class Worker:
    """A helper thread the main thread can wait for in a clean-up, whatever signal comes (use
    instead of ``threading.Thread`` there).

    A signal's exception raised inside Python's threading code breaks it. CPython 3.11's
    ``Thread.join``, cut while the thread still runs, releases the thread's own state lock and
    marks it stopped (the handler added for bpo-45274 in ``threading._wait_for_tstate_lock``),
    so a later join returns at once while the thread runs on: a stopped ``blocklab scenario``
    closed its Parquet writer under the thread still writing a row group and died of a
    segmentation fault. An ``Event.wait`` cut between taking its condition's lock and entering
    the ``with`` that releases it leaves the lock taken, so the next wait (and the thread's
    own ``set``) blocks for ever: a stopped scenario hung that way. (tests/test_signals.py
    found both, each about once in a hundred runs.) So the thread sets an event as its last
    act, and ``join`` waits for it inside ``critical``: a signal that comes meanwhile is held,
    and raised once the thread has returned. The wait is for the end of what the thread was
    doing (a row group's encoding, a chunk's hash): bounded, and short.
    """

    def __init__(self, target: Callable[[], None], name: str):
        self._target = target
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        with critical():  # start waits on an Event until the thread runs: the same hazard
            self._thread.start()

    def _run(self) -> None:
        try:
            self._target()
        finally:
            self._done.set()

    def is_alive(self) -> bool:
        return not self._done.is_set()

    def join(self) -> None:
        """Wait until the target has returned; a signal that came meanwhile is raised then."""
        with critical():
            self._done.wait()
