"""A query's failure said as one line naming the query, its inputs and, when DuckDB's own words
name no file (a damaged page header: "don't know what type:"), the Parquet file that fails
alone (``pipeline/query.py`` ``_failed``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb

from blocklab.traces.errors import printable
from blocklab.traces.schema import RUN_COLUMNS

if TYPE_CHECKING:
    from .query import Source


def _damaged(sources: list[Source]) -> str | None:
    """The first Parquet file of ``sources`` that DuckDB cannot read through (every column of
    every row), as ``run R: FILE`` or the trace's path; None when each reads alone."""
    from .query import duck

    con = duck(threads=1)
    try:
        for s in sources:
            files = ([(str(s.path), s.path)] if s.kind == "trace" else
                     [(f"run {s.name}: {stem}.parquet", s.path / f"{stem}.parquet")
                      for stem in RUN_COLUMNS if (s.path / f"{stem}.parquet").is_file()])
            for name, f in files:
                try:
                    con.execute("SELECT max(hash(t)) FROM read_parquet(?) t", [str(f)])
                except duckdb.Error:
                    return name
    finally:
        con.close()
    return None


def failure_line(label: str, sources: list[Source], e: Exception, line: str) -> str:
    """``query LABEL over RUNS: LINE`` (the first three runs), with the damaged file before
    LINE when DuckDB's error is of a page it could not decode (its bare ``Error``, or words of
    damage) and names no file: a run's ios.parquet with flipped bytes said only "don't know
    what type:" or "... the file might be corrupted"."""
    # (a damaged file's bytes in DuckDB's words, "don't know what type: \x0f", shown as such)
    line = printable(line)
    where = ", ".join(s.name for s in sources[:3]) + (f" and {len(sources) - 3} more"
                                                      if len(sources) > 3 else "")
    damage = type(e) is duckdb.Error or any(  # (not a query's own error(): no reading all)
        w in line.lower() for w in ("corrupt", "decompress", "thrift"))
    if damage and ".parquet" not in line:
        bad = _damaged(sources)
        if bad:  # (a trace named by "over" already is not named twice)
            line = f"{'' if bad == where else bad + ': '}{line.rstrip()} (a damaged page)"
    return f"query {label} over {where}: {line}"
