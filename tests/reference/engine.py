"""Plain-Python reference of the replay engine's semantics (kernels/engine.py module docstring),
for the fixed drive model: host volume striping, LUNs made of extents of member maps (RAID
groups, storage pool slices, pool D-stripes), layout operations in two phases merged per drive
where contiguous, drives serving up to ``maxinf`` operations at once from a host queue
(FCFS/SSTF/C-LOOK over a depth; SPTF, which needs a disk's positioning time, is FCFS on these
fixed-time drives: tests/test_hdd.py checks it on disks) and a background queue that gets its share of a busy drive's
picks, the controller's command time, host links and internal bus, its cache (write-back or
write-through, LRU, prefetch for sequential readers, destage by watermarks and age), drive
failures (missing members with rebuild cursors, data loss), background tasks (rebuild,
rebalance, initialization) in units with a rate cap, run events, events ordered by (time,
kind, sequence), open loop or closed loop by streams with phases, and per-drive statistics in
time bins.

The layout kernels' planning (normal, degraded, rebuild and initialization fan-out) is used as
it is (tests/test_layout.py checks it separately); everything else is written here with heapq,
lists, dicts and OrderedDicts, independently of kernels/engine/. ``simulate`` runs a ``_Sim``,
whose methods follow the kernel's seams; its data, the layout planning over pieces, the cache's
LRU lists and the host schedulers are in tests/reference/engine_parts.py."""

from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from blocklab.kernels.engine import tables as T
from blocklab.kernels.layout import raid as R

from .engine_parts import (
    KEY,
    PPM,
    Cache,
    Job,
    Maps,
    Op,
    Result,
    add_ops,
    append,
    hit_of,
    mask,
    pick_host,
    pieces,
    plan_parts,
)

DONE, RETRY, XFER, CTRL, TIMER, FAIL, TASK, ARRIVE, JOB = range(9)
DESTAGE, PREFETCH, REBUILD, INIT, REBALANCE = 1, 2, 3, 5, 6
# event codes, as traces/schema.py EVENT_NAMES lists them
(FAILURE, REBUILD_START, REBUILD_PROGRESS, REBUILD_END, DATA_LOSS, REPLACE, REBALANCE_START,
 REBALANCE_END, INIT_START, INIT_END, REBALANCE_PROGRESS, INIT_PROGRESS,
 REBUILD_STOPPED) = range(13)


def simulate(arr, arrive_ns, lba, nsec, is_write, per_op_ns, per_sector_ns, closed=False,
             outstanding=1, think_ns=0, ctrl_ns=0, path_ps=0, bus_ps=0, stream=None,
             phase=None, interval_ns=1_000_000_000, cache_lines=0, line_sectors=64,
             write_back=True, ra_sectors=0, flush_start=0.8, flush_stop=0.8,
             flush_age_ns=10_000_000_000, destage_depth=0, tasks=None,
             drain=True, max_passes=1) -> Result:
    """The plain-Python engine (module docstring); the state of one run is a ``_Sim``."""
    return _Sim(arr, arrive_ns, lba, nsec, is_write, per_op_ns, per_sector_ns, closed,
                outstanding, think_ns, ctrl_ns, path_ps, bus_ps, stream, phase, interval_ns,
                cache_lines, line_sectors, write_back, ra_sectors, flush_start, flush_stop,
                flush_age_ns, destage_depth, tasks, drain, max_passes).run()


