"""The event loop (``replay``), the completion of drive operations, and the ring's load and
retire kernels the front door (door.py) calls."""

from __future__ import annotations

from blocklab.kernels import heap as HP
from blocklab.kernels._jit import njit

from .cachepath import _destage, _job_done, _read, _sequential, _store, _write_in
from .drives import _candidate, _count, _push, _start_drives
from .requests import _advance, _finish, _next_phase, _send_out, _to_drives, _try_issue, _xfer
from .tables import (
    D_BQHEAD,
    D_INFLIGHT,
    D_QHEAD,
    DONE,
    FL_T,
    FULL_EVENTS,
    FULL_HEAP,
    FULL_OPS,
    FULL_RECORDS,
    HK_ARRIVE,
    HK_CTRL,
    HK_DONE,
    HK_FAIL,
    HK_JOB,
    HK_RETRY,
    HK_TASK,
    HK_TIMER,
    HK_XFER,
    J_KIND,
    J_PENDING,
    JOB_DESTAGE,
    JOB_PREFETCH,
    NEED_INPUT,
    NONE,
    O_DRIVE,
    O_ITEM,
    RQ_ARRIVE,
    RQ_GIDX,
    RQ_LBA,
    RQ_NSEC,
    RQ_O_ARRIVE,
    RQ_O_DONE,
    RQ_O_HIT,
    RQ_O_START,
    RQ_OUTST,
    RQ_PENDING,
    RQ_PHASE,
    RQ_ROW,
    RQ_SID,
    RQ_SNEXT,
    RQ_STREAM,
    RQ_THINK,
    RQ_WRITE,
    S_CTRL_FREE,
    S_EVN,
    S_FINAL,
    S_FREE_OPS,
    S_HSIZE,
    S_LOADED,
    S_MARGIN_EV,
    S_MARGIN_HEAP,
    S_MARGIN_OPS,
    S_MARGIN_REC,
    S_NDONE,
    S_NSTARVED,
    S_NXT,
    S_PHASE,
    S_REC,
    S_STARTED,
    S_TASKS_LEFT,
    S_TIMER,
    S_TOTAL,
    SECTOR,
    SM_HEAD,
    SM_LIST,
    SM_STARVED,
    SM_STARVED_T,
    SM_TAIL,
    TK_STATE,
    TK_T,
)
from .tasks import _fail, _task_issue, _task_start, _unit_done


@njit(forceinline=True, nrt=False)
def _op_done(cfg, W, s, now, ncand):
    """Drive operation ``s`` completes at ``now``. Returns (ncand, its request if that is done
    now, else NONE: the caller finishes it)."""
    OP = W.OP
    DR = W.DR
    d = OP[s, O_DRIVE]
    DR[d, D_INFLIGHT] -= 1
    _count(W, d, now, -1)
    if DR[d, D_QHEAD] != NONE or DR[d, D_BQHEAD] != NONE:
        ncand = _candidate(W, d, ncand)
    item = OP[s, O_ITEM]
    W.OFREE[W.S[S_FREE_OPS]] = s
    W.S[S_FREE_OPS] += 1
    if item < 0:
        j = -item - 1
        done, ncand = _advance(W, W.JB, j, J_PENDING, now, ncand)
        if done:
            if W.JB[j, J_KIND] == JOB_DESTAGE or W.JB[j, J_KIND] == JOB_PREFETCH:
                ncand = _job_done(cfg, W, j, now, ncand)
            else:
                ncand = _unit_done(cfg, W, j, now, ncand)
        return ncand, NONE
    RQ = W.RQ
    slot = item & (RQ.shape[0] - 1)
    done, ncand = _advance(W, RQ, slot, RQ_PENDING, now, ncand)
    if not done:
        return ncand, NONE
    if cfg.cache_lines > 0:
        _store(cfg, W, item, False, now)  # data read, or written through: clean in the cache
    if RQ[slot, RQ_WRITE] == 0:
        return ncand, _send_out(cfg, W, item, now)
    return ncand, item


# ---------------------------------------------------------------------------------------------
# the event loop


