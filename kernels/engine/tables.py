"""The engine's tables, described once: every table's columns, the codes the kernels use, and
the NumPy structured dtypes through which the pipeline reads and writes the tables it builds
(an array's LUNs, extents, geometries and member maps; the failure plan's failures, tasks and
pieces) or reads back (drive-operation records, run events), by field name.

Kernels index int64 tables with the column constants (``RQ[slot, RQ_LBA]``); the dtypes name the
same columns in the same order, and ``_check`` below verifies, at import, that every field of
every dtype is the column its constant says, so the two cannot drift apart. ``as_kernel``
and ``named`` convert between the two forms without copying.

Prefixes: one table each (``RQ_`` requests, ``O_`` operations, ``D_`` drives, ``J_`` jobs,
``U_`` LUNs, ``EX_`` extents, ``G_`` geometries, ``MP_`` member maps, ``FL_`` failures, ``AF_``
the members a failure makes missing, ``TK_`` tasks, ``PC_`` pieces, ``EV_`` run events,
``SM_`` closed-loop streams, ``RC_`` drive-operation records, ``B_`` statistics bins, ``S_``
the loop's scalars); codes: ``HK_`` heap event kinds, ``X_`` run-event codes (traces/schema.py
EVENT_NAMES), ``JOB_`` background job kinds, ``MODEL_`` drive models, ``SCHED_`` drive
schedulers; ``DONE``, ``NEED_INPUT`` and ``FULL_*`` are what ``replay`` returns. A table's
width is ``<prefix>_COLS``; a column ending in ``_N`` (``O_N``, ``RC_N``) is a sector count.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from blocklab.kernels import cache as CA
from blocklab.kernels.layout import raid as R
from blocklab.kernels.units import SECTOR  # noqa: F401  (re-exported: the engine kernels take it from here)

MODEL_FIXED, MODEL_HDD, MODEL_SSD = 0, 1, 2
SCHED_FCFS, SCHED_SSTF, SCHED_CLOOK, SCHED_SPTF = 0, 1, 2, 3
# what replay() returns
DONE, NEED_INPUT, FULL_OPS, FULL_RECORDS, FULL_HEAP, FULL_EVENTS = range(6)
# heap event kinds (HK_), in their order at equal times (kernels/heap.py orders by kind)
HK_DONE, HK_RETRY, HK_XFER, HK_CTRL, HK_TIMER, HK_FAIL, HK_TASK, HK_ARRIVE, HK_JOB = range(9)
# (HK_JOB: a destage or prefetch that planned no drive operation, its data all on failed
# members, is done: cachepath.py _job_ops)
# job kinds (destage and prefetch are also the drive operation kinds of traces/schema.py
# OPK_*; a rebuild job's operations are OPK_REBUILD_READ or OPK_REBUILD_WRITE)
JOB_DESTAGE, JOB_PREFETCH, JOB_REBUILD, JOB_INIT, JOB_REBALANCE = 1, 2, 3, 5, 6
# run events (traces/schema.py EVENT_NAMES)
(X_FAILURE, X_REBUILD_START, X_REBUILD_PROGRESS, X_REBUILD_END, X_DATA_LOSS, X_REPLACE,
 X_REBALANCE_START, X_REBALANCE_END, X_INIT_START, X_INIT_END, X_REBALANCE_PROGRESS,
 X_INIT_PROGRESS, X_REBUILD_STOPPED) = range(13)
PPM = 1_000_000
# cache lookup outcomes
HIT, FILLING, MISS = 0, 1, 2
NONE = -1
RANK_MAX = (1 << 63) - 1  # above every scheduling rank
DESTAGE_SECTORS = 8192  # a destage writes at most this many sectors of whole stripes

# The loop's state in the int64 array S (kept between calls); the cache's list heads and
# counts follow from S_CACHE (kernels/cache.py CH_*). Closed-loop repetition: S_PASS is the
# pass of the trace under way (1, 2, ...), S_PASSES the most passes allowed (1: no repetition),
# S_PASS_T0 when the pass under way started (0 for the first), S_TASKS_AT_END the background
# tasks left when the last pass ended.
(S_SEQ, S_HSIZE, S_NXT, S_LOADED, S_FINAL, S_NDONE, S_TOTAL, S_CTRL_FREE, S_PATH_FREE,
 S_FREE_OPS, S_REC, S_MARGIN_OPS, S_MARGIN_HEAP, S_MARGIN_REC, S_PHASE, S_PHASE_LEFT,
 S_NSTARVED, S_INTERVAL, S_STARTED, S_FREE_JOBS, S_DESTAGING, S_FLUSHING, S_TIMER,
 S_WW_HEAD, S_WW_TAIL, S_BUS_FREE, S_EVN, S_MARGIN_EV, S_TASKS_LEFT, S_NB, S_BINS_END,
 S_PASS, S_PASSES, S_PASS_T0, S_TASKS_AT_END, S_CACHE) = range(36)
S_COLS = S_CACHE + CA.CH_N

# Table columns. RQ: one row per request slot (inputs, outputs, state).
(RQ_GIDX, RQ_ARRIVE, RQ_LBA, RQ_NSEC, RQ_WRITE, RQ_STREAM, RQ_THINK, RQ_PHASE, RQ_OUTST,
 RQ_SNEXT, RQ_ROW, RQ_SID, RQ_O_ARRIVE, RQ_O_START, RQ_O_DONE, RQ_O_HIT, RQ_PENDING,
 RQ_PHASE1, RQ_WAIT, RQ_CNEXT) = range(20)
RQ_COLS = 20
# RQ_O_HIT: 1 while no operation of the request has waited for a drive's media (a cache hit
# when it completes), plus HIT_LOST when part of its data was lost (raid.request_lost)
HIT_LOST = 2
# OP: one row per operation slot (O_SHARE: 0 for host work, else the background work's
# share of a busy drive's operations, ppm; O_PZB .. O_PANG: where its first block is on an
# HDD, hdd.position_place, kept for the sptf scheduler once it has asked; O_PZB is NONE until
# then, set so when the operation is queued).
(O_ITEM, O_DRIVE, O_LBA, O_N, O_WRITE, O_PHASE, O_NEXT, O_QTIME, O_SHARE, O_PZB, O_PQA, O_PC,
 O_PH, O_PANG) = range(14)
O_COLS = 14
# DR: one row per drive (a queue for host work and one for background work).
(D_QHEAD, D_QTAIL, D_INFLIGHT, D_MAXINF, D_SCHED, D_DEPTH, D_POS, D_MODEL, D_MPARAM, D_BUSY,
 D_NOPS, D_LASTOP, D_CANDF, D_CNT, D_TLAST, D_BQHEAD, D_BQTAIL, D_CREDIT, D_FAILED,
 D_MAXWAIT, D_AGED) = range(21)
D_COLS = 21
# D_AGED: picks left in the batch an aged operation began, in which the queue's age is not
# looked at (drives._pick: Linux deadline's fifo_batch).
#: Picks in a batch begun by an operation that waited max_wait: Linux deadline's default
#: fifo_batch (Documentation/block/deadline-iosched.rst: "deadline expiries are only checked
#: between batches").
AGED_BATCH = 16
# JB: one row per background job: a cache job's LUN and range, or a task's unit.
J_KIND, J_A, J_B, J_C, J_PENDING, J_PHASE1, J_WAIT = range(7)
J_LUN, J_LBA, J_N = J_A, J_B, J_C  # cache jobs
J_TASK, J_PIECE, J_UNIT = J_A, J_B, J_C  # task jobs
J_COLS = 7
# LN: one row per host-volume LUN (in volume order): its extents EX[U_EXT0 ...], each
# U_EXT_SECT sectors of the LUN.
U_EXT0, U_EXT_SECT, U_CAP, U_LAST_END, U_RA_END, U_WHEAD, U_WTAIL = range(7)
U_COLS = 7
# EX: one row per extent: the member map row holding it and its first sector in that row's
# address space (a LUN of a RAID group is one extent; a storage pool LUN one per slice; a pool
# volume one per D-stripe).
EX_ROW, EX_BASE = range(2)
# GR: one row per group geometry (layout, members, stripe unit, rows per member).
G_KIND, G_WIDTH, G_UNIT, G_DS = range(4)
G_COLS = 4
# MP: one row per member map (a RAID group, a storage pool's private group, a pool D-stripe):
# its geometry, the missing members (raid.MISS_N: member, rebuild cursor), the pieces of it being
# copied to a new drive (COPY_N slots, NONE when free: host writes to their members are written
# there too, tasks.py _task_start), then per member its drive and the member's first sector on
# that drive.
MP_GROUP = 0
MP_MISS = 1
COPY_N = 3
MP_COPY = MP_MISS + R.MISS_N
MP_MEM = MP_COPY + COPY_N
# FL: one row per drive failure; AF: the (map row, member) pairs each failure makes missing.
FL_T, FL_DRIVE, FL_AF0, FL_NAF = range(4)
AF_ROW, AF_K = range(2)
# TK: one row per background task (rebuild, rebalance, initialization) over pieces PC[...].
(TK_KIND, TK_T, TK_P0, TK_NP, TK_UROWS, TK_UNITS, TK_NEXT, TK_DONE, TK_INFL, TK_DEPTH,
 TK_SHARE, TK_RATE, TK_BYTES, TK_PROG, TK_STATE, TK_DRIVE, TK_T0, TK_BDONE, TK_WAIT,
 TK_LOST) = range(20)
TK_COLS = 20
# PC: one row per piece: a member's rows [0, PC_ROWS) of map row PC_ROW rebuilt into (or copied
# from PC_SRC to) PC_DST at offset PC_DOFF, in units (done contiguously, then a bit mask of the
# units after them that are done: at most UNIT_WINDOW, tasks.py _task_issue); PC_LOST0 is one
# more than the first row of a rebuild's unit that had nothing to be rebuilt from (0: none):
# the member stays missing from there up.
PC_ROW, PC_K, PC_SRC, PC_SOFF, PC_DST, PC_DOFF, PC_ROWS, PC_DONE, PC_MASK, PC_LOST0 = range(10)
PC_COLS = 10
# EV: one row per run event.
EV_T, EV_CODE, EV_DRIVE, EV_REF, EV_FRAC, EV_BYTES, EV_LOST = range(7)
EV_COLS = 7
# SM: one row per closed-loop stream (SM_LIST: row i holds the i-th starved stream).
SM_HEAD, SM_TAIL, SM_INFLIGHT, SM_UNISSUED, SM_STARVED, SM_STARVED_T, SM_LIST = range(7)
SM_COLS = 7
# RC: one row per recorded drive operation.
(RC_DRIVE, RC_ITEM, RC_KIND, RC_QTIME, RC_START, RC_DONE, RC_LBA, RC_N, RC_WRITE,
 RC_HIT) = range(10)
RC_COLS = 10
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
    hc_off: np.ndarray  # set m's distances: hcd[hc_off[m]:hc_off[m+1]]
    hct: np.ndarray  # seek curves (ms), each followed by its seek table (hdd.seek_times)
    ht_off: np.ndarray  # set m's times: hct[ht_off[m]:ht_off[m+1]]
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


# ---------------------------------------------------------------------------------------------
# The tables the pipeline builds or reads, as structured dtypes (int64 fields, in column order).

def _table(*names: str) -> np.dtype:
    return np.dtype([(n, np.int64) for n in names])


#: LN: a host-volume LUN: its first extent, sectors per extent, capacity (sectors); the rest is
#: the kernel's (sequential detection, read-ahead end, writes waiting for cache room).
LUN = _table("ext0", "ext_sect", "cap", "last_end", "ra_end", "whead", "wtail")
#: EX: an extent: the member map row holding it and its first sector in that row's space.
EXTENT = _table("row", "base")
#: GR: a group geometry: layout (raid.KIND_*), members, stripe unit and rows per member
#: (sectors of each member the layout uses).
GEOMETRY = _table("kind", "width", "unit", "rows")
#: FL: a drive failure at time t (ns): the drive and its (map row, member) pairs in AF.
FAILURE = _table("t", "drive", "af0", "naf")
#: AF: a member of a member map that a failure makes missing.
MISSING = _table("row", "k")
#: TK: a background task (rebuild, rebalance, initialization) over pieces p0 .. p0+np-1 of PC.
#: Inputs: kind (JOB_*), start time t (ns), pieces, rows per unit, units, depth (units in
#: flight), share (ppm of a busy drive's time), rate (bytes/s cap, 0: none), bytes (to move),
#: drive (failed drive, -1: none); the others are the kernel's progress (lost: a rebuild's
#: bytes that had nothing left to be rebuilt from, data lost).
TASK = _table("kind", "t", "p0", "np", "urows", "units", "next", "done", "infl", "depth",
              "share", "rate", "bytes", "prog", "state", "drive", "t0", "bdone", "wait",
              "lost")
#: PC: a piece: a member's rows [0, rows) of map row ``row``, member ``k``, rebuilt into (or
#: copied from src at soff to) dst at doff; done and mask are the kernel's.
PIECE = _table("row", "k", "src", "soff", "dst", "doff", "rows", "done", "mask", "lost0")
#: RC: a recorded drive operation: drive, item (request index, or -(job + 1)), kind
#: (traces/schema.py OPK_*), queued, started and completed (ns), lba, sectors, write, cache hit.
RECORD = _table("drive", "item", "kind", "qtime", "start", "done", "lba", "n", "write", "hit")
#: EVT: a run event: time (ns), code (X_*), drive, task (or failure) index, fraction done
#: (ppm), bytes done, stripes lost.
EVENT = _table("t", "code", "drive", "ref", "frac", "bytes", "lost")


def member_map(width: int) -> np.dtype:
    """MP: a member map row (a RAID group, a pool's private group, a pool D-stripe) of up to
    ``width`` members: its geometry row, the missing members (raid.MISS_N columns: member,
    rebuild cursor pairs), the pieces being copied (COPY_N columns, -1: none), then per member
    its drive and first sector on that drive (-1: none).
    """
    return np.dtype([("group", np.int64), ("missing", np.int64, (R.MISS_N,)),
                     ("copying", np.int64, (COPY_N,)),
                     ("members", [("drive", np.int64), ("offset", np.int64)], (width,))])


def as_kernel(table: np.ndarray) -> np.ndarray:
    """The int64 2-D form the kernels index (rows x columns) of a structured table: a view."""
    t = np.ascontiguousarray(table)
    return t.view(np.int64).reshape(len(t), t.dtype.itemsize // 8)


def named(rows: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The structured view of an int64 rows x columns table: fields by name, no copy."""
    rows = np.ascontiguousarray(rows, np.int64)
    if rows.shape[1] * 8 != dtype.itemsize:
        raise ValueError(f"{rows.shape[1]} columns do not make a {dtype}")
    return rows.view(dtype).reshape(len(rows))


def _check() -> None:
    """Every dtype field is the column its constant names (e.g. TASK's "urows" is TK_UROWS)."""
    g = globals()
    for prefix, dt in (("U_", LUN), ("EX_", EXTENT), ("G_", GEOMETRY), ("FL_", FAILURE),
                       ("AF_", MISSING), ("TK_", TASK), ("PC_", PIECE), ("RC_", RECORD),
                       ("EV_", EVENT)):
        names = dt.names or ()
        for i, n in enumerate(names):
            col = {"rows": "DS"}.get(n, n.upper()) if prefix == "G_" else n.upper()
            if g[prefix + col] != i:
                raise AssertionError(f"tables: {prefix}{col} is {g[prefix + col]}, not {i}")
    mp = member_map(1)
    assert mp.fields is not None
    if (mp.fields["missing"][1], mp.fields["copying"][1], mp.fields["members"][1]) != (
            MP_MISS * 8, MP_COPY * 8, MP_MEM * 8):
        raise AssertionError("tables: member_map does not match MP_MISS / MP_COPY / MP_MEM")


_check()


#: Codes by name, for the pipeline: background task kinds (TASK "kind"), drive schedulers and
#: drive models (the per-drive settings of ``door.Array``).
TASK_KINDS = {"rebuild": JOB_REBUILD, "init": JOB_INIT, "rebalance": JOB_REBALANCE}
SCHEDULERS = {"fcfs": SCHED_FCFS, "sstf": SCHED_SSTF, "clook": SCHED_CLOOK, "sptf": SCHED_SPTF}
DRIVE_MODELS = {"fixed": MODEL_FIXED, "hdd": MODEL_HDD, "ssd": MODEL_SSD}
