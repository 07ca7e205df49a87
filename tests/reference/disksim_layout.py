"""Plain-Python reference of where DiskSim 4.0 puts a drive's blocks: its ``dm_layout_g1``
layout (diskmodel/layout_g1.c, layout_g1_load.c and the manual's parameter section, read for
the facts only), for every sparing scheme (0-10) and LBN-to-PBN mapping (0-2). Written from
DiskSim's description, not from the kernel, and slowly: one slip at a time.

Four views of one layout:

- ``place``: the placement blocklab models, block by block (for the real drives).
- ``enumerate_zone``: the same placement by handing LBNs to a zone's sectors in order, a
  second and independent statement of it (for small drives).
- ``disksim_ltop``: DiskSim's own ``g1_ltop_*`` functions as they are, quirks included.
- ``disksim_ptol``: DiskSim's ``g1_ptol_*`` for the per-cylinder schemes (the inverse map).

and ``angle``: DiskSim's ``g1_map_pbn_skew``, the first sector's place on the track.

The placement is DiskSim's ``g1_ltop_*`` except where those are not a placement at all (two
blocks on one sector, a block on a slipped sector) or contradict the scheme's definition:

- scheme 0: ``g1_ltop_nosparing`` fills a local copy and returns the caller's ``pbn``
  untouched; the placement is the one ``g1_ptol_nosparing`` inverts (blocks in order).
- schemes 2, 4, 5, 6, 7 (``g1_ltop_sectpercylspare``): after adding the slips, a block pushed
  past the cylinder's last data sector is moved to the next cylinder without counting that
  cylinder's slips. In scheme 2 that puts it on the next cylinder's first block's sector,
  where ``g1_ptol_sectpercylspare`` (and the scheme: "spare sectors at the end of each
  cylinder", which the slipped sectors use) put it in the cylinder's first spare sector; the
  placement follows ptol. In the slip-to-end schemes the placement counts every slip.
- slips counted in ascending order: DiskSim's loops take them in the order the ``.model``
  lists them, and where a list is not ascending (the Quantum Atlas III's) the per-cylinder
  ltop can put a block on a slipped sector.
- schemes 5 and 6 ("spare sectors at the front of each cylinder"): ``g1_ltop`` ignores the
  front and places them like 2 and 4; ``g1_ptol`` puts the spares at the front. The placement
  puts them at the front. In scheme 5 a cylinder's slipped sectors use its spares: its blocks
  start ``spares - slips`` sectors into it (ptol has no room for a block a slip pushes).
"""

from __future__ import annotations

import dataclasses

TO_END = (4, 6, 7)  # slipped sectors push blocks to the end of the zone
PER_CYL = (2, 4, 5, 6)  # DiskSim's issectpercyl()


@dataclasses.dataclass
class Zone:
    first_cyl: int
    last_cyl: int
    bpt: int
    spares: int = 0
    slips: list[int] = dataclasses.field(default_factory=list)  # zone-relative sectors/tracks
    dead: int = 0  # "Empty space at zone front"
    offset: int = 0
    tskew: int = 0
    cskew: int = 0

    @property
    def cyls(self) -> int:
        return self.last_cyl - self.first_cyl + 1


@dataclasses.dataclass
class Geometry:
    surfaces: int
    mapping: int  # 0 normal, 1 and 2 cylinder switch on surface
    scheme: int  # sparing scheme 0-10
    rangesize: int
    zones: list[Zone]

    @classmethod
    def of(cls, d) -> Geometry:
        """The layout of an imported ``DiskSimDrive``."""
        return cls(d.surfaces, d.mapping_scheme, d.sparing_scheme,
                   d.range_size_for_sparing,
                   [Zone(z.first_cylinder, z.last_cylinder, z.blocks_per_track, z.spares,
                         list(z.slips), z.empty_front, int(z.offset_of_first_block),
                         int(z.track_skew), int(z.cylinder_skew)) for z in d.zones])


