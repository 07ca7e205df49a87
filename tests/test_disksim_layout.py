"""Every DiskSim 4.0 sparing scheme (0-10) and LBN-to-PBN mapping (0-2): the HDD kernel places
each block where the plain-Python reference of DiskSim's layout does (tests/reference/
disksim_layout.py), on small drives of every shape (every block, Hypothesis) and on the real
drives of DiskSim's valid/ folder; and the reference's placement is DiskSim's own ``g1_ltop``
wherever that is a placement at all."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blocklab.kernels.drive import hdd as H
from blocklab.pipeline.model.disksim_params import DiskSimDrive, ParamError, Zone, read_drive
from blocklab.pipeline.model.drive_params import drive_params

from .reference import disksim_layout as dl
from .reference.hdd import Layout
from .valid_drives import IN_SHARED, VALID, valid_path


def _drive(g: dl.Geometry) -> DiskSimDrive:
    """A DiskSimDrive of the geometry ``g`` (mechanics and cache do not matter here)."""
    zones = [Zone(first_cylinder=z.first_cyl, last_cylinder=z.last_cyl, blocks_per_track=z.bpt,
                  offset_of_first_block=z.offset, track_skew=z.tskew, cylinder_skew=z.cskew,
                  spares=z.spares, slips=list(z.slips), defects=[], empty_front=z.dead)
             for z in g.zones]
    cache = {"segments": 1.0, "segment_blocks": 64.0, "max_write_segments": 1.0}
    for k in ("enable_caching", "buffer_continuous_read", "max_read_ahead_blocks",
              "fast_write_level", "read_any_free_blocks", "immediate_buffer_read",
              "allow_almost_read_hits", "separate_write_segment", "read_ahead_on_idle_hit",
              "high_water_mark", "watermark_by_request_size", "extra_write_disconnect"):
        cache[k] = 0.0
    return DiskSimDrive(
        name="synthetic", source="synthetic.parv", block_count=dl.total_blocks(g),
        surfaces=g.surfaces, cylinders=g.zones[-1].last_cyl + 1, rpm=7200.0,
        head_switch_ms=0.5, single_cylinder_seek_ms=1.0, full_strobe_seek_ms=10.0,
        write_settle_ms=0.0, seek_curve=[(1, 1.0), (100, 10.0)], seek_type="extracted",
        hpl_seek=[], first_ten_seeks_ms=[], access_time_type="trackSwitchPlusRotation",
        mapping_scheme=g.mapping, sparing_scheme=g.scheme, range_size_for_sparing=g.rangesize,
        zones=zones, overheads_ms={k: 0.0 for k in (
            "read hit after read", "read hit after write", "read miss after read",
            "read miss after write", "write hit after read", "write hit after write",
            "write miss after read", "write miss after write", "read completion",
            "write completion", "data preparation", "first reselect", "other reselect",
            "read disconnect after read", "read disconnect after write", "write disconnect",
            "extra disconnect command", "extra disconnect 1", "extra disconnect interval",
            "extra disconnect 2", "extra disconnect seek delta", "minimum seek delay")},
        bulk_sector_transfer_ms=0.1, per_request_overhead_ms=0.0, cache=cache)


@st.composite
def geometries(draw, scheme=None):
    """Small drives of every sparing scheme: 1-3 zones of 1-5 cylinders, 1-3 surfaces, 2-9
    sectors per track, spares and slips where the scheme has them (as many slips in a range
    as it has spares when slips use the range's spares), empty space at zone fronts, skews."""
    s = draw(st.integers(0, 10)) if scheme is None else scheme
    surf = draw(st.integers(1, 3))
    rangesize = draw(st.integers(1, 3)) if s == 8 else 1
    zones = []
    cyl = 0
    for _ in range(draw(st.integers(1, 3))):
        cyls = draw(st.integers(1, 5))
        bpt = draw(st.integers(2, 9))
        bpc = bpt * surf
        n = cyls * bpc
        unit = {1: surf * cyls, 2: bpc, 3: bpt, 4: bpc, 5: bpc, 6: bpc, 8: bpc * rangesize,
                9: n, 10: n}.get(s)
        spares = draw(st.integers(0, max(0, min(unit - 1, 4)))) if unit else 0
        if s == 8 and cyls % rangesize:  # a last, shorter range fits in a full one's blocks
            spares = min(spares, (rangesize - cyls % rangesize) * bpc)
        if s == 1:
            slips = sorted(draw(st.sets(st.integers(0, surf * cyls - 1), max_size=spares)))
        elif s == 0:
            slips = []
        else:
            pool = sorted(draw(st.sets(st.integers(0, n - 1), max_size=6)))
            if s in (4, 6):  # slips in a cylinder's data sectors (the model refuses others)
                fr = spares if s == 6 else 0
                pool = [q for q in pool if fr <= q % bpc < fr + bpc - spares]
            if s in (2, 3, 5, 8, 9):  # slips use the range's spares: no more than it has
                per: dict[int, int] = {}
                slips = []
                full = n // unit  # (scheme 8: a last, shorter range has no spares)
                for q in pool:
                    r = q // unit
                    if per.get(r, 0) < (spares if r < full else 0):
                        per[r] = per.get(r, 0) + 1
                        slips.append(q)
            else:
                slips = pool
        z = dl.Zone(cyl, cyl + cyls - 1, bpt, spares, slips, 0,
                    draw(st.integers(0, bpt - 1)), draw(st.integers(0, bpt - 1)),
                    draw(st.integers(0, bpt - 1)))
        g1 = dl.Geometry(surf, 0, s, rangesize, [z])
        while z.slips and dl.blocks_in_zone(g1, z) < 1:  # a zone holds a block at least
            z.slips.pop()
        z.dead = draw(st.integers(0, max(0, min(dl.blocks_in_zone(g1, z) - 1, bpt + 2))))
        zones.append(z)
        cyl += cyls
    return dl.Geometry(surf, draw(st.integers(0, 2)), s, rangesize, zones)


def _check_kernel(g: dl.Geometry) -> None:
    """The kernel's block -> (cylinder, head, angle) and track bounds against the reference
    for every block of ``g``, and the reference's two placements against each other."""
    p, zones, _cd, _ct = drive_params(_drive(g))
    total = dl.total_blocks(g)
    assert int(H.unpack(p)["blocks"]) == total
    starts = dl.zone_starts(g)
    placed = []
    for zi in range(len(g.zones)):
        walk = dl.enumerate_zone(g, zi)
        assert len(walk) == starts[zi + 1] - starts[zi]
        for i, q in enumerate(walk):
            assert dl.place(g, starts[zi] + i) == (zi, q), (starts[zi] + i, g)
            placed.append((zi, q))
    assert len(set(placed)) == total  # no two blocks on one sector
    bpts = [z.bpt for z in g.zones]
    for lbn, (zi, q) in enumerate(placed):
        cyl, head, sec = dl.chs(g, zi, q)
        assert head < g.surfaces and g.zones[zi].first_cyl <= cyl <= g.zones[zi].last_cyl
        got = H.locate(p, zones, lbn)
        assert got[:2] == (cyl, head) and got[3] == bpts[zi], (lbn, got, (cyl, head), g)
        a = dl.angle(g, zi, cyl, head, sec)
        assert got[2] == pytest.approx(a / bpts[zi], abs=1e-12), (lbn, g)
    # the blocks of each track, the reference's way: neighbours on the same track
    track = [(zi, q // bpts[zi]) for zi, q in placed]
    for lbn in range(total):
        lo = lbn
        while lo > 0 and track[lo - 1] == track[lbn]:
            lo -= 1
        hi = lbn + 1
        while hi < total and track[hi] == track[lbn]:
            hi += 1
        assert H.track_bounds(p, zones, lbn) == (lo, hi), (lbn, g)


@pytest.mark.parametrize("scheme", range(11))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_kernel_places_every_block_as_the_reference(scheme, data):
    _check_kernel(data.draw(geometries(scheme)))


@pytest.mark.parametrize("scheme", range(11))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_reference_is_disksims_ltop(scheme, data):
    """The reference's placement is DiskSim's ``g1_ltop_*`` for every block DiskSim's function
    places on a sector of its own (not a slipped one, not another block's), outside the
    documented exceptions (the reference module's docstring): the front spares of 5 and 6
    (ltop ignores them: there ``g1_ptol`` is compared) and blocks ltop moves on to the next
    cylinder. Without slips, ltop places every block on a sector of its own."""
    g = data.draw(geometries(scheme))
    total = dl.total_blocks(g)
    ltop = [dl.disksim_ltop(g, lbn) for lbn in range(total)]
    mine = [dl.chs(g, *dl.place(g, lbn)) for lbn in range(total)]
    seen: dict[tuple[int, int, int], int] = {}
    no_slips = all(not z.slips for z in g.zones)
    for c, h, s, m in ltop:
        if not m or no_slips:
            seen[(c, h, s)] = seen.get((c, h, s), 0) + 1
    slipped = set()
    if scheme != 0:
        for zi, z in enumerate(g.zones):
            for sl in z.slips:
                if scheme == 1:
                    slipped |= {dl.chs(g, zi, sl * z.bpt + k) for k in range(z.bpt)}
                else:
                    slipped.add(dl.chs(g, zi, sl))
    for lbn in range(total):
        c, h, s, moved = ltop[lbn]
        if scheme in (5, 6) and any(z.spares for z in g.zones):
            break
        if moved and not no_slips:
            continue  # moved to the next cylinder without counting its slips
        if seen[(c, h, s)] > 1 or (c, h, s) in slipped:
            assert not no_slips, (lbn, ltop[lbn], g)
            continue  # DiskSim's ltop is no placement here: two blocks or a slipped sector
        assert mine[lbn] == (c, h, s), (lbn, g)
    if scheme in (2, 4, 5, 6, 7):
        # DiskSim's inverse map: every sector it gives an LBN holds that LBN, in each cylinder
        # without slips (scheme 5's ptol has no room for a block that a slip pushes; in the
        # slip-to-end schemes a cylinder's own slips push its blocks into its spares in ptol
        # and to the zone's end in ltop and in the placement)
        where = {m: lbn for lbn, m in enumerate(mine)}
        starts = dl.zone_starts(g)
        for zi, z in enumerate(g.zones):
            bpc = z.bpt * g.surfaces
            for cz in range(z.cyls):
                if any(sl // bpc == cz for sl in z.slips):
                    continue
                for k in range(bpc):
                    cyl, head, sec = dl.chs(g, zi, cz * bpc + k)
                    lbn = dl.disksim_ptol(g, cyl, head, sec)
                    # (DiskSim finds a later zone's empty front space to be no block only
                    # when the LBN it computes is negative)
                    if lbn is not None and starts[zi] <= lbn < starts[zi + 1]:
                        assert where.get((cyl, head, sec)) == lbn, ((cyl, head, sec), g)


def test_scheme_2_slip_uses_the_cylinders_spare():
    """The one case where DiskSim's ``g1_ltop_sectpercylspare`` puts two blocks on a sector:
    a cylinder's slip pushes its last block to the next cylinder's first sector; ptol and the
    scheme put it in the cylinder's spare sector, and so does the model."""
    z = dl.Zone(0, 1, 4, spares=1, slips=[2])  # 1 surface, 4 sectors, 3 blocks per cylinder
    g = dl.Geometry(1, 0, 2, 1, [z])
    assert [dl.disksim_ltop(g, b)[:3] for b in range(4)] == [
        (0, 0, 0), (0, 0, 1), (1, 0, 0), (1, 0, 0)]
    assert [dl.chs(g, *dl.place(g, b)) for b in range(4)] == [
        (0, 0, 0), (0, 0, 1), (0, 0, 3), (1, 0, 0)]
    assert dl.disksim_ptol(g, 0, 0, 3) == 2
    _check_kernel(g)


@pytest.mark.parametrize("name", list(VALID))
def test_valid_drives_layout(name, request):
    """The real drives of DiskSim's valid/ folder: the kernel against the reference at zone
    edges, around every slip, and on a long stretch and random blocks; and DiskSim's own
    ltop gives the same sectors outside its documented exceptions."""
    if name in IN_SHARED:
        request.getfixturevalue("shared")  # skips without the shared folder
    d = read_drive(valid_path(name))
    p, zones, _cd, _ct = drive_params(d)
    g = dl.Geometry.of(d)
    lay = Layout(d)
    total = dl.total_blocks(g)
    assert int(H.unpack(p)["blocks"]) == total
    assert abs(total - d.block_count) <= 0.03 * d.block_count  # DiskSim counts its own
    rng = np.random.default_rng(7)
    lbns = set(rng.integers(0, total, 300).tolist())
    starts = dl.zone_starts(g)
    for zi, z in enumerate(g.zones):
        lbns |= {starts[zi], starts[zi] + 1, starts[zi + 1] - 1}
        for i, sl in enumerate(z.slips[:40]):
            unit = z.bpt if g.scheme == 1 else 1
            guess = starts[zi] + (sl - i) * unit - z.dead
            lbns |= {x for x in range(guess - 3, guess + 3) if 0 <= x < total}
    s0 = int(rng.integers(0, total - 3000))
    lbns |= set(range(s0, s0 + 3000))
    # DiskSim's ltop on the slips in ascending order (its loops take them in the listed
    # order: the Atlas III lists some out of order, see the reference's docstring)
    gs = dl.Geometry.of(d)
    for z in gs.zones:
        z.slips.sort()
    slipped = set()
    if g.scheme not in (0, 1):
        for zi, z in enumerate(g.zones):
            slipped |= {dl.chs(g, zi, sl) for sl in z.slips}
    agree = 0
    for lbn in sorted(lbns):
        loc = lay.loc(lbn)
        cyl, head, frac, bpt = H.locate(p, zones, lbn)
        assert (cyl, head, bpt) == (loc.cyl, loc.head, loc.bpt), lbn
        assert frac == pytest.approx(loc.angle / loc.bpt, abs=1e-12), lbn
        c, h, s, m = dl.disksim_ltop(gs, lbn)
        if (m and any(z.slips for z in g.zones)) or (c, h, s) in slipped:
            continue  # DiskSim's ltop moved it on, or put it on a slipped sector
        assert (c, h, s) == (loc.cyl, loc.head, loc.phys % loc.bpt), (lbn, (c, h, s))
        agree += 1
    assert agree > 0.99 * len(lbns)


def test_remapped_defects_and_bad_schemes_are_refused():
    z = dl.Zone(0, 1, 8, spares=1, slips=[])
    d = _drive(dl.Geometry(2, 0, 2, 1, [z]))
    d.zones[0].defects = [5, 5]  # remapped to itself: as if none (DiskSim skips it)
    drive_params(d)
    d.zones[0].defects = [5, 15]
    with pytest.raises(ParamError, match=r"synthetic.parv: zone 1 \(cylinders 0-1\): defects "
                                         r"remapped to another sector are not modelled"):
        drive_params(d)
    d.zones[0].defects = []
    d.sparing_scheme = 11
    with pytest.raises(ParamError, match="sparing scheme 11 is not one of DiskSim's"):
        drive_params(d)
    d.sparing_scheme = 7
    with pytest.raises(ParamError, match="sparing scheme 7 keeps its spares at the end"):
        drive_params(d)
    d.sparing_scheme = 3
    d.zones[0].spares = 8
    with pytest.raises(ParamError, match="8 spares do not fit a sparing range of 8 sectors"):
        drive_params(d)
