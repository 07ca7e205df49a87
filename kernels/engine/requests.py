"""A host request's way through the engine: cutting it into pieces per LUN and planning drive
operations through the layouts, launching them in phases, the host links and controller, and
closed-loop streams and phases (package docstring, points 1, 2, 4 and 6)."""

from __future__ import annotations

from blocklab.kernels import heap as HP
from blocklab.kernels._jit import njit
from blocklab.kernels.layout import raid as R

from .drives import _candidate, _enqueue, _push
from .tables import (
    COPY_N,
    D_FAILED,
    D_LASTOP,
    EX_BASE,
    EX_ROW,
    G_DS,
    G_KIND,
    G_UNIT,
    G_WIDTH,
    HIT_LOST,
    HK_ARRIVE,
    HK_XFER,
    MP_COPY,
    MP_GROUP,
    MP_MEM,
    MP_MISS,
    NONE,
    O_DRIVE,
    O_ITEM,
    O_LBA,
    O_N,
    O_NEXT,
    O_PHASE,
    O_SHARE,
    O_WRITE,
    PC_DOFF,
    PC_DST,
    PC_K,
    RQ_ARRIVE,
    RQ_LBA,
    RQ_NSEC,
    RQ_O_DONE,
    RQ_O_HIT,
    RQ_O_START,
    RQ_OUTST,
    RQ_PENDING,
    RQ_SNEXT,
    RQ_STREAM,
    RQ_THINK,
    RQ_WRITE,
    S_FINAL,
    S_FREE_OPS,
    S_HSIZE,
    S_NDONE,
    S_NSTARVED,
    S_PASS,
    S_PASS_T0,
    S_PASSES,
    S_PATH_FREE,
    S_PHASE,
    S_PHASE_LEFT,
    S_TASKS_AT_END,
    S_TASKS_LEFT,
    S_TOTAL,
    SECTOR,
    SM_HEAD,
    SM_INFLIGHT,
    SM_LIST,
    SM_STARVED,
    SM_STARVED_T,
    SM_TAIL,
    SM_UNISSUED,
    U_EXT0,
    U_EXT_SECT,
)

# ---------------------------------------------------------------------------------------------
# planning


