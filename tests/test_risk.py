"""``blocklab risk`` (issue 5, deliverable 6): the Monte Carlo kernel against a plain-Python
reference (random structures, failures and draws), against the analytic Markov MTTDL for
exponential lifetimes, its sampler against the Weibull distribution, the redundancy sets of
real array configurations, windows read from real replays, and bad input."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.kernels import risk as K
from blocklab.pipeline import risk as P
from blocklab.pipeline import risk_inputs as PI
from blocklab.pipeline.cli import app
from blocklab.pipeline.model.array import build_array
from blocklab.pipeline.model.config import parse_array
from blocklab.traces.schema import RUN_SCHEMA_VERSION, RUN_SCHEMAS

from .conftest import ROOT
from .reference import risk as ref

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

# ---------------------------------------------------------------------------------------------
# the kernel against the reference


@st.composite
def structures(draw, max_slots=7):
    """Slots, sets (overlapping, as in a pool, or not) with tolerances, integer windows."""
    slots = draw(st.integers(1, max_slots))
    n_sets = draw(st.integers(1, 4))
    sets = []
    for _ in range(n_sets):
        members = draw(st.lists(st.integers(0, slots - 1), min_size=1, max_size=slots,
                                unique=True))
        sets.append(sorted(members))
    tol = [draw(st.integers(0, len(s) - 1)) for s in sets]
    win = [float(draw(st.integers(0, 4))) for _ in range(slots)]
    return slots, sets, tol, win


def _runner(slots, sets, tol, win, period, scale, shape, seed=0, domains=None, ure=None,
            lat=None, scrub_h=0.0):
    s = K.Structure(np.array(win, dtype=np.float64), sets, tol, domains, ure, lat, scrub_h)
    return K.Runner(s, period, scale, shape, seed, 64)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(structures(), st.data())
def test_loss_condition_and_compensator_equal_reference(struct, data):
    slots, sets, tol, win = struct
    period = float(data.draw(st.integers(5, 30)))
    scale = data.draw(st.sampled_from([3.0, 10.0, 50.0]))
    shape = data.draw(st.sampled_from([1.0, 0.7, 2.0]))
    # failures on whole hours so that instants coincide: the tie rules are exercised
    events = []
    for x in range(slots):
        t = data.draw(st.integers(0, int(period)))
        while t < period and len(events) < 40:
            events.append((float(t), x))
            t += int(win[x]) + data.draw(st.integers(0, 6))
    # URE hazards per hour of each slot's rebuild (0: none), and the URE generator's state
    ure = [data.draw(st.sampled_from([0.0, 0.0, 0.05, 0.4, 3.0])) for _ in range(slots)]
    # latent defects per hour of window per hour of scrub age, and the scrub interval
    scrub = data.draw(st.sampled_from([0.0, 0.0, 0.7, 6.0, 50.0]))
    lat = [data.draw(st.sampled_from([0.0, 0.01, 0.2])) for _ in range(slots)]
    state = data.draw(st.integers(0, (1 << 64) - 1))
    runner = _runner(slots, sets, tol, win, period, scale, shape, ure=ure, lat=lat,
                     scrub_h=scrub)
    ev_t = np.array([e[0] for e in events] + [0.0], dtype=np.float64)
    ev_s = np.array([e[1] for e in events] + [0], dtype=np.int64)
    tl_t = np.zeros(2 * len(ev_t) + 2)
    tl_k = np.zeros(2 * len(ev_t) + 2, np.int64)
    res = np.zeros(3)
    for _ in range(2):  # twice: the kernel must leave its state as it found it
        urng = np.array([state], dtype=np.uint64)
        K.sweep(ev_t, ev_s, len(events), period, scale, shape, runner.s.arrays(), runner.W,
                tl_t, tl_k, urng, res)
        want = ref.losses(events, period, win, sets, tol, scale, shape, ure, ref.Rng(state),
                          lat, scrub)
        assert int(res[0]) == want[0]
        assert res[1] == pytest.approx(want[1], rel=1e-9, abs=1e-12)
        assert res[2] == pytest.approx(want[2], rel=1e-9, abs=1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(structures(max_slots=5), st.data())
def test_simulation_equals_reference_trial_by_trial(struct, data):
    slots, sets, tol, win = struct
    period = float(data.draw(st.integers(20, 60)))
    scale = data.draw(st.sampled_from([5.0, 20.0]))
    shape = data.draw(st.sampled_from([1.0, 1.5]))
    seed = data.draw(st.integers(0, (1 << 64) - 1))
    ure = [data.draw(st.sampled_from([0.0, 0.1, 1.0])) for _ in range(slots)]
    scrub = data.draw(st.sampled_from([0.0, 10.0]))
    lat = [data.draw(st.sampled_from([0.0, 0.05])) for _ in range(slots)]
    runner = _runner(slots, sets, tol, win, period, scale, shape, seed, ure=ure, lat=lat,
                     scrub_h=scrub)
    runner._alloc(4)  # small buffers: trials overflow them, and the runner grows them
    for trial in range(6):
        before = runner.out.copy()
        runner.run(trial, 1)
        got = runner.out - before
        events, lives = ref.failures(seed, trial, slots, win, period, scale, shape)
        n_loss, lam, lam_first = ref.losses(events, period, win, sets, tol, scale, shape, ure,
                                            ref.ure_rng(seed, trial), lat, scrub)
        assert got[K.O_FAILURES] == len(events) and got[K.O_LIFETIMES] == lives
        assert got[K.O_LOSSES] == n_loss and got[K.O_TRIALS_LOST] == (n_loss > 0)
        assert got[K.O_LAM] == pytest.approx(lam, rel=1e-9, abs=1e-12)
        assert got[K.O_LAMF] == pytest.approx(lam_first, rel=1e-9, abs=1e-12)
        assert got[K.O_TRIALS] == 1


def test_compensator_up_to_a_first_loss_that_is_a_ure():
    """The compensator up to the first loss when that loss is a URE met inside an interval:
    the dangerous drives' failure hazard up to that instant, once, plus the URE hazard up to
    it. Weibull shape 2 and drives of different ages (one renewed at 4 h), so each drive's
    part differs; against the reference, which integrates drive by drive."""
    sets, win = [[0, 1, 2, 3]], [3.0] * 4
    runner = _runner(4, sets, [1], win, 40.0, 12.0, 2.0, ure=[0.3] * 4)
    events = [(1.0, 1), (20.0, 2)]  # slot 1 back at 4 h: the others are older
    ev_t, ev_s = np.array([1.0, 20.0, 0.0]), np.array([1, 2, 0], np.int64)
    tl = np.zeros(8), np.zeros(8, np.int64)
    res = np.zeros(3)
    seen = 0
    for state in range(1, 400):
        K.sweep(ev_t, ev_s, 2, 40.0, 12.0, 2.0, runner.s.arrays(), runner.W, *tl,
                np.array([state], np.uint64), res)
        n, lam, lam_first = ref.losses(events, 40.0, win, sets, [1], 12.0, 2.0, [0.3] * 4,
                                       ref.Rng(state))
        assert (int(res[0]), res[1], res[2]) == (n, pytest.approx(lam, rel=1e-12),
                                                 pytest.approx(lam_first, rel=1e-12))
        if 0 < res[2] < res[1] and n >= 1:
            seen += 1
            # the failure hazard counted once: lam_first below the whole compensator by at
            # least the URE and failure hazard after the first loss
            assert lam_first < lam
    assert seen > 50  # many draws whose first loss is a URE inside a window


def test_trials_do_not_depend_on_how_they_are_cut():
    sets = [[0, 1, 2, 3, 4]]
    a = _runner(5, sets, [1], [2.0] * 5, 500.0, 100.0, 1.0, seed=7)
    b = _runner(5, sets, [1], [2.0] * 5, 500.0, 100.0, 1.0, seed=7)
    a.run(0, 300)
    for lo in range(0, 300, 37):
        b.run(lo, min(37, 300 - lo))
    assert a.out[K.O_LOSSES] == b.out[K.O_LOSSES] > 0
    assert a.out[K.O_LAM] == pytest.approx(b.out[K.O_LAM], rel=1e-12)


@pytest.mark.parametrize("shape", [0.7, 1.0, 2.5])
def test_lifetimes_follow_the_weibull_distribution(shape):
    scale, n = 1000.0, 20_000
    x = np.zeros(n)
    K.draw_lifetimes(np.zeros(1, np.uint64), 3, scale, shape, x)
    x.sort()
    cdf = 1 - np.exp(-((x / scale) ** shape))
    ecdf_hi = np.arange(1, n + 1) / n
    d = max(np.max(ecdf_hi - cdf), np.max(cdf - (ecdf_hi - 1 / n)))
    assert d < 1.63 / math.sqrt(n)  # Kolmogorov-Smirnov at the 1 % level
    assert x.mean() == pytest.approx(scale * math.gamma(1 + 1 / shape), rel=0.03)


# ---------------------------------------------------------------------------------------------
# against the analytic values


def _toml(tmp_path, body, name="a.toml"):
    p = tmp_path / name
    p.write_text(body)
    return p


RAID5 = '[[group]]\nname = "g"\nlayout = "raid5"\nwidth = 5\nhot_spares = 1\n' \
        'drive = "savvio_15k3_300g"\n'
RAID6 = '[[group]]\nname = "g"\nlayout = "raid6"\nwidth = 6\nhot_spares = 1\n' \
        'drive = "savvio_15k3_300g"\n'


def _within(x, ci):
    return ci[0] <= x <= ci[1]


def test_raid5_mttdl_agrees_with_markov(tmp_path):
    # MTTF 1000 h and a 0.2 h window: lambda W = 2e-4, so the Markov formulas' neglected
    # terms (order lambda W) are far inside the interval; 100 failures per trial
    mttf, w_h = 1000.0, 0.2
    (r,) = P.risk([str(_toml(tmp_path, RAID5))], window_s=w_h * 3600, weibull_shape=1.0,
                  weibull_scale_hours=mttf, years=20_000 / 8760, trials=4000, seed=1)
    n = 5
    classic = mttf ** 2 / (n * (n - 1) * w_h) / 8760
    assert r.mttdl_markov_years == pytest.approx(classic)
    ci = r.mttdl_ci_years
    assert (ci[1] - ci[0]) / r.mttdl_years < 0.02  # a real test: the interval is narrow
    assert _within(classic, ci) and _within(r.mttdl_independent_years, ci)
    # the losses counted on the paths agree too (their own exact interval)
    assert _within(r.mttdl_years, r.mttdl_counted_ci_years)


def test_raid6_mttdl_agrees_with_markov(tmp_path):
    # lambda W = 5e-4. The classical P+Q formula (Chen et al. 1994) has one repair at a time;
    # the model rebuilds every failed drive on its own (as the replay engine does), which
    # halves the time two drives are down together: its MTTDL is twice the classical one to
    # first order, and the chain with independent repairs gives it exactly
    mttf, w_h = 1000.0, 0.5
    (r,) = P.risk([str(_toml(tmp_path, RAID6))], window_s=w_h * 3600, weibull_shape=1.0,
                  weibull_scale_hours=mttf, years=20_000 / 8760, trials=100_000, seed=2)
    n = 6
    classic = mttf ** 3 / (n * (n - 1) * (n - 2) * w_h ** 2) / 8760
    assert r.mttdl_markov_years == pytest.approx(classic)
    ci = r.mttdl_ci_years
    assert (ci[1] - ci[0]) / r.mttdl_years < 0.06
    assert _within(r.mttdl_independent_years, ci)
    assert _within(2 * classic, ci) and not _within(classic, ci)
    assert r.trials_at_tolerance > 10_000


def test_counted_and_compensator_estimates_agree(tmp_path):
    # frequent losses: a RAID-5 of 8 with long windows; both estimators are unbiased
    (r,) = P.risk([str(_toml(tmp_path, RAID5.replace("width = 5", "width = 8")))],
                  window_s=20 * 3600, weibull_shape=1.0, weibull_scale_hours=500.0,
                  years=0.01, trials=20_000, seed=3)
    assert r.losses_counted > 1000 and 0.1 < r.p_loss_counted < 0.9
    lo, hi = P.garwood(r.losses_counted)
    assert lo / r.trials <= r.expected_losses <= hi / r.trials
    (a, b), (c, d) = r.p_loss_ci, r.p_loss_counted_ci
    assert a <= d and c <= b  # the two intervals overlap


def test_weibull_shape_1_equals_the_exponential(tmp_path):
    a = _toml(tmp_path, RAID6)
    afr = 0.3
    (e,) = P.risk([str(a)], window_s=72_000, afr=afr, years=3, trials=20_000, seed=5)
    (w,) = P.risk([str(a)], window_s=72_000, weibull_shape=1.0,
                  weibull_scale_hours=8760 / -math.log(1 - afr), years=3, trials=20_000,
                  seed=5)
    assert e.expected_losses == pytest.approx(w.expected_losses, rel=1e-12)
    assert e.losses_counted == w.losses_counted
    assert e.mttdl_markov_years == pytest.approx(w.mttdl_markov_years, rel=1e-12)
    # and another seed agrees within the interval (the same distribution, not the same draws)
    (o,) = P.risk([str(a)], window_s=72_000, weibull_shape=1.0,
                  weibull_scale_hours=8760 / -math.log(1 - afr), years=3, trials=20_000,
                  seed=6)
    assert o.expected_losses != e.expected_losses
    (a, b), (c, d) = o.expected_losses_ci, e.expected_losses_ci
    assert a <= d and c <= b  # the two intervals overlap


def test_weibull_wear_out_lowers_the_risk_early_in_life(tmp_path):
    # the same mean life, shape 3 (wear-out) against 1: over a period shorter than the mean
    # life fewer drives fail early, so fewer overlaps
    a = str(_toml(tmp_path, RAID5))
    mean = 20_000.0
    (one,) = P.risk([a], window_s=36_000, weibull_shape=1.0, weibull_scale_hours=mean,
                    years=1, trials=20_000, seed=1)
    (three,) = P.risk([a], window_s=36_000, weibull_shape=3.0,
                      weibull_scale_hours=mean / math.gamma(1 + 1 / 3), years=1,
                      trials=20_000, seed=1)
    assert three.mttdl_markov_years is None and one.mttdl_markov_years is not None
    assert three.expected_losses_ci[1] < one.expected_losses_ci[0]


def test_same_seed_same_answer(tmp_path):
    a = str(_toml(tmp_path, RAID6))

    def run(seed):
        (r,) = P.risk([a], window_s=3600, afr=0.2, years=2, trials=5000, seed=seed)
        d = r.as_dict()
        del d["elapsed_s"], d["lifetimes_per_s"]
        return d

    assert run(11) == run(11)
    assert run(11) != run(12)


# ---------------------------------------------------------------------------------------------
# intervals


def test_garwood_and_wilson_intervals():
    assert P.garwood(0) == (0.0, pytest.approx(-math.log(0.025), rel=1e-9))
    # Garwood's table values (e.g. Ulm 1990, Table 1)
    lo, hi = P.garwood(1)
    assert lo == pytest.approx(0.0253, abs=1e-4) and hi == pytest.approx(5.5716, abs=1e-4)
    lo, hi = P.garwood(10)
    assert lo == pytest.approx(4.7954, abs=1e-4) and hi == pytest.approx(18.3904, abs=1e-4)
    # the chi-square approximation above 1000 meets the exact sum there
    exact = P.garwood(1000)
    approx = (P._chi2_wh(0.025, 2000) / 2, P._chi2_wh(0.975, 2002) / 2)
    assert approx[0] == pytest.approx(exact[0], rel=1e-4)
    assert approx[1] == pytest.approx(exact[1], rel=1e-4)
    # Wilson: 0 of n has upper bound z^2 / (n + z^2)
    z2 = P.Z95 ** 2
    assert P.wilson(0, 10) == (0.0, pytest.approx(z2 / (10 + z2)))
    lo, hi = P.wilson(5, 10)
    assert lo == pytest.approx(1 - hi)


@pytest.mark.parametrize("xs", [[1.0, 3.0], [2.0, 4.0, 9.0], [5.0, 5.5, 6.0, 7.5]])
def test_mean_ci_is_the_normal_interval_of_the_sample_standard_deviation(xs):
    """_mean_ci from the values' sum and sum of squares: the mean +- 1.959964 s / sqrt(n),
    s the sample standard deviation (n - 1 in its denominator: statistics.stdev), the lower
    bound at least 0. For {1, 3}: s = sqrt(2), half-width 1.959964, (2, 0.040036, 3.959964)."""
    import statistics

    n = len(xs)
    m, lo, hi = P._mean_ci(sum(xs), sum(x * x for x in xs), n)
    half = 1.959964 * statistics.stdev(xs) / math.sqrt(n)
    assert m == pytest.approx(statistics.mean(xs), rel=1e-12)
    assert lo == pytest.approx(max(0.0, m - half), rel=1e-6)
    assert hi == pytest.approx(m + half, rel=1e-6)
    if xs == [1.0, 3.0]:
        assert (m, lo, hi) == pytest.approx((2.0, 0.040036, 3.959964), abs=1e-6)


# ---------------------------------------------------------------------------------------------
# redundancy sets of real configurations


def _sets(toml):
    return P.redundancy_sets(build_array(parse_array(toml, ROOT / "x.toml")))


def test_redundancy_sets_of_raid_groups_and_pools():
    s = _sets({"group": [
        {"name": "a", "layout": "raid6", "width": 6, "count": 2, "hot_spares": 2,
         "drive": "atlas10k"},
        {"name": "b", "layout": "raid10", "width": 4, "drive": "atlas10k"},
        {"name": "c", "layout": "raid1", "width": 3, "drive": "atlas10k"},
        {"name": "d", "layout": "pool", "width": 6, "raid": "raid5", "group_width": 3,
         "hot_spares": 1, "drive": "atlas10k"},
        {"name": "e", "layout": "raid0", "width": 2, "drive": "atlas10k"}]})
    got = sorted((s.tol[i], sorted(s.drives[x] for x in m)) for i, m in enumerate(s.sets))
    assert got == sorted([
        (2, list(range(0, 6))), (2, list(range(6, 12))),  # spares 12, 13 are not members
        (1, [14, 15]), (1, [16, 17]),  # RAID-10: mirrored pairs
        (2, [18, 19, 20]),  # 3-way RAID-1 tolerates 2
        (1, [21, 22, 23]), (1, [24, 25, 26]),  # pool: private RAID-5 groups; spare 27
        (0, [28, 29])])
    assert len(set(s.domain)) == len(s.sets) and s.ddp_share == {}


def test_pool_sets_are_its_dstripes_and_the_triple_share_is_counted():
    toml = {"group": [{"name": "p", "layout": "ddp", "width": 30, "preservation": 1,
                       "piece": "64GiB", "drive": "savvio_15k3_300g"}]}
    arr = build_array(parse_array(toml, ROOT / "x.toml"))
    s = P.redundancy_sets(arr)
    pl, _first, pool_drives = arr.pools[0]
    assert sorted(tuple(sorted(s.drives[x] for x in m)) for m in s.sets) == \
        sorted(tuple(sorted(int(pool_drives[d]) for d in row)) for row in pl.members)
    assert set(s.tol) == {2} and len(set(s.domain)) == 1
    # brute force over every triple of drives
    dstripes = [set(int(d) for d in row) for row in pl.members]
    triples = list(itertools.combinations(range(30), 3))
    shared = sum(1 for t in triples if any(set(t) <= ds for ds in dstripes))
    assert s.ddp_share["p"] == pytest.approx(shared / len(triples))
    assert 0 < s.ddp_share["p"] < 1  # so few D-stripes that not every triple shares one


def test_a_pool_loses_data_only_when_failures_share_a_dstripe():
    # three drives exposed at once: a loss exactly when the third shares a D-stripe with the
    # other two
    sets = [[0, 1, 2, 3], [3, 4, 5, 6]]
    run = _runner(7, sets, [2, 2], [5.0] * 7, 100.0, 1e6, 1.0, domains=[0, 0])
    ev_s = np.zeros(4, np.int64)
    res = np.zeros(3)
    tl = np.zeros(8), np.zeros(8, np.int64)
    for trio, lost in (((0, 1, 2), 1), ((0, 1, 4), 0), ((3, 4, 6), 1), ((2, 3, 4), 0)):
        ev_s[:3] = trio
        K.sweep(np.array([1.0, 2.0, 3.0, 0.0]), ev_s, 3, 100.0, 1e6, 1.0, run.s.arrays(),
                run.W, *tl, np.zeros(1, np.uint64), res)
        assert res[0] == lost, trio


# ---------------------------------------------------------------------------------------------
# run folders: windows measured by replay, and bad input

SMALL = ROOT / "traces" / "samples" / "tracefs-fio-loop0-vda.txt.xz"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """A real replay of the bundled capture on a RAID-5 of 5 with a hot spare, drive 2 failed
    0.5 s in (a few seconds with the kernels compiled)."""
    from blocklab.pipeline.ingest import ingest

    d = tmp_path_factory.mktemp("risk")
    trace = d / "t.parquet"
    ingest([str(SMALL)], str(trace), device="7:0")
    toml = _toml(d, RAID5 + '[rebuild]\nunit = "64MiB"\n')
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(toml), "-o",
                                   str(d / "run"), "--fail", "2@0.5", "--drive-ops", "--json"])
    assert res.exit_code == 0, res.output
    return d / "run", json.loads(res.stdout)


def test_windows_are_read_from_a_replay(replayed, tmp_path):
    run, rep = replayed
    (rb,) = rep["rebuilds"]
    res = CliRunner().invoke(app, ["risk", str(run), "--trials", "2000", "--json"])
    assert res.exit_code == 0, res.output
    (r,) = json.loads(res.stdout)
    assert r["window_source"] == "measured (longest)"
    assert r["windows_s"] == {"g": pytest.approx(rb["window_s"])}
    assert r["measured"][0]["drive"] == 2 and r["drives"] == 5
    # --window-s replaces the measured window; the table form prints the run's whole path,
    # folded where the column is too narrow for it (rich's default cut it with an ellipsis)
    deep = tmp_path / ("a-folder-with-a-long-name-" * 4)
    deep.symlink_to(run, target_is_directory=True)
    res = CliRunner().invoke(app, ["risk", str(deep), "--window-s", "60", "--trials", "2000"])
    first_cells = "".join(line.split("│")[1].strip() for line in res.stdout.splitlines()
                          if line.startswith("│"))
    assert res.exit_code == 0 and str(deep) in first_cells and "60.0" in res.stdout


def _run_folder(path, toml, events=None, failures=()):
    """A run folder written through RUN_SCHEMAS (no replay): meta.json, ios, events."""
    path.mkdir()
    cfg = parse_array(toml, path / "a.toml")
    arr = build_array(cfg)
    pq.write_table(pa.table({n: pa.array([False if pa.types.is_boolean(t) else 0], t)
                             for n, t in zip(
        RUN_SCHEMAS["ios"].names, RUN_SCHEMAS["ios"].types, strict=True)},
        schema=RUN_SCHEMAS["ios"]), path / "ios.parquet")
    if events is not None:
        cols = {n: [] for n in RUN_SCHEMAS["events"].names}
        for t_ns, ev, drive in events:
            for n, v in zip(cols, [t_ns, ev, drive, arr.d_group[drive], None, None, None,
                                   None], strict=True):
                cols[n].append(v)
        pq.write_table(pa.table({n: pa.array(v, RUN_SCHEMAS["events"].field(n).type)
                                 for n, v in cols.items()}, schema=RUN_SCHEMAS["events"]),
                       path / "events.parquet")
    (path / "meta.json").write_text(json.dumps({
        "run_schema_version": RUN_SCHEMA_VERSION, "blocklab_version": "test",
        "array": {"path": "a.toml", "config": dataclasses.asdict(cfg)},
        "failures": [{"drive": d, "at_s": t} for d, t in failures],
        "drives": [{"drive": i, "group": arr.d_group[i], "role": arr.d_role[i],
                    "model": arr.d_name[i]} for i in range(arr.drives)]}))
    return path


R5 = {"group": [{"name": "g", "layout": "raid5", "width": 5, "hot_spares": 1,
                 "drive": "savvio_15k3_300g"}]}


def test_a_spare_failure_is_not_a_window_and_a_longest_window_is_taken(tmp_path):
    s = 1_000_000_000
    run = _run_folder(tmp_path / "run", R5, events=[
        (1 * s, "failure", 5),  # the spare: ignored
        (2 * s, "failure", 1), (2 * s, "rebuild_start", 1), (40 * s, "rebuild_end", 1),
        (50 * s, "failure", 3), (50 * s, "rebuild_start", 3), (150 * s, "rebuild_end", 3)])
    (r,) = P.risk([str(run)], trials=1000)
    assert r.windows_s == {"g": pytest.approx(100.0)}
    assert [m["drive"] for m in r.measured] == [1, 3]


@pytest.mark.parametrize("args,msg", [
    (["{toml}"], "a.toml: an array configuration has no measured rebuild window: give "
     "--window-s"),
    (["{toml}", "--window-s", "60", "--afr", "0"], "--afr: an annual failure rate is a "
     "fraction in (0, 1), found 0"),
    (["{toml}", "--window-s", "60", "--afr", "1.5"], "found 1.5"),
    (["{toml}", "--window-s", "60", "--weibull-shape", "2"], "--weibull-shape and "
     "--weibull-scale-hours go together"),
    (["{toml}", "--window-s", "60", "--afr", "0.1", "--weibull-shape", "2",
      "--weibull-scale-hours", "9"], "give one failure model"),
    (["{toml}", "--window-s", "-1"], "--window-s: must be a number of seconds"),
    (["{toml}", "--window-s", "60", "--years", "0"], "--years: must be positive"),
    (["{noevents}"], "noevents/events.parquet: no such file: the run had no drive failure"),
    (["{noend}"], "the rebuild of drive 2 (g, failed at 1 s) did not end within the run"),
    (["{nowhere}", "--window-s", "60"], "no such file or folder"),
])
def test_bad_input(tmp_path, args, msg):
    s = 1_000_000_000
    paths = {
        "toml": _toml(tmp_path, RAID5),
        "noevents": _run_folder(tmp_path / "noevents", R5),
        "noend": _run_folder(tmp_path / "noend", R5, events=[
            (s, "failure", 2), (s, "rebuild_start", 2)]),
        "nowhere": tmp_path / "nowhere"}
    res = CliRunner().invoke(app, ["risk", *(a.format(**paths) for a in args),
                                   "--trials", "100"])
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("blocklab: error: ") and msg in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_run_without_events_is_assessed_with_window_s(tmp_path):
    run = _run_folder(tmp_path / "run", R5)
    res = CliRunner().invoke(app, ["risk", str(run), "--window-s", "3600", "--trials", "1000",
                                   "--json"])
    assert res.exit_code == 0, res.output
    (r,) = json.loads(res.stdout)
    assert r["window_source"] == "--window-s" and r["windows_s"] == {"g": 3600}


# ---------------------------------------------------------------------------------------------
# unrecoverable read errors (issue 23, deliverable 1)


def _p_exact(p: float, bits: int) -> float:
    """1 - (1 - p)^bits in 60-digit decimal arithmetic (floats cannot hold 1 - 1e-14 well
    enough to raise it to the 10^13th power)."""
    import decimal

    with decimal.localcontext() as c:
        c.prec = 60
        return float(1 - (1 - decimal.Decimal(p)) ** bits)


def test_a_rebuild_meets_a_ure_with_the_analytic_probability():
    """A RAID-5 of 5 loses one drive; its 10-hour rebuild reads 4 x 300 GB at a URE rate of
    1e-14 per bit: over many URE draws the share of rebuilds that lose data is
    1 - (1 - p)^bits, and the compensator is exactly the URE hazard bits x -ln(1 - p)."""
    p, read, w = 1e-14, 4 * 300e9, 10.0
    bits = int(8 * read)
    want = _p_exact(p, bits)
    assert P.p_ure(p, read) == pytest.approx(want, rel=1e-12)
    h = bits * -math.log1p(-p)
    run = _runner(5, [[0, 1, 2, 3, 4]], [1], [w] * 5, 100.0, 1e12, 1.0, ure=[h / w] * 5)
    ev_t, ev_s = np.array([1.0, 0.0]), np.array([2, 0], np.int64)
    tl = np.zeros(4), np.zeros(4, np.int64)
    res = np.zeros(3)
    states = np.random.default_rng(5).integers(0, 1 << 63, 20_000, dtype=np.int64)
    lost = 0
    for state in states:
        K.sweep(ev_t, ev_s, 1, 100.0, 1e12, 1.0, run.s.arrays(), run.W, *tl,
                np.array([state], np.uint64), res)
        lost += res[0] >= 1
        assert res[1] == pytest.approx(h, rel=1e-6)  # the others' failure hazard is 1e-10
    sigma = math.sqrt(want * (1 - want) / len(states))
    assert abs(lost / len(states) - want) < 4.5 * sigma, (lost / len(states), want)


def test_raid6_meets_a_ure_only_when_two_failures_overlap():
    w, h = 10.0, 0.05
    run = _runner(6, [list(range(6))], [2], [w] * 6, 100.0, 1e12, 1.0, ure=[h] * 6)
    tl = np.zeros(8), np.zeros(8, np.int64)
    res = np.zeros(3)
    urng = np.array([12345], np.uint64)
    K.sweep(np.array([1.0, 0.0]), np.array([0, 0], np.int64), 1, 100.0, 1e12, 1.0,
            run.s.arrays(), run.W, *tl, urng, res)
    assert res[0] == 0 and res[1] < 1e-9  # one failure: the second parity covers a URE
    # two failures at 1 h and 4 h: 7 hours with no redundancy, both rebuilds reading
    K.sweep(np.array([1.0, 4.0, 0.0]), np.array([0, 1, 0], np.int64), 2, 100.0, 1e12, 1.0,
            run.s.arrays(), run.W, *tl, urng, res)
    assert res[1] == pytest.approx(7 * 2 * h, rel=1e-6)


def test_raid5_with_ures_agrees_with_markov(tmp_path):
    # MTTF 1000 h, a 0.2 h window, and a rebuild read of 4 members' capacity at a rate that
    # makes P(URE) per rebuild about 1 %: the URE term n lambda P_ure is 12x the double
    # failure term, and the simulated MTTDL must agree with the Markov rate that adds it
    mttf, w_h = 1000.0, 0.2
    toml = _toml(tmp_path, RAID5)
    (probe,) = P.risk([str(toml)], window_s=w_h * 3600, trials=10, ure="1e-15")
    read = probe.rebuild_read_bytes["g"]
    rate = 0.01 / (8 * read)
    (r,) = P.risk([str(toml)], window_s=w_h * 3600, weibull_shape=1.0,
                  weibull_scale_hours=mttf, years=20_000 / 8760, trials=4000, seed=4,
                  ure=f"{rate!r}")
    n, lam = 5, 1 / mttf
    pu = _p_exact(rate, int(8 * read))
    assert r.p_ure_per_rebuild["g"] == pytest.approx(pu, rel=1e-9)
    # every URE met without redundancy is a loss event: a rebuild meets -ln(1 - P) of them on
    # average (0.5 % more than P here, which the interval resolves)
    classic = 1 / (n * (n - 1) * lam ** 2 * w_h + n * lam * -math.log1p(-pu)) / 8760
    assert r.mttdl_markov_years == pytest.approx(classic)
    ci = r.mttdl_ci_years
    assert (ci[1] - ci[0]) / r.mttdl_years < 0.05
    assert _within(classic, ci), (classic, ci)
    assert _within(r.mttdl_years, r.mttdl_counted_ci_years)  # losses counted on the paths
    # without UREs the same array is 13x safer
    (r0,) = P.risk([str(toml)], window_s=w_h * 3600, weibull_shape=1.0,
                   weibull_scale_hours=mttf, years=20_000 / 8760, trials=4000, seed=4)
    assert r0.mttdl_years > 10 * r.mttdl_years
    assert r0.ure_per_bit is None and r0.p_ure_per_rebuild == {}


def test_ure_rates_from_the_catalog_and_the_reads_of_a_toml(tmp_path):
    (r,) = P.risk([str(_toml(tmp_path, RAID5))], window_s=3600, trials=100, ure="catalog")
    assert r.ure_per_bit == {"g": 1e-16}
    assert "Savvio 15K.3" in r.ure_source and "10^16" in r.ure_source
    member = PI.member_bytes(build_array(parse_array(
        {"group": [{"name": "g", "layout": "raid5", "width": 5, "hot_spares": 1,
                    "drive": "savvio_15k3_300g"}]}, tmp_path / "x.toml")))["g"]
    assert 0.95 * 300e9 < member <= 300e9  # the members' capacity the group uses
    assert r.rebuild_read_bytes == {"g": pytest.approx(4 * member)}
    assert r.p_ure_per_rebuild["g"] == pytest.approx(_p_exact(1e-16, int(32 * member)),
                                                     rel=1e-9)
    atlas = _toml(tmp_path, RAID5.replace("savvio_15k3_300g", "atlas10k"), "b.toml")
    with pytest.raises(P.BlocklabError, match="has no ure_per_bit in the catalog"):
        P.risk([str(atlas)], window_s=3600, trials=10, ure="catalog")


def test_rebuild_reads_measured_in_a_replay(replayed):
    run, _rep = replayed
    res = CliRunner().invoke(app, ["risk", str(run), "--trials", "2000", "--ure", "1e-14",
                                   "--json"])
    assert res.exit_code == 0, res.output
    (r,) = json.loads(res.stdout)
    ops = pq.read_table(run / "drive_ops.parquet", columns=["kind", "sectors"]).to_pylist()
    read = sum(o["sectors"] * 512 for o in ops if o["kind"] == 3)  # OPK_REBUILD_READ
    assert read > 0 and r["rebuild_read_bytes"] == {"g": pytest.approx(read)}
    assert "drive_ops" in r["read_source"]
    assert r["p_ure_per_rebuild"]["g"] == pytest.approx(_p_exact(1e-14, 8 * read), rel=1e-9)
    res = CliRunner().invoke(app, ["risk", str(run), "--trials", "2000", "--ure", "1e-14"])
    assert res.exit_code == 0 and "P(URE) = 1 - (1 - p)^bits" in res.stdout


@pytest.mark.parametrize("value", ["0", "2e-10", "-1e-15", "often"])
def test_bad_ure(tmp_path, value):
    res = CliRunner().invoke(app, ["risk", str(_toml(tmp_path, RAID5)), "--window-s", "60",
                                   "--trials", "10", "--ure", value])
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith(f"blocklab: error: --ure {value}: expected catalog or a rate")
    assert len(res.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------
# latent defects and scrubbing (issue 23, deliverable 1: --scrub-interval)


def _p_scrubbed(p: float, bits: int, latent: float, scrub_h: float) -> float:
    """1 - (1 - p)^bits (1 - exp(-L S)) / (L S) in 60-digit decimals: the rebuild's reads
    meet no URE, and none of the L A latent defects with A uniform in [0, S)."""
    import decimal

    with decimal.localcontext() as c:
        c.prec = 60
        x = decimal.Decimal(latent) * decimal.Decimal(scrub_h)
        keep = (1 - (-x).exp()) / x
        return float(1 - (1 - decimal.Decimal(p)) ** bits * keep)


def test_a_scrubbed_rebuild_meets_latent_defects_with_the_analytic_probability():
    """A RAID-5 of 5 loses one drive; its 10-hour rebuild's reads carry hazard U, and the
    survivors hold L A latent defects, A the time since the last weekly scrub: over many URE
    draws (each its own scrub phase) the share of rebuilds that lose data is
    1 - exp(-U) (1 - exp(-L S)) / (L S), and the mean compensator U + L S / 2."""
    w, scrub, u, big_l = 10.0, 168.0, 0.05, 0.004  # L S = 0.672 defects at the longest
    run = _runner(5, [[0, 1, 2, 3, 4]], [1], [w] * 5, 400.0, 1e12, 1.0, ure=[u / w] * 5,
                  lat=[big_l / w] * 5, scrub_h=scrub)
    ev_t, ev_s = np.array([200.0, 0.0]), np.array([2, 0], np.int64)
    tl = np.zeros(4), np.zeros(4, np.int64)
    res = np.zeros(3)
    states = np.random.default_rng(8).integers(0, 1 << 63, 20_000, dtype=np.int64)
    lost, lam = 0, []
    for state in states:
        K.sweep(ev_t, ev_s, 1, 400.0, 1e12, 1.0, run.s.arrays(), run.W, *tl,
                np.array([state], np.uint64), res)
        lost += res[0] >= 1
        lam.append(res[1])
    want = 1 - math.exp(-u) * -math.expm1(-big_l * scrub) / (big_l * scrub)
    assert P.p_ure_scrubbed(0.0, 0.0, big_l, scrub) == pytest.approx(
        1 + math.expm1(-big_l * scrub) / (big_l * scrub), rel=1e-12)
    sigma = math.sqrt(want * (1 - want) / len(states))
    assert abs(lost / len(states) - want) < 4.5 * sigma, (lost / len(states), want)
    # the compensator is U + L A, A uniform in [0, S): mean U + L S / 2, and its range
    lam = np.array(lam)
    assert lam.min() >= u * (1 - 1e-9) and lam.max() <= (u + big_l * scrub) * (1 + 1e-9)
    sd = big_l * scrub / math.sqrt(12 * len(states))
    assert abs(lam.mean() - (u + big_l * scrub / 2)) < 4.5 * sd
    # and against the plain-Python reference, draw by draw
    for state in states[:200]:
        K.sweep(ev_t, ev_s, 1, 400.0, 1e12, 1.0, run.s.arrays(), run.W, *tl,
                np.array([state], np.uint64), res)
        n, lam_r, lam_f = ref.losses([(200.0, 2)], 400.0, [w] * 5, [[0, 1, 2, 3, 4]], [1],
                                     1e12, 1.0, [u / w] * 5, ref.Rng(int(state)),
                                     [big_l / w] * 5, scrub)
        assert res[0] == n and res[1] == pytest.approx(lam_r, rel=1e-9)


def test_scrub_in_risk_against_the_analytic_expression_and_markov(tmp_path):
    """``risk --ure R --scrub-interval S``: P(URE) per rebuild is the analytic expression
    with L = (bytes read / member bytes) x 8 x read-per-day / 24 x -ln(1 - p), the mean
    latent defects L S / 2, and the simulated MTTDL agrees with the Markov rate that adds
    n lambda (UREs per rebuild) with the latent defects in the UREs."""
    mttf, w_h = 1000.0, 0.2
    toml = _toml(tmp_path, RAID5)
    (probe,) = P.risk([str(toml)], window_s=w_h * 3600, trials=10, ure="1e-15")
    read = probe.rebuild_read_bytes["g"]
    member = read / 4  # a RAID-5 of 5 reads its four survivors
    rate = 0.005 / (8 * read)  # the reads alone: about 0.5 % per rebuild
    per_day = 8e12  # a heavy workload (8 TB a day): the latent defects dominate
    (r,) = P.risk([str(toml)], window_s=w_h * 3600, weibull_shape=1.0,
                  weibull_scale_hours=mttf, years=20_000 / 8760, trials=4000, seed=4,
                  ure=f"{rate!r}", scrub_interval="7d", workload_read_per_day=f"{per_day:.0f}")
    big_l = 4 * 8 * per_day / 24 * -math.log1p(-rate)
    assert r.scrub_interval_h == 168.0 and r.workload_read_per_day_bytes == per_day
    assert r.latent_defects_per_rebuild["g"] == pytest.approx(big_l * 84, rel=1e-9)
    assert read == pytest.approx(4 * member)
    pu = _p_scrubbed(rate, int(8 * read), big_l, 168.0)
    assert r.p_ure_per_rebuild["g"] == pytest.approx(pu, rel=1e-6)
    n, lam = 5, 1 / mttf
    ures = 8 * read * -math.log1p(-rate) + big_l * 84
    classic = 1 / (n * (n - 1) * lam ** 2 * w_h + n * lam * ures) / 8760
    assert r.mttdl_markov_years == pytest.approx(classic)
    ci = r.mttdl_ci_years
    assert (ci[1] - ci[0]) / r.mttdl_years < 0.05
    assert _within(classic, ci), (classic, ci)
    assert _within(r.mttdl_years, r.mttdl_counted_ci_years)
    # scrubbing twice as often halves the latent defects; without it, the reads alone
    (half,) = P.risk([str(toml)], window_s=w_h * 3600, weibull_shape=1.0,
                     weibull_scale_hours=mttf, years=20_000 / 8760, trials=4000, seed=4,
                     ure=f"{rate!r}", scrub_interval="84h",
                     workload_read_per_day=f"{per_day:.0f}")
    assert half.latent_defects_per_rebuild["g"] == pytest.approx(big_l * 42, rel=1e-9)
    assert half.mttdl_ci_years[0] > r.mttdl_ci_years[1]
    (none,) = P.risk([str(toml)], window_s=w_h * 3600, weibull_shape=1.0,
                     weibull_scale_hours=mttf, years=20_000 / 8760, trials=4000, seed=4,
                     ure=f"{rate!r}")
    assert none.scrub_interval_h is None and none.latent_defects_per_rebuild == {}
    assert none.p_ure_per_rebuild["g"] == pytest.approx(P.p_ure(rate, read), rel=1e-12)


def test_without_scrubbing_nothing_changes():
    """Latent rates given but no scrub interval: the kernel's results are bit for bit those
    without them (no draw for a phase, no latent term)."""
    sets = [[0, 1, 2, 3, 4]]
    a = _runner(5, sets, [1], [30.0] * 5, 2000.0, 300.0, 1.0, seed=3, ure=[0.01] * 5)
    b = _runner(5, sets, [1], [30.0] * 5, 2000.0, 300.0, 1.0, seed=3, ure=[0.01] * 5,
                lat=[0.5] * 5, scrub_h=0.0)
    a.run(0, 3000)
    b.run(0, 3000)
    assert a.out[K.O_LOSSES] > 0 and np.array_equal(a.out, b.out)


@pytest.mark.parametrize("args,msg", [
    (["--ure", "1e-15", "--scrub-interval", "0"], "--scrub-interval 0: expected a duration "
     "above 0"),
    (["--ure", "1e-15", "--scrub-interval", "-7d"], "--scrub-interval -7d: expected a "
     "duration above 0"),
    (["--ure", "1e-15", "--scrub-interval", "weekly"], "--scrub-interval weekly: expected a "
     "duration"),
    (["--scrub-interval", "7d"], "--scrub-interval 7d: needs --ure"),
    (["--ure", "1e-15", "--workload-read-per-day", "1TB"], "--workload-read-per-day: goes "
     "with --scrub-interval"),
    (["--ure", "1e-15", "--scrub-interval", "7d", "--workload-read-per-day", "lots"],
     "--workload-read-per-day: expected a size"),
    (["--ure", "1e-15", "--scrub-interval", "7d", "--workload-read-per-day", "0"],
     "--workload-read-per-day 0: expected a size above 0"),
])
def test_bad_scrub(tmp_path, args, msg):
    res = CliRunner().invoke(app, ["risk", str(_toml(tmp_path, RAID5)), "--window-s", "60",
                                   "--trials", "10", *args])
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("blocklab: error: ") and msg in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
