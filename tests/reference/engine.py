"""Plain-Python reference of the replay engine's semantics, for the fixed drive model:
host volume striping, layout operations in two phases, first-come first-served drives, events
ordered by (time, kind: completions before arrivals, sequence), open or closed loop.

Layout planning is the (separately tested) layout kernel's; everything else is written here
with heapq and lists, independently of kernels/engine.py."""

from __future__ import annotations

import heapq
from collections import deque

import numpy as np

from blocklab.kernels.layout import raid as R

DONE, XFER, CTRL, ARRIVE = 0, 1, 2, 3
records: list[tuple[int, int, int, int, int, int]] = []  # the last run's drive operations


def simulate(arr, arrive_ns, lba, nsec, is_write, per_op_ns, per_sector_ns,
             closed=False, outstanding=1, think_ns=0, ctrl_ns=0, path_ps_per_byte=0):
    n = len(arrive_ns)
    drives = arr.drives
    queues = [deque() for _ in range(drives)]
    running = [None] * drives
    head_pos = [0] * drives
    busy = [0] * drives
    ops_count = [0] * drives
    out_arrive = [-1] * n
    out_start = [-1] * n
    out_done = [-1] * n
    pending = {}
    waiting = {}
    events = []
    seq = 0
    if closed:
        issued = min(outstanding, n)
        for r in range(issued):
            heapq.heappush(events, (0, ARRIVE, seq, r))
            seq += 1
    else:
        issued = n
        for r in range(n):
            heapq.heappush(events, (int(arrive_ns[r]), ARRIVE, -n + r, r))  # trace order
    plan = np.zeros(4096 * R.OP_NCOLS, dtype=np.int64)
    done_count = 0
    ctrl_free = 0
    path_free = 0
    records.clear()

    def xfer(r):
        return (int(nsec[r]) * 512 * path_ps_per_byte + 999) // 1000

    def finish(r, now):
        nonlocal done_count, seq, issued
        out_done[r] = now
        done_count += 1
        if closed and issued < n:
            heapq.heappush(events, (now + think_ns, ARRIVE, seq, issued))
            seq += 1
            issued += 1

    while done_count < n:
        now, kind, _s, ident = heapq.heappop(events)
        if kind == ARRIVE:
            out_arrive[ident] = now
        plan_now = False
        if kind == ARRIVE and ctrl_ns > 0:  # the controller: one command at a time
            ctrl_free = max(now, ctrl_free) + ctrl_ns
            heapq.heappush(events, (ctrl_free, CTRL, seq, ident))
            seq += 1
        elif kind in (ARRIVE, CTRL):
            if is_write[ident] and path_ps_per_byte > 0:  # write data in, then plan
                path_free = max(now, path_free) + xfer(ident)
                heapq.heappush(events, (path_free, XFER, seq, ident))
                seq += 1
            else:
                plan_now = True
        elif kind == XFER:
            if is_write[ident]:
                plan_now = True
            else:
                finish(ident, now)
        if plan_now:
            r = ident
            ops = []
            pos, end = int(lba[r]), int(lba[r] + nsec[r])
            while pos < end:
                if arr.vol_unit > 0:
                    chunk = pos // arr.vol_unit
                    piece_end = min(end, (chunk + 1) * arr.vol_unit)
                    lun = chunk % len(arr.lun_group)
                    lun_lba = (chunk // len(arr.lun_group)) * arr.vol_unit + pos % arr.vol_unit
                else:
                    piece_end, lun, lun_lba = end, 0, pos
                g = arr.lun_group[lun]
                m = R.plan_request(arr.g_kind[g], arr.g_width[g], arr.g_unit[g],
                                   arr.g_drive_sectors[g], lun_lba, piece_end - pos,
                                   int(is_write[r]), r, plan)
                for row in plan[: m * R.OP_NCOLS].reshape(m, R.OP_NCOLS):
                    ops.append((int(arr.lun_base[lun] + row[R.OP_DRIVE]), int(row[R.OP_COUNT]),
                                int(row[R.OP_PHASE]), int(row[R.OP_SECTOR])))
                pos = piece_end
            if not ops:
                out_start[r] = now
                finish(r, now)
            else:
                first = 0 if any(o[2] == 0 for o in ops) else 1
                now_ops = [o for o in ops if o[2] == first]
                waiting[r] = [o for o in ops if o[2] != first]
                pending[r] = len(now_ops)
                for d, c, _p, x in now_ops:
                    queues[d].append((r, c, x))
        elif kind == DONE:
            d = ident
            r, _c = running[d]
            running[d] = None
            pending[r] -= 1
            if pending[r] == 0:
                if waiting[r]:
                    later = waiting.pop(r)
                    waiting[r] = []
                    pending[r] = len(later)
                    for dd, c, _p, x in later:
                        queues[dd].append((r, c, x))
                elif not is_write[r] and path_ps_per_byte > 0:  # read data out, then done
                    path_free = max(now, path_free) + xfer(r)
                    heapq.heappush(events, (path_free, XFER, seq, r))
                    seq += 1
                else:
                    finish(r, now)
        for d in range(drives):
            if running[d] is None and queues[d]:
                r, c, x = pick(queues[d], int(arr.d_sched[d]), int(arr.d_depth[d]),
                               head_pos[d])
                head_pos[d] = x + c
                if out_start[r] == -1:
                    out_start[r] = now
                t = per_op_ns + per_sector_ns * c
                busy[d] += t
                ops_count[d] += 1
                records.append((d, r, now, now + t, x, c))
                running[d] = (r, c)
                heapq.heappush(events, (now + t, DONE, seq, d))
                seq += 1
    return out_arrive, out_start, out_done, busy, ops_count


def pick(queue, policy, depth, pos):
    """FCFS: the oldest. SSTF: nearest LBA to where the last operation ended. C-LOOK: lowest
    LBA at or past that point, else the lowest. Only the first ``depth`` are seen; ties: oldest."""
    if policy == 0:
        return queue.popleft()
    seen = list(queue)[:depth]
    if policy == 1:
        key = [abs(x - pos) for _r, _c, x in seen]
    else:
        key = [(0 if x >= pos else 1, x) for _r, _c, x in seen]
    i = min(range(len(seen)), key=lambda j: (key[j], j))
    item = seen[i]
    del queue[i]
    return item
