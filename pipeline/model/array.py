"""An array configuration as the replay engine sees it: drives with their models, the member maps
of its RAID groups, storage pools and dynamic disk pools, the extents its LUNs are made of, and
the plan of its failures, rebuilds, initializations and replacements (issue 3, deliverable 1;
issue 5, deliverables 1-4).

- A **RAID group** (``count`` identical groups) is one member map per group, each one LUN of
  one extent; its hot spares follow its members.
- A **storage pool** (layout ``pool``) cuts its ``width`` drives into private groups of
  ``group_width`` (layout ``raid``; the drives left over make a smaller last group), one
  member map each; its ``count`` LUNs take ``fill`` of the pool's capacity in slices of
  ``slice``, handed out round-robin over the private groups that have room, in the order the
  LUNs are carved, as mid-range arrays' virtual pools do. Its hot spares serve every private
  group.
- A **dynamic disk pool** (layout ``ddp``) places RAID-6 8+2 D-stripes of ``piece`` sectors per
  member by straw2 draws (``pipeline/model/placement.py``), keeping ``preservation`` drives'
  worth of slots free; one member map per D-stripe; its ``count`` volumes take ``fill`` of the
  D-stripes, in order.

**Failures** are planned in time order: a failed drive makes every member it was missing; a
RAID group or storage pool rebuilds it onto a hot spare if one is left, a pool rebuilds each
lost piece onto the best remaining draw with a free slot (once the preservation capacity is
used up, the rest stays degraded). Each rebuild is a task of pieces
(one per member map), in units of the rebuild unit rounded up to whole stripe units; it starts
after the rebuild start delay. A **replacement** of a pool's failed drive rebalances: every
piece straw2 placed on it moves back from where its rebuild put it. An **initialization**
writes the parity of every stripe of a group (or mirrors its copies).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from blocklab.kernels.drive import hdd as H
from blocklab.kernels.drive import ssd as SS
from blocklab.kernels.engine import tables as T
from blocklab.kernels.layout import raid as R
from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import SECTOR_BYTES

from . import catalog as CAT
from . import placement as PL
from .config import DDP_WIDTH, ArrayConfig, ConfigError, DriveRef, GroupConfig

SECTOR = SECTOR_BYTES  # traces/schema.py


@dataclasses.dataclass
class ArrayModel:
    """The array as the engine sees it (kernels/engine/door.py Array: its tables are
    kernels/engine/tables.py's structured dtypes)."""

    vol_unit: int  # sectors; 0 = no host volume (one LUN)
    capacity: int  # sectors the host can address
    LN: np.ndarray  # volume LUNs (tables.LUN; ext0, ext_sect and cap set)
    EX: np.ndarray  # extents (tables.EXTENT)
    GR: np.ndarray  # group geometries (tables.GEOMETRY)
    MP: np.ndarray  # member maps, initial state (tables.member_map)
    d_model: np.ndarray
    d_mparam: np.ndarray
    d_sched: np.ndarray
    d_depth: np.ndarray
    d_maxwait: np.ndarray  # ns an operation may wait before it is served first (0: no limit)
    d_maxinf: np.ndarray
    d_group: list[str]  # per drive: its group's name
    d_role: list[str]  # per drive: "member", "spare" or "pool"
    d_name: list[str]  # per drive: its model
    models: T.Models
    ssd_width: int
    lun_names: list[str]
    # what failure planning needs: per member map its config group and (for a pool) D-stripe
    row_group: np.ndarray
    row_dstripe: np.ndarray
    row_lun: np.ndarray  # per member map: the one LUN with data on it (-1: none, or several)
    spares: dict[int, list[int]]  # config group -> spare drives, in order
    pools: dict[int, tuple[PL.Placement, int, np.ndarray]]  # config group -> placement,
    # first member map row, the pool's drives
    cfg: ArrayConfig

    @property
    def drives(self) -> int:
        return len(self.d_model)

    @property
    def lun_cap(self) -> np.ndarray:
        return self.LN["cap"]


def _models(models: list[CAT.DriveModel], fixed_ns: tuple[int, int] | None) -> T.Models:
    """The engine's model tables: the HDD and SSD parameter sets of the distinct models (each
    model's set index among those of its kind is its drives' ``d_mparam``)."""
    hdd = [m.hdd for m in models if m.hdd is not None]
    ssd = [m.ssd for m in models if m.ssd is not None]

    def cat(parts: list[np.ndarray], dtype: Any) -> tuple[np.ndarray, np.ndarray]:
        off = np.zeros(len(parts) + 1, dtype=np.int64)
        off[1:] = np.cumsum([len(x) for x in parts])
        return (np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)), off

    hz, hz_off = cat([h.zones for h in hdd], np.float64)
    hcd, hc_off = cat([h.seek_cyl for h in hdd], np.int64)
    hct, ht_off = cat([h.seek_ms for h in hdd], np.float64)
    return T.Models(
        fixed=np.array(fixed_ns or (0, 0), dtype=np.int64),
        hp=np.concatenate([h.params for h in hdd]) if hdd else np.zeros(H.P_N),
        hz=hz, hz_off=hz_off, hcd=hcd, hc_off=hc_off, hct=hct, ht_off=ht_off,
        hst=np.zeros(0),  # per-drive states are made fresh for each replay (Engine)
        sp=np.concatenate(ssd) if ssd else np.zeros(SS.P_N),
        sst=np.zeros((0, 1), np.int64))


