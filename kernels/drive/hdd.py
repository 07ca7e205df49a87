"""A zoned hard-disk model replayed one request at a time, the way DiskSim replays its
validation traces (issue 3, deliverables 3 and 5: first version).

Model, per request, in milliseconds of simulated time:

- geometry: zones of cylinders with their blocks per track; logical blocks fill a cylinder's
  tracks (surfaces) before the next cylinder; each track starts ``track_skew`` sectors later
  than the one before on the same cylinder and ``cylinder_skew`` later across a cylinder
  switch, so a sequential transfer loses exactly the skew at each switch;
- mechanics: seek time from the drive's measured seek curve (linear interpolation between
  measured distances) or from the Ruemmler-Wilkes equation (``a + b*sqrt(d)`` below the
  boundary, ``c + e*d`` above, with the first ten distances measured); a head switch on the
  same cylinder; a write settling delay; the rotational position follows from absolute time
  (the platter never stops), so the wait for the first sector is a consequence of when the
  head arrives, not a random draw;
- controller: command overheads by kind (read/write, hit/miss, after a read/after a write);
  the interface transfer per sector (DiskSim's "bulk sector transfer time") plus the bus's
  per-block time, overlapped with the media transfer for reads;
- cache: the segment a read miss fills keeps being filled by read-ahead at media speed after
  the read (up to the maximum read-ahead) until the next request arrives; a read inside what
  is cached by then is a hit; written data is cached (reads of it hit); with write-back
  ("fast write" > 0) a write completes when its data is in the buffer and the media write
  follows, delaying the next media access; with write-through it completes on the media.

Known simplifications (see the README's fidelity table for what they cost): spare sectors
and slipped blocks are spread over the zone rather than placed exactly; one read-ahead
segment; no command queue (one request outstanding, as in the validation traces).
"""

from __future__ import annotations

import numpy as np

from blocklab.kernels._jit import njit

# Parameter vector (float64) indices.
(P_ROT_MS, P_SURFACES, P_HEAD_SWITCH, P_WRITE_SETTLE, P_BULK, P_BUS_READ, P_BUS_WRITE,
 P_OV_RHR, P_OV_RHW, P_OV_RMR, P_OV_RMW, P_OV_WHR, P_OV_WHW, P_OV_WMR, P_OV_WMW,
 P_COMPL_R, P_COMPL_W, P_WRITE_BACK, P_MAX_RA, P_SEG_BLOCKS, P_SEEK_KIND, P_HPL_X, P_HPL_A,
 P_HPL_B, P_HPL_C, P_HPL_E, P_SINGLE_SEEK, P_IMMED_READ, P_IMMED_WRITE, P_HIGH_WM,
 P_RESELECT, P_LOW_WM) = range(32)
P_N = 32
SEEK_CURVE, SEEK_HPL = 0, 1

# Zone table columns (float64): first cylinder, last cylinder, blocks per track, first LBN,
# LBNs in the zone, track skew (sectors), cylinder skew (sectors).
Z_FIRST_CYL, Z_LAST_CYL, Z_BPT, Z_FIRST_LBN, Z_NLBN, Z_TSKEW, Z_CSKEW = range(7)
Z_N = 7


@njit(inline="always", nrt=False)
def _zone_of(zones, lbn):
    nz = zones.shape[0] // Z_N
    z = nz - 1
    for i in range(nz):
        if lbn < zones[i * Z_N + Z_FIRST_LBN] + zones[i * Z_N + Z_NLBN]:
            z = i
            break
    return z


@njit(inline="always", nrt=False)
def _locate_z(zones, surfaces, lbn):
    """(zone, cylinder, head, angle of the block's start in [0, 1), blocks per track)."""
    z = _zone_of(zones, lbn)
    b = z * Z_N
    bpt = int(zones[b + Z_BPT])
    off = lbn - int(zones[b + Z_FIRST_LBN])
    track = off // bpt
    sector = off % bpt
    cyl_in_zone = track // surfaces
    head = track % surfaces
    cyl = int(zones[b + Z_FIRST_CYL]) + cyl_in_zone
    skew = cyl_in_zone * (zones[b + Z_CSKEW] + (surfaces - 1) * zones[b + Z_TSKEW]) \
        + head * zones[b + Z_TSKEW]
    angle = ((sector + skew) % bpt) / bpt
    return z, cyl, head, angle, bpt


