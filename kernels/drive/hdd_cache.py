"""The HDD model's media walks and on-drive cache: the read-ahead in progress (computed lazily,
run by run, and stopped or extended by the next request), when a read's blocks reach the host,
a write's walk over the platter as its data arrives, and DiskSim's choice of cache segment
(``disksim_diskcache.c``). ``kernels/drive/hdd.py`` says what the model does as a whole and
serves a request with these; ``kernels/drive/hdd_tables.py`` describes the parameter vector
``p``, the zone table ``zones`` and the drive state ``st``. Times are in milliseconds.
"""

from __future__ import annotations

import numpy as np

from blocklab.kernels._jit import njit
from blocklab.kernels.drive.hdd_geometry import (
    _BIG,
    _EPS,
    _lbns_before,
    _move,
    _phys,
    _run_at,
    _run_len,
    _step,
    _wait,
    _where,
    track_bounds,
)
from blocklab.kernels.drive.hdd_tables import (
    P_ALMOST,
    P_BLOCKS,
    P_CACHE_ON,
    P_MAX_RA,
    P_NSEGS,
    P_RA_KIND,
    P_ROT_MS,
    P_SEG_BLOCKS,
    P_SURFACES,
    P_WSEG,
    RA_CYL,
    RA_DEC,
    RA_NONE,
    RA_TRACK,
    S_CLOCK,
    S_CYL,
    S_DS_SEG,
    S_FREE,
    S_HEAD,
    S_M_C,
    S_M_GEO,
    S_M_H,
    S_M_J,
    S_M_NXT,
    S_M_Q,
    S_M_TP,
    S_M_TR,
    S_M_TS,
    S_M_WAIT,
    S_M_ZB,
    S_N,
    S_PF_C0,
    S_PF_H0,
    S_PF_LBN,
    S_PF_N,
    S_PF_SEG,
    S_PF_T,
    S_RA_END,
    S_SEGS,
    Z_BPT,
)

_INF = 1e300
_USE_MAX = (1 << 53) - 1  # segment use clocks below this (9e15 requests) rank exactly


@njit(forceinline=True, nrt=False)
def _memo_put(st, b, j, tp, ts, tr, wt, geo, c, h, zb, q, nxt):
    st[b + S_M_J] = j
    st[b + S_M_TP] = tp
    st[b + S_M_TS] = ts
    st[b + S_M_TR] = tr
    st[b + S_M_WAIT] = wt
    st[b + S_M_GEO] = geo
    st[b + S_M_C] = c
    st[b + S_M_H] = h
    st[b + S_M_ZB] = zb
    st[b + S_M_Q] = q
    st[b + S_M_NXT] = nxt


@njit(forceinline=True, nrt=False)
def _memo_get(st, b):
    """The walk's state as ``_memo_put`` left it (all but the run index)."""
    return (st[b + S_M_TP], st[b + S_M_TS], st[b + S_M_TR], st[b + S_M_WAIT],
            int(st[b + S_M_GEO]), int(st[b + S_M_C]), int(st[b + S_M_H]), int(st[b + S_M_ZB]),
            int(st[b + S_M_Q]), int(st[b + S_M_NXT]))


@njit(forceinline=True, nrt=False)
def _ra_restart(p, zones, curve_d, curve_t, st, b, zb, q, nxt, geo):
    """Put the read-ahead's walk back at its first run (whose physical place is ``zb, q, nxt``,
    or is looked up if ``zb < 0``; ``geo`` its length on the platter if known, else 0)."""
    t = st[b + S_PF_T]
    lbn = int(st[b + S_PF_LBN])
    if zb < 0:
        zb, q, nxt = _phys(p, zones, lbn)
        geo = 0
    ts, tr, wt, geo, c1, h1 = _run_at(p, zones, curve_d, curve_t, t, int(st[b + S_PF_C0]),
                                      int(st[b + S_PF_H0]), lbn, zb, q, nxt, geo)
    _memo_put(st, b, 0, t, ts, tr, wt, geo, c1, h1, zb, q, nxt)
    return tr, wt, geo, zb


