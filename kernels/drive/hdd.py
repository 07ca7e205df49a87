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
  completes after the media write and a reselection. A read served from the segment of a
  read-ahead in progress gets the blocks the segment holds at interface speed, then the
  read-ahead's, none before it is read (``disk_buffer_transfer_size`` sends what it holds).
- **Queued writes** (catalog drives, ``queued_write_data``; DiskSim's validation drives do not
  set it): a drive with command queuing (SCSI tagged queuing on SAS and FC, SATA's native
  command queuing) takes a waiting write's command and data while it serves the request before
  it, once that request's data has left the interface, and holds the data in its buffer; with
  its write cache off it still reports the write only once it is on the platter. The media
  write starts as soon as the mechanism is free, so a contiguous stream of queued writes (a
  rebuild's spare, a RAID controller's full-stripe writes) loses no revolution between writes,
  where a drive offered one write at a time loses one. The engine keeps the queue and its
  order (its scheduler); the drive adds when the waiting write's data is in.
- **The drive's own queue order**: the engine keeps the queue; with ``scheduler = "sptf"`` it
  takes the operation this model ranks soonest (``position_ms``: when the head would be over
  its first block, from the drive's state as ``service`` would find it).
- **Read on arrival** (not in DiskSim): a drive that reads with zero latency starts reading as
  soon as its head settles on the track and keeps the sectors that pass before the first one
  wanted (Quantum Atlas 10K II product manual, section 6.4: "the initial data read is stored in
  a buffer (cache) until the actual starting address data block is reached").

Not modelled (docs/drives.md, the fidelity section): the out-of-order transfer of a zero-latency
access (on these drives the interface, not the media, decides when a read completes), defects
remapped to another sector (none in DiskSim's validation drives), the queued overlap for
reads (a read's data comes from the platter and cannot cross early: only its command
overhead could, 0 to 0.16 ms on the catalog's firmware, and is not overlapped), sneaky read hits,
reconnections when the interface overtakes the media during a read, and the disk keys
``pipeline/model/disksim_params.py`` lists as not modelled. Almost read hits (DiskSim's "Allow
almost read hits": a read starting where the read-ahead in progress has got to is served from
it) are modelled when the drive allows them.

Where each part lives:

- ``kernels/drive/hdd_tables.py``: the parameter vector ``p`` (float64, a named field each:
  ``PARAMS``, built by name with ``pack`` and read with ``unpack``), the zone table ``zones``
  (``zone_table``: ``Z_N`` columns per zone, then every zone's slips, then a bucket index) and
  each drive's state (``S_N`` floats of ``st``; ``new_state``). The seek curve travels as two
  arrays (distances in cylinders, times in ms); the times may go on with the seek time of
  every distance (``seek_times``), which ``drive_params`` appends so that a seek is one load.
- ``kernels/drive/hdd_geometry.py``: layout and mechanics (``locate``, ``track_bounds``,
  ``seek_ms``).
- ``kernels/drive/hdd_cache.py``: the read-ahead's and a write's media walks, when a read's
  blocks reach the host, and the choice of cache segment (``settle``).
- this module: one request (``service``) and a closed-loop replay on one drive
  (``replay_closed``); it re-exports what the engine and the pipeline call, so
  ``from blocklab.kernels.drive import hdd as H`` is the model's one front door.
"""

from __future__ import annotations

import numpy as np

from blocklab.kernels._jit import njit
from blocklab.kernels.drive.hdd_cache import (
    _drop_overlaps,
    _pick_read_seg,
    _pick_write_seg,
    _ra_bus,
    _ra_bus_first,
    _ra_cut,
    _ra_cut_now,
    _ra_limit,
    _ra_new,
    _seg_bounds,
    _seg_set,
    _walk_write,
    settle,
)
from blocklab.kernels.drive.hdd_geometry import (
    _EPS,
    SEEK_TABLE_MAX,
    _lbns_before,
    _move,
    _phys_call,
    _wait,
    _where,
    locate,
    seek_ms,
    seek_times,
    track_bounds,
)
from blocklab.kernels.drive.hdd_tables import (
    CHOICES,
    NAMES,
    P_ALMOST,
    P_CACHE_ON,
    P_COMPL_R,
    P_COMPL_W,
    P_DATA_PREP,
    P_DISC_RR,
    P_DISC_RW,
    P_DISC_W,
    P_HIGH_WM,
    P_MIN_SEEK,
    P_N,
    P_NSEGS,
    P_NWSEGS,
    P_OV_RHR,
    P_OV_RHW,
    P_OV_RMR,
    P_OV_RMW,
    P_OV_WHR,
    P_OV_WHW,
    P_OV_WMR,
    P_OV_WMW,
    P_QUEUED_WRITES,
    P_RA_IDLE_HIT,
    P_RA_KIND,
    P_READ_ARRIVAL,
    P_REQ_OVERHEAD,
    P_RESELECT1,
    P_RESELECT2,
    P_ROT_MS,
    P_SEG_BLOCKS,
    P_WM_BY_REQ,
    P_WRITE_BACK,
    P_WSEG,
    P_XD_CMD,
    P_XD_DISC1,
    P_XD_DISC2,
    P_XD_INTER,
    P_XD_ON,
    P_XD_SEEKDELTA,
    P_XFER_R,
    P_XFER_W,
    PARAMS,
    RA_DEC,
    S_CYL,
    S_DS_SEG,
    S_FREE,
    S_HEAD,
    S_IF_FREE,
    S_N,
    S_PF_LBN,
    S_PF_N,
    S_PF_SEG,
    S_PREV_END,
    S_PREV_WRITE,
    S_RA_END,
    S_SEGS,
    S_W_NEXT,
    S_WRING,
    SEG_MAX,
    STATE,
    Z_BPT,
    Drive,
    Field,
    Zone,
    new_state,
    pack,
    read_state,
    unpack,
    zone_table,
)

# the model's front door: what kernels/engine.py, the pipeline, tools/ and tests/ call
__all__ = ["CHOICES", "NAMES", "P_N", "PARAMS", "SEEK_TABLE_MAX", "SEG_MAX", "STATE", "S_N",
           "Drive", "Field", "Zone", "locate", "new_state", "pack", "position_ms",
           "position_place", "position_state", "read_state", "replay_closed", "replay_ops",
           "seek_ms", "seek_times", "service", "service_queued", "settle", "track_bounds",
           "unpack", "zone_table"]


@njit(forceinline=True, nrt=False)
def _own_work(p, zones, curve_d, curve_t, st, b, t):
    """The drive's own work at time ``t``: a read-ahead (which a request can stop at the end of
    the sector under the head) or a destage (which it cannot). Brings the read-ahead's segment
    up to date; returns (when the mechanism is free, its cylinder and head, the read-ahead's
    segment or -1, whether a destage is under way, and when, where (cylinder, head) the
    read-ahead stops if the request stops it)."""
    free = st[b + S_FREE]
    cyl = int(st[b + S_CYL])
    head = int(st[b + S_HEAD])
    pf = int(st[b + S_PF_SEG])
    destaging = False
    stop_t = free
    stop_c = cyl
    stop_h = head
    if pf >= 0:  # (free, cyl, head: the read-ahead's end, computed when it has ended)
        got, stop_t, stop_c, stop_h, going = _ra_cut_now(p, zones, curve_d, curve_t, st, b, t)
        lo, hi = _seg_bounds(st, b, pf)
        hi = int(st[b + S_PF_LBN]) + got
        st[b + S_SEGS + 3 * pf + 1] = hi
        st[b + S_SEGS + 3 * pf] = max(lo, hi - p[P_SEG_BLOCKS])
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
    return free, cyl, head, pf, destaging, stop_t, stop_c, stop_h


@njit(forceinline=True, nrt=False)
def _read_media(p, zones, curve_d, curve_t, st, b, t, a, n, prev_write, k, kind, lim, free, cyl,
                head, zb_a, q_a, nxt_a, geo_a):
    """A read miss, or a partial hit on segment ``k`` that nobody is filling: the media read
    into ``k`` (from ``a``, or from the segment's end for a partial hit, on to the read-ahead
    limit ``lim``) and when the host has the request's last block. Returns the completion
    time."""
    seg_n = p[P_SEG_BLOCKS]
    xr = p[P_XFER_R]
    ov_miss = p[P_OV_RMW] if prev_write else p[P_OV_RMR]
    lo, hi = _seg_bounds(st, b, k)
    if kind == 1:  # send what is there, read the rest from the segment's end
        rd = int(hi)
        bus_at = t + (p[P_OV_RHW] if prev_write else p[P_OV_RHR]) + p[P_DATA_PREP]
        resel = (rd - a) * xr
        wm = 0
    else:
        rd = a
        lo = a
        bus_at = t + ov_miss + (p[P_DISC_RW] if prev_write else p[P_DISC_RR])
        resel = p[P_RESELECT1] + p[P_DATA_PREP]
        # the drive reconnects when the buffer holds the high water mark's share (of the
        # request, or of the segment), or the whole request if that comes first
        if p[P_WM_BY_REQ] > 0:
            wm = max(1, int(min(seg_n, n) * p[P_HIGH_WM]))
        else:
            wm = max(1, int(seg_n * p[P_HIGH_WM] + 0.9999999999))
        wm = min(wm, n)
    start = max(t + ov_miss, free)
    nblk = int(max(lim, a + n)) - rd
    if rd != a:
        zb_a = -1
    tr0, wait0, geo0, zb0 = _ra_new(p, zones, curve_d, curve_t, st, b, k, start, cyl, head, rd,
                                    nblk, zb_a, q_a, nxt_a, geo_a)
    if kind == 0 and min(geo0, nblk) > n:  # the request lies in the walk's first run
        bus = _ra_bus_first(p, zones, zb0, tr0, n, wm, bus_at, resel, xr)
    else:
        bus = _ra_bus(p, zones, curve_d, curve_t, st, b, 0, a + n - rd, wm, bus_at, resel, xr)
    if kind == 0 and p[P_READ_ARRIVAL] > 0 and p[P_CACHE_ON] > 0:
        # the drive reads from the moment the head settles on the track: the sectors that pass
        # before the first one wanted are kept too
        bpt = zones[zb_a + Z_BPT]
        tr_lo = _lbns_before(p, zones, zb_a, (q_a // int(bpt)) * int(bpt))
        # (a head that arrives at a sector's start, within _EPS, reads that sector)
        lo = max(tr_lo, a - int((wait0 + _EPS) / p[P_ROT_MS] * bpt))
    _seg_set(st, b, k, lo, rd)
    return bus + p[P_COMPL_R]


@njit(forceinline=True, nrt=False)
def _read(p, zones, curve_d, curve_t, st, b, t, a, n, prev_write, free, cyl, head, pf, stop_t,
          stop_c, stop_h):
    """Serve a read of ``n`` blocks at ``a`` arriving at ``t``, the drive's own work as
    ``_own_work`` found it. Returns (completion time, 1 if every block was in the buffer)."""
    pf_lbn = int(st[b + S_PF_LBN])
    pf_n = int(st[b + S_PF_N])
    ov_miss = p[P_OV_RMW] if prev_write else p[P_OV_RMR]
    ov_hit = p[P_OV_RHW] if prev_write else p[P_OV_RHR]
    xr = p[P_XFER_R]
    k, kind = _pick_read_seg(p, st, b, a, n, pf)
    zb_a, q_a, nxt_a = -1, 0, 0  # a's physical place, when needed
    if p[P_RA_KIND] == RA_DEC or p[P_READ_ARRIVAL] > 0:
        zb_a, q_a, nxt_a = _phys_call(p, zones, a)
    lim, geo_a = _ra_limit(p, zones, a, n, zb_a, q_a, nxt_a)
    if pf >= 0 and (k != pf or kind == 0):  # stop the read-ahead
        st[b + S_PF_SEG] = -1
        free = stop_t
        cyl = stop_c
        head = stop_h
        st[b + S_FREE] = free
        st[b + S_CYL] = cyl
        st[b + S_HEAD] = head
        pf = -1
    hit = 0
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
                    int(hi), int(lim - hi), -1, 0, 0, 0)
    elif kind == 1 and k == pf:  # the rest is coming in from the read-ahead
        new_n = max(pf_n, int(lim) - pf_lbn)
        if new_n > pf_n:
            st[b + S_PF_N] = new_n
            st[b + S_RA_END] = 0
        # the request's blocks before the read-ahead's first one are in the segment already:
        # the host has them first, one per transfer time (DiskSim sends what the segment holds)
        pre = max(pf_lbn - a, 0)
        bus = _ra_bus(p, zones, curve_d, curve_t, st, b, a + pre - pf_lbn, n - pre, 0,
                      t + ov_hit + p[P_DATA_PREP] + pre * xr, 0.0, xr)
        done = bus + p[P_COMPL_R]
        lo, hi = _seg_bounds(st, b, k)
        _seg_set(st, b, k, lo, hi)
    else:  # a miss, or a partial hit on a segment nobody is filling
        done = _read_media(p, zones, curve_d, curve_t, st, b, t, a, n, prev_write, k, kind, lim,
                           free, cyl, head, zb_a, q_a, nxt_a, geo_a)
    st[b + S_PREV_WRITE] = 0
    return done, hit


@njit(forceinline=True, nrt=False)
def _write_timing(p, st, b, t, tq, a, n, k, prev_write, seq, free, destaging):
    """When a write's data reaches the buffer and its media write may start: (segment, the
    segment's first block, when the media write may start, when the first block's transfer
    starts, the completion of a write-back write, the disconnection and reselection that end a
    write-through write, the shortest positioning time). ``tq`` is when the write reached the
    drive's queue (``t`` when the drive took it at once). Last, whether a write-back write
    appends to the destage in progress (it takes no segment of its own)."""
    xw = p[P_XFER_W]
    seg_n = p[P_SEG_BLOCKS]
    mintime = p[P_MIN_SEEK]
    seg_lo = float(a)
    done = 0.0
    appended = False
    if p[P_WRITE_BACK] > 0:
        ov = p[P_OV_WHW] if prev_write else p[P_OV_WHR]
        x0 = t + ov + p[P_DATA_PREP]
        media_at = t + ov
        ds = int(st[b + S_DS_SEG])
        # (with a dedicated write segment too: DiskSim 4.0 on the IBM 18ES appends a write to
        # the destage it continues and holds any other until the destage ends)
        if destaging and ds >= 0:
            lo, hi = _seg_bounds(st, b, ds)
            if a == hi and a + n - lo <= seg_n:
                # it appends to the data being written: same segment, the media write goes on
                # from where the destage is
                k = ds
                seg_lo = lo
                media_at = free
                mintime = 0.0
                appended = True
            elif p[P_NWSEGS] <= 1:  # no room in the buffer until the destage ends
                x0 = max(x0, free)
        if p[P_NWSEGS] > 1 and not appended and not (prev_write and seq):
            # every write segment holds a write not yet on the platter: the data waits until
            # the oldest of them is written (DiskSim's cache makes a write wait for a segment).
            # Without it, a drive with several write segments took random writes at the
            # interface's speed for ever (a review: a 7,200 rpm drive with a 16 MB buffer
            # acknowledged 800 MB of 4 KiB random writes at 2,129 IOPS, and reads after the
            # burst waited 235 s); a sequential stream has its own bound in ``_write``
            x0 = max(x0, st[b + S_WRING + int(st[b + S_W_NEXT])])
        done = x0 + n * xw + p[P_COMPL_W]
        disc = 0.0
        resel = 0.0
    elif p[P_XD_ON] > 0 and prev_write and not seq:
        # the extra write disconnect (DiskSim's model of the HP C2247A)
        media_at = t + p[P_XD_CMD] + p[P_XD_SEEKDELTA]
        x0 = t + p[P_XD_CMD] + p[P_XD_DISC1] + p[P_XD_INTER] + p[P_RESELECT1] + p[P_DATA_PREP]
        disc = p[P_XD_DISC2]
        resel = p[P_RESELECT2]
    else:
        if p[P_QUEUED_WRITES] > 0:
            # command queuing: a write that waited in the drive's queue had its command taken
            # and its data sent while the drive served the request before it, once that
            # request's own data phase had left the interface (SAS tagged queuing, SATA NCQ:
            # the drive takes a queued write's data before it completes the one in progress),
            # so its media write may start as soon as the mechanism is free: a contiguous
            # stream of queued writes loses no revolution between writes. A write the drive
            # took at once (tq == t) is served as before
            t = min(t, max(tq, st[b + S_IF_FREE]))
        ov = p[P_OV_WMW] if prev_write else p[P_OV_WMR]
        media_at = t + ov
        x0 = t + ov + p[P_DATA_PREP]
        disc = p[P_DISC_W]
        resel = p[P_RESELECT1]
    return k, seg_lo, media_at, x0, done, disc, resel, mintime, appended


@njit(forceinline=True, nrt=False)
def _xd_need(p, n):
    """How many of a write's ``n`` blocks the buffer must hold before any is written: 0, but
    DiskSim's HP C2247A model (extra write disconnect) writes nothing until it holds the whole
    request, or 10 blocks of one under 45, or 15 blocks (disk_buffer_block_available)."""
    if p[P_XD_ON] <= 0:
        return 0
    return min(n, 10) if n < 45 else 15


@njit(forceinline=True, nrt=False)
def _write(p, zones, curve_d, curve_t, st, b, t, tq, a, n, prev_write, seq, free, cyl, head, pf,
           destaging, stop_t, stop_c, stop_h):
    """Serve a write of ``n`` blocks at ``a`` arriving at ``t``, the drive's own work as
    ``_own_work`` found it. Returns the completion time."""
    xw = p[P_XFER_W]
    k = _pick_write_seg(p, st, b, a, n, pf)
    if pf >= 0:  # a write stops the read-ahead
        st[b + S_PF_SEG] = -1
        free = stop_t
        cyl = stop_c
        head = stop_h
    k, seg_lo, media_at, x0, done, disc, resel, mintime, appended = _write_timing(
        p, st, b, t, tq, a, n, k, prev_write, seq, free, destaging)
    t_end, ce, he = _walk_write(p, zones, curve_d, curve_t, max(media_at, free), cyl, head, a, n,
                                mintime, x0, xw, _xd_need(p, n))
    if p[P_WRITE_BACK] <= 0:
        done = max(t_end, x0 + n * xw + disc) + resel + p[P_COMPL_W]
        st[b + S_DS_SEG] = -1
        st[b + S_IF_FREE] = x0 + n * xw + disc  # the data is in: the drive disconnects
    else:
        st[b + S_DS_SEG] = k
        if prev_write and seq and p[P_NWSEGS] > 1:
            # a sequential stream of writes keeps the media writing without a break, and the
            # buffer holds at most its write segments' worth of the stream not yet on the
            # platter: the write completes no earlier than when the media, writing at the
            # zone's rate, has that little left (DiskSim's cache makes a write wait for a
            # segment; with one write segment the append-or-wait rule above already bounds it,
            # but with several a stream of writes completed at the interface's speed for ever)
            zb_w, _q_w, _n_w = _phys_call(p, zones, a)
            room = p[P_NWSEGS] * p[P_SEG_BLOCKS] * p[P_ROT_MS] / zones[zb_w + Z_BPT]
            done = max(done, t_end - room)
        if p[P_NWSEGS] > 1:  # the write ring (``_write_timing``): when this write is written
            j = int(st[b + S_W_NEXT])
            nw = min(int(p[P_NWSEGS]), SEG_MAX)
            if appended:  # its segment's destage goes on: the newest entry ends later
                st[b + S_WRING + (j - 1) % nw] = t_end
            else:
                st[b + S_WRING + j] = t_end
                st[b + S_W_NEXT] = (j + 1) % nw
        st[b + S_IF_FREE] = done
    _drop_overlaps(p, st, b, k, a, n)
    _seg_set(st, b, k, seg_lo, a + n)
    st[b + S_FREE] = t_end
    st[b + S_CYL] = ce
    st[b + S_HEAD] = he
    st[b + S_PREV_WRITE] = 1
    return done


def service(p, zones, curve_d, curve_t, st, d, t, a, n, w):
    """Serve one request of ``n`` blocks at LBN ``a`` (a write if ``w``) that drive ``d``
    receives at time ``t`` (ms), when it has no other request. Updates the drive's state in
    ``st``; returns (completion time in ms, 1 if the read was served from the cache else 0).

    A plain function, not a kernel: ``service_queued`` of a request that reached the queue as
    it started, for callers in Python (the tests; kernels call ``service_queued``). As a
    kernel of its own it compiled the model's whole code once more, which nothing ran (3 s
    of the warm's CPU time, one kernel in the cache)."""
    return service_queued(p, zones, curve_d, curve_t, st, d, t, t, a, n, w)


@njit(nrt=False)
def service_queued(p, zones, curve_d, curve_t, st, d, t, q, a, n, w):
    """``service`` of a request that reached drive ``d``'s queue at ``q`` (ms, ``q <= t``) and
    that the drive starts at ``t``, when the request before it completed: the drive was busy
    from ``q`` to ``t`` with the requests before it (the engine's queue), so a drive with
    command queuing (``queued_write_data``) has taken a waiting write's data meanwhile
    (``_write_timing``); any other request is served as ``service`` serves it. (A ``q`` while
    the drive was idle would start the write early: the engine never gives one.)"""
    b = d * S_N
    # DiskSim's "Per-request overhead time": the request reaches the drive's controller this
    # much later (disksim_diskctlr.c, disk_event_arrive)
    tq = q + p[P_REQ_OVERHEAD]
    t = t + p[P_REQ_OVERHEAD]
    prev_write = st[b + S_PREV_WRITE] > 0
    seq = a == st[b + S_PREV_END]
    free, cyl, head, pf, destaging, stop_t, stop_c, stop_h = _own_work(
        p, zones, curve_d, curve_t, st, b, t)
    hit = 0
    if not w:
        done, hit = _read(p, zones, curve_d, curve_t, st, b, t, a, n, prev_write, free, cyl,
                          head, pf, stop_t, stop_c, stop_h)
        st[b + S_IF_FREE] = done  # a read holds the interface until its last block
    else:
        done = _write(p, zones, curve_d, curve_t, st, b, t, tq, a, n, prev_write, seq, free,
                      cyl, head, pf, destaging, stop_t, stop_c, stop_h)
    st[b + S_PREV_END] = a + n
    return done, hit


@njit(nrt=False)
def position_ms(p, zones, curve_d, curve_t, st, d, t, q, a, n, w):
    """How long after ``t`` (ms) drive ``d`` would have its head over the first block of a
    request of ``n`` blocks at ``a`` (a write if ``w``; it reached the drive's queue at ``q``)
    if it started that request at ``t``: the rank of the shortest-positioning-time-first
    scheduler (the engine's ``SCHED_SPTF``, as a drive with command queuing orders its own
    queue). The steps are ``service_queued``'s up to the first block's media access, so the
    rank is when that access starts there:

    - a read whose first block a cache segment holds ranks 0 (no positioning); an almost read
      hit (``a`` is the block the read-ahead in progress reads now, on a drive that allows
      them) ranks the start of that block from where the read-ahead stops (exact when it stops
      within a track; within a head switch when it stops between runs);
    - otherwise: the per-request and command overheads (a queued write's data taken early, as
      ``_write_timing`` has it; HP's extra write disconnect), the mechanism's own work (a
      read-ahead stops at the next block boundary; a destage ends, or goes on into a write
      that appends to it; with one write segment a write's data waits for its end), the seek
      or head switch (a write's settling delay, its minimum seek delay), the rotational wait,
      and a revolution more while the write's first block is not in the buffer.

    A queued write on a drive with command queuing may rank below 0: its data came in early,
    and its media access can begin while the request before it is still reporting its
    completion. The transfer, which no order changes, is left out (``n`` only counts on the HP
    C2247A, which writes nothing before its buffer holds 10 or 15 of a write's blocks). The
    drive's state is read, not changed, except the read-ahead's walk, brought up to ``t`` as
    serving any request at ``t`` brings it (``_ra_cut``: a memo of the walk and its end, the
    same whoever asks first)."""
    tt, free, cyl, head, pf, got, going = position_state(p, zones, curve_d, curve_t, st, d, t)
    zb, qa, c1, h1, ang = position_place(p, zones, a)
    return _position_at(p, zones, curve_d, curve_t, st, d, t, tt, free, cyl, head, pf, got,
                        going, q, a, n, w, zb, qa, c1, h1, ang)


@njit(nrt=False)
def position_state(p, zones, curve_d, curve_t, st, d, t):
    """The drive's side of ``position_ms`` at ``t`` (ms), the same for every request ranked
    then: (``t`` plus the per-request overhead, when the mechanism is free, its cylinder and
    head, the read-ahead's segment or -1, the blocks it has read and whether it is still going
    at that time). The scheduler asks it once per pick, not once per queued request: the
    read-ahead's walk (``_ra_cut``) is a memo that gives every asker the same answer."""
    b = d * S_N
    tt = t + p[P_REQ_OVERHEAD]
    free = st[b + S_FREE]
    cyl = int(st[b + S_CYL])
    head = int(st[b + S_HEAD])
    pf = int(st[b + S_PF_SEG])
    got = 0
    going = False
    if pf >= 0:
        got, free, cyl, head, going = _ra_cut(p, zones, curve_d, curve_t, st, b, tt)
    return tt, free, cyl, head, pf, got, going


@njit(nrt=False)
def position_place(p, zones, a):
    """The request's side of ``position_ms`` that no state changes: where block ``a`` is (zone
    base, sector within the zone, cylinder, head, angle in sectors from the index), which the
    engine keeps with a queued operation (``O_PZB`` ...) instead of mapping it at every pick."""
    zb, qa, _nxt = _phys_call(p, zones, a)
    c1, h1, ang = _where(p, zones, zb, qa)
    return zb, qa, c1, h1, int(ang)


@njit(forceinline=True, nrt=False)
def _position_at(p, zones, curve_d, curve_t, st, d, t, tt, free, cyl, head, pf, got, going, q,
                 a, n, w, zb, qa, c1, h1, ang):
    """``position_ms`` from its two sides (``position_state`` at ``t``, ``position_place`` of
    ``a``): the cache segments, the write's timing, the move and the rotational wait."""
    b = d * S_N
    rot = p[P_ROT_MS]
    bpt = zones[zb + Z_BPT]
    if not w and p[P_CACHE_ON] > 0:
        pf_lbn = int(st[b + S_PF_LBN])
        for k in range(int(p[P_NSEGS]) - (1 if p[P_WSEG] > 0 else 0)):
            lo, hi = _seg_bounds(st, b, k)
            if k == pf:  # the read-ahead's segment, as ``_own_work`` brings it up to date
                hi = pf_lbn + got
                lo = max(lo, hi - p[P_SEG_BLOCKS])
                if going and a == hi and p[P_ALMOST] > 0:  # being read now: ends at ``free``
                    return free - rot / bpt - t
            if lo <= a < hi:
                return 0.0
    prev_write = st[b + S_PREV_WRITE] > 0
    x0 = -np.inf  # when the first block is in the buffer (reads: no wait)
    mintime = 0.0
    if not w:
        start = tt + (p[P_OV_RMW] if prev_write else p[P_OV_RMR])
    else:  # the write's own timing, as ``_write`` takes it (a destage: ``_own_work``'s test)
        _k, _lo, start, x0, _done, _disc, _resel, mintime, _app = _write_timing(
            p, st, b, tt, q + p[P_REQ_OVERHEAD], a, n, -1, prev_write,
            a == st[b + S_PREV_END], free, pf < 0 and tt < free)
        x0 += max(1, _xd_need(p, n)) * p[P_XFER_W]  # its first block is in (HP: ``need`` are)
    start = max(start, free)
    mv = max(_move(p, curve_d, curve_t, cyl, head, c1, h1, w), mintime)
    ts = start + mv
    tr = ts + _wait(rot, bpt, ts, float(ang))
    if tr < x0 - _EPS:  # the block is not in yet: it comes round again
        tr += np.ceil((x0 - tr) / rot - _EPS) * rot
    return tr - t


@njit(nrt=False)
def replay_ops(p, zones, curve_d, curve_t, st, drive, start_ns, queued_ns, lbn, nblk, is_write,
               out_done_ns):
    """Serve operations in the order given, each on its ``drive`` of ``st`` at the time it
    started and the time it reached the drive's queue (ns), as the engine hands an operation to
    the model (``service_queued``, the completion rounded up to a nanosecond and never before
    the start). Fills ``out_done_ns``; returns the cache-hit count. The model alone, without
    the engine: given the engine's own operations (``drive_ops``, in the order they started),
    it gives the engine's completions, and its speed is what the model costs per operation
    (``make bench``)."""
    hits = 0
    for k in range(lbn.shape[0]):
        t_ms, hit = service_queued(p, zones, curve_d, curve_t, st, drive[k], start_ns[k] / 1e6,
                                   queued_ns[k] / 1e6, lbn[k], nblk[k], is_write[k] != 0)
        done = int(np.ceil(t_ms * 1e6))
        out_done_ns[k] = done if done > start_ns[k] else start_ns[k]
        hits += hit
    return hits


@njit(nrt=False)
def replay_closed(p, zones, curve_d, curve_t, st, lbn, nblk, is_write, idle_ms, out_serv):
    """Replay requests one at a time on drive 0 of ``st``: request k+1 is issued when k
    completes plus ``idle_ms[k]``. Fills ``out_serv`` (ms); returns the cache-hit count."""
    t = 0.0
    hits = 0
    for k in range(lbn.shape[0]):
        done, hit = service_queued(p, zones, curve_d, curve_t, st, 0, t, t, lbn[k], nblk[k],
                                   is_write[k] != 0)  # (``service``)
        hits += hit
        out_serv[k] = done - t
        t = done + idle_ms[k]
    return hits