@njit(nrt=False)
def locate(zones, surfaces, lbn):
    """(cylinder, head, angle in [0, 1) of the block's start, blocks per track) of an LBN."""
    _z, cyl, head, angle, bpt = _locate_z(zones, surfaces, lbn)
    return cyl, head, angle, bpt


@njit(nrt=False)
def seek_ms(p, curve_d, curve_t, dist):
    """Seek time for a move of ``dist`` cylinders (0 for none)."""
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
    if dist >= curve_d[n - 1]:
        return curve_t[n - 1]
    lo = 0
    hi = n - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if curve_d[mid] <= dist:
            lo = mid
        else:
            hi = mid
    f = (dist - curve_d[lo]) / (curve_d[hi] - curve_d[lo])
    return curve_t[lo] + f * (curve_t[hi] - curve_t[lo])


@njit(nrt=False)
def _media(p, zones, curve_d, curve_t, t0, cyl0, head0, lbn, n, write):
    """Position and transfer ``n`` blocks from ``lbn`` starting at ``t0`` with the head on
    (cyl0, head0). Returns (time the first block starts, time the last ends, cylinder and
    head of the last block, blocks per track at ``lbn``)."""
    surfaces = int(p[P_SURFACES])
    rot = p[P_ROT_MS]
    z, cyl, head, angle, bpt = _locate_z(zones, surfaces, lbn)
    dist = abs(cyl - cyl0)
    t = t0 + seek_ms(p, curve_d, curve_t, dist)
    if dist == 0 and head != head0:
        t += p[P_HEAD_SWITCH]
    if write:
        t += p[P_WRITE_SETTLE]
    now = (t / rot) % 1.0
    wait = (angle - now) % 1.0
    first = t + wait * rot
    # sequential transfer: the blocks plus one skew at each track (or cylinder) boundary
    b = z * Z_N
    off = lbn - int(zones[b + Z_FIRST_LBN])
    in_track = off % bpt
    switches = (in_track + n - 1) // bpt
    tracks_before = off // bpt
    cyl_switches = (tracks_before + switches) // surfaces - tracks_before // surfaces
    skew_sectors = (switches - cyl_switches) * zones[b + Z_TSKEW] + cyl_switches * zones[
        b + Z_CSKEW]
    end = first + (n + skew_sectors) / bpt * rot
    last_off = off + n - 1
    if last_off < int(zones[b + Z_NLBN]):  # the last block is in the same zone
        last_track = last_off // bpt
        lcyl = int(zones[b + Z_FIRST_CYL]) + last_track // surfaces
        lhead = last_track % surfaces
    else:
        lcyl, lhead, _a, _b = locate(zones, surfaces, lbn + n - 1)
    return first, end, lcyl, lhead, bpt


# Per-drive state vector (float64) indices.
(S_CYL, S_HEAD, S_MEDIA_FREE, S_PREV_WRITE, S_SEG_LO, S_SEG_HI, S_RA_T0, S_RA_LIM, S_RA_BPT,
 S_W_LO, S_W_HI) = range(11)
S_N = 11


def new_state(drives: int = 1) -> np.ndarray:
    """Drive states: heads at cylinder 0, nothing cached, media idle."""
    st = np.zeros(drives * S_N)
    for d in range(drives):
        b = d * S_N
        st[b + S_SEG_LO] = -1
        st[b + S_SEG_HI] = -1
        st[b + S_RA_LIM] = -1
        st[b + S_RA_BPT] = 1
        st[b + S_W_LO] = -1
        st[b + S_W_HI] = -1
    return st


