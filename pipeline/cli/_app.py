"""The ``blocklab`` command's app, its groups, consoles and shared helpers: parse options, call one
pipeline function, render the result (a module per command group beside this one).

Errors in the input or the options are printed as one line (``blocklab: error: ...``) with
exit status 2; nothing half-written is left behind.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.core
from rich.console import Console

if TYPE_CHECKING:
    from rich.table import Table

from blocklab.traces import safety
from blocklab.traces.errors import BlocklabError, printable

try:  # Typer 0.2x carries its own copy of Click, whose exceptions are not click's
    from typer._click.exceptions import UsageError as _UsageError
except ImportError:  # pragma: no cover - a Typer on Click itself
    from click.exceptions import UsageError as _UsageError  # type: ignore[assignment]


def _usage_error(e: Any, top: Any = None, argv: list[str] | None = None) -> None:
    """A bad option value, a missing argument, an unknown option or command: one line, as any
    other bad input, where Click drew a box of six lines with the usage. An error of the
    option parser has no context (``--fail`` without its value): the command is then the
    path of command names ``argv`` starts with, from the group ``top``."""
    if e.ctx is not None:
        where = e.ctx.command_path
    else:
        names, cmd = ["blocklab"], top
        for tok in argv or []:
            sub = getattr(cmd, "commands", {}).get(tok)
            if sub is None:
                break
            names.append(tok)
            cmd = sub
        where = " ".join(names)
    if not e.format_message().strip():  # no arguments: the help is the answer, shown already
        raise typer.Exit(e.exit_code)
    _fail(BlocklabError(f"{where}: {e.format_message().rstrip('.')} (see {where} --help)"))


def _kept() -> str:
    """What a stopped command left: nothing half-written, and the outputs it had completed
    (renamed into place before the signal came, and still there: a scenario's case run is
    renamed into a folder that the stop then removes)."""
    done = [p for p in safety.written() if os.path.lexists(p)]
    if not done:
        return "nothing half-written was kept"
    return f"nothing half-written was kept; complete before the stop: {', '.join(done)}"


#: Where the command is, for a stop that comes outside its own handling (``stopped``):
#: "starting" until the command runs (Typer builds the commands and reads the options),
#: "running", then "ended" once it returned; "said" once a stop message was printed.
_phase = ["starting"]


def stopped(sig: int) -> None:
    """Tell of a stop the command did not handle itself, once: one that came while Typer
    was still building the commands or reading the options (nothing written), or after the
    command had ended (its output complete). Before, both exited 128 + signal silently."""
    if _phase[0] == "said":
        return
    name = signal.Signals(sig).name
    if _phase[0] == "ended":
        line = f"blocklab: stopped by {name} after the command ended; its output is complete"
    elif _phase[0] == "starting":
        line = f"blocklab: stopped by {name} while starting; nothing was written"
    else:
        line = f"blocklab: stopped by {name}; {_kept()}"
    _phase[0] = "said"
    err.print(line, markup=False, highlight=False, soft_wrap=True)


def _flag(opt: Any) -> Any:
    """A flag's --help row without a value placeholder: Typer 0.29 shows ``<bool>`` for a
    flag, which takes no value (an empty metavar is shown as nothing)."""
    if opt is not None and getattr(opt, "is_flag", False) and opt.metavar is None:
        opt.metavar = ""
    return opt


def _argument(arg: Any) -> None:
    """An argument named by its metavar (its name in capitals unless given: TRACE, RUNS) as
    Click writes it, ``RUNS...`` and ``[NAME]``, where Typer 0.29 writes ``{runs}...`` in the
    usage line and ``<list[str]>`` as a list argument's type."""
    if arg.metavar is None:
        arg.metavar = arg.name.upper()
    many = "" if arg.nargs == 1 or "..." in arg.metavar else "..."
    shown = arg.metavar + many
    usage = shown if arg.required else f"[{shown}]"
    arg._usage_display_name = lambda: usage
    arg._rich_display_name = lambda: shown
    if arg.nargs != 1:
        arg.display_type_rich = lambda ctx: None


