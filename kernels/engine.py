"""The replay engine (issue 3, deliverable 4; first version): an event-driven kernel that
replays requests against an array of drives and reports each request's start and completion.

Path of a request: the host volume (optional) stripes it over LUNs in ``vol_unit`` sectors;
each LUN is a group whose layout (``kernels.layout.raid``) turns the piece into drive
operations in two phases (reads that a parity update needs first, then the rest); each drive
serves its queue first come, first served, one operation at a time, with a service time from
its model. A request completes when its last operation does.

Events are ordered by (time, kind, sequence number): at equal times drive completions come
before arrivals, and within a kind the earlier scheduled first, so the same inputs always give
the same outputs. Open loop: requests arrive at their trace times. Closed loop: ``outstanding``
requests are kept in flight, each completion issuing the next request ``think_ns`` later.

Drive models (``model``): MODEL_FIXED serves an operation in ``fixed[0] + fixed[1] * sectors``
ns (for checking the engine against the plain-Python reference); MODEL_HDD uses
``kernels.drive.hdd.service`` with one state vector per drive.

Operation slots and the event heap are preallocated by the caller; the kernel returns status
FULL with the index of the next unprocessed arrival if the operation slots run out (the
caller grows them and calls again).
"""

from __future__ import annotations

import numpy as np

from blocklab.kernels._jit import njit
from blocklab.kernels.drive import hdd as H
from blocklab.kernels.layout import raid as R

MODEL_FIXED, MODEL_HDD = 0, 1
OK, FULL, FULL_RECORDS = 0, 1, 2
EV_DONE, EV_XFER, EV_CTRL, EV_ARRIVE = 0, 1, 2, 3  # kind priorities at equal times
NONE = -1


@njit(inline="always", nrt=False)
def _less(ht, hk, hs, i, j):
    if ht[i] != ht[j]:
        return ht[i] < ht[j]
    if hk[i] != hk[j]:
        return hk[i] < hk[j]
    return hs[i] < hs[j]


@njit(inline="always", nrt=False)
def _swap(ht, hk, hs, hi, i, j):
    ht[i], ht[j] = ht[j], ht[i]
    hk[i], hk[j] = hk[j], hk[i]
    hs[i], hs[j] = hs[j], hs[i]
    hi[i], hi[j] = hi[j], hi[i]


@njit(inline="always", nrt=False)
def _push(ht, hk, hs, hi, size, t, kind, seq, ident):
    if size >= ht.shape[0]:
        raise IndexError("replay: event heap full (the caller sized it too small)")
    i = size
    ht[i] = t
    hk[i] = kind
    hs[i] = seq
    hi[i] = ident
    while i > 0:
        parent = (i - 1) // 2
        if _less(ht, hk, hs, i, parent):
            _swap(ht, hk, hs, hi, i, parent)
            i = parent
        else:
            break
    return size + 1


@njit(inline="always", nrt=False)
def _pop(ht, hk, hs, hi, size):
    size -= 1
    _swap(ht, hk, hs, hi, 0, size)
    i = 0
    while True:
        left = 2 * i + 1
        right = left + 1
        m = i
        if left < size and _less(ht, hk, hs, left, m):
            m = left
        if right < size and _less(ht, hk, hs, right, m):
            m = right
        if m == i:
            break
        _swap(ht, hk, hs, hi, i, m)
        i = m
    return size


