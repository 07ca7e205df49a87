"""The replay engine (issue 3, deliverable 4): an event-driven kernel that replays host requests
against an array of drives and reports when each request started and completed.

The caller (``pipeline/replay.py``) streams the trace through a ring of request slots: it loads
rows, calls ``replay``, and the kernel returns when it needs more rows (``NEED_INPUT``), more
operation slots, heap entries or record space (``FULL_*``: the caller grows or drains them and
calls again) or when every request has completed (``DONE``). Requests are named by their
*global index* (0, 1, 2, ... over the read and write requests of the trace) everywhere in the
kernel; a request's slot is ``index & (capacity - 1)``. The caller retires completed requests in
order and reuses their slots, so memory stays bounded whatever the trace length. Background
work (cache destage and prefetch) is done by *jobs*; an operation belongs to request g >= 0 or
to job j, written -(j + 1).

Semantics (``tests/reference/engine.py`` implements the same in plain Python):

1. **Arrivals.** Open loop: request k arrives at ``arrive[k]`` (the trace time divided by the
   speed factor; non-decreasing). Closed loop: each stream keeps ``outst`` requests in flight
   and issues them in its own order; request k is issued at ``max(t + think[k], arrive[k])``
   where t is the completion that freed its slot (or the start of its phase). Phases are
   barriers: phase p+1 starts when every request of phases <= p has completed. Closed-loop
   arrivals at the same time are taken in request order.
2. **Controller.** With a per-command time ``ctrl_ns`` the controller takes commands one at a
   time, first come first served. Write data then crosses the host links (one first-come
   first-served server, ``path_ps`` picoseconds per byte); read data crosses them on its way
   out. Every drive operation's data crosses the internal bus (``bus_ps``), a server
   reserved first come first served when the operation starts: the operation completes when
   both the drive and its bus transfer are done.
3. **Controller cache** (``cache_lines`` > 0; ``kernels/cache.py``). A request is cut into
   pieces per LUN (below) and each piece into cache lines of ``line_sectors``.
   *Reads*: when every sector is valid in the cache the read is a hit and its data goes out at
   once; when some needed line is being filled by a prefetch and none is missing the read
   waits on that line's LUN and is looked up again (an event of its own, at that time) when a
   prefetch of that LUN completes;
   otherwise the whole read goes to the drives and its data then fills the cache (clean lines,
   taking free or least recently used clean lines while there are any). A read is
   *sequential* on a LUN when a piece starts where the LUN's previous read piece ended; with
   read-ahead (``ra_sectors``) a sequential read keeps the LUN's prefetch up to ``ra_sectors``
   ahead of its end: prefetch jobs read ``ra_sectors`` at a time into the lines they lack,
   taken from free lines, then from the least recently used clean lines outside the
   prefetch's own range (its cached lines stay); a prefetch is skipped when too few such
   lines or no job are available.
   *Writes, write-back*: once the data is in, lines are taken for the sectors not cached and
   every written sector is marked valid and dirty: the write completes (a cache hit). When too
   few lines are free or clean (not counting the write's own), writes wait, in order, until a
   destage or prefetch completes and there is room; a write spanning more lines than the cache
   has goes to the drives. *Write-through* (and no cache): the write goes to the drives, and
   then updates the cache as clean data.
   *Destage*: when the dirty lines reach ``flush_start`` the controller destages until they
   are at most ``flush_stop``; the oldest dirty line is also destaged once it is
   ``flush_age_ns`` old. At most ``destage_depth`` destage jobs run at once; each takes the
   oldest dirty line with the dirty lines next to it within its window of whole RAID stripes
   (as many as fit in 4 MiB, at least one) and writes their dirty extent through the layout
   (full stripes need no reads). A timer event wakes the
   controller when the oldest dirty data comes of age.
4. **Planning.** A request is cut at the host volume's stripe-unit boundaries into pieces, one
   per LUN; each LUN's layout (``kernels.layout.raid``) turns a piece into drive operations in
   two phases (reads a parity update needs, then the rest); a mirror reads each piece from the
   copy whose last operation ended nearest it, as Linux md does (raid.py; the heads per member
   map are ``MH``). Operations of one request on the
   same drive, in the same phase and direction, that are contiguous on the drive are merged
   into one (a controller issues one command per drive for contiguous segments). Phase-0
   operations are queued at once and phase-1 ones when the last phase-0 one completes (or at
   once if there are none), each phase in planning order.
5. **Drives.** Each drive has a queue (first come, first served order) and serves up to
   ``maxinf`` operations at once (1 for a disk, its queue depth for an SSD); when it may start
   one, its scheduler picks among the first ``depth`` queued: FCFS the oldest, SSTF the one
   nearest the end of the last operation started, C-LOOK the lowest sector at or past it, else
   the lowest (ties: the oldest); but when the oldest queued operation has waited at least the
   drive's ``max_wait`` (aging; 0: no limit), it goes first. Service times come from the
   drive's model (``MODEL_*``). After every event, drives that can start do so in drive order.
6. **Completion.** A read completes when its data has crossed the data path; a write when its
   last drive operation completes (or its data is in a write-back cache). A request of no
   sectors has no drive operations, but otherwise goes the same way: it takes its turn at the
   controller; a write, and a read when there is a cache (which finds every one of its no
   sectors), also on the host links, carrying nothing; and a write to a write-back cache waits
   behind the writes already waiting for room. Then, in closed loop, its stream issues its
   next request. The replay ends when every host request has completed and (with ``drain``)
   every task has ended, whatever cache work is still under way.
7. **Order.** Events are ordered by (time, kind, sequence number); at equal times drive
   completions come first, then reads looking the cache up again, data transfers, controller
   completions, cache timers, failures, task starts and rate tokens, and arrivals (an
   open-loop arrival from the trace comes after every scheduled event of its time).
8. **Failures** (issue 5). A LUN is made of extents, each a range of a member map (a RAID
   group, a storage pool's private group, a pool's D-stripe) whose members are drives at an
   offset. At a failure, every member the drive was becomes missing (``raid.py`` plans around
   missing members); when a map has lost more members than its layout tolerates, the stripes
   beyond the tolerance's rebuild cursor are lost (a ``data_loss`` event counts them).
   Operations already queued on the failed drive complete as planned.
9. **Tasks**: a rebuild, a rebalance or a parity initialization works through its pieces in
   units (unit u: piece u mod pieces, u div pieces within it), keeping ``depth`` units in
   flight, no faster than its rate cap. At a rebuild's start each missing member maps to its
   replacement and is missing above a cursor that follows the units completed in order; a
   rebalance switches a member to its new drive when the piece is copied. Task operations wait
   in the drive's background queue: a drive serves its host queue first, but when both hold
   work, background work gets its task's share of the drive's time: it goes first while its
   credit is positive; an operation picked while both wait adds share / (1 - share) of its
   service time to the credit (host work) or takes its service time off (background work);
   share 1 always goes first. Events: failure, data loss, start, progress every tenth, end,
   replacement.

Per-drive statistics are kept in time bins of ``S[S_INTERVAL]`` ns: busy time, operations and
bytes started, and the integral of the operations at the drive (queued or in service); when
time outgrows the bins, adjacent bins merge and the interval doubles.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from blocklab.kernels import cache as CA
from blocklab.kernels import heap as HP
from blocklab.kernels._jit import njit
from blocklab.kernels.drive import hdd as H
from blocklab.kernels.drive import ssd as SS
from blocklab.kernels.layout import raid as R

MODEL_FIXED, MODEL_HDD, MODEL_SSD = 0, 1, 2
SCHED_FCFS, SCHED_SSTF, SCHED_CLOOK = 0, 1, 2
# what replay() returns
DONE, NEED_INPUT, FULL_OPS, FULL_RECORDS, FULL_HEAP, FULL_EVENTS = range(6)
# event kinds, in their order at equal times
EV_DONE, EV_RETRY, EV_XFER, EV_CTRL, EV_TIMER, EV_FAIL, EV_TASK, EV_ARRIVE = range(8)
# job kinds (destage and prefetch are also the drive operation kinds of traces/schema.py
# OPK_*; a rebuild job's operations are OPK_REBUILD_READ or OPK_REBUILD_WRITE)
JOB_DESTAGE, JOB_PREFETCH, JOB_REBUILD, JOB_INIT, JOB_REBALANCE = 1, 2, 3, 5, 6
# run events (traces/schema.py EVENT_NAMES)
(X_FAILURE, X_REBUILD_START, X_REBUILD_PROGRESS, X_REBUILD_END, X_DATA_LOSS, X_REPLACE,
 X_REBALANCE_START, X_REBALANCE_END, X_INIT_START, X_INIT_END, X_REBALANCE_PROGRESS,
 X_INIT_PROGRESS) = range(12)
PPM = 1_000_000
# cache lookup outcomes
HIT, FILLING, MISS = 0, 1, 2
NONE = -1
_RANK_MAX = (1 << 63) - 1  # above every scheduling rank
DESTAGE_SECTORS = 8192  # a destage writes at most this many sectors of whole stripes

# The loop's state in the int64 array S (kept between calls); the cache's list heads and
# counts follow from S_CACHE (kernels/cache.py CH_*).
(S_SEQ, S_HSIZE, S_NXT, S_LOADED, S_FINAL, S_NDONE, S_TOTAL, S_CTRL_FREE, S_PATH_FREE,
 S_FREE_OPS, S_REC, S_MARGIN_OPS, S_MARGIN_HEAP, S_MARGIN_REC, S_PHASE, S_PHASE_LEFT,
 S_NSTARVED, S_INTERVAL, S_STARTED, S_FREE_JOBS, S_DESTAGING, S_FLUSHING, S_TIMER,
 S_WW_HEAD, S_WW_TAIL, S_BUS_FREE, S_EVN, S_MARGIN_EV, S_TASKS_LEFT, S_NB, S_BINS_END,
 S_CACHE) = range(32)
S_N = S_CACHE + CA.CH_N

# Table columns. RQ: one row per request slot (inputs, outputs, state).
(RQ_GIDX, RQ_ARRIVE, RQ_LBA, RQ_NSEC, RQ_WRITE, RQ_STREAM, RQ_THINK, RQ_PHASE, RQ_OUTST,
 RQ_SNEXT, RQ_ROW, RQ_SID, RQ_O_ARRIVE, RQ_O_START, RQ_O_DONE, RQ_O_HIT, RQ_PENDING,
 RQ_PHASE1, RQ_WAIT, RQ_CNEXT) = range(20)
RQ_N = 20
# OP: one row per operation slot (O_SHARE: 0 for host work, else the background work's
# share of a busy drive's operations, ppm).
O_ITEM, O_DRIVE, O_LBA, O_N, O_WRITE, O_PHASE, O_NEXT, O_QTIME, O_SHARE = range(9)
O_N_COLS = 9
# DR: one row per drive (a queue for host work and one for background work).
(D_QHEAD, D_QTAIL, D_INFLIGHT, D_MAXINF, D_SCHED, D_DEPTH, D_POS, D_MODEL, D_MPARAM, D_BUSY,
 D_NOPS, D_LASTOP, D_CANDF, D_CNT, D_TLAST, D_BQHEAD, D_BQTAIL, D_CREDIT, D_FAILED,
 D_MAXWAIT) = range(20)
D_N = 20
# JB: one row per background job: a cache job's LUN and range, or a task's unit.
J_KIND, J_A, J_B, J_C, J_PENDING, J_PHASE1, J_WAIT = range(7)
J_LUN, J_LBA, J_N = J_A, J_B, J_C  # cache jobs
J_TASK, J_PIECE, J_UNIT = J_A, J_B, J_C  # task jobs
J_N_COLS = 7
# LN: one row per host-volume LUN (in volume order): its extents EX[U_EXT0 ...], each
# U_EXT_SECT sectors of the LUN.
U_EXT0, U_EXT_SECT, U_CAP, U_LAST_END, U_RA_END, U_WHEAD, U_WTAIL = range(7)
U_N = 7
# EX: one row per extent: the member map row holding it and its first sector in that row's
# address space (a LUN of a RAID group is one extent; a storage pool LUN one per slice; a pool
# volume one per D-stripe).
EX_ROW, EX_BASE = range(2)
# GR: one row per group geometry (layout, members, stripe unit, rows per member).
G_KIND, G_WIDTH, G_UNIT, G_DS = range(4)
G_N = 4
# MP: one row per member map (a RAID group, a storage pool's private group, a pool D-stripe):
# its geometry, the missing members (raid.MISS_N: member, rebuild cursor), then per member its
# drive and the member's first sector on that drive.
MP_GROUP = 0
MP_MISS = 1
MP_MEM = MP_MISS + R.MISS_N
# FL: one row per drive failure; AF: the (map row, member) pairs each failure makes missing.
FL_T, FL_DRIVE, FL_AF0, FL_NAF = range(4)
AF_ROW, AF_K = range(2)
# TK: one row per background task (rebuild, rebalance, initialization) over pieces PC[...].
(TK_KIND, TK_T, TK_P0, TK_NP, TK_UROWS, TK_UNITS, TK_NEXT, TK_DONE, TK_INFL, TK_DEPTH,
 TK_SHARE, TK_RATE, TK_BYTES, TK_PROG, TK_STATE, TK_DRIVE, TK_T0, TK_BDONE) = range(18)
TK_N = 18
# PC: one row per piece: a member's rows [0, PC_ROWS) of map row PC_ROW rebuilt into (or copied
# from PC_SRC to) PC_DST at offset PC_DOFF, in units (done contiguously, then a bit mask).
PC_ROW, PC_K, PC_SRC, PC_SOFF, PC_DST, PC_DOFF, PC_ROWS, PC_DONE, PC_MASK = range(9)
PC_N = 9
# EV: one row per run event.
EV_T, EV_CODE, EV_DRIVE, EV_REF, EV_FRAC, EV_BYTES, EV_LOST = range(7)
EV_N_COLS = 7
# SM: one row per closed-loop stream (SM_LIST: row i holds the i-th starved stream).
SM_HEAD, SM_TAIL, SM_INFLIGHT, SM_UNISSUED, SM_STARVED, SM_STARVED_T, SM_LIST = range(7)
SM_N = 7
# RC: one row per recorded drive operation.
(RC_DRIVE, RC_ITEM, RC_KIND, RC_QTIME, RC_START, RC_DONE, RC_LBA, RC_N, RC_WRITE,
 RC_HIT) = range(10)
RC_N_COLS = 10
# BN: rows busy, ops, bytes, queue integral; columns drive-major bins.
B_BUSY, B_OPS, B_BYTES, B_QINT = range(4)


class Cfg(NamedTuple):
    """Scalars of one replay."""

    closed: int  # 1: closed loop (streams), 0: open loop
    vol_unit: int  # host volume stripe unit, sectors (0: one LUN, no host volume)
    ctrl_ns: int  # controller time per command
    path_ps: int  # host links, picoseconds per byte (0: no limit)
    bus_ps: int  # internal bus (drive side), picoseconds per byte (0: no limit)
    record: int  # 1: record every drive operation
    nphases: int  # closed loop: phases
    nstreams: int  # closed loop: streams
    cache_lines: int  # controller cache lines (0: no cache)
    line_sectors: int  # sectors per cache line (8 .. 64)
    write_back: int  # 1: write-back, 0: write-through
    ra_sectors: int  # read-ahead per prefetch (0: none)
    flush_start: int  # dirty lines that start destaging
    flush_stop: int  # dirty lines at which watermark destaging stops
    flush_age_ns: int  # dirty data older than this is destaged
    destage_depth: int  # destage jobs at once
    drain: int  # 1: after the last host request, go on until every task has ended


class Models(NamedTuple):
    fixed: np.ndarray  # MODEL_FIXED, per set: (ns per operation, ns per sector)
    hp: np.ndarray  # MODEL_HDD, per set: hdd.P_N parameters
    hz: np.ndarray  # zone tables, concatenated
    hz_off: np.ndarray  # set m's zones: hz[hz_off[m]:hz_off[m+1]]
    hcd: np.ndarray  # seek curves (distances), concatenated
    hct: np.ndarray  # seek curves (ms)
    hc_off: np.ndarray
    hst: np.ndarray  # per drive: hdd.S_N state
    sp: np.ndarray  # MODEL_SSD, per set: ssd.P_N parameters
    sst: np.ndarray  # per drive: SSD state row (kernels/drive/ssd.py)


class State(NamedTuple):
    """Everything the kernel reads and writes."""

    S: np.ndarray  # scalars (S_*)
    RQ: np.ndarray  # requests ring (capacity a power of two) x RQ_*
    OP: np.ndarray  # operation slots x O_*
    OFREE: np.ndarray  # stack of free operation slots (S[S_FREE_OPS] at the bottom)
    DR: np.ndarray  # drives x D_*
    CAND: np.ndarray  # drives that may start after the current event
    BN: np.ndarray  # 4 x (drives * bins)
    RC: np.ndarray  # records x RC_*
    SM: np.ndarray  # streams x SM_*
    PH: np.ndarray  # phases x (1 + streams): requests in the phase, then per stream
    LN: np.ndarray  # LUNs x U_*
    EX: np.ndarray  # extents x EX_*
    GR: np.ndarray  # group geometries x G_*
    MP: np.ndarray  # member maps x (MP_MEM + 2 x widest)
    MH: np.ndarray  # member maps x widest: where each member's last operation ended (raid.py
    #                 heads: the copy a mirrored read uses)
    FL: np.ndarray  # failures x FL_*
    AF: np.ndarray  # (map row, member) made missing by failures
    TK: np.ndarray  # tasks x TK_*
    PC: np.ndarray  # pieces x PC_*
    EVT: np.ndarray  # run events x EV_*
    PLAN: np.ndarray  # scratch for raid.plan_request
    JB: np.ndarray  # jobs x J_*
    JFREE: np.ndarray  # stack of free jobs (S[S_FREE_JOBS])
    CL: np.ndarray  # cache lines x cache.CL_*
    HT: np.ndarray  # cache hash table
    HQ: np.ndarray  # event heap rows
    M: Models


# ---------------------------------------------------------------------------------------------
# per-drive statistics in time bins


@njit(nrt=False)
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


@njit(inline="always", nrt=False)
def _spread(BN, row, base, iv, t0, t1, weight):
    """Add ``weight`` x the overlap of [t0, t1) with each bin."""
    b = t0 // iv
    while t0 < t1:
        edge = (b + 1) * iv
        e = t1 if t1 < edge else edge
        BN[row, base + b] += weight * (e - t0)
        t0 = e
        b += 1


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
def _push(W, t, kind, ident):
    W.S[S_HSIZE] = HP.push(W.HQ, W.S[S_HSIZE], t, kind, W.S[S_SEQ], ident)
    W.S[S_SEQ] += 1


@njit(inline="always", nrt=False)
def _enqueue(W, s, now):
    """Append operation ``s`` to its drive's queue (host or background)."""
    OP = W.OP
    DR = W.DR
    d = OP[s, O_DRIVE]
    OP[s, O_NEXT] = NONE
    OP[s, O_QTIME] = now
    h = D_QHEAD if OP[s, O_SHARE] == 0 else D_BQHEAD
    if DR[d, h + 1] == NONE:  # the tail follows the head (D_QTAIL, D_BQTAIL)
        DR[d, h] = s
    else:
        OP[DR[d, h + 1], O_NEXT] = s
    DR[d, h + 1] = s
    _count(W, d, now, 1)