def _plain_help(cmd: Any) -> None:
    """``cmd``'s and its subcommands' --help as _flag and _argument say (the help option too,
    which Click makes when first asked for)."""
    for p in cmd.params:
        if isinstance(p, typer.core.TyperArgument):
            _argument(p)
        else:
            _flag(p)
    made = cmd.get_help_option
    cmd.get_help_option = lambda ctx: _flag(made(ctx))
    for sub in getattr(cmd, "commands", {}).values():
        _plain_help(sub)


class _Guarded(typer.core.TyperGroup):
    """Runs every command with SIGINT, SIGTERM and SIGHUP as a clean stop (temporaries removed,
    exit 128 + signal) and operating-system errors as one line (traces/safety.py)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain_help(self)  # (the commands are made once per run of the app, with it)

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:  # blocklab's own options (``blocklab --bogus``), read before invoke
            return super().make_context(*args, **kwargs)
        except _UsageError as e:
            _usage_error(e)

    def invoke(self, ctx: Any) -> Any:
        argv = [*getattr(ctx, "_protected_args", []), *ctx.args]  # (the group consumes them)
        _phase[0] = "running"
        with safety.signals_handled():
            try:
                out = super().invoke(ctx)
                _phase[0] = "ended"
                return out
            except safety.Interrupted as e:
                stopped(e.signum)
                raise typer.Exit(128 + e.signum) from None
            except _UsageError as e:
                _usage_error(e, self, argv)
            except typer.Exit as e:
                sig = safety.received()  # a command that turned the signal into its own exit
                if sig is not None and e.exit_code:
                    _phase[0] = "said"  # (the command's own exit told of it)
                    raise typer.Exit(128 + sig) from None
                _phase[0] = "ended"
                raise
            except Exception as e:
                sig = safety.received()
                if sig is not None:  # a library turned the signal into its own error (DuckDB:
                    # "Query interrupted"); the clean-up ran as the error came up
                    stopped(sig)
                    raise typer.Exit(128 + sig) from None
                if not isinstance(e, OSError) or e.errno == errno.EPIPE:
                    raise  # EPIPE: stdout closed (| head), Typer exits quietly
                _fail(safety.os_error(e, e.filename or "blocklab"))


app = typer.Typer(
    cls=_Guarded,
    name="blocklab",
    help=(
        "Trace-driven replay and analysis of block storage. Capture (tracefs), ingest "
        "(blktrace, blkparse, MSR, SPC, Alibaba, Tencent, fio, DiskSim, MQSim) or synthesize "
        "(SPC-1, IOR, Iometer, Orion) block traces into one Parquet schema; replay them on "
        "models of RAID layouts, pools, controllers and drives, with drive failures and "
        "rebuilds; ask questions in SQL, draw reports, sweep configurations on Dask and "
        "estimate the risk of data loss."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
trace_app = typer.Typer(help="Look at an ingested trace file.", no_args_is_help=True)
app.add_typer(trace_app, name="trace")
validate_app = typer.Typer(help="Score drive models against real drives.", no_args_is_help=True)
app.add_typer(validate_app, name="validate")
synth_app = typer.Typer(
    help="Generate synthetic benchmark workloads (SPC-1, IOR, Iometer, Orion) as trace files.",
    no_args_is_help=True)
app.add_typer(synth_app, name="synth")
spc1_app = typer.Typer(help="SPC-1 workloads against an array.", no_args_is_help=True)
app.add_typer(spc1_app, name="spc1")
sweep_app = typer.Typer(
    help="Replay a grid of configurations (layouts, drives, loads, traces, failures) on Dask "
    "distributed: one run folder per point plus a Parquet summary.", no_args_is_help=True)
app.add_typer(sweep_app, name="sweep")
cache_app = typer.Typer(help="Cache questions a trace answers by itself: how much cache "
                        "would this workload need.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")
scenario_app = typer.Typer(
    help="Published array studies as runnable comparisons: each names its study, its setup, "
    "what blocklab assumes, and the figures it measures.", no_args_is_help=True)
app.add_typer(scenario_app, name="scenario")

out = Console(emoji=False)  # ":100:" in a message is a line number, not an emoji
err = Console(stderr=True, emoji=False)


def table(*headers: str, **options: Any) -> Table:
    """A rich table whose columns fold a word too long for them (a run folder's path) onto
    the next line: rich's default cut it with an ellipsis, and two runs in deep folders read
    alike (``/tmp/pytest-of-root/pytest-39/popen-gw0…``)."""
    from rich.table import Table  # (on first use: most commands print no table)

    t = Table(**options)
    for h in headers:
        t.add_column(h, overflow="fold")
    return t


def wide(width: int) -> Console:
    """A console for a table on standard output: at least ``width`` columns when the output is
    not a terminal (a file or a pipe gets whole rows, not ones folded at 80 columns)."""
    return Console(width=max(out.width, width) if not out.is_terminal else None, emoji=False)

#: ``--timeout`` of the commands that reach a Dask cluster (replay --workers/--scheduler, sweep)
ClusterTimeout = Annotated[float, typer.Option(
    "--timeout", min=0.1, help="Seconds to wait for --scheduler to answer (and for "
    "--workers to join).")]


def one_line(e: Exception) -> str:
    """An error's words as one line, even when a library's message (pyarrow's, DuckDB's) has
    several, with no raw control byte: a damaged footer's type byte in pyarrow's words
    ("don't know what type: \\x0f"), or an escape in a file's name, shows as \\xNN and is not
    sent to the terminal."""
    return printable(" ".join(ln.strip() for ln in str(e).splitlines() if ln.strip()))


def _fail(e: Exception) -> None:
    err.print(f"blocklab: error: {one_line(e)}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(getattr(e, "exit_status", 2))  # 1 for a fault of the machine (safety.py)


def _kernels_ready() -> None:
    """Compile every kernel family first, saying so, when this install has not yet: a command
    would otherwise sit silent for minutes while Numba compiles (issue 21). ``make setup``
    does it ahead of time. A terminal sees a progress line while every family compiles. Then
    any kernel the command still compiles is told as it compiles (``_say_compiles``): on a
    script's cold install (standard error not a terminal: the command compiles only what it
    needs), or one the warm did not foresee (tests/test_warm.py checks that it foresees every
    kernel a command calls)."""
    from blocklab.tools import warm

    if not warm.is_warm() and err.is_terminal:
        with err.status("Compiling blocklab's kernels for this machine (once per install)") as st:

            def progress(name: str, i: int, n: int) -> None:
                st.update(f"Compiling blocklab's kernels for this machine, once per install: "
                          f"{i + 1}/{n} {name}")

            secs = warm.warm(progress)
        err.print(f"blocklab: kernels compiled in {secs:.0f} s; later runs load them from the "
                  "cache", highlight=False)
    _say_compiles()
    from blocklab.pipeline import cluster  # a user's workers that compile are told too

    if not cluster.NOTICES:
        cluster.NOTICES.append(lambda s: err.print(f"blocklab: {s}", highlight=False,
                                                   soft_wrap=True))


class _CompileNotes:
    """Numba's compile events, told on standard error: a line when a kernel starts compiling
    and one when it is done, for the kernels a command compiles itself (those it calls first;
    the helpers they compile in are part of them). Standard output stays the command's own,
    and nothing is said, nor compiled, when the kernels are in the cache: an ingest of a
    format without a kernel costs nothing on an empty cache."""

    def __init__(self) -> None:
        self.depth = 0
        self.t0 = 0.0

    def on_start(self, name: str) -> None:
        import time

        if self.depth == 0:
            self.t0 = time.perf_counter()
            err.print(f"blocklab: compiling kernel {name} (once per install; make setup "
                      "compiles every kernel ahead)", highlight=False, soft_wrap=True)
        self.depth += 1

    def on_end(self, name: str) -> None:
        import time

        self.depth -= 1
        if self.depth == 0:
            err.print(f"blocklab: compiled {name} in {time.perf_counter() - self.t0:.1f} s",
                      highlight=False, soft_wrap=True)


_TOLD: list[_CompileNotes] = []  # the one listener of this process, once registered


def _say_compiles() -> None:
    """Tell standard error of each kernel this command compiles (_CompileNotes), once per
    process however many commands it runs: until then a command started from a script after
    an install without ``make setup`` sat silent while Numba compiled (measured: 43 s of a
    45 s replay with a failure)."""
    from numba.core import event

    if _TOLD:
        return
    notes = _CompileNotes()
    _TOLD.append(notes)

    def _name(ev: Any) -> str:
        f = ev.data["dispatcher"].py_func
        return f"{f.__module__.removeprefix('blocklab.')}.{f.__qualname__}"

    class _Listener(event.Listener):
        def on_start(self, ev: Any) -> None:
            notes.on_start(_name(ev))

        def on_end(self, ev: Any) -> None:
            notes.on_end(_name(ev))

    event.register("numba:compile", _Listener())


def _version_cb(value: bool) -> None:
    if value:
        from blocklab.pipeline import __version__

        out.print(f"blocklab {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version_cb, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """blocklab: ingest, replay and analyse block I/O traces."""




def _size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n}B"


def _cell(v: Any) -> str:
    """A value for a table cell: thousands separators, sensible decimals, '' for null."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return ""
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}"
        a = abs(v)
        return f"{v:,.1f}" if a >= 1e4 else f"{v:.3f}" if a >= 1 else f"{v:.4g}"
    if isinstance(v, list):
        return "[" + ", ".join(_cell(x) for x in v) + "]"
    return str(v)


