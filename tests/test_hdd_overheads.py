"""How a request stops the HDD model's read-ahead in progress (kernels/drive/hdd_cache.py
_ra_cut_now), against the plain-Python reference, in cases the reference tests reach rarely.
With the controller's overheads taken away a request reaches the mechanism as it arrives, so
when the read-ahead it stops lets the head go (the end of the sector under the head, DiskSim's
rule) is what its service waits for: with the validated drives' overheads (a tenth of a
millisecond and more, several sector times) that moment hides behind them, and a model that
stopped the read-ahead a sector early served those drives as the reference does."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from blocklab.kernels.drive import hdd as H
from blocklab.pipeline.model.disksim_params import read_drive
from blocklab.pipeline.model.drive_params import drive_params

from .reference import hdd as ref

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)


# (drive, seed, longest idle ms): sequences in which some read's head reaches its first block
# within a sector's time of it passing, so that a sector more or less before the head was let
# go changes a revolution of the read's wait (such a read is about one in a track's sectors)
CASES = [("atlas10k", 5, 0.3), ("barracuda", 0, 3.0), ("cheetah9LP", 8, 3.0),
         ("hp_c2247a", 5, 1.0)]


@pytest.mark.parametrize(("name", "seed", "idle_ms"), CASES)
def test_a_read_that_stops_the_read_ahead_without_overheads_matches_reference(shared, name,
                                                                              seed, idle_ms):
    """Random reads of 4 KiB, each arriving up to ``idle_ms`` after the one before completed
    (while the read-ahead to the end of its track is still going, or after it ended), on the
    drive with every controller overhead 0: each completion is the reference's (to a
    nanosecond)."""
    d = read_drive(shared / "validation" / "disksim" / f"{name}.parv")
    d = dataclasses.replace(d, overheads_ms=dict.fromkeys(d.overheads_ms, 0.0),
                            per_request_overhead_ms=0.0)
    p, zones, cd, ct = drive_params(d)
    total = int(H.unpack(p)["blocks"])
    disk = ref.RefDisk(d)
    state = H.new_state()
    rng = np.random.default_rng(seed)
    t = 0.0
    for i in range(100):
        a = int(rng.integers(0, total - 8))
        want, want_hit = disk.service(t, a, 8, False)
        got, got_hit = H.service(p, zones, cd, ct, state, 0, t, a, 8, False)
        assert got == pytest.approx(want, abs=1e-6), i
        assert got_hit == want_hit, i
        t = want + float(rng.uniform(0.0, idle_ms))


def test_a_read_after_a_read_ahead_that_ended_mid_track_matches_reference(shared):
    """The HP C2247A, its overheads as validated: twelve 1-block reads in sequence a little
    before a sparing edge, a jump of 225 blocks three ms later, then reads of a block and of
    130 blocks a little behind: each completion and hit is the reference's. tests/test_hdd.py's
    edges test found this sequence only now and then against a model whose read-ahead stop
    took the walk's current run to the run's end on the platter, not to the walk's end (its
    last run is shorter when the read-ahead ends inside it)."""
    from .test_hdd import _edges

    d = read_drive(shared / "validation" / "disksim" / "hp_c2247a.parv")
    p, zones, cd, ct = drive_params(d)
    lay = ref.Layout(d)
    edges = _edges(d, lay)
    disk = ref.RefDisk(d)
    state = H.new_state()
    edge = 1290
    a = prev_end = max(edges[edge % len(edges)] - 23, 0)
    t = 0.0
    steps = [("seq", 1, 1, 0.0)] * 12 + [("jump", 202, 225, 3.0), ("back", 1, 1, 1.0),
                                         ("back", 1, 130, 0.0)]
    for i, (kind, delta, n, idle) in enumerate(steps):
        if kind == "seq":
            a = prev_end
        elif kind == "back":
            a = prev_end - delta
        else:
            a = edges[(edge + delta) % len(edges)] - delta
        a = min(max(a, 0), lay.total - n)
        want, want_hit = disk.service(t, a, n, False)
        got, got_hit = H.service(p, zones, cd, ct, state, 0, t, a, n, False)
        assert got == pytest.approx(want, abs=1e-6), i
        assert got_hit == want_hit, i
        prev_end = a + n
        t = want + idle
