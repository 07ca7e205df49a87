"""The reference engine's data and helpers (tests/reference/engine.py): drive operations, cache
lines, jobs and the run's result, the layout planning over a request's pieces and member maps,
the controller cache's LRU lists, and the drive queues' host scheduling (FCFS, SSTF, C-LOOK;
SPTF is FCFS on the fixed-time drives)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from blocklab.kernels.layout import raid as R

from .layout import lost as layout_lost

KEY = 1 << 40
PPM = 1_000_000


@dataclass
class Op:
    item: int  # request, or -(job + 1)
    drive: int
    lba: int
    n: int
    write: int
    phase: int
    share: int = 0  # 0: host work; else background work's share of picks (ppm)
    qtime: int = 0


@dataclass
class Line:
    valid: int = 0
    dirty: int = 0
    job: int | None = None  # filling or destaging job
    rewritten: bool = False
    dirty_t: int = 0


@dataclass
class Job:
    kind: int
    a: int  # cache job: LUN; task job: task
    b: int  # cache job: first sector; task job: piece
    c: int  # cache job: sectors; task job: unit
    pending: int = 0
    later: list[Op] = field(default_factory=list)


@dataclass
class Result:
    arrive: list[int]
    start: list[int]
    done: list[int]
    busy: list[int]
    ops: list[int]
    records: list[tuple[int, ...]] = field(default_factory=list)  # drive, item, kind, qtime,
    # start, done, lba, n (in the order they started)
    qint: list[dict[int, int]] = field(default_factory=list)  # per drive: bin -> op x ns
    busy_bins: list[dict[int, int]] = field(default_factory=list)
    hit: list[int] = field(default_factory=list)
    dirty_lines: int = 0
    events: list[tuple[int, ...]] = field(default_factory=list)  # time, code, drive, ref,
    # fraction ppm, bytes, stripes lost
    passes: int = 1  # closed loop: passes of the trace run
    tasks_at_end: int = 0  # closed loop: tasks left when the last pass ended
    end: int = 0  # the run's end: the last completion of a request or an operation in service


def mask(lo, hi):
    return ((1 << (hi - lo)) - 1) << lo


def pieces(arr, lba, nsec):
    """(lun, LUN sector, sectors) of host-volume sectors [lba, lba + nsec)."""
    out = []
    pos, end = lba, lba + nsec
    nluns = len(arr.LN)
    while pos < end:
        if arr.vol_unit > 0:
            chunk = pos // arr.vol_unit
            piece_end = min(end, (chunk + 1) * arr.vol_unit)
            lun = chunk % nluns
            lun_lba = (chunk // nluns) * arr.vol_unit + pos % arr.vol_unit
        else:
            piece_end, lun, lun_lba = end, 0, pos
        out.append((lun, lun_lba, piece_end - pos))
        pos = piece_end
    return out


class Maps:
    """Member maps as (geometry, [drive per member], [offset per member], [[member, cursor]
    missing, at most three])."""

    def __init__(self, arr):
        self.geom = [tuple(g) for g in arr.GR.tolist()]  # kind, width, unit, rows
        self.rows = []
        for r in arr.MP:
            width = self.geom[int(r["group"])][1]
            mem = [(int(r["members"]["drive"][k]), int(r["members"]["offset"][k]))
                   for k in range(width)]
            # heads: where each member's last planned operation ended (raid.py mirror reads)
            # copy: the kernel's COPY_N slots, pieces being copied to a new drive (rebalance)
            self.rows.append({"geom": int(r["group"]), "mem": mem, "miss": [],
                              "heads": R.new_heads(width), "copy": [None, None, None]})
        self.pc: list[dict] = []  # the pieces and the failed drives (the simulation's own)
        self.failed: set[int] = set()

    def miss_array(self, row):
        out = [-1, 0, -1, 0, -1, 0]
        for j, (k, c) in enumerate(self.rows[row]["miss"]):
            out[2 * j], out[2 * j + 1] = k, c
        return np.array(out, np.int64)

    def copy_slot(self, r, old, new):
        """The first of row r's copy slots holding ``old`` now holds ``new`` (none free: not
        kept, as in the kernel)."""
        slots = self.rows[r]["copy"]
        if old in slots:
            slots[slots.index(old)] = new

    def lose(self, row, k, d):
        """Member ``k`` of map ``row`` is lost with drive ``d`` (the kernel's _fail): missing
        from row 0 up, also when a rebuild was writing it onto ``d`` (what it rebuilt is gone);
        returns the stripes this loses beyond the layout's tolerance."""
        before = self.lost(row)
        miss = self.rows[row]["miss"]
        if all(m != k for m, _c in miss):
            if len(miss) == 3:
                return 0
            miss.append([k, 0])
        elif self.rows[row]["mem"][k][0] == d:
            next(m for m in miss if m[0] == k)[1] = 0
        return self.lost(row) - before

    def lost(self, row):
        kind, width, unit, ds = self.geom[self.rows[row]["geom"]]
        tol = int(R.tolerance(kind, width))
        cur = sorted(c for _k, c in self.rows[row]["miss"])
        if len(cur) <= tol or cur[tol] >= ds:
            return 0
        return (ds - cur[tol] + unit - 1) // unit


def extent_pieces(arr, parts):
    """The (member map row, sector in its space, sectors) pieces of (lun, LUN sector,
    sectors) parts, extent by extent, in order."""
    for lun, lun_lba, n in parts:
        esect = int(arr.LN["ext_sect"][lun])
        pos, end = lun_lba, lun_lba + n
        while pos < end:
            e = int(arr.LN["ext0"][lun]) + pos // esect
            piece_end = min(end, (pos // esect + 1) * esect)
            yield int(arr.EX["row"][e]), int(arr.EX["base"][e]) + pos % esect, piece_end - pos
            pos = piece_end


def plan_parts(arr, maps, item, parts, write, share=0):
    """The item's operations for its (lun, LUN sector, sectors) parts through the extents
    and member maps, in planning order, merged per drive where contiguous."""
    ops: list[Op] = []
    last: dict[int, Op] = {}
    buf = np.zeros(16384 * R.OP_NCOLS, dtype=np.int64)
    for row, sector, n in extent_pieces(arr, parts):
        kind, width, unit, ds = maps.geom[maps.rows[row]["geom"]]
        m = R.plan_request(kind, width, unit, ds, sector, n, write, maps.rows[row]["heads"],
                           buf, maps.miss_array(row))
        add_ops(maps, row, buf, m, item, share, ops, last)
    return ops


def parts_lost(arr, maps, parts):
    """Whether a host request's (lun, LUN sector, sectors) parts have data that no surviving
    member holds (the sector-by-sector model of tests/reference/layout.py, through each
    extent's member map and its missing members as they are now)."""
    for row, sector, n in extent_pieces(arr, parts):
        kind, width, unit, ds = maps.geom[maps.rows[row]["geom"]]
        miss = maps.rows[row]["miss"]
        if miss and layout_lost(R.KIND_NAMES[kind], width, unit, ds, sector, n,
                                lambda m, r, miss=miss: any(k == m and r >= c
                                                            for k, c in miss)):
            return True
    return False


def hit_of(arr, maps, lba, n):
    """A request's hit figure: 1, or 3 when part of its data is on no surviving member (2: the
    kernel's HIT_LOST), whether the drives or the controller's cache serve it."""
    return 3 if parts_lost(arr, maps, pieces(arr, int(lba), int(n))) else 1


def add_ops(maps, row, buf, m, item, share, ops, last):
    """The planned operations through the row's members; a write to a member being copied to a
    new drive is written there too."""
    # the five columns of every operation as Python ints at once (indexing row by row cost
    # 30 s of the failure property tests' 70)
    cols = buf[: m * R.OP_NCOLS].reshape(m, R.OP_NCOLS)[
        :, [R.OP_DRIVE, R.OP_SECTOR, R.OP_COUNT, R.OP_WRITE, R.OP_PHASE]].tolist()
    for k, sector, n, w, ph in cols:
        d, off = maps.rows[row]["mem"][k]
        append(Op(item, d, off + sector, n, w, ph, share), ops, last)
        if not w:
            continue
        for p in maps.rows[row]["copy"]:
            if p is not None and maps.pc[p]["k"] == k and maps.pc[p]["dst"] not in maps.failed:
                append(Op(item, maps.pc[p]["dst"], maps.pc[p]["doff"] + sector, n, w, ph, share),
                       ops, last)


def append(o, ops, last):
    p = last.get(o.drive)
    if p is not None and (p.phase, p.write, p.lba + p.n) == (o.phase, o.write, o.lba):
        p.n += o.n
        return
    last[o.drive] = o
    ops.append(o)


class Cache:
    """Lines by key; the free count, the clean lines in LRU order, the dirty lines oldest
    first; lines held by a job are in neither."""

    def __init__(self, lines):
        self.size = lines
        self.lines: dict[int, Line] = {}
        self.free = lines
        self.clean: OrderedDict[int, None] = OrderedDict()
        self.dirty: OrderedDict[int, None] = OrderedDict()
        self.ndirty = 0  # lines with dirty data

    def room(self):
        return self.free + len(self.clean)

    def take(self, key, keep=()):
        """A line for ``key``: a free one, else the least recently used clean one whose key is
        not in ``keep`` (evicted)."""
        if self.free:
            self.free -= 1
        else:
            victim = next(k for k in self.clean if k not in keep)
            del self.clean[victim]
            del self.lines[victim]
        self.lines[key] = Line()
        return self.lines[key]

    def touch(self, key):
        if key in self.clean:
            self.clean.move_to_end(key)

    def to_clean(self, key):
        self.clean.pop(key, None)
        self.clean[key] = None

    def write(self, key, bits, now):
        if not bits:  # nothing written: a dirty line always has dirty sectors
            return
        ln = self.lines[key]
        if not ln.dirty:
            self.ndirty += 1
        ln.valid |= bits
        ln.dirty |= bits
        if key in self.dirty:
            return
        if ln.job is not None:
            ln.rewritten = True
            return
        self.clean.pop(key, None)
        ln.dirty_t = now
        self.dirty[key] = None

    def hold(self, key, job):
        self.clean.pop(key, None)
        self.dirty.pop(key, None)
        self.lines[key].job = job


AGED_BATCH = 16  # Linux deadline's fifo_batch


def pick_host(queue, policy, depth, pos, maxwait=0, now=0, aged=None):
    """FCFS: the oldest. SSTF: nearest LBA to where the last operation ended. C-LOOK: lowest
    LBA at or past that point, else the lowest. Only the first ``depth`` are seen; ties: oldest.
    Aging, as Linux's deadline elevator: the oldest goes first once it has waited ``maxwait``
    ns (0: never) and begins a batch of AGED_BATCH picks, after which the age is looked at
    again (``aged``: a one-item list, the picks left in the drive's batch). SPTF (3) on a
    fixed-time drive, which has no positioning time: FCFS (test_hdd.py checks SPTF on disks)."""
    aged = [0] if aged is None else aged
    old = False
    if maxwait > 0:
        if aged[0] > 0:
            aged[0] -= 1
        elif now - queue[0].qtime >= maxwait:
            old = True
            aged[0] = AGED_BATCH - 1
    if policy in (0, 3) or old:
        return queue.popleft()
    seen = list(queue)[:depth]
    if policy == 1:
        key = [abs(o.lba - pos) for o in seen]
    else:
        key = [(0 if o.lba >= pos else 1, o.lba) for o in seen]
    i = min(range(len(seen)), key=lambda j: (key[j], j))
    item = seen[i]
    del queue[i]
    return item
