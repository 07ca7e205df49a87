"""Failures and background tasks: drive failures making members missing and stripes lost,
rebuild, rebalance and initialization tasks issuing their units, and run events (package
docstring, points 8 and 9)."""

from __future__ import annotations

import numpy as np

from blocklab.kernels._jit import njit
from blocklab.kernels.layout import raid as R

from .drives import _push
from .requests import _add_ops, _launch, _new_op
from .tables import (
    AF_K,
    AF_ROW,
    COPY_N,
    D_FAILED,
    EV_BYTES,
    EV_CODE,
    EV_DRIVE,
    EV_FRAC,
    EV_LOST,
    EV_REF,
    EV_T,
    FL_AF0,
    FL_DRIVE,
    FL_NAF,
    G_DS,
    G_KIND,
    G_UNIT,
    G_WIDTH,
    HK_TASK,
    J_KIND,
    J_PENDING,
    J_PIECE,
    J_TASK,
    J_UNIT,
    JOB_REBALANCE,
    JOB_REBUILD,
    MP_COPY,
    MP_GROUP,
    MP_MEM,
    MP_MISS,
    NONE,
    PC_DOFF,
    PC_DONE,
    PC_DST,
    PC_K,
    PC_LOST0,
    PC_MASK,
    PC_ROW,
    PC_ROWS,
    PC_SOFF,
    PC_SRC,
    PPM,
    S_EVN,
    S_FREE_JOBS,
    S_TASKS_LEFT,
    SECTOR,
    TK_BDONE,
    TK_BYTES,
    TK_DEPTH,
    TK_DONE,
    TK_DRIVE,
    TK_INFL,
    TK_KIND,
    TK_LOST,
    TK_NEXT,
    TK_NP,
    TK_P0,
    TK_PROG,
    TK_RATE,
    TK_SHARE,
    TK_STATE,
    TK_T0,
    TK_UNITS,
    TK_UROWS,
    TK_WAIT,
    X_DATA_LOSS,
    X_FAILURE,
    X_INIT_END,
    X_INIT_PROGRESS,
    X_INIT_START,
    X_REBALANCE_END,
    X_REBALANCE_PROGRESS,
    X_REBALANCE_START,
    X_REBUILD_END,
    X_REBUILD_PROGRESS,
    X_REBUILD_START,
    X_REBUILD_STOPPED,
    X_REPLACE,
)

#: The most units of a piece done past its cursor (the bits of PC_MASK below its sign bit)
UNIT_WINDOW = 63

# ---------------------------------------------------------------------------------------------
# failures and background tasks (rebuild, rebalance, parity initialization)


@njit(forceinline=True, nrt=False)
def _event(W, t, code, drive, ref, frac, nbytes, lost):
    """Record a run event (traces/schema.py EVENT_NAMES)."""
    k = W.S[S_EVN]
    E_ = W.EVT
    E_[k, EV_T] = t
    E_[k, EV_CODE] = code
    E_[k, EV_DRIVE] = drive
    E_[k, EV_REF] = ref
    E_[k, EV_FRAC] = frac
    E_[k, EV_BYTES] = nbytes
    E_[k, EV_LOST] = lost
    W.S[S_EVN] = k + 1


@njit(nrt=False)
def _miss_slot(MP, row, k):
    """The slot (0, 2, 4) of member ``k`` in the row's missing list, or NONE."""
    for j in range(0, R.MISS_N, 2):
        if MP[row, MP_MISS + j] == k:
            return j
    return NONE


@njit(nrt=False)
def _miss_remove(MP, row, k):
    """Member ``k`` is whole again: take it off the missing list (kept packed)."""
    j = _miss_slot(MP, row, k)
    if j == NONE:
        return
    while j + 2 < R.MISS_N:
        MP[row, MP_MISS + j] = MP[row, MP_MISS + j + 2]
        MP[row, MP_MISS + j + 1] = MP[row, MP_MISS + j + 3]
        j += 2
    MP[row, MP_MISS + R.MISS_N - 2] = NONE
    MP[row, MP_MISS + R.MISS_N - 1] = 0


@njit(nrt=False)
def _copy_slot(MP, row, old, new):
    """The first of the row's copy slots holding ``old`` (NONE: a free one) now holds ``new``.
    A row has COPY_N slots: a fourth piece of one map row copied at the same time (four of its
    members' drives replaced at once) is not written twice, as docs/failures.md says."""
    for i in range(MP_COPY, MP_COPY + COPY_N):
        if MP[row, i] == old:
            MP[row, i] = new
            return


