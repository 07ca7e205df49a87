"""``blocklab capture``: block I/O of a live device through tracefs into a trace file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
import typer.core

from blocklab.traces.errors import BlocklabError

from ._app import _fail, _kernels_ready, app, err, out


@app.command()
def capture(
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Trace Parquet file to write (owner-readable only, appears "
        "only when complete).")] = None,
    device: Annotated[list[str] | None, typer.Option(
        "--device", "-d", metavar="DEVICE",
        help="Device to capture: MAJ:MIN or /dev/NAME (a partition is its "
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
        "--max-size", help="Stop before the output file reaches SIZE (bytes; 500M, 2G, 2GiB "
        "binary, 2GB decimal).",
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

    from blocklab.pipeline.capture import CaptureOptions, CaptureStatus, parse_size
    from blocklab.pipeline.capture import capture as run
    from blocklab.pipeline.tracefs import cleanup as run_cleanup

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