@njit(forceinline=True, nrt=False)
def _resume(cfg, W):
    """At the first call, schedule the failures and tasks (and in closed loop the first
    phase); at a call after NEED_INPUT in closed loop, let the streams that were starved of
    rows issue at the times they wanted to."""
    S = W.S
    RQ = W.RQ
    SM = W.SM
    HQ = W.HQ
    if S[S_STARTED] == 0:
        S[S_STARTED] = 1
        for f in range(W.FL.shape[0]):  # the failures and tasks the caller scheduled
            _push(W, W.FL[f, FL_T], HK_FAIL, f)
        for t in range(W.TK.shape[0]):
            _push(W, W.TK[t, TK_T], HK_TASK, t)
        if cfg.closed:
            S[S_PHASE] = -1
            _next_phase(S, RQ, SM, W.PH, HQ, 0)
    if cfg.closed and S[S_NSTARVED] > 0:
        k = S[S_NSTARVED]
        S[S_NSTARVED] = 0
        for i in range(k):
            SM[SM[i, SM_LIST], SM_STARVED] = 0
        for i in range(k):
            s = SM[i, SM_LIST]
            if SM[s, SM_STARVED] == 0:
                _try_issue(S, RQ, SM, HQ, s, SM[s, SM_STARVED_T])


@njit(nrt=False)
def replay(cfg, W):
    """Run until every request completed (DONE) or the caller must act (NEED_INPUT, FULL_*).
    All state lives in ``W``, so a call after a FULL_* or NEED_INPUT resumes."""
    S = W.S
    RQ = W.RQ
    HQ = W.HQ
    cap = RQ.shape[0] - 1
    closed = cfg.closed
    _resume(cfg, W)
    while S[S_NDONE] < S[S_TOTAL] or (cfg.drain and S[S_TASKS_LEFT] > 0):
        if S[S_FINAL] == 0:
            if closed:
                if S[S_NSTARVED] > 0:
                    return NEED_INPUT
            elif S[S_NXT] == S[S_LOADED]:
                return NEED_INPUT
        if S[S_FREE_OPS] < S[S_MARGIN_OPS]:
            return FULL_OPS
        if S[S_HSIZE] + S[S_MARGIN_HEAP] > HQ.shape[0]:
            return FULL_HEAP
        if cfg.record and S[S_REC] + S[S_MARGIN_REC] > W.RC.shape[0]:
            return FULL_RECORDS
        if S[S_EVN] + S[S_MARGIN_EV] > W.EVT.shape[0]:
            return FULL_EVENTS
        # the next event: an open-loop arrival from the trace, or the heap's top
        take_arrival = False
        if not closed and S[S_NXT] < S[S_LOADED]:
            if S[S_HSIZE] == 0:
                take_arrival = True
            else:
                ta = RQ[S[S_NXT] & cap, RQ_ARRIVE]
                if ta < HQ[0, 0] or (ta == HQ[0, 0] and HQ[0, 1] > HK_ARRIVE):
                    take_arrival = True
        if take_arrival:
            g = S[S_NXT]
            now = RQ[g & cap, RQ_ARRIVE]
            kind = HK_ARRIVE
            S[S_NXT] = g + 1
        else:
            if S[S_HSIZE] == 0:
                raise IndexError("replay: no event left but requests are incomplete")
            now = HQ[0, 0]
            kind = HQ[0, 1]
            g = HQ[0, 3]
            S[S_HSIZE] = HP.pop(HQ, S[S_HSIZE])
        ncand = 0
        act = NONE  # what to do with request g: read it, or take its written data
        # the request this event completes, if any (at most one: each path below hands it
        # back instead of finishing it, so that the one inlined copy of _finish, which in
        # closed loop issues the stream's next requests, is the one at the end)
        fin = NONE
        if kind == HK_DONE:
            ncand, fin = _op_done(cfg, W, g, now, ncand)
        elif kind == HK_TIMER:
            S[S_TIMER] = NONE
            ncand = _destage(cfg, W, now, ncand)
        elif kind == HK_RETRY:  # a read that waited for a prefetch looks again
            act = HK_RETRY
        elif kind == HK_FAIL:
            _fail(cfg, W, g, now)
        elif kind == HK_JOB:  # a destage or prefetch with no drive operation (_job_ops)
            ncand = _job_done(cfg, W, g, now, ncand)
        elif kind == HK_TASK:
            if W.TK[g, TK_STATE] == 0:
                ncand = _task_start(cfg, W, g, now, ncand)
            elif W.TK[g, TK_STATE] == 1:  # a rate token: issue one more unit
                ncand = _task_issue(cfg, W, g, now, ncand)
        else:
            slot = g & cap
            ready = False
            if kind == HK_ARRIVE:
                RQ[slot, RQ_O_ARRIVE] = now
                if cfg.ctrl_ns > 0:  # the controller takes one command at a time
                    t = max(now, S[S_CTRL_FREE]) + cfg.ctrl_ns
                    S[S_CTRL_FREE] = t
                    _push(W, t, HK_CTRL, g)
                else:
                    ready = True
            elif kind == HK_CTRL:
                ready = True
            elif RQ[slot, RQ_WRITE] != 0:  # HK_XFER: write data is in
                act = HK_XFER
            else:  # HK_XFER: read data delivered to the host
                fin = g
            if ready:
                if RQ[slot, RQ_WRITE] != 0:
                    if cfg.path_ps > 0:
                        _push(W, _xfer(S, RQ[slot, RQ_NSEC] * SECTOR, cfg.path_ps, now), HK_XFER,
                              g)
                    else:
                        act = HK_XFER
                else:
                    if cfg.cache_lines > 0:
                        ncand = _sequential(cfg, W, g, now, ncand)
                    act = HK_RETRY
        go = False  # (one inlined copy of _to_drives, not one per caller)
        if act == HK_RETRY:
            ncand, go, fin = _read(cfg, W, g, now, ncand)
        elif act == HK_XFER:
            ncand, go, fin = _write_in(cfg, W, g, now, ncand)
        if go:
            ncand, fin = _to_drives(cfg, W, g, now, ncand)
        if fin != NONE:
            _finish(cfg, W, fin, now)
        if ncand > 0:
            _start_drives(cfg, W, ncand, now)
    return DONE


