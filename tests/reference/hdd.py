"""Plain-Python reference of the HDD model (kernels/drive/hdd.py), written from the model's
description rather than from the kernel: the layout maps one block at a time the way DiskSim's
``g1_ltop_*`` functions do (slips counted one by one), the media is walked block by block
(a block that follows its predecessor on the next sector of the same track starts when it ends;
any other block costs a head movement and a rotational wait), the host transfer is the
per-block recurrence ``bus = max(bus, block read) + transfer``, and the cache is a list of
segments. It is built from the importer's ``DiskSimDrive``, not from the kernel's parameter
vector, so it checks ``drive_params`` too. Also: seek interpolation, the Ruemmler-Wilkes
equation and DiskSim's demerit figure."""

from __future__ import annotations

import bisect
import math

from . import disksim_layout as dl

EPS = 1e-9  # ms: an arrival this close before a sector's start still catches it


def seek_curve(curve: list[tuple[int, float]], dist: int) -> float:
    """Interpolated (and, past the last point, extrapolated) measured seek time."""
    if dist <= 0:
        return 0.0
    ds = [d for d, _t in curve]
    if dist <= ds[0]:
        return curve[0][1]
    i = min(bisect.bisect_right(ds, dist) - 1, len(curve) - 2)
    (d0, t0), (d1, t1) = curve[i], curve[i + 1]
    return t0 + (dist - d0) / (d1 - d0) * (t1 - t0)


def seek_hpl(x, a, b, c, e, first_ten, dist):
    if dist <= 0:
        return 0.0
    if dist <= len(first_ten):
        return first_ten[dist - 1]
    return a + b * math.sqrt(dist) if dist < x else c + e * dist


def demerit(sim: list[float], real: list[float]) -> float:
    """RMS horizontal distance between the two empirical CDFs at p = 0.0001 .. 1 (DiskSim's
    definition, with linear interpolation between order statistics)."""

    def q(xs, p):
        xs = sorted(xs)
        h = (len(xs) - 1) * p
        lo = math.floor(h)
        hi = min(lo + 1, len(xs) - 1)
        return xs[lo] + (h - lo) * (xs[hi] - xs[lo])

    ps = [k / 10000 for k in range(1, 10001)]
    return math.sqrt(sum((q(sim, p) - q(real, p)) ** 2 for p in ps) / len(ps))


class Loc:
    """Where a block lives: zone, physical sector in the zone, track, cylinder, head, angle."""

    def __init__(self, zi, phys, track, cyl, head, angle, bpt):
        self.zi, self.phys, self.track = zi, phys, track
        self.cyl, self.head, self.angle, self.bpt = cyl, head, angle, bpt


