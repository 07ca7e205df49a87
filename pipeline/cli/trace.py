"""``blocklab ingest`` and ``blocklab trace stats|head|iostat``: traces in, and a look at them."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from blocklab.traces.errors import BlocklabError

from ._app import (
    TABLE_ROWS,
    _add_ends,
    _cell,
    _ends,
    _fail,
    _kernels_ready,
    _size,
    _write_json_list,
    app,
    err,
    out,
    table,
    trace_app,
    wide,
)


@app.command()
def ingest(
    sources: Annotated[
        list[str],
        typer.Argument(
            help="Input files (gzip, zstd or xz are read as is). blktrace per-CPU files "
            "NAME.blktrace.N are merged by time; a bare NAME stands for all of them. - reads "
            "standard input; a pipe is read as a stream."
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
    from blocklab.pipeline.ingest import ingest as run

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

        def progress(done: int, total: int | None) -> None:
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
        highlight=False, soft_wrap=True,
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
    from blocklab.pipeline.stats import trace_stats as run

    try:
        s = run(file)
    except BlocklabError as e:
        _fail(e)
    if as_json:
        print(json.dumps(s, indent=2, default=str))
        return
    t = table("figure", title=f"{file} ({s['source_format']})", show_header=False)
    t.add_column("value", justify="right", overflow="fold")  # (a device's long name: table())

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


@trace_app.command("head")
def trace_head(
    file: Annotated[Path, typer.Argument(help="Trace Parquet file.")],
    n: Annotated[int, typer.Option("-n", "--rows", help="How many requests to show (at most "
                                   "100,000: blocklab query --sql for more).", min=1,
                                   max=100_000)] = 10,
) -> None:
    """The first requests of a trace, one per row."""
    from blocklab.pipeline.stats import trace_head as run

    try:
        cols, rows = run(file, n)
    except BlocklabError as e:
        _fail(e)
    # only the columns that have a value in the rows shown
    shown = [i for i, _c in enumerate(cols) if any(r[i] is not None for r in rows)]
    t = table()
    for i in shown:
        t.add_column(cols[i], justify="right", no_wrap=True)
    for r in rows:
        t.add_row(*("" if r[i] is None else str(r[i]) for i in shown))
    wide(200).print(t)


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
        "--json", help="Print one JSON object: iostat rows (every one, written as they come) "
        "and idle-period rows.")] = False,
    max_rows: Annotated[int, typer.Option(
        "--max-rows", help="The iostat table shows at most this many rows, the first and the "
        "last half, and says how many there are (0: every row, held in memory until printed).",
        min=0)] = TABLE_ROWS,
) -> None:
    """What `iostat -x` would have shown per device and interval (r/s, w/s, rkB/s, wkB/s,
    rrqm/s, wrqm/s, r_await, w_await, aqu-sz, rareq-sz, wareq-sz, %util, with sysstat's
    definitions), and each device's idle periods (count, share, percentiles, histogram)."""
    from blocklab.pipeline.iostat import open_iostat, parse_interval

    # a row per interval and device: a month at 1 s is 2.6 M rows a device, so the rows are
    # read as a stream, written as they come (--json) or the table's first and last kept
    try:
        with open_iostat(source, parse_interval(interval), device) as (r, batches):
            if as_json:
                _write_json_rows(r.as_dict(), batches)
                return
            first, last, total = _ends(batches, max_rows)
    except BlocklabError as e:
        _fail(e)
    several = len(r.sources) > 1
    head = (["run"] if several else []) + ["t_s", "device", *_IOSTAT_COLUMNS]
    t = table(*head, title=f"{source}: iostat -x, {r.interval_s:g} s intervals "
              "(kB = 1024 bytes; await in ms)")
    for c in t.columns[(1 if several else 0):]:
        c.justify = "right"

    def cells(row: dict[str, Any]) -> list[str]:
        return (([escape(row["run"])] if several else [])
                + [f"{row['t_s']:.3f}", str(row["device"])]
                + [f"{row[c]:.2f}" for c in _IOSTAT_COLUMNS])

    cut = _add_ends(t, first, last, total, cells)
    wide(170).print(t)
    if cut:
        err.print(f"({total:,} iostat rows, {len(first) + len(last):,} shown: --max-rows 0 "
                  "shows every row; --json writes them all in bounded memory)",
                  highlight=False, soft_wrap=True)
    it = table(*((["run"] if several else []) + ["device", *_IDLE_COLUMNS]),
               title="idle periods (no request in progress between two busy periods; ms)")
    for row in r.idle:
        it.add_row(*(([escape(row["run"])] if several else []) + [str(row["device"])] +
                     [escape(_cell(row[c])) for c in _IDLE_COLUMNS]))
    wide(170).print(it)
    for note in r.notes:
        err.print(f"blocklab: note: {note}", markup=False, highlight=False, soft_wrap=True)


def _write_json_rows(doc: dict[str, Any], batches: Iterable[Any], key: str = "rows") -> None:
    """``json.dumps(doc, indent=2)`` with ``doc[key]`` (empty in ``doc``) the rows of
    ``batches``, written row by row: the same text, in memory that does not grow with them."""
    mark = "\u0000rows\u0000"
    text = json.dumps({**doc, key: mark}, indent=2, default=str)
    before, after = text.split(json.dumps(mark), 1)
    sys.stdout.write(before)
    _write_json_list(batches, 1)
    sys.stdout.write(after + "\n")