@njit(forceinline=True, nrt=False)
def _piece_n(cfg, nluns, pos, end):
    """The piece of host-volume sectors [pos, end) on one LUN: (lun, LUN sector, end)."""
    vu = cfg.vol_unit
    if vu > 0:
        chunk = pos // vu
        piece_end = min(end, (chunk + 1) * vu)
        return chunk % nluns, (chunk // nluns) * vu + pos % vu, piece_end
    return 0, pos, end


@njit(forceinline=True, nrt=False)
def _piece(cfg, W, pos, end):
    return _piece_n(cfg, W.LN.shape[0], pos, end)


@njit(forceinline=True, nrt=False)
def _add_ops(W, item, row, m, share, first, last):
    """Append the ``m`` operations planned in W.PLAN for member map ``row`` (members mapped to
    their drives) to the item's list (first, last), merging with its earlier operations on the
    same drive where contiguous. A write to a member whose piece is being copied to a new drive
    (the row's copy slots, a rebalance) is written there too, as md writes a replacement
    device alongside the one it replaces (drivers/md/raid1.c raid1_write_request): the copy
    then never leaves the new drive without a write made after its unit was copied."""
    PLAN = W.PLAN
    MP = W.MP
    # whether a piece of this row is being copied (a rebalance): checked once, and the copies'
    # writes planned out of line (_add_copies), so the loop below, which every host request
    # and destage runs, keeps one inlined _add_op (the same operations in the same order)
    copying = MP[row, MP_COPY] != NONE
    for i in range(MP_COPY + 1, MP_COPY + COPY_N):
        copying |= MP[row, i] != NONE
    for j in range(m):
        o = j * R.OP_NCOLS
        k = PLAN[o + R.OP_DRIVE]
        sector = PLAN[o + R.OP_SECTOR]
        cnt = PLAN[o + R.OP_COUNT]
        w = PLAN[o + R.OP_WRITE]
        ph = PLAN[o + R.OP_PHASE]
        first, last = _add_op(W, item, MP[row, MP_MEM + 2 * k],
                              MP[row, MP_MEM + 2 * k + 1] + sector, cnt, w, ph, share, first,
                              last)
        if w != 0 and copying:
            first, last = _add_copies(W, item, row, k, sector, cnt, w, ph, share, first, last)
    return first, last


@njit(nrt=False, noinline=True)  # only while a rebalance copies: kept out of the hot loop
def _add_copies(W, item, row, k, sector, cnt, w, ph, share, first, last):
    """The write of member ``k`` of map row ``row`` (``_add_ops``) to the drives its piece is
    being copied to, in copy-slot order."""
    MP = W.MP
    for i in range(MP_COPY, MP_COPY + COPY_N):
        p = MP[row, i]
        if p != NONE and W.PC[p, PC_K] == k and W.DR[W.PC[p, PC_DST], D_FAILED] == 0:
            first, last = _add_op(W, item, W.PC[p, PC_DST], W.PC[p, PC_DOFF] + sector, cnt,
                                  w, ph, share, first, last)
    return first, last


@njit(forceinline=True, nrt=False)
def _add_op(W, item, d, lba, cnt, w, ph, share, first, last):
    """One operation appended to the item's list (first, last): merged with the item's last
    operation on drive ``d`` where it continues it, else a new one."""
    OP = W.OP
    p = W.DR[d, D_LASTOP]
    if p != NONE and OP[p, O_PHASE] == ph and OP[p, O_WRITE] == w and \
            OP[p, O_LBA] + OP[p, O_N] == lba:
        OP[p, O_N] += cnt
        return first, last
    return _new_op(W, item, d, lba, cnt, w, ph, share, first, last)


@njit(forceinline=True, nrt=False)
def _new_op(W, item, d, lba, cnt, w, ph, share, first, last):
    """A new operation slot appended to the item's list (first, last)."""
    OP = W.OP
    S = W.S
    S[S_FREE_OPS] -= 1
    s = W.OFREE[S[S_FREE_OPS]]
    OP[s, O_ITEM] = item
    OP[s, O_DRIVE] = d
    OP[s, O_LBA] = lba
    OP[s, O_N] = cnt
    OP[s, O_WRITE] = w
    OP[s, O_PHASE] = ph
    OP[s, O_NEXT] = NONE
    OP[s, O_SHARE] = share
    W.DR[d, D_LASTOP] = s
    if first == NONE:
        first = s
    else:
        OP[last, O_NEXT] = s
    return first, s


@njit(forceinline=True, nrt=False)
def _lost_at(W, row, off, n):
    """Whether ``n`` sectors at ``off`` in member map ``row`` have data on no surviving member
    (``raid.request_lost``; none while the row misses no member)."""
    if W.MP[row, MP_MISS] < 0:
        return False
    grp = W.MP[row, MP_GROUP]
    return R.request_lost(W.GR[grp, G_KIND], W.GR[grp, G_WIDTH], W.GR[grp, G_UNIT],
                          W.GR[grp, G_DS], off, n, W.MP[row, MP_MISS:MP_MISS + R.MISS_N])


@njit(nrt=False)
def _mark_lost(cfg, W, g):
    """Request ``g``, served by the controller's cache (a read hit, a write into the write-back
    cache), gains ``HIT_LOST`` when part of its data is on no surviving member, as a request
    sent to the drives does in ``_plan``: the data is gone from the array whatever the cache
    holds, and a real array fails the request (until 2026-11-29 such a request counted as a
    fast cache hit). Costs nothing in a replay without failures."""
    if W.FL.shape[0] == 0:
        return
    RQ = W.RQ
    slot = g & (RQ.shape[0] - 1)
    pos = RQ[slot, RQ_LBA]
    end = pos + RQ[slot, RQ_NSEC]
    while pos < end:
        lun, lun_lba, piece_end = _piece(cfg, W, pos, end)
        esect = W.LN[lun, U_EXT_SECT]
        a = lun_lba
        b = lun_lba + piece_end - pos
        while a < b:
            x = a // esect
            e = W.LN[lun, U_EXT0] + x
            stop = min(b, (x + 1) * esect)
            if _lost_at(W, W.EX[e, EX_ROW], W.EX[e, EX_BASE] + a - x * esect, stop - a):
                RQ[slot, RQ_O_HIT] |= HIT_LOST
                return
            a = stop
        pos = piece_end


@njit(forceinline=True, nrt=False)
def _plan(W, item, lun, lun_lba, n, write, first, last):
    """Append the drive operations of ``n`` sectors at ``lun_lba`` on ``lun`` to the item's list
    (first, last): extent by extent, each through its member map's layout."""
    LN = W.LN
    esect = LN[lun, U_EXT_SECT]
    pos = lun_lba
    end = lun_lba + n
    while pos < end:
        # a LUN of one extent (a RAID group's) needs no 64-bit division: its quotient starts a
        # chain of dependent loads (extent, member map, geometry), and the fixed-time engine's
        # random replay ran 7 % faster without it; sectors are never negative, so the same
        # quotient and remainder
        x = 0 if pos < esect else pos // esect
        e = LN[lun, U_EXT0] + x
        piece_end = min(end, (x + 1) * esect)
        row = W.EX[e, EX_ROW]
        grp = W.MP[row, MP_GROUP]
        m = R.plan_request(W.GR[grp, G_KIND], W.GR[grp, G_WIDTH], W.GR[grp, G_UNIT],
                           W.GR[grp, G_DS], W.EX[e, EX_BASE] + pos - x * esect, piece_end - pos,
                           write, W.MH[row], W.PLAN, W.MP[row, MP_MISS:MP_MISS + R.MISS_N])
        if item >= 0 and _lost_at(W, row, W.EX[e, EX_BASE] + pos - x * esect, piece_end - pos):
            # a host request with data no survivor holds: a real array fails it (it has no
            # operation there; the run marks it lost and leaves it out of the latencies)
            W.RQ[item & (W.RQ.shape[0] - 1), RQ_O_HIT] |= HIT_LOST
        first, last = _add_ops(W, item, row, m, 0, first, last)
        pos = piece_end
    return first, last


@njit(forceinline=True, nrt=False)
def _launch(W, T, row, c_pend, first, now, ncand):
    """Queue the first phase of a planned item, whose state is in ``T[row]`` (columns
    ``c_pend``, then phase-1 count, then wait list); keep the other phase waiting. Forgets the
    merge candidates of the item's drives."""
    OP = W.OP
    n0 = 0
    n1 = 0
    s = first
    while s != NONE:
        W.DR[OP[s, O_DRIVE], D_LASTOP] = NONE
        if OP[s, O_PHASE] == 0:
            n0 += 1
        else:
            n1 += 1
        s = OP[s, O_NEXT]
    ph = 0 if n0 > 0 else 1
    T[row, c_pend] = n0 if n0 > 0 else n1
    T[row, c_pend + 1] = n1 if n0 > 0 else 0
    T[row, c_pend + 2] = NONE
    tail = NONE
    s = first
    while s != NONE:
        nxt = OP[s, O_NEXT]
        if OP[s, O_PHASE] == ph:
            _enqueue(W, s, now)
            ncand = _candidate(W, OP[s, O_DRIVE], ncand)
        else:
            OP[s, O_NEXT] = NONE
            if tail == NONE:
                T[row, c_pend + 2] = s
            else:
                OP[tail, O_NEXT] = s
            tail = s
        s = nxt
    return ncand


@njit(forceinline=True, nrt=False)
def _advance(W, T, row, c_pend, now, ncand):
    """One operation of the item in ``T[row]`` completed. Returns (item complete, ncand)."""
    T[row, c_pend] -= 1
    if T[row, c_pend] > 0:
        return False, ncand
    if T[row, c_pend + 1] == 0:
        return True, ncand
    # phase 0 done: queue the waiting phase-1 operations, in order
    T[row, c_pend] = T[row, c_pend + 1]
    T[row, c_pend + 1] = 0
    w = T[row, c_pend + 2]
    T[row, c_pend + 2] = NONE
    while w != NONE:
        w_next = W.OP[w, O_NEXT]
        if W.DR[W.OP[w, O_DRIVE], D_FAILED] != 0:
            # planned before its drive failed (the writes after a read-modify-write's reads):
            # not sent to a drive that is gone. The writes that remain carry its data, as a
            # degraded write does: the stripe's parity (computed from the reads already done)
            # or a mirror's other copy
            W.OFREE[W.S[S_FREE_OPS]] = w
            W.S[S_FREE_OPS] += 1
            T[row, c_pend] -= 1
        else:
            _enqueue(W, w, now)
            ncand = _candidate(W, W.OP[w, O_DRIVE], ncand)
        w = w_next
    return T[row, c_pend] == 0, ncand


# ---------------------------------------------------------------------------------------------
# requests and streams


@njit(forceinline=True, nrt=False)
def _xfer(S, nbytes, path_ps, now):
    """The host links, first come first served: when ``nbytes`` that arrive now have crossed."""
    t = max(now, S[S_PATH_FREE]) + (nbytes * path_ps + 999) // 1000
    S[S_PATH_FREE] = t
    return t


@njit(forceinline=True, nrt=False)
def _try_issue(S, RQ, SM, HQ, s, t):
    """Closed loop: stream ``s`` issues what its window allows at time ``t``."""
    cap = RQ.shape[0] - 1
    while SM[s, SM_UNISSUED] > 0:
        g = SM[s, SM_HEAD]
        if g == NONE:  # its next request is not loaded yet: the caller must load first
            if S[S_FINAL]:
                raise IndexError("replay: closed-loop stream ran out of requests")
            if SM[s, SM_STARVED] == 0:
                SM[s, SM_STARVED] = 1
                SM[s, SM_STARVED_T] = t
                SM[S[S_NSTARVED], SM_LIST] = s
                S[S_NSTARVED] += 1
            return
        slot = g & cap
        if SM[s, SM_INFLIGHT] >= RQ[slot, RQ_OUTST]:
            return
        SM[s, SM_HEAD] = RQ[slot, RQ_SNEXT]
        if SM[s, SM_HEAD] == NONE:
            SM[s, SM_TAIL] = NONE
        SM[s, SM_UNISSUED] -= 1
        SM[s, SM_INFLIGHT] += 1
        # (a later pass's trace times count from the start of its pass)
        at = max(t + RQ[slot, RQ_THINK], RQ[slot, RQ_ARRIVE] + S[S_PASS_T0])
        # arrivals tie-break on the request's index, not on when they were scheduled: the
        # order then does not depend on how the caller chunked the trace
        S[S_HSIZE] = HP.push(HQ, S[S_HSIZE], at, HK_ARRIVE, g, g)


@njit(nrt=False)
def _next_phase(S, RQ, SM, PH, HQ, t):
    """Closed loop: start the next phase at time ``t``. After the last phase of a pass, the
    trace's next pass starts with its first phase while background tasks remain and passes
    are allowed (``S_PASSES``; the caller loads its requests after the pass's)."""
    p = S[S_PHASE] + 1
    if p >= PH.shape[0]:
        if S[S_PASS] >= S[S_PASSES] or S[S_TASKS_LEFT] == 0:
            S[S_PHASE] = p
            S[S_TASKS_AT_END] = S[S_TASKS_LEFT]
            return
        S[S_PASS] += 1
        S[S_PASS_T0] = t
        for q in range(PH.shape[0]):
            S[S_TOTAL] += PH[q, 0]
        p = 0
    S[S_PHASE] = p
    S[S_PHASE_LEFT] = PH[p, 0]
    for s in range(SM.shape[0]):
        SM[s, SM_UNISSUED] = PH[p, 1 + s]
        if SM[s, SM_UNISSUED] > 0:
            _try_issue(S, RQ, SM, HQ, s, t)


@njit(forceinline=True, nrt=False)
def _stream_done(S, RQ, SM, PH, HQ, s, now):
    """Closed loop: a request of stream ``s`` completed at ``now``."""
    SM[s, SM_INFLIGHT] -= 1
    S[S_PHASE_LEFT] -= 1
    _try_issue(S, RQ, SM, HQ, s, now)
    if S[S_PHASE_LEFT] == 0:
        _next_phase(S, RQ, SM, PH, HQ, now)


@njit(forceinline=True, nrt=False)
def _finish(cfg, W, g, now):
    """Request ``g`` completes at ``now``."""
    RQ = W.RQ
    slot = g & (RQ.shape[0] - 1)
    RQ[slot, RQ_O_DONE] = now
    W.S[S_NDONE] += 1
    if cfg.closed:
        _stream_done(W.S, RQ, W.SM, W.PH, W.HQ, RQ[slot, RQ_STREAM], now)


@njit(forceinline=True, nrt=False)
def _send_out(cfg, W, g, now):
    """Read data of request ``g`` leaves for the host: across the host links (an event), then
    done. Returns the request if it is done now (no host links: the caller finishes it), else
    NONE."""
    if cfg.path_ps > 0:
        t = _xfer(W.S, W.RQ[g & (W.RQ.shape[0] - 1), RQ_NSEC] * SECTOR, cfg.path_ps, now)
        _push(W, t, HK_XFER, g)
        return NONE
    return g


@njit(forceinline=True, nrt=False)
def _to_drives(cfg, W, g, now, ncand):
    """Turn request ``g`` into drive operations and queue its first phase. Returns (ncand, the
    request if it is done now (no operations: the caller finishes it), else NONE)."""
    RQ = W.RQ
    slot = g & (RQ.shape[0] - 1)
    RQ[slot, RQ_O_START] = NONE
    RQ[slot, RQ_O_HIT] = 1
    first = NONE
    last = NONE
    pos = RQ[slot, RQ_LBA]
    end = pos + RQ[slot, RQ_NSEC]
    while pos < end:
        lun, lun_lba, piece_end = _piece(cfg, W, pos, end)
        first, last = _plan(W, g, lun, lun_lba, piece_end - pos, RQ[slot, RQ_WRITE], first,
                            last)
        pos = piece_end
    if first == NONE:  # nothing to do (zero length): completes at once
        RQ[slot, RQ_O_START] = now
        return ncand, g
    return _launch(W, RQ, slot, RQ_PENDING, first, now, ncand), NONE
