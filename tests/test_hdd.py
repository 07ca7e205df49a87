"""The HDD model: its layout, mechanics and service against the plain-Python reference, DiskSim
4.0's own service times, invariants of a replay, and fidelity on DiskSim's four validated drives
(the demerit figure against DiskSim's own)."""

from __future__ import annotations

import copy
import json
import lzma
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.kernels.drive import hdd as H
from blocklab.kernels.drive.hdd_geometry import _SEEK_COUNT_MAX
from blocklab.pipeline.cli import app
from blocklab.pipeline.model.disksim_params import ParamError, read_drive
from blocklab.pipeline.model.drive_params import drive_params
from blocklab.pipeline.validate import (
    PARTS,
    demerit,
    validate_disksim,
    without_parts,
)

from .reference import hdd as ref
from .valid_drives import read_trace

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

# DiskSim 4.0's demerits on these traces (../shared/validation/disksim/README.md)
DISKSIM = {"cheetah9LP": 0.107, "atlas10k": 0.268, "barracuda": 0.348, "hp_c2247a": 0.090}
DATA = Path(__file__).resolve().parent / "data" / "disksim"
_DRIVES: dict = {}


def _copy(disk):
    """A copy of reference drive ``disk`` as it is now, sharing its layout (which
    takes most of a ``RefDisk``'s construction)."""
    fresh = copy.copy(disk)
    fresh.segs = [list(x) for x in disk.segs]
    fresh.wring = list(disk.wring)
    return fresh


def _drive(shared, name):
    if name not in _DRIVES:
        d = read_drive(shared / "validation" / "disksim" / f"{name}.parv")
        _DRIVES[name] = (d, drive_params(d))
    return _DRIVES[name]


def _trace(shared, name):
    return read_trace(shared / "validation" / "disksim" / f"{name}.trace")


def _replay(params, lbn, n, w, idle):
    p, zones, cd, ct = params
    out = np.zeros(len(lbn))
    H.replay_closed(p, zones, cd, ct, H.new_state(), lbn, n, w, idle, out)
    return out


@pytest.mark.parametrize("name", list(DISKSIM))
def test_seek_matches_reference(shared, name):
    d, (p, _zones, cd, ct) = _drive(shared, name)
    rng = np.random.default_rng(1)
    for dist in [0, 1, 2, 9, 10, 11, 299, 300, 301, d.cylinders - 1, d.cylinders + 50,
                 *rng.integers(1, d.cylinders, 50).tolist()]:
        if d.seek_type == "extracted":
            want = ref.seek_curve(d.seek_curve, dist)
        else:
            x, a, b, c, e, _s = d.hpl_seek
            want = ref.seek_hpl(x, a, b, c, e, d.first_ten_seeks_ms, dist)
        assert H.seek_ms(p, cd, ct, dist) == pytest.approx(want, abs=1e-9)


def test_the_seek_table_is_the_curve_to_the_last_bit():
    """Every catalog drive's seek table (the time of each distance, after the curve's own
    times) holds what the curve alone gives, bit for bit, for every distance it covers; past
    its end, and on drives with more cylinders than it holds, the curve is searched as
    before."""
    from blocklab.pipeline.model import catalog

    drives = [m.hdd for m in map(catalog.model, catalog.names()) if m.hdd is not None]
    assert any(len(h.seek_ms) - len(h.seek_cyl) == H.SEEK_TABLE_MAX for h in drives)
    assert any(len(h.seek_ms) - len(h.seek_cyl) < H.SEEK_TABLE_MAX for h in drives)
    for p, _zones, cd, ct in drives:
        curve = ct[:len(cd)].copy()
        n = len(ct) - len(cd)
        assert n > 1 and ct[len(cd)] == 0.0
        for dist in range(n + 3):
            assert H.seek_ms(p, cd, ct, dist) == H.seek_ms(p, cd, curve, dist), dist