@njit(forceinline=True, nrt=False)
def _ra_new(p, zones, curve_d, curve_t, st, b, seg, t, c, h, lbn, nblk, zb, q, nxt, geo):
    """Start a media read of ``nblk`` blocks from ``lbn`` (physical place ``zb, q, nxt``, or
    ``zb < 0``; ``geo`` its first run's length if known, else 0) into segment ``seg`` at ``t``
    from (c, h), the mechanism busy until it ends (computed when needed). Returns (when its
    first block comes under the head, the rotational wait before it, the first run's length on
    the platter, its zone base)."""
    st[b + S_PF_SEG] = seg
    st[b + S_PF_T] = t
    st[b + S_PF_C0] = c
    st[b + S_PF_H0] = h
    st[b + S_PF_LBN] = lbn
    st[b + S_PF_N] = nblk
    st[b + S_RA_END] = 0
    return _ra_restart(p, zones, curve_d, curve_t, st, b, zb, q, nxt, geo)


@njit(nrt=False)
def _ra_cut(p, zones, curve_d, curve_t, st, b, cut):
    """Where the read-ahead in progress is at time ``cut``, which stops it at the first block
    boundary at or after ``cut`` (DiskSim stops a read-ahead there): (blocks read, time it
    stops or ends, cylinder, head, True if it is still going at ``cut``). When it has ended by
    ``cut``, its end is kept in ``S_FREE``, ``S_CYL``, ``S_HEAD``."""
    n = int(st[b + S_PF_N])
    if st[b + S_RA_END] > 0 and cut >= st[b + S_FREE]:
        return n, st[b + S_FREE], int(st[b + S_CYL]), int(st[b + S_HEAD]), False
    if st[b + S_M_TP] > cut:  # the walk got past cut earlier (a request out of time order)
        _ra_restart(p, zones, curve_d, curve_t, st, b, -1, 0, 0, 0)
    rot = p[P_ROT_MS]
    lbn = int(st[b + S_PF_LBN])
    j = int(st[b + S_M_J])
    tp, ts, tr, wt, geo, c, h, zb, q, nxt = _memo_get(st, b)
    while True:
        if cut < ts:
            stop = ts
            break
        if cut < tr:
            stop = tr
            break
        s = rot / zones[zb + Z_BPT]
        cnt = min(geo, n - j)
        if cut < tr + cnt * s:
            k = int((cut - tr) / s)
            stop = tr + (k + 1) * s
            _memo_put(st, b, j, tp, ts, tr, wt, geo, c, h, zb, q, nxt)
            return j + k, stop, c, h, True
        t_end = tr + cnt * s
        if j + cnt == n:  # the walk ends before cut
            _memo_put(st, b, j, tp, ts, tr, wt, geo, c, h, zb, q, nxt)
            st[b + S_RA_END] = 1
            st[b + S_FREE] = t_end
            st[b + S_CYL] = c
            st[b + S_HEAD] = h
            return n, t_end, c, h, False
        zb, q, nxt = _step(p, zones, zb, q, nxt, lbn + j, cnt)
        j += cnt
        tp = t_end
        ts, tr, wt, geo, c, h = _run_at(p, zones, curve_d, curve_t, tp, c, h, lbn + j, zb, q, nxt,
                                        0)
    _memo_put(st, b, j, tp, ts, tr, wt, geo, c, h, zb, q, nxt)
    return j, stop, c, h, True


@njit(forceinline=True, nrt=False)
def _ra_cut_now(p, zones, curve_d, curve_t, st, b, cut):
    """``_ra_cut``, its commonest outcomes worked out in place: a read-ahead known to have
    ended by ``cut``, or one that ``cut`` finds in the run its walk is at (the next request
    soon after a read: the drive reads ahead to the end of the track), or one whose walk ended
    in that run before ``cut`` (the next random request, later: a read-ahead to the end of the
    track is one run). Those are the first pass of ``_ra_cut``'s loop with the same
    operations, which would store the walk's state unchanged; anything else calls ``_ra_cut``.
    Its call, with five arrays, cost more than this arithmetic on a random read."""
    n = int(st[b + S_PF_N])
    if st[b + S_RA_END] > 0 and cut >= st[b + S_FREE]:
        return n, st[b + S_FREE], int(st[b + S_CYL]), int(st[b + S_HEAD]), False
    if st[b + S_M_TP] <= cut:
        j = int(st[b + S_M_J])
        ts = st[b + S_M_TS]
        tr = st[b + S_M_TR]
        c = int(st[b + S_M_C])
        h = int(st[b + S_M_H])
        if cut < ts:
            return j, ts, c, h, True
        if cut < tr:
            return j, tr, c, h, True
        s = p[P_ROT_MS] / zones[int(st[b + S_M_ZB]) + Z_BPT]
        cnt = min(int(st[b + S_M_GEO]), n - j)
        if cut < tr + cnt * s:
            k = int((cut - tr) / s)
            return j + k, tr + (k + 1) * s, c, h, True
        if j + cnt == n:  # the walk ended in this run, before cut
            t_end = tr + cnt * s
            st[b + S_RA_END] = 1
            st[b + S_FREE] = t_end
            st[b + S_CYL] = c
            st[b + S_HEAD] = h
            return n, t_end, c, h, False
    return _ra_cut(p, zones, curve_d, curve_t, st, b, cut)