@njit(inline="always", nrt=False)
def _candidate(W, d, ncand):
    """Note drive ``d`` as one that may start after this event (once)."""
    DR = W.DR
    if DR[d, D_CANDF] == 0 and DR[d, D_INFLIGHT] < DR[d, D_MAXINF]:
        DR[d, D_CANDF] = 1
        W.CAND[ncand] = d
        ncand += 1
    return ncand


@njit(inline="always", nrt=False)
def _pick(OP, DR, d, now):
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
    if maxwait > 0 and now - OP[best, O_QTIME] >= maxwait:
        policy = SCHED_FCFS  # the oldest has waited long enough: it goes first
    if policy != SCHED_FCFS:
        # the least (wrap, key) wins, the first in queue order among equals: one integer per
        # operation (sectors and distances are far below 2**62) and selects, not branches
        # (which operation wins is as unpredictable as the addresses; the branches cost ~60 ns
        # a pick at 64 outstanding)
        pos = DR[d, D_POS]
        sstf = policy == SCHED_SSTF
        prev = NONE
        s = DR[d, D_QHEAD]
        k = 0
        best_r = _RANK_MAX
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


@njit(inline="always", nrt=False)
def _op_kind(job_kind, write):
    """traces/schema.py OPK_* of a job's operation."""
    if job_kind == JOB_REBUILD:
        return JOB_REBUILD + write  # OPK_REBUILD_READ, OPK_REBUILD_WRITE
    return job_kind


