"""``blocklab drives`` and ``blocklab formats``: the drive catalog and the input formats."""

from __future__ import annotations

import json
from typing import Annotated

import typer
import typer.core
from rich.markup import escape

from blocklab.traces.errors import BlocklabError

from ._app import _fail, app, out, table, wide


@app.command()
def drives(
    name: Annotated[str | None, typer.Argument(
        help="One catalog drive: list every figure of its model with its source.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """The built-in drive catalog: HDDs and SSDs described by their datasheets (every figure
    with its source and how it was obtained: stated, measured, derived, proxy or assumed) and
    the four drives DiskSim 4.0 validated against measurements."""
    from blocklab.pipeline.model.catalog import describe

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
        t = table("figure", "value", "how obtained", "source")
        for k, f in r["figures"].items():
            t.add_row(k, str(f["value"]), escape(f["label"] + (": " + f["how"] if f["how"]
                                                              else "")), escape(f["source"]))
        wide(160).print(t)
        return
    t = table("name", "kind", "class", "model", "GB")
    t.columns[0].no_wrap = True  # the name to type: never cut (it was, at 80 columns)
    for r in rows:
        t.add_row(str(r["name"]), str(r["kind"]), escape(str(r["class"])),
                  escape(str(r["model"])), f"{r['capacity_gb']:.1f}")
    wide(120).print(t)


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
    t = table("format", "description")
    for name, f in reg.items():
        t.add_row(name, escape(f.description))
    wide(120).print(t)