@njit(nrt=False)
def _lost_stripes(W, row):
    """Stripes of map row ``row`` that have lost more members than its layout tolerates."""
    MP = W.MP
    grp = MP[row, MP_GROUP]
    tol = R.tolerance(W.GR[grp, G_KIND], W.GR[grp, G_WIDTH])
    n = 0
    c0 = W.GR[grp, G_DS]
    c1 = c0
    c2 = c0
    for j in range(0, R.MISS_N, 2):  # the three cursors, smallest first
        if MP[row, MP_MISS + j] < 0:
            continue
        c = MP[row, MP_MISS + j + 1]
        n += 1
        if c < c0:
            c0, c1, c2 = c, c0, c1
        elif c < c1:
            c1, c2 = c, c1
        elif c < c2:
            c2 = c
    if n <= tol:
        return 0
    start = c0 if tol == 0 else (c1 if tol == 1 else c2)
    unit = W.GR[grp, G_UNIT]
    return (W.GR[grp, G_DS] - start + unit - 1) // unit if start < W.GR[grp, G_DS] else 0


@njit(nrt=False)
def _fail(cfg, W, f, now):
    """Failure ``f``: its drive is gone; every member it was becomes missing."""
    FL = W.FL
    d = FL[f, FL_DRIVE]
    W.DR[d, D_FAILED] = 1
    _event(W, now, X_FAILURE, d, NONE, 0, 0, 0)
    lost = 0
    for i in range(FL[f, FL_AF0], FL[f, FL_AF0] + FL[f, FL_NAF]):
        row = W.AF[i, AF_ROW]
        k = W.AF[i, AF_K]
        before = _lost_stripes(W, row)
        js = _miss_slot(W.MP, row, k)
        if js == NONE:
            for j in range(0, R.MISS_N, 2):
                if W.MP[row, MP_MISS + j] < 0:
                    W.MP[row, MP_MISS + j] = k
                    W.MP[row, MP_MISS + j + 1] = 0
                    break
            else:  # a fourth loss: beyond every layout's tolerance already
                continue
        elif W.MP[row, MP_MEM + 2 * k] == d:
            # the spare a rebuild was writing this member onto: what it rebuilt is gone with
            # it (until 2026-11-29 the rows below its cursor still counted as whole)
            W.MP[row, MP_MISS + js + 1] = 0
        lost += _lost_stripes(W, row) - before
    if lost > 0:
        _event(W, now, X_DATA_LOSS, d, NONE, 0, 0, lost)


@njit(nrt=False)
def _task_start(cfg, W, t, now, ncand):
    """Task ``t`` starts: a rebuild's members now map to their replacements (written from row
    0 up, missing above the cursor); up to its depth of units are issued."""
    TK = W.TK
    TK[t, TK_STATE] = 1
    TK[t, TK_T0] = now
    kind = TK[t, TK_KIND]
    if kind == JOB_REBALANCE:  # a new drive took the failed one's place
        W.DR[TK[t, TK_DRIVE], D_FAILED] = 0
        _event(W, now, X_REPLACE, TK[t, TK_DRIVE], t, 0, 0, 0)
    code = X_REBUILD_START if kind == JOB_REBUILD else (
        X_REBALANCE_START if kind == JOB_REBALANCE else X_INIT_START)
    _event(W, now, code, TK[t, TK_DRIVE], t, 0, 0, 0)
    if kind == JOB_REBUILD:
        PC = W.PC
        for p in range(TK[t, TK_P0], TK[t, TK_P0] + TK[t, TK_NP]):
            if W.DR[PC[p, PC_DST], D_FAILED] != 0:
                continue  # its spare failed before it started: nothing to write onto
            row = PC[p, PC_ROW]
            k = PC[p, PC_K]
            W.MP[row, MP_MEM + 2 * k] = PC[p, PC_DST]
            W.MP[row, MP_MEM + 2 * k + 1] = PC[p, PC_DOFF]
            j = _miss_slot(W.MP, row, k)
            if j != NONE:
                W.MP[row, MP_MISS + j + 1] = 0
    if TK[t, TK_UNITS] == 0:
        _task_end(W, t, now)
        return ncand
    if kind == JOB_REBALANCE:
        PC = W.PC
        for p in range(TK[t, TK_P0], TK[t, TK_P0] + TK[t, TK_NP]):
            if PC[p, PC_ROWS] > 0:
                _copy_slot(W.MP, PC[p, PC_ROW], NONE, p)
    for _i in range(TK[t, TK_DEPTH]):
        ncand = _task_issue(cfg, W, t, now, ncand)
    return ncand


