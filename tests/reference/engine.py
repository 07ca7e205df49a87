"""Plain-Python reference of the replay engine's semantics (kernels/engine.py module docstring),
for the fixed drive model: host volume striping, LUNs made of extents of member maps (RAID
groups, storage pool slices, pool D-stripes), layout operations in two phases merged per drive
where contiguous, drives serving up to ``maxinf`` operations at once from a host queue
(FCFS/SSTF/C-LOOK over a depth) and a background queue that gets its share of a busy drive's
picks, the controller's command time, host links and internal bus, its cache (write-back or
write-through, LRU, prefetch for sequential readers, destage by watermarks and age), drive
failures (missing members with rebuild cursors, data loss), background tasks (rebuild,
rebalance, initialization) in units with a rate cap, run events, events ordered by (time,
kind, sequence), open loop or closed loop by streams with phases, and per-drive statistics in
time bins.

The layout kernels' planning (normal, degraded, rebuild and initialization fan-out) is used as
it is (tests/test_layout.py checks it separately); everything else is written here with heapq,
lists, dicts and OrderedDicts, independently of kernels/engine.py."""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from dataclasses import dataclass, field

import numpy as np

from blocklab.kernels.engine import tables as T
from blocklab.kernels.layout import raid as R

DONE, RETRY, XFER, CTRL, TIMER, FAIL, TASK, ARRIVE = range(8)
DESTAGE, PREFETCH, REBUILD, INIT, REBALANCE = 1, 2, 3, 5, 6
KEY = 1 << 40
PPM = 1_000_000
# event codes, as traces/schema.py EVENT_NAMES lists them
(FAILURE, REBUILD_START, REBUILD_PROGRESS, REBUILD_END, DATA_LOSS, REPLACE, REBALANCE_START,
 REBALANCE_END, INIT_START, INIT_END, REBALANCE_PROGRESS, INIT_PROGRESS) = range(12)


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
            self.rows.append({"geom": int(r["group"]), "mem": mem, "miss": [],
                              "heads": R.new_heads(width)})

    def miss_array(self, row):
        out = [-1, 0, -1, 0, -1, 0]
        for j, (k, c) in enumerate(self.rows[row]["miss"]):
            out[2 * j], out[2 * j + 1] = k, c
        return np.array(out, np.int64)

    def lost(self, row):
        kind, width, unit, ds = self.geom[self.rows[row]["geom"]]
        tol = int(R.tolerance(kind, width))
        cur = sorted(c for _k, c in self.rows[row]["miss"])
        if len(cur) <= tol or cur[tol] >= ds:
            return 0
        return (ds - cur[tol] + unit - 1) // unit