#: How many rows ``blocklab query`` shows as a table unless told (DuckDB's shell shows 40).
TABLE_ROWS = 40


def _ends(batches: Iterable[Any], keep: int) -> tuple[list[dict[str, Any]],
                                                     list[dict[str, Any]], int]:
    """(the first rows, the last rows, how many rows there are) of an answer's record
    batches: every row (as the first) when there are no more than ``keep`` or ``keep`` is 0,
    else the first ceil(keep/2) and the last floor(keep/2). Only the rows kept are turned into
    Python objects."""
    import collections

    from blocklab.pipeline.query import clean_rows

    first: list[dict[str, Any]] = []
    # the rows after the first ``keep``: the last ``keep`` of them
    last: collections.deque[dict[str, Any]] = collections.deque(maxlen=keep or None)
    total = 0
    for batch in batches:
        total += batch.num_rows
        if not keep:
            first.extend(_rows([batch]))
            continue
        take = min(batch.num_rows, keep - len(first))
        if take > 0:
            first.extend(clean_rows(batch.slice(0, take)))
        rest = batch.num_rows - max(take, 0)
        if rest > 0:
            last.extend(clean_rows(batch.slice(batch.num_rows - min(rest, keep))))
    rows = first + list(last)  # the first rows, then the last ones (all of them if few)
    if not keep or total <= keep:
        return rows, [], total
    head = (keep + 1) // 2
    return rows[:head], rows[len(rows) - (keep - head):] if keep > head else [], total


