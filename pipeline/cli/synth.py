"""``blocklab synth spc1|ior|iometer|orion`` and ``blocklab spc1 search``: synthetic workloads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from blocklab.traces.errors import BlocklabError

from ._app import _fail, _kernels_ready, err, out, spc1_app, synth_app

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
    from blocklab.pipeline.synth import synth_spc1 as run

    _synth(lambda p: run(output, bsu, duration, seed, capacity, array, p), "spc1", as_json)


@synth_app.command("ior")
def synth_ior(
    output: _Output,
    tasks: Annotated[int, typer.Option("--tasks", "-N", help="IOR tasks (each a stream).")] = 1,
    transfer_size: Annotated[str, typer.Option(
        "--transfer-size", "-t", help="Bytes per transfer (IOR -t; 4k = 4096).")] = "256k",
    block_size: Annotated[str, typer.Option(
        "--block-size", "-b", help="Contiguous bytes per task per segment (IOR -b).")] = "1m",
    segments: Annotated[str, typer.Option(
        "--segments", "-s", help="Segments (IOR -s; 1k = 1024, as IOR reads it).")] = "1",
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
    repetitions: Annotated[int, typer.Option(
        "--repetitions", "-i", help="Repetitions of the write and read phases (IOR -i); "
        "the trace holds them all. To loop until a rebuild ends, replay with "
        "--repeat-until-tasks-end instead.")] = 1,
    seed: _Seed = 0,
    capacity: _Capacity = None,
    array: _Array = None,
    as_json: _Json = False,
) -> None:
    """IOR (closed loop): tasks write then read a shared file or one file each, with IOR's
    offsets, --repetitions times; files laid out one after another on the volume.
    --capacity/--array are optional (to check the files fit)."""
    from blocklab.pipeline.synth import synth_ior as run

    _synth(lambda p: run(output, tasks, transfer_size, block_size, segments, file_per_proc,
                         random, write, read, outstanding, seed, align, capacity, array, p,
                         repetitions),
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
    from blocklab.pipeline.synth import synth_iometer as run

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
    from blocklab.pipeline.synth import synth_orion as run

    _synth(lambda p: run(output, matrix, large_type, size_small, size_large, num_disks,
                         num_small, num_large, num_streamio, write_pct, requests_per_slot,
                         seed, capacity, array, p), "orion", as_json)


@spc1_app.command("search")
def spc1_search(
    array: Annotated[Path, typer.Option("--array", help="Array configuration (TOML).")],
    limit_ms: Annotated[float, typer.Option("--limit-ms", help="Mean response time limit "
                                            "in milliseconds.")] = 30.0,
    duration: Annotated[float, typer.Option("--duration", help="Seconds of SPC-1 workload "
                                            "measured per BSU count tried.")] = 180.0,
    ramp_up: Annotated[float, typer.Option("--ramp-up", help="Seconds of workload before "
                                           "each measurement (0: measure from a cold "
                                           "start).")] = 60.0,
    seed: _Seed = 0,
    max_bsu: Annotated[int | None, typer.Option("--max-bsu", help="Try no more BSUs than "
                                                "this.")] = None,
    as_json: _Json = False,
) -> None:
    """The highest SPC-1 BSU count whose mean response time on the array stays within the
    limit: doubling, then bisection, each count replayed and measured after its ramp-up."""
    _kernels_ready()
    from blocklab.pipeline.synth import spc1_search as run

    def progress(p: Any) -> None:
        if err.is_terminal:
            err.print(f"  BSU {p.bsu}: {p.mean_latency_ms:.3f} ms "
                      f"({'within' if p.within_limit else 'beyond'} the limit)",
                      highlight=False)

    try:
        r = run(array, limit_ms, duration, seed, max_bsu, progress, ramp_s=ramp_up)
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
    best = next(p for p in r.probes if p.bsu == r.bsu)
    if best.cache_outpaced:
        err.print(f"blocklab: note: at {r.bsu} BSU the controller cache ended "
                  f"{best.cache_dirty_end:.0%} dirty (destaging starts at "
                  f"{best.flush_start:.0%}): the writes were outpacing the drives, and a longer "
                  "--ramp-up and --duration may find fewer BSUs", highlight=False,
                  soft_wrap=True)
