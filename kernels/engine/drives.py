"""The drives' side of the engine: per-drive statistics in time bins, the event heap's push,
drive queues, the schedulers' pick (FCFS, SSTF, C-LOOK, SPTF, aging, background share) and starting
operations on drives through their models (package docstring, points 5 and 9)."""

from __future__ import annotations

import numpy as np

from blocklab.kernels import heap as HP
from blocklab.kernels._jit import njit
from blocklab.kernels.drive import hdd as H
from blocklab.kernels.drive import ssd as SS

from .tables import (
    AGED_BATCH,
    B_BUSY,
    B_BYTES,
    B_OPS,
    B_QINT,
    D_AGED,
    D_BQHEAD,
    D_BUSY,
    D_CANDF,
    D_CNT,
    D_CREDIT,
    D_DEPTH,
    D_INFLIGHT,
    D_MAXINF,
    D_MAXWAIT,
    D_MODEL,
    D_MPARAM,
    D_NOPS,
    D_POS,
    D_QHEAD,
    D_QTAIL,
    D_SCHED,
    D_TLAST,
    HIT_LOST,
    HK_DONE,
    J_KIND,
    JOB_REBUILD,
    MODEL_FIXED,
    MODEL_HDD,
    MODEL_SSD,
    NONE,
    O_DRIVE,
    O_ITEM,
    O_LBA,
    O_N,
    O_NEXT,
    O_PANG,
    O_PC,
    O_PH,
    O_PQA,
    O_PZB,
    O_QTIME,
    O_SHARE,
    O_WRITE,
    PPM,
    RANK_MAX,
    RC_DONE,
    RC_DRIVE,
    RC_HIT,
    RC_ITEM,
    RC_KIND,
    RC_LBA,
    RC_N,
    RC_QTIME,
    RC_START,
    RC_WRITE,
    RQ_O_HIT,
    RQ_O_START,
    RQ_ROW,
    S_BINS_END,
    S_BUS_FREE,
    S_HSIZE,
    S_INTERVAL,
    S_NB,
    S_REC,
    S_SEQ,
    SCHED_FCFS,
    SCHED_SPTF,
    SCHED_SSTF,
    SECTOR,
)

# ---------------------------------------------------------------------------------------------
# per-drive statistics in time bins