def test_seek_long_curve_matches_reference():
    """A measured curve longer than the kernel searches by counting is bisected: the same
    interpolation as the reference at points, between them and past the end."""
    rng = np.random.default_rng(5)
    ds = np.unique(rng.integers(1, 50_000, _SEEK_COUNT_MAX * 3))
    ts = np.sort(rng.uniform(0.5, 15.0, len(ds)))
    curve = list(zip(ds.tolist(), ts.tolist(), strict=True))
    p = np.zeros(H.P_N)
    for n in (_SEEK_COUNT_MAX, _SEEK_COUNT_MAX + 1, len(ds)):
        cd, ct = ds[:n].astype(np.int64), ts[:n].copy()
        for dist in [0, 1, int(cd[0]), int(cd[1]), int(cd[n // 2]), int(cd[n // 2]) + 1,
                     int(cd[-2]), int(cd[-1]), int(cd[-1]) + 77,
                     *rng.integers(1, int(cd[-1]), 200).tolist()]:
            assert H.seek_ms(p, cd, ct, dist) == pytest.approx(ref.seek_curve(curve[:n], dist),
                                                               abs=1e-9)


@pytest.mark.parametrize("name", list(DISKSIM))
def test_layout_matches_reference(shared, name):
    """Block to (cylinder, head, angle) as the reference maps it, one slip at a time; every
    block at zone starts and ends and around every slip, and random ones."""
    d, (p, zones, _cd, _ct) = _drive(shared, name)
    lay = ref.Layout(d)
    assert int(H.unpack(p)["blocks"]) == lay.total >= d.block_count
    lbns = set(np.random.default_rng(2).integers(0, lay.total, 300).tolist())
    for zz in lay.zones:
        z = zz["z"]
        lbns |= {zz["first"], zz["first"] + 1, zz["first"] + zz["lbns"] - 1}
        for i, s in enumerate(z.slips[:20]):  # blocks near the slipped sectors (or tracks)
            unit = zz["bpt"] if d.sparing_scheme == 1 else 1
            guess = zz["first"] + (s - i) * unit - z.empty_front
            lbns |= {x for x in range(guess - 3, guess + 3) if 0 <= x < lay.total}
    start = int(np.random.default_rng(4).integers(0, lay.total - 3000))
    lbns |= set(range(start, start + 3000))  # a long stretch: tracks, cylinders, slips
    for lbn in sorted(lbns):
        cyl, head, frac, bpt = H.locate(p, zones, lbn)
        loc = lay.loc(lbn)
        assert (cyl, head, bpt) == (loc.cyl, loc.head, loc.bpt), lbn
        assert frac == pytest.approx(loc.angle / loc.bpt, abs=1e-12)
        assert 0 <= cyl < d.cylinders and 0 <= head < d.surfaces
    # distinct blocks never share a sector
    locs = [lay.loc(x) for x in sorted(lbns)]
    assert len({(o.cyl, o.head, o.phys % o.bpt) for o in locs}) == len(lbns)


@pytest.mark.parametrize("name", list(DISKSIM))
def test_track_bounds_match_reference(shared, name):
    d, (p, zones, _cd, _ct) = _drive(shared, name)
    lay = ref.Layout(d)
    for lbn in np.random.default_rng(3).integers(0, lay.total, 8).tolist() + [0]:
        assert H.track_bounds(p, zones, lbn) == lay.track_lbns(lbn)


# requests built to reach every path: sequential streams (read-ahead hits, the write-through
# streaming of the HP drive), nearby blocks before and after the last request (partial hits,
# read-on-arrival), random blocks (seeks), short idle times (a read-ahead or a destage still
# under way) and long ones
_step = st.tuples(
    st.sampled_from(["seq", "near", "far", "same"]),
    st.integers(-700, 700), st.integers(1, 64), st.booleans(),
    st.one_of(st.sampled_from([0.0, 0.3, 1.0, 5.0, 40.0]), st.floats(0, 30)))


# a read served partly from the read-ahead's segment before the block the read-ahead started
# at (on the HP drive: 13 is in segment 0, the read-ahead on an idle hit runs from 14): the
# host has the buffered block first, then the read-ahead's, none before it is read; with no
# idle time block 14 is read long after, with 9 ms it is read before block 13 has been sent
_BEFORE_RA = [("seq", 0, 1, False, 0.0), ("seq", 0, 1, False, 0.0), ("near", 12, 1, True, 0.0),
              ("near", -3, 1, False, 0.0), ("seq", 0, 2, False, 0.0)]


@pytest.mark.parametrize("name", list(DISKSIM))
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_step, min_size=1, max_size=40), start=st.integers(0, 2**40))
@example(steps=_BEFORE_RA, start=0)
@example(steps=_BEFORE_RA[:3] + [("near", -3, 1, False, 9.0), _BEFORE_RA[4]], start=0)
# (Atlas 10K) a read that starts where a write ended keeps the sector it arrives at
@example(steps=[("near", 13, 6, True, 0.0), ("near", 7, 5, False, 0.0),
                ("near", -12, 1, False, 0.0)], start=0)
def test_service_matches_reference(shared, name, steps, start):
    d, params = _drive(shared, name)
    total = int(H.unpack(params[0])["blocks"])
    reqs = ref.walk_requests(steps, start % (total - 200), total)
    want = ref.replay(d, reqs)
    got = _replay(params, *(np.array([r[i] for r in reqs]) for i in range(4)))
    assert got == pytest.approx(want, abs=1e-6)


def _edges(d, lay):
    """Blocks where a media walk crosses something: zone starts and ends, slipped sectors (or
    tracks), the ends of sparing ranges, the disk's last block."""
    out = {0, lay.total - 1}
    for zz in lay.zones:
        z = zz["z"]
        out |= {zz["first"], zz["first"] + zz["lbns"] - 1}
        unit = zz["bpt"] if d.sparing_scheme == 1 else 1
        for i, s in enumerate(z.slips):
            out.add(zz["first"] + (s - i) * unit - z.empty_front)
        if d.sparing_scheme == 8:  # spare sectors at the end of each range of cylinders
            rl = zz["bpt"] * d.surfaces * d.range_size_for_sparing - z.spares
            out |= {zz["first"] + k * rl - z.empty_front for k in (1, 2, 3)}
    return sorted(x for x in out if 0 <= x < lay.total)


