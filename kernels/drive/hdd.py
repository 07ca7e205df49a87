"""A hard-disk model that serves one request at a time on a drive that may be busy with its
own background work (read-ahead, destaging), the way DiskSim 4.0's disk module does (issue 3,
deliverables 3 and 6). Times are in milliseconds of simulated time, positions in 512-byte
blocks (LBNs) and physical sectors.

What is modelled, with where DiskSim does the same (file names are DiskSim 4.0's, read for the
facts only):

- **Layout** (``diskmodel/layout_g1.c``): zones of cylinders with their sectors per track; a zone
  may start with unused sectors ("empty space at zone front"); logical blocks fill the tracks of
  a cylinder before the next cylinder, in surface order or, with the "cylinder switch on
  surface" mappings, in reverse order on alternate cylinders; spare space and slipped defects
  are placed exactly, for each of DiskSim's sparing schemes 0-10: spare sectors at the end of
  each sparing range (per zone, per range of cylinders, per cylinder, per track) or at the
  front of each cylinder, or spare tracks at the end of the zone; every slipped sector (or
  track) listed in the ``.model`` file shifts the blocks after it by one, within its sparing
  range (into its spares) or, in the "slip to the end" schemes, along the whole zone. The
  first block of a track starts ``offset + (track switches) x track skew + (cylinder
  switches) x cylinder skew`` sectors after the index, counted from the start of the zone, and
  with sectors spared per cylinder or per track one more for each slip of the zone before the
  track's cylinder (or track), as ``g1_map_pbn_skew`` has it. A defect remapped to itself is
  no defect (DiskSim's ``g1_ltop_*`` skip it); other remapped defects are refused.
- **Mechanics** (``diskmodel/mech_g1.c``): seek time from the measured curve (linear
  interpolation, extrapolated beyond its end) or the Ruemmler-Wilkes equation with the first ten
  distances measured; a head switch costs ``max(seek, head switch)``; a write adds the settling
  delay when the head moved; the platter never stops, so the angle under the head follows from
  absolute time and every rotational wait is a consequence of when the head arrives.
- **Media transfer**, run by run: a run is a stretch of consecutive sectors on one track; between
  runs the head switches track (or cylinder, or jumps a slipped sector, spare space or zone
  gap) and waits for the next run's first sector, so skews, slips and spares cost exactly what
  they cost on the platter. A write cannot put a block on the platter before the host has sent
  it: when the interface is slower than the media, the head misses the block and comes back a
  rotation later (``disksim_diskctlr.c``, sector by sector); with the extra write disconnect
  (DiskSim's HP C2247A model, ``disk_buffer_block_available``) no block is written before the
  buffer holds the whole request, or 10 blocks of one under 45 blocks, or 15.
- **Controller overheads** (``disksim_diskctlr.c``): command overheads by kind (read hit or miss,
  write, each after a read or after a write), data preparation, first and later reselection,
  disconnection after a read command and after a write's data, completion overheads; the
  "extra write disconnect" of a write that follows a non-sequential write (HP C2247A); the
  minimum seek delay of a write; per-block interface time ``max(bulk sector time, bus block
  time)``. A read miss reconnects to send data when the buffer holds the high water mark's
  share of the request (by request size, at least one block), then sends at interface speed
  but never a block before it is read.
- **Cache** (``disksim_diskcache.c``): segments chosen as DiskSim chooses them (a read prefers a
  segment holding its first block, then an empty one, then the least recently used clean one,
  then the one being prefetched; a write prefers a clean segment it overlaps, then an empty one,
  then the least recently used clean one); a dedicated write segment when the drive has one (its
  data is not read back); a segment keeps its last ``segment size`` blocks; a write empties
  other segments it overlaps. After a read the drive reads ahead into the segment: to the end of
  the track after the request (DEC scheme), or a fixed number of blocks past the request; the
  read-ahead is stopped by the next request that needs the mechanism, at the end of the sector
  under the head, or, if that request is served from the segment, goes on (and, with "read-ahead
  on idle hit", restarts after a hit). Write-back ("fast write"): a write completes once its
  data is in the buffer and the media write (which starts after the command overhead, as data
  arrives) delays the next media access, and a write that appends to the data being destaged
  joins it (with one write segment, a write that does not fit waits for the destage); with
  several write segments, a write continuing a sequential stream of writes completes no
  earlier than when the stream's data still waiting for the platter fits them (max write
  segments x segment size, written at the zone's media rate), so a long stream runs at the
  media's speed, not the interface's; write-through: it
  completes after the media write and a reselection.
- **Read on arrival** (not in DiskSim): a drive that reads with zero latency starts reading as
  soon as its head settles on the track and keeps the sectors that pass before the first one
  wanted (Quantum Atlas 10K II product manual, section 6.4: "the initial data read is stored in
  a buffer (cache) until the actual starting address data block is reached").

Not modelled (see the README's fidelity section): the out-of-order transfer of a zero-latency
access (on these drives the interface, not the media, decides when a read completes), defects
remapped to another sector (none in DiskSim's validation drives), command queueing inside the
drive (the engine queues), sneaky read hits, reconnections when the interface overtakes the
media during a read, and the disk keys ``pipeline/disksim_params.py`` lists as not modelled.
Almost read hits (DiskSim's "Allow almost read hits": a read starting where the read-ahead in
progress has got to is served from it) are modelled when the drive allows them.

Parameters travel as one float64 vector ``p`` (``P_*``), the layout as one float64 table
``zones`` (``Z_N`` columns per zone, followed by every zone's slip list), the seek curve as two
arrays, and each drive's state as ``S_N`` floats of ``st``.
"""

