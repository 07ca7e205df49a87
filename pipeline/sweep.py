"""``blocklab sweep``: one replay per point of a grid of configurations, on Dask distributed.

A sweep file (TOML) names a base array configuration (a file, or an inline ``[array]`` table), a
base trace and replay options, and axes whose values are substituted into them::

    array = "raid6.toml"             # relative to the sweep file
    trace = "day1.parquet"
    mode = "cross"                   # every combination; "zip": the i-th values together
    [replay]                         # speed, closed_loop, think_us, wrap, drive_ops
    wrap = true
    [[axis]]
    key = "group[0].layout"          # a dotted key, with list indices, into the array config
    values = ["raid5", "raid6"]
    [[axis]]
    key = "speed"                    # or a replay option, or "trace"
    values = [1, 2, 4]
    name = "load"                    # optional: the column name (default: the key's last part)

Each point is one Dask task: it writes its array configuration to ``OUT/<point>.toml``, replays
into the run folder ``OUT/<point>/`` (``replay`` writes it under a temporary name and renames
it when complete), then writes its headline figures (the ``compare`` query, plus the rebuild
window of ``rebuild-windows`` when the run has failures) as one row of Parquet at
``OUT/summary/<axis>=<value>/.../<point>.parquet`` (hive partitioning; written under a
temporary name and renamed). A point is finished when both exist; a rerun skips finished
points, writes a missing summary from an existing run folder, and retries failed points. A
failed point leaves ``OUT/<point>.error.json`` and the sweep goes on.

Point ids are the first 10 hex digits of the SHA-256 of the point's axis values (keys sorted),
so they do not depend on the axes' order or on the other points.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import itertools
import json
import math
import os
import re
import socket
import threading
import time
import tomllib
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from blocklab.traces.errors import BlocklabError
from blocklab.traces.safety import clean_temporaries, hold_lock
from blocklab.traces.schema import POINT_SCHEMA
from blocklab.traces.store import atomic_output, open_trace

from . import runmeta

# the cluster helpers lived here first; names kept for the callers that import them from here
from .cluster import (  # noqa: F401
    connect,
    dask_setup,
    first_line,
    numba_cache_base,
    warm_cluster,
    warm_kernels,
    warm_on_worker,
)
from .model.config import ConfigError, parse_array

SWEEP_VERSION = 1
MODES = ("cross", "zip")
#: Replay options an axis or the [replay] table may set, with their types.
OPTIONS: dict[str, tuple[type, ...]] = {
    "speed": (int, float), "closed_loop": (int,), "think_us": (int, float), "wrap": (bool,),
    "drive_ops": (bool,)}
OPTION_DEFAULTS: dict[str, Any] = {"speed": 1.0, "closed_loop": 0, "think_us": 0.0,
                                   "wrap": False, "drive_ops": False}
#: Summary columns an axis name must not take.
RESERVED = set(POINT_SCHEMA.names)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEY_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)((?:\[\d+\])*)")


# ---------------------------------------------------------------------------------------------
# the sweep file


@dataclasses.dataclass(frozen=True)
class Axis:
    key: str  # "group[0].layout", "trace", "speed", ...
    name: str  # column name in the summary
    values: tuple[Any, ...]

    @property
    def target(self) -> str:
        """``trace``, ``option`` or ``config``."""
        return "trace" if self.key == "trace" else "option" if self.key in OPTIONS else "config"


@dataclasses.dataclass(frozen=True)
class Point:
    """One configuration of the sweep."""

    id: str
    name: str  # readable: "layout=raid5 load=2"
    values: dict[str, Any]  # axis name -> value as written in the sweep file
    config: dict[str, Any]  # the array configuration (TOML data), paths absolute
    trace: str  # absolute path
    options: dict[str, Any]  # replay options
    config_error: str | None = None  # the array configuration's error, if it has one

    def partition(self, axes: tuple[Axis, ...]) -> str:
        """The point's summary file, relative to the summary folder."""
        parts = [f"{a.name}={quote(value_text(self.values[a.name]), safe='')}" for a in axes]
        return "/".join([*parts, f"{self.id}.parquet"])