class Layout:
    """A drive's layout as ``disksim_layout`` places blocks (every sparing scheme), with the
    zones' first LBNs and sizes."""

    def __init__(self, d):
        self.d = d
        self.g = dl.Geometry.of(d)
        self.surf = d.surfaces
        self.zones = []
        starts = dl.zone_starts(self.g)
        for i, z in enumerate(d.zones):
            self.zones.append(dict(z=z, first=starts[i], lbns=starts[i + 1] - starts[i],
                                   bpt=z.blocks_per_track))
        self.total = starts[-1]
        self.starts = starts  # (the layout does not change: kept for every lookup)

    def zone_of(self, lbn):
        for i, zz in enumerate(self.zones):
            if lbn < zz["first"] + zz["lbns"]:
                return i
        return len(self.zones) - 1

    def phys(self, lbn):
        """(zone index, physical sector in the zone) of an LBN, DiskSim's way."""
        return dl.place(self.g, lbn, self.starts)

    def where(self, zi, p):
        bpt = self.zones[zi]["bpt"]
        cyl, head, sec = dl.chs(self.g, zi, p)
        return Loc(zi, p, p // bpt, cyl, head, dl.angle(self.g, zi, cyl, head, sec), bpt)

    def loc(self, lbn):
        return self.where(*self.phys(lbn))

    def track_lbns(self, lbn):
        """(first LBN on the block's track, one past the last), by scanning neighbours."""
        here = self.loc(lbn)
        lo = lbn
        while lo > 0:
            o = self.loc(lo - 1)
            if (o.zi, o.track) != (here.zi, here.track):
                break
            lo -= 1
        hi = lbn + 1
        while hi < self.total:
            o = self.loc(hi)
            if (o.zi, o.track) != (here.zi, here.track):
                break
            hi += 1
        return lo, hi


class RefDisk:
    """One drive, served one request at a time (see kernels/drive/hdd.py for the semantics)."""

    def __init__(self, d):
        self.d = d
        self.lay = Layout(d)
        self.rot = 60000.0 / d.rpm
        ov = d.overheads_ms
        c = d.cache
        self.ov = ov
        self.xr = max(d.bulk_sector_transfer_ms, d.bus_read_block_ms)
        self.xw = max(d.bulk_sector_transfer_ms, d.bus_write_block_ms)
        self.write_back = c["fast_write_level"] > 0
        self.cache_on = bool(c["enable_caching"])
        self.almost = bool(c.get("allow_almost_read_hits", 0))
        self.nseg = int(c["segments"])
        self.wseg = bool(c["separate_write_segment"]) and self.nseg > 1
        self.nwsegs = max(1, int(c["max_write_segments"]))
        # when each of the last write-back writes is on the platter: a write's data waits for
        # the oldest once every write segment holds one (DiskSim's wait for a segment)
        self.wring = [0.0] * min(self.nwsegs, 16)
        self.wnext = 0
        self.seg_size = int(c["segment_blocks"])
        self.ra_kind = int(c["buffer_continuous_read"]) if self.cache_on else 0
        self.max_ra = int(c["max_read_ahead_blocks"])
        self.ra_idle_hit = bool(c["read_ahead_on_idle_hit"])
        self.high_wm = c["high_water_mark"]
        self.wm_by_req = bool(c["watermark_by_request_size"])
        self.read_arrival = bool(c["read_any_free_blocks"] or c["immediate_buffer_read"])
        self.xd = bool(c["extra_write_disconnect"])
        self.queued = bool(c.get("queued_write_data", 0))
        # state
        self.if_free = 0.0  # when the last request's data phase left the interface
        self.cyl = self.head = 0
        self.free = 0.0
        self.prev_write = False
        self.prev_end = -1
        self.clock = 0
        self.segs = [[-1, -1, 0] for _ in range(self.nseg)]  # lo, hi, last use
        self.pf = None  # (segment, start time, cyl, head, first lbn, blocks)
        self.destage_seg = -1
        self.first_at = None  # the last request's first block under the head (None: buffered)
        self.first_from_ra = False  # ... and the read-ahead in progress read it
        self._cut = (None, None)  # position's last read-ahead cut: (its read-ahead and time, cut)

    # -- mechanics
    def seek(self, dist):
        d = self.d
        if d.seek_type.startswith("hpl"):
            x, a, b, c, e, _s = d.hpl_seek
            ten = d.first_ten_seeks_ms if d.seek_type == "hplplus10" else []
            return seek_hpl(x, a, b, c, e, ten, dist)
        return seek_curve(d.seek_curve, dist)

    def move(self, c0, h0, c1, h1, write):
        s = self.seek(abs(c1 - c0))
        if h1 != h0:
            s = max(s, self.d.head_switch_ms)
        if write and s > 0:
            s += self.d.write_settle_ms
        return s

    def wait(self, t, angle, bpt):
        turns = (angle / bpt - (t / self.rot) % 1.0) % 1.0
        w = turns * self.rot
        return 0.0 if w > self.rot - EPS else w

    def read_walk(self, t, c, h, lbn, n, cut=math.inf):
        """Block-by-block read: (blocks read, end or stop time, cyl, head, [end of each])."""
        ends = []
        prev = None
        for j in range(n):
            L = self.lay.loc(lbn + j)
            s = self.rot / L.bpt
            if prev is not None and L.zi == prev.zi and L.track == prev.track \
                    and L.phys == prev.phys + 1:
                start = t
            else:
                ts = t + self.move(c, h, L.cyl, L.head, False)
                c, h = L.cyl, L.head
                if cut < ts:
                    return j, ts, c, h, ends
                start = ts + self.wait(ts, L.angle, L.bpt)
                if cut < start:
                    return j, start, c, h, ends
            end = start + s
            if cut < end:
                return j, end, c, h, ends
            ends.append(end)
            t = end
            prev = L
        return n, t, c, h, ends

    def write_walk(self, t, c, h, lbn, n, mintime, x0, need):
        prev = None
        for j in range(n):
            L = self.lay.loc(lbn + j)
            s = self.rot / L.bpt
            if prev is not None and L.zi == prev.zi and L.track == prev.track \
                    and L.phys == prev.phys + 1:
                start = t
            else:
                mv = self.move(c, h, L.cyl, L.head, True)
                if prev is None:
                    mv = max(mv, mintime)
                ts = t + mv
                c, h = L.cyl, L.head
                start = ts + self.wait(ts, L.angle, L.bpt)
            avail = x0 + max(j + 1, need) * self.xw
            while start < avail - EPS:
                start += self.rot
            if j == 0:
                self.first_at = start
            t = start + s
            prev = L
        return t, c, h

    # -- cache
    def ra_limit(self, a, n):
        end = a + n
        total = self.lay.total
        if not self.cache_on or self.ra_kind == 0 or end >= total:
            return min(end, total)
        if self.ra_kind == 4:
            lo, hi = self.lay.track_lbns(end)
            if a < lo:
                hi += self.lay.zones[self.lay.zone_of(a)]["bpt"]
            return min(hi, total)
        lim = end + self.max_ra if self.max_ra > 0 else a + self.seg_size
        if self.ra_kind in (1, 2):
            last = self.lay.loc(end - 1)
            cyl_end = end
            while cyl_end < total:
                o = self.lay.loc(cyl_end)
                same = o.track == last.track if self.ra_kind == 1 else o.cyl == last.cyl
                if o.zi != last.zi or not same:
                    break
                cyl_end += 1
            lim = min(lim, cyl_end)
        return min(max(lim, end), total)

    def use(self, k, lo, hi):
        self.clock += 1
        self.segs[k] = [lo, hi, self.clock]

    def pick_read(self, a, n, pf):
        best, best_v, best_use, kind = -1, 0, math.inf, 0
        for k in range(self.nseg - (1 if self.wseg else 0)):
            lo, hi, use = self.segs[k]
            if hi <= lo:
                v, hk = 3, 0
            elif k == pf and a == hi and self.almost:  # an almost hit on the read-ahead
                v, hk = 5, 1
            elif not lo <= a < hi:
                v, hk = (1 if k == pf else 2), 0
            else:
                v = 9 if k == pf else (10 if k == self.destage_seg else 8)
                hk = 2
                if hi < a + n:
                    v, hk = v - 4, 1
            if v > best_v or (v == best_v and use < best_use):
                best, best_v, best_use, kind = k, v, use, hk
        return best, (kind if self.cache_on else 0)

    def pick_write(self, a, n, pf):
        if self.wseg:
            return self.nseg - 1
        best, best_v, best_use = 0, -1, math.inf
        for k in range(self.nseg):
            lo, hi, use = self.segs[k]
            if hi <= lo:
                v = 3
            elif k == pf:
                v = 1
            elif a < hi and lo < a + n:
                v = 4
            else:
                v = 2
            if v > best_v or (v == best_v and use < best_use):
                best, best_v, best_use = k, v, use
        return best

    def start_pf(self, seg, t, c, h, lbn, nblk):
        _k, t_end, ce, he, _e = self.read_walk(t, c, h, lbn, nblk)
        self.pf = (seg, t, c, h, lbn, nblk)
        self.free, self.cyl, self.head = t_end, ce, he

    def _ring_wait(self, x0, a):
        """When a write's data may come in: once a write segment is free (``wring``), unless
        it continues a stream of writes (which has its own bound)."""
        if self.nwsegs > 1 and not (self.prev_write and a == self.prev_end):
            return max(x0, self.wring[self.wnext])
        return x0

    # -- the scheduler's rank
    def position(self, t, q, a, n, write):
        """Shortest-positioning-time-first's rank of a request of ``n`` blocks at ``a`` queued
        since ``q``, were the drive to start it at ``t`` (ms): how long until its first block
        is under the head (kernels/drive/hdd.py, position_ms). The state is left as it is."""
        ov = self.ov
        tt = t + self.d.per_request_overhead_ms
        free, cyl, head = self.free, self.cyl, self.head
        L = self.lay.loc(a)
        pf = None
        going = False
        if self.pf is not None:
            pf, t0, c0, h0, lbn, nblk = self.pf
            got = nblk
            if tt < self.free:  # where the read-ahead is, and where it stops
                key = (self.pf, tt)  # (the walk block by block is slow: once per time asked)
                if self._cut[0] != key:
                    self._cut = (key, self.read_walk(t0, c0, h0, lbn, nblk, cut=tt)[:4])
                got, free, cyl, head = self._cut[1]
                going = True
        if not write and self.cache_on:
            for k in range(self.nseg - (1 if self.wseg else 0)):
                lo, hi, _u = self.segs[k]
                if k == pf:
                    hi = lbn + got
                    lo = max(lo, hi - self.seg_size)
                    if going and a == hi and self.almost:  # being read now: ends at ``free``
                        return free - self.rot / L.bpt - t
                if lo <= a < hi:
                    return 0.0
        after = "after write" if self.prev_write else "after read"
        x0 = -math.inf
        mintime = ov["minimum seek delay"] if write else 0.0
        if not write:
            start = tt + ov["read miss " + after]
        elif self.write_back:
            start = tt + ov["write hit " + after]
            x0 = start + ov["data preparation"]
            ds = self.destage_seg
            if pf is None and tt < self.free and ds >= 0:  # a destage is under way
                lo, hi, _u = self.segs[ds]
                if a == hi and a + n - lo <= self.seg_size:  # it goes on into this write
                    start, mintime = self.free, 0.0
                elif self.nwsegs <= 1:  # no room until it ends
                    x0 = max(x0, self.free)
                if not (a == hi and a + n - lo <= self.seg_size):
                    x0 = self._ring_wait(x0, a)
            else:
                x0 = self._ring_wait(x0, a)
        elif self.xd and self.prev_write and a != self.prev_end:
            start = tt + ov["extra disconnect command"] + ov["extra disconnect seek delta"]
            x0 = (tt + ov["extra disconnect command"] + ov["extra disconnect 1"]
                  + ov["extra disconnect interval"] + ov["first reselect"]
                  + ov["data preparation"])
        else:
            tw = tt
            if self.queued:  # its data came in once the link was free
                tw = min(tt, max(q + self.d.per_request_overhead_ms, self.if_free))
            start = tw + ov["write miss " + after]
            x0 = start + ov["data preparation"]
        if write:  # its first block is in one transfer later (HP: once 10 or 15 are)
            x0 += max(1, (min(n, 10) if n < 45 else 15) if self.xd else 1) * self.xw
        start = max(start, free)
        mv = max(self.move(cyl, head, L.cyl, L.head, write), mintime)
        ts = start + mv
        tr = ts + self.wait(ts, L.angle, L.bpt)
        while tr < x0 - EPS:  # its first block is not in the buffer yet: it comes round again
            tr += self.rot
        return tr - t

    # -- one request
    def service(self, t, a, n, write, queued=None):
        """Serve a request of ``n`` blocks at ``a`` that the drive starts at ``t`` (ms), having
        had it in its queue since ``queued`` (``t`` when not given): (completion, hit)."""
        tq = (t if queued is None else queued) + self.d.per_request_overhead_ms
        t += self.d.per_request_overhead_ms  # it reaches the controller this much later
        seq = a == self.prev_end
        prev_write = self.prev_write
        stop = (self.free, self.cyl, self.head)
        destaging = False
        pf = -1
        if self.pf is not None:
            seg, t0, c0, h0, lbn, nblk = self.pf
            got = nblk
            if t < self.free:
                got, st_t, st_c, st_h, _e = self.read_walk(t0, c0, h0, lbn, nblk, cut=t)
                stop = (st_t, st_c, st_h)
                pf = seg
            else:
                self.pf = None
            lo, hi = self.segs[seg][0], lbn + got
            self.segs[seg][0] = max(lo, hi - self.seg_size)
            self.segs[seg][1] = hi
        elif t < self.free:
            destaging = True
        else:
            self.destage_seg = -1
        if not write:
            done, hit = self._read(t, a, n, prev_write, pf, stop)
            self.if_free = done
        else:
            done, hit = self._write(t, tq, a, n, prev_write, seq, pf, stop, destaging), 0
        self.prev_end = a + n
        return done, hit

    def _read(self, t, a, n, prev_write, pf, stop):
        """A read arriving at ``t`` (the drive's own work as ``service`` found it):
        (completion, 1 if served from the cache)."""
        ov = self.ov
        hit = 0
        ov_miss = ov["read miss after write" if prev_write else "read miss after read"]
        ov_hit = ov["read hit after write" if prev_write else "read hit after read"]
        k, kind = self.pick_read(a, n, pf)
        lim = self.ra_limit(a, n)
        # when the request's first block is under the head (None: it is in the buffer already)
        self.first_at = None
        self.first_from_ra = False
        if pf >= 0 and (k != pf or kind == 0):  # stop the read-ahead
            self.pf = None
            self.free, self.cyl, self.head = stop
            pf = -1
        if kind == 2:
            hit = 1
            done = t + ov_hit + ov["data preparation"] + n * self.xr + ov["read completion"]
            lo, hi, _u = self.segs[k]
            self.use(k, lo, hi)
            if k == pf:
                seg, t0, c0, h0, lbn, nblk = self.pf
                if lim > lbn + nblk:
                    self.start_pf(seg, t0, c0, h0, lbn, lim - lbn)
            elif self.ra_idle_hit and hi < lim:
                self.start_pf(k, max(t + ov_miss, self.free), self.cyl, self.head, hi,
                              lim - hi)
        elif kind == 1 and k == pf:
            seg, t0, c0, h0, lbn, nblk = self.pf
            nblk = max(nblk, lim - lbn)
            _g, t_end, ce, he, ends = self.read_walk(t0, c0, h0, lbn, nblk)
            if a >= lbn and ends[a - lbn] > t:  # the read-ahead has yet to read it
                self.first_at = ends[a - lbn] - self.rot / self.lay.loc(a).bpt
                self.first_from_ra = True
            bus = t + ov_hit + ov["data preparation"]
            for j in range(a - lbn, a - lbn + n):
                # a block before the read-ahead's first one (j < 0) is in the segment already
                if j >= 0:
                    bus = max(bus, ends[j])
                bus += self.xr
            done = bus + ov["read completion"]
            lo, hi, _u = self.segs[k]
            self.use(k, lo, hi)
            self.pf = (seg, t0, c0, h0, lbn, nblk)
            self.free, self.cyl, self.head = t_end, ce, he
        else:
            lo, hi, _u = self.segs[k]
            start = max(t + ov_miss, self.free)
            if kind == 1:
                rd = hi
            else:
                rd = lo = a
            nblk = max(lim, a + n) - rd
            _g, t_end, ce, he, ends = self.read_walk(start, self.cyl, self.head, rd, nblk)
            if kind == 0:
                self.first_at = ends[0] - self.rot / self.lay.loc(a).bpt
            if kind == 1:
                bus = t + ov_hit + ov["data preparation"] + (rd - a) * self.xr
            else:
                if self.wm_by_req:
                    wm = max(1, int(min(self.seg_size, n) * self.high_wm))
                else:
                    wm = max(1, int(self.seg_size * self.high_wm + 0.9999999999))
                wm = min(wm, n)
                disc = ov["read disconnect after write" if prev_write
                          else "read disconnect after read"]
                bus = max(t + ov_miss + disc, ends[wm - 1]) + ov["first reselect"] \
                    + ov["data preparation"]
                if self.read_arrival and self.cache_on:
                    first = self.lay.loc(a)
                    ts = start + self.move(self.cyl, self.head, first.cyl, first.head, False)
                    # the sectors that pass before the first one wanted; a head that arrives
                    # at a sector's start (within EPS) reads that sector
                    ahead = int((self.wait(ts, first.angle, first.bpt) + EPS) / self.rot
                                * first.bpt)
                    lo = max(self.lay.track_lbns(a)[0], a - ahead)
            for j in range(a + n - rd):
                bus = max(bus, ends[j]) + self.xr
            done = bus + ov["read completion"]
            self.use(k, lo, rd)
            self.pf = (k, start, self.cyl, self.head, rd, nblk)
            self.free, self.cyl, self.head = t_end, ce, he
        self.prev_write = False
        return done, hit

    def _write(self, t, tq, a, n, prev_write, seq, pf, stop, destaging):
        """A write arriving at ``t`` (the drive's own work as ``service`` found it): its
        completion."""
        ov = self.ov
        k = self.pick_write(a, n, pf)
        if pf >= 0:
            self.pf = None
            self.free, self.cyl, self.head = stop
        mintime = ov["minimum seek delay"]
        seg_lo = a
        if self.write_back:
            ovw = ov["write hit after write" if prev_write else "write hit after read"]
            x0 = t + ovw + ov["data preparation"]
            media_at = t + ovw
            ds = self.destage_seg
            appends = (destaging and ds >= 0 and a == self.segs[ds][1]
                       and a + n - self.segs[ds][0] <= self.seg_size)
            if appends:  # into the segment being destaged, the media write goes on
                k, seg_lo, media_at, mintime = ds, self.segs[ds][0], self.free, 0.0
            elif destaging and self.nwsegs <= 1:
                x0 = max(x0, self.free)
            if self.nwsegs > 1 and not appends and not (prev_write and seq):
                x0 = max(x0, self.wring[self.wnext])
            done = x0 + n * self.xw + ov["write completion"]
        elif self.xd and prev_write and not seq:
            media_at = t + ov["extra disconnect command"] + ov["extra disconnect seek delta"]
            x0 = (t + ov["extra disconnect command"] + ov["extra disconnect 1"]
                  + ov["extra disconnect interval"] + ov["first reselect"]
                  + ov["data preparation"])
            disc, resel = ov["extra disconnect 2"], ov["other reselect"]
        else:
            if self.queued and tq < t:
                # a waiting write's command and data came in once the interface was free of
                # the request before it
                t = min(t, max(tq, self.if_free))
            ovw = ov["write miss after write" if prev_write else "write miss after read"]
            media_at = t + ovw
            x0 = t + ovw + ov["data preparation"]
            disc, resel = ov["write disconnect"], ov["first reselect"]
        need = (min(n, 10) if n < 45 else 15) if self.xd else 0
        t_end, ce, he = self.write_walk(max(media_at, self.free), self.cyl, self.head, a, n,
                                        mintime, x0, need)
        if not self.write_back:
            done = max(t_end, x0 + n * self.xw + disc) + resel + ov["write completion"]
            self.destage_seg = -1
            self.if_free = x0 + n * self.xw + disc
        else:
            self.destage_seg = k
            if prev_write and seq and self.nwsegs > 1:  # a stream: at most the segments wait
                bpt = self.lay.zones[self.lay.zone_of(a)]["bpt"]
                done = max(done, t_end - self.nwsegs * self.seg_size * self.rot / bpt)
            if self.nwsegs > 1:
                if appends:  # its segment's destage goes on
                    self.wring[(self.wnext - 1) % len(self.wring)] = t_end
                else:
                    self.wring[self.wnext] = t_end
                    self.wnext = (self.wnext + 1) % len(self.wring)
            self.if_free = done
        for j in range(self.nseg):
            lo, hi, _u = self.segs[j]
            if j != k and hi > lo and a < hi and lo < a + n:
                self.segs[j][0] = self.segs[j][1] = -1
        self.use(k, seg_lo, a + n)
        self.free, self.cyl, self.head = t_end, ce, he
        self.prev_write = True
        return done

def replay(d, requests):
    """Closed-loop replay of (lbn, blocks, write, idle_ms) requests: service times (ms)."""
    disk = RefDisk(d)
    t = 0.0
    out = []
    for lbn, n, w, idle in requests:
        done, _hit = disk.service(t, lbn, n, w)
        out.append(done - t)
        t = done + idle
    return out


def walk_requests(steps, a, total, points=(), pick=0):
    """Requests (lbn, blocks, write, idle_ms) from Hypothesis steps (kind, delta, blocks, write,
    idle_ms), starting at block ``a`` of a drive of ``total`` blocks: "seq" continues the last
    request, "near" starts ``delta`` blocks from its end, "far" jumps by a fixed hash, "slip"
    goes to one of ``points`` (when there are any); any other kind stays where the last request
    started. Every request is kept on the drive."""
    prev_end = a
    reqs = []
    for kind, delta, n, w, idle in steps:
        if kind == "seq":
            a = prev_end
        elif kind == "near":
            a = prev_end + delta
        elif kind == "far":
            a = (a * 7919 + delta * 104729 + 12345) % total
        elif kind == "slip" and points:
            a = points[(pick + delta) % len(points)]
        a = min(max(a, 0), total - n)
        reqs.append((a, n, w, idle))
        prev_end = a + n
    return reqs