from __future__ import annotations

import numpy as np

from blocklab.kernels._jit import njit

# Parameter vector (float64) indices.
(P_ROT_MS, P_SURFACES, P_HEAD_SWITCH, P_WRITE_SETTLE, P_XFER_R, P_XFER_W,
 P_OV_RHR, P_OV_RHW, P_OV_RMR, P_OV_RMW, P_OV_WHR, P_OV_WHW, P_OV_WMR, P_OV_WMW,
 P_COMPL_R, P_COMPL_W, P_DATA_PREP, P_RESELECT1, P_RESELECT2, P_DISC_RR, P_DISC_RW, P_DISC_W,
 P_XD_ON, P_XD_CMD, P_XD_DISC1, P_XD_INTER, P_XD_DISC2, P_XD_SEEKDELTA, P_MIN_SEEK,
 P_WRITE_BACK, P_CACHE_ON, P_NSEGS, P_WSEG, P_NWSEGS, P_SEG_BLOCKS, P_RA_KIND, P_MAX_RA,
 P_RA_IDLE_HIT, P_HIGH_WM, P_WM_BY_REQ, P_READ_ARRIVAL,
 P_SEEK_KIND, P_HPL_X, P_HPL_A, P_HPL_B, P_HPL_C, P_HPL_E, P_SINGLE_SEEK,
 P_NZONES, P_SERP, P_SPARING, P_BLOCKS, P_BUCKETS_AT, P_BUCKET_SHIFT,
 P_NBUCKETS, P_ALMOST, P_SLIP_SKEW, P_REQ_OVERHEAD) = range(58)
P_N = 58
SEEK_CURVE, SEEK_HPL = 0, 1
# how spare space and slips place blocks (``P_SPARING``): see the zone table below
SPARE_RANGE, SPARE_TRACK, SPARE_TO_END, SPARE_FRONT_SLIPS = 0, 1, 2, 3
# which earlier slips turn a track's first sector on by one sector each (``P_SLIP_SKEW``):
# none, those before the track's cylinder, those before the track itself
SKEW_SLIPS_NONE, SKEW_SLIPS_CYL, SKEW_SLIPS_TRACK = 0, 1, 2
# read-ahead kinds (DiskSim's "Buffer continuous read")
RA_NONE, RA_TRACK, RA_CYL, RA_SEG, RA_DEC = 0, 1, 2, 3, 4
SEG_MAX = 16  # cache segments a state vector has room for