@njit(nrt=False)
def _task_end(W, t, now):
    TK = W.TK
    TK[t, TK_STATE] = 2
    W.S[S_TASKS_LEFT] -= 1
    kind = TK[t, TK_KIND]
    code = X_REBUILD_END if kind == JOB_REBUILD else (
        X_REBALANCE_END if kind == JOB_REBALANCE else X_INIT_END)
    frac = PPM
    if TK[t, TK_LOST] > 0:
        # a later failure left part of the rebuild nothing to be rebuilt from (data lost):
        # it stops there, not rebuilt whole; its share rebuilt, its bytes written
        code = X_REBUILD_STOPPED
        frac = TK[t, TK_BDONE] * PPM // (TK[t, TK_BDONE] + TK[t, TK_LOST])
    _event(W, now, code, TK[t, TK_DRIVE], t, frac, TK[t, TK_BDONE], 0)


@njit(nrt=False)
def _task_issue(cfg, W, t, now, ncand):
    """Issue task ``t``'s next unit, unless its rate cap says later (then a token event). A
    unit with nothing to do (nothing survives to rebuild from) completes at once and the next
    is issued in its place."""
    TK = W.TK
    PC = W.PC
    S = W.S
    while TK[t, TK_NEXT] < TK[t, TK_UNITS]:
        if TK[t, TK_RATE] > 0:
            allowed = TK[t, TK_T0] + TK[t, TK_BYTES] * 1_000_000_000 // TK[t, TK_RATE]
            if now < allowed:
                _push(W, allowed, HK_TASK, t)
                return ncand
        u = TK[t, TK_NEXT]
        p = TK[t, TK_P0] + u % TK[t, TK_NP]
        idx = u // TK[t, TK_NP]
        if idx - PC[p, PC_DONE] >= UNIT_WINDOW:
            # the piece's units done past its cursor fit in one int64 (PC_MASK): this slot
            # waits until the unit at the cursor completes (_unit_done). Units with nothing
            # to do (a second failure left nothing to rebuild from) complete at once, while
            # an earlier one was still in flight: the mask's shift went past 63 bits and the
            # replay never ended
            TK[t, TK_WAIT] += 1
            return ncand
        TK[t, TK_NEXT] = u + 1
        TK[t, TK_INFL] += 1
        a = idx * TK[t, TK_UROWS]
        rows = min(TK[t, TK_UROWS], PC[p, PC_ROWS] - a)
        TK[t, TK_BYTES] += rows * SECTOR
        kind = TK[t, TK_KIND]
        S[S_FREE_JOBS] -= 1
        j = W.JFREE[S[S_FREE_JOBS]]
        W.JB[j, J_KIND] = kind
        W.JB[j, J_TASK] = t
        W.JB[j, J_PIECE] = p
        W.JB[j, J_UNIT] = idx
        row = PC[p, PC_ROW]
        grp = W.MP[row, MP_GROUP]
        share = TK[t, TK_SHARE]
        first = NONE
        last = NONE
        if kind == JOB_REBALANCE:
            first, last = _new_op(W, -j - 1, PC[p, PC_SRC], PC[p, PC_SOFF] + a, rows, 0, 0,
                                  share, first, last)
            first, last = _new_op(W, -j - 1, PC[p, PC_DST], PC[p, PC_DOFF] + a, rows, 1, 1,
                                  share, first, last)
        else:
            if kind == JOB_REBUILD and W.DR[PC[p, PC_DST], D_FAILED] != 0:
                m = 0  # its spare failed: the unit is lost, the rebuild stops (below)
            elif kind == JOB_REBUILD:
                m = R.plan_rebuild(W.GR[grp, G_KIND], W.GR[grp, G_WIDTH], PC[p, PC_K], a, rows,
                                   W.MP[row, MP_MISS:MP_MISS + R.MISS_N], W.PLAN)
            else:
                unit = W.GR[grp, G_UNIT]
                m = R.plan_init(W.GR[grp, G_KIND], W.GR[grp, G_WIDTH], unit, a // unit,
                                (rows + unit - 1) // unit, W.PLAN)
            first, last = _add_ops(W, -j - 1, row, m, share, first, last)
        if first != NONE:
            return _launch(W, W.JB, j, J_PENDING, first, now, ncand)
        if kind == JOB_REBUILD:  # nothing survives to rebuild it from, or nothing to
            # rebuild it onto: lost, not rebuilt
            TK[t, TK_LOST] += rows * SECTOR
            TK[t, TK_BDONE] -= rows * SECTOR  # (_unit_complete counts the unit's bytes)
            if PC[p, PC_LOST0] == 0 or a + 1 < PC[p, PC_LOST0]:
                PC[p, PC_LOST0] = a + 1  # the member stays missing from here up
        if _unit_complete(W, j, now):
            return ncand
    return ncand


@njit(nrt=False)
def _unit_complete(W, j, now):
    """The bookkeeping of a completed unit ``j``: its piece (a rebuild's cursor, a
    rebalance's switch to the new drive) and its task (progress events every tenth, the end).
    Returns whether the task ended."""
    JB = W.JB
    PC = W.PC
    TK = W.TK
    S = W.S
    t = JB[j, J_TASK]
    p = JB[j, J_PIECE]
    idx = JB[j, J_UNIT]
    W.JFREE[S[S_FREE_JOBS]] = j
    S[S_FREE_JOBS] += 1
    if idx >= PC[p, PC_DONE]:
        PC[p, PC_MASK] |= np.int64(1) << (idx - PC[p, PC_DONE])
    while PC[p, PC_MASK] & 1:
        PC[p, PC_MASK] >>= 1
        PC[p, PC_DONE] += 1
    urows = TK[t, TK_UROWS]
    done_rows = min(PC[p, PC_DONE] * urows, PC[p, PC_ROWS])
    TK[t, TK_BDONE] += min(urows, PC[p, PC_ROWS] - idx * urows) * SECTOR
    row = PC[p, PC_ROW]
    k = PC[p, PC_K]
    kind = TK[t, TK_KIND]
    if kind == JOB_REBUILD:
        js = _miss_slot(W.MP, row, k)
        # the member's cursor is this piece's only while the member is written onto its spare,
        # and the spare works (a failed spare's member may be a later rebuild's by now)
        if js != NONE and W.MP[row, MP_MEM + 2 * k] == PC[p, PC_DST] and \
                W.DR[PC[p, PC_DST], D_FAILED] == 0:
            # rebuilt up to the piece's cursor, but not past a unit that was lost: its rows
            # hold nothing (until 2026-11-29 they counted as rebuilt, and another rebuild of
            # the same stripes read them as a source and ran to its end)
            if PC[p, PC_LOST0] > 0:
                done_rows = min(done_rows, PC[p, PC_LOST0] - 1)
            if done_rows >= PC[p, PC_ROWS]:
                _miss_remove(W.MP, row, k)
            else:
                W.MP[row, MP_MISS + js + 1] = done_rows
    elif kind == JOB_REBALANCE and done_rows >= PC[p, PC_ROWS]:
        W.MP[row, MP_MEM + 2 * k] = PC[p, PC_DST]
        W.MP[row, MP_MEM + 2 * k + 1] = PC[p, PC_DOFF]
        _copy_slot(W.MP, row, p, NONE)
    TK[t, TK_DONE] += 1
    TK[t, TK_INFL] -= 1
    units = TK[t, TK_UNITS]
    while TK[t, TK_PROG] < 9 and TK[t, TK_DONE] * 10 >= (TK[t, TK_PROG] + 1) * units:
        TK[t, TK_PROG] += 1
        code = X_REBUILD_PROGRESS if kind == JOB_REBUILD else (
            X_REBALANCE_PROGRESS if kind == JOB_REBALANCE else X_INIT_PROGRESS)
        _event(W, now, code, TK[t, TK_DRIVE], t, TK[t, TK_DONE] * PPM // units,
               TK[t, TK_BDONE], 0)
    if TK[t, TK_DONE] == units:
        _task_end(W, t, now)
        return True
    return False


@njit(nrt=False)
def _unit_done(cfg, W, j, now, ncand):
    """A task's unit completed: its bookkeeping, then the task's next unit."""
    t = W.JB[j, J_TASK]
    if not _unit_complete(W, j, now):
        ncand = _task_issue(cfg, W, t, now, ncand)
        # the slots that waited for a piece's cursor try again (it may have moved)
        waiting = W.TK[t, TK_WAIT]
        W.TK[t, TK_WAIT] = 0
        for _i in range(waiting):
            if W.TK[t, TK_STATE] == 2:
                break
            ncand = _task_issue(cfg, W, t, now, ncand)
    return ncand