def hdd_tables(models: T.Models, m: int = 0) -> tuple[np.ndarray, ...]:
    """HDD parameter set ``m``'s tables in ``models`` (parameters, zones, seek curve distances
    and times), as the engine's kernels slice them (drives.py ``_hdd_tables``): the arguments
    the HDD model's kernels take before their state."""
    return (models.hp[m * H.P_N:(m + 1) * H.P_N],
            models.hz[models.hz_off[m]:models.hz_off[m + 1]],
            models.hcd[models.hc_off[m]:models.hc_off[m + 1]],
            models.hct[models.ht_off[m]:models.ht_off[m + 1]])


def _model_of(ref: DriveRef) -> CAT.DriveModel:
    return CAT.model(ref.catalog, dict(ref.overrides), ref.disksim, ref.kind)


class _Builder:
    """Accumulates geometries, member maps, extents and LUNs."""

    def __init__(self) -> None:
        self.geoms: list[dict[str, int]] = []  # tables.GEOMETRY rows by field
        self.rows: list[tuple[int, list[int], list[int]]] = []  # geometry, drives, offsets
        self.row_group: list[int] = []
        self.row_dstripe: list[int] = []
        self.extents: list[tuple[int, int]] = []  # (member map row, first sector there)
        self.luns: list[tuple[str, int, int, int]] = []  # name, first extent, extent size, cap
        self.row_luns: dict[int, set[int]] = {}  # member map -> the LUNs with data on it

    def geom(self, kind: int, width: int, unit: int, ds: int) -> int:
        g = dict(kind=kind, width=width, unit=unit, rows=ds)
        if g not in self.geoms:
            self.geoms.append(g)
        return self.geoms.index(g)

    def row(self, geom: int, drives: list[int], offsets: list[int], group: int,
            dstripe: int = -1) -> int:
        self.rows.append((geom, drives, offsets))
        self.row_group.append(group)
        self.row_dstripe.append(dstripe)
        return len(self.rows) - 1

    def lun(self, name: str, extents: list[tuple[int, int]], ext_sect: int, cap: int) -> None:
        for row, _off in extents:
            self.row_luns.setdefault(row, set()).add(len(self.luns))
        self.luns.append((name, len(self.extents), ext_sect, cap))
        self.extents += extents