# Zone table columns (float64): first and last cylinder, sectors per track, first LBN, LBNs,
# track and cylinder skew (sectors), offset of the first block (sectors), empty sectors at the
# zone's front, sectors per sparing range and LBNs per range (both huge when the zone is one
# range), index in ``zones`` of the zone's first slip, number of slips, sectors of a range that
# come before its blocks (spares at the front). Slips are ascending; what they count depends on
# ``P_SPARING``:
#
# - ``SPARE_RANGE``: zone-relative physical sectors. A range's blocks start ``front`` sectors
#   into it and a slipped sector pushes the range's later blocks on, into its spare sectors
#   (DiskSim's sparing schemes 0, 2, 3, 8, 9 and 10; 9 and 10 have one range per zone).
# - ``SPARE_FRONT_SLIPS``: as ``SPARE_RANGE``, but the spares are at the range's front and its
#   slips use them: its blocks start ``front - (slips in the range)`` sectors into it (5).
# - ``SPARE_TRACK``: zone-relative tracks; a slipped track pushes the later tracks on (1).
# - ``SPARE_TO_END``: the zone's data sectors (the ``LBNs per range`` sectors of each range
#   after its ``front``) numbered in order, and a slipped one pushes every later block of the
#   zone on, across ranges, into the spare space at the zone's end (4, 6, 7).
#
# After the zones and their slips, ``zones`` holds a bucket index: entry i is the zone of LBN
# ``i << P_BUCKET_SHIFT``.
(Z_FIRST_CYL, Z_LAST_CYL, Z_BPT, Z_FIRST_LBN, Z_NLBN, Z_TSKEW, Z_CSKEW, Z_OFFSET, Z_DEAD,
 Z_RANGE, Z_RANGE_LBNS, Z_SLIP0, Z_NSLIP, Z_FRONT) = range(14)
Z_N = 14

# Per-drive state vector (float64) indices: head position when the mechanism is next free,
# that time, the previous request (write?, its end), an LRU clock, the read-ahead in progress
# (segment, when and where its media walk began, its first block and length), the segment
# being destaged, the read-ahead's walk as far as it has been computed (below), then SEG_MAX
# segments of (first block, end block, last use).
#
# The read-ahead's walk is computed lazily: a read miss computes it only as far as the
# request's last block, and a later request only as far as its own arrival (or its last
# block). ``S_RA_END`` says whether the walk's end is known; until it is, ``S_FREE``, ``S_CYL``
# and ``S_HEAD`` are stale while a read-ahead is in progress (``settle`` computes them). The
# walk so far is kept as its next run (``S_M_*``): the run's first block (walk offset), the
# time the run before it ended, when the head is on its track and when its first sector comes
# under the head, that wait, its length on the platter (not cut at the walk's end), its
# cylinder and head, and its physical place (zone base, zone sector, next slip). A run depends
# only on the geometry and on when the run before it ended, so resuming the walk there gives
# the very numbers the walk from its start gives.
(S_CYL, S_HEAD, S_FREE, S_PREV_WRITE, S_PREV_END, S_CLOCK, S_PF_SEG, S_PF_T, S_PF_C0, S_PF_H0,
 S_PF_LBN, S_PF_N, S_DS_SEG, S_RA_END, S_M_J, S_M_TP, S_M_TS, S_M_TR, S_M_WAIT, S_M_GEO, S_M_C,
 S_M_H, S_M_ZB, S_M_Q, S_M_NXT, S_SEGS) = range(26)
S_N = S_SEGS + 3 * SEG_MAX

_INF = 1e300
_EPS = 1e-9  # ms: float slack when the head arrives exactly at a sector boundary
_BIG = 1 << 62  # blocks: no limit
_USE_MAX = (1 << 53) - 1  # segment use clocks below this (9e15 requests) rank exactly
_SEEK_COUNT_MAX = 256  # seek curves up to this many points are searched by counting


