"""``blocklab replay``: a trace on an array configuration -> a run folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.core
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from blocklab.traces.errors import BlocklabError

from ._app import ClusterTimeout, _fail, _kernels_ready, app, err, out

if TYPE_CHECKING:
    from blocklab.pipeline.replay import ReplayResult


@app.command()
def replay(
    trace: Annotated[Path, typer.Argument(help="Trace Parquet file (from ingest).")],
    array: Annotated[Path, typer.Option("--array", help="Array configuration (TOML).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Run folder to write.")],
    closed_loop: Annotated[int, typer.Option(
        "--closed-loop", min=0, help="Keep N requests outstanding per stream instead of "
        "replaying the trace's arrival times (0: open loop); on a closed-loop trace N "
        "replaces its outstanding counts, its streams and phase barriers stay.")] = 0,
    think_us: Annotated[float, typer.Option(
        "--think-us", min=0, help="Closed loop: time between a completion and the next "
        "issue.")] = 0.0,
    speed: Annotated[float, typer.Option(
        "--speed", help="Open loop: divide arrival times by X (2 = twice the load).")] = 1.0,
    wrap: Annotated[bool, typer.Option(
        "--wrap", help="Fold addresses beyond the array's capacity instead of failing.")] = False,
    drive_ops: Annotated[bool, typer.Option(
        "--drive-ops", help="Also write every drive operation to drive_ops.parquet.")] = False,
    repeat_until_tasks_end: Annotated[bool, typer.Option(
        "--repeat-until-tasks-end", help="Closed loop: run the trace again, pass after pass, "
        "while background tasks (rebuilds, rebalances, initializations) remain, as a benchmark "
        "looped until the reconstruction ends; the last pass runs to its end. Pass k's "
        "requests are numbered row + k x (rows of the trace).")] = False,
    max_passes: Annotated[int | None, typer.Option(
        "--max-passes", help="With --repeat-until-tasks-end: the most passes of the "
        "trace (default 1000); when they end with tasks still under way, the tasks finish "
        "without host I/O and the replay says so.")] = None,
    fail: Annotated[list[str] | None, typer.Option(
        "--fail", metavar="DRIVE@SECONDS",
        help="Fail drive DRIVE at SECONDS into the replay (DRIVE@SECONDS, e.g. "
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
    timeout: ClusterTimeout = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Replay a trace against an array (layout, drives, controller and cache; failures and
    rebuilds) and write a run folder: ios.parquet, drive_busy.parquet, events.parquet (with
    failures or tasks), drive_ops.parquet (--drive-ops) and meta.json (owner-readable only,
    written atomically). With --workers or --scheduler the trace is cut into time segments
    replayed on Dask and stitched into the same run folder; the neighbours' overlaps are
    compared and the agreement reported (docs/parallel.md)."""
    if max_passes is not None and not repeat_until_tasks_end:
        _fail(BlocklabError("--max-passes: only with --repeat-until-tasks-end"))
    if repeat_until_tasks_end and (workers is not None or scheduler is not None
                                   or segments is not None):
        _fail(BlocklabError("--repeat-until-tasks-end: not with --workers, --scheduler or "
                            "--segments (a repeated trace is replayed serially)"))
    _kernels_ready()
    from blocklab.pipeline.replay import DEFAULT_MAX_PASSES, parse_failure
    from blocklab.pipeline.replay import replay as run

    with Progress(TextColumn("replay"), BarColumn(), TextColumn("{task.completed:,} requests"),
                  TimeRemainingColumn(), console=err, transient=True,
                  disable=not err.is_terminal) as bar:
        task = bar.add_task("replay", total=None)

        def progress(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        try:
            failures = [parse_failure(f) for f in fail or []]
            if workers is not None or scheduler is not None or segments is not None:
                from blocklab.pipeline.parallel import replay_parallel

                r = replay_parallel(trace, array, output, workers=workers,
                                    scheduler=scheduler, segments=segments, timeout=timeout,
                                    speed=speed, closed_loop=closed_loop, think_us=think_us,
                                    wrap=wrap, drive_ops=drive_ops, failures=failures,
                                    progress=None)
            else:
                r = run(trace, array, output, speed=speed, closed_loop=closed_loop,
                        think_us=think_us, wrap=wrap, drive_ops=drive_ops, progress=progress,
                        failures=failures,
                        repeat="until-tasks-end" if repeat_until_tasks_end else None,
                        max_passes=DEFAULT_MAX_PASSES if max_passes is None else max_passes)
        except BlocklabError as e:
            _fail(e)
    for note in r.notes:
        err.print(f"blocklab: note: {note}", markup=False, highlight=False, soft_wrap=True)
    if as_json:
        print(json.dumps(r.as_dict(), indent=2))
        return
    _print_summary(r, repeat_until_tasks_end)


def _print_summary(r: ReplayResult, repeat_until_tasks_end: bool) -> None:
    """The replay's lines: requests, latency and speed, then what the run needs said."""
    passes = f" in {r.passes} passes of the trace" if repeat_until_tasks_end else ""
    # no request, no latency: "mean 0.000 ms" read as a measured figure
    lat = (f"latency mean {r.mean_latency_ms:.3f} ms, p99 {r.p99_latency_ms:.3f} ms"
           if r.requests > r.lost else "no latency (every request was lost)" if r.requests
           else "no latency (the trace has no read or write request)")
    out.print(f"{r.output}: {r.requests} requests{passes}, {lat}; replayed at "
              f"{r.requests_per_s:,.0f} requests/s", highlight=False, soft_wrap=True)
    if r.skipped:  # (meta.json counts them too: skipped_not_read_write)
        out.print(f"  {r.skipped:,} requests neither read nor write (discards, flushes, others) "
                  "were skipped: the drive models serve reads and writes only, so a discard "
                  "frees no flash", highlight=False, soft_wrap=True)
    if r.repeat_limit_reached:
        out.print(f"  --max-passes {r.passes} reached with background tasks still under way: "
                  "they finished without host I/O (raise --max-passes to cover them)",
                  highlight=False, soft_wrap=True)
    par = r.parallel
    if par and "serial_because" in par:  # (one line, as every line here: grep finds it)
        out.print(f"  replayed serially: {par['serial_because']}", highlight=False,
                  soft_wrap=True)
    elif par:
        out.print(
            f"  {par['segments']} segments on {par['workers']} worker(s) ({par['scheduler']}); "
            f"overlaps: {par['identical_fraction']:.2%} of {par['overlap_requests']:,} "
            f"requests identical, largest latency difference "
            f"{par['max_latency_diff_ns'] / 1e6:.3f} ms"
            + ("" if par["agreed"] else " (the neighbours did not agree: see meta.json "
               "parallel.cuts)")
            # the work the self-check cost: warm-ups, overlaps and the rounds that grew them
            # (a review's cached array took 6 rounds, 4 x the serial time, and said nothing)
            + f"; {par['requests_replayed'] / max(r.requests, 1):.2f} x the requests replayed"
            + (f" in {rounds} rounds" if (rounds := max(
                (c["rounds"] for c in par["cuts"]), default=1)) > 1 else "")
            + (f"; {lost} segment attempt(s) lost with their worker, run again"
               if (lost := par["attempts_lost"]) else "")
            # what a short trace loses to the cluster (a 2 M-request replay takes about 2 s
            # serially here; starting a local cluster of 2 and loading its kernels about 1 s)
            + f"; cluster start, stop and kernel loading "
            f"{par['setup_s'] + par['teardown_s']:.1f} s", highlight=False, soft_wrap=True)
    for rb in r.rebuilds:  # (a line each, whatever the width: grep finds a failure's line)
        out.print(_rebuild_line(rb), highlight=False, soft_wrap=True)
    if r.lost:  # (ios.lost; their latency is null)
        out.print(f"  {r.lost:,} requests lost: part of their data was on no surviving member "
                  "(a real array fails them); the latency figures leave them out",
                  highlight=False, soft_wrap=True)


def _rebuild_line(rb: dict[str, Any]) -> str:
    """A failure's line after the replay: its rebuild window, or why it has none."""
    window = "did not end" if rb["window_s"] is None else f"{rb['window_s']:,.1f} s"
    if rb.get("stopped_s") is not None:
        why = ("the spare it wrote onto failed (the spare's own rebuild starts over)"
               if rb.get("spare_failed") else "the rest lost to a later failure")
        window = (f"did not end: the rebuild stopped at {rb['stopped_s']:,.3f} s with "
                  f"{rb['rebuilt_fraction']:.1%} rebuilt, {why}")
    lost = f", {rb['stripes_lost']:,} stripes lost" if rb["stripes_lost"] else ""
    return (f"  drive {rb['drive']} ({rb['group']}) failed at {rb['failed_s']:,.3f} s: "
            f"rebuild window {window}{lost}")