@njit(inline="always", nrt=False)
def _service(M, DR, d, now, lba, n, write):
    """(completion ns, 1 if served from the drive's cache) of an operation started now."""
    m = DR[d, D_MPARAM]
    if DR[d, D_MODEL] == MODEL_FIXED:
        return now + M.fixed[2 * m] + M.fixed[2 * m + 1] * n, 0
    if DR[d, D_MODEL] == MODEL_SSD:
        return SS.service(M.sp[m * SS.P_N:(m + 1) * SS.P_N], M.sst, d, now, lba, n,
                          write != 0), 0
    p = M.hp[m * H.P_N:(m + 1) * H.P_N]
    zones = M.hz[M.hz_off[m]:M.hz_off[m + 1]]
    cd = M.hcd[M.hc_off[m]:M.hc_off[m + 1]]
    ct = M.hct[M.hc_off[m]:M.hc_off[m + 1]]
    t_ms, hit = H.service(p, zones, cd, ct, M.hst, d, now / 1e6, lba, n, write != 0)
    done = int(np.ceil(t_ms * 1e6))
    return (done if done > now else now), hit


@njit(inline="always", nrt=False)
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
            s, contended = _pick(OP, DR, d, now)
            DR[d, D_POS] = OP[s, O_LBA] + OP[s, O_N]
            g = OP[s, O_ITEM]
            done, hit = _service(W.M, DR, d, now, OP[s, O_LBA], OP[s, O_N], OP[s, O_WRITE])
            if cfg.bus_ps > 0:  # the operation's data crosses the internal bus meanwhile
                tb = max(now, S[S_BUS_FREE]) + (OP[s, O_N] * 512 * cfg.bus_ps + 999) // 1000
                S[S_BUS_FREE] = tb
                if tb > done:
                    done = tb
            if g >= 0:
                slot = g & cap
                if RQ[slot, RQ_O_START] == NONE:
                    RQ[slot, RQ_O_START] = now
                if hit == 0:
                    RQ[slot, RQ_O_HIT] = 0
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
            W.BN[B_BYTES, bnow] += OP[s, O_N] * 512
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
            _push(W, done, EV_DONE, s)