def new_state(drives: int = 1) -> np.ndarray:
    """Drive states: heads at cylinder 0 head 0, caches empty, mechanisms idle."""
    st = np.zeros(drives * S_N)
    for d in range(drives):
        b = d * S_N
        st[b + S_PREV_END] = -1
        st[b + S_PF_SEG] = -1
        st[b + S_DS_SEG] = -1
        for k in range(SEG_MAX):
            st[b + S_SEGS + 3 * k] = -1
            st[b + S_SEGS + 3 * k + 1] = -1
    return st


# ---------------------------------------------------------------- layout


@njit(inline="always", nrt=False)
def _zone(p, zones, lbn):
    """Base index in ``zones`` of the zone holding ``lbn`` (the last zone past the end): the
    bucket index gives the zone of the bucket's first block, later zones follow."""
    k = min(lbn >> int(p[P_BUCKET_SHIFT]), int(p[P_NBUCKETS]) - 1)
    i = int(zones[int(p[P_BUCKETS_AT]) + k])
    last = int(p[P_NZONES]) - 1
    while i < last and lbn >= zones[(i + 1) * Z_N + Z_FIRST_LBN]:
        i += 1
    return i * Z_N


@njit(inline="always", nrt=False)
def _first_at_least(zones, lo, hi, v):
    """First index in zones[lo:hi] (ascending) whose value is >= v (hi if none)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if zones[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(inline="always", nrt=False)
def _slips_in(zones, s0, ns, lo, hi):
    """How many of the slips ``zones[s0:s0 + ns]`` lie in [lo, hi)."""
    return _first_at_least(zones, s0, s0 + ns, hi) - _first_at_least(zones, s0, s0 + ns, lo)


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
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
    rng = off // rl
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


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
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
        rng = qp // rs
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


@njit(nrt=False)
def seek_ms(p, curve_d, curve_t, dist):
    """Seek time for a move of ``dist`` cylinders (0 for none)."""
    return _seek(p, curve_d, curve_t, dist)


@njit(inline="always", nrt=False)
def _seek(p, curve_d, curve_t, dist):
    """``seek_ms`` inlined where the head moves (a call passes each of the three arrays as a
    seven-word struct)."""
    if dist <= 0:
        return 0.0
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


@njit(inline="always", nrt=False)
def _move(p, curve_d, curve_t, c0, h0, c1, h1, write):
    """Time to bring the head from (c0, h0) to (c1, h1): the seek or the head switch, whichever
    is longer, plus the write settling delay if anything moved."""
    s = _seek(p, curve_d, curve_t, abs(c1 - c0)) if c1 != c0 else 0.0
    if h1 != h0 and p[P_HEAD_SWITCH] > s:
        s = p[P_HEAD_SWITCH]
    if write and s > 0:
        s += p[P_WRITE_SETTLE]
    return s


@njit(inline="always", nrt=False)
def _wait(rot, bpt, t, ang):
    """Rotational wait from time ``t`` until sector angle ``ang`` (sectors) is under the head."""
    f = ang / bpt - t / rot
    w = (f - np.floor(f)) * rot  # floor, not %, which numba compiles with Python's sign rules
    if w > rot - _EPS:
        w = 0.0
    return w


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
def _run_at(p, zones, curve_d, curve_t, t, c, h, lbn, zb, q, nxt):
    """The run of a read that starts at ``lbn`` (physical place ``zb, q, nxt``) with the head
    at (c, h) at time ``t``: (time on the track, time at its first sector, that wait, its
    length on the platter, cylinder, head)."""
    geo = _run_len(p, zones, zb, lbn, q, nxt, _BIG)
    c1, h1, ang = _where(p, zones, zb, q)
    ts = t + _move(p, curve_d, curve_t, c, h, c1, h1, False)
    wt = _wait(p[P_ROT_MS], zones[zb + Z_BPT], ts, ang)
    return ts, ts + wt, wt, geo, c1, h1


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
def _memo_get(st, b):
    """The walk's state as ``_memo_put`` left it (all but the run index)."""
    return (st[b + S_M_TP], st[b + S_M_TS], st[b + S_M_TR], st[b + S_M_WAIT],
            int(st[b + S_M_GEO]), int(st[b + S_M_C]), int(st[b + S_M_H]), int(st[b + S_M_ZB]),
            int(st[b + S_M_Q]), int(st[b + S_M_NXT]))