# requests that make the lazily computed read-ahead walk resume in every way: sequential
# streams of long requests (longer than the read-ahead, so that it ends within a request)
# across zone ends, slips and sparing ranges; requests a little behind the last (served partly
# from what the read-ahead read before the request's first block) or a little ahead; idle
# times that land before, during and after a read-ahead or a destage
_edge_step = st.tuples(
    st.sampled_from(["seq", "seq", "back", "skip", "jump"]), st.integers(1, 300),
    st.integers(1, 400), st.sampled_from([False, False, False, True]),
    st.one_of(st.sampled_from([0.0, 0.05, 0.3, 1.0, 3.0]), st.floats(0, 8)))


@pytest.mark.parametrize("name", list(DISKSIM))
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_edge_step, min_size=1, max_size=25), edge=st.integers(0, 2**20),
       before=st.integers(0, 900))
def test_service_at_edges_matches_reference(shared, name, steps, edge, before):
    d, (p, zones, cd, ct) = _drive(shared, name)
    lay = ref.Layout(d)
    edges = _edges(d, lay)
    total = lay.total
    disk = ref.RefDisk(d)
    state = H.new_state()
    a = max(edges[edge % len(edges)] - before, 0)
    prev_end = a
    t = 0.0
    for kind, delta, n, w, idle in steps:
        if kind == "seq":
            a = prev_end
        elif kind == "back":
            a = prev_end - delta
        elif kind == "skip":
            a = prev_end + delta
        else:
            a = edges[(edge + delta) % len(edges)] - delta
        a = min(max(a, 0), total - n)
        want, want_hit = disk.service(t, a, n, w)
        got, got_hit = H.service(p, zones, cd, ct, state, 0, t, a, n, w)
        assert got == pytest.approx(want, abs=1e-6)
        assert got_hit == want_hit
        prev_end = a + n
        t = want + idle


def test_read_on_arrival_keeps_the_sector_the_head_arrives_at(shared):
    """A read that follows a write-back write on its track while the write is still going on
    starts where the write ended, at the start of the sector after it, and (Atlas 10K: it reads
    on arrival) keeps every sector that passes before its first block, that one included, so
    a read of it is a hit. The kernel and the reference counted the sectors passed as
    ``int(wait / sector time)``, which float error puts just below the integer, each in its
    own cases (Hypothesis found write 6 at 13, read 5 at 26, read 1 at 19 to disagree)."""
    d, (p, zones, cd, ct) = _drive(shared, "atlas10k")
    lay = ref.Layout(d)
    new = ref.RefDisk(d)
    at_write_end = 0
    for x in range(0, 3000, 7):
        for nw, gap in ((6, 7), (3, 2), (10, 20), (1, 40)):
            disk = _copy(new)
            state = H.new_state()
            t = 0.0
            for k, (a, n, w) in enumerate([(x, nw, True), (x + nw + gap, 5, False),
                                          (x + nw, 1, False)]):
                if k == 1:
                    on_track = lay.track_lbns(x)[1] >= a + n
                    arrives = t + d.per_request_overhead_ms \
                        + d.overheads_ms["read miss after write"]
                    starts_at_write_end = on_track and disk.free > arrives
                want, want_hit = disk.service(t, a, n, w)
                got, got_hit = H.service(p, zones, cd, ct, state, 0, t, a, n, w)
                assert got == pytest.approx(want, abs=1e-6), (x, nw, gap, k)
                assert got_hit == want_hit, (x, nw, gap, k)
                t = want
            if starts_at_write_end:
                at_write_end += 1
                assert got_hit == 1, (x, nw, gap)
    assert at_write_end > 100  # the case this test is about is reached


@pytest.mark.parametrize("name", list(DISKSIM))
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_step, min_size=2, max_size=30), start=st.integers(0, 2**40),
       settle_at=st.sets(st.integers(0, 29)))
def test_service_does_not_depend_on_how_far_the_walk_was_computed(shared, name, steps, start,
                                                                   settle_at):
    """A request gets the same answer, to the last bit, whether the read-ahead's walk had been
    computed only as far as earlier requests needed or (``settle``) to its end: in the second
    case the request's time is behind the computed walk and the kernel walks again from its
    start."""
    d, (p, zones, cd, ct) = _drive(shared, name)
    lazy = H.new_state()
    settled = H.new_state()
    total = int(H.unpack(p)["blocks"])
    a = start % (total - 200)
    prev_end = a
    t = 0.0
    for k, (kind, delta, n, w, idle) in enumerate(steps):
        a = {"seq": prev_end, "near": prev_end + delta, "same": a,
             "far": (a * 7919 + delta * 104729 + 12345) % total}[kind]
        a = min(max(a, 0), total - n)
        if k in settle_at:
            H.settle(p, zones, cd, ct, settled, 0)
        got = H.service(p, zones, cd, ct, settled, 0, t, a, n, w)
        want = H.service(p, zones, cd, ct, lazy, 0, t, a, n, w)
        assert got == want
        prev_end = a + n
        t = want[0] + idle