@dataclasses.dataclass
class Sweep:
    path: Path
    mode: str
    axes: tuple[Axis, ...]
    points: list[Point]
    base_config: dict[str, Any]
    base_trace: str
    base_options: dict[str, Any]

    def fingerprint(self) -> str:
        """What a sweep output folder must agree on to be resumed (points may be added)."""
        return _sha({"config": self.base_config, "trace": self.base_trace,
                     "options": self.base_options,
                     "axes": [[a.key, a.name] for a in self.axes]})


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
                          ).hexdigest()


def value_text(v: Any) -> str:
    """An axis value as text: strings as they are, the rest as JSON (true, 2.5, [...])."""
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, separators=(",", ":"))


def _short(v: Any) -> str:
    text = value_text(v)
    return Path(text).name if isinstance(v, str) and "/" in text else text


def parse_key(key: str) -> list[str | int]:
    """``group[0].drive`` -> ["group", 0, "drive"]; ValueError if it is not such a path."""
    out: list[str | int] = []
    for part in key.split("."):
        m = _KEY_PART.fullmatch(part)
        if not m:
            raise ValueError(key)
        out.append(m.group(1))
        out += [int(i) for i in re.findall(r"\[(\d+)\]", m.group(2))]
    return out


def _set(data: dict[str, Any], path: list[str | int], value: Any, key: str) -> None:
    """Put ``value`` at ``path`` in ``data``; tables on the way are created, list entries must
    exist. Raises ValueError with the reason."""
    here: Any = data
    for i, step in enumerate(path[:-1]):
        nxt = path[i + 1]
        where = _path_text(path[: i + 1])
        if isinstance(step, int):
            if not isinstance(here, list):
                raise ValueError(f"{_path_text(path[:i])} is not a list")
            if step >= len(here):
                raise ValueError(f"{where}: the base configuration has {len(here)} "
                                 f"{_path_text(path[:i])} entries")
            here = here[step]
        else:
            if not isinstance(here, dict):
                raise ValueError(f"{_path_text(path[:i])} is not a table")
            if step not in here:
                if isinstance(nxt, int):
                    raise ValueError(f"{where}: the base configuration has no {where}")
                here[step] = {}
            here = here[step]
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(here, list) or last >= len(here):
            raise ValueError(f"{key}: the base configuration has no such entry")
        here[last] = value
    else:
        if not isinstance(here, dict):
            raise ValueError(f"{_path_text(path[:-1])} is not a table")
        here[last] = value


