"""Plain-Python reference of the replay engine's semantics (kernels/engine.py module docstring),
for the fixed drive model: host volume striping, layout operations in two phases merged per
drive where contiguous, drives serving up to ``maxinf`` operations at once from queues with
FCFS/SSTF/C-LOOK over a depth, the controller's command time, host links and internal bus, its
cache (write-back or write-through, LRU, prefetch for sequential readers, destage by watermarks
and age), events ordered by (time, kind, sequence), open loop or closed loop by streams with
phases, and per-drive statistics in time bins.

Layout planning is the (separately tested) layout kernel's; everything else is written here
with heapq, lists, dicts and OrderedDicts, independently of kernels/engine.py."""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from dataclasses import dataclass, field

import numpy as np

from blocklab.kernels.layout import raid as R

DONE, RETRY, XFER, CTRL, TIMER, ARRIVE = range(6)
DESTAGE, PREFETCH = 1, 2
KEY = 1 << 40


@dataclass
class Op:
    item: int  # request, or -(job + 1)
    drive: int
    lba: int
    n: int
    write: int
    phase: int
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
    lun: int
    lba: int
    n: int
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


def mask(lo, hi):
    return ((1 << (hi - lo)) - 1) << lo


def pieces(arr, lba, nsec):
    """(lun, LUN sector, sectors) of host-volume sectors [lba, lba + nsec)."""
    out = []
    pos, end = lba, lba + nsec
    nluns = len(arr.lun_group)
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