@pytest.mark.parametrize("name", list(DISKSIM))
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_step, min_size=1, max_size=30), start=st.integers(0, 2**40))
def test_settle_gives_the_read_ahead_end(shared, name, steps, start):
    """``settle`` completes the state that service leaves lazy: the mechanism's free time and
    head position are those of the reference's read-ahead walked to its end."""
    d, (p, zones, cd, ct) = _drive(shared, name)
    disk = ref.RefDisk(d)
    state = H.new_state()
    total = int(H.unpack(p)["blocks"])
    a = start % (total - 200)
    prev_end = a
    t = 0.0
    for kind, delta, n, w, idle in steps:
        a = {"seq": prev_end, "near": prev_end + delta, "same": a,
             "far": (a * 7919 + delta * 104729 + 12345) % total}[kind]
        a = min(max(a, 0), total - n)
        done, _hit = disk.service(t, a, n, w)
        H.service(p, zones, cd, ct, state, 0, t, a, n, w)
        prev_end = a + n
        t = done + idle
    H.settle(p, zones, cd, ct, state, 0)
    drive = H.read_state(state)
    assert drive["free"] == pytest.approx(disk.free, abs=1e-6)
    assert (drive["cyl"], drive["head"]) == (disk.cyl, disk.head)
    assert (drive["ra_seg"] >= 0) == (disk.pf is not None)


@pytest.mark.parametrize("name", ["barracuda", "cheetah9LP", "hp_c2247a", "atlas10k"])
def test_agrees_with_disksim_per_request(shared, name):
    """DiskSim 4.0's own service times (tests/data/disksim/README.md): the model reproduces
    them, the Atlas's with its reads on arrival switched off (``--without read-on-arrival``:
    DiskSim has no such part); the few exceptions are requests whose head arrives within a few
    microseconds of its sector, where DiskSim's fixed-point angles and the model's floating
    point round differently."""
    lbn, n, w, _real, idle = _trace(shared, name)
    p, zones, cd, ct = _drive(shared, name)[1]
    sim = _replay((without_parts(p, ["read-on-arrival"]), zones, cd, ct), lbn, n, w, idle)
    ds = np.loadtxt(lzma.open(DATA / f"{name}.sim.xz", "rt"))
    assert len(ds) == len(sim)
    assert np.mean(np.abs(sim - ds) < 0.01) >= 0.995


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 17_000_000), st.integers(1, 256), st.booleans(),
                          st.floats(0, 20)), min_size=1, max_size=200))
def test_replay_invariants(shared, reqs):
    d, (p, zones, cd, ct) = _drive(shared, "atlas10k")
    lbn = np.array([r[0] for r in reqs], dtype=np.int64)
    n = np.array([r[1] for r in reqs], dtype=np.int64)
    w = np.array([int(r[2]) for r in reqs], dtype=np.int64)
    idle = np.array([r[3] for r in reqs])
    out = _replay((p, zones, cd, ct), lbn, n, w, idle)
    rot = 60000.0 / d.rpm
    full_seek = max(t for _d, t in d.seek_curve)
    fields = H.unpack(p)
    for k in range(len(reqs)):
        xfer = n[k] * fields["xfer_read_ms" if not w[k] else "xfer_write_ms"]
        assert out[k] >= xfer  # at least the interface transfer
        # at most: a destage (a seek, a turn and its blocks), then a full seek, a turn, the
        # blocks (a turn per track), the command overhead and the transfer
        bound = 2 * (full_seek + rot + fields["write_settle_ms"] + (n[k] / 200 + 1) * rot) + xfer + 2
        assert out[k] <= bound


def test_unsupported_layouts_are_refused(shared, tmp_path):
    src = shared / "validation" / "disksim"
    for f in ("barracuda.parv", "barracuda.diskspecs", "barracuda.seek"):
        (tmp_path / f).write_text((src / f).read_text())
    model = (src / "barracuda.model").read_text()
    (tmp_path / "barracuda.model").write_text(
        model.replace("Sparing scheme used = 8", "Sparing scheme used = 11"))
    with pytest.raises(ParamError, match=r"barracuda.parv: sparing scheme 11 is not one of "
                                         r"DiskSim's \(0-10: 0 no spares; 1 spare tracks"):
        drive_params(read_drive(tmp_path / "barracuda.parv"))


@pytest.mark.parametrize("blocks", [128, 2048])
def test_a_catalog_drive_streams_writes_at_its_media_rate(blocks):
    """A catalog HDD with its write cache on (as a desktop SATA drive ships) streams
    back-to-back sequential writes at the rate its datasheet quotes for reads and writes
    alike: the catalog's track and cylinder skews cover a write's settling after the switch, so
    a write stream loses no revolution at each track (before, it lost one and wrote at half the
    media rate). Served as the plain-Python reference serves it; the rate, once the drive's
    write segments are full, is the zone's blocks per track over a revolution plus the skew."""
    from blocklab.pipeline.model import catalog as CAT

    entries, _sources, firmware = CAT.catalog()
    v = entries["samsung_hd501lj"].values() | {"write_cache": True}
    d = CAT.hdd_drive("samsung_hd501lj", v, firmware[v["firmware"]])
    assert int(d.cache["max_write_segments"]) > 1 and d.cache["fast_write_level"] > 0
    buffer_blocks = int(d.cache["segment_blocks"]) * int(d.cache["max_write_segments"])
    n = 12 * buffer_blocks // blocks
    reqs = [(1000 + k * blocks, blocks, 1, 0.0) for k in range(n)]
    want = ref.replay(d, reqs)
    got = _replay(drive_params(d), *(np.array([r[i] for r in reqs]) for i in range(4)))
    assert got == pytest.approx(want, abs=1e-6)
    lay = ref.Layout(d)
    zone = lay.zones[lay.zone_of(1000)]
    rot = 60000.0 / d.rpm
    per_track = zone["bpt"] / (rot + zone["z"].track_skew / zone["bpt"] * rot)
    tail = n // 2  # the buffer filled long before: the rate is the media's
    rate = (n - tail) * blocks / sum(got[tail:])
    assert 0.9 * per_track <= rate <= 1.02 * zone["bpt"] / rot, (rate, per_track)