@njit(nrt=False, noinline=True)  # rarely called: not copied into every caller (kernels/_jit.py)
def _fit(W, t):
    """Make the bins reach time ``t`` (merge pairs and double the interval as needed)."""
    BN = W.BN
    nd = W.DR.shape[0]
    nb = W.S[S_NB]
    while t >= nb * W.S[S_INTERVAL]:
        for d in range(nd):
            base = d * nb
            for r in range(4):
                for b in range(nb // 2):
                    BN[r, base + b] = BN[r, base + 2 * b] + BN[r, base + 2 * b + 1]
                for b in range(nb // 2, nb):
                    BN[r, base + b] = 0
        W.S[S_INTERVAL] *= 2
    W.S[S_BINS_END] = nb * W.S[S_INTERVAL]


@njit(forceinline=True, nrt=False)
def _spread(BN, row, base, iv, t0, t1, weight):
    """Add ``weight`` x the overlap of [t0, t1) with each bin."""
    b = t0 // iv
    while t0 < t1:
        edge = (b + 1) * iv
        e = t1 if t1 < edge else edge
        BN[row, base + b] += weight * (e - t0)
        t0 = e
        b += 1


@njit(forceinline=True, nrt=False)
def _count(W, d, t, delta):
    """The operations at drive ``d`` change by ``delta`` at ``t``: integrate the old count."""
    DR = W.DR
    if t >= W.S[S_BINS_END]:
        _fit(W, t)
    if DR[d, D_CNT] > 0 and t > DR[d, D_TLAST]:
        _spread(W.BN, B_QINT, d * W.S[S_NB], W.S[S_INTERVAL], DR[d, D_TLAST], t,
                DR[d, D_CNT])
    DR[d, D_TLAST] = t
    DR[d, D_CNT] += delta


# ---------------------------------------------------------------------------------------------
# events and drive queues


@njit(forceinline=True, nrt=False)
def _push(W, t, kind, ident):
    W.S[S_HSIZE] = HP.push(W.HQ, W.S[S_HSIZE], t, kind, W.S[S_SEQ], ident)
    W.S[S_SEQ] += 1


@njit(forceinline=True, nrt=False)
def _enqueue(W, s, now):
    """Append operation ``s`` to its drive's queue (host or background)."""
    OP = W.OP
    DR = W.DR
    d = OP[s, O_DRIVE]
    OP[s, O_NEXT] = NONE
    OP[s, O_QTIME] = now
    OP[s, O_PZB] = NONE  # (its place on the platter: not asked yet)
    h = D_QHEAD if OP[s, O_SHARE] == 0 else D_BQHEAD
    if DR[d, h + 1] == NONE:  # the tail follows the head (D_QTAIL, D_BQTAIL)
        DR[d, h] = s
    else:
        OP[DR[d, h + 1], O_NEXT] = s
    DR[d, h + 1] = s
    _count(W, d, now, 1)


@njit(forceinline=True, nrt=False)
def _candidate(W, d, ncand):
    """Note drive ``d`` as one that may start after this event (once)."""
    DR = W.DR
    if DR[d, D_CANDF] == 0 and DR[d, D_INFLIGHT] < DR[d, D_MAXINF]:
        DR[d, D_CANDF] = 1
        W.CAND[ncand] = d
        ncand += 1
    return ncand


@njit(forceinline=True, nrt=False)
def _hdd_tables(M, m):
    """HDD parameter set ``m``'s tables: parameters, zones, seek curve (distances, times)."""
    return (M.hp[m * H.P_N:(m + 1) * H.P_N], M.hz[M.hz_off[m]:M.hz_off[m + 1]],
            M.hcd[M.hc_off[m]:M.hc_off[m + 1]], M.hct[M.ht_off[m]:M.ht_off[m + 1]])


@njit(nrt=False)
def _sptf(M, OP, DR, d, now):
    """(operation, the one before it in the queue) of the least positioning time among the
    first ``depth`` of drive ``d``'s host queue (the HDD model's ``position_ms``), the first
    in queue order among equals. A call of its own: the loop calls the drive model, which
    inlined into ``_pick`` would be compiled into the event loop once more."""
    p, zones, cd, ct = _hdd_tables(M, DR[d, D_MPARAM])
    t = now / 1e6
    # position_ms of each, in two sides: the drive's, once for the pick, and the operation's
    # place, once for its time in the queue (measured: 0.26 -> 0.45 M/s, closed 64 on the
    # bench's RAID-5; the same ranks to the last bit, as position_ms is made of the same two)
    tt, free, cyl, head, pf, got, going = H.position_state(p, zones, cd, ct, M.hst, d, t)
    best = DR[d, D_QHEAD]
    best_prev = NONE
    best_r = np.inf
    prev = NONE
    s = best
    k = 0
    depth = DR[d, D_DEPTH]
    while s != NONE and k < depth:
        if OP[s, O_PZB] == NONE:
            OP[s, O_PZB], OP[s, O_PQA], OP[s, O_PC], OP[s, O_PH], OP[s, O_PANG] = \
                H.position_place(p, zones, OP[s, O_LBA])
        r = H._position_at(p, zones, cd, ct, M.hst, d, t, tt, free, cyl, head, pf, got, going,
                           OP[s, O_QTIME] / 1e6, OP[s, O_LBA], OP[s, O_N], OP[s, O_WRITE] != 0,
                           OP[s, O_PZB], OP[s, O_PQA], OP[s, O_PC], OP[s, O_PH],
                           OP[s, O_PANG])
        if r < best_r:
            best_r = r
            best = s
            best_prev = prev
        prev = s
        s = OP[s, O_NEXT]
        k += 1
    return best, best_prev


@njit(forceinline=True, nrt=False)
def _pick(M, OP, DR, d, now):
    """Take the next operation off drive ``d``'s queues (see the module docstring, 5 and 9):
    host work first, except that when both queues hold work, background work goes first while
    its time credit is positive. Returns (operation, the waiting background work's share when both
    queues held work, else 0)."""
    h = D_QHEAD
    contended = 0
    if DR[d, D_BQHEAD] != NONE:
        if DR[d, D_QHEAD] == NONE:
            h = D_BQHEAD
        else:
            contended = OP[DR[d, D_BQHEAD], O_SHARE]
            if contended >= PPM or DR[d, D_CREDIT] > 0:
                h = D_BQHEAD
    if h == D_BQHEAD:  # background work: first come, first served
        best = DR[d, h]
        DR[d, h] = OP[best, O_NEXT]
        if DR[d, h + 1] == best:
            DR[d, h + 1] = NONE
        OP[best, O_NEXT] = NONE
        return best, contended
    best = DR[d, D_QHEAD]
    best_prev = NONE
    policy = DR[d, D_SCHED]
    maxwait = DR[d, D_MAXWAIT]
    if maxwait > 0:
        # Aging as Linux's deadline elevator does it: the oldest, once it has waited maxwait,
        # goes first and begins a batch of AGED_BATCH picks in the policy's order, and the
        # queue's age is looked at again only after the batch. Checked at every pick, an
        # overloaded drive (its oldest always past maxwait) served first come, first served
        # for good: IOPS fell as the load rose (RAID-5 of five 15K drives, C-LOOK, 1,638 IOPS
        # at 256 outstanding, 1,013 at 1,024; a review, 2026-11-29).
        if DR[d, D_AGED] > 0:
            DR[d, D_AGED] -= 1
        elif now - OP[best, O_QTIME] >= maxwait:
            policy = SCHED_FCFS  # the oldest has waited long enough: it goes first
            DR[d, D_AGED] = AGED_BATCH - 1
    if policy == SCHED_SPTF:
        if DR[d, D_MODEL] == MODEL_HDD:  # (the pipeline gives it to HDDs only; else FCFS)
            best, best_prev = _sptf(M, OP, DR, d, now)
    elif policy != SCHED_FCFS:
        # the least (wrap, key) wins, the first in queue order among equals: one integer per
        # operation (sectors and distances are far below 2**62) and selects, not branches
        # (which operation wins is as unpredictable as the addresses; the branches cost ~60 ns
        # a pick at 64 outstanding)
        pos = DR[d, D_POS]
        sstf = policy == SCHED_SSTF
        prev = NONE
        s = DR[d, D_QHEAD]
        k = 0
        best_r = RANK_MAX
        depth = DR[d, D_DEPTH]
        while s != NONE and k < depth:
            x = OP[s, O_LBA]
            below = x < pos
            if sstf:
                r = pos - x if below else x - pos
            else:
                r = x | (np.int64(below) << 62)
            take = r < best_r
            best_r = min(r, best_r)
            best = s if take else best
            best_prev = prev if take else best_prev
            prev = s
            s = OP[s, O_NEXT]
            k += 1
    if best_prev == NONE:
        DR[d, D_QHEAD] = OP[best, O_NEXT]
    else:
        OP[best_prev, O_NEXT] = OP[best, O_NEXT]
    if DR[d, D_QTAIL] == best:
        DR[d, D_QTAIL] = best_prev
    OP[best, O_NEXT] = NONE
    return best, contended


@njit(forceinline=True, nrt=False)
def _op_kind(job_kind, write):
    """traces/schema.py OPK_* of a job's operation."""
    if job_kind == JOB_REBUILD:
        return JOB_REBUILD + write  # OPK_REBUILD_READ, OPK_REBUILD_WRITE
    return job_kind


@njit(forceinline=True, nrt=False)
def _service(M, DR, d, now, queued, lba, n, write):
    """(completion ns, 1 if served from the drive's cache) of an operation started now that
    reached the drive's queue at ``queued`` (ns)."""
    m = DR[d, D_MPARAM]
    if DR[d, D_MODEL] == MODEL_FIXED:
        return now + M.fixed[2 * m] + M.fixed[2 * m + 1] * n, 0
    if DR[d, D_MODEL] == MODEL_SSD:
        return SS.service(M.sp[m * SS.P_N:(m + 1) * SS.P_N], M.sst, d, now, lba, n,
                          write != 0), 0
    p, zones, cd, ct = _hdd_tables(M, m)
    t_ms, hit = H.service_queued(p, zones, cd, ct, M.hst, d, now / 1e6, queued / 1e6, lba, n,
                                 write != 0)
    done = int(np.ceil(t_ms * 1e6))
    return (done if done > now else now), hit


@njit(forceinline=True, nrt=False)
def _start_drives(cfg, W, ncand, now):
    """Start every drive that can, in drive order (the candidates noted during the event)."""
    DR = W.DR
    OP = W.OP
    RQ = W.RQ
    S = W.S
    CAND = W.CAND
    cap = RQ.shape[0] - 1
    for i in range(1, ncand):  # insertion sort: a handful of candidates
        x = CAND[i]
        j = i - 1
        while j >= 0 and CAND[j] > x:
            CAND[j + 1] = CAND[j]
            j -= 1
        CAND[j + 1] = x
    nb = S[S_NB]
    for i in range(ncand):
        d = CAND[i]
        DR[d, D_CANDF] = 0
        while DR[d, D_INFLIGHT] < DR[d, D_MAXINF] and (DR[d, D_QHEAD] != NONE
                                                        or DR[d, D_BQHEAD] != NONE):
            s, contended = _pick(W.M, OP, DR, d, now)
            DR[d, D_POS] = OP[s, O_LBA] + OP[s, O_N]
            g = OP[s, O_ITEM]
            done, hit = _service(W.M, DR, d, now, OP[s, O_QTIME], OP[s, O_LBA], OP[s, O_N],
                                 OP[s, O_WRITE])
            if cfg.bus_ps > 0:  # the operation's data crosses the internal bus meanwhile
                tb = max(now, S[S_BUS_FREE]) + (OP[s, O_N] * SECTOR * cfg.bus_ps + 999) // 1000
                S[S_BUS_FREE] = tb
                if tb > done:
                    done = tb
            if g >= 0:
                slot = g & cap
                if RQ[slot, RQ_O_START] == NONE:
                    RQ[slot, RQ_O_START] = now
                if hit == 0:
                    RQ[slot, RQ_O_HIT] &= HIT_LOST
            if 0 < contended < PPM:  # a share of the drive's time while both wait
                if OP[s, O_SHARE] > 0:
                    DR[d, D_CREDIT] -= done - now
                else:
                    DR[d, D_CREDIT] += (done - now) * contended // (PPM - contended)
            DR[d, D_BUSY] += done - now
            DR[d, D_NOPS] += 1
            DR[d, D_INFLIGHT] += 1
            if done >= S[S_BINS_END]:
                _fit(W, done)
            iv = S[S_INTERVAL]
            bnow = d * nb + now // iv
            W.BN[B_OPS, bnow] += 1
            W.BN[B_BYTES, bnow] += OP[s, O_N] * SECTOR
            _spread(W.BN, B_BUSY, d * nb, iv, now, done, 1)
            if cfg.record:
                k = S[S_REC]
                RC = W.RC
                RC[k, RC_DRIVE] = d
                RC[k, RC_ITEM] = RQ[g & cap, RQ_ROW] if g >= 0 else NONE
                RC[k, RC_KIND] = 0 if g >= 0 else _op_kind(W.JB[-g - 1, J_KIND],
                                                             OP[s, O_WRITE])
                RC[k, RC_QTIME] = OP[s, O_QTIME]
                RC[k, RC_START] = now
                RC[k, RC_DONE] = done
                RC[k, RC_LBA] = OP[s, O_LBA]
                RC[k, RC_N] = OP[s, O_N]
                RC[k, RC_WRITE] = OP[s, O_WRITE]
                RC[k, RC_HIT] = hit
                S[S_REC] = k + 1
            _push(W, done, HK_DONE, s)
