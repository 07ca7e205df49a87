"""The HDD model's geometry and mechanics: where a block lies on the platters (zones, skews,
spares and slips, as DiskSim's ``diskmodel/layout_g1.c`` maps them) and how long the head takes
to get there (seek curve or Ruemmler-Wilkes equation, head switches, write settling, the
rotational wait; ``diskmodel/mech_g1.c``). ``kernels/drive/hdd.py`` says what the model does as
a whole; ``kernels/drive/hdd_tables.py`` describes the parameter vector ``p`` and the zone
table ``zones`` every function here reads. Positions are in 512-byte blocks (LBNs) and
physical sectors, times in milliseconds.
"""

from __future__ import annotations

import numpy as np

from blocklab.kernels._jit import njit
from blocklab.kernels.drive.hdd_tables import (
    P_BLOCKS,
    P_BUCKET_SHIFT,
    P_BUCKETS_AT,
    P_HEAD_SWITCH,
    P_HPL_A,
    P_HPL_B,
    P_HPL_C,
    P_HPL_E,
    P_HPL_X,
    P_NBUCKETS,
    P_NZONES,
    P_ROT_MS,
    P_SEEK_KIND,
    P_SERP,
    P_SLIP_SKEW,
    P_SPARING,
    P_SURFACES,
    P_WRITE_SETTLE,
    SEEK_HPL,
    SKEW_SLIPS_NONE,
    SKEW_SLIPS_TRACK,
    SPARE_FRONT_SLIPS,
    SPARE_TO_END,
    SPARE_TRACK,
    Z_BPT,
    Z_CSKEW,
    Z_DEAD,
    Z_FIRST_CYL,
    Z_FIRST_LBN,
    Z_FRONT,
    Z_N,
    Z_NLBN,
    Z_NSLIP,
    Z_OFFSET,
    Z_RANGE,
    Z_RANGE_LBNS,
    Z_SLIP0,
    Z_TSKEW,
)

_EPS = 1e-9  # ms: float slack when the head arrives exactly at a sector boundary
_BIG = 1 << 62  # blocks: no limit
_SEEK_COUNT_MAX = 256  # seek curves up to this many points are searched by counting


# ---------------------------------------------------------------- layout


@njit(forceinline=True, nrt=False)
def _zone(p, zones, lbn):
    """Base index in ``zones`` of the zone holding ``lbn`` (the last zone past the end): the
    bucket index gives the zone of the bucket's first block, later zones follow."""
    k = min(lbn >> int(p[P_BUCKET_SHIFT]), int(p[P_NBUCKETS]) - 1)
    i = int(zones[int(p[P_BUCKETS_AT]) + k])
    last = int(p[P_NZONES]) - 1
    while i < last and lbn >= zones[(i + 1) * Z_N + Z_FIRST_LBN]:
        i += 1
    return i * Z_N