@pytest.mark.parametrize("name", ["constellation_es_500g", "samsung_hd501lj"])
def test_random_writes_wait_for_a_write_segment_with_the_write_cache_on(name):
    """With its write cache on, a drive acknowledges a write once its data is in a write
    segment; once every segment holds a write not yet on the platter, the next write's data
    waits for the oldest (DiskSim's cache makes a write wait for a segment). So the first few
    random writes complete at the interface's speed and the rest at about the rate the drive
    writes them with its cache off (it destages in arrival order). Before, a drive with
    several write segments took random writes at the interface's speed for ever (a review:
    2,129 4 KiB writes a second on a 7,200 rpm drive, 800 MB through a 16 MB buffer). Served
    as the plain-Python reference serves them."""
    d_on, p_on = _catalog_cached(name, True)
    d_off, p_off = _catalog_cached(name, False)
    nw = int(d_on.cache["max_write_segments"])
    assert nw > 1 and d_on.cache["fast_write_level"] > 0
    rng = np.random.default_rng(7)
    n = 300
    reqs = [(int(a), 8, 1, 0.0) for a in rng.integers(0, d_on.block_count // 8 - 1, n) * 8]
    cols = [np.array([r[i] for r in reqs]) for i in range(4)]
    on = _replay(p_on, *cols)
    assert on == pytest.approx(ref.replay(d_on, reqs), abs=1e-6)
    off = _replay(p_off, *cols)
    assert max(on[:nw]) < 1.0  # ms: into free segments
    # the rest at the media's pace: within 15 % of the cache-off total, not a tenth of it
    assert 0.85 * sum(off[nw:]) <= sum(on[nw:]) <= 1.05 * sum(off[nw:]), (sum(on), sum(off))


def _catalog_hdd(name, **over):
    from blocklab.pipeline.model import catalog as CAT

    entries, _sources, firmware = CAT.catalog()
    v = entries[name].values() | over
    return CAT.hdd_drive(name, v, firmware[v["firmware"]])


def _queued_writes(params, lbn, n, depth):
    """Sequential writes served as a host keeping ``depth`` of them outstanding: write k is
    sent when write k - depth completes and the drive starts it when write k - 1 completes.
    Returns (completion times, queue times) in ms."""
    p, zones, cd, ct = params
    state = H.new_state()
    done = []
    sent = []
    t = 0.0
    for k, a in enumerate(lbn):
        q = done[k - depth] if k >= depth else 0.0
        sent.append(q)
        t, _hit = H.service_queued(p, zones, cd, ct, state, 0, max(t, q), q, a, n, True)
        done.append(t)
    return np.array(done), np.array(sent)


@pytest.mark.parametrize("name", ["savvio_15k3_300g", "samsung_hd501lj"])
def test_queued_writes_stream_at_the_media_rate_with_the_write_cache_off(name):
    """A drive with its write cache off (as arrays run them) and command queuing takes a
    waiting write's data while the write before it is on the platter: offered two or more
    sequential writes at a time, it streams them at its media rate, near the sustained rate its
    datasheet states. Offered one at a time, each write finds the next sector gone by and waits
    most of a revolution, as a real drive does. Served as the plain-Python reference serves
    them."""
    d = _catalog_hdd(name)
    assert d.cache["fast_write_level"] == 0 and d.cache["queued_write_data"] == 1
    params = drive_params(d)
    blocks = 512  # 256 KiB
    lbn = 1000 + blocks * np.arange(200)
    lay = ref.Layout(d)
    zone = lay.zones[lay.zone_of(1000)]
    rot = 60000.0 / d.rpm
    media_ms = blocks / zone["bpt"] * rot
    rates = {}
    for depth in (1, 2, 4):
        done, sent = _queued_writes(params, lbn, blocks, depth)
        disk = ref.RefDisk(d)
        t = 0.0
        for k, a in enumerate(lbn):
            t, _hit = disk.service(max(t, sent[k]), int(a), blocks, True, queued=sent[k])
            assert done[k] == pytest.approx(t, abs=1e-6), (depth, k)
        tail = len(lbn) // 2
        rates[depth] = (len(lbn) - tail) * blocks * 512 / (done[-1] - done[tail - 1]) / 1e3
    od = {"savvio_15k3_300g": 202, "samsung_hd501lj": 81}[name]  # datasheet, outer zone MB/s
    per_write = blocks * 512 / 1e3
    # one at a time: a revolution lost per write, besides the write's own media time
    assert rates[1] < 1.02 * per_write / (media_ms + 0.8 * rot), rates
    for depth in (2, 4):
        assert 0.85 * od <= rates[depth] <= 1.02 * zone["bpt"] * 512 / rot / 1e3, rates


def _catalog_cached(name, write_cache):
    """(drive, its kernel tables) of catalog HDD ``name`` with its write cache on or off, built
    once per test session."""
    if (name, write_cache) not in _DRIVES:
        d = _catalog_hdd(name, write_cache=write_cache)
        _DRIVES[name, write_cache] = (d, drive_params(d))
    return _DRIVES[name, write_cache]


def _edge_address(kind, delta, a, prev_end, total, n):
    """The first block of the next request of ``n`` blocks in a run of ``_edge_step``s: right
    after the last one, ``delta`` before or past its end, or a jump from ``a``; on the drive."""
    a = {"seq": prev_end, "back": prev_end - delta, "skip": prev_end + delta}.get(
        kind, (a * 7919 + delta * 104729) % total)
    return min(max(a, 0), total - n)


@pytest.mark.parametrize("name", ["savvio_15k3_300g", "constellation_es_500g"])
@settings(max_examples=25, deadline=None)
@given(steps=st.lists(st.tuples(_edge_step, st.floats(0, 12)), min_size=1, max_size=25),
       start=st.integers(0, 2**30), cache=st.booleans())
def test_queued_service_matches_reference(name, steps, start, cache):
    """A catalog drive serving requests that waited in its queue (any time before it starts
    them) gives the reference's times, to the microsecond, write cache on or off."""
    d, (p, zones, cd, ct) = _catalog_cached(name, cache)
    disk = ref.RefDisk(d)
    state = H.new_state()
    total = ref.Layout(d).total
    a = start % (total - 1000)
    prev_end = a
    t = 0.0
    for (kind, delta, n, w, idle), ahead in steps:
        a = _edge_address(kind, delta, a, prev_end, total, n)
        q = max(0.0, t - ahead)
        want, want_hit = disk.service(t, a, n, w, queued=q)
        got, got_hit = H.service_queued(p, zones, cd, ct, state, 0, t, q, a, n, w)
        assert got == pytest.approx(want, abs=1e-6)
        assert got_hit == want_hit
        prev_end = a + n
        t = want + idle


@pytest.mark.parametrize("name", ["cheetah_15k5_146g", "atlas10k", "hp_c2247a"])
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(_edge_step, st.floats(0, 12)), min_size=1, max_size=12),
       start=st.integers(0, 2**30), cache=st.booleans())