def _path_text(path: list[str | int]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def _absolute_drives(obj: Any, folder: Path) -> Any:
    """``obj`` with every ``disksim = PATH`` made absolute against ``folder`` (the point's
    configuration is written elsewhere than the file it came from)."""
    if isinstance(obj, dict):
        return {k: (str((folder / v).resolve()) if k == "disksim" and isinstance(v, str)
                    else _absolute_drives(v, folder)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_absolute_drives(v, folder) for v in obj]
    return obj


def _read_toml(path: Path, what: str) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise BlocklabError(f"{path}: no such {what}") from None
    except IsADirectoryError:
        raise BlocklabError(f"{path}: is a folder, expected a {what}") from None
    except tomllib.TOMLDecodeError as e:
        raise BlocklabError(f"{path}: not valid TOML ({e})") from None
    except UnicodeDecodeError as e:
        raise BlocklabError(f"{path}: byte {e.start}: not UTF-8 text") from None


def _check_trace(sweep: Path, where: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise BlocklabError(f"{sweep}: {where}: expected a trace file name, found {value!r}")
    p = (sweep.parent / value).resolve()
    if not p.is_file():
        raise BlocklabError(f"{sweep}: {where}: no such trace file {value}")
    try:
        open_trace(p)
    except BlocklabError as e:
        raise BlocklabError(f"{sweep}: {where}: {e}") from None
    return str(p)


def _check_option(sweep: Path, where: str, key: str, value: Any) -> Any:
    kinds = OPTIONS[key]
    ok = isinstance(value, kinds) and (bool not in kinds) == (not isinstance(value, bool))
    if not ok:
        want = {"speed": "a number", "think_us": "a number", "closed_loop": "a whole number",
                "wrap": "true or false", "drive_ops": "true or false"}[key]
        raise BlocklabError(f"{sweep}: {where}: {key} must be {want}, found {value!r}")
    return value


def load_sweep(path: str | os.PathLike[str]) -> Sweep:
    """Read and check a sweep file and list its points; every error is one line naming the
    file and the key (``sweep.toml: axis[1].key: ...``)."""
    sp = Path(path)
    data = _read_toml(sp, "sweep file")
    known = {"array", "trace", "mode", "replay", "axis"}
    for k in data:
        if k not in known:
            raise BlocklabError(f"{sp}: {k}: unknown key (known: {', '.join(sorted(known))})")
    mode = data.get("mode", "cross")
    if mode not in MODES:
        raise BlocklabError(f"{sp}: mode: expected \"cross\" or \"zip\", found {mode!r}")

    # the base array configuration: a file or an inline table
    if "array" not in data:
        raise BlocklabError(f"{sp}: array: missing (a configuration file, or an [array] table)")
    raw = data["array"]
    if isinstance(raw, str):
        apath = (sp.parent / raw).resolve()
        base = _read_toml(apath, "array configuration")
        cfg_where = apath
    elif isinstance(raw, dict):
        base = raw
        apath = sp.resolve()
        cfg_where = Path(f"{sp}[array]")
    else:
        raise BlocklabError(f"{sp}: array: expected a file name or an [array] table, "
                            f"found {raw!r}")
    try:
        parse_array(base, cfg_where)
    except ConfigError as e:
        raise BlocklabError(f"{e} (the base configuration must be valid by itself)") from None
    base = _absolute_drives(base, apath.parent)

    # replay options
    rep = data.get("replay", {})
    if not isinstance(rep, dict):
        raise BlocklabError(f"{sp}: replay: expected a [replay] table")
    options = dict(OPTION_DEFAULTS)
    for k, v in rep.items():
        if k not in OPTIONS:
            raise BlocklabError(f"{sp}: replay.{k}: unknown option (known: "
                                f"{', '.join(OPTIONS)})")
        options[k] = _check_option(sp, f"replay.{k}", k, v)

    # axes
    raw_axes = data.get("axis", [])
    if not isinstance(raw_axes, list) or not all(isinstance(a, dict) for a in raw_axes):
        raise BlocklabError(f"{sp}: axis: write axes as [[axis]] tables")
    axes: list[Axis] = []
    for i, a in enumerate(raw_axes):
        w = f"axis[{i}]"
        for k in a:
            if k not in ("key", "values", "name"):
                raise BlocklabError(f"{sp}: {w}.{k}: unknown key (known: key, name, values)")
        key = a.get("key")
        if not isinstance(key, str) or not key:
            raise BlocklabError(f"{sp}: {w}.key: missing: the configuration key, trace or a "
                                "replay option the axis sets")
        try:
            kpath = parse_key(key)
        except ValueError:
            raise BlocklabError(f"{sp}: {w}.key: {key!r} is not a key such as "
                                "group[0].layout") from None
        if "values" not in a:
            raise BlocklabError(f"{sp}: {w}.values: missing")
        values = a["values"]
        if not isinstance(values, list):
            raise BlocklabError(f"{sp}: {w}.values: expected a list, found {values!r}")
        if not values:
            raise BlocklabError(f"{sp}: {w}.values: empty: an axis needs at least one value")
        texts = [value_text(v) for v in values]
        dup = next((t for j, t in enumerate(texts) if t in texts[:j]), None)
        if dup is not None:
            raise BlocklabError(f"{sp}: {w}.values: {dup} appears twice")
        name = a.get("name", kpath[-1] if isinstance(kpath[-1], str) else None)
        if "name" not in a and any(ax.name == name for ax in axes):
            name = re.sub(r"\W+", "_", key).strip("_")
        if not isinstance(name, str) or not _NAME.match(name):
            raise BlocklabError(f"{sp}: {w}.name: expected a column name (letters, digits, _), "
                                f"found {name!r}")
        if name in RESERVED:
            raise BlocklabError(f"{sp}: {w}.name: {name} is a summary column; give the axis "
                                "another name")
        for ax in axes:
            if ax.key == key:
                raise BlocklabError(f"{sp}: {w}.key: {key} is already an axis")
            if ax.name == name:
                raise BlocklabError(f"{sp}: {w}.name: {name} is already an axis's name")
        ax = Axis(key, name, tuple(values))
        if ax.target == "trace":
            values = [_check_trace(sp, f"{w}.values[{j}]", v) for j, v in enumerate(values)]
        elif ax.target == "option":
            for j, v in enumerate(values):
                _check_option(sp, f"{w}.values[{j}]", key, v)
        else:
            _check_config_key(sp, w, key, kpath, base, values[0], cfg_where)
        axes.append(ax)

    if mode == "zip" and axes and len({len(a.values) for a in axes}) > 1:
        lens = ", ".join(f"{a.name} {len(a.values)}" for a in axes)
        raise BlocklabError(f"{sp}: mode = \"zip\" needs axes of one length; values per "
                            f"axis: {lens}")

    has_trace_axis = any(a.target == "trace" for a in axes)
    if "trace" in data:
        base_trace = _check_trace(sp, "trace", data["trace"])
    elif has_trace_axis:
        base_trace = ""
    else:
        raise BlocklabError(f"{sp}: trace: missing (the trace every point replays, unless an "
                            "axis has key = \"trace\")")

    combos: Iterator[tuple[Any, ...]] = (
        zip(*(a.values for a in axes), strict=True) if mode == "zip" and axes
        else itertools.product(*(a.values for a in axes)))
    points: list[Point] = []
    seen: dict[str, str] = {}
    for combo in combos:
        cfg = copy.deepcopy(base)
        trace = base_trace
        opts = dict(options)
        values = {}
        for a, v in zip(axes, combo, strict=True):
            values[a.name] = v
            if a.target == "trace":
                trace = str((sp.parent / v).resolve())
            elif a.target == "option":
                opts[a.key] = v
            else:
                _set(cfg, parse_key(a.key), _absolute_drives(copy.deepcopy(v), sp.parent), a.key)
        pid = _sha({a.key: value_text(v) for a, v in zip(axes, combo, strict=True)})[:10]
        name = " ".join(f"{a.name}={_short(v)}" for a, v in zip(axes, combo, strict=True))
        if pid in seen:
            raise BlocklabError(f"{sp}: the points {seen[pid]!r} and {name!r} are the same")
        seen[pid] = name
        err = None
        try:
            parse_array(cfg, Path(f"{pid}.toml"))
        except ConfigError as e:
            err = str(e)
        points.append(Point(pid, name or "base", values, cfg, trace, opts, err))
    return Sweep(sp, mode, tuple(axes), points, base, base_trace, options)


def _check_config_key(sp: Path, where: str, key: str, kpath: list[str | int],
                      base: dict[str, Any], value: Any, cfg_where: Path) -> None:
    """An axis key must name a key of the array configuration: the base with the axis's first
    value put in must not draw an "unknown key" error (the base itself is valid, and the parser
    checks a table's key names before its values)."""
    trial = copy.deepcopy(base)
    try:
        _set(trial, kpath, value, key)
    except ValueError as e:
        raise BlocklabError(f"{sp}: {where}.key: {e}") from None
    try:
        parse_array(trial, cfg_where)
    except ConfigError as e:
        msg = str(e)
        head = f"{cfg_where}: "
        bad = msg[len(head):].split(": ", 1) if msg.startswith(head) else ["", ""]
        if len(bad) == 2 and bad[1].startswith("unknown key") and \
                (key == bad[0] or key.startswith(bad[0] + ".") or key.startswith(bad[0] + "[")):
            known = bad[1][len("unknown key"):].strip()
            raise BlocklabError(f"{sp}: {where}.key: {key} is not a key of the array "
                                f"configuration {known}".rstrip()) from None


# ---------------------------------------------------------------------------------------------
# TOML text of a point's configuration (tomllib reads TOML; the standard library writes none)


def _toml_str(text: str) -> str:
    """A TOML basic string: quote, backslash and control characters (tab aside) escaped."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif (ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _toml_str(k)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML form for {type(v).__name__}")


def toml_text(data: dict[str, Any]) -> str:
    """TOML text that ``tomllib.loads`` reads back as ``data`` (top-level keys, one per line,
    tables and lists of tables written inline)."""
    return "".join(f"{_toml_key(k)} = {_toml_value(v)}\n" for k, v in data.items())


# ---------------------------------------------------------------------------------------------
# one point (runs on a Dask worker)


@dataclasses.dataclass(frozen=True)
class Task:
    """What a worker needs for one point (plain data: it travels to the worker)."""

    point: str
    out: str  # the sweep's output folder (absolute)
    config_toml: str
    trace: str
    options: dict[str, Any]
    summary: str  # path of the summary file, relative to OUT/summary
    name: str
    values_json: str
    replay: bool = True  # False: the run folder exists; write the summary only
    topic: str = ""  # Dask event topic for "started" messages


def _summary_row(task: Task, run: Path) -> pa.Table:
    from .query import run_query

    meta = runmeta.read(run)
    cmp = run_query([str(run)], "compare").table
    col = [c for c in cmp.column_names if c != "metric"][0]
    metrics = dict(zip(cmp.column("metric").to_pylist(), cmp.column(col).to_pylist(),
                       strict=True))
    window = done = None
    if (run / "events.parquet").is_file():
        rw = run_query([str(run)], "rebuild-windows").table
        if rw.num_rows:
            ws = [w for w in rw.column("window_s").to_pylist() if w is not None]
            window = max(ws) if ws else None
            done = all(bool(d) for d in rw.column("rebuild_done").to_pylist())
    row: dict[str, Any] = {"run": task.point, "point_name": task.name,
                           "axis_values": task.values_json}
    for f in POINT_SCHEMA:
        if f.name in metrics:
            v = metrics[f.name]
            row[f.name] = None if v is None or (isinstance(v, float) and not math.isfinite(v)) \
                else (int(round(v)) if pa.types.is_integer(f.type) else float(v))
    row.update(rebuild_window_s=window, rebuild_done=done,
               replay_s=float(meta.elapsed_s or 0.0), host=socket.gethostname())
    return pa.Table.from_pylist([row], schema=POINT_SCHEMA)


def run_point(task: Task) -> dict[str, Any]:
    """Replay one point and write its summary; never raises for the point's own failure (the
    result says what went wrong), so one bad point cannot stop the sweep."""
    if task.topic:
        with contextlib.suppress(ValueError, ImportError):
            from distributed import get_worker

            get_worker().log_event(task.topic, {"point": task.point})
    t0 = time.perf_counter()
    out = Path(task.out)
    try:
        run = out / task.point
        if task.replay:
            from .replay import replay

            cfg = out / f"{task.point}.toml"
            with atomic_output(cfg) as tmp:
                tmp.write_text(task.config_toml)
            replay(task.trace, cfg, run, **task.options)
        dest = out / "summary" / task.summary
        dest.parent.mkdir(parents=True, exist_ok=True)
        table = _summary_row(task, run)
        with atomic_output(dest) as tmp:
            pq.write_table(table, tmp)
        return {"point": task.point, "ok": True, "seconds": time.perf_counter() - t0}
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0] or type(e).__name__
        return {"point": task.point, "ok": False, "error": first, "type": type(e).__name__,
                "traceback": traceback.format_exc(), "host": socket.gethostname(),
                "seconds": time.perf_counter() - t0}


# ---------------------------------------------------------------------------------------------
# the output folder


def _error_path(out: Path, point: str) -> Path:
    return out / f"{point}.error.json"


@dataclasses.dataclass
class PointState:
    point: Point
    state: str  # "finished", "summarize", "run"


def survey(sweep: Sweep, out: Path) -> list[PointState]:
    """Which points are finished, need only their summary, or need a replay."""
    states = []
    for p in sweep.points:
        run_done = (out / p.id / "meta.json").is_file()
        summ = (out / "summary" / p.partition(sweep.axes)).is_file()
        states.append(PointState(p, "finished" if run_done and summ else
                                 "summarize" if run_done else "run"))
    return states


def _check_out(sweep: Sweep, out: Path) -> None:
    """An existing output folder must hold this sweep (the same base and axes)."""
    if out.exists() and not out.is_dir():
        raise BlocklabError(f"-o {out}: exists and is not a folder")
    f = out / "sweep.json"
    if not f.is_file():
        if out.is_dir() and any(out.iterdir()):
            raise BlocklabError(f"-o {out}: the folder is not empty and holds no sweep "
                                "(sweep.json); give a new or empty folder")
        return
    try:
        old = json.loads(f.read_text())
    except json.JSONDecodeError as e:
        raise BlocklabError(f"{f}: line {e.lineno}: not JSON ({e.msg})") from None
    if old.get("fingerprint") != sweep.fingerprint():
        raise BlocklabError(f"-o {out}: holds a sweep of another base configuration, trace, "
                            "options or axes (sweep.json); give a new folder (adding values "
                            "to an axis is fine)")


def _lock(out: Path) -> contextlib.AbstractContextManager[None]:
    """The output folder's lock (``.sweep.lock`` inside it, kept: the folder is the output),
    held for the whole run."""
    return hold_lock(out / ".sweep.lock", f"-o {out}: another blocklab sweep is writing into "
                     "it", remove=False)


def _clean_temporaries(out: Path) -> list[str]:
    """Remove what an interrupted run left: replay's and the summaries' temporary names
    (``.NAME.tmp-PID``). Only called while holding the folder's lock."""
    return clean_temporaries(out)


def _write_json(path: Path, obj: Any) -> None:
    with atomic_output(path, mode=0o644) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, default=str) + "\n")