def plan(arr, item, parts, write):
    """The item's operations for its (lun, LUN sector, sectors) parts, in planning order,
    merged per drive where contiguous."""
    ops: list[Op] = []
    last: dict[int, Op] = {}
    plan_buf = np.zeros(8192 * R.OP_NCOLS, dtype=np.int64)
    pick = item if item >= 0 else -item - 1
    for lun, lun_lba, n in parts:
        g = arr.lun_group[lun]
        m = R.plan_request(arr.g_kind[g], arr.g_width[g], arr.g_unit[g], arr.g_ds[g], lun_lba,
                           n, write, pick, plan_buf)
        for row in plan_buf[: m * R.OP_NCOLS].reshape(m, R.OP_NCOLS):
            d = int(arr.lun_base[lun] + row[R.OP_DRIVE])
            o = Op(item, d, int(row[R.OP_SECTOR]), int(row[R.OP_COUNT]), int(row[R.OP_WRITE]),
                   int(row[R.OP_PHASE]))
            p = last.get(d)
            if p is not None and (p.phase, p.write, p.lba + p.n) == (o.phase, o.write, o.lba):
                p.n += o.n
                continue
            last[d] = o
            ops.append(o)
    return ops


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

    def take(self, key):
        if self.free:
            self.free -= 1
        else:
            victim, _ = self.clean.popitem(last=False)
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
             flush_age_ns=10_000_000_000, destage_depth=0) -> Result:
    n = len(arrive_ns)
    drives = len(arr.d_model)
    maxinf = [int(x) for x in arr.d_maxinf]
    queues: list[deque[Op]] = [deque() for _ in range(drives)]
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
    # the controller cache
    ls = line_sectors
    cache = Cache(cache_lines)
    depth = destage_depth or 2 * drives
    fl_start = max(1, int(flush_start * cache_lines))
    fl_stop = int(flush_stop * cache_lines)
    nj = depth + 4 * len(arr.lun_group) + 64 if cache_lines else 0
    job_ids = list(range(nj - 1, -1, -1))  # a stack: the next job is the last freed
    jobs: dict[int, Job] = {}
    ctl = {"destaging": 0, "flushing": False, "timer": None}
    lun_cap = [int(x) for x in arr.lun_cap]
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
        queues[o.drive].append(o)
        count(o.drive, now, 1)

    # closed loop: streams in id order, phases in value order
    stream = np.zeros(n, np.int64) if stream is None else np.asarray(stream)
    phase = np.zeros(n, np.int64) if phase is None else np.asarray(phase)
    window = np.broadcast_to(np.asarray(outstanding), (n,))
    think = np.broadcast_to(np.asarray(think_ns), (n,))
    sids = sorted(set(stream.tolist()))
    phases = sorted(set(phase.tolist()))
    todo = {(p, s): deque(r for r in range(n) if phase[r] == p and stream[r] == s)
            for p in phases for s in sids}
    in_flight = dict.fromkeys(sids, 0)
    cur = [0, 0]  # phase index, requests of the phase not yet complete

    def issue(s, t):
        q = todo[(phases[cur[0]], s)]
        while q and in_flight[s] < window[q[0]]:
            r = q.popleft()
            in_flight[s] += 1
            heapq.heappush(events, (max(t + int(think[r]), int(arrive_ns[r])), ARRIVE, r, r))

    def start_phase(t):
        p = phases[cur[0]]
        cur[1] = sum(1 for r in range(n) if phase[r] == p)
        for s in sids:
            issue(s, t)

    if closed:
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

    def links(r, now):
        free["path"] = max(now, free["path"]) + (int(nsec[r]) * 512 * path_ps + 999) // 1000
        return free["path"]

    def send_out(r, now):
        if path_ps > 0:
            push(links(r, now), XFER, r)
        else:
            finish(r, now)

    def launch(item, ops, now):
        """Queue the first phase; returns the number of operations planned."""
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
        ops = plan(arr, r, pieces(arr, int(lba[r]), int(nsec[r])), int(is_write[r]))
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

    def new_job(kind, lun, a, m):
        j = job_ids.pop()
        jobs[j] = Job(kind, lun, a, m)
        return j

    def job_ops(j, write, now):
        jb = jobs[j]
        launch(-j - 1, plan(arr, -j - 1, [(jb.lun, jb.lba, jb.n)], write), now)

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
        if cache.room() < len(missing) or not job_ids:
            return False
        j = new_job(PREFETCH, lun, a, m)
        for key in missing:
            cache.take(key)
            cache.hold(key, j)
        ra_end[lun] = a + m
        job_ops(j, 0, now)
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
        g = arr.lun_group[lun]
        stripe = int(arr.g_unit[g]) * int(R.data_drives(arr.g_kind[g], arr.g_width[g]))
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
        a = k0 * ls + (first & -first).bit_length() - 1
        e = k1 * ls + last.bit_length()
        j = new_job(DESTAGE, lun, a, e - a)
        for kk in range(k0, k1 + 1):
            cache.hold(lun * KEY + kk, j)
        ctl["destaging"] += 1
        job_ops(j, 1, now)

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

    def job_done(j, now):
        jb = jobs.pop(j)
        for k in range(jb.lba // ls, (jb.lba + jb.n - 1) // ls + 1):
            key = jb.lun * KEY + k
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
                lo = max(jb.lba, k * ls) - k * ls
                hi = min(jb.lba + jb.n, (k + 1) * ls) - k * ls
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
            for r in lun_waiters[jb.lun]:
                push(now, RETRY, r)
            lun_waiters[jb.lun] = []
        destage(now)

    while done_count < n:
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
                    else:
                        job_done(-o.item - 1, now)
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
            while inflight[d] < maxinf[d] and queues[d]:
                o = pick(queues[d], int(arr.d_sched[d]), int(arr.d_depth[d]), head_pos[d])
                head_pos[d] = o.lba + o.n
                done = now + per_op_ns + per_sector_ns * o.n
                if bus_ps > 0:
                    free["bus"] = max(now, free["bus"]) + (o.n * 512 * bus_ps + 999) // 1000
                    done = max(done, free["bus"])
                if o.item >= 0:
                    if res.start[o.item] == -1:
                        res.start[o.item] = now
                    res.hit[o.item] = 0  # the fixed model never hits a drive cache
                res.busy[d] += done - now
                res.ops[d] += 1
                spread(res.busy_bins[d], now, done, 1)
                inflight[d] += 1
                kind_code = 0 if o.item >= 0 else jobs[-o.item - 1].kind
                res.records.append((d, o.item if o.item >= 0 else -1, kind_code, o.qtime, now,
                                    done, o.lba, o.n))
                heapq.heappush(events, (done, DONE, seq, o))
                seq += 1
    res.dirty_lines = cache.ndirty
    return res


def pick(queue, policy, depth, pos):
    """FCFS: the oldest. SSTF: nearest LBA to where the last operation ended. C-LOOK: lowest
    LBA at or past that point, else the lowest. Only the first ``depth`` are seen; ties: oldest."""
    if policy == 0:
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