def test_positioning_time_is_when_the_first_block_is_under_the_head(shared, name, steps, start,
                                                                    cache):
    """The rank of shortest-positioning-time-first (``position_ms``), asked of the drive in
    whatever state a run of requests leaves it (read-ahead under way, a destage, write cache on
    or off, a queued write, HP's extra write disconnect), for reads and writes near the head,
    on the next block and far away, is when the plain-Python reference drive, serving that
    request then, has the request's first block under the head (its media read or write
    starts), or 0 when that block is in its buffer, to the microsecond; an almost read hit,
    served by the read-ahead in progress, is ranked from where the read-ahead stops: within a
    sector (and a head switch, when it stops between tracks). The rank is the reference's
    ``position`` too. Asking does not change what the drive then does: the same requests served
    without asking complete at the same times, bit for bit. A catalog drive (command queuing
    on, write cache on or off) and two DiskSim drives (write-back with one write segment; the
    HP C2247A's extra write disconnect)."""
    if name in DISKSIM:
        d, (p, zones, cd, ct) = _drive(shared, name)
    else:
        d, (p, zones, cd, ct) = _catalog_cached(name, cache)
    disk = ref.RefDisk(d)
    state = H.new_state()
    quiet = H.new_state()  # the same drive, never asked
    total = ref.Layout(d).total
    slack = d.head_switch_ms + 60000.0 / d.rpm / min(z["bpt"] for z in ref.Layout(d).zones)
    a = start % (total - 1000)
    prev_end = a
    t = 0.0
    for (kind, delta, n, w, idle), ahead in steps:
        a = _edge_address(kind, delta, a, prev_end, total, n)
        q = max(0.0, t - ahead)
        for c in (a, prev_end, prev_end + delta, (a * 31 + 7) % total):
            c = min(max(c, 0), total - n)
            for cw in (False, True):
                rank = H.position_ms(p, zones, cd, ct, state, 0, t, q, c, n, cw)
                assert rank == pytest.approx(disk.position(t, q, c, n, cw), abs=1e-6)
                probe = _copy(disk)  # (a copy of its state)
                probe.service(t, c, n, cw, queued=q)
                if probe.first_at is None:
                    assert rank == 0, (c, cw)
                elif probe.first_from_ra:
                    assert abs(rank - (probe.first_at - t)) <= slack, (c, cw)
                else:
                    assert rank == pytest.approx(probe.first_at - t, abs=1e-6), (c, cw)
        want, want_hit = disk.service(t, a, n, w, queued=q)
        got, got_hit = H.service_queued(p, zones, cd, ct, state, 0, t, q, a, n, w)
        alone, _h = H.service_queued(p, zones, cd, ct, quiet, 0, t, q, a, n, w)
        assert got == pytest.approx(want, abs=1e-6)
        assert got_hit == want_hit
        assert got == alone
        prev_end = a + n
        t = want + idle