def _record_sweep(sweep: Sweep, out: Path) -> None:
    """sweep.json: the base, the axes and every point this folder has been asked for."""
    f = out / "sweep.json"
    old = json.loads(f.read_text()) if f.is_file() else {}
    points = dict(old.get("points") or {})
    for p in sweep.points:
        points[p.id] = {"name": p.name, "values": p.values}
    _write_json(f, {
        "sweep_version": SWEEP_VERSION, "fingerprint": sweep.fingerprint(),
        "sweep_file": str(sweep.path.resolve()), "mode": sweep.mode,
        "axes": [{"key": a.key, "name": a.name, "values": list(a.values)} for a in sweep.axes],
        "base": {"config": sweep.base_config, "trace": sweep.base_trace,
                 "options": sweep.base_options},
        "points": points,
    })


# ---------------------------------------------------------------------------------------------
# running a sweep


@dataclasses.dataclass
class Status:
    """Progress of a sweep run (for the progress bar)."""

    total: int  # points to run this time
    done: int = 0
    failed: int = 0
    running: int = 0
    skipped: int = 0  # finished earlier


@dataclasses.dataclass
class SweepResult:
    out: str
    points: int
    skipped: int
    done: int
    failed: list[dict[str, Any]]
    workers: int
    scheduler: str
    warm_s: float
    elapsed_s: float  # the whole run: checks, cluster start, warm-up, points
    points_s: float  # from the first point submitted to the last one done
    removed_temporaries: list[str]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class SweepInterrupted(BlocklabError):
    """Ctrl-C: the points finished so far are kept; rerunning finishes the rest."""


