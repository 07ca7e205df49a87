"""The inputs of ``blocklab risk`` (pipeline/risk.py): the arrays that its RUN arguments name,
each with its rebuild windows per group and the bytes one rebuild reads, from a run folder
(its ``meta.json``, the ``rebuild-windows`` query, its drive operations or events) or from an
array configuration with ``--window-s``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import OPK_REBUILD_READ, SECTOR_BYTES

from . import query as Q
from . import runmeta as RM
from .model.array import ArrayModel, build_array
from .model.config import DDP_WIDTH, ArrayConfig, ConfigError, GroupConfig, load_array


@dataclasses.dataclass
class Input:
    """One array to assess: its name, its model and its windows per group (seconds)."""

    name: str
    arr: ArrayModel
    windows_s: dict[str, float]
    window_source: str  # "measured (longest)", "--window-s"
    measured: list[dict[str, Any]]  # the run's failures with their windows
    read_bytes: dict[str, float] = dataclasses.field(default_factory=dict)  # per rebuild
    read_source: str = ""


def _measured(src: Q.Source) -> list[dict[str, Any]]:
    """The run's failures of member drives with their windows (``rebuild-windows``)."""
    res = Q.run_query([], "rebuild-windows", sources=[src])
    roles = {d.drive: d.role for d in src.run.drives} if src.run is not None else {}
    return [r for r in res.rows() if roles.get(int(r["drive"])) != "spare"]


def _windows(name: str, arr: ArrayModel, rows: list[dict[str, Any]], events: bool,
             window_s: float | None) -> tuple[dict[str, float], str]:
    groups = [g.name for g in arr.cfg.groups]
    if window_s is not None:
        return {g: window_s for g in groups}, "--window-s"
    if not events:
        raise BlocklabError(f"{name}/events.parquet: no such file: the run had no drive "
                            "failure, so no rebuild window was measured (replay with --fail "
                            "DRIVE@SECONDS, or give --window-s)")
    if not rows:
        raise BlocklabError(f"{name}: no failure of a member drive in the run, so no rebuild "
                            "window was measured (replay with --fail DRIVE@SECONDS, or give "
                            "--window-s)")
    measured: dict[str, float] = {}
    for r in rows:
        if not r["rebuild_done"]:
            raise BlocklabError(
                f"{name}: the rebuild of drive {r['drive']} ({r['group']}, failed at "
                f"{r['failure_s']:g} s) did not end within the run (no hot spare, a pool out "
                "of preservation capacity, or it stopped: a later failure lost data, or the "
                "spare it wrote onto failed): no rebuild window; give --window-s")
        measured[r["group"]] = max(measured.get(r["group"], 0.0), float(r["window_s"]))
    longest = max(measured.values())
    return {g: measured.get(g, longest) for g in groups}, "measured (longest)"


def reads_per_rebuilt_byte(g: GroupConfig) -> float:
    """Bytes a rebuild reads from the survivors per byte it rebuilds, by layout: the other
    members of a RAID-5 stripe, all but one of a RAID-6 stripe's survivors (one parity
    suffices), the mirror, the eight other pieces of a D-stripe (RAID-6 8+2: eight)."""
    kind = g.raid if g.layout == "pool" else g.layout
    width = g.group_width if g.layout == "pool" else g.width
    return {"raid5": width - 1, "raid6": width - 2, "raid1": 1, "raid10": 1,
            "ddp": DDP_WIDTH - 2}.get(kind, 0.0)


def member_bytes(arr: ArrayModel) -> dict[str, float]:
    """Bytes of a member drive each group uses (its member map's sectors per member)."""
    out: dict[str, float] = {}
    for r in range(len(arr.MP)):
        geom = int(arr.MP["group"][r])
        name = arr.cfg.groups[int(arr.row_group[r])].name
        per = float(arr.GR["rows"][geom]) * SECTOR_BYTES
        if int(arr.row_dstripe[r]) >= 0:  # a pool's D-stripe: one piece per member
            per = float(arr.cfg.groups[int(arr.row_group[r])].piece_bytes)
            out[name] = out.get(name, 0.0) + per * DDP_WIDTH / arr.cfg.groups[
                int(arr.row_group[r])].width
        else:
            out[name] = max(out.get(name, 0.0), per)
    return out


