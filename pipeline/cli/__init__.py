"""The ``blocklab`` command: parse options, call one pipeline function, render the result.

The app and its groups are in ``_app``; each command group's commands in a module of its own
(``trace``, ``replay``, ``query``, ``capture``, ``validate``, ``synth``, ``sweep``, ``risk``,
``scenario``, ``catalogs``), imported here in the order the commands are listed.

Errors in the input or the options are printed as one line (``blocklab: error: ...``) with
exit status 2; nothing half-written is left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import os
import signal
import sys
import threading

# NumPy's OpenBLAS starts a thread per core at import, and they spin for a while after it
# (no command multiplies matrices): on 2 cores a small ingest spent 0.12 s of its 0.48 s of
# user CPU there, CPU its own threads then lacked. One BLAS thread, unless the user says
# otherwise; set before any command imports NumPy, and inherited by Dask's worker processes.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer  # noqa: E402

from blocklab.traces import safety  # noqa: E402
from blocklab.traces.errors import BlocklabError

# isort: off
# each module registers its commands on import: in this order, the order ``--help`` lists them
from . import trace as _trace  # noqa: F401
from . import replay as _replay  # noqa: F401
from . import query as _query  # noqa: F401
from . import capture as _capture  # noqa: F401
from . import validate as _validate  # noqa: F401
from . import synth as _synth  # noqa: F401
from . import sweep as _sweep  # noqa: F401
from . import risk as _risk  # noqa: F401
from . import scenario as _scenario  # noqa: F401
from . import catalogs as _catalogs  # noqa: F401
# isort: on
from ._app import (
    app,
    cache_app,
    one_line,
    scenario_app,
    spc1_app,
    stopped,
    sweep_app,
    synth_app,
    trace_app,
    validate_app,
)

__all__ = ["app", "main"]


def _one_line_summaries(*apps: typer.Typer) -> None:
    """A command list shows each command's first docstring paragraph as one flowing line
    (Typer's rich mode would keep the docstring's line breaks)."""
    for a in apps:
        for info in a.registered_commands:
            doc = inspect.cleandoc(info.callback.__doc__ or "") if info.callback else ""
            if info.short_help is None and doc:
                info.short_help = " ".join(doc.split("\n\n")[0].split())


_one_line_summaries(app, trace_app, validate_app, synth_app, spc1_app, sweep_app, scenario_app,
                    cache_app)


#: Columns of help and tables written into a pipe or a file (COLUMNS unset): Rich takes 80 there,
#: which cut the longest option names in `--help` (`--repeat-until-tasks-…`); at 100 every
#: name shows whole (tests/test_cli_and_stats.py). A terminal keeps its own width.
PIPE_COLUMNS = "100"


def main() -> None:
    if "COLUMNS" not in os.environ and not sys.stdout.isatty():
        os.environ["COLUMNS"] = PIPE_COLUMNS
    # the handlers stay from here to the exit: a signal just after the command (its output
    # complete) is a stop too, not Python's default death
    with safety.signals_handled(restore=False):
        try:
            app()
        except BlocklabError as e:  # pragma: no cover - commands catch their own
            print(f"blocklab: error: {one_line(e)}", file=sys.stderr)
            sys.exit(2)
        except safety.Interrupted as e:  # before or after the command
            stopped(e.signum)
            _exit_now(128 + e.signum)
        except SystemExit:
            sig = safety.received()
            if sig is not None:
                stopped(sig)  # (once: not again when the command told of it)
                _exit_now(128 + sig)
            # done: a signal from now on finds nothing to stop (and must not kill the exit)
            for s in safety.SIGNALS:
                signal.signal(s, signal.SIG_IGN)
            _exit_quickly()
            raise


def _exit_quickly() -> None:
    """Leave once the command is done without Python's teardown of the interpreter, which
    frees every object of Numba, llvmlite, pyarrow and the rest one by one: measured, 0.25 to
    0.3 s of a 0.9 s ``blocklab ingest`` of a small trace happened after the command had
    finished (Numba alone about 0.1 s). Everything a normal exit does that has an effect
    outside the process still happens, in its order: the decode threads finish their work
    and stop, the exit handlers run (temporary folders, Dask clusters, logging), the standard
    streams are flushed. Returns, so that Python's own exit takes over, when a thread of the
    command's is still running (Python would wait for it) or a stream cannot be flushed (a
    closed pipe: Python reports it as before). The exit status is the command's own."""
    exc = sys.exc_info()[1]
    code = exc.code if isinstance(exc, SystemExit) else None
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)  # CPython's; else Python's exit
    if run_exit_handlers is None or (code is not None and not isinstance(code, int)):
        return  # (a message for Python to print)
    from blocklab.traces.io import close_decode_pool

    close_decode_pool()
    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon and t.is_alive()
           for t in threading.enumerate()):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    safety.release_all()  # (signals_handled's, which os._exit below skips; nothing, normally)
    run_exit_handlers()  # the handlers Python's exit would run; it runs each once
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        code = code or 1
    os._exit(code or 0)


def _exit_now(status: int) -> None:
    """Exit at once after a signal stopped the command: the signal may have cut a library
    mid-call (Numba's compiler, say), leaving objects whose finalizers fail at interpreter exit
    with "Exception ignored" tracebacks. What is still registered to be undone goes first: the
    exit skips ``signals_handled``'s own ``release_all``, and a signal that lands where a
    writer's clean-up never starts (at the first instruction of its ``__exit__``) left the
    output's lock and temporary under "nothing half-written was kept" (about one ingest of a
    CSV trace in five, stopped by Ctrl-C)."""
    with contextlib.suppress(Exception):
        safety.release_all()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(status)