def run_sweep(path: str | os.PathLike[str], output: str | os.PathLike[str],
              scheduler: str | None = None, workers: int | None = None,
              timeout: float = 10.0, progress: Callable[[Status], None] | None = None,
              ) -> SweepResult:
    """Run every unfinished point of the sweep file ``path`` into the folder ``output``."""
    t0 = time.perf_counter()
    if workers is not None and workers < 1:
        raise BlocklabError(f"--workers must be at least 1, found {workers}")
    sweep = load_sweep(path)
    out = Path(output).resolve()
    _check_out(sweep, out)
    states = survey(sweep, out) if out.is_dir() else [PointState(p, "run") for p in
                                                        sweep.points]
    todo = [s for s in states if s.state != "finished"]
    status = Status(total=len(todo), skipped=len(states) - len(todo))
    if not todo:
        return SweepResult(str(out), len(states), status.skipped, 0, [], 0, scheduler or "",
                           0.0, time.perf_counter() - t0, 0.0, [])

    client, cluster = connect(scheduler, workers, timeout)
    interrupted = False
    try:
        # Compile (or load) the kernels here first: the workers then load them from the cache.
        warm_s = warm_kernels()
        out.mkdir(parents=True, exist_ok=True)
        with _lock(out):
            removed = _clean_temporaries(out)
            # summaries whose run folder is gone would show a point that is not there
            for s in states:
                if s.state == "run":
                    (out / "summary" / s.point.partition(sweep.axes)).unlink(missing_ok=True)
            _record_sweep(sweep, out)
            nworkers = warm_cluster(client, local=cluster is not None)
            t_points = time.perf_counter()
            failed = _submit(client, sweep, out, todo, status, progress)
            points_s = time.perf_counter() - t_points
            # every task has ended: what is left under a temporary name is a dead worker's
            removed += _clean_temporaries(out)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    if interrupted:
        # counted on disk: a point may have finished while the workers were stopping
        left = sum(s.state != "finished" for s in survey(sweep, out))
        raise SweepInterrupted(
            f"interrupted: {len(states) - left} of {len(states)} points finished in {out}; "
            "run the same command again to finish the rest")
    return SweepResult(str(out), len(states), status.skipped, status.done, failed, nworkers,
                       scheduler or "local", warm_s, time.perf_counter() - t0, points_s, removed)