def build_array(cfg: ArrayConfig, fixed_ns: tuple[int, int] | None = None) -> ArrayModel:
    """The engine's tables for a configuration; each group's drives with their model
    (``fixed_ns`` = (per operation, per sector) replaces every model, for tests)."""
    refs = list(dict.fromkeys(g.drive for g in cfg.groups))
    models = []
    for ref in refs:
        try:
            models.append(_model_of(ref))
        except CAT.DriveFiguresError as e:
            raise ConfigError(f"{cfg.source}: drive {ref.label}: {e}") from None
    mset = [sum(1 for m in models[:i] if m.kind == models[i].kind) for i in range(len(models))]
    b = _Builder()
    drive_cols: dict[str, list[Any]] = {k: [] for k in (
        "model", "mparam", "sched", "depth", "maxwait", "maxinf", "group", "role", "name")}
    spares: dict[int, list[int]] = {}
    pools: dict[int, tuple[PL.Placement, int, np.ndarray]] = {}
    base = 0
    for gi, g in enumerate(cfg.groups):
        m = refs.index(g.drive)
        mod = models[m]
        n = g.drives
        drive_cols["model"] += [T.DRIVE_MODELS["fixed" if fixed_ns else mod.kind]] * n
        drive_cols["mparam"] += [0 if fixed_ns else mset[m]] * n
        drive_cols["sched"] += [T.SCHEDULERS[g.scheduler]] * n
        drive_cols["depth"] += [g.queue_depth] * n
        drive_cols["maxwait"] += [round(g.max_wait_ms * 1e6)] * n
        drive_cols["maxinf"] += [mod.queue_depth] * n
        drive_cols["group"] += [g.name] * n
        drive_cols["name"] += [refs[m].label] * n
        members = n - g.hot_spares
        drive_cols["role"] += ["pool" if g.layout == "ddp" else "member"] * members + \
            ["spare"] * g.hot_spares
        spares[gi] = list(range(base + members, base + n))
        unit = g.stripe_unit_bytes // SECTOR
        if unit > mod.blocks:  # (no stripe fits a drive: a capacity of 0 divided by, later)
            raise ConfigError(f"{cfg.source}: group[{gi}].stripe_unit: "
                              f"{g.stripe_unit_bytes:,} bytes is more than a drive holds "
                              f"({mod.blocks * SECTOR:,} bytes, {refs[m].label})")
        if g.layout == "ddp":
            pools[gi] = _ddp(b, g, gi, base, unit, mod.blocks)
        elif g.layout == "pool":
            _storage_pool(b, g, gi, base, unit, mod.blocks)
        else:
            ds = (mod.blocks // unit) * unit if g.kind != R.KIND_JBOD else mod.blocks
            geom = b.geom(g.kind, g.width, unit, ds)
            cap = int(R.capacity(g.kind, g.width, unit, ds))
            for i in range(g.count):
                first = base + i * g.width
                row = b.row(geom, list(range(first, first + g.width)), [0] * g.width, gi)
                b.lun(g.name if g.count == 1 else f"{g.name}.{i}", [(row, 0)], cap, cap)
        base += n
    names = [x[0] for x in b.luns]
    if cfg.volume is not None:
        idx = [names.index(x) for x in cfg.volume.luns]
        vol_unit = cfg.volume.stripe_unit_bytes // SECTOR
        smallest = min(idx, key=lambda i: b.luns[i][3])
        if vol_unit > b.luns[smallest][3]:  # (no whole stripe unit on a LUN: a volume of 0)
            raise ConfigError(f"{cfg.source}: volume.stripe_unit: "
                              f"{cfg.volume.stripe_unit_bytes:,} bytes is more than LUN "
                              f"{names[smallest]} holds ({b.luns[smallest][3] * SECTOR:,} bytes)")
        per_lun = b.luns[smallest][3] // vol_unit * vol_unit
        capacity = per_lun * len(idx)
    else:
        idx = [0]
        vol_unit = 0
        capacity = b.luns[0][3]
    LN = np.zeros(len(idx), T.LUN)
    for r, i in enumerate(idx):
        _name, LN["ext0"][r], LN["ext_sect"][r], LN["cap"][r] = b.luns[i]
    wmax = max(len(d) for _g, d, _o in b.rows)
    MP = np.zeros(len(b.rows), T.member_map(wmax))
    MP["missing"] = R.no_missing()
    MP["copying"] = -1  # -1: no piece being copied
    mem = MP["members"]
    mem["drive"] = mem["offset"] = -1  # -1: no member (a map narrower than the widest)
    for r, (geom, drives, offs) in enumerate(b.rows):
        MP["group"][r] = geom
        mem["drive"][r, :len(drives)] = drives
        mem["offset"][r, :len(drives)] = offs

    def i64(x: list[int]) -> np.ndarray:
        return np.array(x, dtype=np.int64)

    return ArrayModel(
        vol_unit=vol_unit, capacity=capacity, LN=LN,
        EX=_table(T.EXTENT, [dict(row=r, base=o) for r, o in b.extents]),
        GR=_table(T.GEOMETRY, b.geoms), MP=MP,
        d_model=i64(drive_cols["model"]), d_mparam=i64(drive_cols["mparam"]),
        d_sched=i64(drive_cols["sched"]), d_depth=i64(drive_cols["depth"]),
        d_maxwait=i64(drive_cols["maxwait"]),
        d_maxinf=i64(drive_cols["maxinf"]), d_group=drive_cols["group"],
        d_role=drive_cols["role"], d_name=drive_cols["name"],
        models=_models([] if fixed_ns else models, fixed_ns),
        ssd_width=max([SS.state_width(m.ssd) for m in models if m.ssd is not None], default=1),
        lun_names=[names[i] for i in idx], row_group=i64(b.row_group),
        row_dstripe=i64(b.row_dstripe),
        row_lun=i64([next(iter(b.row_luns[r])) if len(b.row_luns.get(r, ())) == 1 else -1
                     for r in range(len(b.rows))]),
        spares=spares, pools=pools, cfg=cfg)


def _storage_pool(b: _Builder, g: GroupConfig, gi: int, base: int, unit: int,
                  blocks: int) -> None:
    kind = R.KIND_NAMES.index(g.raid)
    ds = (blocks // unit) * unit if kind != R.KIND_JBOD else blocks
    slice_ = g.slice_bytes // SECTOR
    widths = [g.group_width] * (g.width // g.group_width)
    if g.width % g.group_width:  # the drives left over make a smaller last group
        widths.append(g.width % g.group_width)
    rows, room = [], []
    first = base
    for w in widths:
        rows.append(b.row(b.geom(kind, w, unit, ds), list(range(first, first + w)), [0] * w,
                          gi))
        room.append(int(R.capacity(kind, w, unit, ds)) // slice_)
        first += w
    total = sum(room)
    per_lun = int(total * g.fill) // g.count
    if per_lun == 0:
        raise BlocklabError(f"{g.name}: the pool's {total} slices of {g.slice_bytes} bytes "
                            f"do not make {g.count} LUNs")
    used = [0] * len(rows)
    c = 0
    for i in range(g.count):
        ext: list[tuple[int, int]] = []
        while len(ext) < per_lun:  # round-robin over the private groups that have room
            r = c % len(rows)
            c += 1
            if used[r] < room[r]:
                ext.append((rows[r], used[r] * slice_))
                used[r] += 1
        b.lun(g.name if g.count == 1 else f"{g.name}.{i}", ext, slice_, per_lun * slice_)


def _ddp(b: _Builder, g: GroupConfig, gi: int, base: int, unit: int,
         blocks: int) -> tuple[PL.Placement, int, np.ndarray]:
    piece = g.piece_bytes // SECTOR
    slots = blocks // piece
    try:
        pl = PL.place(g.width, slots, g.preservation, DDP_WIDTH, seed=gi)
    except ValueError as e:
        raise BlocklabError(f"{g.name}: {e}") from None
    geom = b.geom(R.KIND_RAID6, DDP_WIDTH, unit, piece)
    first = len(b.rows)
    for i in range(len(pl.members)):
        b.row(geom, [base + int(d) for d in pl.members[i]],
              [int(s) * piece for s in pl.slot[i]], gi, dstripe=i)
    data = (piece // unit) * unit * (DDP_WIDTH - 2)
    per = int(len(pl.members) * g.fill) // g.count
    if per == 0:
        raise BlocklabError(f"{g.name}: {len(pl.members)} D-stripes do not make {g.count} "
                            "volumes")
    for i in range(g.count):
        b.lun(g.name if g.count == 1 else f"{g.name}.{i}",
              [(first + i * per + j, 0) for j in range(per)], data, per * data)
    return pl, first, np.arange(base, base + g.width)


# ---------------------------------------------------------------------------------------------
# failures, rebuilds, initializations and replacements


@dataclasses.dataclass
class Plan:
    """The engine's failure and task tables (kernels/engine/door.py Tasks), and what to name in
    events."""

    FL: np.ndarray  # tables.FAILURE
    AF: np.ndarray  # tables.MISSING
    TK: np.ndarray  # tables.TASK
    PC: np.ndarray  # tables.PIECE
    task_group: list[str]  # per task: the group (or pool) it works on

    @property
    def tasks(self) -> int:
        return len(self.TK)


def no_plan() -> Plan:
    """No failures and no tasks."""
    return Plan(FL=np.zeros(0, T.FAILURE), AF=np.zeros(0, T.MISSING), TK=np.zeros(0, T.TASK),
                PC=np.zeros(0, T.PIECE), task_group=[])


def _table(dtype: np.dtype, rows: list[dict[str, int]]) -> np.ndarray:
    """Rows given by field name (fields left out are 0) as a table of ``dtype``."""
    out = np.zeros(len(rows), dtype)
    for name in dtype.names or ():
        out[name] = [r.get(name, 0) for r in rows]
    return out


def _members_on(arr: ArrayModel, mdrive: np.ndarray, d: int, pool: bool) -> list[tuple[int, int]]:
    """The (member map, member) pairs on drive ``d`` that its failure makes missing.

    A pool's D-stripes outside every volume hold no data (``plan``'s [[init]] does not
    initialize them either): a failure leaves nothing of them to rebuild and nothing to lose.
    Pools that place extents rebuild the extents that hold data (the D-Link xStack manual:
    "one Rebuild task for each extent that used space on the failed drive"); that SANtricity
    does the same for D-stripes is assumed, not documented here. Until 2026-11-29 they were
    rebuilt: a pool 30 % full rebuilt what a full one did (a review: 4.70 GB in 15.8 s at fill
    0.3 and 1.0), and a later failure counted their stripes as lost."""
    return [(r, k) for r in range(mdrive.shape[0]) for k in range(mdrive.shape[1])
            if mdrive[r, k] == d and not (pool and arr.row_lun[r] == -1)]


def plan(arr: ArrayModel) -> Plan:
    """Failures, rebuilds, initializations and replacements of ``arr.cfg`` (module docstring),
    in time order."""
    cfg = arr.cfg
    pol = cfg.rebuild
    share = int(round(pol.share * T.PPM))
    rate = int(pol.rate_mb_s * 1e6)
    members = arr.MP.copy()  # the member maps as they will be, as rebuilds are planned
    mdrive, moff = members["members"]["drive"], members["members"]["offset"]  # views
    failed: set[int] = set()
    spares = {g: list(s) for g, s in arr.spares.items()}
    FL: list[dict[str, int]] = []
    AF: list[dict[str, int]] = []
    TK: list[dict[str, int]] = []
    PC: list[dict[str, int]] = []
    task_group: list[str] = []
    events = sorted([(f.at_s, 0, f.drive) for f in cfg.failures]
                    + [(r.at_s, 1, r.drive) for r in cfg.replacements])

    def task(kind: str, t_ns: int, pieces: list[Any], unit_rows: int, depth: int,
             drive: int, group: str, rows: int) -> None:
        """A task over ``pieces`` (map row, member, source drive and offset, destination
        drive and offset; -1: none) of ``rows`` rows each."""
        units = math.ceil(rows / unit_rows) * len(pieces)
        depth = min(depth, 32 * len(pieces))  # a piece tracks at most 32 units in flight
        TK.append(dict(kind=T.TASK_KINDS[kind], t=t_ns, p0=len(PC), np=len(pieces),
                       urows=unit_rows, units=units, depth=depth, share=share, rate=rate,
                       drive=drive))
        PC.extend(dict(zip(("row", "k", "src", "soff", "dst", "doff"), map(int, p),
                           strict=True), rows=rows) for p in pieces)
        task_group.append(group)

    def urows(geom: int) -> int:
        unit = int(arr.GR["unit"][geom])
        return max(1, math.ceil(pol.unit_bytes / SECTOR / unit)) * unit

    for at_s, what, d in events:
        t_ns = int(at_s * 1e9)
        gi = next(i for i, g in enumerate(cfg.groups) if g.name == arr.d_group[d])
        g = cfg.groups[gi]
        if what == 1:  # a replacement: the pool's pieces placed on d come back to it
            if g.layout != "ddp" or d not in failed:
                raise BlocklabError(f"{cfg.source}: replace: drive {d} is not a failed drive "
                                    "of a ddp pool")
            failed.discard(d)
            pl, first, pool_drives = arr.pools[gi]
            pieces = []
            for r in range(first, first + len(pl.members)):
                i = r - first
                for k in range(DDP_WIDTH):
                    if pool_drives[pl.members[i, k]] == d and mdrive[r, k] != d:
                        src, soff = int(mdrive[r, k]), int(moff[r, k])
                        rows_ = int(arr.GR["rows"][members["group"][r]])
                        pieces.append((r, k, src, soff, d, int(pl.slot[i, k]) * rows_))
                        # the slot the rebuild used is free again
                        pl.used[int(np.searchsorted(pool_drives, src)), soff // rows_] = 0
                        mdrive[r, k], moff[r, k] = d, pieces[-1][5]
            geom = int(members["group"][first])
            task("rebalance", t_ns, pieces, urows(geom), pol.depth or len(pool_drives), d,
                 g.name, int(arr.GR["rows"][geom]))
            continue
        if d in failed:
            raise BlocklabError(f"{cfg.source}: failure: drive {d} fails twice")
        failed.add(d)
        hits = _members_on(arr, mdrive, d, g.layout == "ddp")
        FL.append(dict(t=t_ns, drive=d, af0=len(AF), naf=len(hits)))
        AF.extend(dict(row=r, k=k) for r, k in hits)
        if not hits:  # a spare, or an unused drive
            continue
        start = t_ns + int(pol.start_delay_s * 1e9)
        geom = int(members["group"][hits[0][0]])
        rows = int(arr.GR["rows"][geom])
        if R.tolerance(int(arr.GR["kind"][geom]), int(arr.GR["width"][geom])) == 0:
            continue  # nothing to rebuild from
        pieces = []
        if g.layout == "ddp":
            pl, first, pool_drives = arr.pools[gi]
            for r, k in hits:
                cur = {int(np.searchsorted(pool_drives, x)) for x in mdrive[r, :DDP_WIDTH]}
                got = PL.replacement(pl, r - first, cur, {int(np.searchsorted(
                    pool_drives, x)) for x in failed})
                if got is None:  # the preservation capacity is used up: stays degraded
                    continue
                drive, off = int(pool_drives[got[0]]), got[1] * rows
                pieces.append((r, k, -1, 0, drive, off))
                mdrive[r, k], moff[r, k] = drive, off
            depth = pol.depth or len(pool_drives)
        else:
            for r, k in hits:
                if not spares[gi]:
                    break
                spare = spares[gi].pop(0)
                pieces.append((r, k, -1, 0, spare, 0))
                mdrive[r, k], moff[r, k] = spare, 0
            depth = pol.depth or 4
        if pieces:
            task("rebuild", start, pieces, urows(geom), depth, d, g.name, rows)
    for init in cfg.inits:
        # One task per LUN, all started at once: each RAID group instance (a volume group on
        # drives of its own) initializes independently, as hardware controllers and md do
        # (md only delays the resyncs of arrays that share drives), and SANtricity
        # initializes the volumes of a dynamic disk pool together (the SGI DDP study
        # initialized a pool's eight volumes in parallel). A pool's D-stripes outside every
        # volume hold no data and are not initialized. A storage pool's private groups carry
        # slices of several LUNs: one task initializes all of the group's member maps.
        gi = next(i for i, g in enumerate(cfg.groups) if g.name == init.group)
        rs = [r for r in range(len(members)) if arr.row_group[r] == gi]
        by_lun: dict[int, list[int]] = {}
        for r in rs:
            by_lun.setdefault(int(arr.row_lun[r]), []).append(r)
        if -1 in by_lun and cfg.groups[gi].layout == "ddp":
            del by_lun[-1]  # D-stripes no volume uses
        parts = list(by_lun.values()) if -1 not in by_lun else [rs]
        geom = int(members["group"][rs[0]])
        for part in parts:
            task("init", int(init.at_s * 1e9), [(r, -1, -1, 0, -1, 0) for r in part],
                 urows(geom), pol.depth or 4, -1, init.group, int(arr.GR["rows"][geom]))
    return Plan(FL=_table(T.FAILURE, FL), AF=_table(T.MISSING, AF), TK=_table(T.TASK, TK),
                PC=_table(T.PIECE, PC), task_group=task_group)