@njit(forceinline=True, nrt=False)
def _ra_bus_first(p, zones, zb, tr, nbus, wm, bus_at, resel, xfer):
    """``_ra_bus`` of a walk just started (``_ra_new``) for the host's blocks ``0 .. nbus-1``
    when its first run (which comes under the head at ``tr``, in the zone at ``zb``) holds
    them and goes on after them, and ``1 <= wm <= nbus``: the first pass of ``_ra_bus``'s
    loop, its operations in its order (less its ``+ pre * xfer``, which adds 0.0 to a
    positive time here), so the same time to the last bit. A random read miss takes this
    path; the call of ``_ra_bus`` with its five arrays (and the walk's state read back and
    written unchanged) cost more than the arithmetic (perf/ab.py: about a tenth of a random
    4 KiB operation's model time)."""
    s = p[P_ROT_MS] / zones[zb + Z_BPT]
    m_first = tr + 1 * s
    m_last = tr + nbus * s
    t_wm = tr + wm * s
    bus = max(bus_at, t_wm) + resel
    return max(max(bus, m_first) + nbus * xfer, m_last + xfer)


@njit(nrt=False)
def _ra_bus(p, zones, curve_d, curve_t, st, b, bus_from, nbus, wm, bus_at, resel, xfer):
    """When the host has the read-ahead's walk blocks ``bus_from .. bus_from+nbus-1``: it
    starts ``resel`` after both ``bus_at`` and the moment the ``wm``-th of them is read, and
    sends one block per ``xfer`` but none before it is read. The walk is computed as far as
    that (and kept up to the last run read wholly before the host has its last block)."""
    rot = p[P_ROT_MS]
    n = int(st[b + S_PF_N])
    lbn = int(st[b + S_PF_LBN])
    host_end = bus_from + nbus
    bus = 0.0
    known = wm <= 0
    if known:
        bus = bus_at + resel
    pre = 0
    j = int(st[b + S_M_J])
    if j > max(bus_from, 0):  # (the host's blocks may start before the walk's)
        if not known or st[b + S_M_TP] > bus_at:
            _ra_restart(p, zones, curve_d, curve_t, st, b, -1, 0, 0, 0)
            j = 0
        else:
            # the host's blocks before the walk's next run were all read before ``bus_at``:
            # each of their runs sends them one after the other (for such a run the walk's
            # formula below gives exactly ``bus + (hi - lo) * xfer``)
            x = max(bus_from, 0)
            lim = min(j, host_end)
            zb, q, nxt = _phys(p, zones, lbn + x)
            while x < lim:
                g = _run_len(p, zones, zb, lbn + x, q, nxt, _BIG)
                m = min(g, lim - x)
                bus = bus + m * xfer
                if x + m >= lim:
                    break
                zb, q, nxt = _step(p, zones, zb, q, nxt, lbn + x, g)
                x += g
    tp, ts, tr, wt, geo, c, h, zb, q, nxt = _memo_get(st, b)
    while True:
        s = rot / zones[zb + Z_BPT]
        cnt = min(geo, n - j)
        # the host's share of this run: walk blocks [lo, hi)
        lo = max(j, bus_from)
        hi = min(j + cnt, host_end)
        if hi > lo:
            m_first = tr + (lo - j + 1) * s
            m_last = tr + (hi - j) * s
            if not known:
                got = lo - bus_from  # host blocks read before this run
                if got + (hi - lo) >= wm:
                    t_wm = tr + (lo - j + wm - got) * s
                    bus = max(bus_at, t_wm) + resel + pre * xfer
                    known = True
                else:
                    pre += hi - lo
            if known:
                bus = max(max(bus, m_first) + (hi - lo) * xfer, m_last + xfer)
        if j + cnt > host_end:  # the run goes on after the host's last block
            break
        t_end = tr + cnt * s
        if j + cnt == n:
            st[b + S_RA_END] = 1
            st[b + S_FREE] = t_end
            st[b + S_CYL] = c
            st[b + S_HEAD] = h
            break
        zb, q, nxt = _step(p, zones, zb, q, nxt, lbn + j, cnt)
        j += cnt
        tp = t_end
        ts, tr, wt, geo, c, h = _run_at(p, zones, curve_d, curve_t, tp, c, h, lbn + j, zb, q, nxt,
                                        0)
        if j >= host_end:
            break
    _memo_put(st, b, j, tp, ts, tr, wt, geo, c, h, zb, q, nxt)
    return bus


