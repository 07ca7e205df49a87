"""The replay engine (issue 3, deliverable 4): an event-driven kernel that replays host requests
against an array of drives and reports when each request started and completed.

The caller (``pipeline/replay.py``) streams the trace through a ring of request slots: it loads
rows, calls ``replay``, and the kernel returns when it needs more rows (``NEED_INPUT``), more
operation slots, heap entries or record space (``FULL_*``: the caller grows or drains them and
calls again) or when every request has completed (``DONE``). Requests are named by their
*global index* (0, 1, 2, ... over the read and write requests of the trace) everywhere in the
kernel; a request's slot is ``index & (capacity - 1)``. The caller retires completed requests in
order and reuses their slots, so memory stays bounded whatever the trace length.

Semantics (``tests/reference/engine.py`` implements the same in plain Python):

1. **Arrivals.** Open loop: request k arrives at ``arrive[k]`` (the trace time divided by the
   speed factor; non-decreasing). Closed loop: each stream keeps ``outst`` requests in flight
   and issues them in its own order; request k is issued at ``max(t + think[k], arrive[k])``
   where t is the completion that freed its slot (or the start of its phase). Phases are
   barriers: phase p+1 starts when every request of phases <= p has completed. Closed-loop
   arrivals at the same time are taken in request order.
2. **Controller.** With a per-command time ``ctrl_ns`` the controller takes commands one at a
   time, first come first served. Write data then crosses the data path (host links and the
   internal bus as one first-come first-served server, ``path_ps`` picoseconds per byte)
   before the drives see the write; read data crosses it after the drives.
3. **Planning.** A request is cut at the host volume's stripe-unit boundaries into pieces, one
   per LUN; each LUN's layout (``kernels.layout.raid``) turns a piece into drive operations in
   two phases (reads a parity update needs, then the rest). Operations of one request on the
   same drive, in the same phase and direction, that are contiguous on the drive are merged
   into one (a controller issues one command per drive for contiguous segments). Phase-0
   operations are queued at once and phase-1 ones when the last phase-0 one completes (or at
   once if there are none), each phase in planning order.
4. **Drives.** Each drive has a queue (first come, first served order) and serves up to
   ``maxinf`` operations at once (1 for a disk, its queue depth for an SSD); when it may start
   one, its scheduler picks among the first ``depth`` queued: FCFS the oldest, SSTF the one
   nearest the end of the last operation started, C-LOOK the lowest sector at or past it, else
   the lowest (ties: the oldest). Service times come from the drive's model (``MODEL_*``).
   After every event, drives that can start do so in drive order.
5. **Completion.** A read completes when its data has crossed the data path; a write when its
   last drive operation completes. Then, in closed loop, its stream issues its next request.
6. **Order.** Events are ordered by (time, kind, sequence number); at equal times drive
   completions come first, then data transfers, controller completions and arrivals (an
   open-loop arrival from the trace comes after every scheduled event of its time).

Per-drive statistics are kept in time bins of ``S[S_INTERVAL]`` ns: busy time, operations and
bytes started, and the integral of the operations at the drive (queued or in service); when
time outgrows the bins, adjacent bins merge and the interval doubles.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from blocklab.kernels import heap as HP
from blocklab.kernels._jit import njit
from blocklab.kernels.drive import hdd as H
from blocklab.kernels.layout import raid as R

MODEL_FIXED, MODEL_HDD = 0, 1
SCHED_FCFS, SCHED_SSTF, SCHED_CLOOK = 0, 1, 2
# what replay() returns
DONE, NEED_INPUT, FULL_OPS, FULL_RECORDS, FULL_HEAP = range(5)
# event kinds, in their order at equal times
EV_DONE, EV_XFER, EV_CTRL, EV_ARRIVE = range(4)
NONE = -1

# The loop's state in the int64 array S (kept between calls).
(S_SEQ, S_HSIZE, S_NXT, S_LOADED, S_FINAL, S_NDONE, S_TOTAL, S_CTRL_FREE, S_PATH_FREE,
 S_FREE_OPS, S_REC, S_MARGIN_OPS, S_MARGIN_HEAP, S_MARGIN_REC, S_PHASE, S_PHASE_LEFT,
 S_NSTARVED, S_INTERVAL, S_STARTED) = range(19)
S_N = 19


class Cfg(NamedTuple):
    """Scalars of one replay."""

    closed: int  # 1: closed loop (streams), 0: open loop
    vol_unit: int  # host volume stripe unit, sectors (0: one LUN, no host volume)
    ctrl_ns: int  # controller time per command
    path_ps: int  # data path, picoseconds per byte (0: none)
    record: int  # 1: record every drive operation
    nphases: int  # closed loop: phases
    nstreams: int  # closed loop: streams


class Reqs(NamedTuple):
    """Per request slot (capacity a power of two). Inputs first, then outputs and state."""

    gidx: np.ndarray  # global index of the request in the slot
    arrive: np.ndarray  # open loop: arrival ns; closed loop: earliest issue ns
    lba: np.ndarray  # first sector on the host volume
    nsec: np.ndarray  # sectors
    write: np.ndarray  # 1 write, 0 read
    stream: np.ndarray  # closed loop: dense stream index
    think: np.ndarray  # closed loop: think time, ns
    phase: np.ndarray  # closed loop: dense phase index
    outst: np.ndarray  # closed loop: the stream's window for this request
    snext: np.ndarray  # closed loop: global index of the stream's next loaded request
    row: np.ndarray  # the request's row in the trace file (recorded with its operations)
    sid: np.ndarray  # the trace's stream id (the caller's, for output)
    o_arrive: np.ndarray  # issued (ns)
    o_start: np.ndarray  # first drive operation started (ns)
    o_done: np.ndarray  # completed (ns); -1 until then
    o_hit: np.ndarray  # 1 if every drive operation was a drive-cache hit
    pending: np.ndarray  # operations of the current phase not yet complete
    phase1: np.ndarray  # phase-1 operations waiting for phase 0
    wait: np.ndarray  # first waiting phase-1 operation (a list through Ops.next)


class Ops(NamedTuple):
    """Operation slots, allocated from the ``free`` stack."""

    item: np.ndarray  # global request index
    drive: np.ndarray
    lba: np.ndarray  # drive sector
    n: np.ndarray  # sectors
    write: np.ndarray
    phase: np.ndarray
    next: np.ndarray  # link: the request's list while planning, then queue or wait list
    qtime: np.ndarray  # entered the drive's queue (ns)
    free: np.ndarray  # stack of free slots (S[S_FREE_OPS] of them at the bottom)


class Drives(NamedTuple):
    q_head: np.ndarray
    q_tail: np.ndarray
    inflight: np.ndarray  # operations in service
    maxinf: np.ndarray  # operations the drive serves at once
    sched: np.ndarray  # SCHED_*
    depth: np.ndarray  # queued operations the scheduler chooses among
    pos: np.ndarray  # sector after the last operation started
    model: np.ndarray  # MODEL_*
    mparam: np.ndarray  # which parameter set of that model
    busy: np.ndarray  # ns serving operations (summed over concurrent ones)
    nops: np.ndarray  # operations served
    lastop: np.ndarray  # planning: the request's last operation on this drive (merging)
    cand: np.ndarray  # drives that may start after this event
    cand_flag: np.ndarray
    cnt: np.ndarray  # operations at the drive (queued or in service)
    tlast: np.ndarray  # when cnt last changed


class Bins(NamedTuple):
    """Per drive x interval (drive-major, ``nbins`` per drive)."""

    busy: np.ndarray
    ops: np.ndarray
    nbytes: np.ndarray
    qint: np.ndarray  # integral of cnt, op x ns


class Recs(NamedTuple):
    """Every drive operation, in the order they started (Cfg.record)."""

    drive: np.ndarray
    item: np.ndarray  # trace row of the request served
    qtime: np.ndarray
    start: np.ndarray
    done: np.ndarray
    lba: np.ndarray
    n: np.ndarray
    write: np.ndarray
    hit: np.ndarray


class Streams(NamedTuple):
    """Closed loop: per stream, and per phase x stream."""

    head: np.ndarray  # global index of the next loaded, unissued request
    tail: np.ndarray
    inflight: np.ndarray
    unissued: np.ndarray  # requests of the current phase not yet issued
    starved: np.ndarray  # 1: waiting for rows the caller has not loaded yet
    starved_t: np.ndarray  # the time it wanted to issue
    starved_list: np.ndarray  # starved streams in the order they starved
    ph_cnt: np.ndarray  # requests per (phase, stream)
    ph_total: np.ndarray  # requests per phase


class Layout(NamedTuple):
    lun_group: np.ndarray  # per host-volume LUN (in volume order): its group
    lun_base: np.ndarray  # its first drive
    g_kind: np.ndarray  # per group: raid.KIND_*
    g_width: np.ndarray
    g_unit: np.ndarray  # stripe unit, sectors
    g_ds: np.ndarray  # usable sectors per drive
    plan: np.ndarray  # scratch for raid.plan_request


class Models(NamedTuple):
    fixed: np.ndarray  # MODEL_FIXED, per set: (ns per operation, ns per sector)
    hp: np.ndarray  # MODEL_HDD, per set: hdd.P_N parameters
    hz: np.ndarray  # zone tables, concatenated
    hz_off: np.ndarray  # set m's zones: hz[hz_off[m]:hz_off[m+1]]
    hcd: np.ndarray  # seek curves (distances), concatenated
    hct: np.ndarray  # seek curves (ms)
    hc_off: np.ndarray
    hst: np.ndarray  # per drive: hdd.S_N state


# ---------------------------------------------------------------------------------------------
# per-drive statistics in time bins


@njit(inline="always", nrt=False)
def _fit(B, S, nd, t):
    """Make the bins reach time ``t`` (merge pairs and double the interval as needed)."""
    nb = B.busy.shape[0] // nd
    while t >= nb * S[S_INTERVAL]:
        for d in range(nd):
            base = d * nb
            for b in range(nb // 2):
                for a in (B.busy, B.ops, B.nbytes, B.qint):
                    a[base + b] = a[base + 2 * b] + a[base + 2 * b + 1]
            for b in range(nb // 2, nb):
                for a in (B.busy, B.ops, B.nbytes, B.qint):
                    a[base + b] = 0
        S[S_INTERVAL] *= 2


@njit(inline="always", nrt=False)
def _spread(arr, base, iv, t0, t1, weight):
    """Add ``weight`` x the overlap of [t0, t1) with each bin."""
    b = t0 // iv
    while t0 < t1:
        edge = (b + 1) * iv
        e = t1 if t1 < edge else edge
        arr[base + b] += weight * (e - t0)
        t0 = e
        b += 1


@njit(inline="always", nrt=False)
def _count(D, B, S, nd, d, t, delta):
    """The operations at drive ``d`` change by ``delta`` at ``t``: integrate the old count."""
    _fit(B, S, nd, t)
    nb = B.busy.shape[0] // nd
    if D.cnt[d] > 0 and t > D.tlast[d]:
        _spread(B.qint, d * nb, S[S_INTERVAL], D.tlast[d], t, D.cnt[d])
    D.tlast[d] = t
    D.cnt[d] += delta


# ---------------------------------------------------------------------------------------------
# drive queues


@njit(inline="always", nrt=False)
def _enqueue(O, D, B, S, nd, s, now):
    """Append operation ``s`` to its drive's queue."""
    d = O.drive[s]
    O.next[s] = NONE
    O.qtime[s] = now
    if D.q_tail[d] == NONE:
        D.q_head[d] = s
    else:
        O.next[D.q_tail[d]] = s
    D.q_tail[d] = s
    _count(D, B, S, nd, d, now, 1)