# ---------------------------------------------------------------------------------------------
# planning


@njit(inline="always", nrt=False)
def _piece_n(cfg, nluns, pos, end):
    """The piece of host-volume sectors [pos, end) on one LUN: (lun, LUN sector, end)."""
    vu = cfg.vol_unit
    if vu > 0:
        chunk = pos // vu
        piece_end = min(end, (chunk + 1) * vu)
        return chunk % nluns, (chunk // nluns) * vu + pos % vu, piece_end
    return 0, pos, end


@njit(inline="always", nrt=False)
def _piece(cfg, W, pos, end):
    return _piece_n(cfg, W.LN.shape[0], pos, end)


@njit(inline="always", nrt=False)
def _add_ops(W, item, row, m, share, first, last):
    """Append the ``m`` operations planned in W.PLAN for member map ``row`` (members mapped to
    their drives) to the item's list (first, last), merging with its earlier operations on the
    same drive where contiguous."""
    OP = W.OP
    DR = W.DR
    PLAN = W.PLAN
    MP = W.MP
    for j in range(m):
        o = j * R.OP_NCOLS
        k = PLAN[o + R.OP_DRIVE]
        d = MP[row, MP_MEM + 2 * k]
        lba = MP[row, MP_MEM + 2 * k + 1] + PLAN[o + R.OP_SECTOR]
        cnt = PLAN[o + R.OP_COUNT]
        w = PLAN[o + R.OP_WRITE]
        ph = PLAN[o + R.OP_PHASE]
        p = DR[d, D_LASTOP]
        if p != NONE and OP[p, O_PHASE] == ph and OP[p, O_WRITE] == w and \
                OP[p, O_LBA] + OP[p, O_N] == lba:
            OP[p, O_N] += cnt
            continue
        first, last = _new_op(W, item, d, lba, cnt, w, ph, share, first, last)
    return first, last


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
def _plan(W, item, lun, lun_lba, n, write, first, last):
    """Append the drive operations of ``n`` sectors at ``lun_lba`` on ``lun`` to the item's list
    (first, last): extent by extent, each through its member map's layout."""
    LN = W.LN
    esect = LN[lun, U_EXT_SECT]
    pos = lun_lba
    end = lun_lba + n
    while pos < end:
        e = LN[lun, U_EXT0] + pos // esect
        piece_end = min(end, (pos // esect + 1) * esect)
        row = W.EX[e, EX_ROW]
        grp = W.MP[row, MP_GROUP]
        m = R.plan_request(W.GR[grp, G_KIND], W.GR[grp, G_WIDTH], W.GR[grp, G_UNIT],
                           W.GR[grp, G_DS], W.EX[e, EX_BASE] + pos % esect, piece_end - pos,
                           write, W.MH[row], W.PLAN, W.MP[row, MP_MISS:MP_MISS + R.MISS_N])
        first, last = _add_ops(W, item, row, m, 0, first, last)
        pos = piece_end
    return first, last


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
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
        _enqueue(W, w, now)
        ncand = _candidate(W, W.OP[w, O_DRIVE], ncand)
        w = w_next
    return False, ncand


# ---------------------------------------------------------------------------------------------
# requests and streams


@njit(inline="always", nrt=False)
def _xfer(S, nbytes, path_ps, now):
    """The host links, first come first served: when ``nbytes`` that arrive now have crossed."""
    t = max(now, S[S_PATH_FREE]) + (nbytes * path_ps + 999) // 1000
    S[S_PATH_FREE] = t
    return t


@njit(inline="always", nrt=False)
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
        at = max(t + RQ[slot, RQ_THINK], RQ[slot, RQ_ARRIVE])
        # arrivals tie-break on the request's index, not on when they were scheduled: the
        # order then does not depend on how the caller chunked the trace
        S[S_HSIZE] = HP.push(HQ, S[S_HSIZE], at, EV_ARRIVE, g, g)


@njit(nrt=False)
def _next_phase(S, RQ, SM, PH, HQ, t):
    """Closed loop: start the next phase at time ``t``."""
    p = S[S_PHASE] + 1
    S[S_PHASE] = p
    if p >= PH.shape[0]:
        return
    S[S_PHASE_LEFT] = PH[p, 0]
    for s in range(SM.shape[0]):
        SM[s, SM_UNISSUED] = PH[p, 1 + s]
        if SM[s, SM_UNISSUED] > 0:
            _try_issue(S, RQ, SM, HQ, s, t)


@njit(inline="always", nrt=False)
def _stream_done(S, RQ, SM, PH, HQ, s, now):
    """Closed loop: a request of stream ``s`` completed at ``now``."""
    SM[s, SM_INFLIGHT] -= 1
    S[S_PHASE_LEFT] -= 1
    _try_issue(S, RQ, SM, HQ, s, now)
    if S[S_PHASE_LEFT] == 0:
        _next_phase(S, RQ, SM, PH, HQ, now)


@njit(inline="always", nrt=False)
def _finish(cfg, W, g, now):
    """Request ``g`` completes at ``now``."""
    RQ = W.RQ
    slot = g & (RQ.shape[0] - 1)
    RQ[slot, RQ_O_DONE] = now
    W.S[S_NDONE] += 1
    if cfg.closed:
        _stream_done(W.S, RQ, W.SM, W.PH, W.HQ, RQ[slot, RQ_STREAM], now)


@njit(inline="always", nrt=False)
def _send_out(cfg, W, g, now):
    """Read data of request ``g`` leaves for the host: across the host links (an event), then
    done. Returns the request if it is done now (no host links: the caller finishes it), else
    NONE."""
    if cfg.path_ps > 0:
        t = _xfer(W.S, W.RQ[g & (W.RQ.shape[0] - 1), RQ_NSEC] * 512, cfg.path_ps, now)
        _push(W, t, EV_XFER, g)
        return NONE
    return g


@njit(inline="always", nrt=False)
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


# ---------------------------------------------------------------------------------------------
# the controller cache


@njit(inline="always", nrt=False)
def _lines_of(cfg, lun_lba, n):
    """First and last cache line index of LUN sectors [lun_lba, lun_lba + n)."""
    ls = cfg.line_sectors
    return lun_lba // ls, (lun_lba + n - 1) // ls


@njit(inline="always", nrt=False)
def _bits(cfg, k, lun_lba, n):
    """Sector mask, within line k, of LUN sectors [lun_lba, lun_lba + n)."""
    ls = cfg.line_sectors
    lo = max(lun_lba, k * ls) - k * ls
    hi = min(lun_lba + n, (k + 1) * ls) - k * ls
    return CA.mask(lo, hi)


@njit(inline="always", nrt=False)
def _lookup(cfg, W, g):
    """(HIT | FILLING | MISS, LUN of the first filling line) of read request ``g``."""
    RQ = W.RQ
    CL = W.CL
    slot = g & (RQ.shape[0] - 1)
    pos = RQ[slot, RQ_LBA]
    end = pos + RQ[slot, RQ_NSEC]
    status = HIT
    wait_lun = NONE
    while pos < end:
        lun, lun_lba, piece_end = _piece(cfg, W, pos, end)
        n = piece_end - pos
        k0, k1 = _lines_of(cfg, lun_lba, n)
        for k in range(k0, k1 + 1):
            line = CA.find(W.HT, (lun << CA.KEY_SHIFT) | k)
            if line == NONE:
                return MISS, NONE
            b = _bits(cfg, k, lun_lba, n)
            if (CL[line, CA.CL_VALID] & b) != b:
                job = CL[line, CA.CL_JOB]
                if job != NONE and W.JB[job, J_KIND] == JOB_PREFETCH:
                    if status == HIT:
                        status = FILLING
                        wait_lun = lun
                else:
                    return MISS, NONE
        pos = piece_end
    return status, wait_lun


@njit(inline="always", nrt=False)
def _store(cfg, W, g, dirty, now):
    """Put request ``g``'s sectors in the cache: dirty (a write-back write: the caller checked
    there is room) or clean (data read, or written through, while lines are available)."""
    RQ = W.RQ
    CL = W.CL
    S = W.S
    slot = g & (RQ.shape[0] - 1)
    pos = RQ[slot, RQ_LBA]
    end = pos + RQ[slot, RQ_NSEC]
    while pos < end:
        lun, lun_lba, piece_end = _piece(cfg, W, pos, end)
        n = piece_end - pos
        k0, k1 = _lines_of(cfg, lun_lba, n)
        for k in range(k0, k1 + 1):
            key = (lun << CA.KEY_SHIFT) | k
            b = _bits(cfg, k, lun_lba, n)
            line = CA.find(W.HT, key)
            if line == NONE:
                if CA.room(S, S_CACHE) == 0:
                    continue
                line = CA.take(CL, W.HT, S, S_CACHE, key)
                if dirty:
                    CA.write(CL, S, S_CACHE, line, b, now)
                else:
                    CL[line, CA.CL_VALID] = b
                    CA.make_clean(CL, S, S_CACHE, line)
            elif dirty:
                CA.write(CL, S, S_CACHE, line, b, now)
            else:
                CL[line, CA.CL_VALID] |= b
                CA.touch(CL, S, S_CACHE, line)
        pos = piece_end


@njit(nrt=False)
def _scan_lines(cfg, S, RQ, LN, CL, HT, g, touch):
    """Over request ``g``'s cache lines: (lines it spans, lines not cached, its clean lines);
    with ``touch`` its cached clean lines become the most recently used."""
    slot = g & (RQ.shape[0] - 1)
    pos = RQ[slot, RQ_LBA]
    end = pos + RQ[slot, RQ_NSEC]
    total = 0
    missing = 0
    clean = 0
    while pos < end:
        lun, lun_lba, piece_end = _piece_n(cfg, LN.shape[0], pos, end)
        k0, k1 = _lines_of(cfg, lun_lba, piece_end - pos)
        for k in range(k0, k1 + 1):
            total += 1
            line = CA.find(HT, (lun << CA.KEY_SHIFT) | k)
            if line == NONE:
                missing += 1
            elif CL[line, CA.CL_WHERE] == CA.L_CLEAN:
                clean += 1
                if touch:
                    CA.touch(CL, S, S_CACHE, line)
        pos = piece_end
    return total, missing, clean


@njit(nrt=False)
def _fits(cfg, S, RQ, LN, CL, HT, g):
    """Whether write ``g`` can take the lines it lacks now without evicting its own clean
    lines; if so its own are made the most recently used."""
    _total, missing, clean = _scan_lines(cfg, S, RQ, LN, CL, HT, g, False)
    if CA.room(S, S_CACHE) - clean < missing:
        return False
    _scan_lines(cfg, S, RQ, LN, CL, HT, g, True)
    return True


@njit(inline="always", nrt=False)
def _new_job(W, kind, lun, lba, n):
    """A job for LUN sectors [lba, lba + n) (the caller checked one is free)."""
    S = W.S
    S[S_FREE_JOBS] -= 1
    j = W.JFREE[S[S_FREE_JOBS]]
    W.JB[j, J_KIND] = kind
    W.JB[j, J_LUN] = lun
    W.JB[j, J_LBA] = lba
    W.JB[j, J_N] = n
    return j


@njit(nrt=False)
def _job_ops(W, j, write, now, ncand):
    """Plan job ``j``'s drive operations and queue them."""
    JB = W.JB
    first, _last = _plan(W, -j - 1, JB[j, J_LUN], JB[j, J_LBA], JB[j, J_N], write, NONE, NONE)
    return _launch(W, JB, j, J_PENDING, first, now, ncand)


@njit(nrt=False)
def _prefetch(cfg, W, lun, now, ncand):
    """Start a prefetch of the next ``ra_sectors`` at the LUN's read-ahead point; returns
    (started, ncand)."""
    CL = W.CL
    LN = W.LN
    S = W.S
    a = LN[lun, U_RA_END]
    n = min(cfg.ra_sectors, LN[lun, U_CAP] - a)
    if n <= 0:
        return False, ncand
    k0, k1 = _lines_of(cfg, a, n)
    missing = 0
    own_clean = 0
    for k in range(k0, k1 + 1):
        line = CA.find(W.HT, (lun << CA.KEY_SHIFT) | k)
        if line == NONE:
            missing += 1
        elif CL[line, CA.CL_WHERE] == CA.L_CLEAN:
            own_clean += 1
    if missing == 0:  # all there already
        LN[lun, U_RA_END] = a + n
        return True, ncand
    # the lines it lacks come from free lines and clean lines outside its range: evicting its
    # own would drop what it reads ahead (and the loop below would take them again)
    if CA.room(S, S_CACHE) - own_clean < missing or S[S_FREE_JOBS] == 0:
        return False, ncand
    j = _new_job(W, JOB_PREFETCH, lun, a, n)
    lo = (lun << CA.KEY_SHIFT) | k0
    for k in range(k0, k1 + 1):
        key = (lun << CA.KEY_SHIFT) | k
        if CA.find(W.HT, key) == NONE:
            CA.hold(CL, S, S_CACHE, CA.take_keeping(CL, W.HT, S, S_CACHE, key, lo, lo + k1 - k0),
                    j)
    LN[lun, U_RA_END] = a + n
    return True, _job_ops(W, j, 0, now, ncand)


@njit(inline="always", nrt=False)
def _sequential(cfg, W, g, now, ncand):
    """A read arrives: note where it ends on each LUN, and keep sequential readers' prefetch
    ``ra_sectors`` ahead of them."""
    RQ = W.RQ
    LN = W.LN
    slot = g & (RQ.shape[0] - 1)
    pos = RQ[slot, RQ_LBA]
    end = pos + RQ[slot, RQ_NSEC]
    while pos < end:
        lun, lun_lba, piece_end = _piece(cfg, W, pos, end)
        e = lun_lba + piece_end - pos
        seq = lun_lba == LN[lun, U_LAST_END]
        LN[lun, U_LAST_END] = e
        if seq and cfg.ra_sectors > 0:
            if LN[lun, U_RA_END] < e:
                LN[lun, U_RA_END] = e
            while LN[lun, U_RA_END] - e < cfg.ra_sectors:
                started, ncand = _prefetch(cfg, W, lun, now, ncand)
                if not started:
                    break
        pos = piece_end
    return ncand


@njit(inline="always", nrt=False)
def _read(cfg, W, g, now, ncand):
    """A read request is at the controller (again, after waiting for a prefetch). Returns
    (ncand, True if it goes to the drives, the request if it is done now, else NONE): the
    caller sends it to the drives or finishes it (see ``replay``)."""
    if cfg.cache_lines == 0:
        return ncand, True, NONE
    status, lun = _lookup(cfg, W, g)
    if status == HIT:
        RQ = W.RQ
        slot = g & (RQ.shape[0] - 1)
        RQ[slot, RQ_O_START] = now
        RQ[slot, RQ_O_HIT] = 1
        _scan_lines(cfg, W.S, RQ, W.LN, W.CL, W.HT, g, True)
        return ncand, False, _send_out(cfg, W, g, now)
    if status == FILLING:
        RQ = W.RQ
        LN = W.LN
        cap = RQ.shape[0] - 1
        RQ[g & cap, RQ_CNEXT] = NONE
        if LN[lun, U_WTAIL] == NONE:
            LN[lun, U_WHEAD] = g
        else:
            RQ[LN[lun, U_WTAIL] & cap, RQ_CNEXT] = g
        LN[lun, U_WTAIL] = g
        return ncand, False, NONE
    return ncand, True, NONE


@njit(inline="always", nrt=False)
def _lowest_bit(x):
    """The lowest set bit of ``x`` (not 0)."""
    k = 0
    while (x >> k) & 1 == 0:
        k += 1
    return k


@njit(inline="always", nrt=False)
def _highest_bit(x):
    """The highest set bit of ``x`` (not 0)."""
    k = 63
    while (x >> k) & 1 == 0:
        k -= 1
    return k


@njit(nrt=False)
def _destage_one(cfg, W, now, ncand):
    """Destage the oldest dirty line with its dirty neighbours in the same RAID stripe."""
    CL = W.CL
    HT = W.HT
    S = W.S
    line = S[S_CACHE + CA.CH_DIRTY]
    key = CL[line, CA.CL_KEY]
    lun = key >> CA.KEY_SHIFT
    k = key & ((1 << CA.KEY_SHIFT) - 1)
    grp = W.MP[W.EX[W.LN[lun, U_EXT0] + (k * cfg.line_sectors) // W.LN[lun, U_EXT_SECT],
                     EX_ROW], MP_GROUP]
    stripe = W.GR[grp, G_UNIT] * R.data_drives(W.GR[grp, G_KIND], W.GR[grp, G_WIDTH])
    stripe *= max(1, DESTAGE_SECTORS // stripe)  # whole stripes, up to 4 MiB at once
    ls = cfg.line_sectors
    s0 = (k * ls) // stripe * stripe
    lo_k = s0 // ls
    hi_k = (s0 + stripe - 1) // ls
    k0 = k
    while k0 > lo_k:
        x = CA.find(HT, (lun << CA.KEY_SHIFT) | (k0 - 1))
        if x == NONE or CL[x, CA.CL_WHERE] != CA.L_DIRTY:
            break
        k0 -= 1
    k1 = k
    while k1 < hi_k:
        x = CA.find(HT, (lun << CA.KEY_SHIFT) | (k1 + 1))
        if x == NONE or CL[x, CA.CL_WHERE] != CA.L_DIRTY:
            break
        k1 += 1
    first = CL[CA.find(HT, (lun << CA.KEY_SHIFT) | k0), CA.CL_DIRTY]
    last = CL[CA.find(HT, (lun << CA.KEY_SHIFT) | k1), CA.CL_DIRTY]
    if first == 0 or last == 0:  # the bit scans below would never end
        raise IndexError("replay: a cache line on the dirty list has no dirty sectors")
    a = k0 * ls + _lowest_bit(first)
    e = k1 * ls + _highest_bit(last) + 1
    j = _new_job(W, JOB_DESTAGE, lun, a, e - a)
    for kk in range(k0, k1 + 1):
        CA.hold(CL, S, S_CACHE, CA.find(HT, (lun << CA.KEY_SHIFT) | kk), j)
    S[S_DESTAGING] += 1
    return _job_ops(W, j, 1, now, ncand)


@njit(inline="always", nrt=False)
def _destage(cfg, W, now, ncand):
    """Start the destages the policy asks for (module docstring, 3) and keep a timer for the
    oldest dirty data."""
    if cfg.cache_lines == 0 or cfg.write_back == 0:
        return ncand
    S = W.S
    ndirty = S[S_CACHE + CA.CN_DIRTY]
    if ndirty >= cfg.flush_start:
        S[S_FLUSHING] = 1
    elif ndirty <= cfg.flush_stop:
        S[S_FLUSHING] = 0
    while S[S_DESTAGING] < cfg.destage_depth and S[S_CACHE + CA.CH_DIRTY] != NONE \
            and S[S_FREE_JOBS] > 0:
        old = now - W.CL[S[S_CACHE + CA.CH_DIRTY], CA.CL_DIRTY_T] >= cfg.flush_age_ns
        if not (S[S_FLUSHING] or old):
            break
        ncand = _destage_one(cfg, W, now, ncand)
    head = S[S_CACHE + CA.CH_DIRTY]
    if head != NONE and S[S_TIMER] == NONE:
        t = W.CL[head, CA.CL_DIRTY_T] + cfg.flush_age_ns
        if t > now:
            S[S_TIMER] = t
            _push(W, t, EV_TIMER, 0)
    return ncand


@njit(inline="always", nrt=False)
def _cache_write(cfg, W, g, now):
    """Write request ``g``'s data goes into the write-back cache: the request is done (the
    caller finishes it)."""
    slot = g & (W.RQ.shape[0] - 1)
    _store(cfg, W, g, True, now)
    W.RQ[slot, RQ_O_START] = now
    W.RQ[slot, RQ_O_HIT] = 1


@njit(inline="always", nrt=False)
def _write_in(cfg, W, g, now, ncand):
    """Write request ``g``'s data is at the controller. Returns (ncand, True if it goes to the
    drives, the request if it is done now, else NONE), as ``_read``."""
    if cfg.cache_lines > 0 and cfg.write_back:
        S = W.S
        total, _m, _c = _scan_lines(cfg, S, W.RQ, W.LN, W.CL, W.HT, g, False)
        if total <= cfg.cache_lines:
            fin = NONE
            if S[S_WW_HEAD] == NONE and _fits(cfg, S, W.RQ, W.LN, W.CL, W.HT, g):
                _cache_write(cfg, W, g, now)
                fin = g
            else:  # wait, in order, for room
                RQ = W.RQ
                cap = RQ.shape[0] - 1
                RQ[g & cap, RQ_CNEXT] = NONE
                if S[S_WW_TAIL] == NONE:
                    S[S_WW_HEAD] = g
                else:
                    RQ[S[S_WW_TAIL] & cap, RQ_CNEXT] = g
                S[S_WW_TAIL] = g
            return _destage(cfg, W, now, ncand), False, fin
    return ncand, True, NONE


@njit(nrt=False)
def _retry_writes(cfg, W, now):
    """Writes waiting for cache room take it, in order, while there is enough."""
    S = W.S
    RQ = W.RQ
    while S[S_WW_HEAD] != NONE:
        g = S[S_WW_HEAD]
        if not _fits(cfg, S, RQ, W.LN, W.CL, W.HT, g):
            return
        S[S_WW_HEAD] = RQ[g & (RQ.shape[0] - 1), RQ_CNEXT]
        if S[S_WW_HEAD] == NONE:
            S[S_WW_TAIL] = NONE
        _cache_write(cfg, W, g, now)
        _finish(cfg, W, g, now)


@njit(nrt=False)
def _job_done(cfg, W, j, now, ncand):
    """Job ``j``'s drive work is complete."""
    CL = W.CL
    JB = W.JB
    S = W.S
    lun = JB[j, J_LUN]
    k0, k1 = _lines_of(cfg, JB[j, J_LBA], JB[j, J_N])
    for k in range(k0, k1 + 1):
        line = CA.find(W.HT, (lun << CA.KEY_SHIFT) | k)
        if line == NONE or CL[line, CA.CL_JOB] != j:
            continue
        if JB[j, J_KIND] == JOB_DESTAGE:
            CA.release_destaged(CL, S, S_CACHE, line, now)
        else:
            CL[line, CA.CL_VALID] |= _bits(cfg, k, JB[j, J_LBA], JB[j, J_N])
            CA.release_filled(CL, S, S_CACHE, line, now)
    W.JFREE[S[S_FREE_JOBS]] = j
    S[S_FREE_JOBS] += 1
    _retry_writes(cfg, W, now)  # lines were cleaned, or filled (clean and evictable)
    if JB[j, J_KIND] == JOB_DESTAGE:
        S[S_DESTAGING] -= 1
    else:  # the reads waiting on this LUN look again, in order, one event each
        LN = W.LN
        g = LN[lun, U_WHEAD]
        LN[lun, U_WHEAD] = NONE
        LN[lun, U_WTAIL] = NONE
        while g != NONE:
            _push(W, now, EV_RETRY, g)
            g = W.RQ[g & (W.RQ.shape[0] - 1), RQ_CNEXT]
    return _destage(cfg, W, now, ncand)


@njit(inline="always", nrt=False)
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
# failures and background tasks (rebuild, rebalance, parity initialization)


@njit(inline="always", nrt=False)
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
        if _miss_slot(W.MP, row, k) == NONE:
            for j in range(0, R.MISS_N, 2):
                if W.MP[row, MP_MISS + j] < 0:
                    W.MP[row, MP_MISS + j] = k
                    W.MP[row, MP_MISS + j + 1] = 0
                    break
            else:  # a fourth loss: beyond every layout's tolerance already
                continue
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
    _event(W, now, code, TK[t, TK_DRIVE], t, PPM, TK[t, TK_BDONE], 0)


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
                _push(W, allowed, EV_TASK, t)
                return ncand
        u = TK[t, TK_NEXT]
        TK[t, TK_NEXT] = u + 1
        TK[t, TK_INFL] += 1
        p = TK[t, TK_P0] + u % TK[t, TK_NP]
        idx = u // TK[t, TK_NP]
        a = idx * TK[t, TK_UROWS]
        rows = min(TK[t, TK_UROWS], PC[p, PC_ROWS] - a)
        TK[t, TK_BYTES] += rows * 512
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
            if kind == JOB_REBUILD:
                m = R.plan_rebuild(W.GR[grp, G_KIND], W.GR[grp, G_WIDTH], PC[p, PC_K], a, rows,
                                   W.MP[row, MP_MISS:MP_MISS + R.MISS_N], W.PLAN)
            else:
                unit = W.GR[grp, G_UNIT]
                m = R.plan_init(W.GR[grp, G_KIND], W.GR[grp, G_WIDTH], unit, a // unit,
                                (rows + unit - 1) // unit, W.PLAN)
            first, last = _add_ops(W, -j - 1, row, m, share, first, last)
        if first != NONE:
            return _launch(W, W.JB, j, J_PENDING, first, now, ncand)
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
    TK[t, TK_BDONE] += min(urows, PC[p, PC_ROWS] - idx * urows) * 512
    row = PC[p, PC_ROW]
    k = PC[p, PC_K]
    kind = TK[t, TK_KIND]
    if kind == JOB_REBUILD:
        js = _miss_slot(W.MP, row, k)
        if js != NONE:
            if done_rows >= PC[p, PC_ROWS]:
                _miss_remove(W.MP, row, k)
            else:
                W.MP[row, MP_MISS + js + 1] = done_rows
    elif kind == JOB_REBALANCE and done_rows >= PC[p, PC_ROWS]:
        W.MP[row, MP_MEM + 2 * k] = PC[p, PC_DST]
        W.MP[row, MP_MEM + 2 * k + 1] = PC[p, PC_DOFF]
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
    return ncand


# ---------------------------------------------------------------------------------------------
# the event loop


@njit(nrt=False)
def replay(cfg, W):
    """Run until every request completed (DONE) or the caller must act (NEED_INPUT, FULL_*).
    All state lives in ``W``, so a call after a FULL_* or NEED_INPUT resumes."""
    S = W.S
    RQ = W.RQ
    SM = W.SM
    HQ = W.HQ
    cap = RQ.shape[0] - 1
    closed = cfg.closed
    if S[S_STARTED] == 0:
        S[S_STARTED] = 1
        for f in range(W.FL.shape[0]):  # the failures and tasks the caller scheduled
            _push(W, W.FL[f, FL_T], EV_FAIL, f)
        for t in range(W.TK.shape[0]):
            _push(W, W.TK[t, TK_T], EV_TASK, t)
        if closed:
            S[S_PHASE] = -1
            _next_phase(S, RQ, SM, W.PH, HQ, 0)
    if closed and S[S_NSTARVED] > 0:
        # rows arrived: the starved streams issue at the times they wanted to
        k = S[S_NSTARVED]
        S[S_NSTARVED] = 0
        for i in range(k):
            SM[SM[i, SM_LIST], SM_STARVED] = 0
        for i in range(k):
            s = SM[i, SM_LIST]
            if SM[s, SM_STARVED] == 0:
                _try_issue(S, RQ, SM, HQ, s, SM[s, SM_STARVED_T])
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
                if ta < HQ[0, 0] or (ta == HQ[0, 0] and HQ[0, 1] > EV_ARRIVE):
                    take_arrival = True
        if take_arrival:
            g = S[S_NXT]
            now = RQ[g & cap, RQ_ARRIVE]
            kind = EV_ARRIVE
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
        if kind == EV_DONE:
            ncand, fin = _op_done(cfg, W, g, now, ncand)
        elif kind == EV_TIMER:
            S[S_TIMER] = NONE
            ncand = _destage(cfg, W, now, ncand)
        elif kind == EV_RETRY:  # a read that waited for a prefetch looks again
            act = EV_RETRY
        elif kind == EV_FAIL:
            _fail(cfg, W, g, now)
        elif kind == EV_TASK:
            if W.TK[g, TK_STATE] == 0:
                ncand = _task_start(cfg, W, g, now, ncand)
            elif W.TK[g, TK_STATE] == 1:  # a rate token: issue one more unit
                ncand = _task_issue(cfg, W, g, now, ncand)
        else:
            slot = g & cap
            ready = False
            if kind == EV_ARRIVE:
                RQ[slot, RQ_O_ARRIVE] = now
                if cfg.ctrl_ns > 0:  # the controller takes one command at a time
                    t = max(now, S[S_CTRL_FREE]) + cfg.ctrl_ns
                    S[S_CTRL_FREE] = t
                    _push(W, t, EV_CTRL, g)
                else:
                    ready = True
            elif kind == EV_CTRL:
                ready = True
            elif RQ[slot, RQ_WRITE] != 0:  # EV_XFER: write data is in
                act = EV_XFER
            else:  # EV_XFER: read data delivered to the host
                fin = g
            if ready:
                if RQ[slot, RQ_WRITE] != 0:
                    if cfg.path_ps > 0:
                        _push(W, _xfer(S, RQ[slot, RQ_NSEC] * 512, cfg.path_ps, now), EV_XFER,
                              g)
                    else:
                        act = EV_XFER
                else:
                    if cfg.cache_lines > 0:
                        ncand = _sequential(cfg, W, g, now, ncand)
                    act = EV_RETRY
        go = False  # (one inlined copy of _to_drives, not one per caller)
        if act == EV_RETRY:
            ncand, go, fin = _read(cfg, W, g, now, ncand)
        elif act == EV_XFER:
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


#: Columns ``retire_rows`` copies out of the ring, in this order (pipeline/replay.py names them).
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
