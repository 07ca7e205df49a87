"""``blocklab scenario list|show|run``: the published array studies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from blocklab.traces.errors import BlocklabError

from ._app import _cell, _fail, _kernels_ready, err, out, scenario_app, table, wide

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
    "init": "parity initialization (MB/s per member drive, summed over the LUNs initialized "
            "at once)",
    "links": "sequential MB/s through the host links (count x MTU)",
    "oio": "IOPS and latency against outstanding I/Os",
    "spc1": "the highest SPC-1 BSU count within the response-time limit",
    "task_rates": "rebuild and initialization rates at their start (data read + written)",
    "orion": "Orion matrix: each data point",
}


def _published_table(r: Any) -> None:
    """study | blocklab | ratio per published figure, then the orderings blocklab flips."""
    t = table("quantity", "case", "unit", "study", "blocklab", "ratio",
              title="the study's figures beside blocklab's (within 25 %: 0.75 to 1.25)")
    for p in r.published:
        t.add_row(p["quantity"], escape(p["case"]), p["unit"], _cell(p["study"]),
                  _cell(p["blocklab"]), "-" if p["ratio"] is None else f"{p['ratio']:.2f}")
    wide(200).print(t)
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
    from blocklab.pipeline import scenario as sc

    try:
        rows = [sc.load(n) for n in sc.names()]
    except BlocklabError as e:
        _fail(e)
    if as_json:
        print(json.dumps([{"name": s.name, "title": s.title, "study": s.study,
                           "cases": [c.name for c in s.cases]} for s in rows], indent=2))
        return
    t = table("name", "cases", "title")
    for s in rows:
        t.add_row(s.name, str(len(s.cases)), escape(s.title))
    out.print(t)


@scenario_app.command("show")
def scenario_show(
    name: Annotated[str, typer.Argument(help="Scenario name (blocklab scenario list).")],
) -> None:
    """A scenario's study, setup, assumptions and cases."""
    from blocklab.pipeline import scenario as sc

    try:
        s = sc.load(name)
    except BlocklabError as e:
        _fail(e)
    out.print(f"{s.name}: {escape(s.title)}\n\nStudy: {escape(s.study)}\n\nSetup:\n"
              f"{escape(s.setup)}\n\nAssumptions:\n{escape(s.assumptions)}\n",
              highlight=False, soft_wrap=True)
    t = table("case", "measures", "failures", "workload", "label")
    for c in s.cases:
        t.add_row(c.name, ", ".join(c.measure),
                  ", ".join(f"drive {d} at {at:g} s" for d, at in c.failures) or "-",
                  f"repeated {c.replay['repeat']}" if c.replay.get("repeat") else "once",
                  escape(c.label))
    out.print(t)


@scenario_app.command("run")
def scenario_run(
    name: Annotated[str, typer.Argument(help="Scenario name (blocklab scenario list).")],
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Output folder (default scenario-NAME): per case its array, "
        "trace and run folder, and scenario.json with every figure.")] = None,
    case: Annotated[list[str] | None, typer.Option(
        "--case", metavar="CASE", help="Run only this case (repeat for more).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Run a scenario: generate each case's workload on its array, replay it (with its
    failures), and print the figures the study reports. The run folders can be read with
    blocklab query and blocklab report."""
    _kernels_ready()
    from blocklab.pipeline import scenario as sc

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
        title = _SCENARIO_TITLES[measure]
        if measure == "phases" and rows and all(row.get("phase") == "all" for row in rows):
            title = "what the host saw over the whole run (no failure)"
        t = table(*(_SCENARIO_HEADERS.get(c, c) for c in cols), title=title)
        for row in rows:
            if measure == "phases" and not row["requests"]:
                continue  # an op the workload had no requests of in that phase
            t.add_row(*(escape(_cell(row.get(c))) for c in cols))
        wide(200).print(t)  # (a pipe or a file: whole numbers and names, not cut at 80)
    for c in r.cases:
        if "passes" not in c:
            continue
        if c["repeat_limit_reached"]:
            how = (f"{c['passes']} passes (max_passes), the background tasks still under way: "
                   "they finished without host I/O")
        elif c["passes"] == 1:
            how = "1 pass: the background tasks ended within it"
        else:
            how = f"{c['passes']} passes, repeated until the background tasks ended"
        out.print(f"{escape(c['case'])}: the workload ran {how}", highlight=False,
                  soft_wrap=True)
    if r.published:
        _published_table(r)
    out.print(f"{len(r.cases)} case(s) in {r.elapsed_s:.1f} s; run folders and scenario.json "
              f"in {r.output}", highlight=False, soft_wrap=True)