@njit(nrt=False)
def settle(p, zones, curve_d, curve_t, st, d):
    """Compute the end of drive ``d``'s read-ahead in progress, if not yet known, into its
    ``S_FREE``, ``S_CYL`` and ``S_HEAD`` (service computes it only when a request needs it)."""
    b = d * S_N
    if st[b + S_PF_SEG] >= 0:
        _ra_cut(p, zones, curve_d, curve_t, st, b, _INF)


@njit(nrt=False)
def _walk_write(p, zones, curve_d, curve_t, t, c, h, lbn, n, mintime, x0, xfer, need):
    """Write ``n`` blocks from ``lbn``, positioning from (c, h) at time ``t`` (taking at least
    ``mintime``); block j reaches the buffer at ``x0 + (j+1)*xfer``, and no block is written
    before it is there and the buffer has received ``need`` blocks.
    Returns (time the last block is written, cylinder, head)."""
    rot = p[P_ROT_MS]
    j = 0
    first = True
    cnt = 0
    b, q, nxt = _phys(p, zones, lbn)
    while j < n:
        a = lbn + j
        if j > 0:  # the run before was a whole one
            b, q, nxt = _step(p, zones, b, q, nxt, a - cnt, cnt)
        cnt = _run_len(p, zones, b, a, q, nxt, n - j)
        c1, h1, ang = _where(p, zones, b, q)
        bpt = zones[b + Z_BPT]
        mv = _move(p, curve_d, curve_t, c, h, c1, h1, True)
        if first and mv < mintime:
            mv = mintime
        first = False
        ts = t + mv
        c = c1
        h = h1
        tr = ts + _wait(rot, bpt, ts, ang)
        s = rot / bpt
        k = 0
        while k < cnt:
            avail = x0 + max(j + k + 1, need) * xfer
            if tr < avail - _EPS:  # the block is not in yet: it comes round again
                tr += np.ceil((avail - tr) / rot - _EPS) * rot
                continue
            if xfer <= s:
                m = cnt - k
            else:  # the media catches up with the interface within this run
                lead = tr - x0 - (j + k + 1) * xfer
                if lead > (cnt - k) * (xfer - s):
                    # every block of the run is in before the head gets to it (a write whose
                    # data came in while the head moved): the quotient below would be above
                    # cnt - k - 1 whatever its rounding, so the same m without the division
                    m = cnt - k
                else:
                    m = int(lead / (xfer - s) + _EPS) + 1
                    m = min(max(m, need - j - k, 1), cnt - k)
            tr += m * s
            k += m
        t = tr
        j += cnt
    return t, c, h


# ---------------------------------------------------------------- cache