@njit(nrt=False)
def replay(arrive_ns, lba, nsec, is_write, out_arrive, out_start, out_done, out_hit,
           vol_unit, lun_group, lun_base, g_kind, g_width, g_unit, g_drive_sectors,
           model, fixed, hp, hzones, hcd, hct, hst,
           closed, outstanding, think_ns, ctrl_ns, path_ps_per_byte,
           op_req, op_drive, op_lba, op_n, op_write, op_phase, op_next, free_ops, scalars,
           req_pending, req_phase1, req_wait,
           q_head, q_tail, d_busy_until, d_busy_ns, d_ops, d_running,
           ht, hk, hs, hi, plan, cand, cand_flag, d_sched, d_depth, d_pos,
           record, rec_drive, rec_req, rec_start, rec_done, rec_lba, rec_n, rec_write):
    """Replay every request; fills ``out_arrive`` (the issue time: the trace's in open loop),
    ``out_start`` (first drive operation) and ``out_done`` (ns), ``out_hit`` (1 when every
    drive operation of the request was served from a drive's cache), and per-drive busy time.

    ``scalars``: [free op count, event sequence, next arrival index, heap size, requests
    done, requests issued (closed loop), controller free time, operations recorded, data path
    free time]. ``path_ps_per_byte``: the data path (host links and the internal bus, as one
    first-come first-served server) takes this many picoseconds per byte; 0 for none. Write
    data crosses it after the controller and before the drives, read data after the drives.
    With
    ``record``, every drive operation is written to the ``rec_*`` arrays (drive, request,
    start, completion, drive sector, sectors, write). Returns OK, FULL (operation slots) or
    FULL_RECORDS (record arrays): the caller grows them and calls again.
    ``ctrl_ns``: the controller's processing time per command (0: none); commands queue for
    it first come, first served, then are planned onto the drives."""
    n_req = arrive_ns.shape[0]
    nluns = lun_group.shape[0]
    free_top = scalars[0]
    seq = scalars[1]
    nxt = scalars[2]
    hsize = scalars[3]
    n_done = scalars[4]
    issued = scalars[5]
    if closed and issued == 0:
        while issued < min(outstanding, n_req):
            hsize = _push(ht, hk, hs, hi, hsize, 0, EV_ARRIVE, seq, issued)
            seq += 1
            issued += 1
    while n_done < n_req:
        if record and scalars[7] + q_head.shape[0] > rec_drive.shape[0]:
            # an event starts at most one operation per drive: room for all, or grow first
            _save(scalars, free_top, seq, nxt, hsize, n_done, issued)
            return FULL_RECORDS
        # the next event: an open-loop arrival from the trace, or the heap's top
        ncand = 0
        take_arrival = False
        if not closed and nxt < n_req:
            if hsize == 0:
                take_arrival = True
            else:
                ta = arrive_ns[nxt]
                if ta < ht[0] or (ta == ht[0] and hk[0] > EV_ARRIVE):
                    take_arrival = True
        if take_arrival:
            now = arrive_ns[nxt]
            r = nxt
            kind = EV_ARRIVE
            nxt += 1
        else:
            now = ht[0]
            kind = hk[0]
            ident = hi[0]
            hsize = _pop(ht, hk, hs, hi, hsize)
            r = ident
        if kind == EV_ARRIVE:
            out_arrive[r] = now
        plan_now = False
        if kind == EV_ARRIVE and ctrl_ns > 0:
            # the controller handles commands one at a time, ctrl_ns each
            t_ctrl = max(now, scalars[6]) + ctrl_ns
            scalars[6] = t_ctrl
            hsize = _push(ht, hk, hs, hi, hsize, t_ctrl, EV_CTRL, seq, r)
            seq += 1
        elif kind == EV_ARRIVE or kind == EV_CTRL:
            if is_write[r] != 0 and path_ps_per_byte > 0:
                # write data crosses the data path (host links, internal bus) before planning
                t_x = max(now, scalars[8]) + (nsec[r] * 512 * path_ps_per_byte + 999) // 1000
                scalars[8] = t_x
                hsize = _push(ht, hk, hs, hi, hsize, t_x, EV_XFER, seq, r)
                seq += 1
            else:
                plan_now = True
        elif kind == EV_XFER:
            if is_write[r] != 0:
                plan_now = True
            else:  # read data delivered to the host: the request completes
                n_done, hsize, seq, issued = _finish(
                    r, now, out_done, n_done, closed, issued, n_req, think_ns, ht, hk, hs, hi,
                    hsize, seq)
        if plan_now:
            # plan the request into drive operations
            worst = 0
            pos = lba[r]
            end = lba[r] + nsec[r]
            # count pieces first so that the slots cannot run out half way
            while pos < end:
                piece_end = end if vol_unit <= 0 else min(end, (pos // vol_unit + 1) * vol_unit)
                worst += plan.shape[0] // R.OP_NCOLS
                pos = piece_end
            if worst > free_top:
                _save(scalars, free_top, seq, r if not closed else nxt, hsize, n_done, issued)
                if kind != EV_ARRIVE or closed:  # put the event back
                    scalars[3] = _push(ht, hk, hs, hi, hsize, now, kind, seq, r)
                    scalars[1] = seq + 1
                    if kind != EV_ARRIVE:
                        scalars[2] = nxt
                return FULL
            out_start[r] = NONE
            req_pending[r] = 0
            out_hit[r] = 1
            req_phase1[r] = 0
            first_op = NONE
            last_op = NONE
            count = 0
            pos = lba[r]
            while pos < end:
                if vol_unit > 0:
                    chunk = pos // vol_unit
                    piece_end = min(end, (chunk + 1) * vol_unit)
                    lun = chunk % nluns
                    lun_lba = (chunk // nluns) * vol_unit + pos % vol_unit
                else:
                    piece_end = end
                    lun = 0
                    lun_lba = pos
                g = lun_group[lun]
                m = R.plan_request(g_kind[g], g_width[g], g_unit[g], g_drive_sectors[g],
                                   lun_lba, piece_end - pos, is_write[r], r, plan)
                for j in range(m):
                    o = j * R.OP_NCOLS
                    free_top -= 1
                    s = free_ops[free_top]
                    op_req[s] = r
                    op_drive[s] = lun_base[lun] + plan[o + R.OP_DRIVE]
                    op_lba[s] = plan[o + R.OP_SECTOR]
                    op_n[s] = plan[o + R.OP_COUNT]
                    op_write[s] = plan[o + R.OP_WRITE]
                    op_phase[s] = plan[o + R.OP_PHASE]
                    op_next[s] = NONE
                    if first_op == NONE:
                        first_op = s
                    else:
                        op_next[last_op] = s  # the request's own list (reused as queue link)
                    last_op = s
                    count += 1
                    if plan[o + R.OP_PHASE] == 0:
                        req_pending[r] += 1
                    else:
                        req_phase1[r] += 1
                pos = piece_end
            # walk the request's operations (their links become queue links): queue the phase
            # that can start now, keep the others on the request's wait list, in order
            phase_now = 0 if req_pending[r] > 0 else 1
            if phase_now == 1:
                req_pending[r] = req_phase1[r]
                req_phase1[r] = 0
            req_wait[r] = NONE
            wait_tail = NONE
            s = first_op
            while s != NONE:
                s_next = op_next[s]
                op_next[s] = NONE
                if op_phase[s] == phase_now:
                    _enqueue(s, op_drive, op_next, q_head, q_tail)
                    ncand = _candidate(op_drive[s], d_running, cand, cand_flag, ncand)
                elif wait_tail == NONE:
                    req_wait[r] = s
                    wait_tail = s
                else:
                    op_next[wait_tail] = s
                    wait_tail = s
                s = s_next
            if count == 0:  # nothing to do (zero-length): completes at once
                out_start[r] = now
                n_done, hsize, seq, issued = _finish(
                    r, now, out_done, n_done, closed, issued, n_req, think_ns, ht, hk, hs, hi,
                    hsize, seq)
        elif kind == EV_DONE:
            # a drive finished its operation
            d = r
            s = d_running[d]
            d_running[d] = NONE
            if q_head[d] != NONE:
                ncand = _candidate(d, d_running, cand, cand_flag, ncand)
            rq = op_req[s]
            req_pending[rq] -= 1
            free_ops[free_top] = s
            free_top += 1
            if req_pending[rq] == 0:
                if req_phase1[rq] > 0:
                    # phase 0 done: queue the waiting phase-1 operations, in planning order
                    req_pending[rq] = req_phase1[rq]
                    req_phase1[rq] = 0
                    w = req_wait[rq]
                    req_wait[rq] = NONE
                    while w != NONE:
                        w_next = op_next[w]
                        op_next[w] = NONE
                        _enqueue(w, op_drive, op_next, q_head, q_tail)
                        ncand = _candidate(op_drive[w], d_running, cand, cand_flag, ncand)
                        w = w_next
                elif is_write[rq] == 0 and path_ps_per_byte > 0:
                    # read data crosses the data path to the host before completion
                    t_x = max(now, scalars[8]) + (nsec[rq] * 512 * path_ps_per_byte + 999) // 1000
                    scalars[8] = t_x
                    hsize = _push(ht, hk, hs, hi, hsize, t_x, EV_XFER, seq, rq)
                    seq += 1
                else:
                    n_done, hsize, seq, issued = _finish(
                        rq, now, out_done, n_done, closed, issued, n_req, think_ns, ht, hk, hs,
                        hi, hsize, seq)
        # start every idle drive that has work, in drive order (deterministic); only drives
        # that became idle-with-work during this event can be such, so only they are looked at
        for i in range(1, ncand):  # insertion sort: a handful of candidates
            x = cand[i]
            j = i - 1
            while j >= 0 and cand[j] > x:
                cand[j + 1] = cand[j]
                j -= 1
            cand[j + 1] = x
        for i in range(ncand):
            d = cand[i]
            cand_flag[d] = 0
            if d_running[d] == NONE and q_head[d] != NONE:
                s = _pick(d, q_head, q_tail, op_next, op_lba, d_sched, d_depth, d_pos)
                d_pos[d] = op_lba[s] + op_n[s]
                rq = op_req[s]
                if out_start[rq] == NONE:
                    out_start[rq] = now
                if model == MODEL_FIXED:
                    done = now + fixed[0] + fixed[1] * op_n[s]
                    out_hit[rq] = 0
                else:
                    t_ms, hit = H.service(hp, hzones, hcd, hct, hst, d, now / 1e6, op_lba[s],
                                          op_n[s], op_write[s] != 0)
                    if hit == 0:
                        out_hit[rq] = 0
                    done = int(np.ceil(t_ms * 1e6))
                    if done < now:
                        done = now
                d_busy_ns[d] += done - now
                d_ops[d] += 1
                if record:
                    k = scalars[7]
                    rec_drive[k] = d
                    rec_req[k] = rq
                    rec_start[k] = now
                    rec_done[k] = done
                    rec_lba[k] = op_lba[s]
                    rec_n[k] = op_n[s]
                    rec_write[k] = op_write[s]
                    scalars[7] = k + 1
                d_running[d] = s
                hsize = _push(ht, hk, hs, hi, hsize, done, EV_DONE, seq, d)
                seq += 1
    _save(scalars, free_top, seq, nxt, hsize, n_done, issued)
    return OK


SCHED_FCFS, SCHED_SSTF, SCHED_CLOOK = 0, 1, 2


@njit(inline="always", nrt=False)
def _save(scalars, free_top, seq, nxt, hsize, n_done, issued):
    """Keep the loop's state in ``scalars`` so that a call after FULL resumes it."""
    scalars[0] = free_top
    scalars[1] = seq
    scalars[2] = nxt
    scalars[3] = hsize
    scalars[4] = n_done
    scalars[5] = issued


@njit(inline="always", nrt=False)
def _finish(r, now, out_done, n_done, closed, issued, n_req, think_ns, ht, hk, hs, hi, hsize,
            seq):
    """Request ``r`` completes at ``now``; in closed loop the next request is issued
    ``think_ns`` later. Returns (requests done, heap size, sequence, requests issued)."""
    out_done[r] = now
    n_done += 1
    if closed and issued < n_req:
        hsize = _push(ht, hk, hs, hi, hsize, now + think_ns, EV_ARRIVE, seq, issued)
        seq += 1
        issued += 1
    return n_done, hsize, seq, issued


@njit(inline="always", nrt=False)
def _pick(d, q_head, q_tail, op_next, op_lba, d_sched, d_depth, d_pos):
    """Take the next operation off drive ``d``'s queue. The drive sees the first
    ``d_depth[d]`` queued operations (its command queue; the rest wait in the controller's
    FIFO) and picks one: FCFS the oldest; SSTF the one nearest the head (by LBA distance from
    where the last operation ended); C-LOOK the lowest LBA at or after the head, else the
    lowest. Ties go to the oldest."""
    best = q_head[d]
    best_prev = NONE
    policy = d_sched[d]
    if policy != SCHED_FCFS:
        pos = d_pos[d]
        prev = NONE
        s = q_head[d]
        k = 0
        best_key = 0
        best_wrap = 1
        while s != NONE and k < d_depth[d]:
            x = op_lba[s]
            if policy == SCHED_SSTF:
                wrap = 0
                key = x - pos if x >= pos else pos - x
            else:
                wrap = 0 if x >= pos else 1
                key = x
            if k == 0 or wrap < best_wrap or (wrap == best_wrap and key < best_key):
                best = s
                best_prev = prev
                best_key = key
                best_wrap = wrap
            prev = s
            s = op_next[s]
            k += 1
    # unlink
    if best_prev == NONE:
        q_head[d] = op_next[best]
    else:
        op_next[best_prev] = op_next[best]
    if q_tail[d] == best:
        q_tail[d] = best_prev
    op_next[best] = NONE
    return best


@njit(inline="always", nrt=False)
def _candidate(d, d_running, cand, cand_flag, ncand):
    """Note drive ``d`` as one that may have to start after this event (once)."""
    if d_running[d] == NONE and cand_flag[d] == 0:
        cand_flag[d] = 1
        cand[ncand] = d
        ncand += 1
    return ncand


@njit(inline="always", nrt=False)
def _enqueue(s, op_drive, op_next, q_head, q_tail):
    """Append operation slot ``s`` to its drive's first-come first-served queue."""
    d = op_drive[s]
    if q_tail[d] == NONE:
        q_head[d] = s
    else:
        op_next[q_tail[d]] = s
    q_tail[d] = s