def _rebuild_reads(src: Q.Source, arr: ArrayModel, rows: list[dict[str, Any]]
                   ) -> tuple[dict[str, float], str]:
    """Bytes one rebuild of each group read in the run: its rebuild_read drive operations
    (replay --drive-ops) over its rebuilds, else the bytes rebuilt (events) times the layout's
    reads per rebuilt byte; groups without a rebuild in the run take their members' capacity
    times that."""
    groups = {g.name: g for g in arr.cfg.groups}
    cap = member_bytes(arr)
    out = {n: cap.get(n, 0.0) * reads_per_rebuilt_byte(g) for n, g in groups.items()}
    rebuilds: dict[str, int] = {}
    for r in rows:
        rebuilds[r["group"]] = rebuilds.get(r["group"], 0) + 1
    if not rebuilds:
        return out, "members' capacity x the layout's reads per rebuilt byte"
    if (src.path / "drive_ops.parquet").is_file():
        res = Q.run_query([], sql=(
            f"SELECT d.\"group\" AS g, sum(o.sectors) * {SECTOR_BYTES} AS b FROM drive_ops o "
            "JOIN drives d ON d.run = o.run AND d.drive = o.drive "
            f"WHERE o.kind = {OPK_REBUILD_READ} GROUP BY ALL"), sources=[src])
        for row in res.rows():
            if row["g"] in rebuilds:
                out[row["g"]] = float(row["b"]) / rebuilds[row["g"]]
        return out, "measured: the rebuilds' read operations (drive_ops.parquet)"
    res = Q.run_query([], sql=(
        "SELECT \"group\" AS g, drive, max(bytes) AS b FROM events "
        "WHERE event = 'rebuild_end' GROUP BY ALL"), sources=[src])
    done: dict[str, list[float]] = {}
    for row in res.rows():
        if row["b"] is not None:
            done.setdefault(row["g"], []).append(float(row["b"]))
    for name, bs in done.items():
        if name in groups:
            out[name] = max(bs) * reads_per_rebuilt_byte(groups[name])
    return out, ("bytes rebuilt (events.parquet) x the layout's reads per rebuilt byte "
                 "(replay --drive-ops measures the reads)")


def load_inputs(paths: list[str], window_s: float | None) -> list[Input]:
    """The arrays that ``paths`` name, with their windows (module docstring)."""
    if window_s is not None and not (math.isfinite(window_s) and window_s >= 0):
        raise BlocklabError(f"--window-s: must be a number of seconds, at least 0, found "
                            f"{window_s:g}")
    if not paths:
        raise BlocklabError("risk: give at least one RUN (a run folder, or an array TOML with "
                            "--window-s)")
    out: list[Input] = []
    for raw in paths:
        p = Path(raw)
        if p.is_file() and p.suffix.lower() == ".toml":
            if window_s is None:
                raise BlocklabError(f"{raw}: an array configuration has no measured rebuild "
                                    "window: give --window-s (or a run folder)")
            arr = _build(raw, load_array(p))
            cap = member_bytes(arr)
            out.append(Input(raw, arr, {g.name: window_s for g in arr.cfg.groups},
                             "--window-s", [],
                             {g.name: cap.get(g.name, 0.0) * reads_per_rebuilt_byte(g)
                              for g in arr.cfg.groups},
                             "members' capacity x the layout's reads per rebuilt byte"))
            continue
        for src in Q.find_sources([raw]):
            if src.kind != "run":
                raise BlocklabError(f"{src.name}: a trace, not a run folder (replay it with "
                                    "--fail DRIVE@SECONDS first)")
            cfg = RM.array_config(src.run, src.name)
            arr = _build(src.name, cfg)
            events = (src.path / "events.parquet").is_file()
            rows = _measured(src) if events else []
            win, how = _windows(src.name, arr, rows, events, window_s)
            reads, read_how = _rebuild_reads(src, arr, rows)
            out.append(Input(src.name, arr, win, how, [
                {"drive": r["drive"], "group": r["group"], "failure_s": r["failure_s"],
                 "window_s": r["window_s"], "rebuild_done": r["rebuild_done"]} for r in rows],
                reads, read_how))
    return out


def _build(name: str, cfg: ArrayConfig) -> ArrayModel:
    try:
        return build_array(cfg)
    except ConfigError:
        raise
    except BlocklabError as e:
        raise BlocklabError(f"{name}: {e}") from None
    except (OSError, ValueError) as e:
        raise BlocklabError(f"{name}: the array cannot be built ({e})") from None