@njit(inline="always", nrt=False)
def _candidate(D, d, ncand):
    """Note drive ``d`` as one that may start after this event (once)."""
    if D.cand_flag[d] == 0 and D.inflight[d] < D.maxinf[d]:
        D.cand_flag[d] = 1
        D.cand[ncand] = d
        ncand += 1
    return ncand


@njit(inline="always", nrt=False)
def _pick(O, D, d):
    """Take the next operation off drive ``d``'s queue (see the module docstring, 4)."""
    best = D.q_head[d]
    best_prev = NONE
    policy = D.sched[d]
    if policy != SCHED_FCFS:
        pos = D.pos[d]
        prev = NONE
        s = D.q_head[d]
        k = 0
        best_key = 0
        best_wrap = 1
        depth = D.depth[d]
        while s != NONE and k < depth:
            x = O.lba[s]
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
            s = O.next[s]
            k += 1
    if best_prev == NONE:
        D.q_head[d] = O.next[best]
    else:
        O.next[best_prev] = O.next[best]
    if D.q_tail[d] == best:
        D.q_tail[d] = best_prev
    O.next[best] = NONE
    return best


@njit(inline="always", nrt=False)
def _service(M, D, d, now, lba, n, write):
    """(completion ns, 1 if served from the drive's cache) of an operation started now."""
    m = D.mparam[d]
    if D.model[d] == MODEL_FIXED:
        return now + M.fixed[2 * m] + M.fixed[2 * m + 1] * n, 0
    p = M.hp[m * H.P_N:(m + 1) * H.P_N]
    zones = M.hz[M.hz_off[m]:M.hz_off[m + 1]]
    cd = M.hcd[M.hc_off[m]:M.hc_off[m + 1]]
    ct = M.hct[M.hc_off[m]:M.hc_off[m + 1]]
    t_ms, hit = H.service(p, zones, cd, ct, M.hst, d, now / 1e6, lba, n, write != 0)
    done = int(np.ceil(t_ms * 1e6))
    return (done if done > now else now), hit


