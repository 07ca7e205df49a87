"""Trace statistics: the trace-* queries of ``queries/`` run by DuckDB over one trace file."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import duckdb

from blocklab import queries
from blocklab.traces.schema import OP_NAMES, flag_names, format_dev
from blocklab.traces.store import open_trace

from .query import Source, fetch


def _connect(path: str | Path) -> duckdb.DuckDBPyConnection:
    from .query import duck

    con = duck(threads=2)
    escaped = str(path).replace("'", "''")
    con.execute(f"CREATE VIEW trace AS SELECT * FROM read_parquet('{escaped}')")
    return con


def _rows(con: duckdb.DuckDBPyConnection, name: str, path: str | Path
          ) -> list[dict[str, Any]]:
    """The rows of the named query ``name``; one line naming it and ``path`` when DuckDB
    cannot read the trace (a damaged page)."""
    cols, rows = fetch(con, queries.load(name), None, name, [_source(path)])
    return [dict(zip(cols, r, strict=True)) for r in rows]


def _source(path: str | Path) -> Source:
    return Source("trace", str(path), Path(path))


def _clean(v: Any) -> Any:
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


def trace_stats(path: str | Path) -> dict[str, Any]:
    """Summary of a trace file as one JSON-ready dict (see README for the keys)."""
    _pf, meta = open_trace(path)
    con = _connect(path)
    summary = {k: _clean(v) for k, v in _rows(con, "trace-summary", path)[0].items()}
    devices = _rows(con, "trace-devices", path)
    sizes = _rows(con, "trace-sizes", path)
    seq = _rows(con, "trace-sequential", path)[0]
    linux = meta.linux_devices
    out: dict[str, Any] = {
        "file": str(path),
        "source_format": meta.source_format,
        **{k: summary[k] for k in ("requests", "reads", "writes", "discards", "flushes", "others")},
        "read_bytes": int(summary["read_bytes"]),
        "write_bytes": int(summary["write_bytes"]),
        "duration_s": summary["duration_s"],
        "read_ratio": summary["read_ratio"],
        "iops": summary["iops"],
        "mb_per_s": summary["mb_per_s"],
        "sequential_fraction": _clean(seq["sequential_fraction"]),
        "size_histogram": {str(r["bucket_bytes"]): r["requests"] for r in sizes},
        "devices": {
            format_dev(int(r["device"]), linux): {
                "requests": r["requests"],
                "reads": r["reads"],
                "writes": r["writes"],
                "read_bytes": int(r["read_bytes"]),
                "write_bytes": int(r["write_bytes"]),
            }
            for r in devices
        },
        "device_count": summary["device_count"],
    }
    if summary["with_latency"]:
        out["latency"] = {
            "requests": summary["with_latency"],
            "mean_ms": summary["latency_mean_ms"],
            "p50_ms": summary["latency_p50_ms"],
            "p99_ms": summary["latency_p99_ms"],
        }
    out["meta"] = {
        "start_utc": meta.start_utc,
        "host": meta.host,
        "sources": meta.sources,
        "counts": meta.counts,
        "blocklab_version": meta.blocklab_version,
    }
    return out


def trace_head(path: str | Path, n: int = 10) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The first ``n`` requests, with op names and devices spelled out."""
    _pf, meta = open_trace(path)
    con = _connect(path)
    cols, got = fetch(con, "SELECT * FROM trace LIMIT ?", [n], "trace head", [_source(path)])
    rows = []
    for r in got:
        d = dict(zip(cols, r, strict=True))
        d["op"] = OP_NAMES[d["op"]] if d["op"] < len(OP_NAMES) else str(d["op"])
        d["device"] = format_dev(int(d["device"]), meta.linux_devices)
        d["flags"] = ",".join(flag_names(int(d["flags"]))) or "-"
        rows.append(tuple(d.values()))
    return cols, rows