@njit(nrt=False)
def link_streams(RQ, SM, first, count):
    """Closed loop: append the newly loaded requests ``first .. first+count-1`` to their
    streams' lists (in order)."""
    cap = RQ.shape[0] - 1
    for g in range(first, first + count):
        slot = g & cap
        s = RQ[slot, RQ_STREAM]
        RQ[slot, RQ_SNEXT] = NONE
        if SM[s, SM_HEAD] == NONE:
            SM[s, SM_HEAD] = g
        else:
            RQ[SM[s, SM_TAIL] & cap, RQ_SNEXT] = g
        SM[s, SM_TAIL] = g


#: Columns ``retire_rows`` copies out of the ring, in this order (door.py RETIRED names them).
RETIRE_COLS = (RQ_ROW, RQ_O_ARRIVE, RQ_O_START, RQ_O_DONE, RQ_O_HIT, RQ_WRITE, RQ_LBA, RQ_NSEC,
               RQ_SID)


@njit(nrt=False)
def load_rows(RQ, loaded, start, count, row, arrive, lba, nsec, write, stream, think, phase,
              outst, sid):
    """Copy requests ``start .. start+count-1`` of a chunk's columns into the ring slots of
    requests ``loaded .. loaded+count-1`` (free slots: the caller checked), row by row (one pass
    over each slot instead of a strided pass per column)."""
    cap = RQ.shape[0] - 1
    for i in range(count):
        slot = (loaded + i) & cap
        j = start + i
        RQ[slot, RQ_GIDX] = loaded + i
        RQ[slot, RQ_ROW] = row[j]
        RQ[slot, RQ_ARRIVE] = arrive[j]
        RQ[slot, RQ_LBA] = lba[j]
        RQ[slot, RQ_NSEC] = nsec[j]
        RQ[slot, RQ_WRITE] = write[j]
        RQ[slot, RQ_STREAM] = stream[j]
        RQ[slot, RQ_THINK] = think[j]
        RQ[slot, RQ_PHASE] = phase[j]
        RQ[slot, RQ_OUTST] = outst[j]
        RQ[slot, RQ_SID] = sid[j]
        RQ[slot, RQ_O_DONE] = NONE


@njit(nrt=False)
def retire_rows(RQ, first, loaded, OUT):
    """Copy the completed requests from ``first`` on, in order up to the first one not done
    (at most ``OUT``'s width), into ``OUT`` (one row per RETIRE_COLS column) and free their
    slots. Returns how many."""
    cap = RQ.shape[0] - 1
    lim = min(loaded - first, OUT.shape[1])
    k = 0
    while k < lim:
        slot = (first + k) & cap
        if RQ[slot, RQ_O_DONE] < 0:
            break
        for c in range(len(RETIRE_COLS)):
            OUT[c, k] = RQ[slot, RETIRE_COLS[c]]
        RQ[slot, RQ_O_DONE] = NONE
        RQ[slot, RQ_GIDX] = NONE
        k += 1
    return k
