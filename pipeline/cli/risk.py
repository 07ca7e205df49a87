"""``blocklab cache mrc`` and ``blocklab risk``: what a trace says of cache sizes, and the risk of
data loss."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
import typer.core
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from blocklab.traces.errors import BlocklabError

from ._app import _fail, _kernels_ready, _size, app, cache_app, err, out, table, wide

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
    _kernels_ready()
    from blocklab.pipeline.mrc import mrc as run
    from blocklab.pipeline.mrc import parse_size

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
            if html_out is not None:  # before the pass over the trace, not after it
                from blocklab.traces.safety import not_an_input

                not_an_input(html_out, [trace])
            r = run(trace, block_bytes, size_list, sample, sample_size, error, progress)
            if html_out is not None:
                from blocklab.pipeline.report import write_mrc_page

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
    t = table("cache", "blocks", "miss ratio", "read", "write")
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
    scrub_interval: Annotated[str | None, typer.Option(
        "--scrub-interval", help="With --ure: the array is scrubbed every this long (168h, "
        "7d; a number alone is seconds), so a rebuild also meets the latent defects formed "
        "since the last scrub (uniform age in [0, interval)). Not modelled when not "
        "given.")] = None,
    workload_read_per_day: Annotated[str | None, typer.Option(
        "--workload-read-per-day", help="With --scrub-interval: bytes the workload reads "
        "from each drive per day (270GB, 1TB), which latent defects form in at the URE rate "
        "(default 2.7e11, Elerath, CACM 2009).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Probability of data loss over a period and mean time to data loss (Monte Carlo, 95 %
    intervals) of each array, from its rebuild windows and a drive failure model, beside the
    analytic Markov MTTDL for exponential lifetimes."""
    _kernels_ready()
    from blocklab.pipeline.risk import risk as run

    with Progress(TextColumn("risk {task.fields[name]}"), BarColumn(),
                  TextColumn("{task.completed:,}/{task.total:,} trials"), TimeRemainingColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("risk", total=trials, name="")

        def progress(name: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, name=name)

        try:
            results = run(runs, window_s, afr, weibull_shape, weibull_scale, years, trials,
                          seed, progress, ure, scrub_interval, workload_read_per_day)
        except BlocklabError as e:
            _fail(e)
    if as_json:
        print(json.dumps([r.as_dict() for r in results], indent=2))
        return
    first = results[0]
    t = table("run", "drives", "window s", f"P(loss) in {years:g} y [95 %]",
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
    wide(150).print(t)
    for r in results:
        if r.ure_per_bit is not None:
            for g, rate in r.ure_per_bit.items():
                head = (f"{r.run}: {g}: URE {rate:.3g} per bit; one rebuild reads "
                        f"{r.rebuild_read_bytes.get(g, 0.0) / 1e9:,.1f} GB")
                if r.scrub_interval_h is None:
                    out.print(f"{head}: P(URE) = 1 - (1 - p)^bits = "
                              f"{_g(r.p_ure_per_rebuild.get(g), '.4g')}",
                              highlight=False, soft_wrap=True)
                    continue
                lat = r.latent_defects_per_rebuild.get(g, 0.0)
                out.print(f"{head} and meets {lat:.4g} latent defects on average (scrubs "
                          f"every {r.scrub_interval_h:g} h, workload reads "
                          f"{(r.workload_read_per_day_bytes or 0) / 1e9:,.0f} GB per drive "
                          f"per day): P(URE) = 1 - (1 - p)^bits (1 - exp(-L S)) / (L S) = "
                          f"{_g(r.p_ure_per_rebuild.get(g), '.4g')}",
                          highlight=False, soft_wrap=True)
            out.print(f"{r.run}: rebuild reads: {r.read_source}; URE rate: {r.ure_source}",
                      highlight=False, soft_wrap=True)
        for share in r.ddp_triple_share.items():
            out.print(f"{r.run}: pool {share[0]}: {share[1]:.4f} of its drive triples share a "
                      "D-stripe", highlight=False, soft_wrap=True)
        for note in r.notes:
            out.print(f"{r.run}: {note}", highlight=False, soft_wrap=True)