@njit(nrt=False)
def service(p, zones, curve_d, curve_t, st, d, t, a, n, w):
    """Serve one request of ``n`` blocks at LBN ``a`` (a write if ``w``) arriving at an idle
    drive ``d`` at time ``t`` (ms). Updates the drive's state in ``st``; returns
    (completion time in ms, 1 if served from the cache else 0)."""
    b = d * S_N
    rot = p[P_ROT_MS]
    cyl = int(st[b + S_CYL])
    head = int(st[b + S_HEAD])
    media_free = st[b + S_MEDIA_FREE]
    prev_write = st[b + S_PREV_WRITE] > 0
    seg_lo = int(st[b + S_SEG_LO])
    seg_hi = int(st[b + S_SEG_HI])
    ra_lim = int(st[b + S_RA_LIM])
    w_lo = int(st[b + S_W_LO])
    w_hi = int(st[b + S_W_HI])
    hit = 0
    xfer = n * (p[P_BULK] + (p[P_BUS_WRITE] if w else p[P_BUS_READ]))
    if not w:
        hi = seg_hi
        if ra_lim > seg_hi and seg_lo >= 0:  # read-ahead went on until this request
            grown = int((t - st[b + S_RA_T0]) / rot * st[b + S_RA_BPT])
            hi = min(ra_lim, seg_hi + max(grown, 0))
        if (seg_lo >= 0 and a >= seg_lo and a + n <= hi) or (
                w_lo >= 0 and a >= w_lo and a + n <= w_hi):
            hit = 1
            ov = p[P_OV_RHW] if prev_write else p[P_OV_RHR]
            done = t + ov + xfer + p[P_COMPL_R]
            st[b + S_SEG_HI] = hi
        else:
            ov = p[P_OV_RMW] if prev_write else p[P_OV_RMR]
            start = max(t + ov, media_free)
            first, end, cyl, head, bpt = _media(p, zones, curve_d, curve_t, start, cyl, head,
                                                a, n, False)
            # the host transfer starts as blocks come off the media (immediate buffer
            # read), once the buffer holds the high water mark's share of the request, or
            # else when the whole request is buffered; it overlaps the rest of the read
            if p[P_IMMED_READ] > 0:
                xstart = first
            elif p[P_HIGH_WM] > 0:
                xstart = first + p[P_HIGH_WM] * (end - first) + p[P_RESELECT]
            else:
                xstart = end
            done = max(end, xstart + xfer) + p[P_COMPL_R]
            st[b + S_MEDIA_FREE] = end
            st[b + S_SEG_LO] = a
            st[b + S_SEG_HI] = a + n
            st[b + S_RA_T0] = end
            st[b + S_RA_LIM] = a + n + int(p[P_MAX_RA])
            st[b + S_RA_BPT] = bpt
        st[b + S_PREV_WRITE] = 0
    else:
        seq = w_hi >= 0 and a == w_hi
        # a write "hits" when the buffer takes it at once: with write-back, when the last
        # destage is done (else it waits for room); with write-through, when it appends to
        # the data just written
        if p[P_WRITE_BACK] > 0:
            whit = media_free <= t
        else:
            whit = seq
        ov = (p[P_OV_WHW] if prev_write else p[P_OV_WHR]) if whit else (
            p[P_OV_WMW] if prev_write else p[P_OV_WMR])
        if p[P_WRITE_BACK] > 0:
            done = t + ov + xfer + p[P_COMPL_W]
            start = max(done, media_free)
            _f, end, cyl, head, _bpt = _media(p, zones, curve_d, curve_t, start, cyl, head, a, n,
                                                True)
        else:
            # write-through: the drive takes write data into its buffer at once and starts on
            # the media when the first block is in (the low water mark only says when it
            # reconnects for more); without a mark it waits for all of it
            if p[P_IMMED_WRITE] > 0 or p[P_LOW_WM] > 0:
                ready = t + ov + xfer / max(n, 1)
            else:
                ready = t + ov + xfer
            start = max(ready, media_free)
            _f, end, cyl, head, _bpt = _media(p, zones, curve_d, curve_t, start, cyl, head, a, n,
                                                True)
            done = max(end, t + ov + xfer) + p[P_COMPL_W]
        st[b + S_MEDIA_FREE] = end
        st[b + S_W_LO] = w_lo if seq else a
        st[b + S_W_HI] = a + n
        st[b + S_SEG_LO] = -1  # a write stops read-ahead
        st[b + S_RA_LIM] = -1
        st[b + S_PREV_WRITE] = 1
    st[b + S_CYL] = cyl
    st[b + S_HEAD] = head
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
