"""``blocklab query`` and ``blocklab report``: named SQL over run folders and traces, and the HTML
report."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
from rich.markup import escape

from blocklab.traces.errors import BlocklabError

from ._app import (
    TABLE_ROWS,
    _add_ends,
    _cell,
    _ends,
    _fail,
    _rows,
    _write_json_list,
    app,
    err,
    out,
    table,
    wide,
)


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
        metavar="SOURCE... NAME",
        help="Run folders, folders holding run folders (at any depth), or trace files; then "
        "the query's NAME unless --sql is given.", show_default=False)] = None,
    sql: Annotated[str | None, typer.Option(
        "--sql", metavar="SQL", help="Run this SQL over the views (ios, drive_ops, drive_busy, "
        "events, runs, drives, trace, traces, requests, device_ios) instead of a named "
        "query.")] = None,
    param: Annotated[list[str] | None, typer.Option(
        "--param", "-p", metavar="NAME=VALUE", help="The value of the query's parameter "
        "$NAME (repeat for several); see --list for each query's parameters and "
        "defaults.")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", "-f", help="Output: table, json (a list of row objects) or csv. csv and "
        "json write every row as the answer comes, in bounded memory.")
    ] = "table",
    max_rows: Annotated[int, typer.Option(
        "--max-rows", help="A table shows at most this many rows, the first and the last "
        "half, and says how many there are (0: every row, held in memory until printed).",
        min=0)] = TABLE_ROWS,
    list_queries: Annotated[bool, typer.Option(
        "--list", help="List the named queries: description, views and parameters.")] = False,
) -> None:
    """Ask a question of run folders and traces in SQL: a named query (queries/*.sql) or your
    own with --sql, over the same DuckDB views; each row carries its run in `run`."""
    import csv

    from blocklab.pipeline.query import catalog, stream_query

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
        t = table("query", "views", "parameters (default)", "description", show_lines=True)
        for q in cat.values():
            t.add_row(q.name, escape(", ".join(q.views)),
                      escape("\n".join(f"{p.name}={p.default}: {p.doc}" for p in q.params)),
                      escape(q.description))
        wide(160).print(t)
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
    if name is not None and not paths and Path(name).exists():
        _fail(BlocklabError(f"query: {name} is an input; give a query NAME after the inputs, "
                            "or --sql (blocklab query --list)"))
    if fmt != "table":
        # csv and json are written as DuckDB answers, a batch at a time: memory does not grow
        # with the answer's rows (issue 21); a table needs every row to size its columns
        try:
            with stream_query(paths, name=name, sql=sql, params=params) as (schema, batches):
                (_write_csv if fmt == "csv" else _write_json)(schema.names, batches)
        except BlocklabError as e:
            _fail(e)
        return
    # a table is read by a person: an answer of a row per second of a month-long run, or of
    # every request, shows its first and last rows and how many there are (as DuckDB's own
    # shell does), read from the same stream as csv and json, so memory does not grow with it
    try:
        with stream_query(paths, name=name, sql=sql, params=params) as (schema, batches):
            head, tail, total = _ends(batches, max_rows)
    except BlocklabError as e:
        _fail(e)
    columns = schema.names
    t = table(*columns)
    for col, typ in zip(t.columns, schema.types, strict=True):
        if str(typ).startswith(("int", "uint", "double", "float", "decimal")):
            col.justify = "right"
    cut = _add_ends(t, head, tail, total, lambda row: [escape(_cell(row[c])) for c in columns])
    wide(40 + 14 * len(columns)).print(t)
    if not total:
        from blocklab.pipeline.query import missing_views

        why = missing_views(paths, name) if name else []
        err.print(f"(no rows{': ' + '; '.join(why) if why else ''})", highlight=False,
                  soft_wrap=True)
    elif cut:
        err.print(f"({total:,} rows, {len(head) + len(tail):,} shown: --max-rows 0 shows every "
                  "row; -f csv "
                  "or -f json writes them all in bounded memory)", highlight=False,
                  soft_wrap=True)


def _write_csv(columns: list[str], batches: Iterable[Any]) -> None:
    import csv

    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(columns)
    for row in _rows(batches):
        w.writerow(["" if row[c] is None else
                    json.dumps(row[c], default=_json_value) if isinstance(row[c], list)
                    else _json_value(row[c]) if not isinstance(row[c], int | float | str)
                    else row[c] for c in columns])


def _write_json(columns: list[str], batches: Iterable[Any]) -> None:
    """A list of row objects, written row by row as ``json.dumps(rows, indent=2)`` writes the
    whole list (the same text)."""
    _write_json_list(batches, 0, _json_value)
    sys.stdout.write("\n")


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
    from blocklab.pipeline.report import report as run

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