def _submit(client: Any, sweep: Sweep, out: Path, todo: list[PointState], status: Status,
            progress: Callable[[Status], None] | None) -> list[dict[str, Any]]:
    from distributed import as_completed

    topic = f"blocklab-sweep-{uuid.uuid4().hex[:12]}"
    lock = threading.Lock()
    started: set[str] = set()
    finished: set[str] = set()

    def report() -> None:
        if progress is not None:
            progress(dataclasses.replace(status))

    def on_start(event: tuple[float, dict[str, Any]]) -> None:
        pid = str(event[1].get("point"))
        with lock:
            if pid in finished or pid in started:
                return
            started.add(pid)
            status.running = len(started)
        report()

    client.subscribe_topic(topic, on_start)
    futures = {}
    for s in todo:
        p = s.point
        task = Task(point=p.id, out=str(out), config_toml=toml_text(p.config), trace=p.trace,
                    options=p.options, summary=p.partition(sweep.axes), name=p.name,
                    values_json=json.dumps(p.values, sort_keys=True),
                    replay=s.state == "run", topic=topic)
        fut = client.submit(run_point, task, key=f"blocklab-point-{p.id}-{topic[-12:]}",
                            pure=False)
        futures[fut] = p
    report()
    failed: list[dict[str, Any]] = []
    try:
        for fut in as_completed(list(futures), loop=client.loop):
            p = futures[fut]
            try:
                r = fut.result()
            except Exception as e:  # the worker died (KilledWorker) or the task was lost
                r = {"point": p.id, "ok": False, "error": first_line(e),
                     "type": type(e).__name__, "traceback": "", "host": ""}
            with lock:
                finished.add(p.id)
                started.discard(p.id)
                status.running = len(started)
                if r["ok"]:
                    status.done += 1
                else:
                    status.failed += 1
            if r["ok"]:
                _error_path(out, p.id).unlink(missing_ok=True)
            else:
                rec = {"point": p.id, "name": p.name, "values": p.values,
                       "error": f"point {p.id} ({p.name}): {r['error']}", "type": r["type"],
                       "host": r.get("host", ""), "traceback": r.get("traceback", ""),
                       "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
                _write_json(_error_path(out, p.id), rec)
                failed.append({k: rec[k] for k in ("point", "name", "error")})
            report()
    except BaseException:
        client.cancel(list(futures))
        raise
    finally:
        with contextlib.suppress(Exception):
            client.unsubscribe_topic(topic)
    return failed


# ---------------------------------------------------------------------------------------------
# reading a sweep's output back (report, query)


def is_sweep(folder: str | os.PathLike[str]) -> bool:
    return (Path(folder) / "sweep.json").is_file()


def read_points(folder: str | os.PathLike[str]) -> tuple[dict[str, Any], pa.Table]:
    """sweep.json and the summary rows of a sweep output folder (axes typed as in the sweep
    file: numbers stay numbers), read with DuckDB's hive partitioning."""
    import duckdb

    root = Path(folder)
    try:
        info = json.loads((root / "sweep.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise BlocklabError(f"{root}/sweep.json: {first_line(e)}") from None
    files = sorted((root / "summary").rglob("*.parquet")) if (root / "summary").is_dir() else []
    if not files:
        return info, POINT_SCHEMA.empty_table()
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        glob = str(root / "summary" / "**" / "*.parquet").replace("'", "''")
        rel = con.sql(f"SELECT * FROM read_parquet('{glob}', hive_partitioning = true, "
                      "union_by_name = true) ORDER BY run")
        fetch = getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table
        table = fetch()
    finally:
        con.close()
    # hive partition values are text; the exact values are in axis_values
    vals = [json.loads(v) for v in table.column("axis_values").to_pylist()]
    for a in info.get("axes", []):
        name = a["name"]
        if name in table.column_names:
            col = [v.get(name) for v in vals]
            i = table.column_names.index(name)
            kinds = {type(x) for x in col if x is not None}
            if kinds == {int, float}:
                arr = pa.array([None if x is None else float(x) for x in col], pa.float64())
            elif len(kinds) == 1 and kinds <= {int, float, str, bool}:
                arr = pa.array(col)
            else:
                arr = pa.array([None if x is None else value_text(x) for x in col])
            table = table.set_column(i, name, arr)
    return info, table
