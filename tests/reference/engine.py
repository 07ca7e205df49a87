"""Plain-Python reference of the replay engine's semantics (kernels/engine.py module docstring),
for the fixed drive model: host volume striping, layout operations in two phases merged per
drive where contiguous, drives serving up to ``maxinf`` operations at once from queues with
FCFS/SSTF/C-LOOK over a depth, the controller's command time and data path, events ordered by
(time, kind, sequence), open loop or closed loop by streams with phases, and per-drive
statistics in time bins.

Layout planning is the (separately tested) layout kernel's; everything else is written here
with heapq, lists and dicts, independently of kernels/engine.py."""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from blocklab.kernels.layout import raid as R

DONE, XFER, CTRL, ARRIVE = 0, 1, 2, 3


@dataclass
class Op:
    req: int
    drive: int
    lba: int
    n: int
    write: int
    phase: int
    qtime: int = 0


@dataclass
class Result:
    arrive: list[int]
    start: list[int]
    done: list[int]
    busy: list[int]
    ops: list[int]
    records: list[tuple[int, ...]] = field(default_factory=list)  # drive, req, qtime, start,
    # done, lba, n, write (in the order they started)
    qint: list[dict[int, int]] = field(default_factory=list)  # per drive: bin -> op x ns
    busy_bins: list[dict[int, int]] = field(default_factory=list)


def plan(arr, r, lba, nsec, write):
    """The request's operations, in planning order, merged per drive where contiguous."""
    ops: list[Op] = []
    last: dict[int, Op] = {}
    pos, end = lba, lba + nsec
    plan_buf = np.zeros(8192 * R.OP_NCOLS, dtype=np.int64)
    nluns = len(arr.lun_group)
    while pos < end:
        if arr.vol_unit > 0:
            chunk = pos // arr.vol_unit
            piece_end = min(end, (chunk + 1) * arr.vol_unit)
            lun = chunk % nluns
            lun_lba = (chunk // nluns) * arr.vol_unit + pos % arr.vol_unit
        else:
            piece_end, lun, lun_lba = end, 0, pos
        g = arr.lun_group[lun]
        m = R.plan_request(arr.g_kind[g], arr.g_width[g], arr.g_unit[g], arr.g_ds[g], lun_lba,
                           piece_end - pos, write, r, plan_buf)
        for row in plan_buf[: m * R.OP_NCOLS].reshape(m, R.OP_NCOLS):
            d = int(arr.lun_base[lun] + row[R.OP_DRIVE])
            o = Op(r, d, int(row[R.OP_SECTOR]), int(row[R.OP_COUNT]), int(row[R.OP_WRITE]),
                   int(row[R.OP_PHASE]))
            p = last.get(d)
            if p is not None and (p.phase, p.write, p.lba + p.n) == (o.phase, o.write, o.lba):
                p.n += o.n
                continue
            last[d] = o
            ops.append(o)
        pos = piece_end
    return ops


def simulate(arr, arrive_ns, lba, nsec, is_write, per_op_ns, per_sector_ns, closed=False,
             outstanding=1, think_ns=0, ctrl_ns=0, path_ps_per_byte=0, stream=None,
             phase=None, interval_ns=1_000_000_000) -> Result:
    n = len(arrive_ns)
    drives = len(arr.d_model)
    maxinf = [int(x) for x in arr.d_maxinf]
    queues: list[deque[Op]] = [deque() for _ in range(drives)]
    inflight = [0] * drives
    head_pos = [0] * drives
    res = Result([-1] * n, [-1] * n, [-1] * n, [0] * drives, [0] * drives)
    res.qint = [dict() for _ in range(drives)]
    res.busy_bins = [dict() for _ in range(drives)]
    at_drive = [0] * drives
    t_change = [0] * drives
    pending: dict[int, int] = {}
    waiting: dict[int, list[Op]] = {}
    hit: dict[int, bool] = {}
    events: list[tuple[int, int, int, int]] = []
    seq = 0
    done_count = 0
    ctrl_free = 0
    path_free = 0

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

    def xfer(r, now):
        nonlocal path_free
        path_free = max(now, path_free) + (int(nsec[r]) * 512 * path_ps_per_byte + 999) // 1000
        return path_free

    def launch(r, now):
        ops = plan(arr, r, int(lba[r]), int(nsec[r]), int(is_write[r]))
        hit[r] = True
        if not ops:
            res.start[r] = now
            finish(r, now)
            return
        first = 0 if any(o.phase == 0 for o in ops) else 1
        waiting[r] = [o for o in ops if o.phase != first]
        now_ops = [o for o in ops if o.phase == first]
        pending[r] = len(now_ops)
        for o in now_ops:
            queue(o, now)

    while done_count < n:
        now, kind, _s, ident = heapq.heappop(events)
        if kind == ARRIVE:
            res.arrive[ident] = now
            if ctrl_ns > 0:  # the controller: one command at a time
                ctrl_free = max(now, ctrl_free) + ctrl_ns
                push(ctrl_free, CTRL, ident)
                kind = None
        if kind in (ARRIVE, CTRL):
            if is_write[ident] and path_ps_per_byte > 0:  # write data in, then plan
                push(xfer(ident, now), XFER, ident)
            else:
                launch(ident, now)
        elif kind == XFER:
            if is_write[ident]:
                launch(ident, now)
            else:
                finish(ident, now)
        elif kind == DONE:
            o = ident
            inflight[o.drive] -= 1
            count(o.drive, now, -1)
            r = o.req
            pending[r] -= 1
            if pending[r] == 0:
                if waiting[r]:
                    later = waiting.pop(r)
                    waiting[r] = []
                    pending[r] = len(later)
                    for w in later:
                        queue(w, now)
                elif not is_write[r] and path_ps_per_byte > 0:  # read data out, then done
                    push(xfer(r, now), XFER, r)
                else:
                    finish(r, now)
        for d in range(drives):
            while inflight[d] < maxinf[d] and queues[d]:
                o = pick(queues[d], int(arr.d_sched[d]), int(arr.d_depth[d]), head_pos[d])
                head_pos[d] = o.lba + o.n
                if res.start[o.req] == -1:
                    res.start[o.req] = now
                t = per_op_ns + per_sector_ns * o.n
                res.busy[d] += t
                res.ops[d] += 1
                spread(res.busy_bins[d], now, now + t, 1)
                inflight[d] += 1
                res.records.append((d, o.req, o.qtime, now, now + t, o.lba, o.n))
                heapq.heappush(events, (now + t, DONE, seq, o))
                seq += 1
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