@njit(inline="always", nrt=False)
def _start_drives(cfg, S, R, O, D, B, RC, M, hp, nd, ncand, now):
    """Start every drive that can, in drive order (the candidates noted during the event)."""
    cap = R.gidx.shape[0] - 1
    for i in range(1, ncand):  # insertion sort: a handful of candidates
        x = D.cand[i]
        j = i - 1
        while j >= 0 and D.cand[j] > x:
            D.cand[j + 1] = D.cand[j]
            j -= 1
        D.cand[j + 1] = x
    nb = B.busy.shape[0] // nd
    for i in range(ncand):
        d = D.cand[i]
        D.cand_flag[d] = 0
        while D.inflight[d] < D.maxinf[d] and D.q_head[d] != NONE:
            s = _pick(O, D, d)
            D.pos[d] = O.lba[s] + O.n[s]
            g = O.item[s]
            slot = g & cap
            if R.o_start[slot] == NONE:
                R.o_start[slot] = now
            done, hit = _service(M, D, d, now, O.lba[s], O.n[s], O.write[s])
            if hit == 0:
                R.o_hit[slot] = 0
            D.busy[d] += done - now
            D.nops[d] += 1
            D.inflight[d] += 1
            _fit(B, S, nd, done)
            iv = S[S_INTERVAL]
            B.ops[d * nb + now // iv] += 1
            B.nbytes[d * nb + now // iv] += O.n[s] * 512
            _spread(B.busy, d * nb, iv, now, done, 1)
            if cfg.record:
                k = S[S_REC]
                RC.drive[k] = d
                RC.item[k] = R.row[slot]
                RC.qtime[k] = O.qtime[s]
                RC.start[k] = now
                RC.done[k] = done
                RC.lba[k] = O.lba[s]
                RC.n[k] = O.n[s]
                RC.write[k] = O.write[s]
                RC.hit[k] = hit
                S[S_REC] = k + 1
            S[S_HSIZE] = HP.push(hp, S[S_HSIZE], done, EV_DONE, S[S_SEQ], s)
            S[S_SEQ] += 1


# ---------------------------------------------------------------------------------------------
# planning


@njit(inline="always", nrt=False)
def _plan(L, O, D, S, g, lun, lun_lba, n, write, first, last):
    """Append the drive operations of a piece on ``lun`` to request ``g``'s list
    (first, last), merging with its earlier operations where contiguous."""
    grp = L.lun_group[lun]
    m = R.plan_request(L.g_kind[grp], L.g_width[grp], L.g_unit[grp], L.g_ds[grp], lun_lba, n,
                       write, g, L.plan)
    base = L.lun_base[lun]
    for j in range(m):
        o = j * R.OP_NCOLS
        d = base + L.plan[o + R.OP_DRIVE]
        lba = L.plan[o + R.OP_SECTOR]
        cnt = L.plan[o + R.OP_COUNT]
        w = L.plan[o + R.OP_WRITE]
        ph = L.plan[o + R.OP_PHASE]
        p = D.lastop[d]
        if p != NONE and O.phase[p] == ph and O.write[p] == w and O.lba[p] + O.n[p] == lba:
            O.n[p] += cnt
            continue
        S[S_FREE_OPS] -= 1
        s = O.free[S[S_FREE_OPS]]
        O.item[s] = g
        O.drive[s] = d
        O.lba[s] = lba
        O.n[s] = cnt
        O.write[s] = w
        O.phase[s] = ph
        O.next[s] = NONE
        D.lastop[d] = s
        if first == NONE:
            first = s
        else:
            O.next[last] = s
        last = s
    return first, last


@njit(inline="always", nrt=False)
def _plan_host(cfg, L, O, D, S, g, lba, nsec, write):
    """Request ``g``'s operations as a list; returns its first slot (NONE: no operations)."""
    first = NONE
    last = NONE
    pos = lba
    end = lba + nsec
    nluns = L.lun_group.shape[0]
    vu = cfg.vol_unit
    while pos < end:
        if vu > 0:
            chunk = pos // vu
            piece_end = min(end, (chunk + 1) * vu)
            lun = chunk % nluns
            lun_lba = (chunk // nluns) * vu + pos % vu
        else:
            piece_end = end
            lun = 0
            lun_lba = pos
        first, last = _plan(L, O, D, S, g, lun, lun_lba, piece_end - pos, write, first, last)
        pos = piece_end
    s = first
    while s != NONE:  # forget the merge candidates
        D.lastop[O.drive[s]] = NONE
        s = O.next[s]
    return first


@njit(inline="always", nrt=False)
def _launch(R, O, D, B, S, nd, slot, first, now, ncand):
    """Queue the first phase of a planned request; keep the other phase on its wait list."""
    n0 = 0
    n1 = 0
    s = first
    while s != NONE:
        if O.phase[s] == 0:
            n0 += 1
        else:
            n1 += 1
        s = O.next[s]
    ph = 0 if n0 > 0 else 1
    R.pending[slot] = n0 if n0 > 0 else n1
    R.phase1[slot] = n1 if n0 > 0 else 0
    R.wait[slot] = NONE
    tail = NONE
    s = first
    while s != NONE:
        nxt = O.next[s]
        if O.phase[s] == ph:
            _enqueue(O, D, B, S, nd, s, now)
            ncand = _candidate(D, O.drive[s], ncand)
        else:
            O.next[s] = NONE
            if tail == NONE:
                R.wait[slot] = s
            else:
                O.next[tail] = s
            tail = s
        s = nxt
    return ncand


# ---------------------------------------------------------------------------------------------
# requests and streams


@njit(inline="always", nrt=False)
def _xfer(S, nbytes, path_ps, now):
    """The data path, first come first served: when ``nbytes`` that arrive now have crossed."""
    t = max(now, S[S_PATH_FREE]) + (nbytes * path_ps + 999) // 1000
    S[S_PATH_FREE] = t
    return t


@njit(inline="always", nrt=False)
def _try_issue(cfg, S, R, ST, hp, s, t):
    """Closed loop: stream ``s`` issues what its window allows at time ``t``."""
    cap = R.gidx.shape[0] - 1
    while ST.unissued[s] > 0:
        g = ST.head[s]
        if g == NONE:  # its next request is not loaded yet: the caller must load first
            if S[S_FINAL]:
                raise IndexError("replay: closed-loop stream ran out of requests")
            if ST.starved[s] == 0:
                ST.starved[s] = 1
                ST.starved_t[s] = t
                ST.starved_list[S[S_NSTARVED]] = s
                S[S_NSTARVED] += 1
            return
        slot = g & cap
        if ST.inflight[s] >= R.outst[slot]:
            return
        ST.head[s] = R.snext[slot]
        if ST.head[s] == NONE:
            ST.tail[s] = NONE
        ST.unissued[s] -= 1
        ST.inflight[s] += 1
        at = t + R.think[slot]
        if R.arrive[slot] > at:
            at = R.arrive[slot]
        # arrivals tie-break on the request's index, not on when they were scheduled: the
        # order then does not depend on how the caller chunked the trace
        S[S_HSIZE] = HP.push(hp, S[S_HSIZE], at, EV_ARRIVE, g, g)


@njit(inline="always", nrt=False)
def _next_phase(cfg, S, R, ST, hp, t):
    """Closed loop: start the next phase at time ``t``."""
    p = S[S_PHASE] + 1
    S[S_PHASE] = p
    if p >= cfg.nphases:
        return
    S[S_PHASE_LEFT] = ST.ph_total[p]
    ns = cfg.nstreams
    for s in range(ns):
        ST.unissued[s] = ST.ph_cnt[p * ns + s]
        if ST.unissued[s] > 0:
            _try_issue(cfg, S, R, ST, hp, s, t)


@njit(inline="always", nrt=False)
def _finish(cfg, S, R, ST, hp, g, now):
    """Request ``g`` completes at ``now``."""
    slot = g & (R.gidx.shape[0] - 1)
    R.o_done[slot] = now
    S[S_NDONE] += 1
    if cfg.closed:
        s = R.stream[slot]
        ST.inflight[s] -= 1
        S[S_PHASE_LEFT] -= 1
        _try_issue(cfg, S, R, ST, hp, s, now)
        if S[S_PHASE_LEFT] == 0:
            _next_phase(cfg, S, R, ST, hp, now)


@njit(inline="always", nrt=False)
def _plan_and_launch(cfg, S, R, O, D, B, L, ST, hp, nd, g, now, ncand):
    """Turn request ``g`` into drive operations and queue its first phase."""
    slot = g & (R.gidx.shape[0] - 1)
    R.o_start[slot] = NONE
    R.o_hit[slot] = 1
    first = _plan_host(cfg, L, O, D, S, g, R.lba[slot], R.nsec[slot], R.write[slot])
    if first == NONE:  # nothing to do (zero length): completes at once
        R.o_start[slot] = now
        _finish(cfg, S, R, ST, hp, g, now)
        return ncand
    return _launch(R, O, D, B, S, nd, slot, first, now, ncand)


@njit(inline="always", nrt=False)
def _op_done(cfg, S, R, O, D, B, ST, hp, nd, s, now, ncand):
    """Drive operation ``s`` completes at ``now``."""
    d = O.drive[s]
    D.inflight[d] -= 1
    _count(D, B, S, nd, d, now, -1)
    if D.q_head[d] != NONE:
        ncand = _candidate(D, d, ncand)
    g = O.item[s]
    O.free[S[S_FREE_OPS]] = s
    S[S_FREE_OPS] += 1
    slot = g & (R.gidx.shape[0] - 1)
    R.pending[slot] -= 1
    if R.pending[slot] > 0:
        return ncand
    if R.phase1[slot] > 0:  # phase 0 done: queue the waiting phase-1 operations, in order
        R.pending[slot] = R.phase1[slot]
        R.phase1[slot] = 0
        w = R.wait[slot]
        R.wait[slot] = NONE
        while w != NONE:
            w_next = O.next[w]
            _enqueue(O, D, B, S, nd, w, now)
            ncand = _candidate(D, O.drive[w], ncand)
            w = w_next
    elif R.write[slot] == 0 and cfg.path_ps > 0:  # read data crosses the path to the host
        t = _xfer(S, R.nsec[slot] * 512, cfg.path_ps, now)
        S[S_HSIZE] = HP.push(hp, S[S_HSIZE], t, EV_XFER, S[S_SEQ], g)
        S[S_SEQ] += 1
    else:
        _finish(cfg, S, R, ST, hp, g, now)
    return ncand


# ---------------------------------------------------------------------------------------------
# the event loop


@njit(nrt=False)
def replay(cfg, S, R, O, D, B, RC, ST, L, M, hp):
    """Run until every request completed (DONE) or the caller must act (NEED_INPUT, FULL_*).
    All state lives in the arguments, so a call after a FULL_* or NEED_INPUT resumes."""
    cap = R.gidx.shape[0] - 1
    nd = D.q_head.shape[0]
    closed = cfg.closed
    if closed and S[S_STARTED] == 0:
        S[S_STARTED] = 1
        S[S_PHASE] = -1
        _next_phase(cfg, S, R, ST, hp, 0)
    if closed and S[S_NSTARVED] > 0:
        # rows arrived: the starved streams issue at the times they wanted to
        k = S[S_NSTARVED]
        S[S_NSTARVED] = 0
        for i in range(k):
            s = ST.starved_list[i]
            ST.starved[s] = 0
        for i in range(k):
            s = ST.starved_list[i]
            if ST.starved[s] == 0:
                _try_issue(cfg, S, R, ST, hp, s, ST.starved_t[s])
    while S[S_NDONE] < S[S_TOTAL]:
        if S[S_FINAL] == 0:
            if closed:
                if S[S_NSTARVED] > 0:
                    return NEED_INPUT
            elif S[S_NXT] == S[S_LOADED]:
                return NEED_INPUT
        if S[S_FREE_OPS] < S[S_MARGIN_OPS]:
            return FULL_OPS
        if S[S_HSIZE] + S[S_MARGIN_HEAP] > hp.t.shape[0]:
            return FULL_HEAP
        if cfg.record and S[S_REC] + S[S_MARGIN_REC] > RC.drive.shape[0]:
            return FULL_RECORDS
        # the next event: an open-loop arrival from the trace, or the heap's top
        take_arrival = False
        if not closed and S[S_NXT] < S[S_LOADED]:
            if S[S_HSIZE] == 0:
                take_arrival = True
            else:
                ta = R.arrive[S[S_NXT] & cap]
                if ta < hp.t[0] or (ta == hp.t[0] and hp.k[0] > EV_ARRIVE):
                    take_arrival = True
        if take_arrival:
            g = S[S_NXT]
            now = R.arrive[g & cap]
            kind = EV_ARRIVE
            S[S_NXT] = g + 1
        else:
            if S[S_HSIZE] == 0:
                raise IndexError("replay: no event left but requests are incomplete")
            now = hp.t[0]
            kind = hp.k[0]
            g = hp.i[0]
            S[S_HSIZE] = HP.pop(hp, S[S_HSIZE])
        ncand = 0
        if kind == EV_DONE:
            ncand = _op_done(cfg, S, R, O, D, B, ST, hp, nd, g, now, ncand)
        else:
            slot = g & cap
            ready = False
            if kind == EV_ARRIVE:
                R.o_arrive[slot] = now
                if cfg.ctrl_ns > 0:  # the controller takes one command at a time
                    t = max(now, S[S_CTRL_FREE]) + cfg.ctrl_ns
                    S[S_CTRL_FREE] = t
                    S[S_HSIZE] = HP.push(hp, S[S_HSIZE], t, EV_CTRL, S[S_SEQ], g)
                    S[S_SEQ] += 1
                else:
                    ready = True
            elif kind == EV_CTRL:
                ready = True
            elif R.write[slot] != 0:  # EV_XFER: write data is in
                ncand = _plan_and_launch(cfg, S, R, O, D, B, L, ST, hp, nd, g, now, ncand)
            else:  # EV_XFER: read data delivered to the host
                _finish(cfg, S, R, ST, hp, g, now)
            if ready:
                if R.write[slot] != 0 and cfg.path_ps > 0:
                    t = _xfer(S, R.nsec[slot] * 512, cfg.path_ps, now)
                    S[S_HSIZE] = HP.push(hp, S[S_HSIZE], t, EV_XFER, S[S_SEQ], g)
                    S[S_SEQ] += 1
                else:
                    ncand = _plan_and_launch(cfg, S, R, O, D, B, L, ST, hp, nd, g, now, ncand)
        if ncand > 0:
            _start_drives(cfg, S, R, O, D, B, RC, M, hp, nd, ncand, now)
    return DONE


@njit(nrt=False)
def link_streams(R, ST, first, count):
    """Closed loop: append the newly loaded requests ``first .. first+count-1`` to their
    streams' lists (in order)."""
    cap = R.gidx.shape[0] - 1
    for g in range(first, first + count):
        slot = g & cap
        s = R.stream[slot]
        R.snext[slot] = NONE
        if ST.head[s] == NONE:
            ST.head[s] = g
        else:
            R.snext[ST.tail[s] & cap] = g
        ST.tail[s] = g

