"""``blocklab trace iostat``: what ``iostat -x`` would have shown for a trace or a replay.

The figures are the named queries ``iostat`` and ``idle-times`` (``queries/*.sql``) over the
``device_ios`` view (``pipeline/query.py``): a trace's requests per device, or a run folder's
host requests (device ``host``) and drive operations (``drive N``, with ``replay
--drive-ops``). See those queries' headers, and docs/iostat.md, for the definitions (sysstat's
iostat over the kernel's /proc/diskstats counters).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import format_dev, parse_dev

from .query import (
    QueryResult,
    Source,
    _clean,
    clean_rows,
    connect,
    fetch,
    find_sources,
    named,
    named_batches,
)

#: Duration suffixes --interval accepts, in seconds.
_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "m": 60.0,
          "min": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zµ]*)\s*$")


def parse_interval(text: str, option: str = "--interval") -> float:
    """A duration such as ``1s``, ``500ms``, ``100us``, ``2`` (seconds) or ``1m``, in seconds.

    Raises BlocklabError naming ``option`` for text that is not a duration above 0.
    """
    m = _DURATION.match(text)
    if m and m.group(2) in _UNITS:
        value = float(m.group(1)) * _UNITS[m.group(2)]
        if value >= 1e-9:
            return value
        raise BlocklabError(f"{option} {text}: expected a duration above 0 (e.g. 1s, 500ms)")
    raise BlocklabError(f"{option} {text}: expected a duration such as 1s, 500ms, 100us or 7d "
                        "(units ns, us, ms, s, m or min, h, d; a number alone is seconds)")


@dataclasses.dataclass
class IostatResult:
    """iostat rows (one per run, interval and device) and idle-period rows (per device)."""

    path: str
    interval_s: float
    device: str | None
    sources: list[dict[str, str]]
    rows: list[dict[str, Any]]
    idle: list[dict[str, Any]]
    notes: list[str]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _devices(con: Any, sources: list[Source]) -> list[str]:
    _cols, rows = fetch(con, "SELECT device FROM device_ios GROUP BY device ORDER BY "
                        "min(devno), device", None, "iostat", sources)
    return [r[0] for r in rows]


def _device_name(text: str, sources: list[Source]) -> str:
    """``--device`` as the device column writes it: ``8,0`` for a Linux trace (given as
    8:0, 8,0 or a dev_t number), the number otherwise; ``host``, ``drive N`` or ``N`` for a
    run."""
    t = text.strip()
    if t.lower() == "host":
        return "host"
    if t.lower().startswith("drive"):
        return "drive " + t[5:].strip()
    if sources and all(s.kind == "run" for s in sources):
        return f"drive {t}"
    try:
        dev = parse_dev(t)
    except ValueError as e:
        raise BlocklabError(f"--device {text}: {e}, host or drive N") from None
    linux = any(s.kind == "trace" and s.meta.get("linux_devices") for s in sources)
    return format_dev(dev, linux)


#: iostat rows (intervals x devices) a command may ask for, at most: --interval 1ns over a
#: trace of 2 s asked for 2e9 a device, and the query's temporary files filled the disk. A
#: month at 1 s is 2.6 M rows a device.
MAX_ROWS = 100_000_000


def _check_rows(con: Any, interval_s: float, sources: list[Source]) -> None:
    """Refuse an interval that makes more than ``MAX_ROWS`` rows: a row per interval from 0
    to each run's last completion, for each of its devices (one scan of the requests)."""
    iv = max(round(interval_s * 1e9), 1)
    rows = fetch(
        con, "SELECT coalesce(sum((mc // ? + 1) * nd), 0) FROM (SELECT run, max(complete_ns) "
        "AS mc, count(DISTINCT device) AS nd FROM device_ios WHERE complete_ns IS NOT NULL "
        "AND complete_ns >= arrival_ns GROUP BY run)", [iv], "iostat", sources)[1][0][0]
    if rows > MAX_ROWS:
        raise BlocklabError(f"--interval {interval_s:g} s: {int(rows):,} rows (an interval "
                            f"from 0 to the last completion, for each device), more than "
                            f"{MAX_ROWS:,}; give a longer interval")


def iostat(path: str | Path, interval_s: float = 1.0, device: str | None = None
           ) -> IostatResult:
    """iostat -x figures per device and interval, and each device's idle periods, every row
    in memory (``open_iostat`` reads the rows as a stream)."""
    with open_iostat(path, interval_s, device) as (r, batches):
        r.rows = [row for b in batches for row in clean_rows(b)]
    return r


@contextlib.contextmanager
def open_iostat(path: str | Path, interval_s: float = 1.0, device: str | None = None
                ) -> Iterator[tuple[IostatResult, Iterator[pa.RecordBatch]]]:
    """iostat -x figures per device and interval, and each device's idle periods: (the result
    without its rows, the rows as record batches, read while the context is open). There is
    a row per interval and device, as many as a run's duration holds intervals (a month at
    1 s: 2.6 M a device), so they are read as DuckDB gives them, in memory that does not grow
    with them; the idle periods are a row per device.

    Parameters
    ----------
    path
        A trace file, a run folder, or a folder holding run folders.
    interval_s
        Interval length in seconds (at least 1 microsecond).
    device
        Only this device (``8:0`` / ``8,0`` for a Linux trace; ``host`` or a drive number for
        a run); None for every device.

    Raises BlocklabError (one line) for an interval under 1 us or one that makes more than
    ``MAX_ROWS`` rows, an input that is neither a trace nor a run folder, a trace with no
    completion times, or an unknown device.
    """
    if not interval_s >= 1e-6:  # (as the query: a finer grid is no iostat)
        raise BlocklabError(f"--interval {interval_s:g}: expected a duration of at least 1us")
    sources = find_sources([path])
    notes: list[str] = []
    con = connect(sources)
    try:
        for s in sources:
            if s.kind != "trace":
                if not (s.path / "drive_ops.parquet").is_file():
                    notes.append(f"{s.name}: no drive_ops.parquet, so only the host volume "
                                 "(replay with --drive-ops for one row per drive)")
                continue
            done = fetch(con, "SELECT count(*) FILTER (WHERE complete_ns IS NOT NULL), "
                         "count(*) FROM device_ios WHERE run = ?", [s.name], "iostat",
                         sources)[1][0]
            if done[0] == 0:
                raise BlocklabError(
                    f"{s.path}: no completion times (its {done[1]:,} requests have neither "
                    "complete_ns nor latency_ns): iostat needs when each request completed")
            if done[0] < done[1]:
                notes.append(f"{s.name}: {done[1] - done[0]:,} of {done[1]:,} requests never "
                             "completed in the trace and are left out")
        _check_rows(con, interval_s, sources)
        name = None
        if device is not None:
            name = _device_name(device, sources)
            have = _devices(con, sources)
            if name not in have:
                shown = ", ".join(have[:12]) + (" ..." if len(have) > 12 else "")
                raise BlocklabError(f"--device {device}: no such device in {path} "
                                    f"(devices: {shown})")
        idle = QueryResult("idle-times", named(con, "idle-times", sources,
                                               {"device": name or ""}), sources).rows()
        params = {"interval_s": repr(float(interval_s)), "device": name or ""}
        _schema, batches = named_batches(con, "iostat", sources, params)
        yield IostatResult(str(path), float(interval_s), name,
                           [{"name": s.name, "kind": s.kind, "path": str(s.path)}
                            for s in sources],
                           [], [{k: _clean(v) for k, v in r.items()} for r in idle],
                           notes), batches
    finally:
        con.close()