@njit(inline="always", nrt=False)
def _ra_restart(p, zones, curve_d, curve_t, st, b, zb, q, nxt):
    """Put the read-ahead's walk back at its first run (whose physical place is ``zb, q, nxt``,
    or is looked up if ``zb < 0``)."""
    t = st[b + S_PF_T]
    lbn = int(st[b + S_PF_LBN])
    if zb < 0:
        zb, q, nxt = _phys(p, zones, lbn)
    ts, tr, wt, geo, c1, h1 = _run_at(p, zones, curve_d, curve_t, t, int(st[b + S_PF_C0]),
                                      int(st[b + S_PF_H0]), lbn, zb, q, nxt)
    _memo_put(st, b, 0, t, ts, tr, wt, geo, c1, h1, zb, q, nxt)


@njit(inline="always", nrt=False)
def _ra_new(p, zones, curve_d, curve_t, st, b, seg, t, c, h, lbn, nblk, zb, q, nxt):
    """Start a media read of ``nblk`` blocks from ``lbn`` (physical place ``zb, q, nxt``, or
    ``zb < 0``) into segment ``seg`` at ``t`` from (c, h), the mechanism busy until it ends
    (computed when needed). Returns the rotational wait before its first block."""
    st[b + S_PF_SEG] = seg
    st[b + S_PF_T] = t
    st[b + S_PF_C0] = c
    st[b + S_PF_H0] = h
    st[b + S_PF_LBN] = lbn
    st[b + S_PF_N] = nblk
    st[b + S_RA_END] = 0
    _ra_restart(p, zones, curve_d, curve_t, st, b, zb, q, nxt)
    return st[b + S_M_WAIT]


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
        _ra_restart(p, zones, curve_d, curve_t, st, b, -1, 0, 0)
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
        ts, tr, wt, geo, c, h = _run_at(p, zones, curve_d, curve_t, tp, c, h, lbn + j, zb, q, nxt)
    _memo_put(st, b, j, tp, ts, tr, wt, geo, c, h, zb, q, nxt)
    return j, stop, c, h, True


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
            _ra_restart(p, zones, curve_d, curve_t, st, b, -1, 0, 0)
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
        ts, tr, wt, geo, c, h = _run_at(p, zones, curve_d, curve_t, tp, c, h, lbn + j, zb, q, nxt)
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
                m = int((tr - x0 - (j + k + 1) * xfer) / (xfer - s) + _EPS) + 1
                m = min(max(m, need - j - k, 1), cnt - k)
            tr += m * s
            k += m
        t = tr
        j += cnt
    return t, c, h


# ---------------------------------------------------------------- cache


