"""A run folder's metadata, ``meta.json``, as one typed record: the replays write it with
``write`` and every reader gets it back through ``read``, checked.

The file's keys, in the order written (``docs/query.md`` describes them):

- ``blocklab_version``, ``run_schema_version`` (traces/schema.py RUN_SCHEMA_VERSION: a reader
  refuses a run folder of another version);
- ``trace`` (path, sha256) and ``array`` (path, sha256, and ``config``: the parsed array
  configuration, ``dataclasses.asdict`` of pipeline/model/config.py's ArrayConfig);
- ``options`` (speed, closed_loop, think_us, wrap, closed), ``counts`` (requests,
  skipped_not_read_write, drives, drive_ops, passes), ``cache_at_end`` (lines, dirty_lines,
  line_bytes), ``failures`` (drive, at_s: pipeline/model/config.py's Failure), ``tasks``
  (task, kind, group, drive, pieces, units, unit_bytes), ``interval_ns`` (of
  drive_busy.parquet), ``drives`` (drive, group, role, model), ``elapsed_s``,
  ``requests_per_s``;
- ``parallel`` (a parallel replay only: pipeline/parallel.py says what it holds);
- ``repeat`` (a repeated replay only: until, max_passes, passes, rows_per_pass,
  limit_reached).

Only ``run_schema_version`` must be present: run folders written by hand (tests, bench) carry
a few keys, and a reader takes what is there. A key that is present must have its type, and an
object in it all of its keys; anything else is a one-line error naming the run and the key.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import RUN_SCHEMA_VERSION

from .model import config as MC
from .model.config import Failure

#: The file's name in a run folder.
META_FILE = "meta.json"


@dataclasses.dataclass(frozen=True)
class TraceRef:
    """The trace replayed: its path as given and the sha256 of its bytes (hex)."""

    path: str
    sha256: str


@dataclasses.dataclass(frozen=True)
class ArrayRef:
    """The array configuration: its path as given, the sha256 of its bytes (hex; absent in
    folders written by hand) and the configuration parsed (``dataclasses.asdict``)."""

    path: str
    sha256: str | None = None
    config: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """The replay's options: ``speed`` divides arrival times, ``closed_loop`` requests
    outstanding per stream (0: open loop), ``think_us`` microseconds between a completion and
    the next issue, ``wrap`` folds addresses beyond the array, ``closed`` whether the run was
    closed loop."""

    speed: float
    closed_loop: int
    think_us: float
    wrap: bool
    closed: bool


@dataclasses.dataclass(frozen=True)
class Counts:
    """Requests replayed (every pass's), trace rows skipped (neither read nor write, in one
    pass of the trace), drives in the array, drive operations, passes of the trace run (1
    unless repeated); only ``requests`` in folders written by hand."""

    requests: int
    skipped_not_read_write: int | None = None
    drives: int | None = None
    drive_ops: int | None = None
    passes: int | None = None


@dataclasses.dataclass(frozen=True)
class Repeat:
    """A repeated replay (``replay --repeat-until-tasks-end``): the mode, the passes allowed
    and run, the trace's rows (pass k's requests are ``row + k x rows_per_pass``) and whether
    ``max_passes`` stopped the repetition while background tasks were still under way."""

    until: str
    max_passes: int
    passes: int
    rows_per_pass: int
    limit_reached: bool


@dataclasses.dataclass(frozen=True)
class CacheAtEnd:
    """The controller cache at the end: its lines, those dirty (not yet destaged), bytes a
    line."""

    lines: int
    dirty_lines: int
    line_bytes: int


@dataclasses.dataclass(frozen=True)
class TaskRef:
    """A background task (rebuild, init, rebalance): its number, kind, group and drive, the
    pieces and units it covers and the bytes of a unit."""

    task: int
    kind: str
    group: str
    drive: int
    pieces: int
    units: int
    unit_bytes: int


@dataclasses.dataclass(frozen=True)
class DriveRef:
    """One drive of the array: number, group, role (member, spare...) and model name."""

    drive: int
    group: str
    role: str
    model: str


@dataclasses.dataclass(frozen=True)
class RunMeta:
    """meta.json of a run folder (see the module docstring for each key)."""

    run_schema_version: int
    blocklab_version: str | None = None
    trace: TraceRef | None = None
    array: ArrayRef | None = None
    options: RunOptions | None = None
    counts: Counts | None = None
    cache_at_end: CacheAtEnd | None = None
    failures: tuple[Failure, ...] = ()
    tasks: tuple[TaskRef, ...] = ()
    interval_ns: int | None = None
    drives: tuple[DriveRef, ...] = ()
    elapsed_s: float | None = None
    requests_per_s: float | None = None
    parallel: dict[str, Any] | None = None
    repeat: Repeat | None = None

    def to_json(self) -> dict[str, Any]:
        """The object meta.json holds, its keys in the order the replays have always written
        them (``parallel`` and ``repeat`` only when set)."""
        d: dict[str, Any] = {
            "blocklab_version": self.blocklab_version,
            "run_schema_version": self.run_schema_version,
            "trace": _plain(self.trace),
            "array": _plain(self.array),
            "options": _plain(self.options),
            "counts": _plain(self.counts),
            "cache_at_end": _plain(self.cache_at_end),
            "failures": [_plain(f) for f in self.failures],
            "tasks": [_plain(t) for t in self.tasks],
            "interval_ns": self.interval_ns,
            "drives": [_plain(d) for d in self.drives],
            "elapsed_s": self.elapsed_s,
            "requests_per_s": self.requests_per_s,
        }
        if self.parallel is not None:
            d["parallel"] = self.parallel
        if self.repeat is not None:
            d["repeat"] = _plain(self.repeat)
        return d


def _plain(x: Any) -> Any:
    return None if x is None else dataclasses.asdict(x)


def write(folder: Path, meta: RunMeta) -> Path:
    """Write ``folder``/meta.json (indented JSON); returns its path. The folder is the run's
    temporary one (traces/store.py AtomicFolder), so no half-written file is ever seen."""
    path = Path(folder) / META_FILE
    path.write_text(json.dumps(meta.to_json(), indent=2))
    return path


def read(folder: Path, name: str | None = None) -> RunMeta:
    """The record of the run folder ``folder``; errors name the run as ``name`` (default: the
    folder's path)."""
    return read_json(folder, name)[0]


def json_object(path: Path, where: str) -> dict[str, Any]:
    """The JSON object ``path`` holds (a run's meta.json, a sweep folder's sweep.json). Bytes
    that are not UTF-8 and JSON that is not an object are one line starting ``where``; a
    missing file and bad JSON are left to the caller, which words them its own way."""
    try:
        raw = json.loads(path.read_text())
    except UnicodeDecodeError as e:  # JSON is UTF-8 text: a damaged byte, named by its offset
        raise BlocklabError(f"{where}: byte {e.start}: not UTF-8 text, so not JSON") from None
    if not isinstance(raw, dict):
        raise BlocklabError(f"{where}: expected an object")
    return raw


def read_json(folder: Path, name: str | None = None) -> tuple[RunMeta, dict[str, Any]]:
    """``read``, and the object as the file holds it (the ``runs`` view keeps it as text)."""
    name = str(folder) if name is None else name
    where = f"run {name}: {META_FILE}"
    try:
        raw = json_object(Path(folder) / META_FILE, where)
    except FileNotFoundError:
        raise BlocklabError(f"{where}: no such file") from None
    except json.JSONDecodeError as e:
        raise BlocklabError(f"{where}: line {e.lineno}: not JSON ({e.msg})") from None
    version = raw.get("run_schema_version")
    if version != RUN_SCHEMA_VERSION:
        raise BlocklabError(
            f"{where}: run schema version {version} (written by blocklab "
            f"{raw.get('blocklab_version', '?')}); this blocklab reads version "
            f"{RUN_SCHEMA_VERSION}: replay the trace again")
    return _from_json(raw, where), raw


# ---------------------------------------------------------------------------------------------
# checking what was read

_NUMBER = (int, float)


def _check(where: str, key: str, value: Any, types: type | tuple[type, ...],
           what: str) -> Any:
    # bool is an int to Python, not to a reader of meta.json
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        value_ok = False
    else:
        value_ok = isinstance(value, types)
    if not value_ok:
        raise BlocklabError(f"{where}: {key}: expected {what}, found {json.dumps(value)}")
    return value


def _opt(raw: Mapping[str, Any], where: str, key: str, types: type | tuple[type, ...],
         what: str) -> Any:
    v = raw.get(key)
    return None if v is None else _check(where, key, v, types, what)


def _record(cls: type, raw: Any, where: str, key: str) -> Any:
    """An instance of the dataclass ``cls`` from the object ``raw``: its required fields
    present, each of its type."""
    _check(where, key, raw, dict, "an object")
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        sub = f"{key}.{f.name}"
        if f.name not in raw or raw[f.name] is None:
            if f.default is dataclasses.MISSING:
                raise BlocklabError(f"{where}: {sub}: missing")
            continue
        kind = _FIELD_TYPES[f.type if isinstance(f.type, str) else f.type.__name__]
        kw[f.name] = _check(where, sub, raw[f.name], *kind)
    return cls(**kw)


_FIELD_TYPES: dict[str, tuple[type | tuple[type, ...], str]] = {
    "str": (str, "a string"),
    "str | None": (str, "a string"),
    "int": (int, "an integer"),
    "int | None": (int, "an integer"),
    "float": (_NUMBER, "a number"),
    "float | None": (_NUMBER, "a number"),
    "bool": (bool, "true or false"),
    "dict[str, Any] | None": (dict, "an object"),
}


def _records(cls: type, raw: Mapping[str, Any], where: str, key: str) -> tuple[Any, ...]:
    v = raw.get(key)
    if v is None:
        return ()
    _check(where, key, v, list, "a list")
    return tuple(_record(cls, x, where, f"{key}[{i}]") for i, x in enumerate(v))


def _from_json(raw: Mapping[str, Any], where: str) -> RunMeta:
    def one(cls: type, key: str) -> Any:
        return None if raw.get(key) is None else _record(cls, raw[key], where, key)

    return RunMeta(
        run_schema_version=raw["run_schema_version"],
        blocklab_version=_opt(raw, where, "blocklab_version", str, "a string"),
        trace=one(TraceRef, "trace"),
        array=one(ArrayRef, "array"),
        options=one(RunOptions, "options"),
        counts=one(Counts, "counts"),
        cache_at_end=one(CacheAtEnd, "cache_at_end"),
        failures=_records(Failure, raw, where, "failures"),
        tasks=_records(TaskRef, raw, where, "tasks"),
        interval_ns=_opt(raw, where, "interval_ns", int, "an integer"),
        drives=_records(DriveRef, raw, where, "drives"),
        elapsed_s=_opt(raw, where, "elapsed_s", _NUMBER, "a number"),
        requests_per_s=_opt(raw, where, "requests_per_s", _NUMBER, "a number"),
        parallel=_opt(raw, where, "parallel", dict, "an object"),
        repeat=one(Repeat, "repeat"),
    )


def array_config(meta: RunMeta | None, name: str) -> MC.ArrayConfig:
    """The array configuration the run recorded (``array.config``, ``dataclasses.asdict`` of
    an ArrayConfig) as that ArrayConfig again; a one-line error naming the run when it is
    missing or not a configuration this blocklab reads."""
    d: Any = meta.array.config if meta is not None and meta.array is not None else None
    try:
        groups = []
        for g in d["groups"]:
            g = dict(g)
            drv = dict(g.pop("drive"))
            drv["overrides"] = tuple(tuple(x) for x in drv.get("overrides") or ())
            groups.append(MC.GroupConfig(**g, drive=MC.DriveRef(**drv)))
        vol = d.get("volume")
        volume = (MC.VolumeConfig(int(vol["stripe_unit_bytes"]), tuple(vol["luns"]))
                  if vol else None)
        return MC.ArrayConfig(
            source=str(d.get("source", name)), groups=tuple(groups),
            controller=MC.ControllerConfig(**(d.get("controller") or {})), volume=volume,
            failures=tuple(MC.Failure(**f) for f in d.get("failures") or ()),
            rebuild=MC.RebuildPolicy(**(d.get("rebuild") or {})),
            inits=tuple(MC.Init(**x) for x in d.get("inits") or ()),
            replacements=tuple(MC.Replacement(**r) for r in d.get("replacements") or ()))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BlocklabError(f"run {name}: {META_FILE}: array.config is not a configuration "
                            f"this blocklab reads ({type(e).__name__}: {e})") from None