def _rows(batches: Iterable[Any], step: int = 4096) -> Iterator[dict[str, Any]]:
    """The rows of Arrow record batches as dicts, ``step`` at a time: a row as Python objects
    takes about a kilobyte, so a whole batch of them would cost more than DuckDB's answer."""
    from blocklab.pipeline.query import clean_rows

    for batch in batches:
        for at in range(0, batch.num_rows, step):
            yield from clean_rows(batch.slice(at, step))


def _write_json_list(batches: Iterable[Any], level: int = 0,
                     default: Callable[[Any], Any] = str) -> None:
    """The rows of ``batches`` as the JSON list ``json.dumps(rows, indent=2)`` writes at
    nesting ``level`` (0: the whole document), written row by row: the same text, in memory
    that does not grow with the rows (no newline after the closing bracket)."""
    pad = "\n" + "  " * (level + 1)
    first = True
    for row in _rows(batches):
        sys.stdout.write(("[" if first else ",") + pad
                         + json.dumps(row, indent=2, default=default).replace("\n", pad))
        first = False
    sys.stdout.write("[]" if first else "\n" + "  " * level + "]")


def _add_ends(t: Any, head: list[dict[str, Any]], tail: list[dict[str, Any]], total: int,
              cells: Callable[[dict[str, Any]], list[str]]) -> bool:
    """Fill table ``t`` with ``_ends``' rows (``cells`` makes a row's cells), with a row of
    ``…`` between the first and the last when rows were left out; returns whether any were."""
    for row in head:
        t.add_row(*cells(row))
    cut = total > len(head) + len(tail)
    if cut:
        t.add_row(*("\u2026" for _c in t.columns))
    for row in tail:
        t.add_row(*cells(row))
    return cut
