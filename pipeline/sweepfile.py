"""A sweep file (TOML): a base array configuration (a file, or an inline ``[array]`` table), a
base trace and replay options, and axes whose values are substituted into them, read into the
grid of points ``blocklab sweep`` replays (pipeline/sweep.py); and the TOML text of a point's
configuration::

    array = "raid6.toml"             # relative to the sweep file
    trace = "day1.parquet"
    mode = "cross"                   # every combination; "zip": the i-th values together
    [replay]                         # speed, closed_loop, think_us, wrap, drive_ops, repeat,
                                     # max_passes
    wrap = true
    [[axis]]
    key = "group[0].layout"          # a dotted key, with list indices, into the array config
    values = ["raid5", "raid6"]
    [[axis]]
    key = "speed"                    # or a replay option, or "trace"
    values = [1, 2, 4]
    name = "load"                    # optional: the column name (default: the key's last part)


Point ids are the first 10 hex digits of the SHA-256 of the point's axis values (keys sorted),
so they do not depend on the axes' order or on the other points.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import POINT_SCHEMA
from blocklab.traces.store import open_trace

from .model.config import ConfigError, parse_array, read_toml

MODES = ("cross", "zip")
#: Replay options an axis or the [replay] table may set, with their types.
OPTIONS: dict[str, tuple[type, ...]] = {
    "speed": (int, float), "closed_loop": (int,), "think_us": (int, float), "wrap": (bool,),
    "drive_ops": (bool,), "repeat": (str,), "max_passes": (int,)}
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
        return read_toml(path, what)
    except IsADirectoryError:
        raise BlocklabError(f"{path}: is a folder, expected a {what}") from None


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
    from .replay import REPEAT_MODES, pace_error  # (here: reading a sweep file needs no engine)

    kinds = OPTIONS[key]
    ok = isinstance(value, kinds) and (bool not in kinds) == (not isinstance(value, bool))
    if key == "repeat":
        ok = ok and value in REPEAT_MODES
    if key == "max_passes":
        ok = ok and value >= 1
    if ok and key in ("speed", "closed_loop", "think_us"):
        # replay's own bounds, each against the others' defaults (a point's value was taken,
        # and its run failed: `sweep plan` said ok)
        pace = {"speed": 1.0, "closed_loop": 0, "think_us": 0.0, key: value}
        bad = pace_error(pace["speed"], pace["closed_loop"], pace["think_us"])
        if bad:
            label = where if where.endswith(key) else f"{where} ({key})"
            raise BlocklabError(f"{sweep}: {label}: {bad[1]}")
    if not ok:
        want = {"speed": "a number", "think_us": "a number", "closed_loop": "a whole number",
                "wrap": "true or false", "drive_ops": "true or false",
                "repeat": " or ".join(repr(m) for m in REPEAT_MODES),
                "max_passes": "a whole number of at least 1"}[key]
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

    base, cfg_where = _base_array(sp, data)

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
        axes.append(_axis(sp, i, a, axes, base, cfg_where))

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

    points = _points(sp, mode, axes, base, base_trace, options)
    return Sweep(sp, mode, tuple(axes), points, base, base_trace, options)


def _base_array(sp: Path, data: dict[str, Any]) -> tuple[dict[str, Any], Path]:
    """The sweep's base array configuration (a file or an inline table), checked, with its
    drive files made absolute, and the name its errors carry."""
    if "array" not in data:
        raise BlocklabError(f"{sp}: array: missing (a configuration file, or an [array] table)")
    raw = data["array"]
    if isinstance(raw, str):
        apath = (sp.parent / raw).resolve()
        if not apath.exists():  # the sweep file's value is what is wrong: name it, as trace does
            raise BlocklabError(f"{sp}: array: no such array configuration {raw}")
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

    return base, cfg_where


def _axis(sp: Path, i: int, a: dict[str, Any], axes: list[Axis], base: dict[str, Any],
          cfg_where: Path) -> Axis:
    """The sweep file's ``i``-th axis table ``a``, checked against the axes before it and the
    base configuration."""
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
    return ax


def _points(sp: Path, mode: str, axes: list[Axis], base: dict[str, Any], base_trace: str,
            options: dict[str, Any]) -> list[Point]:
    """Every point of the grid (``cross``: every combination; ``zip``: the i-th values
    together): its configuration, trace and options, and the configuration's error if any."""
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
    return points


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