class _Sim:
    """One run of the reference engine: its state as attributes, its steps as methods (the
    kernel's own seams: statistics, the closed loop, the request path, the controller cache,
    failures and tasks, the drives' queues), and ``run``, the event loop."""

    def __init__(self, arr, arrive_ns, lba, nsec, is_write, per_op_ns, per_sector_ns, closed,
                 outstanding, think_ns, ctrl_ns, path_ps, bus_ps, stream, phase, interval_ns,
                 cache_lines, line_sectors, write_back, ra_sectors, flush_start, flush_stop,
                 flush_age_ns, destage_depth, tasks, drain, max_passes):
        """``simulate``'s arguments (its defaults): the run's inputs, then its state."""
        self.arr = arr
        self.arrive_ns = arrive_ns
        self.lba = lba
        self.nsec = nsec
        self.is_write = is_write
        self.per_op_ns = per_op_ns
        self.per_sector_ns = per_sector_ns
        self.closed = closed
        self.outstanding = outstanding
        self.think_ns = think_ns
        self.ctrl_ns = ctrl_ns
        self.path_ps = path_ps
        self.bus_ps = bus_ps
        self.stream = stream
        self.phase = phase
        self.interval_ns = interval_ns
        self.cache_lines = cache_lines
        self.line_sectors = line_sectors
        self.write_back = write_back
        self.ra_sectors = ra_sectors
        self.flush_start = flush_start
        self.flush_stop = flush_stop
        self.flush_age_ns = flush_age_ns
        self.destage_depth = destage_depth
        self.tasks = tasks
        self.drain = drain
        self.max_passes = max_passes
        self.n = len(self.arrive_ns)
        # closed loop, max_passes > 1: the trace runs again while tasks remain (start_pass); the
        # per-request inputs are lists that each pass extends, request k x n + r being pass k's r
        self.arrive_ns, self.lba, self.nsec, self.is_write = (
            list(np.asarray(x)) for x in (self.arrive_ns, self.lba, self.nsec,
                                                                          self.is_write))
        self.drives = len(self.arr.d_model)
        self.maxinf = [int(x) for x in self.arr.d_maxinf]
        self.host_q: list[deque[Op]] = [deque() for _ in range(self.drives)]
        self.back_q: list[deque[Op]] = [deque() for _ in range(self.drives)]
        self.credit = [0] * self.drives
        self.inflight = [0] * self.drives
        self.failed: set[int] = set()  # drives gone and not yet replaced
        self.head_pos = [0] * self.drives
        self.aged = [[0] for _ in range(self.drives)]  # picks left in an aged batch
        self.res = Result([-1] * self.n, [-1] * self.n, [-1] * self.n, [0] * self.drives,
                          [0] * self.drives)
        self.res.qint = [dict() for _ in range(self.drives)]
        self.res.busy_bins = [dict() for _ in range(self.drives)]
        self.res.hit = [0] * self.n
        self.at_drive = [0] * self.drives
        self.t_change = [0] * self.drives
        self.pending: dict[int, int] = {}
        self.waiting: dict[int, list[Op]] = {}
        self.events: list[tuple[int, int, int, object]] = []
        self.seq = 0
        self.done_count = 0
        self.free = {"ctrl": 0, "path": 0, "bus": 0}
        self.maps = Maps(self.arr)
        # the controller cache
        self.ls = line_sectors
        self.cache = Cache(self.cache_lines)
        self.depth = destage_depth or 2 * self.drives
        self.fl_start = max(1, int(flush_start * self.cache_lines))
        self.fl_stop = int(flush_stop * self.cache_lines)
        # the plan's tables as plain Python: failures and missing members as tuples (in the
        # dtypes' field order), tasks and pieces as dicts by field name
        self.fl = [] if tasks is None else [tuple(r) for r in tasks.FL.tolist()]
        self.af = [] if tasks is None else [tuple(r) for r in tasks.AF.tolist()]
        self.tk = [] if tasks is None else [dict(zip(T.TASK.names, r, strict=True))
                                       for r in tasks.TK.tolist()]
        self.pc = [] if tasks is None else [dict(zip(T.PIECE.names, r, strict=True))
                                       for r in tasks.PC.tolist()]
        self.maps.pc, self.maps.failed = self.pc, self.failed
        self.task_state = {"left": len(self.tk)}
        self.piece_done = [0] * len(self.pc)
        self.piece_finished: list[set[int]] = [set() for _ in self.pc]
        nj = (self.depth + 4 * len(self.arr.LN) + 64 if self.cache_lines else 1) + sum(
            t["depth"] for t in self.tk)
        self.job_ids = list(range(nj - 1, -1, -1))  # a stack: the next job is the last freed
        self.jobs: dict[int, Job] = {}
        self.ctl = {"destaging": 0, "flushing": False, "timer": None}
        self.lun_cap = [int(x) for x in self.arr.LN["cap"]]
        self.last_end = [-1] * len(self.lun_cap)
        self.ra_end = [0] * len(self.lun_cap)
        self.lun_waiters: list[list[int]] = [[] for _ in self.lun_cap]
        self.write_wait: deque[int] = deque()

        # closed loop: streams in id order, phases in value order
        zeros = np.zeros(self.n, np.int64)
        self.stream = list(zeros if self.stream is None else np.asarray(self.stream))
        self.phase = list(zeros if self.phase is None else np.asarray(self.phase))
        self.window = list(np.broadcast_to(np.asarray(outstanding), (self.n,)))
        self.think = list(np.broadcast_to(np.asarray(think_ns), (self.n,)))
        self.sids = sorted({int(x) for x in self.stream})
        self.phases = sorted({int(x) for x in self.phase})
        self.todo = {(p, s): deque(r for r in range(self.n)
                                   if self.phase[r] == p and self.stream[r] == s)
                for p in self.phases for s in self.sids}
        self.in_flight = dict.fromkeys(self.sids, 0)
        self.cur = [0, 0]  # phase index, requests of the phase not yet complete
        self.passes = [1, 0]  # passes begun, tasks left when the last one ended
        self.total = [self.n]  # requests of the passes begun

        for f, row in enumerate(self.fl):  # the failures and tasks, scheduled first
            self.push(row[0], FAIL, f)  # FAILURE: t, drive, af0, naf
        for t, row in enumerate(self.tk):
            self.push(row["t"], TASK, t)
        if self.closed:
            if self.n:
                self.start_phase(0)
        else:
            for r in range(self.n):  # open loop: after every scheduled event of the same time
                heapq.heappush(self.events, (int(self.arrive_ns[r]), ARRIVE, 1 << 60 | r, r))

    def spread(self, bins, t0, t1, w):
        while t0 < t1:
            b = t0 // self.interval_ns
            e = min(t1, (b + 1) * self.interval_ns)
            bins[b] = bins.get(b, 0) + w * (e - t0)
            t0 = e

    def count(self, d, t, delta):
        if self.at_drive[d] > 0:
            self.spread(self.res.qint[d], self.t_change[d], t, self.at_drive[d])
        self.t_change[d] = t
        self.at_drive[d] += delta

    def push(self, t, kind, ident):
        heapq.heappush(self.events, (t, kind, self.seq, ident))
        self.seq += 1

    def queue(self, o, now):
        o.qtime = now
        (self.back_q if o.share else self.host_q)[o.drive].append(o)
        self.count(o.drive, now, 1)

    def event(self, t, code, drive, ref, frac=0, nbytes=0, lost=0):
        self.res.events.append((t, code, drive, ref, frac, nbytes, lost))

    def start_pass(self, t):
        """Pass k + 1 of the trace: requests k x n + r, their arrival floors counted from
        t."""
        base = self.passes[0] * self.n
        self.passes[0] += 1
        self.total[0] += self.n
        for col in (self.lba, self.nsec, self.is_write, self.stream, self.phase, self.window,
                    self.think):
            col.extend(col[:self.n])
        self.arrive_ns.extend(t + int(a) for a in self.arrive_ns[:self.n])
        for lst, v in ((self.res.arrive, -1), (self.res.start, -1), (self.res.done, -1),
                       (self.res.hit, 0)):
            lst.extend([v] * self.n)
        for (p, s), q in self.todo.items():
            q.extend(base + r for r in range(self.n) if self.phase[r] == p and self.stream[r] == s)

    def issue(self, s, t):
        q = self.todo[(self.phases[self.cur[0]], s)]
        while q and self.in_flight[s] < self.window[q[0]]:
            r = q.popleft()
            self.in_flight[s] += 1
            at = max(t + int(self.think[r]), int(self.arrive_ns[r]))
            heapq.heappush(self.events, (at, ARRIVE, r, r))

    def start_phase(self, t):
        p = self.phases[self.cur[0]]
        self.cur[1] = sum(1 for r in range(self.n) if self.phase[r] == p)  # as many in every pass
        for s in self.sids:
            self.issue(s, t)

    def finish(self, r, now):
        self.res.done[r] = now
        self.done_count += 1
        if self.closed:
            s = int(self.stream[r])
            self.in_flight[s] -= 1
            self.cur[1] -= 1
            self.issue(s, now)
            if self.cur[1] == 0 and self.cur[0] + 1 < len(self.phases):
                self.cur[0] += 1
                self.start_phase(now)
            elif self.cur[1] == 0:  # the pass is over: again while tasks remain
                if self.passes[0] < self.max_passes and self.task_state["left"] > 0:
                    self.start_pass(now)
                    self.cur[0] = 0
                    self.start_phase(now)
                else:
                    self.passes[1] = self.task_state["left"]

    def links(self, r, now):
        self.free["path"] = max(now, self.free["path"]) + (
            int(self.nsec[r]) * 512 * self.path_ps + 999) // 1000
        return self.free["path"]

    def send_out(self, r, now):
        if self.path_ps > 0:
            self.push(self.links(r, now), XFER, r)
        else:
            self.finish(r, now)

    def launch(self, item, ops, now):
        first = 0 if any(o.phase == 0 for o in ops) else 1
        now_ops = [o for o in ops if o.phase == first]
        later = [o for o in ops if o.phase != first]
        if item >= 0:
            self.pending[item] = len(now_ops)
            self.waiting[item] = later
        else:
            self.jobs[-item - 1].pending = len(now_ops)
            self.jobs[-item - 1].later = later
        for o in now_ops:
            self.queue(o, now)

    def to_drives(self, r, now):
        parts = pieces(self.arr, int(self.lba[r]), int(self.nsec[r]))
        ops = plan_parts(self.arr, self.maps, r, parts, int(self.is_write[r]))
        self.res.start[r] = -1
        self.res.hit[r] = hit_of(self.arr, self.maps, self.lba[r], self.nsec[r])
        if not ops:
            self.res.start[r] = now
            self.finish(r, now)
            return
        self.launch(r, ops, now)

    def line_parts(self, r):
        """(key, bits, lun, line index) of every cache line request r touches, in order."""
        out = []
        for lun, a, m in pieces(self.arr, int(self.lba[r]), int(self.nsec[r])):
            for k in range(a // self.ls, (a + m - 1) // self.ls + 1):
                lo = max(a, k * self.ls) - k * self.ls
                hi = min(a + m, (k + 1) * self.ls) - k * self.ls
                out.append((lun * KEY + k, mask(lo, hi), lun, k))
        return out

    def lookup(self, r):
        status, wlun = "hit", None
        for key, bits, lun, _k in self.line_parts(r):
            ln = self.cache.lines.get(key)
            if ln is None:
                return "miss", None
            if ln.valid & bits != bits:
                if ln.job is not None and self.jobs[ln.job].kind == PREFETCH:
                    if status == "hit":
                        status, wlun = "filling", lun
                else:
                    return "miss", None
        return status, wlun

    def store(self, r, dirty, now):
        for key, bits, _lun, _k in self.line_parts(r):
            ln = self.cache.lines.get(key)
            if ln is None:
                if self.cache.room() == 0:
                    continue
                ln = self.cache.take(key)
                if dirty:
                    self.cache.write(key, bits, now)
                else:
                    ln.valid = bits
                    self.cache.to_clean(key)
            elif dirty:
                self.cache.write(key, bits, now)
            else:
                ln.valid |= bits
                self.cache.touch(key)

    def fits(self, r):
        parts = self.line_parts(r)
        missing = sum(1 for key, *_ in parts if key not in self.cache.lines)
        clean = sum(1 for key, *_ in parts if key in self.cache.clean)
        if self.cache.room() - clean < missing:
            return False
        for key, *_ in parts:
            self.cache.touch(key)
        return True

    def new_job(self, kind, a, b, c):
        j = self.job_ids.pop()
        self.jobs[j] = Job(kind, a, b, c)
        return j

    def cache_job_ops(self, j, write, now):
        jb = self.jobs[j]
        ops = plan_parts(self.arr, self.maps, -j - 1, [(jb.a, jb.b, jb.c)], write)
        if ops:
            self.launch(-j - 1, ops, now)
        else:  # its data all on failed members: done, an event later
            self.push(now, JOB, j)

    def prefetch(self, lun, now):
        a = self.ra_end[lun]
        m = min(self.ra_sectors, self.lun_cap[lun] - a)
        if m <= 0:
            return False
        keys = [lun * KEY + k for k in range(a // self.ls, (a + m - 1) // self.ls + 1)]
        missing = [key for key in keys if key not in self.cache.lines]
        if not missing:
            self.ra_end[lun] = a + m
            return True
        # its own clean lines are not evicted for it
        own = set(keys)
        own_clean = sum(1 for key in keys if key in self.cache.clean)
        if self.cache.room() - own_clean < len(missing) or not self.job_ids:
            return False
        j = self.new_job(PREFETCH, lun, a, m)
        for key in missing:
            self.cache.take(key, own)
            self.cache.hold(key, j)
        self.ra_end[lun] = a + m
        self.cache_job_ops(j, 0, now)
        return True

    def sequential(self, r, now):
        for lun, a, m in pieces(self.arr, int(self.lba[r]), int(self.nsec[r])):
            seq_read = a == self.last_end[lun]
            self.last_end[lun] = a + m
            if seq_read and self.ra_sectors > 0:
                self.ra_end[lun] = max(self.ra_end[lun], a + m)
                while self.ra_end[lun] - (a + m) < self.ra_sectors and self.prefetch(lun, now):
                    pass

    def read(self, r, now):
        if not self.cache_lines:
            self.to_drives(r, now)
            return
        status, wlun = self.lookup(r)
        if status == "hit":
            self.res.start[r] = now
            self.res.hit[r] = hit_of(self.arr, self.maps, self.lba[r], self.nsec[r])
            for key, *_ in self.line_parts(r):
                self.cache.touch(key)
            self.send_out(r, now)
        elif status == "filling":
            self.lun_waiters[wlun].append(r)
        else:
            self.to_drives(r, now)

    def destage_one(self, now):
        key = next(iter(self.cache.dirty))
        lun, k = divmod(key, KEY)
        e = int(self.arr.LN["ext0"][lun]) + (k * self.ls) // int(self.arr.LN["ext_sect"][lun])
        kind, width, unit, _ds = self.maps.geom[self.maps.rows[int(self.arr.EX["row"][e])]["geom"]]
        stripe = unit * int(R.data_drives(kind, width))
        stripe *= max(1, 8192 // stripe)  # whole stripes, up to 4 MiB at once
        s0 = (k * self.ls) // stripe * stripe
        lo_k, hi_k = s0 // self.ls, (s0 + stripe - 1) // self.ls
        k0 = k
        while k0 > lo_k and lun * KEY + k0 - 1 in self.cache.dirty:
            k0 -= 1
        k1 = k
        while k1 < hi_k and lun * KEY + k1 + 1 in self.cache.dirty:
            k1 += 1
        first = self.cache.lines[lun * KEY + k0].dirty
        last = self.cache.lines[lun * KEY + k1].dirty
        assert first and last, "a cache line on the dirty list has no dirty sectors"
        a = k0 * self.ls + (first & -first).bit_length() - 1
        e = k1 * self.ls + last.bit_length()
        j = self.new_job(DESTAGE, lun, a, e - a)
        for kk in range(k0, k1 + 1):
            self.cache.hold(lun * KEY + kk, j)
        self.ctl["destaging"] += 1
        self.cache_job_ops(j, 1, now)

    def destage(self, now):
        if not self.cache_lines or not self.write_back:
            return
        if self.cache.ndirty >= self.fl_start:
            self.ctl["flushing"] = True
        elif self.cache.ndirty <= self.fl_stop:
            self.ctl["flushing"] = False
        while self.ctl["destaging"] < self.depth and self.cache.dirty and self.job_ids:
            head = self.cache.lines[next(iter(self.cache.dirty))]
            if not (self.ctl["flushing"] or now - head.dirty_t >= self.flush_age_ns):
                break
            self.destage_one(now)
        if self.cache.dirty and self.ctl["timer"] is None:
            t = self.cache.lines[next(iter(self.cache.dirty))].dirty_t + self.flush_age_ns
            if t > now:
                self.ctl["timer"] = t
                self.push(t, TIMER, 0)

    def cache_write(self, r, now):
        self.store(r, True, now)
        self.res.start[r] = now
        self.res.hit[r] = hit_of(self.arr, self.maps, self.lba[r], self.nsec[r])
        self.finish(r, now)

    def write_in(self, r, now):
        if self.cache_lines and self.write_back and len(self.line_parts(r)) <= self.cache_lines:
            if not self.write_wait and self.fits(r):
                self.cache_write(r, now)
            else:
                self.write_wait.append(r)
            self.destage(now)
            return
        self.to_drives(r, now)

    def cache_job_done(self, j, now):
        jb = self.jobs.pop(j)
        for k in range(jb.b // self.ls, (jb.b + jb.c - 1) // self.ls + 1):
            key = jb.a * KEY + k
            ln = self.cache.lines.get(key)
            if ln is None or ln.job != j:
                continue
            ln.job = None
            if jb.kind == DESTAGE:
                if ln.rewritten:
                    ln.rewritten = False
                    ln.dirty_t = now
                    self.cache.dirty[key] = None
                else:
                    ln.dirty = 0
                    self.cache.ndirty -= 1
                    self.cache.clean[key] = None
            else:
                lo = max(jb.b, k * self.ls) - k * self.ls
                hi = min(jb.b + jb.c, (k + 1) * self.ls) - k * self.ls
                ln.valid |= mask(lo, hi)
                if ln.dirty:
                    ln.rewritten = False
                    ln.dirty_t = now
                    self.cache.dirty[key] = None
                else:
                    self.cache.clean[key] = None
        self.job_ids.append(j)
        while self.write_wait and self.fits(self.write_wait[0]):
            self.cache_write(self.write_wait.popleft(), now)
        if jb.kind == DESTAGE:
            self.ctl["destaging"] -= 1
        else:
            for r in self.lun_waiters[jb.a]:
                self.push(now, RETRY, r)
            self.lun_waiters[jb.a] = []
        self.destage(now)


    # -- failures and tasks

    def alive(self, ops):
        """The operations of a second phase whose drives have not failed since they were
        planned: one to a drive gone is not sent (its data is in the parity or the mirror copy
        the others write)."""
        return [o for o in ops if o.drive not in self.failed]

    def fail(self, f, now):
        t_, d, af0, naf = self.fl[f]
        self.failed.add(d)
        self.event(now, FAILURE, d, -1)
        lost = sum(self.maps.lose(row, k, d) for row, k in self.af[af0:af0 + naf])
        if lost > 0:
            self.event(now, DATA_LOSS, d, -1, 0, 0, lost)

    def task_start(self, t, now):
        row = self.tk[t]
        row["state"] = 1
        row["t0"] = now
        kind = row["kind"]
        if kind == REBALANCE:
            self.failed.discard(row["drive"])
            self.event(now, REPLACE, row["drive"], t)
        code = {REBUILD: REBUILD_START, REBALANCE: REBALANCE_START, INIT: INIT_START}[kind]
        self.event(now, code, row["drive"], t)
        if kind == REBUILD:
            for p in range(row["p0"], row["p0"] + row["np"]):
                if self.pc[p]["dst"] in self.failed:
                    continue  # its spare failed first
                r, k = self.pc[p]["row"], self.pc[p]["k"]
                self.maps.rows[r]["mem"][k] = (self.pc[p]["dst"], self.pc[p]["doff"])
                for m in self.maps.rows[r]["miss"]:
                    if m[0] == k:
                        m[1] = 0
        if row["units"] == 0:
            self.task_end(t, now)
            return
        if kind == REBALANCE:  # host writes to these pieces go to their new drives too
            for p in range(row["p0"], row["p0"] + row["np"]):
                if self.pc[p]["rows"] > 0:
                    self.maps.copy_slot(self.pc[p]["row"], None, p)
        for _i in range(row["depth"]):
            self.task_issue(t, now)

    def task_end(self, t, now):
        row = self.tk[t]
        row["state"] = 2
        self.task_state["left"] -= 1
        code = {REBUILD: REBUILD_END, REBALANCE: REBALANCE_END, INIT: INIT_END}[row["kind"]]
        frac = PPM
        if row["lost"] > 0:  # part had nothing left to be rebuilt from: stopped, data lost
            code = REBUILD_STOPPED
            frac = row["bdone"] * PPM // (row["bdone"] + row["lost"])
        self.event(now, code, row["drive"], t, frac, row["bdone"])

    def task_issue(self, t, now):
        row = self.tk[t]
        while row["next"] < row["units"]:
            if row["rate"] > 0:
                allowed = row["t0"] + row["bytes"] * 1_000_000_000 // row["rate"]
                if now < allowed:
                    self.push(allowed, TASK, t)
                    return
            u = row["next"]
            p = row["p0"] + u % row["np"]
            idx = u // row["np"]
            if idx - self.piece_done[p] >= 63:  # the kernel's UNIT_WINDOW (its mask's bits)
                row["wait"] += 1
                return
            row["next"] += 1
            row["infl"] += 1
            a = idx * row["urows"]
            rows = min(row["urows"], self.pc[p]["rows"] - a)
            row["bytes"] += rows * 512
            kind = row["kind"]
            j = self.new_job(kind, t, p, idx)
            share = row["share"]
            ops: list[Op] = []
            last: dict[int, Op] = {}
            if kind == REBALANCE:
                append(Op(-j - 1, self.pc[p]["src"], self.pc[p]["soff"] + a, rows, 0, 0, share),
                       ops, last)
                append(Op(-j - 1, self.pc[p]["dst"], self.pc[p]["doff"] + a, rows, 1, 1, share),
                       ops, last)
            else:
                r = self.pc[p]["row"]
                gk, gw, gu, _ds = self.maps.geom[self.maps.rows[r]["geom"]]
                buf = np.zeros((rows // gu + 2) * (gw + 2) * R.OP_NCOLS, dtype=np.int64)
                if kind == REBUILD and self.pc[p]["dst"] in self.failed:
                    m = 0  # no spare to rebuild onto: lost
                elif kind == REBUILD:
                    m = R.plan_rebuild(gk, gw, self.pc[p]["k"], a, rows,
                                       self.maps.miss_array(r), buf)
                else:
                    m = R.plan_init(gk, gw, gu, a // gu, (rows + gu - 1) // gu, buf)
                add_ops(self.maps, r, buf, m, -j - 1, share, ops, last)
            if ops:
                self.launch(-j - 1, ops, now)
                return
            if kind == REBUILD:  # nothing survives to rebuild it from: lost
                row["lost"] += rows * 512
                row["bdone"] -= rows * 512
                self.pc[p]["lost0"] = min(a + 1, self.pc[p]["lost0"] or a + 1)  # PC_LOST0
            if self.unit_complete(j, now):
                return

    def unit_done(self, t, now):
        """A unit of task ``t`` completed (the task goes on): its next unit, then the slots
        that waited for a piece's cursor try again (the kernel's _unit_done)."""
        self.task_issue(t, now)
        row = self.tk[t]
        waiting, row["wait"] = row["wait"], 0
        for _i in range(waiting):
            if row["state"] == 2:
                break
            self.task_issue(t, now)

    def unit_complete(self, j, now):
        jb = self.jobs.pop(j)
        self.job_ids.append(j)
        t, p, idx = jb.a, jb.b, jb.c
        row = self.tk[t]
        self.piece_finished[p].add(idx)
        while self.piece_done[p] in self.piece_finished[p]:
            self.piece_finished[p].discard(self.piece_done[p])
            self.piece_done[p] += 1
        urows = row["urows"]
        done_rows = min(self.piece_done[p] * urows, self.pc[p]["rows"])
        row["bdone"] += min(urows, self.pc[p]["rows"] - idx * urows) * 512
        r, k = self.pc[p]["row"], self.pc[p]["k"]
        if row["kind"] == REBUILD:
            if self.pc[p]["lost0"]:  # not rebuilt past a lost unit: missing from there up
                done_rows = min(done_rows, self.pc[p]["lost0"] - 1)
            miss = self.maps.rows[r]["miss"]
            own = (self.maps.rows[r]["mem"][k][0] == self.pc[p]["dst"]
                   and self.pc[p]["dst"] not in self.failed)  # the member is on its spare
            for m in miss if own else []:
                if m[0] == k:
                    if done_rows >= self.pc[p]["rows"]:
                        miss.remove(m)
                    else:
                        m[1] = done_rows
                    break
        elif row["kind"] == REBALANCE and done_rows >= self.pc[p]["rows"]:
            self.maps.rows[r]["mem"][k] = (self.pc[p]["dst"], self.pc[p]["doff"])
            self.maps.copy_slot(r, p, None)
        row["done"] += 1
        row["infl"] -= 1
        units = row["units"]
        while row["prog"] < 9 and row["done"] * 10 >= (row["prog"] + 1) * units:
            row["prog"] += 1
            code = {REBUILD: REBUILD_PROGRESS, REBALANCE: REBALANCE_PROGRESS,
                    INIT: INIT_PROGRESS}[row["kind"]]
            self.event(now, code, row["drive"], t, row["done"] * PPM // units, row["bdone"])
        if row["done"] == units:
            self.task_end(t, now)
            return True
        return False

    def pick(self, d):
        """Host work first; when both queues hold work, background work first while its time
        credit is positive. Returns (op, the waiting background share when both held work)."""
        contended = self.back_q[d][0].share if (self.back_q[d] and self.host_q[d]) else 0
        if self.back_q[d] and (not self.host_q[d] or contended >= PPM or self.credit[d] > 0):
            return self.back_q[d].popleft(), contended
        return pick_host(self.host_q[d], int(self.arr.d_sched[d]), int(self.arr.d_depth[d]),
                         self.head_pos[d], int(self.arr.d_maxwait[d]), self.now,
                         self.aged[d]), contended

    def run(self) -> Result:
        """The event loop: pop the next event, act on it, start what the drives can take."""

        while self.done_count < self.total[0] or (self.drain and self.task_state["left"] > 0):
            self.now, kind, _s, ident = heapq.heappop(self.events)
            if kind == ARRIVE:
                self.res.arrive[ident] = self.now
                if self.ctrl_ns > 0:  # the controller: one command at a time
                    self.free["ctrl"] = max(self.now, self.free["ctrl"]) + self.ctrl_ns
                    self.push(self.free["ctrl"], CTRL, ident)
                    kind = None
            if kind in (ARRIVE, CTRL):
                r = ident
                if self.is_write[r]:
                    if self.path_ps > 0:  # write data in, then the cache or the drives
                        self.push(self.links(r, self.now), XFER, r)
                    else:
                        self.write_in(r, self.now)
                else:
                    if self.cache_lines:
                        self.sequential(r, self.now)
                    self.read(r, self.now)
            elif kind == XFER:
                if self.is_write[ident]:
                    self.write_in(ident, self.now)
                else:
                    self.finish(ident, self.now)
            elif kind == RETRY:
                self.read(ident, self.now)
            elif kind == TIMER:
                self.ctl["timer"] = None
                self.destage(self.now)
            elif kind == FAIL:
                self.fail(ident, self.now)
            elif kind == JOB:
                self.cache_job_done(ident, self.now)
            elif kind == TASK:
                if self.tk[ident]["state"] == 0:
                    self.task_start(ident, self.now)
                elif self.tk[ident]["state"] == 1:
                    self.task_issue(ident, self.now)
            elif kind == DONE:
                o = ident
                self.inflight[o.drive] -= 1
                self.count(o.drive, self.now, -1)
                if o.item < 0:
                    jb = self.jobs[-o.item - 1]
                    jb.pending -= 1
                    if jb.pending == 0 and jb.later:
                        later, jb.later = self.alive(jb.later), []
                        jb.pending = len(later)
                        for w in later:
                            self.queue(w, self.now)
                    if jb.pending == 0:
                        if jb.kind in (DESTAGE, PREFETCH):
                            self.cache_job_done(-o.item - 1, self.now)
                        elif not self.unit_complete(-o.item - 1, self.now):
                            self.unit_done(jb.a, self.now)
                else:
                    r = o.item
                    self.pending[r] -= 1
                    if self.pending[r] == 0 and self.waiting[r]:
                        later = self.alive(self.waiting.pop(r))
                        self.waiting[r] = []
                        self.pending[r] = len(later)
                        for w in later:
                            self.queue(w, self.now)
                    if self.pending[r] == 0:
                        if self.cache_lines:
                            self.store(r, False, self.now)
                        if not self.is_write[r]:
                            self.send_out(r, self.now)
                        else:
                            self.finish(r, self.now)
            for d in range(self.drives):
                while self.inflight[d] < self.maxinf[d] and (self.host_q[d] or self.back_q[d]):
                    o, contended = self.pick(d)
                    self.head_pos[d] = o.lba + o.n
                    done = self.now + self.per_op_ns + self.per_sector_ns * o.n
                    if self.bus_ps > 0:
                        self.free["bus"] = max(self.now, self.free["bus"]) + (
                            o.n * 512 * self.bus_ps + 999) // 1000
                        done = max(done, self.free["bus"])
                    if 0 < contended < PPM:  # the background work's share of the drive's time
                        if o.share:
                            self.credit[d] -= done - self.now
                        else:
                            self.credit[d] += (done - self.now) * contended // (PPM - contended)
                    if o.item >= 0:
                        if self.res.start[o.item] == -1:
                            self.res.start[o.item] = self.now
                        self.res.hit[o.item] &= 2  # the fixed model never hits a drive cache
                    self.res.busy[d] += done - self.now
                    self.res.ops[d] += 1
                    self.spread(self.res.busy_bins[d], self.now, done, 1)
                    self.inflight[d] += 1
                    if o.item >= 0:
                        kind_code = 0
                    else:
                        jk = self.jobs[-o.item - 1].kind
                        kind_code = jk + o.write if jk == REBUILD else jk
                    self.res.records.append((d, o.item if o.item >= 0 else -1, kind_code,
                                             o.qtime, self.now, done, o.lba, o.n))
                    heapq.heappush(self.events, (done, DONE, self.seq, o))
                    self.seq += 1
        # the queue integrals settled to the run's end, as Engine.bins: the last completion of
        # a request or of an operation still in service; those in service leave at their
        # completions, those still queued stay to the end
        pending = [(t, o.drive) for t, kind, _s, o in self.events if kind == DONE]
        end = max([max(self.res.done, default=0)] + [t for t, _d in pending]
                  + list(self.t_change))
        for d in range(self.drives):
            for t in sorted(t for t, dd in pending if dd == d):
                self.count(d, t, -1)
            self.count(d, end, 0)
        self.res.end = end
        self.res.dirty_lines = self.cache.ndirty
        self.res.maps = self.maps
        self.res.passes, self.res.tasks_at_end = self.passes
        return self.res
