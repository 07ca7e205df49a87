"""The ``blocklab`` command: parse options, call one pipeline function, render the result.

Errors in the input or the options are printed as one line (``blocklab: error: ...``) with
exit status 2; nothing half-written is left behind.
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import json
import os
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from blocklab.traces import safety
from blocklab.traces.errors import BlocklabError


class _Guarded(typer.core.TyperGroup):
    """Runs every command with SIGINT, SIGTERM and SIGHUP as a clean stop (temporaries removed,
    exit 128 + signal) and operating-system errors as one line (traces/safety.py)."""

    def invoke(self, ctx: Any) -> Any:
        with safety.signals_handled():
            try:
                return super().invoke(ctx)
            except safety.Interrupted as e:
                err.print(f"blocklab: {e}; nothing half-written was kept", markup=False,
                          highlight=False, soft_wrap=True)
                raise typer.Exit(128 + e.signum) from None
            except typer.Exit as e:
                sig = safety.received()  # a command that turned the signal into its own exit
                if sig is not None and e.exit_code:
                    raise typer.Exit(128 + sig) from None
                raise
            except Exception as e:
                sig = safety.received()
                if sig is not None:  # a library turned the signal into its own error (DuckDB:
                    # "Query interrupted"); the clean-up ran as the error came up
                    err.print(f"blocklab: stopped by {signal.Signals(sig).name}; nothing "
                              "half-written was kept", markup=False, highlight=False)
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

out = Console()
err = Console(stderr=True)


def _fail(e: Exception) -> None:
    # one line, even when a library's message (pyarrow's, DuckDB's) has several
    text = " ".join(ln.strip() for ln in str(e).splitlines() if ln.strip())
    err.print(f"blocklab: error: {text}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(getattr(e, "exit_status", 2))  # 1 for a fault of the machine (safety.py)


def _kernels_ready() -> None:
    """Compile every kernel family first, saying so, when this install has not yet: a command
    would otherwise sit silent for minutes while Numba compiles (issue 21). ``make setup``
    does it ahead of time; only a terminal is told, so scripts see no extra output."""
    from blocklab.tools import warm

    if not err.is_terminal or warm.is_warm():
        return
    with err.status("Compiling blocklab's kernels for this machine (once per install)") as st:

        def progress(name: str, i: int, n: int) -> None:
            st.update(f"Compiling blocklab's kernels for this machine, once per install: "
                      f"{i + 1}/{n} {name}")

        secs = warm.warm(progress)
    err.print(f"blocklab: kernels compiled in {secs:.0f} s; later runs load them from the cache",
              highlight=False)


def _version_cb(value: bool) -> None:
    if value:
        from . import __version__

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


@app.command()
def ingest(
    sources: Annotated[
        list[str],
        typer.Argument(
            help="Input files (gzip, zstd or xz are read as is). blktrace per-CPU files "
            "NAME.blktrace.N are merged by time; a bare NAME stands for all of them."
        ),
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="Trace Parquet file to write.")],
    fmt: Annotated[
        str,
        typer.Option("--format", "-f", help="Input format (see `blocklab formats`), or auto."),
    ] = "auto",
    device: Annotated[
        str | None,
        typer.Option("--device", "-d", help="Keep one device only: MAJ:MIN, MAJ,MIN or number."),
    ] = None,
    skip_bad: Annotated[
        int,
        typer.Option("--skip-bad", help="Skip up to N bad records (and count them) instead "
                     "of stopping at the first.", min=0),
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Ingest block traces into one trace Parquet file (owner-readable only, written atomically)."""
    _kernels_ready()
    from .ingest import ingest as run

    with Progress(
        TextColumn("ingest"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task("ingest", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        try:
            result = run(sources, str(output), fmt, device, skip_bad, progress)
        except BlocklabError as e:
            _fail(e)
    if as_json:
        print(json.dumps(result.as_dict(), indent=2))
        return
    rate = result.requests / result.elapsed_s if result.elapsed_s > 0 else 0.0
    out.print(
        f"{result.output}: {result.requests} requests from {len(result.sources)} file(s), "
        f"format {result.format}, {result.elapsed_s:.2f} s ({rate:,.0f} requests/s)",
        highlight=False,
    )
    extra = {k: v for k, v in result.counts.items() if v}
    if extra:
        out.print("  " + ", ".join(f"{k}: {v}" for k, v in sorted(extra.items())), highlight=False)
    if result.counts.get("skipped"):
        err.print(f"blocklab: warning: skipped {result.counts['skipped']} bad record(s)")
    if result.counts.get("lost_events"):
        err.print(f"blocklab: warning: the trace itself lost {result.counts['lost_events']} events")


@trace_app.command("stats")
def trace_stats(
    file: Annotated[Path, typer.Argument(help="Trace Parquet file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Statistics of a trace: counts, bytes, duration, read ratio, sizes, sequentiality,
    IOPS, MB/s, per-device counts and latency where the trace has it."""
    from .stats import trace_stats as run

    try:
        s = run(file)
    except BlocklabError as e:
        _fail(e)
    if as_json:
        print(json.dumps(s, indent=2, default=str))
        return
    t = Table(title=f"{file} ({s['source_format']})", show_header=False)
    t.add_column("figure")
    t.add_column("value", justify="right")

    def fmt(v: object, spec: str = ",") -> str:
        return "-" if v is None else format(v, spec)

    t.add_row("requests", fmt(s["requests"]))
    t.add_row("reads / writes", f"{s['reads']:,} / {s['writes']:,}")
    t.add_row(
        "discards / flushes / other", f"{s['discards']:,} / {s['flushes']:,} / {s['others']:,}"
    )
    t.add_row("read / write MB", f"{s['read_bytes'] / 1e6:,.2f} / {s['write_bytes'] / 1e6:,.2f}")
    t.add_row("duration s", fmt(s["duration_s"], ",.6f"))
    t.add_row("read ratio", fmt(s["read_ratio"], ".3f"))
    t.add_row("IOPS", fmt(s["iops"], ",.1f"))
    t.add_row("MB/s", fmt(s["mb_per_s"], ",.2f"))
    t.add_row("sequential fraction", fmt(s["sequential_fraction"], ".3f"))
    if "latency" in s:
        lat = s["latency"]
        t.add_row("latency mean / p50 / p99 ms",
                  f"{lat['mean_ms']:.3f} / {lat['p50_ms']:.3f} / {lat['p99_ms']:.3f}")
    hist = ", ".join(f"{_size(int(k))}: {v}" for k, v in s["size_histogram"].items())
    t.add_row("sizes", hist)
    for dev, d in list(s["devices"].items())[:20]:
        t.add_row(f"device {dev}", f"{d['requests']:,} ({d['reads']:,} R, {d['writes']:,} W)")
    if len(s["devices"]) > 20:
        t.add_row("devices", f"{len(s['devices'])} in all")
    out.print(t)


def _size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n}B"


@trace_app.command("head")
def trace_head(
    file: Annotated[Path, typer.Argument(help="Trace Parquet file.")],
    n: Annotated[int, typer.Option("-n", "--rows", help="How many requests to show.", min=1)] = 10,
) -> None:
    """The first requests of a trace, one per row."""
    from .stats import trace_head as run

    try:
        cols, rows = run(file, n)
    except BlocklabError as e:
        _fail(e)
    # only the columns that have a value in the rows shown
    shown = [i for i, _c in enumerate(cols) if any(r[i] is not None for r in rows)]
    t = Table()
    for i in shown:
        t.add_column(cols[i], justify="right", no_wrap=True)
    for r in rows:
        t.add_row(*("" if r[i] is None else str(r[i]) for i in shown))
    Console(width=max(out.width, 200) if not out.is_terminal else None).print(t)


_IOSTAT_COLUMNS = ("r/s", "w/s", "rkB/s", "wkB/s", "rrqm/s", "wrqm/s", "r_await", "w_await",
                   "aqu-sz", "rareq-sz", "wareq-sz", "%util")
_IDLE_COLUMNS = ("busy_periods", "idle_periods", "idle_fraction", "mean_ms", "p50_ms",
                 "p90_ms", "p99_ms", "max_ms", "<0.1ms", "0.1-1ms", "1-10ms", "10-100ms",
                 "0.1-1s", ">=1s")


@trace_app.command("iostat")
def trace_iostat(
    source: Annotated[Path, typer.Argument(
        help="Trace Parquet file (needs completion times: complete_ns or latency_ns), or a "
        "run folder (the host volume, and each drive with replay --drive-ops).")],
    interval: Annotated[str, typer.Option(
        "--interval", "-i", help="Interval length: 1s, 500ms, 100us, 1m (a number alone is "
        "seconds).")] = "1s",
    device: Annotated[str | None, typer.Option(
        "--device", "-d", help="Only this device: MAJ:MIN or MAJ,MIN (or the number) for a "
        "trace; host or a drive number for a run.")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print one JSON object: iostat rows and idle-period rows.")] = False,
) -> None:
    """What `iostat -x` would have shown per device and interval (r/s, w/s, rkB/s, wkB/s,
    rrqm/s, wrqm/s, r_await, w_await, aqu-sz, rareq-sz, wareq-sz, %util, with sysstat's
    definitions), and each device's idle periods (count, share, percentiles, histogram)."""
    from .iostat import iostat as run
    from .iostat import parse_interval

    try:
        r = run(source, parse_interval(interval), device)
    except BlocklabError as e:
        _fail(e)
    if as_json:
        print(json.dumps(r.as_dict(), indent=2))
        return
    several = len(r.sources) > 1
    head = (["run"] if several else []) + ["t_s", "device", *_IOSTAT_COLUMNS]
    t = Table(*head, title=f"{source}: iostat -x, {r.interval_s:g} s intervals "
              "(kB = 1024 bytes; await in ms)")
    for c in t.columns[(1 if several else 0):]:
        c.justify = "right"
    for row in r.rows:
        cells = [f"{row['t_s']:.3f}", str(row["device"])]
        cells += [f"{row[c]:.2f}" for c in _IOSTAT_COLUMNS]
        t.add_row(*(([escape(row["run"])] if several else []) + cells))
    Console(width=max(out.width, 170) if not out.is_terminal else None).print(t)
    it = Table(*((["run"] if several else []) + ["device", *_IDLE_COLUMNS]),
               title="idle periods (no request in progress between two busy periods; ms)")
    for row in r.idle:
        it.add_row(*(([escape(row["run"])] if several else []) + [str(row["device"])] +
                     [escape(_cell(row[c])) for c in _IDLE_COLUMNS]))
    Console(width=max(out.width, 170) if not out.is_terminal else None).print(it)
    for note in r.notes:
        err.print(f"blocklab: note: {note}", markup=False, highlight=False, soft_wrap=True)


@app.command()
def replay(
    trace: Annotated[Path, typer.Argument(help="Trace Parquet file (from ingest).")],
    array: Annotated[Path, typer.Option("--array", help="Array configuration (TOML).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Run folder to write.")],
    closed_loop: Annotated[int, typer.Option(
        "--closed-loop", min=0, help="Keep N requests outstanding instead of replaying the "
        "trace's arrival times (0: open loop).")] = 0,
    think_us: Annotated[float, typer.Option(
        "--think-us", min=0, help="Closed loop: time between a completion and the next "
        "issue.")] = 0.0,
    speed: Annotated[float, typer.Option(
        "--speed", help="Open loop: divide arrival times by X (2 = twice the load).")] = 1.0,
    wrap: Annotated[bool, typer.Option(
        "--wrap", help="Fold addresses beyond the array's capacity instead of failing.")] = False,
    drive_ops: Annotated[bool, typer.Option(
        "--drive-ops", help="Also write every drive operation to drive_ops.parquet.")] = False,
    fail: Annotated[list[str] | None, typer.Option(
        "--fail", help="Fail drive DRIVE at SECONDS into the replay (DRIVE@SECONDS, e.g. "
        "3@120; drives are numbered as meta.json lists them); several allowed, added to the "
        "configuration's failure tables.")] = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", min=1, help="Replay in time segments on Dask: a local cluster of N worker "
        "processes (with --scheduler: wait until the cluster has N workers). 1: serial.")
    ] = None,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", help="Replay in time segments on the Dask scheduler at this address "
        "(tcp://HOST:8786); the workers must see the trace, the array file and -o.")] = None,
    segments: Annotated[int | None, typer.Option(
        "--segments", min=1, help="With --workers or --scheduler: time segments (default: "
        "one per worker).")] = None,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=0.1, help="Seconds to wait for --scheduler to answer (and for "
        "--workers to join).")] = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Replay a trace against an array (layout, drives, controller and cache; failures and
    rebuilds) and write a run folder: ios.parquet, drive_busy.parquet, events.parquet (with
    failures or tasks), drive_ops.parquet (--drive-ops) and meta.json (owner-readable only,
    written atomically). With --workers or --scheduler the trace is cut into time segments
    replayed on Dask and stitched into the same run folder; the neighbours' overlaps are
    compared and the agreement reported (docs/parallel.md)."""
    _kernels_ready()
    from .replay import parse_failure
    from .replay import replay as run

    with Progress(TextColumn("replay"), BarColumn(), TextColumn("{task.completed:,} requests"),
                  TimeRemainingColumn(), console=err, transient=True,
                  disable=not err.is_terminal) as bar:
        task = bar.add_task("replay", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        try:
            failures = [parse_failure(f) for f in fail or []]
            if workers is not None or scheduler is not None or segments is not None:
                from .parallel import replay_parallel

                r = replay_parallel(trace, array, output, workers=workers,
                                    scheduler=scheduler, segments=segments, timeout=timeout,
                                    speed=speed, closed_loop=closed_loop, think_us=think_us,
                                    wrap=wrap, drive_ops=drive_ops, failures=failures,
                                    progress=None)
            else:
                r = run(trace, array, output, speed=speed, closed_loop=closed_loop,
                        think_us=think_us, wrap=wrap, drive_ops=drive_ops, progress=progress,
                        failures=failures)
        except BlocklabError as e:
            _fail(e)
    if as_json:
        print(json.dumps(r.as_dict(), indent=2))
        return
    out.print(
        f"{r.output}: {r.requests} requests, latency mean {r.mean_latency_ms:.3f} ms, p99 "
        f"{r.p99_latency_ms:.3f} ms; replayed at {r.requests_per_s:,.0f} requests/s",
        highlight=False,
    )
    par = r.parallel
    if par and "serial_because" in par:
        out.print(f"  replayed serially: {par['serial_because']}", highlight=False)
    elif par:
        out.print(
            f"  {par['segments']} segments on {par['workers']} worker(s) ({par['scheduler']}); "
            f"overlaps: {par['identical_fraction']:.2%} of {par['overlap_requests']:,} "
            f"requests identical, largest latency difference "
            f"{par['max_latency_diff_ns'] / 1e6:.3f} ms"
            + ("" if par["agreed"] else " (the neighbours did not agree: see meta.json "
               "parallel.cuts)"), highlight=False, soft_wrap=True)
    for rb in r.rebuilds:
        window = "did not end" if rb["window_s"] is None else f"{rb['window_s']:,.1f} s"
        lost = f", {rb['stripes_lost']:,} stripes lost" if rb["stripes_lost"] else ""
        out.print(f"  drive {rb['drive']} ({rb['group']}) failed at {rb['failed_s']:,.3f} s: "
                  f"rebuild window {window}{lost}", highlight=False)


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


def _json_value(v: Any) -> Any:
    import datetime
    import decimal

    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, datetime.date | datetime.time | datetime.timedelta):
        return str(v)
    if isinstance(v, bytes):
        return v.hex()
    return str(v)


@app.command()
def query(
    args: Annotated[list[str] | None, typer.Argument(
        help="Run folders, folders holding run folders (at any depth), or trace files; then "
        "the query's NAME unless --sql is given.", show_default=False)] = None,
    sql: Annotated[str | None, typer.Option(
        "--sql", help="Run this SQL over the views (ios, drive_ops, drive_busy, events, runs, "
        "drives, trace, traces, requests) instead of a named query.")] = None,
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", help="K=V: the value of the query's parameter $K (repeat for "
        "several); see --list for each query's parameters and defaults.")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", "-f", help="Output: table, json (a list of row objects) or csv.")
    ] = "table",
    list_queries: Annotated[bool, typer.Option(
        "--list", help="List the named queries: description, views and parameters.")] = False,
) -> None:
    """Ask a question of run folders and traces in SQL: a named query (queries/*.sql) or your
    own with --sql, over the same DuckDB views; each row carries its run in `run`."""
    import csv

    from .query import catalog, run_query

    if fmt not in ("table", "json", "csv"):
        _fail(BlocklabError(f"--format: expected table, json or csv, found {fmt!r}"))
    if list_queries:
        cat = catalog()
        if fmt == "json":
            print(json.dumps([{"name": q.name, "description": q.description,
                               "views": list(q.views),
                               "params": [{"name": p.name, "default": p.default,
                                           "doc": p.doc} for p in q.params]}
                              for q in cat.values()], indent=2))
            return
        if fmt == "csv":
            w = csv.writer(sys.stdout, lineterminator="\n")
            w.writerow(["name", "views", "params", "description"])
            for q in cat.values():
                w.writerow([q.name, " ".join(q.views),
                            " ".join(f"{p.name}={p.default}" for p in q.params),
                            q.description])
            return
        t = Table("query", "views", "parameters (default)", "description", show_lines=True)
        for q in cat.values():
            t.add_row(q.name, escape(", ".join(q.views)),
                      escape("\n".join(f"{p.name}={p.default}: {p.doc}" for p in q.params)),
                      escape(q.description))
        Console(width=max(out.width, 160) if not out.is_terminal else None).print(t)
        return
    paths = list(args or [])
    name = None
    if sql is None:
        if not paths:
            _fail(BlocklabError("query: give RUN_OR_TRACE... then a query NAME, or --sql "
                                "(blocklab query --list names the queries)"))
        name = paths.pop()
    params: dict[str, str] = {}
    for kv in param or []:
        k, sep, v = kv.partition("=")
        if not sep or not k.strip():
            _fail(BlocklabError(f"--param {kv}: expected K=V"))
        params[k.strip()] = v
    try:
        if name is not None and not paths and Path(name).exists():
            raise BlocklabError(f"query: {name} is an input; give a query NAME after the "
                                "inputs, or --sql (blocklab query --list)")
        r = run_query(paths, name=name, sql=sql, params=params)
    except BlocklabError as e:
        _fail(e)
    rows = r.rows()
    if fmt == "json":
        print(json.dumps(rows, indent=2, default=_json_value))
    elif fmt == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(r.columns)
        for row in rows:
            w.writerow(["" if row[c] is None else
                        json.dumps(row[c], default=_json_value) if isinstance(row[c], list)
                        else _json_value(row[c]) if not isinstance(row[c], int | float | str)
                        else row[c] for c in r.columns])
    else:
        t = Table(*r.columns)
        types = r.table.schema.types
        for col, typ in zip(t.columns, types, strict=True):
            if str(typ).startswith(("int", "uint", "double", "float", "decimal")):
                col.justify = "right"
        for row in rows:
            t.add_row(*(escape(_cell(row[c])) for c in r.columns))
        Console(width=max(out.width, 40 + 14 * len(r.columns)) if not out.is_terminal
                else None).print(t)
        if not rows:
            err.print("(no rows)", highlight=False)


@app.command()
def report(
    runs: Annotated[list[str], typer.Argument(
        help="Run folders, or folders holding run folders (a sweep's output).")],
    output: Annotated[Path, typer.Option(
        "-o", "--output", help="HTML file to write (self-contained: opens with no network).")],
    png: Annotated[Path | None, typer.Option(
        "--png", help="Also write each chart as DIR/CHART.png (offline, via vl-convert).")
    ] = None,
    svg: Annotated[Path | None, typer.Option(
        "--svg", help="Also write each chart as DIR/CHART.svg (offline, via vl-convert).")
    ] = None,
    title: Annotated[str | None, typer.Option(
        "--title", help="Page title (default: the runs' names).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """One HTML page of charts over run folders: a summary table, bandwidth and IOPS over time
    with failures and rebuild windows, latency CDF and percentiles across runs, per-drive
    utilization, and bandwidth against transfer size for a size sweep."""
    from .report import report as run

    try:
        r = run(runs, output, png, svg, title)
    except BlocklabError as e:
        _fail(e)
    if as_json:
        print(json.dumps(r.as_dict(), indent=2))
        return
    extra = "".join(f", {len(x)} {k.upper()} in {d}" for k, x, d in
                    (("png", r.png, png), ("svg", r.svg, svg)) if x)
    out.print(f"{r.output}: {len(r.runs)} run(s), charts: {', '.join(r.charts)}{extra}",
              highlight=False, soft_wrap=True)


@app.command()
def capture(
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Trace Parquet file to write (owner-readable only, appears "
        "only when complete).")] = None,
    device: Annotated[list[str] | None, typer.Option(
        "--device", "-d", help="Device to capture: MAJ:MIN or /dev/NAME (a partition is its "
        "disk's sector range); repeat for several. Default: every block device.")] = None,
    duration: Annotated[float | None, typer.Option(
        "--duration", help="Stop after S seconds (default: at Ctrl-C, SIGTERM or SIGHUP).",
        min=0)] = None,
    buffer_kb: Annotated[int, typer.Option(
        "--buffer-kb", min=4, help="Ring buffer per CPU in KiB (kernel memory, in the "
        "capture's own instance). Raise it when events are lost.")] = 4096,
    bio_queue: Annotated[bool, typer.Option(
        "--bio-queue", help="Also trace block_bio_queue (with the bio merges, block_getrq "
        "and block_split): arrival is when the bio was queued, merges are counted.")] = False,
    max_size: Annotated[str | None, typer.Option(
        "--max-size", help="Stop before the output file reaches SIZE (bytes, or K, M, G, T).",
    )] = None,
    anonymize: Annotated[bool, typer.Option(
        "--anonymize", help="Replace process names (and the host name) with stable hashes "
        "and drop process ids. Unkeyed hashes can be matched against guessed names: see "
        "--anonymize-key.")] = False,
    anonymize_key: Annotated[Path | None, typer.Option(
        "--anonymize-key", metavar="FILE", help="Anonymize (as --anonymize) with keyed hashes "
        "(HMAC-SHA256) under the secret key in FILE, made there (32 random bytes, mode 0600) "
        "if it does not exist: the same names give the same hashes in every capture made "
        "with FILE, and nobody without it can test guesses.")] = None,
    blktrace: Annotated[bool, typer.Option(
        "--blktrace", help="Run blktrace instead of tracefs and ingest its per-CPU files "
        "(where the kernel allows it; says so in one line where it does not).")] = False,
    cleanup: Annotated[bool, typer.Option(
        "--cleanup", help="Only remove what killed captures left: their tracefs instances "
        "(and, with -o, their temporary output files).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Capture this host's block I/O through tracefs into a trace Parquet file, in a private
    tracefs instance (instances/blocklab-PID) that is removed however the capture ends.
    Needs root. Ctrl-C (or SIGTERM) ends a capture without --duration and keeps the file."""
    _kernels_ready()
    from rich.live import Live

    from .capture import CaptureOptions, CaptureStatus, parse_size
    from .capture import capture as run
    from .capture import cleanup as run_cleanup

    try:
        if cleanup:
            removed = run_cleanup(output)
            if as_json:
                print(json.dumps({"removed": removed}, indent=2))
            else:
                out.print(f"removed {len(removed)} stale item(s)" +
                          "".join(f"\n  {r}" for r in removed), highlight=False,
                          soft_wrap=True)
            return
        if output is None:
            raise BlocklabError("-o/--output: required (the trace file to write)")
        opts = CaptureOptions(
            output=output, devices=tuple(device or ()), duration_s=duration,
            buffer_kb=buffer_kb, bio_queue=bio_queue,
            max_size=parse_size(max_size) if max_size is not None else None,
            anonymize=anonymize, anonymize_key=anonymize_key, blktrace=blktrace)
        live = Live(console=err, transient=True, auto_refresh=False) if err.is_terminal \
            else None
        announced = False

        def status(s: CaptureStatus) -> None:
            nonlocal announced
            line = (f"capturing {', '.join(s.devices)} into {output} "
                    f"({s.instance}): {s.elapsed_s:,.1f} s, {s.requests:,} requests, "
                    f"{s.events:,} events, lost {s.lost_events:,}, "
                    f"~{s.bytes_estimate / 1e6:,.1f} MB"
                    + (" - stopping" if s.phase == "stopping" else " - Ctrl-C ends it"))
            if live is not None:
                live.update(line, refresh=True)
            elif not announced:
                # one line for logs and scripts: the capture is on
                print(f"blocklab: capturing {', '.join(s.devices)} into {output} "
                      f"(instance {s.instance}); Ctrl-C or SIGTERM ends it",
                      file=sys.stderr, flush=True)
            announced = True

        if live is not None:
            with live:
                r = run(opts, status)
        else:
            r = run(opts, status)
    except BlocklabError as e:
        _fail(e)
    for p in r.stale_removed:
        err.print(f"blocklab: note: removed the stale instance {p}", markup=False,
                  highlight=False, soft_wrap=True)
    if r.lost_events:
        err.print(f"blocklab: warning: the kernel lost {r.lost_events:,} events (ring buffer "
                  "full); raise --buffer-kb", markup=False, highlight=False, soft_wrap=True)
    if as_json:
        print(json.dumps(r.as_dict(), indent=2))
        return
    cpu = 100 * r.cpu_s / r.elapsed_s if r.elapsed_s > 0 else 0.0
    out.print(
        f"{r.output}: {r.requests:,} requests ({r.events:,} events) via {r.method}, "
        f"{r.elapsed_s:,.1f} s, stopped by {r.stopped_by}, lost {r.lost_events:,} events, "
        f"{r.bytes:,} bytes; capture CPU {r.cpu_s:.2f} s ({cpu:.0f} % of one core)",
        highlight=False, soft_wrap=True,
    )


@validate_app.command("disksim")
def validate_disksim(
    specs: Annotated[Path, typer.Argument(help="DiskSim .parv (or .diskspecs) of the drive.")],
    trace: Annotated[Path, typer.Argument(help="DiskSim validation trace of that drive.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    without: Annotated[list[str] | None, typer.Option(
        "--without", metavar="PART",
        help="Switch a part of the model off, to see what it is worth on this drive (repeat "
        "for more): cache, read-ahead, read-on-arrival, write-back, overheads, switches.")] = None,
) -> None:
    """Replay a DiskSim validation trace on the drive SPECS describes (one request at a time,
    each issued after the previous completes plus the trace's idle time) and print the demerit
    against the measured service times, beside DiskSim 4.0's own where its valid/ folder gives
    it, with mean simulated and real service times. Every DiskSim 4.0 layout (sparing schemes
    0-10, mapping schemes 0-2) is read; the trace may be compressed (.xz, .gz, .zst)."""
    _kernels_ready()
    from .validate import validate_disksim as run

    try:
        r = run(specs, trace, without or ())
    except (BlocklabError, OSError) as e:
        _fail(e)
    if as_json:
        print(json.dumps(r.as_dict(), indent=2))
        return
    theirs = "" if r.disksim_demerit_ms is None else f" (DiskSim {r.disksim_demerit_ms:.3f} ms)"
    out.print(
        f"{r.drive}{' without ' + ', '.join(r.without) if r.without else ''}: "
        f"{r.requests} requests, demerit {r.demerit_ms:.3f} ms{theirs}, mean service "
        f"{r.mean_sim_ms:.3f} ms simulated / {r.mean_real_ms:.3f} ms real, "
        f"{r.requests_per_s:,.0f} requests/s",
        highlight=False,
    )


# --------------------------------------------------------------------------------------------
# blocklab synth

_Output = Annotated[Path, typer.Option("-o", "--output", help="Trace Parquet file to write.")]
_Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
_Seed = Annotated[int, typer.Option("--seed", min=0, help="Seed of the random numbers: the "
                                    "same options and seed give the same file.")]
_Capacity = Annotated[str | None, typer.Option(
    "--capacity", help="Size of the volume the trace addresses (4096, 64k, 100GiB, 2048s; "
    "k/m/g/t are binary).")]
_Array = Annotated[Path | None, typer.Option(
    "--array", help="Take the volume's size from this array configuration (TOML): the host "
    "capacity replay addresses.")]


def _synth(run: Any, total_hint: str, as_json: bool) -> None:
    _kernels_ready()
    with Progress(TextColumn(total_hint), BarColumn(), TextColumn("{task.completed:,} requests"),
                  TimeRemainingColumn(), console=err, transient=True,
                  disable=not err.is_terminal) as bar:
        task = bar.add_task(total_hint, total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        try:
            r = run(progress)
        except BlocklabError as e:
            _fail(e)
    if as_json:
        print(json.dumps(r.as_dict(), indent=2))
        return
    out.print(f"{r.output}: {r.requests:,} requests ({r.generator}), {r.elapsed_s:.2f} s "
              f"({r.requests_per_s:,.0f} requests/s)", highlight=False, soft_wrap=True)


@synth_app.command("spc1")
def synth_spc1(
    output: _Output,
    bsu: Annotated[int, typer.Option("--bsu", help="Business scaling units: 50 I/Os per "
                                     "second each, in SPC-1's eight streams.")] = 1,
    duration: Annotated[float, typer.Option("--duration", help="Seconds of workload.")] = 60.0,
    seed: _Seed = 0,
    capacity: _Capacity = None,
    array: _Array = None,
    as_json: _Json = False,
) -> None:
    """SPC-1 (open loop): ASU-1, ASU-2, ASU-3 on 45 %, 45 %, 10 % of the volume; device = ASU,
    stream = BSU x 8 + stream number (ASU1-1 ... ASU3-1)."""
    from .synth import synth_spc1 as run

    _synth(lambda p: run(output, bsu, duration, seed, capacity, array, p), "spc1", as_json)


@synth_app.command("ior")
def synth_ior(
    output: _Output,
    tasks: Annotated[int, typer.Option("--tasks", "-N", help="IOR tasks (each a stream).")] = 1,
    transfer_size: Annotated[str, typer.Option(
        "--transfer-size", "-t", help="Bytes per transfer (IOR -t; 4k = 4096).")] = "256k",
    block_size: Annotated[str, typer.Option(
        "--block-size", "-b", help="Contiguous bytes per task per segment (IOR -b).")] = "1m",
    segments: Annotated[int, typer.Option("--segments", "-s", help="Segments (IOR -s).")] = 1,
    file_per_proc: Annotated[bool, typer.Option(
        "--file-per-proc", "-F", help="One file per task instead of one shared file.")] = False,
    random: Annotated[bool, typer.Option(
        "--random", "-z", help="Shuffled offsets within each segment (IOR -z).")] = False,
    write: Annotated[bool, typer.Option("--write/--no-write", help="Write phase (phase 0).")]
    = True,
    read: Annotated[bool, typer.Option("--read/--no-read", help="Read phase (after the "
                                       "write phase).")] = True,
    outstanding: Annotated[int, typer.Option(
        "--outstanding", help="Requests each task keeps in flight (IOR: 1).")] = 1,
    align: Annotated[str, typer.Option(
        "--align", help="Files start on multiples of this many bytes.")] = "1m",
    seed: _Seed = 0,
    capacity: _Capacity = None,
    array: _Array = None,
    as_json: _Json = False,
) -> None:
    """IOR (closed loop): tasks write then read a shared file or one file each, with IOR's
    offsets; files laid out one after another on the volume. --capacity/--array are optional
    (to check the files fit)."""
    from .synth import synth_ior as run

    _synth(lambda p: run(output, tasks, transfer_size, block_size, segments, file_per_proc,
                         random, write, read, outstanding, seed, align, capacity, array, p),
           "ior", as_json)


@synth_app.command("iometer")
def synth_iometer(
    output: _Output,
    transfer_size: Annotated[str, typer.Option("--transfer-size", help="Transfer request "
                                               "size in bytes (whole sectors).")] = "4k",
    read_pct: Annotated[int, typer.Option("--read-pct", help="Percent of reads.")] = 100,
    random_pct: Annotated[int, typer.Option("--random-pct", help="Percent of random "
                                            "accesses (the rest sequential).")] = 0,
    align: Annotated[str, typer.Option("--align", help="Align I/Os on this many bytes (0: "
                                       "sector boundaries).")] = "0",
    outstanding: Annotated[int, typer.Option("--outstanding", help="Outstanding I/Os per "
                                             "worker.")] = 1,
    workers: Annotated[int, typer.Option("--workers", help="Workers (each a stream).")] = 1,
    requests: Annotated[int, typer.Option("--requests", help="I/Os per worker.")] = 100_000,
    starting_sector: Annotated[int, typer.Option("--starting-sector", help="First sector "
                                                 "accessed.")] = 0,
    disk_sectors: Annotated[int, typer.Option("--disk-sectors", help="Maximum disk size in "
                                              "sectors (0: to the end).")] = 0,
    seed: _Seed = 0,
    capacity: _Capacity = None,
    array: _Array = None,
    as_json: _Json = False,
) -> None:
    """Iometer (closed loop): one access specification run by several workers on the
    volume."""
    from .synth import synth_iometer as run

    _synth(lambda p: run(output, transfer_size, read_pct, random_pct, align, outstanding,
                         workers, requests, starting_sector, disk_sectors, seed, capacity,
                         array, p), "iometer", as_json)


@synth_app.command("orion")
def synth_orion(
    output: _Output,
    matrix: Annotated[str, typer.Option("--matrix", help="basic, detailed, row, col, point "
                                        "or max (Orion -matrix).")] = "basic",
    large_type: Annotated[str, typer.Option("--type", help="Large I/Os: rand or seq "
                                            "(sequential streams).")] = "rand",
    size_small: Annotated[str, typer.Option("--size-small", help="Small I/O size.")] = "8k",
    size_large: Annotated[str, typer.Option("--size-large", help="Large I/O size.")] = "1m",
    num_disks: Annotated[int | None, typer.Option(
        "--num-disks", help="Disks (default: the array's drives, hot spares excepted, or 1); "
        "sets the default levels.")] = None,
    num_small: Annotated[int | None, typer.Option(
        "--num-small", help="Highest small outstanding count (default 5 per disk).")] = None,
    num_large: Annotated[int | None, typer.Option(
        "--num-large", help="Highest large outstanding count, or sequential streams "
        "(default 2 per disk).")] = None,
    num_streamio: Annotated[int, typer.Option(
        "--num-streamio", help="Outstanding I/Os per sequential stream.")] = 4,
    write_pct: Annotated[int, typer.Option("--write", help="Percent of writes.")] = 0,
    requests_per_slot: Annotated[int, typer.Option(
        "--requests-per-slot", help="I/Os per outstanding slot in each data point.")] = 100,
    seed: _Seed = 0,
    capacity: _Capacity = None,
    array: _Array = None,
    as_json: _Json = False,
) -> None:
    """Orion (closed loop): small random I/Os against large I/Os at rising outstanding
    counts, one phase per data point of the matrix."""
    from .synth import synth_orion as run

    _synth(lambda p: run(output, matrix, large_type, size_small, size_large, num_disks,
                         num_small, num_large, num_streamio, write_pct, requests_per_slot,
                         seed, capacity, array, p), "orion", as_json)


@spc1_app.command("search")
def spc1_search(
    array: Annotated[Path, typer.Option("--array", help="Array configuration (TOML).")],
    limit_ms: Annotated[float, typer.Option("--limit-ms", help="Mean response time limit "
                                            "in milliseconds.")] = 30.0,
    duration: Annotated[float, typer.Option("--duration", help="Seconds of SPC-1 workload "
                                            "per BSU count tried.")] = 60.0,
    seed: _Seed = 0,
    max_bsu: Annotated[int | None, typer.Option("--max-bsu", help="Try no more BSUs than "
                                                "this.")] = None,
    as_json: _Json = False,
) -> None:
    """The highest SPC-1 BSU count whose mean response time on the array stays within the
    limit: doubling, then bisection, each count replayed."""
    _kernels_ready()
    from .synth import spc1_search as run

    def progress(p: Any) -> None:
        if err.is_terminal:
            err.print(f"  BSU {p.bsu}: {p.mean_latency_ms:.3f} ms "
                      f"({'within' if p.within_limit else 'beyond'} the limit)",
                      highlight=False)

    try:
        r = run(array, limit_ms, duration, seed, max_bsu, progress)
    except BlocklabError as e:
        _fail(e)
    if as_json:
        print(json.dumps(r.as_dict(), indent=2))
        return
    if r.bsu == 0:
        first = r.probes[0]
        out.print(f"{array}: even 1 BSU (50 IOPS) exceeds {limit_ms:g} ms: mean response "
                  f"time {first.mean_latency_ms:.3f} ms", highlight=False, soft_wrap=True)
        return
    note = (f" (the highest tried: --max-bsu or the capacity's limit of {r.max_bsu})"
            if r.capped else "")
    out.print(f"{array}: {r.bsu} BSU{note}, {r.iops:,.1f} IOPS, mean response time "
              f"{r.mean_latency_ms:.3f} ms (limit {limit_ms:g} ms; {len(r.probes)} replays)",
              highlight=False, soft_wrap=True)


# --------------------------------------------------------------------------------------------
# blocklab sweep

_SweepFile = Annotated[Path, typer.Argument(help="Sweep file (TOML): base array, trace, "
                                            "replay options and axis tables.")]


@sweep_app.command("plan")
def sweep_plan(
    sweep: _SweepFile,
    as_json: Annotated[bool, typer.Option("--json", help="Print the points as JSON.")] = False,
) -> None:
    """List the points of a sweep: id (a hash of the axis values), readable name, the axis
    values, and whether the point's array configuration is valid."""
    from .sweep import load_sweep, value_text

    try:
        sw = load_sweep(sweep)
    except BlocklabError as e:
        _fail(e)
    if as_json:
        print(json.dumps({
            "sweep": str(sweep), "mode": sw.mode,
            "axes": [{"key": a.key, "name": a.name, "values": list(a.values)} for a in sw.axes],
            "points": [{"point": p.id, "name": p.name, "values": p.values,
                        "config_error": p.config_error} for p in sw.points]}, indent=2))
        return
    shape = " x ".join(str(len(a.values)) for a in sw.axes) or "1"
    t = Table("point", *(a.name for a in sw.axes), "config",
              title=f"{sweep}: {len(sw.points)} point(s), {sw.mode} of {shape}")
    for p in sw.points:
        t.add_row(p.id, *(escape(value_text(p.values[a.name])) for a in sw.axes),
                  escape(p.config_error) if p.config_error else "ok")
    out.print(t)


@sweep_app.command("run")
def sweep_run(
    sweep: _SweepFile,
    output: Annotated[Path, typer.Option(
        "-o", "--output", help="Output folder: a run folder per point, summary/ (Parquet), "
        "sweep.json. Rerunning into it skips finished points and retries failed ones.")],
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", help="Address of a running Dask scheduler (tcp://HOST:8786); default: "
        "a local cluster on loopback.")] = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", min=1, help="Local cluster: worker processes (default: one per core). "
        "With --scheduler: wait until the cluster has this many workers.")] = None,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=0.1, help="Seconds to wait for --scheduler to answer (and for "
        "--workers to join).")] = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run every point of a sweep (one replay per point) on Dask distributed. Exit status 1
    when a point failed (its error is in OUT/POINT.error.json), 2 for bad input, 130 when
    interrupted (finished points are kept: run the same command again)."""
    _kernels_ready()
    from .sweep import Status, SweepInterrupted, run_sweep

    with Progress(
        TextColumn("sweep"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.fields[todo]} done"),
        TextColumn("{task.fields[running]} running"),
        TextColumn("{task.fields[failed]} failed"),
        TextColumn("{task.fields[skipped]} skipped"),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task("sweep", total=None, todo="?", running=0, failed=0, skipped=0)

        def progress(s: Status) -> None:
            bar.update(task, completed=s.done + s.failed, total=s.total, todo=s.total,
                       running=s.running, failed=s.failed, skipped=s.skipped)

        try:
            r = run_sweep(sweep, output, scheduler, workers, timeout, progress)
        except SweepInterrupted as e:
            bar.stop()
            err.print(f"blocklab: {e}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(130) from None
        except BlocklabError as e:
            bar.stop()
            _fail(e)
    if as_json:
        print(json.dumps(r.as_dict(), indent=2))
    else:
        out.print(
            f"{r.out}: {r.points} point(s): {r.done} run now, {r.skipped} finished before, "
            f"{len(r.failed)} failed; {r.workers} worker(s) ({r.scheduler}), "
            f"{r.elapsed_s:.1f} s", highlight=False, soft_wrap=True)
    for f in r.failed:
        err.print(f"blocklab: {f['error']}", markup=False, highlight=False, soft_wrap=True)
    if r.failed:
        raise typer.Exit(1)


# --------------------------------------------------------------------------------------------
# blocklab cache


@cache_app.command("mrc")
def cache_mrc(
    trace: Annotated[Path, typer.Argument(help="Trace Parquet file.")],
    block: Annotated[str, typer.Option(
        "--block", help="Cache block (line) size: 4KiB, 64KiB, 4096 (a multiple of 512 "
        "bytes).")] = "4KiB",
    sizes: Annotated[str | None, typer.Option(
        "--sizes", help="Cache sizes to report, comma-separated (64MiB,1GiB,...); default: "
        "powers of two blocks up to the working set, and the working set.")] = None,
    sample: Annotated[float | None, typer.Option(
        "--sample", help="SHARDS spatial sampling at this fixed rate in (0, 1] (0.01 = 1 % "
        "of the blocks): memory and time shrink with it.")] = None,
    sample_size: Annotated[int | None, typer.Option(
        "--sample-size", help="SHARDS at a fixed size: track at most N blocks, lowering the "
        "rate as needed (memory bounded whatever the trace).")] = None,
    error: Annotated[bool, typer.Option(
        "--error", help="With --sample or --sample-size: also compute the exact curve and "
        "report the estimate's mean and largest absolute error against it.")] = False,
    html_out: Annotated[Path | None, typer.Option(
        "--html", help="Also write the curve as a chart (one self-contained HTML page, "
        "offline).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """The LRU miss-ratio curve of a trace: the miss ratio an LRU cache of each size would
    have had, from every block access's reuse (stack) distance, reads and writes apart;
    exact, or estimated from a spatial sample (SHARDS)."""
    from .mrc import mrc as run
    from .mrc import parse_size

    with Progress(TextColumn("mrc"), BarColumn(), TextColumn("{task.completed:,} requests"),
                  TimeRemainingColumn(), console=err, transient=True,
                  disable=not err.is_terminal) as bar:
        task = bar.add_task("mrc", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        try:
            block_bytes = parse_size(block, "--block")
            size_list = None if sizes is None else [
                parse_size(x, "--sizes") for x in sizes.split(",") if x.strip()]
            r = run(trace, block_bytes, size_list, sample, sample_size, error, progress)
            if html_out is not None:
                from .report import write_mrc_page

                write_mrc_page(r.as_dict(), html_out)
        except BlocklabError as e:
            _fail(e)
    if as_json:
        print(json.dumps(r.as_dict(), indent=2))
        return
    res = r.resolution_bytes // r.block_bytes
    out.print(
        f"{trace}: {r.method}, {_size(r.block_bytes)} blocks: {r.requests:,} requests "
        f"({r.reads:,} reads, {r.writes:,} writes), {r.accesses:,} block accesses; working "
        f"set {r.distinct_blocks:,.0f} blocks = {r.working_set_bytes / 2**20:,.1f} MiB"
        + ("" if r.rate == 1 else f" (estimated; rate {r.rate:.4g}, sizes below "
           f"{res:,} blocks are not resolved)")
        + f"; {r.elapsed_s:.2f} s, {r.requests_per_s:,.0f} requests/s",
        highlight=False, soft_wrap=True)
    t = Table("cache", "blocks", "miss ratio", "read", "write")
    for c in t.columns:
        c.justify = "right"
    cv = r.curve
    for k, sz in enumerate(cv.size_bytes):
        t.add_row(_size(sz), f"{sz // r.block_bytes:,}",
                  *("-" if v is None else f"{v:.4f}"
                    for v in (cv.miss_ratio[k], cv.read_miss_ratio[k], cv.write_miss_ratio[k])))
    out.print(t)
    if r.error:
        ev = r.error
        out.print(f"error against the exact curve ({ev['sizes_compared']} sizes from "
                  f"{_size(ev['from_bytes'])}): mean {_g(ev['miss_ratio']['mean_abs'])}, "
                  f"largest {_g(ev['miss_ratio']['max_abs'])} (reads: mean "
                  f"{_g(ev['read_miss_ratio']['mean_abs'])}; writes: mean "
                  f"{_g(ev['write_miss_ratio']['mean_abs'])})", highlight=False, soft_wrap=True)
    if html_out is not None:
        out.print(f"chart: {html_out}", highlight=False)


# --------------------------------------------------------------------------------------------
# blocklab risk


def _g(v: float | None, spec: str = ".3g") -> str:
    return "-" if v is None else "inf" if v == float("inf") else format(v, spec)


@app.command()
def risk(
    runs: Annotated[list[str], typer.Argument(
        help="Run folders of `replay --fail` (their rebuild windows are measured), folders "
        "holding run folders, or array configurations (TOML) with --window-s.")],
    window_s: Annotated[float | None, typer.Option(
        "--window-s", help="Rebuild window in seconds for every group, instead of the "
        "measured ones (needed by a run without a finished rebuild, and by a TOML).")] = None,
    afr: Annotated[float | None, typer.Option(
        "--afr", help="Annual failure rate, a fraction in (0, 1): exponential lifetimes "
        "(default 0.02, field replacement rates per Schroeder and Gibson, FAST 2007).")] = None,
    weibull_shape: Annotated[float | None, typer.Option(
        "--weibull-shape", help="Weibull lifetimes: shape k (1 = exponential, < 1 infant "
        "mortality, > 1 wear-out); with --weibull-scale-hours.")] = None,
    weibull_scale: Annotated[float | None, typer.Option(
        "--weibull-scale-hours", help="Weibull lifetimes: scale (characteristic life) in "
        "hours.")] = None,
    years: Annotated[float, typer.Option(
        "--years", help="The period assessed, in years of 8760 hours.")] = 5.0,
    trials: Annotated[int, typer.Option(
        "--trials", help="Periods simulated per array.", min=1)] = 1_000_000,
    seed: Annotated[int, typer.Option(
        "--seed", help="Random seed (the same seed gives the same answer).", min=0)] = 0,
    ure: Annotated[str | None, typer.Option(
        "--ure", help="Unrecoverable read errors per bit read during rebuilds: a rate in "
        "(0, 1e-10] (datasheets: 1e-14 to 1e-17), or catalog (each drive's datasheet "
        "figure). A rebuild with no redundancy left (RAID-5, or RAID-6 with a second "
        "failure) that meets one loses data. Off when not given.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Probability of data loss over a period and mean time to data loss (Monte Carlo, 95 %
    intervals) of each array, from its rebuild windows and a drive failure model, beside the
    analytic Markov MTTDL for exponential lifetimes."""
    _kernels_ready()
    from .risk import risk as run

    with Progress(TextColumn("risk {task.fields[name]}"), BarColumn(),
                  TextColumn("{task.completed:,}/{task.total:,} trials"), TimeRemainingColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("risk", total=trials, name="")

        def progress(name: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, name=name)

        try:
            results = run(runs, window_s, afr, weibull_shape, weibull_scale, years, trials,
                          seed, progress, ure)
        except BlocklabError as e:
            _fail(e)
    if as_json:
        print(json.dumps([r.as_dict() for r in results], indent=2))
        return
    first = results[0]
    t = Table("run", "drives", "window s", f"P(loss) in {years:g} y [95 %]",
              "losses", "MTTDL years [95 %]", "Markov MTTDL years\nclassical / independent",
              title=f"{first.failure_model}; {trials:,} trials of {years:g} years, seed {seed}")
    for r in results:
        win = sorted(set(r.windows_s.values()))
        t.add_row(
            escape(r.run) + "\n" + escape("; ".join(r.array)),
            str(r.drives),
            " / ".join(_g(w, ",.1f") for w in win),
            f"{_g(r.p_loss)}\n[{_g(r.p_loss_ci[0])}, {_g(r.p_loss_ci[1])}]",
            f"{_g(r.expected_losses)}\n({r.losses_counted:,} counted)",
            f"{_g(r.mttdl_years)}\n[{_g(r.mttdl_ci_years[0])}, {_g(r.mttdl_ci_years[1])}]",
            f"{_g(r.mttdl_markov_years)} / {_g(r.mttdl_independent_years)}",
        )
    Console(width=max(out.width, 150) if not out.is_terminal else None).print(t)
    for r in results:
        if r.ure_per_bit is not None:
            for g, rate in r.ure_per_bit.items():
                out.print(f"{r.run}: {g}: URE {rate:.3g} per bit; one rebuild reads "
                          f"{r.rebuild_read_bytes.get(g, 0.0) / 1e9:,.1f} GB: P(URE) = 1 - "
                          f"(1 - p)^bits = {_g(r.p_ure_per_rebuild.get(g), '.4g')}",
                          highlight=False, soft_wrap=True)
            out.print(f"{r.run}: rebuild reads: {r.read_source}; URE rate: {r.ure_source}",
                      highlight=False, soft_wrap=True)
        for share in r.ddp_triple_share.items():
            out.print(f"{r.run}: pool {share[0]}: {share[1]:.4f} of its drive triples share a "
                      "D-stripe", highlight=False, soft_wrap=True)
        for note in r.notes:
            out.print(f"{r.run}: {note}", highlight=False, soft_wrap=True)


# --------------------------------------------------------------------------------------------
# blocklab scenario

_SCENARIO_COLUMNS = {
    "rebuild": ("case", "drive", "failed_s", "window_s", "mb_per_s", "first_tenth_mb_per_s",
                "stripes_lost"),
    "phases": ("case", "phase", "op", "requests", "mb_per_s", "iops", "mean_ms", "p99_ms"),
    "init": ("case", "seconds", "mb_per_s", "first_tenth_mb_per_s"),
    "links": ("case", "links", "mtu", "read_mb_per_s", "write_mb_per_s"),
    "oio": ("case", "outstanding", "iops", "mean_latency_ms", "p99_latency_ms"),
    "spc1": ("case", "bsu", "iops", "mean_latency_ms", "capped", "replays"),
    "task_rates": ("case", "task", "sample_s", "read_mb_per_s", "write_mb_per_s",
                   "processed_mb_per_s"),
    "orion": ("case", "phase", "small_outstanding", "large_outstanding", "small_iops",
              "large_mb_per_s", "small_mean_ms"),
}
_SCENARIO_HEADERS = {"first_tenth_mb_per_s": "first 10% MB/s", "mb_per_s": "MB/s",
                     "stripes_lost": "lost", "read_mb_per_s": "read MB/s",
                     "write_mb_per_s": "write MB/s", "mean_latency_ms": "mean ms",
                     "p99_latency_ms": "p99 ms", "mean_ms": "mean ms", "p99_ms": "p99 ms",
                     "window_s": "window s", "failed_s": "failed s", "outstanding": "oio",
                     "processed_mb_per_s": "processed MB/s", "sample_s": "sample s",
                     "small_outstanding": "small", "large_outstanding": "large",
                     "small_iops": "small IOPS", "large_mb_per_s": "large MB/s",
                     "small_mean_ms": "small mean ms"}
_SCENARIO_TITLES = {
    "rebuild": "rebuilds (window: failure to rebuild end; MB/s per rebuilt drive)",
    "phases": "what the host saw, before / while rebuilding / after the failure",
    "init": "parity initialization (MB/s per member drive)",
    "links": "sequential MB/s through the host links (count x MTU)",
    "oio": "IOPS and latency against outstanding I/Os",
    "spc1": "the highest SPC-1 BSU count within the response-time limit",
    "task_rates": "rebuild and initialization rates at their start (data read + written)",
    "orion": "Orion matrix: each data point",
}


def _published_table(r: Any) -> None:
    """study | blocklab | ratio per published figure, then the orderings blocklab flips."""
    t = Table("quantity", "case", "unit", "study", "blocklab", "ratio",
              title="the study's figures beside blocklab's (within 25 %: 0.75 to 1.25)")
    for p in r.published:
        t.add_row(p["quantity"], escape(p["case"]), p["unit"], _cell(p["study"]),
                  _cell(p["blocklab"]), "-" if p["ratio"] is None else f"{p['ratio']:.2f}")
    out.print(t)
    ok = sum(1 for p in r.published if p["ratio"] is not None and 0.75 <= p["ratio"] <= 1.25)
    kept = sum(1 for o in r.orderings if o["kept"])
    out.print(f"{ok} of {len(r.published)} figures within 25 %; {kept} of {len(r.orderings)} "
              f"orderings kept", highlight=False)
    for o in r.orderings:
        if not o["kept"]:
            what = "flipped" if o["kept"] is False else "not measured"
            out.print(f"  {what}: {o['quantity']}: study {escape(o['higher'])} > "
                      f"{escape(o['lower'])} (x{o['study_ratio']:.2f})", highlight=False)


@scenario_app.command("list")
def scenario_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """The built-in scenarios: name, cases and title."""
    from . import scenario as sc

    try:
        rows = [sc.load(n) for n in sc.names()]
    except BlocklabError as e:
        _fail(e)
    if as_json:
        print(json.dumps([{"name": s.name, "title": s.title, "study": s.study,
                           "cases": [c.name for c in s.cases]} for s in rows], indent=2))
        return
    t = Table("name", "cases", "title")
    for s in rows:
        t.add_row(s.name, str(len(s.cases)), escape(s.title))
    out.print(t)


@scenario_app.command("show")
def scenario_show(
    name: Annotated[str, typer.Argument(help="Scenario name (blocklab scenario list).")],
) -> None:
    """A scenario's study, setup, assumptions and cases."""
    from . import scenario as sc

    try:
        s = sc.load(name)
    except BlocklabError as e:
        _fail(e)
    out.print(f"{s.name}: {escape(s.title)}\n\nStudy: {escape(s.study)}\n\nSetup:\n"
              f"{escape(s.setup)}\n\nAssumptions:\n{escape(s.assumptions)}\n",
              highlight=False, soft_wrap=True)
    t = Table("case", "measures", "failures", "label")
    for c in s.cases:
        t.add_row(c.name, ", ".join(c.measure),
                  ", ".join(f"drive {d} at {at:g} s" for d, at in c.failures) or "-",
                  escape(c.label))
    out.print(t)


@scenario_app.command("run")
def scenario_run(
    name: Annotated[str, typer.Argument(help="Scenario name (blocklab scenario list).")],
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Output folder (default scenario-NAME): per case its array, "
        "trace and run folder, and scenario.json with every figure.")] = None,
    case: Annotated[list[str] | None, typer.Option(
        "--case", help="Run only this case (repeat for more).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run a scenario: generate each case's workload on its array, replay it (with its
    failures), and print the figures the study reports. The run folders can be read with
    blocklab query and blocklab report."""
    _kernels_ready()
    from . import scenario as sc

    with Progress(TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.completed:.0f}/{task.total:.0f} cases"),
                  TimeRemainingColumn(), console=err, transient=True,
                  disable=not err.is_terminal) as bar:
        task = bar.add_task(name, total=None)

        def progress(case_name: str, i: int, n: int) -> None:
            bar.update(task, description=f"{name}: {case_name}", completed=i, total=n)

        try:
            r = sc.run(name, output, case or None, progress)
        except BlocklabError as e:
            bar.stop()
            _fail(e)
    if as_json:
        print(json.dumps(r.as_dict(), indent=2, default=str))
        return
    out.print(f"{r.scenario}: {escape(r.title)}", highlight=False, soft_wrap=True)
    for measure, rows in r.tables().items():
        cols = _SCENARIO_COLUMNS[measure]
        t = Table(*(_SCENARIO_HEADERS.get(c, c) for c in cols), title=_SCENARIO_TITLES[measure])
        for row in rows:
            if measure == "phases" and not row["requests"]:
                continue  # an op the workload had no requests of in that phase
            t.add_row(*(escape(_cell(row.get(c))) for c in cols))
        out.print(t)
    if r.published:
        _published_table(r)
    out.print(f"{len(r.cases)} case(s) in {r.elapsed_s:.1f} s; run folders and scenario.json "
              f"in {r.output}", highlight=False, soft_wrap=True)


@app.command()
def drives(
    name: Annotated[str | None, typer.Argument(
        help="One catalog drive: list every figure of its model with its source.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """The built-in drive catalog: HDDs and SSDs described by their datasheets (every figure
    with its source and how it was obtained: stated, measured, derived, proxy or assumed) and
    the four drives DiskSim 4.0 validated against measurements."""
    from .model.catalog import describe

    rows = describe()
    if name is not None:
        rows = [r for r in rows if r["name"] == name.lower()]
        if not rows:
            _fail(BlocklabError(f"no drive {name!r} in the catalog (blocklab drives lists it)"))
    if as_json:
        print(json.dumps(rows if name is None else rows[0], indent=2))
        return
    if name is not None:
        r = rows[0]
        out.print(f"{r['name']}: {escape(r['model'])} ({r['kind']}, {r['capacity_gb']:.1f} GB)",
                  highlight=False)
        if "figures" not in r:
            out.print(escape(r["source"]), highlight=False)
            return
        t = Table("figure", "value", "how obtained", "source")
        for k, f in r["figures"].items():
            t.add_row(k, str(f["value"]), escape(f["label"] + (": " + f["how"] if f["how"]
                                                              else "")), escape(f["source"]))
        out.print(t)
        return
    t = Table("name", "kind", "class", "model", "GB")
    for r in rows:
        t.add_row(str(r["name"]), str(r["kind"]), escape(str(r["class"])),
                  escape(str(r["model"])), f"{r['capacity_gb']:.1f}")
    out.print(t)


@app.command()
def formats(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """The input formats `ingest` reads, in the order `--format auto` tries them."""
    from blocklab.traces.formats import registry

    reg = registry()
    if as_json:
        print(json.dumps({n: f.description for n, f in reg.items()}, indent=2))
        return
    t = Table("format", "description")
    for name, f in reg.items():
        t.add_row(name, escape(f.description))
    out.print(t)


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


def main() -> None:
    # the handlers stay from here to the exit: a signal just after the command (its output
    # complete) is a stop too, not Python's default death
    with safety.signals_handled(restore=False):
        try:
            app()
        except BlocklabError as e:  # pragma: no cover - commands catch their own
            print(f"blocklab: error: {e}", file=sys.stderr)
            sys.exit(2)
        except safety.Interrupted as e:  # before or after the command
            _exit_now(128 + e.signum)
        except SystemExit:
            sig = safety.received()
            if sig is not None:
                _exit_now(128 + sig)
            # done: a signal from now on finds nothing to stop (and must not kill the exit)
            for s in safety.SIGNALS:
                signal.signal(s, signal.SIG_IGN)
            raise


def _exit_now(status: int) -> None:
    """Exit at once after a signal stopped the command (its outputs already cleaned up): the
    signal may have cut a library mid-call (Numba's compiler, say), leaving objects whose
    finalizers fail at interpreter exit with "Exception ignored" tracebacks."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
