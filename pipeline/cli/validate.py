"""``blocklab validate disksim``: a drive model scored against a real drive."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
import typer.core

from blocklab.traces.errors import BlocklabError

from ._app import _fail, _kernels_ready, out, validate_app


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
    from blocklab.pipeline.validate import validate_disksim as run

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
