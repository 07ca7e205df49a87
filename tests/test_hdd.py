"""The HDD model: its pieces against the plain-Python reference, invariants of a replay, and
fidelity on DiskSim's four validated drives (the demerit figure against DiskSim's own)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.kernels.drive import hdd as H
from blocklab.pipeline.cli import app
from blocklab.pipeline.disksim_params import read_drive
from blocklab.pipeline.validate import demerit, drive_params, validate_disksim

from .reference import hdd as ref

# DiskSim 4.0's demerits on these traces (../shared/validation/disksim/README.md)
DISKSIM = {"cheetah9LP": 0.107, "atlas10k": 0.268, "barracuda": 0.348, "hp_c2247a": 0.090}


def _drive(shared, name):
    d = read_drive(shared / "validation" / "disksim" / f"{name}.parv")
    return d, drive_params(d)


@pytest.mark.parametrize("name", list(DISKSIM))
def test_seek_and_location_match_reference(shared, name):
    d, (p, zones, cd, ct) = _drive(shared, name)
    rng = np.random.default_rng(1)
    for dist in [0, 1, 2, 9, 10, 11, 299, 300, 301, *rng.integers(1, d.cylinders, 50).tolist()]:
        if d.seek_type == "extracted":
            want = ref.seek_curve(d.seek_curve, dist)
        else:
            x, a, b, c, e, _s = d.hpl_seek
            want = ref.seek_hpl(x, a, b, c, e, d.first_ten_seeks_ms, dist)
        assert H.seek_ms(p, cd, ct, dist) == pytest.approx(want, abs=1e-9)
    zl = [dict(first_cyl=int(zones[i * H.Z_N + H.Z_FIRST_CYL]), bpt=int(zones[i * H.Z_N + H.Z_BPT]),
               first_lbn=int(zones[i * H.Z_N + H.Z_FIRST_LBN]),
               nlbn=int(zones[i * H.Z_N + H.Z_NLBN]), tskew=zones[i * H.Z_N + H.Z_TSKEW],
               cskew=zones[i * H.Z_N + H.Z_CSKEW]) for i in range(len(zones) // H.Z_N)]
    assert zl[-1]["first_lbn"] + zl[-1]["nlbn"] == d.block_count
    for lbn in [0, 1, d.block_count - 1, *rng.integers(0, d.block_count, 200).tolist()]:
        cyl, head, angle, _bpt = H.locate(zones, d.surfaces, lbn)
        rc, rh, ra = ref.locate(zl, d.surfaces, lbn)
        assert (cyl, head) == (rc, rh) and angle == pytest.approx(ra)
        assert 0 <= cyl < d.cylinders and 0 <= head < d.surfaces


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0, 50), min_size=2, max_size=300),
       st.lists(st.floats(0, 50), min_size=2, max_size=300))
def test_demerit_matches_reference(a, b):
    assert demerit(np.array(a), np.array(b)) == pytest.approx(ref.demerit(a, b), abs=1e-9)


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
    out = np.full(len(reqs), -1.0)
    H.replay_closed(p, zones, cd, ct, H.new_state(), lbn, n, w, idle, out)
    rot = 60000.0 / d.rpm
    full_seek = max(t for _d, t in d.seek_curve)
    for k in range(len(reqs)):
        xfer = n[k] * p[H.P_BULK]
        assert out[k] >= xfer  # at least the interface transfer
        # at most: waiting out a media write, then a full seek, a rotation and the transfer
        bound = 2 * (full_seek + rot + p[H.P_WRITE_SETTLE] + (n[k] / 300 + 1) * rot) + xfer + 2
        assert out[k] <= bound


@pytest.mark.parametrize("name", ["atlas10k", "barracuda"])
def test_fidelity_within_twice_disksim(shared, name):
    d = shared / "validation" / "disksim"
    r = validate_disksim(d / f"{name}.parv", d / f"{name}.trace")
    assert r.demerit_ms <= 2 * DISKSIM[name], r
    assert r.mean_sim_ms == pytest.approx(r.mean_real_ms, rel=0.05)


@pytest.mark.parametrize("name", ["cheetah9LP", "hp_c2247a"])
@pytest.mark.xfail(strict=True, reason="model not yet within twice DiskSim's demerit on this "
                   "drive (see README fidelity table); strict: passing means it improved")
def test_fidelity_goal_not_yet_met(shared, name):
    d = shared / "validation" / "disksim"
    r = validate_disksim(d / f"{name}.parv", d / f"{name}.trace")
    assert r.demerit_ms <= 2 * DISKSIM[name]


def test_validate_cli_json(shared):
    d = shared / "validation" / "disksim"
    res = CliRunner().invoke(app, ["validate", "disksim", str(d / "atlas10k.parv"),
                                   str(d / "atlas10k.trace"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert {"requests", "demerit_ms", "mean_sim_ms", "mean_real_ms", "requests_per_s"} <= set(out)
    assert out["requests"] == 10000


def test_validate_cli_bad_specs(tmp_path, shared):
    (tmp_path / "x.parv").write_text("disksim_disk D {\n  Model = source nope.model\n}\n")
    res = CliRunner().invoke(app, ["validate", "disksim", str(tmp_path / "x.parv"),
                                   str(shared / "validation" / "disksim" / "atlas10k.trace")])
    assert res.exit_code == 2 and "x.parv:2" in res.stderr