def test_a_drive_without_command_queueing_loses_a_revolution_per_queued_write():
    """``command_queueing = false`` (an inline drive or an override) gives the drive offered
    writes one at a time: queued writes gain nothing."""
    on = drive_params(_catalog_hdd("savvio_15k3_300g"))
    off = drive_params(_catalog_hdd("savvio_15k3_300g", command_queueing=False))
    lbn = 1000 + 512 * np.arange(40)
    assert H.unpack(off[0])["queued_write_data"] == 0
    queued_off, _ = _queued_writes(off, lbn, 512, 4)
    single_off, _ = _queued_writes(off, lbn, 512, 1)
    queued_on, _ = _queued_writes(on, lbn, 512, 4)
    assert np.array_equal(queued_off, single_off)
    assert queued_on[-1] < 0.5 * queued_off[-1]


@pytest.mark.parametrize("name", list(DISKSIM))
def test_fidelity(shared, name):
    """The issue's goal, at most twice DiskSim's demerit, and what the model reaches: DiskSim's
    or better (5% slack for DiskSim's binned CDFs against the model's exact ones)."""
    d = shared / "validation" / "disksim"
    r = validate_disksim(d / f"{name}.parv", d / f"{name}.trace")
    assert r.demerit_ms <= 2 * DISKSIM[name], r
    assert r.demerit_ms <= 1.05 * DISKSIM[name], r
    assert r.mean_sim_ms == pytest.approx(r.mean_real_ms, rel=0.05)


@pytest.mark.parametrize("name", list(DISKSIM))
def test_model_parts_are_needed(shared, name):
    """What a simpler model would give up: without its on-drive cache, or without reading
    ahead, no drive's model comes within the issue's twice DiskSim's demerit. Switching off a
    part the drive does not have (write-back on the HP, read on arrival but on the Atlas)
    leaves the figure as it is."""
    d = shared / "validation" / "disksim"
    full = validate_disksim(d / f"{name}.parv", d / f"{name}.trace")
    for part in ("cache", "read-ahead"):
        r = validate_disksim(d / f"{name}.parv", d / f"{name}.trace", [part])
        assert r.demerit_ms > 2 * DISKSIM[name], (part, r)
        assert r.without == [part]
    p = _drive(shared, name)[1][0]
    for part in PARTS:
        if np.array_equal(without_parts(p, [part]), p):
            r = validate_disksim(d / f"{name}.parv", d / f"{name}.trace", [part])
            assert r.demerit_ms == full.demerit_ms, part
    fields = H.unpack(p)
    assert (fields["read_on_arrival"] > 0) == (name == "atlas10k")
    assert (fields["write_back"] > 0) == (name != "hp_c2247a")


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0, 50), min_size=2, max_size=300),
       st.lists(st.floats(0, 50), min_size=2, max_size=300))
def test_demerit_matches_reference(a, b):
    assert demerit(np.array(a), np.array(b)) == pytest.approx(ref.demerit(a, b), abs=1e-9)