@njit(inline="always", nrt=False)
def _ra_limit(p, zones, a, n, zb, q, nxt):
    """One past the last block a read of ``n`` blocks at ``a`` (physical place ``zb, q, nxt``)
    reads ahead to."""
    end = a + n
    kind = p[P_RA_KIND]
    total = p[P_BLOCKS]
    if p[P_CACHE_ON] <= 0 or kind == RA_NONE or end >= total:
        return min(end, total)
    if kind == RA_DEC:  # to the end of the track holding the next block, or the one after
        bpt = int(zones[zb + Z_BPT])
        if n < _run_len(p, zones, zb, a, q, nxt, _BIG):  # the next block is on a's track
            return min(_lbns_before(p, zones, zb, (q // bpt + 1) * bpt), total)
        lo, hi = track_bounds(p, zones, end)
        if a < lo:
            hi += bpt
        return min(hi, total)
    lim = end + p[P_MAX_RA] if p[P_MAX_RA] > 0 else a + p[P_SEG_BLOCKS]
    if kind == RA_TRACK or kind == RA_CYL:  # the read-ahead never leaves the track / cylinder
        b, q, _nxt = _phys(p, zones, end - 1)
        bpt = int(zones[b + Z_BPT])
        unit = bpt if kind == RA_TRACK else bpt * int(p[P_SURFACES])
        lim = min(lim, _lbns_before(p, zones, b, (q // unit + 1) * unit))
    return min(max(lim, end), total)


@njit(inline="always", nrt=False)
def _seg_bounds(st, b, k):
    return st[b + S_SEGS + 3 * k], st[b + S_SEGS + 3 * k + 1]


@njit(inline="always", nrt=False)
def _seg_set(st, b, k, lo, hi):
    st[b + S_SEGS + 3 * k] = lo
    st[b + S_SEGS + 3 * k + 1] = hi
    clock = st[b + S_CLOCK] + 1
    st[b + S_CLOCK] = clock
    st[b + S_SEGS + 3 * k + 2] = clock


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
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


# ---------------------------------------------------------------- one request


@njit(nrt=False)
def service(p, zones, curve_d, curve_t, st, d, t, a, n, w):
    """Serve one request of ``n`` blocks at LBN ``a`` (a write if ``w``) that drive ``d``
    receives at time ``t`` (ms), when it has no other request. Updates the drive's state in
    ``st``; returns (completion time in ms, 1 if the read was served from the cache else 0)."""
    b = d * S_N
    # DiskSim's "Per-request overhead time": the request reaches the drive's controller this
    # much later (disksim_diskctlr.c, disk_event_arrive)
    t = t + p[P_REQ_OVERHEAD]
    seg_n = p[P_SEG_BLOCKS]
    prev_write = st[b + S_PREV_WRITE] > 0
    seq = a == st[b + S_PREV_END]
    # -- the drive's own work at time t: a read-ahead (which a request can stop at the end of
    # the sector under the head) or a destage (which it cannot)
    free = st[b + S_FREE]
    cyl = int(st[b + S_CYL])
    head = int(st[b + S_HEAD])
    pf = int(st[b + S_PF_SEG])
    pf_lbn = int(st[b + S_PF_LBN])
    pf_n = int(st[b + S_PF_N])
    destaging = False
    stop_t = free
    stop_c = cyl
    stop_h = head
    if pf >= 0:  # (free, cyl, head: the read-ahead's end, computed when it has ended)
        got, stop_t, stop_c, stop_h, going = _ra_cut(p, zones, curve_d, curve_t, st, b, t)
        lo, hi = _seg_bounds(st, b, pf)
        hi = pf_lbn + got
        st[b + S_SEGS + 3 * pf + 1] = hi
        st[b + S_SEGS + 3 * pf] = max(lo, hi - seg_n)
        if not going:
            pf = -1
            st[b + S_PF_SEG] = -1
            free = stop_t
            cyl = stop_c
            head = stop_h
    elif t < free:
        destaging = True
    else:
        st[b + S_DS_SEG] = -1
    hit = 0
    if not w:
        ov_miss = p[P_OV_RMW] if prev_write else p[P_OV_RMR]
        ov_hit = p[P_OV_RHW] if prev_write else p[P_OV_RHR]
        xr = p[P_XFER_R]
        k, kind = _pick_read_seg(p, st, b, a, n, pf)
        zb_a, q_a, nxt_a = -1, 0, 0  # a's physical place, when needed
        if p[P_RA_KIND] == RA_DEC or p[P_READ_ARRIVAL] > 0:
            zb_a, q_a, nxt_a = _phys_call(p, zones, a)
        lim = _ra_limit(p, zones, a, n, zb_a, q_a, nxt_a)
        if pf >= 0 and (k != pf or kind == 0):  # stop the read-ahead
            st[b + S_PF_SEG] = -1
            free = stop_t
            cyl = stop_c
            head = stop_h
            st[b + S_FREE] = free
            st[b + S_CYL] = cyl
            st[b + S_HEAD] = head
            pf = -1
        if kind == 2:  # every block is in the buffer
            hit = 1
            done = t + ov_hit + p[P_DATA_PREP] + n * xr + p[P_COMPL_R]
            lo, hi = _seg_bounds(st, b, k)
            _seg_set(st, b, k, lo, hi)
            if k == pf:  # the read-ahead goes on, now for this request too
                if lim > pf_lbn + pf_n:
                    st[b + S_PF_N] = int(lim) - pf_lbn
                    st[b + S_RA_END] = 0
            elif p[P_RA_IDLE_HIT] > 0 and hi < lim:
                _ra_new(p, zones, curve_d, curve_t, st, b, k, max(t + ov_miss, free), cyl, head,
                        int(hi), int(lim - hi), -1, 0, 0)
        elif kind == 1 and k == pf:  # the rest is coming in from the read-ahead
            new_n = max(pf_n, int(lim) - pf_lbn)
            if new_n > pf_n:
                st[b + S_PF_N] = new_n
                st[b + S_RA_END] = 0
            bus = _ra_bus(p, zones, curve_d, curve_t, st, b, a - pf_lbn, n, 0,
                          t + ov_hit + p[P_DATA_PREP], 0.0, xr)
            done = bus + p[P_COMPL_R]
            lo, hi = _seg_bounds(st, b, k)
            _seg_set(st, b, k, lo, hi)
        else:  # a miss, or a partial hit on a segment nobody is filling
            lo, hi = _seg_bounds(st, b, k)
            if kind == 1:  # send what is there, read the rest from the segment's end
                rd = int(hi)
                bus_at = t + ov_hit + p[P_DATA_PREP]
                resel = (rd - a) * xr
                wm = 0
            else:
                rd = a
                lo = a
                bus_at = t + ov_miss + (p[P_DISC_RW] if prev_write else p[P_DISC_RR])
                resel = p[P_RESELECT1] + p[P_DATA_PREP]
                # the drive reconnects when the buffer holds the high water mark's share (of
                # the request, or of the segment), or the whole request if that comes first
                if p[P_WM_BY_REQ] > 0:
                    wm = max(1, int(min(seg_n, n) * p[P_HIGH_WM]))
                else:
                    wm = max(1, int(seg_n * p[P_HIGH_WM] + 0.9999999999))
                wm = min(wm, n)
            start = max(t + ov_miss, free)
            nblk = int(max(lim, a + n)) - rd
            if rd != a:
                zb_a = -1
            wait0 = _ra_new(p, zones, curve_d, curve_t, st, b, k, start, cyl, head, rd, nblk,
                            zb_a, q_a, nxt_a)
            bus = _ra_bus(p, zones, curve_d, curve_t, st, b, 0, a + n - rd, wm, bus_at, resel,
                          xr)
            if kind == 0 and p[P_READ_ARRIVAL] > 0 and p[P_CACHE_ON] > 0:
                # the drive reads from the moment the head settles on the track: the sectors
                # that pass before the first one wanted are kept too
                bpt = zones[zb_a + Z_BPT]
                tr_lo = _lbns_before(p, zones, zb_a, (q_a // int(bpt)) * int(bpt))
                lo = max(tr_lo, a - int(wait0 / p[P_ROT_MS] * bpt))
            done = bus + p[P_COMPL_R]
            _seg_set(st, b, k, lo, rd)
        st[b + S_PREV_WRITE] = 0
    else:
        xw = p[P_XFER_W]
        k = _pick_write_seg(p, st, b, a, n, pf)
        if pf >= 0:  # a write stops the read-ahead
            st[b + S_PF_SEG] = -1
            free = stop_t
            cyl = stop_c
            head = stop_h
        mintime = p[P_MIN_SEEK]
        seg_lo = float(a)
        if p[P_WRITE_BACK] > 0:
            ov = p[P_OV_WHW] if prev_write else p[P_OV_WHR]
            x0 = t + ov + p[P_DATA_PREP]
            media_at = t + ov
            ds = int(st[b + S_DS_SEG])
            # (with a dedicated write segment too: DiskSim 4.0 on the IBM 18ES appends a write
            # to the destage it continues and holds any other until the destage ends)
            if destaging and ds >= 0:
                lo, hi = _seg_bounds(st, b, ds)
                if a == hi and a + n - lo <= seg_n:
                    # it appends to the data being written: same segment, the media write
                    # goes on from where the destage is
                    k = ds
                    seg_lo = lo
                    media_at = free
                    mintime = 0.0
                elif p[P_NWSEGS] <= 1:  # no room in the buffer until the destage ends
                    x0 = max(x0, free)
            done = x0 + n * xw + p[P_COMPL_W]
            disc = 0.0
            resel = 0.0
        elif p[P_XD_ON] > 0 and prev_write and not seq:
            # the extra write disconnect (DiskSim's model of the HP C2247A)
            media_at = t + p[P_XD_CMD] + p[P_XD_SEEKDELTA]
            x0 = t + p[P_XD_CMD] + p[P_XD_DISC1] + p[P_XD_INTER] + p[P_RESELECT1] + p[
                P_DATA_PREP]
            disc = p[P_XD_DISC2]
            resel = p[P_RESELECT2]
        else:
            ov = p[P_OV_WMW] if prev_write else p[P_OV_WMR]
            media_at = t + ov
            x0 = t + ov + p[P_DATA_PREP]
            disc = p[P_DISC_W]
            resel = p[P_RESELECT1]
        need = 0
        if p[P_XD_ON] > 0:
            # DiskSim's HP C2247A model writes nothing until the buffer holds the whole request,
            # or 10 blocks of one under 45, or 15 blocks (disk_buffer_block_available)
            need = min(n, 10) if n < 45 else 15
        t_end, ce, he = _walk_write(p, zones, curve_d, curve_t, max(media_at, free), cyl, head,
                                    a, n, mintime, x0, xw, need)
        if p[P_WRITE_BACK] <= 0:
            done = max(t_end, x0 + n * xw + disc) + resel + p[P_COMPL_W]
            st[b + S_DS_SEG] = -1
        else:
            st[b + S_DS_SEG] = k
            if prev_write and seq and p[P_NWSEGS] > 1:
                # a sequential stream of writes keeps the media writing without a break, and
                # the buffer holds at most its write segments' worth of the stream not yet on
                # the platter: the write completes no earlier than when the media, writing
                # at the zone's rate, has that little left (DiskSim's cache makes a write
                # wait for a segment; with one write segment the append-or-wait rule above
                # already bounds it, but with several a stream of writes completed at the
                # interface's speed for ever)
                zb_w, _q_w, _n_w = _phys_call(p, zones, a)
                room = p[P_NWSEGS] * seg_n * p[P_ROT_MS] / zones[zb_w + Z_BPT]
                done = max(done, t_end - room)
        _drop_overlaps(p, st, b, k, a, n)
        _seg_set(st, b, k, seg_lo, a + n)
        st[b + S_FREE] = t_end
        st[b + S_CYL] = ce
        st[b + S_HEAD] = he
        st[b + S_PREV_WRITE] = 1
    st[b + S_PREV_END] = a + n
    return done, hit


@njit(nrt=False)
def replay_closed(p, zones, curve_d, curve_t, st, lbn, nblk, is_write, idle_ms, out_serv):
    """Replay requests one at a time on drive 0 of ``st``: request k+1 is issued when k
    completes plus ``idle_ms[k]``. Fills ``out_serv`` (ms); returns the cache-hit count."""
    t = 0.0
    hits = 0
    for k in range(lbn.shape[0]):
        done, hit = service(p, zones, curve_d, curve_t, st, 0, t, lbn[k], nblk[k],
                            is_write[k] != 0)
        hits += hit
        out_serv[k] = done - t
        t = done + idle_ms[k]
    return hits