def blocks_in_zone(g: Geometry, z: Zone) -> int:
    """DiskSim's ``dm_layout_g1_compute_blksinband``."""
    n = z.cyls * z.bpt * g.surfaces - z.dead
    s = g.scheme
    if s == 1:
        return n - z.spares * z.bpt
    if s == 3:
        return n - z.spares * z.cyls * g.surfaces
    if s == 7:
        return n - len(z.slips)
    if s == 9:
        return n - z.spares
    if s == 10:
        return n - z.spares - len(z.slips)
    if s in (2, 5):
        return n - z.spares * z.cyls
    if s in (4, 6):
        return n - z.spares * z.cyls - len(z.slips)
    if s == 8:
        return n - z.spares * (z.cyls // g.rangesize)
    return n


def zone_starts(g: Geometry) -> list[int]:
    out, first = [], 0
    for z in g.zones:
        out.append(first)
        first += blocks_in_zone(g, z)
    return out + [first]


def total_blocks(g: Geometry) -> int:
    return zone_starts(g)[-1]


def _zone_of(g: Geometry, lbn: int, starts: list[int] | None = None) -> tuple[int, int]:
    """(zone index, offset in the zone counted from its first sector: the LBN's offset plus
    the empty space at the zone's front). ``starts``: ``zone_starts(g)``, when the caller keeps
    it (it walks every zone)."""
    if starts is None:
        starts = zone_starts(g)
    for i, z in enumerate(g.zones):
        if lbn < starts[i + 1] or i == len(g.zones) - 1:
            return i, lbn - starts[i] + z.dead
    raise AssertionError


def _range(g: Geometry, z: Zone) -> tuple[int, int]:
    """(sectors of a sparing range, LBNs in a full range) of a range-sparing scheme."""
    bpc = z.bpt * g.surfaces
    s = g.scheme
    if s == 3:
        return z.bpt, z.bpt - z.spares
    if s in (2, 5):
        return bpc, bpc - z.spares
    if s == 8:
        return bpc * g.rangesize, bpc * g.rangesize - z.spares
    whole = z.cyls * bpc  # 0, 9, 10: the zone is one range
    return whole, blocks_in_zone(g, z) + z.dead


def _data_range(g: Geometry, z: Zone) -> tuple[int, int]:
    """(first data sector of a cylinder, data sectors per cylinder) of a slip-to-end scheme."""
    bpc = z.bpt * g.surfaces
    if g.scheme == 7:
        return 0, bpc
    return (z.spares if g.scheme == 6 else 0), bpc - z.spares


def place(g: Geometry, lbn: int, starts: list[int] | None = None) -> tuple[int, int]:
    """(zone index, zone-relative physical sector) of an LBN: slips counted one by one, as
    DiskSim's ``g1_ltop_*`` count them (``starts`` as for ``_zone_of``)."""
    zi, off = _zone_of(g, lbn, starts)
    z = g.zones[zi]
    s = g.scheme
    slips = sorted(z.slips)
    if s == 0:
        return zi, off
    if s == 1:  # spare tracks; a slipped track pushes the later ones on
        trk, sec = divmod(off, z.bpt)
        for sl in slips:
            if sl <= trk:
                trk += 1
        return zi, trk * z.bpt + sec
    bpc = z.bpt * g.surfaces
    if s in TO_END:  # the zone's data sectors in order, less the slipped ones
        fr, per = _data_range(g, z)
        k = off
        for sl in slips:  # (the model refuses slips in a cylinder's spare sectors)
            c, r = divmod(sl, bpc)
            if c * per + r - fr <= k:
                k += 1
        c, r = divmod(k, per)
        return zi, c * bpc + fr + r
    size, per = _range(g, z)
    rng, x = divmod(off, per)
    start = rng * size
    if s == 5:  # the cylinder's slips use its front spares
        start += z.spares - sum(1 for sl in slips if rng * size <= sl < (rng + 1) * size)
    pos = start + x
    for sl in slips:
        if start <= sl <= pos:
            pos += 1
    return zi, pos


def enumerate_zone(g: Geometry, zi: int) -> list[int]:
    """Zone-relative physical sector of each of the zone's LBNs (index: LBN offset in the
    zone, the empty space at its front not counted), found by walking the zone's sectors (or
    tracks) in order and giving the next LBN to every sector that holds data."""
    z = g.zones[zi]
    s = g.scheme
    bpc = z.bpt * g.surfaces
    n = z.cyls * bpc
    want = blocks_in_zone(g, z) + z.dead
    slipped = set(z.slips) if s != 0 else set()
    out: list[int] = []
    if s == 1:
        for trk in range(z.cyls * g.surfaces):
            if trk not in slipped:
                out.extend(range(trk * z.bpt, (trk + 1) * z.bpt))
    elif s in TO_END:
        fr, per = _data_range(g, z)
        out = [q for q in range(n) if fr <= q % bpc < fr + per and q not in slipped]
    else:
        size, per = _range(g, z)
        for lo in range(0, n, size):
            hi = min(lo + size, n)
            start = lo
            if s == 5:
                start += z.spares - sum(1 for q in range(lo, hi) if q in slipped)
            data = [q for q in range(start, hi) if q not in slipped]
            out.extend(data[:per])
    assert len(out) >= want, (zi, len(out), want)
    return out[z.dead:want]


def chs(g: Geometry, zi: int, q: int) -> tuple[int, int, int]:
    """(cylinder, head, sector) of zone-relative physical sector ``q``."""
    z = g.zones[zi]
    cz, rest = divmod(q, z.bpt * g.surfaces)
    trk, sec = divmod(rest, z.bpt)
    cyl = z.first_cyl + cz
    return cyl, _surface(g, z, cyl, trk), sec


def _surface(g: Geometry, z: Zone, cyl: int, trk: int) -> int:
    """DiskSim's ``g1_surfno_on_cyl``: the head of the cylinder's ``trk``-th track (and,
    applied to a head, the track it holds)."""
    if (g.mapping == 1 and (cyl - z.first_cyl) % 2) or (g.mapping == 2 and cyl % 2):
        return g.surfaces - 1 - trk
    return trk


def angle(g: Geometry, zi: int, cyl: int, head: int, sector: int) -> int:
    """DiskSim's ``g1_map_pbn_skew`` in whole sectors: where on the track (sectors from the
    index) physical sector ``sector`` of (cyl, head) starts. Track and cylinder skews count
    from the zone's start; with sectors spared per cylinder (schemes 2, 4, 5, 6) or per track
    (3), every slip of the zone before the track's cylinder (3: before the track) turns it on
    by one more sector."""
    z = g.zones[zi]
    cz = cyl - z.first_cyl
    trk = _surface(g, z, cyl, head)
    a = z.offset + (trk + (g.surfaces - 1) * cz) * z.tskew + cz * z.cskew + sector
    if g.scheme in PER_CYL or g.scheme == 3:
        tracks = cz * g.surfaces + (head if g.scheme == 3 else 0)
        a += sum(1 for sl in z.slips if sl < tracks * z.bpt)
    return a % z.bpt


def disksim_ltop(g: Geometry, lbn: int) -> tuple[int, int, int, bool]:
    """DiskSim's ``g1_ltop_*`` (``MAP_ADDSLIPS``) as written: (cylinder, head, sector, whether
    the per-cylinder function moved the block on to the next cylinder after adding slips).
    Scheme 0 gives the placement ``g1_ltop_nosparing`` computes into its local copy."""
    zi, off = _zone_of(g, lbn)
    z = g.zones[zi]
    s = g.scheme
    bpt, surf = z.bpt, g.surfaces
    bpc = bpt * surf
    moved = False
    if s == 0:
        cyl, trk, sec = off // bpc, (off // bpt) % surf, off % bpt
    elif s == 1:
        trk = off // bpt
        for sl in z.slips:  # in the order listed, as DiskSim loops
            if sl <= trk:
                trk += 1
        cyl, trk, sec = trk // surf, trk % surf, off % bpt
    elif s == 3:
        per = bpt - z.spares
        trk, x = divmod(off, per)
        first = trk * bpt
        for sl in z.slips:
            if sl >= first and sl - first <= x:
                x += 1
        assert x < bpt, "DiskSim asserts: a block slipped off its track"
        cyl, trk, sec = trk // surf, trk % surf, x
    elif s in (2, 4, 5, 6, 7):  # g1_ltop_sectpercylspare
        per = bpc - z.spares
        cyl, x = divmod(off, per)
        first = cyl * bpc
        n = 0
        for sl in z.slips:
            if (s in TO_END and sl // bpc < cyl) or (sl >= first and sl - first <= x + n):
                n += 1
        x += n
        moved = x >= per
        cyl += x // per
        x %= per
        trk, sec = divmod(x, bpt)
    elif s == 8:
        size = bpc * g.rangesize
        per = size - z.spares
        rng, x = divmod(off, per)
        first = rng * size
        n = 0
        for sl in z.slips:
            if sl >= first and sl - first <= x + n:
                n += 1
        x += n
        cyl = rng * g.rangesize + x // bpc
        trk, sec = divmod(x % bpc, bpt)
    else:  # 9, 10: g1_ltop_sectperzonespare
        n = 0
        for sl in z.slips:
            if sl <= off + n:
                n += 1
        x = off + n
        cyl = x // bpc
        trk, sec = divmod(x % bpc, bpt)
    c = z.first_cyl + cyl
    return c, _surface(g, z, c, trk), sec, moved


def disksim_ptol(g: Geometry, cyl: int, head: int, sector: int) -> int | None:
    """DiskSim's ``g1_ptol_sectpercylspare`` (schemes 2, 4, 5, 6, 7): the LBN stored in a
    physical sector, or None for a slipped sector or an unused spare."""
    assert g.scheme in (2, 4, 5, 6, 7)
    starts = zone_starts(g)
    zi = next(i for i, z in enumerate(g.zones) if z.first_cyl <= cyl <= z.last_cyl)
    z = g.zones[zi]
    front = g.scheme in (5, 6)
    bpc = z.bpt * g.surfaces
    per = bpc - z.spares
    lbn = starts[zi]
    trk = _surface(g, z, cyl, head)
    q = (cyl - z.first_cyl) * bpc + trk * z.bpt + sector
    for sl in reversed(z.slips):
        if q == sl:
            return None
        if q > sl:
            if sl // bpc == cyl - z.first_cyl:
                q -= 1
            elif g.scheme in TO_END:
                lbn -= 1
    if (not front and q % bpc >= per) or (front and q % bpc < z.spares):
        return None
    lbn += (q // bpc) * per + q % bpc - z.dead - (z.spares if front else 0)
    return lbn if lbn >= 0 else None