def test_validate_cli_json(shared):
    d = shared / "validation" / "disksim"
    res = CliRunner().invoke(app, ["validate", "disksim", str(d / "atlas10k.parv"),
                                   str(d / "atlas10k.trace"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert {"requests", "demerit_ms", "mean_sim_ms", "mean_real_ms", "requests_per_s"} <= set(out)
    assert out["requests"] == 10000


def test_validate_cli_without(shared):
    d = shared / "validation" / "disksim"
    args = ["validate", "disksim", str(d / "atlas10k.parv"), str(d / "atlas10k.trace")]
    res = CliRunner().invoke(app, [*args, "--without", "read-on-arrival", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["without"] == ["read-on-arrival"]
    # DiskSim's own demerit on this trace (its README): the Atlas modelled as DiskSim models it
    assert out["demerit_ms"] == pytest.approx(DISKSIM["atlas10k"], abs=0.002)
    # the help names every part (it lists them itself: the CLI does not import the model)
    res = CliRunner().invoke(app, ["validate", "disksim", "--help"], env={"COLUMNS": "300"})
    assert all(part in res.stdout for part in PARTS)
    res = CliRunner().invoke(app, [*args, "--without", "cache", "--without", "nope"])
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == [
        "blocklab: error: --without nope: not a part of the model (parts: cache, read-ahead, "
        "read-on-arrival, write-back, overheads, switches)"]


def test_validate_cli_bad_specs(tmp_path, shared):
    (tmp_path / "x.parv").write_text("disksim_disk D {\n  Model = source nope.model\n}\n")
    res = CliRunner().invoke(app, ["validate", "disksim", str(tmp_path / "x.parv"),
                                   str(shared / "validation" / "disksim" / "atlas10k.trace")])
    assert res.exit_code == 2 and "x.parv:2" in res.stderr


def test_the_engine_serves_queued_operations_as_the_reference_drive_does(tmp_path):
    """Through the engine: a RAID-10 of write-through Savvio 15K.3s (command queuing on) under
    a mix of sequential and random 64 KiB writes and a few reads (the reference walks a read's
    read-ahead block by block: slow), 16 outstanding, replayed with
    every drive operation recorded. Each drive's operations, served in the order the drive
    started them by the plain-Python reference drive, each started when the engine started it
    and queued since the engine queued it, complete when the engine says they did (to the
    nanosecond the engine rounds up to). The engine hands the drive the queue times in the
    right unit, and queued writes do take the early path (some complete sooner than the
    same drive offered them one at a time would)."""
    import pyarrow.parquet as pq

    array = tmp_path / "r10.toml"
    array.write_text('[[group]]\nname = "r10"\nlayout = "raid10"\nwidth = 4\n'
                     'stripe_unit = "64KiB"\ndrive = "savvio_15k3_300g"\n'
                     'scheduler = "clook"\nqueue_depth = 8\n')
    trace = tmp_path / "t.parquet"
    runner = CliRunner()
    res = runner.invoke(app, ["synth", "iometer", "-o", str(trace), "--requests", "300",
                              "--transfer-size", "64k", "--read-pct", "5", "--random-pct",
                              "50", "--outstanding", "16", "--array", str(array)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "--drive-ops",
                              "-o", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    ops = pq.read_table(tmp_path / "run" / "drive_ops.parquet").to_pylist()
    d = _catalog_hdd("savvio_15k3_300g")
    early = 0
    for drive in sorted({o["drive"] for o in ops}):
        mine = sorted((o for o in ops if o["drive"] == drive), key=lambda o: o["start_ns"])
        disk = ref.RefDisk(d)
        alone = ref.RefDisk(d)
        for o in mine:
            start, queued = o["start_ns"] / 1e6, o["queued_ns"] / 1e6
            done, hit = disk.service(start, o["sector"], o["sectors"], o["write"],
                                     queued=queued)
            assert abs(o["complete_ns"] - done * 1e6) <= 1.001, (drive, o, done)  # (ceil)
            assert bool(hit) == o["cache_hit"]
            one, _hit = alone.service(start, o["sector"], o["sectors"], o["write"])
            early += one > done + 1e-9
    assert early > 10


def _replay_ops(tmp_path, tag, array_text, synth_args):
    """Replay a synthetic workload on an array with every drive operation recorded: the
    operations (drive_ops.parquet rows)."""
    import pyarrow.parquet as pq

    array = tmp_path / f"{tag}.toml"
    array.write_text(array_text)
    trace = tmp_path / "t.parquet"
    runner = CliRunner()
    if not trace.exists():
        res = runner.invoke(app, ["synth", "iometer", "-o", str(trace), *synth_args,
                                  "--array", str(array)])
        assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "--drive-ops",
                              "-o", str(tmp_path / tag)])
    assert res.exit_code == 0, res.output
    return pq.read_table(tmp_path / tag / "drive_ops.parquet").to_pylist()


def test_the_engine_serves_the_least_positioning_time_first(tmp_path):
    """``scheduler = "sptf"`` through the engine: a RAID-5 of Cheetah 15K.5s (write cache off,
    command queuing on) under 8 KiB random reads and writes, 16 outstanding. Served in the
    order each drive started them by the plain-Python reference drive, each operation, when
    its drive started it, ranked lowest by the reference's positioning time among every
    operation already waiting there (all within the scheduler's depth), and completes when the
    engine says it did. Its drives spend less time per operation than under C-LOOK on the same
    trace (rotational position counts, not only the seek: Worthington, Ganger and Patt 1994)."""
    group = ('[[group]]\nname = "r5"\nlayout = "raid5"\nwidth = 4\nstripe_unit = "64KiB"\n'
             'drive = "cheetah_15k5_146g"\nqueue_depth = 64\nmax_wait_ms = 0\n')
    synth = ["--requests", "160", "--transfer-size", "8k", "--read-pct", "70",
             "--random-pct", "100", "--outstanding", "16"]
    ops = _replay_ops(tmp_path, "sptf", group + 'scheduler = "sptf"\n', synth)
    clook = _replay_ops(tmp_path, "clook", group + 'scheduler = "clook"\n', synth)
    d = _catalog_hdd("cheetah_15k5_146g")
    ranked = 0
    for drive in sorted({o["drive"] for o in ops}):
        mine = sorted((o for o in ops if o["drive"] == drive), key=lambda o: o["start_ns"])
        disk = ref.RefDisk(d)
        for i, o in enumerate(mine):
            start = o["start_ns"] / 1e6
            # waiting when the drive chose: queued before it chose and not started yet (one
            # queued at the very nanosecond it chose may have come after the choice)
            waiting = [x for x in mine[i + 1:] if x["queued_ns"] < o["start_ns"]]
            rank = disk.position(start, o["queued_ns"] / 1e6, o["sector"], o["sectors"],
                                 o["write"])
            for x in waiting:
                other = disk.position(start, x["queued_ns"] / 1e6, x["sector"], x["sectors"],
                                      x["write"])
                assert rank <= other + 1e-6, (drive, o, x, rank, other)
            ranked += len(waiting) > 0
            done, hit = disk.service(start, o["sector"], o["sectors"], o["write"],
                                     queued=o["queued_ns"] / 1e6)
            assert abs(o["complete_ns"] - done * 1e6) <= 1.001, (drive, o, done)  # (ceil)
            assert bool(hit) == o["cache_hit"]
    assert ranked > 50

    def per_op(rows):
        return sum(r["complete_ns"] - r["start_ns"] for r in rows) / len(rows)

    assert len(ops) == len(clook)
    assert per_op(ops) < 0.9 * per_op(clook)
