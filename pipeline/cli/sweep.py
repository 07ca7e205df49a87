"""``blocklab sweep plan|run``: a grid of configurations replayed on Dask."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
import typer.core
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from blocklab.traces.errors import BlocklabError

from ._app import ClusterTimeout, _fail, _kernels_ready, err, out, sweep_app, table

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
    from blocklab.pipeline.sweepfile import load_sweep, value_text

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
    t = table("point", *(a.name for a in sw.axes), "config",
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
    timeout: ClusterTimeout = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run every point of a sweep (one replay per point) on Dask distributed. Exit status 1
    when a point failed (its error is in OUT/POINT.error.json), 2 for bad input, 130 when
    interrupted (finished points are kept: run the same command again)."""
    _kernels_ready()
    from blocklab.pipeline.sweep import Status, SweepInterrupted, run_sweep

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
            + (f"{r.retraced} replayed again (their trace changed since they ran), "
               if r.retraced else "")
            + f"{r.elapsed_s:.1f} s", highlight=False, soft_wrap=True)
    for f in r.failed:
        err.print(f"blocklab: {f['error']}", markup=False, highlight=False, soft_wrap=True)
    if r.failed:
        raise typer.Exit(1)