def plan_parts(arr, maps, item, parts, write, share=0):
    """The item's operations for its (lun, LUN sector, sectors) parts through the extents
    and member maps, in planning order, merged per drive where contiguous."""
    ops: list[Op] = []
    last: dict[int, Op] = {}
    buf = np.zeros(16384 * R.OP_NCOLS, dtype=np.int64)
    for lun, lun_lba, n in parts:
        esect = int(arr.LN["ext_sect"][lun])
        pos, end = lun_lba, lun_lba + n
        while pos < end:
            e = int(arr.LN["ext0"][lun]) + pos // esect
            piece_end = min(end, (pos // esect + 1) * esect)
            row = int(arr.EX["row"][e])
            kind, width, unit, ds = maps.geom[maps.rows[row]["geom"]]
            m = R.plan_request(kind, width, unit, ds, int(arr.EX["base"][e]) + pos % esect,
                               piece_end - pos, write, maps.rows[row]["heads"], buf,
                               maps.miss_array(row))
            add_ops(maps, row, buf, m, item, share, ops, last)
            pos = piece_end
    return ops


def add_ops(maps, row, buf, m, item, share, ops, last):
    for r in buf[: m * R.OP_NCOLS].reshape(m, R.OP_NCOLS):
        d, off = maps.rows[row]["mem"][int(r[R.OP_DRIVE])]
        o = Op(item, d, off + int(r[R.OP_SECTOR]), int(r[R.OP_COUNT]), int(r[R.OP_WRITE]),
               int(r[R.OP_PHASE]), share)
        append(o, ops, last)


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


def simulate(arr, arrive_ns, lba, nsec, is_write, per_op_ns, per_sector_ns, closed=False,
             outstanding=1, think_ns=0, ctrl_ns=0, path_ps=0, bus_ps=0, stream=None,
             phase=None, interval_ns=1_000_000_000, cache_lines=0, line_sectors=64,
             write_back=True, ra_sectors=0, flush_start=0.8, flush_stop=0.8,
             flush_age_ns=10_000_000_000, destage_depth=0, tasks=None,
             drain=True, max_passes=1) -> Result:
    n = len(arrive_ns)
    # closed loop, max_passes > 1: the trace runs again while tasks remain (start_pass); the
    # per-request inputs are lists that each pass extends, request k x n + r being pass k's r
    arrive_ns, lba, nsec, is_write = (list(np.asarray(x)) for x in (arrive_ns, lba, nsec,
                                                                      is_write))
    drives = len(arr.d_model)
    maxinf = [int(x) for x in arr.d_maxinf]
    host_q: list[deque[Op]] = [deque() for _ in range(drives)]
    back_q: list[deque[Op]] = [deque() for _ in range(drives)]
    credit = [0] * drives
    inflight = [0] * drives
    head_pos = [0] * drives
    res = Result([-1] * n, [-1] * n, [-1] * n, [0] * drives, [0] * drives)
    res.qint = [dict() for _ in range(drives)]
    res.busy_bins = [dict() for _ in range(drives)]
    res.hit = [0] * n
    at_drive = [0] * drives
    t_change = [0] * drives
    pending: dict[int, int] = {}
    waiting: dict[int, list[Op]] = {}
    events: list[tuple[int, int, int, object]] = []
    seq = 0
    done_count = 0
    free = {"ctrl": 0, "path": 0, "bus": 0}
    maps = Maps(arr)
    # the controller cache
    ls = line_sectors
    cache = Cache(cache_lines)
    depth = destage_depth or 2 * drives
    fl_start = max(1, int(flush_start * cache_lines))
    fl_stop = int(flush_stop * cache_lines)
    # the plan's tables as plain Python: failures and missing members as tuples (in the
    # dtypes' field order), tasks and pieces as dicts by field name
    fl = [] if tasks is None else [tuple(r) for r in tasks.FL.tolist()]
    af = [] if tasks is None else [tuple(r) for r in tasks.AF.tolist()]
    tk = [] if tasks is None else [dict(zip(T.TASK.names, r, strict=True))
                                   for r in tasks.TK.tolist()]
    pc = [] if tasks is None else [dict(zip(T.PIECE.names, r, strict=True))
                                   for r in tasks.PC.tolist()]
    task_state = {"left": len(tk)}
    piece_done = [0] * len(pc)
    piece_finished: list[set[int]] = [set() for _ in pc]
    nj = (depth + 4 * len(arr.LN) + 64 if cache_lines else 1) + sum(t["depth"] for t in tk)
    job_ids = list(range(nj - 1, -1, -1))  # a stack: the next job is the last freed
    jobs: dict[int, Job] = {}
    ctl = {"destaging": 0, "flushing": False, "timer": None}
    lun_cap = [int(x) for x in arr.LN["cap"]]
    last_end = [-1] * len(lun_cap)
    ra_end = [0] * len(lun_cap)
    lun_waiters: list[list[int]] = [[] for _ in lun_cap]
    write_wait: deque[int] = deque()

    def spread(bins, t0, t1, w):
        while t0 < t1:
            b = t0 // interval_ns
            e = min(t1, (b + 1) * interval_ns)
            bins[b] = bins.get(b, 0) + w * (e - t0)
            t0 = e

    def count(d, t, delta):
        if at_drive[d] > 0:
            spread(res.qint[d], t_change[d], t, at_drive[d])
        t_change[d] = t
        at_drive[d] += delta

    def push(t, kind, ident):
        nonlocal seq
        heapq.heappush(events, (t, kind, seq, ident))
        seq += 1

    def queue(o, now):
        o.qtime = now
        (back_q if o.share else host_q)[o.drive].append(o)
        count(o.drive, now, 1)

    def event(t, code, drive, ref, frac=0, nbytes=0, lost=0):
        res.events.append((t, code, drive, ref, frac, nbytes, lost))

    # closed loop: streams in id order, phases in value order
    stream = list(np.zeros(n, np.int64) if stream is None else np.asarray(stream))
    phase = list(np.zeros(n, np.int64) if phase is None else np.asarray(phase))
    window = list(np.broadcast_to(np.asarray(outstanding), (n,)))
    think = list(np.broadcast_to(np.asarray(think_ns), (n,)))
    sids = sorted({int(x) for x in stream})
    phases = sorted({int(x) for x in phase})
    todo = {(p, s): deque(r for r in range(n) if phase[r] == p and stream[r] == s)
            for p in phases for s in sids}
    in_flight = dict.fromkeys(sids, 0)
    cur = [0, 0]  # phase index, requests of the phase not yet complete
    passes = [1, 0]  # passes begun, tasks left when the last one ended
    total = [n]  # requests of the passes begun

    def start_pass(t):
        """Pass k + 1 of the trace: requests k x n + r, their arrival floors counted from
        t."""
        base = passes[0] * n
        passes[0] += 1
        total[0] += n
        for col in (lba, nsec, is_write, stream, phase, window, think):
            col.extend(col[:n])
        arrive_ns.extend(t + int(a) for a in arrive_ns[:n])
        for lst, v in ((res.arrive, -1), (res.start, -1), (res.done, -1), (res.hit, 0)):
            lst.extend([v] * n)
        for (p, s), q in todo.items():
            q.extend(base + r for r in range(n) if phase[r] == p and stream[r] == s)

    def issue(s, t):
        q = todo[(phases[cur[0]], s)]
        while q and in_flight[s] < window[q[0]]:
            r = q.popleft()
            in_flight[s] += 1
            heapq.heappush(events, (max(t + int(think[r]), int(arrive_ns[r])), ARRIVE, r, r))

    def start_phase(t):
        p = phases[cur[0]]
        cur[1] = sum(1 for r in range(n) if phase[r] == p)  # as many in every pass
        for s in sids:
            issue(s, t)

    for f, row in enumerate(fl):  # the failures and tasks, scheduled first
        push(row[0], FAIL, f)  # FAILURE: t, drive, af0, naf
    for t, row in enumerate(tk):
        push(row["t"], TASK, t)
    if closed:
        if n:
            start_phase(0)
    else:
        for r in range(n):  # open loop: after every scheduled event of the same time
            heapq.heappush(events, (int(arrive_ns[r]), ARRIVE, 1 << 60 | r, r))

    def finish(r, now):
        nonlocal done_count
        res.done[r] = now
        done_count += 1
        if closed:
            s = int(stream[r])
            in_flight[s] -= 1
            cur[1] -= 1
            issue(s, now)
            if cur[1] == 0 and cur[0] + 1 < len(phases):
                cur[0] += 1
                start_phase(now)
            elif cur[1] == 0:  # the pass is over: again while tasks remain
                if passes[0] < max_passes and task_state["left"] > 0:
                    start_pass(now)
                    cur[0] = 0
                    start_phase(now)
                else:
                    passes[1] = task_state["left"]

    def links(r, now):
        free["path"] = max(now, free["path"]) + (int(nsec[r]) * 512 * path_ps + 999) // 1000
        return free["path"]

    def send_out(r, now):
        if path_ps > 0:
            push(links(r, now), XFER, r)
        else:
            finish(r, now)

    def launch(item, ops, now):
        first = 0 if any(o.phase == 0 for o in ops) else 1
        now_ops = [o for o in ops if o.phase == first]
        later = [o for o in ops if o.phase != first]
        if item >= 0:
            pending[item] = len(now_ops)
            waiting[item] = later
        else:
            jobs[-item - 1].pending = len(now_ops)
            jobs[-item - 1].later = later
        for o in now_ops:
            queue(o, now)

    def to_drives(r, now):
        ops = plan_parts(arr, maps, r, pieces(arr, int(lba[r]), int(nsec[r])), int(is_write[r]))
        res.start[r] = -1
        res.hit[r] = 1
        if not ops:
            res.start[r] = now
            finish(r, now)
            return
        launch(r, ops, now)

    def line_parts(r):
        """(key, bits, lun, line index) of every cache line request r touches, in order."""
        out = []
        for lun, a, m in pieces(arr, int(lba[r]), int(nsec[r])):
            for k in range(a // ls, (a + m - 1) // ls + 1):
                lo = max(a, k * ls) - k * ls
                hi = min(a + m, (k + 1) * ls) - k * ls
                out.append((lun * KEY + k, mask(lo, hi), lun, k))
        return out

    def lookup(r):
        status, wlun = "hit", None
        for key, bits, lun, _k in line_parts(r):
            ln = cache.lines.get(key)
            if ln is None:
                return "miss", None
            if ln.valid & bits != bits:
                if ln.job is not None and jobs[ln.job].kind == PREFETCH:
                    if status == "hit":
                        status, wlun = "filling", lun
                else:
                    return "miss", None
        return status, wlun

    def store(r, dirty, now):
        for key, bits, _lun, _k in line_parts(r):
            ln = cache.lines.get(key)
            if ln is None:
                if cache.room() == 0:
                    continue
                ln = cache.take(key)
                if dirty:
                    cache.write(key, bits, now)
                else:
                    ln.valid = bits
                    cache.to_clean(key)
            elif dirty:
                cache.write(key, bits, now)
            else:
                ln.valid |= bits
                cache.touch(key)

    def fits(r):
        parts = line_parts(r)
        missing = sum(1 for key, *_ in parts if key not in cache.lines)
        clean = sum(1 for key, *_ in parts if key in cache.clean)
        if cache.room() - clean < missing:
            return False
        for key, *_ in parts:
            cache.touch(key)
        return True

    def new_job(kind, a, b, c):
        j = job_ids.pop()
        jobs[j] = Job(kind, a, b, c)
        return j

    def cache_job_ops(j, write, now):
        jb = jobs[j]
        launch(-j - 1, plan_parts(arr, maps, -j - 1, [(jb.a, jb.b, jb.c)], write), now)

    def prefetch(lun, now):
        a = ra_end[lun]
        m = min(ra_sectors, lun_cap[lun] - a)
        if m <= 0:
            return False
        keys = [lun * KEY + k for k in range(a // ls, (a + m - 1) // ls + 1)]
        missing = [key for key in keys if key not in cache.lines]
        if not missing:
            ra_end[lun] = a + m
            return True
        # its own clean lines are not evicted for it
        own = set(keys)
        own_clean = sum(1 for key in keys if key in cache.clean)
        if cache.room() - own_clean < len(missing) or not job_ids:
            return False
        j = new_job(PREFETCH, lun, a, m)
        for key in missing:
            cache.take(key, own)
            cache.hold(key, j)
        ra_end[lun] = a + m
        cache_job_ops(j, 0, now)
        return True

    def sequential(r, now):
        for lun, a, m in pieces(arr, int(lba[r]), int(nsec[r])):
            seq_read = a == last_end[lun]
            last_end[lun] = a + m
            if seq_read and ra_sectors > 0:
                ra_end[lun] = max(ra_end[lun], a + m)
                while ra_end[lun] - (a + m) < ra_sectors and prefetch(lun, now):
                    pass

    def read(r, now):
        if not cache_lines:
            to_drives(r, now)
            return
        status, wlun = lookup(r)
        if status == "hit":
            res.start[r] = now
            res.hit[r] = 1
            for key, *_ in line_parts(r):
                cache.touch(key)
            send_out(r, now)
        elif status == "filling":
            lun_waiters[wlun].append(r)
        else:
            to_drives(r, now)

    def destage_one(now):
        key = next(iter(cache.dirty))
        lun, k = divmod(key, KEY)
        e = int(arr.LN["ext0"][lun]) + (k * ls) // int(arr.LN["ext_sect"][lun])
        kind, width, unit, _ds = maps.geom[maps.rows[int(arr.EX["row"][e])]["geom"]]
        stripe = unit * int(R.data_drives(kind, width))
        stripe *= max(1, 8192 // stripe)  # whole stripes, up to 4 MiB at once
        s0 = (k * ls) // stripe * stripe
        lo_k, hi_k = s0 // ls, (s0 + stripe - 1) // ls
        k0 = k
        while k0 > lo_k and lun * KEY + k0 - 1 in cache.dirty:
            k0 -= 1
        k1 = k
        while k1 < hi_k and lun * KEY + k1 + 1 in cache.dirty:
            k1 += 1
        first = cache.lines[lun * KEY + k0].dirty
        last = cache.lines[lun * KEY + k1].dirty
        assert first and last, "a cache line on the dirty list has no dirty sectors"
        a = k0 * ls + (first & -first).bit_length() - 1
        e = k1 * ls + last.bit_length()
        j = new_job(DESTAGE, lun, a, e - a)
        for kk in range(k0, k1 + 1):
            cache.hold(lun * KEY + kk, j)
        ctl["destaging"] += 1
        cache_job_ops(j, 1, now)

    def destage(now):
        if not cache_lines or not write_back:
            return
        if cache.ndirty >= fl_start:
            ctl["flushing"] = True
        elif cache.ndirty <= fl_stop:
            ctl["flushing"] = False
        while ctl["destaging"] < depth and cache.dirty and job_ids:
            head = cache.lines[next(iter(cache.dirty))]
            if not (ctl["flushing"] or now - head.dirty_t >= flush_age_ns):
                break
            destage_one(now)
        if cache.dirty and ctl["timer"] is None:
            t = cache.lines[next(iter(cache.dirty))].dirty_t + flush_age_ns
            if t > now:
                ctl["timer"] = t
                push(t, TIMER, 0)

    def cache_write(r, now):
        store(r, True, now)
        res.start[r] = now
        res.hit[r] = 1
        finish(r, now)

    def write_in(r, now):
        if cache_lines and write_back and len(line_parts(r)) <= cache_lines:
            if not write_wait and fits(r):
                cache_write(r, now)
            else:
                write_wait.append(r)
            destage(now)
            return
        to_drives(r, now)

    def cache_job_done(j, now):
        jb = jobs.pop(j)
        for k in range(jb.b // ls, (jb.b + jb.c - 1) // ls + 1):
            key = jb.a * KEY + k
            ln = cache.lines.get(key)
            if ln is None or ln.job != j:
                continue
            ln.job = None
            if jb.kind == DESTAGE:
                if ln.rewritten:
                    ln.rewritten = False
                    ln.dirty_t = now
                    cache.dirty[key] = None
                else:
                    ln.dirty = 0
                    cache.ndirty -= 1
                    cache.clean[key] = None
            else:
                lo = max(jb.b, k * ls) - k * ls
                hi = min(jb.b + jb.c, (k + 1) * ls) - k * ls
                ln.valid |= mask(lo, hi)
                if ln.dirty:
                    ln.rewritten = False
                    ln.dirty_t = now
                    cache.dirty[key] = None
                else:
                    cache.clean[key] = None
        job_ids.append(j)
        while write_wait and fits(write_wait[0]):
            cache_write(write_wait.popleft(), now)
        if jb.kind == DESTAGE:
            ctl["destaging"] -= 1
        else:
            for r in lun_waiters[jb.a]:
                push(now, RETRY, r)
            lun_waiters[jb.a] = []
        destage(now)

    # -- failures and tasks

    def fail(f, now):
        t_, d, af0, naf = fl[f]
        event(now, FAILURE, d, -1)
        lost = 0
        for row, k in af[af0:af0 + naf]:
            before = maps.lost(row)
            miss = maps.rows[row]["miss"]
            if all(m != k for m, _c in miss):
                if len(miss) == 3:
                    continue
                miss.append([k, 0])
            lost += maps.lost(row) - before
        if lost > 0:
            event(now, DATA_LOSS, d, -1, 0, 0, lost)

    def task_start(t, now):
        row = tk[t]
        row["state"] = 1
        row["t0"] = now
        kind = row["kind"]
        if kind == REBALANCE:
            event(now, REPLACE, row["drive"], t)
        code = {REBUILD: REBUILD_START, REBALANCE: REBALANCE_START, INIT: INIT_START}[kind]
        event(now, code, row["drive"], t)
        if kind == REBUILD:
            for p in range(row["p0"], row["p0"] + row["np"]):
                r, k = pc[p]["row"], pc[p]["k"]
                maps.rows[r]["mem"][k] = (pc[p]["dst"], pc[p]["doff"])
                for m in maps.rows[r]["miss"]:
                    if m[0] == k:
                        m[1] = 0
        if row["units"] == 0:
            task_end(t, now)
            return
        for _i in range(row["depth"]):
            task_issue(t, now)

    def task_end(t, now):
        row = tk[t]
        row["state"] = 2
        task_state["left"] -= 1
        code = {REBUILD: REBUILD_END, REBALANCE: REBALANCE_END, INIT: INIT_END}[row["kind"]]
        event(now, code, row["drive"], t, PPM, row["bdone"])

    def task_issue(t, now):
        row = tk[t]
        while row["next"] < row["units"]:
            if row["rate"] > 0:
                allowed = row["t0"] + row["bytes"] * 1_000_000_000 // row["rate"]
                if now < allowed:
                    push(allowed, TASK, t)
                    return
            u = row["next"]
            row["next"] += 1
            row["infl"] += 1
            p = row["p0"] + u % row["np"]
            idx = u // row["np"]
            a = idx * row["urows"]
            rows = min(row["urows"], pc[p]["rows"] - a)
            row["bytes"] += rows * 512
            kind = row["kind"]
            j = new_job(kind, t, p, idx)
            share = row["share"]
            ops: list[Op] = []
            last: dict[int, Op] = {}
            if kind == REBALANCE:
                append(Op(-j - 1, pc[p]["src"], pc[p]["soff"] + a, rows, 0, 0, share),
                       ops, last)
                append(Op(-j - 1, pc[p]["dst"], pc[p]["doff"] + a, rows, 1, 1, share),
                       ops, last)
            else:
                r = pc[p]["row"]
                gk, gw, gu, _ds = maps.geom[maps.rows[r]["geom"]]
                buf = np.zeros((rows // gu + 2) * (gw + 2) * R.OP_NCOLS, dtype=np.int64)
                if kind == REBUILD:
                    m = R.plan_rebuild(gk, gw, pc[p]["k"], a, rows, maps.miss_array(r), buf)
                else:
                    m = R.plan_init(gk, gw, gu, a // gu, (rows + gu - 1) // gu, buf)
                add_ops(maps, r, buf, m, -j - 1, share, ops, last)
            if ops:
                launch(-j - 1, ops, now)
                return
            if unit_complete(j, now):
                return

    def unit_complete(j, now):
        jb = jobs.pop(j)
        job_ids.append(j)
        t, p, idx = jb.a, jb.b, jb.c
        row = tk[t]
        piece_finished[p].add(idx)
        while piece_done[p] in piece_finished[p]:
            piece_finished[p].discard(piece_done[p])
            piece_done[p] += 1
        urows = row["urows"]
        done_rows = min(piece_done[p] * urows, pc[p]["rows"])
        row["bdone"] += min(urows, pc[p]["rows"] - idx * urows) * 512
        r, k = pc[p]["row"], pc[p]["k"]
        if row["kind"] == REBUILD:
            miss = maps.rows[r]["miss"]
            for m in miss:
                if m[0] == k:
                    if done_rows >= pc[p]["rows"]:
                        miss.remove(m)
                    else:
                        m[1] = done_rows
                    break
        elif row["kind"] == REBALANCE and done_rows >= pc[p]["rows"]:
            maps.rows[r]["mem"][k] = (pc[p]["dst"], pc[p]["doff"])
        row["done"] += 1
        row["infl"] -= 1
        units = row["units"]
        while row["prog"] < 9 and row["done"] * 10 >= (row["prog"] + 1) * units:
            row["prog"] += 1
            code = {REBUILD: REBUILD_PROGRESS, REBALANCE: REBALANCE_PROGRESS,
                    INIT: INIT_PROGRESS}[row["kind"]]
            event(now, code, row["drive"], t, row["done"] * PPM // units, row["bdone"])
        if row["done"] == units:
            task_end(t, now)
            return True
        return False

    def pick(d):
        """Host work first; when both queues hold work, background work first while its time
        credit is positive. Returns (op, the waiting background share when both held work)."""
        contended = back_q[d][0].share if (back_q[d] and host_q[d]) else 0
        if back_q[d] and (not host_q[d] or contended >= PPM or credit[d] > 0):
            return back_q[d].popleft(), contended
        return pick_host(host_q[d], int(arr.d_sched[d]), int(arr.d_depth[d]),
                         head_pos[d], int(arr.d_maxwait[d]), now), contended

    while done_count < total[0] or (drain and task_state["left"] > 0):
        now, kind, _s, ident = heapq.heappop(events)
        if kind == ARRIVE:
            res.arrive[ident] = now
            if ctrl_ns > 0:  # the controller: one command at a time
                free["ctrl"] = max(now, free["ctrl"]) + ctrl_ns
                push(free["ctrl"], CTRL, ident)
                kind = None
        if kind in (ARRIVE, CTRL):
            r = ident
            if is_write[r]:
                if path_ps > 0:  # write data in, then the cache or the drives
                    push(links(r, now), XFER, r)
                else:
                    write_in(r, now)
            else:
                if cache_lines:
                    sequential(r, now)
                read(r, now)
        elif kind == XFER:
            if is_write[ident]:
                write_in(ident, now)
            else:
                finish(ident, now)
        elif kind == RETRY:
            read(ident, now)
        elif kind == TIMER:
            ctl["timer"] = None
            destage(now)
        elif kind == FAIL:
            fail(ident, now)
        elif kind == TASK:
            if tk[ident]["state"] == 0:
                task_start(ident, now)
            elif tk[ident]["state"] == 1:
                task_issue(ident, now)
        elif kind == DONE:
            o = ident
            inflight[o.drive] -= 1
            count(o.drive, now, -1)
            if o.item < 0:
                jb = jobs[-o.item - 1]
                jb.pending -= 1
                if jb.pending == 0:
                    if jb.later:
                        later, jb.later = jb.later, []
                        jb.pending = len(later)
                        for w in later:
                            queue(w, now)
                    elif jb.kind in (DESTAGE, PREFETCH):
                        cache_job_done(-o.item - 1, now)
                    elif not unit_complete(-o.item - 1, now):
                        task_issue(jb.a, now)
            else:
                r = o.item
                pending[r] -= 1
                if pending[r] == 0:
                    if waiting[r]:
                        later = waiting.pop(r)
                        waiting[r] = []
                        pending[r] = len(later)
                        for w in later:
                            queue(w, now)
                    else:
                        if cache_lines:
                            store(r, False, now)
                        if not is_write[r]:
                            send_out(r, now)
                        else:
                            finish(r, now)
        for d in range(drives):
            while inflight[d] < maxinf[d] and (host_q[d] or back_q[d]):
                o, contended = pick(d)
                head_pos[d] = o.lba + o.n
                done = now + per_op_ns + per_sector_ns * o.n
                if bus_ps > 0:
                    free["bus"] = max(now, free["bus"]) + (o.n * 512 * bus_ps + 999) // 1000
                    done = max(done, free["bus"])
                if 0 < contended < PPM:  # the background work's share of the drive's time
                    if o.share:
                        credit[d] -= done - now
                    else:
                        credit[d] += (done - now) * contended // (PPM - contended)
                if o.item >= 0:
                    if res.start[o.item] == -1:
                        res.start[o.item] = now
                    res.hit[o.item] = 0  # the fixed model never hits a drive cache
                res.busy[d] += done - now
                res.ops[d] += 1
                spread(res.busy_bins[d], now, done, 1)
                inflight[d] += 1
                if o.item >= 0:
                    kind_code = 0
                else:
                    jk = jobs[-o.item - 1].kind
                    kind_code = jk + o.write if jk == REBUILD else jk
                res.records.append((d, o.item if o.item >= 0 else -1, kind_code, o.qtime, now,
                                    done, o.lba, o.n))
                heapq.heappush(events, (done, DONE, seq, o))
                seq += 1
    res.dirty_lines = cache.ndirty
    res.maps = maps
    res.passes, res.tasks_at_end = passes
    return res


def pick_host(queue, policy, depth, pos, maxwait=0, now=0):
    """FCFS: the oldest. SSTF: nearest LBA to where the last operation ended. C-LOOK: lowest
    LBA at or past that point, else the lowest. Only the first ``depth`` are seen; ties: oldest.
    Aging: the oldest goes first once it has waited ``maxwait`` ns (0: never)."""
    if policy == 0 or (maxwait > 0 and now - queue[0].qtime >= maxwait):
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