@njit(forceinline=True, nrt=False)
def _ra_limit(p, zones, a, n, zb, q, nxt):
    """(one past the last block a read of ``n`` blocks at ``a`` (physical place ``zb, q,
    nxt``) reads ahead to, the length of the run on the platter from ``a`` when that was
    needed, else 0: the media read's first run, ``_run_at``'s, which then need not compute it
    again)."""
    end = a + n
    kind = p[P_RA_KIND]
    total = p[P_BLOCKS]
    if p[P_CACHE_ON] <= 0 or kind == RA_NONE or end >= total:
        return min(end, total), 0
    if kind == RA_DEC:  # to the end of the track holding the next block, or the one after
        bpt = int(zones[zb + Z_BPT])
        geo = _run_len(p, zones, zb, a, q, nxt, _BIG)
        if n < geo:  # the next block is on a's track
            return min(_lbns_before(p, zones, zb, (q // bpt + 1) * bpt), total), geo
        lo, hi = track_bounds(p, zones, end)
        if a < lo:
            hi += bpt
        return min(hi, total), geo
    lim = end + p[P_MAX_RA] if p[P_MAX_RA] > 0 else a + p[P_SEG_BLOCKS]
    if kind == RA_TRACK or kind == RA_CYL:  # the read-ahead never leaves the track / cylinder
        b, q, _nxt = _phys(p, zones, end - 1)
        bpt = int(zones[b + Z_BPT])
        unit = bpt if kind == RA_TRACK else bpt * int(p[P_SURFACES])
        lim = min(lim, _lbns_before(p, zones, b, (q // unit + 1) * unit))
    return min(max(lim, end), total), 0


@njit(forceinline=True, nrt=False)
def _seg_bounds(st, b, k):
    return st[b + S_SEGS + 3 * k], st[b + S_SEGS + 3 * k + 1]


@njit(forceinline=True, nrt=False)
def _seg_set(st, b, k, lo, hi):
    st[b + S_SEGS + 3 * k] = lo
    st[b + S_SEGS + 3 * k + 1] = hi
    clock = st[b + S_CLOCK] + 1
    st[b + S_CLOCK] = clock
    st[b + S_SEGS + 3 * k + 2] = clock


@njit(forceinline=True, nrt=False)
def _pick_read_seg(p, st, b, a, n, pf):
    """DiskSim's choice of segment for a read: (segment, 2 whole hit / 1 partial hit / 0 miss).

    Each segment gets a preference: an empty one 3; an almost hit on the read-ahead 5; one
    not holding ``a`` 1 if it is the read-ahead's, else 2; one holding ``a`` 9 if it is the
    read-ahead's, 10 if it is being destaged, else 8, 4 less if it does not hold the whole
    request. The most preferred wins, the least recently used among equals, the first among
    those. Computed without branches (which segment wins is as unpredictable as the LRU order;
    mispredicted branches made this loop a third of a random read's cost): each segment's
    rank is one integer, preference, then age, then index, then kind of hit, and the largest
    wins."""
    nseg = int(p[P_NSEGS]) - (1 if p[P_WSEG] > 0 else 0)
    almost = int(p[P_ALMOST] > 0)
    ds = int(st[b + S_DS_SEG])
    end = a + n
    best = -1
    for k in range(nseg):
        lo = st[b + S_SEGS + 3 * k]
        hi = st[b + S_SEGS + 3 * k + 1]
        use = int(min(st[b + S_SEGS + 3 * k + 2], _USE_MAX))
        e = int(hi <= lo)
        ip = int(k == pf)
        al = ip * int(a == hi) * almost
        h = int(a >= lo) * int(a < hi)
        pt = int(hi < end)
        v_in = 8 + ip + 2 * int(k == ds) * (1 - ip) - 4 * pt
        v = e * 3 + (1 - e) * (al * 5 + (1 - al) * (h * v_in + (1 - h) * (2 - ip)))
        hk = (1 - e) * (al + (1 - al) * h * (2 - pt))
        rank = (v << 59) | ((_USE_MAX - use) << 6) | ((15 - k) << 2) | hk
        best = max(best, rank)
    if nseg <= 0:
        return -1, 0
    kind = best & 3
    if p[P_CACHE_ON] <= 0:
        kind = 0
    return 15 - ((best >> 2) & 15), kind


@njit(forceinline=True, nrt=False)
def _pick_write_seg(p, st, b, a, n, pf):
    """DiskSim's choice of segment for a write (the dedicated one if the drive has one): an
    empty one 3, the read-ahead's 1, one it overlaps 4, else 2; the most preferred wins, the
    least recently used among equals, the first among those. Without branches, as for a read:
    each segment's rank is one integer (preference, age, index) and the largest wins."""
    nseg = int(p[P_NSEGS])
    if p[P_WSEG] > 0:
        return nseg - 1
    end = a + n
    best = -1
    for k in range(nseg):
        lo = st[b + S_SEGS + 3 * k]
        hi = st[b + S_SEGS + 3 * k + 1]
        use = int(min(st[b + S_SEGS + 3 * k + 2], _USE_MAX))
        e = int(hi <= lo)
        ip = int(k == pf)
        ov = int(a < hi) * int(lo < end)
        v = e * 3 + (1 - e) * (ip + (1 - ip) * (2 + 2 * ov))
        rank = (v << 59) | ((_USE_MAX - use) << 6) | ((15 - k) << 2)
        best = max(best, rank)
    if nseg <= 0:
        return 0
    return 15 - ((best >> 2) & 15)


@njit(forceinline=True, nrt=False)
def _drop_overlaps(p, st, b, keep, a, n):
    """A write empties every other segment holding any of its blocks (stores rather than
    branches: whether a segment overlaps a random write is a coin toss)."""
    end = a + n
    for k in range(int(p[P_NSEGS])):
        lo = st[b + S_SEGS + 3 * k]
        hi = st[b + S_SEGS + 3 * k + 1]
        gone = (k != keep) & (hi > lo) & (a < hi) & (lo < end)
        st[b + S_SEGS + 3 * k] = -1.0 if gone else lo
        st[b + S_SEGS + 3 * k + 1] = -1.0 if gone else hi