@njit(forceinline=True, nrt=False)
def _first_at_least(zones, lo, hi, v):
    """First index in zones[lo:hi] (ascending) whose value is >= v (hi if none)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if zones[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(forceinline=True, nrt=False)
def _slips_in(zones, s0, ns, lo, hi):
    """How many of the slips ``zones[s0:s0 + ns]`` lie in [lo, hi)."""
    return _first_at_least(zones, s0, s0 + ns, hi) - _first_at_least(zones, s0, s0 + ns, lo)


@njit(forceinline=True, nrt=False)
def _slips_shift(zones, s0, ns, first, x):
    """(how many slips at or after ``first`` push logical offset ``x`` (relative to ``first``)
    forward, index of the first slip at or after ``first``): slip i counts while
    ``slip_i - first - i <= x`` (DiskSim counts them one by one, each moving the target; the
    left side never decreases, so a binary search finds them)."""
    i0 = s0 if first == 0 else _first_at_least(zones, s0, s0 + ns, first)
    lo = 0
    hi = s0 + ns - i0
    while lo < hi:
        mid = (lo + hi) // 2
        if zones[i0 + mid] - first - mid <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo, i0


@njit(forceinline=True, nrt=False)
def _phys(p, zones, lbn):
    """(zone base, physical sector within the zone (counted from the zone's first sector),
    index in ``zones`` of the first slip after it)."""
    b = _zone(p, zones, lbn)
    bpt = int(zones[b + Z_BPT])
    off = lbn - int(zones[b + Z_FIRST_LBN]) + int(zones[b + Z_DEAD])
    s0 = int(zones[b + Z_SLIP0])
    ns = int(zones[b + Z_NSLIP])
    kind = p[P_SPARING]
    if kind == SPARE_TRACK:
        trk = off // bpt
        k, i0 = _slips_shift(zones, s0, ns, 0, trk)
        return b, (trk + k) * bpt + off % bpt, i0 + k
    rs = int(zones[b + Z_RANGE])
    rl = int(zones[b + Z_RANGE_LBNS])
    fr = int(zones[b + Z_FRONT])
    if kind == SPARE_TO_END:  # slips and blocks in data-sector numbers (u) of the whole zone
        k, i0 = _slips_shift(zones, s0, ns, 0, off)
        u = off + k
        rng = u // rl
        return b, rng * rs + fr + u - rng * rl, i0 + k
    rng = 0 if off < rl else off // rl  # (one range per zone: no 64-bit division)
    x = off - rng * rl
    start = rng * rs + fr
    if kind == SPARE_FRONT_SLIPS:
        start -= _slips_in(zones, s0, ns, rng * rs, (rng + 1) * rs)
    k, i0 = _slips_shift(zones, s0, ns, start, x)
    return b, start + x + k, i0 + k


@njit(nrt=False)
def _phys_call(p, zones, lbn):
    """``_phys`` as a call: inlined into ``service`` its loops made LLVM compile the whole
    function worse (measured: a random read on the Savvio 15K.3 went from 128 to 190 ns)."""
    return _phys(p, zones, lbn)


@njit(forceinline=True, nrt=False)
def _where(p, zones, b, q):
    """(cylinder, head, angle of the sector's start in sectors from the index) of physical
    sector ``q`` of the zone at ``b``."""
    surf = int(p[P_SURFACES])
    bpt = int(zones[b + Z_BPT])
    tz = q // bpt  # track within the zone (two divisions where five were)
    sec = q - tz * bpt
    cz = tz // surf
    trk = tz - cz * surf
    cyl = int(zones[b + Z_FIRST_CYL]) + cz
    head = trk
    serp = p[P_SERP]
    if (serp == 1 and cz % 2 == 1) or (serp == 2 and cyl % 2 == 1):
        head = surf - 1 - trk
    ang = (int(zones[b + Z_OFFSET]) + (trk + (surf - 1) * cz) * int(zones[b + Z_TSKEW])
           + cz * int(zones[b + Z_CSKEW]) + sec)
    if p[P_SLIP_SKEW] != SKEW_SLIPS_NONE:
        # DiskSim's g1_map_pbn_skew: with sectors spared per cylinder or per track, each slip
        # of the zone before the track's cylinder (or before the track: its physical head)
        # turns the track's sectors on by one
        cut = cz * surf * bpt
        if p[P_SLIP_SKEW] == SKEW_SLIPS_TRACK:
            cut += head * bpt
        if p[P_SPARING] == SPARE_TO_END:  # slips are in data-sector numbers
            cut = cut // int(zones[b + Z_RANGE]) * int(zones[b + Z_RANGE_LBNS])
        s0 = int(zones[b + Z_SLIP0])
        ang += _first_at_least(zones, s0, s0 + int(zones[b + Z_NSLIP]), cut) - s0
    return cyl, head, float(ang % bpt)


@njit(forceinline=True, nrt=False)
def _run_len(p, zones, b, lbn, q, nxt, left):
    """How many blocks from ``lbn`` (at physical ``q``, ``nxt`` the index of the next slip)
    lie on consecutive sectors of one track, at most ``left``."""
    bpt = int(zones[b + Z_BPT])
    m = min(left, bpt - q % bpt)
    m = min(m, int(zones[b + Z_FIRST_LBN] + zones[b + Z_NLBN]) - lbn)
    kind = p[P_SPARING]
    if kind == SPARE_TRACK:
        return max(m, 1)
    rs = int(zones[b + Z_RANGE])
    rl = int(zones[b + Z_RANGE_LBNS])
    if kind == SPARE_TO_END:  # to the end of the range's data sectors, or the next slip
        rng = q // rs
        u = rng * rl + q - rng * rs - int(zones[b + Z_FRONT])
        m = min(m, (rng + 1) * rl - u)
        if nxt < int(zones[b + Z_SLIP0] + zones[b + Z_NSLIP]):
            m = min(m, int(zones[nxt]) - u)
        return max(m, 1)
    off = lbn - int(zones[b + Z_FIRST_LBN]) + int(zones[b + Z_DEAD])
    rng = 0 if q < rs else q // rs  # (one range per zone: no division)
    m = min(m, (rng + 1) * rl - off)  # the range's spares follow its last block
    if nxt < int(zones[b + Z_SLIP0] + zones[b + Z_NSLIP]) and zones[nxt] < (rng + 1) * rs:
        m = min(m, int(zones[nxt]) - q)
    return max(m, 1)


@njit(forceinline=True, nrt=False)
def _lbns_before(p, zones, b, qp):
    """The first LBN whose physical sector is at or after zone-physical sector ``qp``."""
    first = int(zones[b + Z_FIRST_LBN])
    nl = int(zones[b + Z_NLBN])
    dead = int(zones[b + Z_DEAD])
    bpt = int(zones[b + Z_BPT])
    s0 = int(zones[b + Z_SLIP0])
    ns = int(zones[b + Z_NSLIP])
    kind = p[P_SPARING]
    if kind == SPARE_TRACK:
        trk = qp // bpt
        slipped = _first_at_least(zones, s0, s0 + ns, trk) - s0
        inside = 0 if (slipped < ns and zones[s0 + slipped] == trk) else qp - trk * bpt
        off = (trk - slipped) * bpt + inside
    else:
        rs = int(zones[b + Z_RANGE])
        rl = int(zones[b + Z_RANGE_LBNS])
        fr = int(zones[b + Z_FRONT])
        rng = 0 if qp < rs else qp // rs  # (one range per zone: no 64-bit division)
        x = qp - rng * rs
        if kind == SPARE_TO_END:
            u = rng * rl + min(max(x - fr, 0), rl)
            off = u - (_first_at_least(zones, s0, s0 + ns, u) - s0)
        else:
            if kind == SPARE_FRONT_SLIPS:
                fr -= _slips_in(zones, s0, ns, rng * rs, (rng + 1) * rs)
            sl = _slips_in(zones, s0, ns, rng * rs + fr, max(qp, rng * rs + fr))
            off = rng * rl + min(rl, max(x - fr - sl, 0))
    return first + min(max(off - dead, 0), nl)


@njit(nrt=False)
def locate(p, zones, lbn):
    """(cylinder, head, angle of the block's start as a fraction of a turn, sectors per track)
    of an LBN."""
    b, q, _nxt = _phys(p, zones, lbn)
    cyl, head, ang = _where(p, zones, b, q)
    bpt = zones[b + Z_BPT]
    return cyl, head, ang / bpt, int(bpt)


@njit(nrt=False)
def track_bounds(p, zones, lbn):
    """(first LBN on ``lbn``'s track, one past the last)."""
    b, q, _nxt = _phys(p, zones, lbn)
    bpt = int(zones[b + Z_BPT])
    qs = (q // bpt) * bpt
    return _lbns_before(p, zones, b, qs), _lbns_before(p, zones, b, qs + bpt)


# ---------------------------------------------------------------- mechanics


#: The most distances a drive's seek table holds (float64: 512 KiB, within this machine's 1 MiB
#: L2 cache); longer seeks of a drive with more cylinders are computed from the curve.
SEEK_TABLE_MAX = 1 << 16


@njit(nrt=False)
def seek_ms(p, curve_d, curve_t, dist):
    """Seek time for a move of ``dist`` cylinders (0 for none)."""
    return _seek(p, curve_d, curve_t, dist)


@njit(nrt=False)
def seek_times(p, curve_d, curve_t, out):
    """Fill ``out[d]`` with the seek time of ``d`` cylinders, d = 0 .. len(out) - 1, computed
    from the curve alone (``curve_t`` holds no table yet): the seek table ``drive_params``
    appends to ``curve_t``."""
    for d in range(out.shape[0]):
        out[d] = _seek(p, curve_d, curve_t[:curve_d.shape[0]], d)


@njit(forceinline=True, nrt=False)
def _seek(p, curve_d, curve_t, dist):
    """``seek_ms`` inlined where the head moves (a call passes each of the three arrays as a
    seven-word struct).

    ``curve_t`` may hold, after the curve's times, a seek table: the time of every distance
    from 0 up (``seek_times``, built once per drive model by ``drive_params``). A random
    seek then costs one load where the search of a 138-point curve and the interpolation cost
    about a tenth of a random 4 KiB replay's time (measured: the bench's random open-loop
    replay 758 -> 665 ns a request with seeks made free). The table holds what the search
    gives, computed by this very function, so results are the same to the last bit."""
    if dist <= 0:
        return 0.0
    nc = curve_d.shape[0]
    if dist < curve_t.shape[0] - nc:
        return curve_t[nc + dist]
    if p[P_SEEK_KIND] == SEEK_HPL:
        if dist <= curve_d.shape[0] and curve_d.shape[0] > 0:
            return curve_t[dist - 1]  # the first ten seeks are measured
        if dist < p[P_HPL_X]:
            return p[P_HPL_A] + p[P_HPL_B] * np.sqrt(dist)
        return p[P_HPL_C] + p[P_HPL_E] * dist
    n = curve_d.shape[0]
    if dist <= curve_d[0]:
        return curve_t[0]
    if dist >= curve_d[n - 1]:  # extrapolate the last segment, as DiskSim does
        lo = n - 2
    elif n <= _SEEK_COUNT_MAX:
        # the segment starts at the last point at or below dist: count the points (vector
        # compares, where a bisection is a chain of dependent loads; the same index)
        c = 0
        for i in range(n):
            c += int(curve_d[i] <= dist)
        lo = c - 1
    else:
        lo = 0
        hi = n - 1
        while hi - lo > 1:  # bisection with arithmetic, not branches (random seeks
            mid = (lo + hi) >> 1  # mispredicted half of them)
            c = int(curve_d[mid] <= dist)
            lo += c * (mid - lo)
            hi = mid + c * (hi - mid)
    f = (dist - curve_d[lo]) / (curve_d[lo + 1] - curve_d[lo])
    return curve_t[lo] + f * (curve_t[lo + 1] - curve_t[lo])


@njit(forceinline=True, nrt=False)
def _move(p, curve_d, curve_t, c0, h0, c1, h1, write):
    """Time to bring the head from (c0, h0) to (c1, h1): the seek or the head switch, whichever
    is longer, plus the write settling delay if anything moved."""
    s = _seek(p, curve_d, curve_t, abs(c1 - c0)) if c1 != c0 else 0.0
    if h1 != h0 and p[P_HEAD_SWITCH] > s:
        s = p[P_HEAD_SWITCH]
    if write and s > 0:
        s += p[P_WRITE_SETTLE]
    return s


@njit(forceinline=True, nrt=False)
def _wait(rot, bpt, t, ang):
    """Rotational wait from time ``t`` until sector angle ``ang`` (sectors) is under the head."""
    f = ang / bpt - t / rot
    w = (f - np.floor(f)) * rot  # floor, not %, which numba compiles with Python's sign rules
    if w > rot - _EPS:
        w = 0.0
    return w


@njit(forceinline=True, nrt=False)
def _step(p, zones, zb, q, nxt, lbn, cnt):
    """Physical place (zone base, zone sector, next slip) of ``lbn + cnt``, where ``[lbn,
    lbn + cnt)`` is a whole run starting at zone sector ``q`` of the zone at ``zb`` (``nxt``
    its next slip): the next sector, past any slipped sectors (or tracks) there, without the
    searches of ``_phys`` unless the run ends a zone or a sparing range."""
    nl = lbn + cnt
    first = int(zones[zb + Z_FIRST_LBN])
    if nl >= first + int(zones[zb + Z_NLBN]):
        return _phys(p, zones, nl)
    if p[P_SPARING] == SPARE_TO_END:
        return _phys(p, zones, nl)
    send = int(zones[zb + Z_SLIP0] + zones[zb + Z_NSLIP])
    q2 = q + cnt
    if p[P_SPARING] == SPARE_TRACK:
        bpt = int(zones[zb + Z_BPT])
        while nxt < send and zones[nxt] == q2 // bpt:
            q2 += bpt
            nxt += 1
        return zb, q2, nxt
    rl = zones[zb + Z_RANGE_LBNS]
    if rl < p[P_BLOCKS]:  # sparing ranges: a new range starts after the old one's spares
        dead = int(zones[zb + Z_DEAD])
        if (nl - first + dead) // int(rl) != (lbn - first + dead) // int(rl):
            return _phys(p, zones, nl)
    while nxt < send and zones[nxt] == q2:
        q2 += 1
        nxt += 1
    return zb, q2, nxt


@njit(forceinline=True, nrt=False)
def _run_at(p, zones, curve_d, curve_t, t, c, h, lbn, zb, q, nxt, geo):
    """The run of a read that starts at ``lbn`` (physical place ``zb, q, nxt``; ``geo`` its
    length on the platter when the caller knows it, else 0) with the head at (c, h) at time
    ``t``: (time on the track, time at its first sector, that wait, its length on the
    platter, cylinder, head)."""
    if geo <= 0:
        geo = _run_len(p, zones, zb, lbn, q, nxt, _BIG)
    c1, h1, ang = _where(p, zones, zb, q)
    ts = t + _move(p, curve_d, curve_t, c, h, c1, h1, False)
    wt = _wait(p[P_ROT_MS], zones[zb + Z_BPT], ts, ang)
    return ts, ts + wt, wt, geo, c1, h1

