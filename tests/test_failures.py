"""Drive failures, rebuilds, rebalances and initializations (issue 5): the engine against the
plain-Python reference on random arrays with failures; pool placement balanced and stable;
storage pool slices round-robin; rebuild accounting; the run folder's events."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.kernels.engine import tables as T
from blocklab.pipeline.cli import app
from blocklab.pipeline.model import placement as PL
from blocklab.pipeline.model.array import plan
from blocklab.pipeline.model.config import ConfigError, parse_array
from blocklab.pipeline.replay import _rebuild_windows, build_array, run_engine
from blocklab.traces.schema import EVENT_NAMES

from .conftest import ROOT
from .reference import engine as ref
from .test_engine import controller

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)


@st.composite
def failing_array(draw):
    """A small array with failures (and for a pool, perhaps a replacement), with rebuild
    units large enough that a whole drive is a few dozen units."""
    layout = draw(st.sampled_from(["raid1", "raid10", "raid5", "raid6", "ddp", "pool"]))
    rebuild = {"priority": draw(st.sampled_from(["lowest", "medium", "high", "highest"])),
               "unit": "256MiB", "depth": draw(st.integers(1, 4)),
               "rate_mb_s": draw(st.sampled_from([0, 0, 50000])),
               "start_delay_s": draw(st.sampled_from([0, 0.00001]))}
    g = {"name": "g", "layout": layout, "drive": "atlas10k", "stripe_unit": "64KiB"}
    if layout == "ddp":
        g.update(width=12, preservation=1, piece="1GiB", count=1)
    elif layout == "pool":
        g.update(width=6, raid="raid5", group_width=3, slice="256MiB", count=2, hot_spares=1)
    else:
        width = {"raid1": 2, "raid10": 4, "raid5": 4, "raid6": 5}[layout]
        g.update(width=width, hot_spares=draw(st.integers(0, 2)))
    toml = {"group": [g], "rebuild": rebuild}
    drives = g["width"] + g.get("hot_spares", 0)
    nfail = draw(st.integers(1, min(3, drives)))
    failed = draw(st.lists(st.integers(0, drives - 1), min_size=nfail, max_size=nfail,
                           unique=True))
    times = sorted(draw(st.lists(st.integers(0, 200), min_size=nfail, max_size=nfail)))
    toml["failure"] = [{"drive": d, "at_s": t / 1e6} for d, t in zip(failed, times,
                                                                     strict=True)]
    if layout == "ddp" and draw(st.booleans()):
        # (several drives replaced at once, and a new drive failing during its rebalance:
        # test_several_pieces_copied_back_at_once_equal_the_reference; drawn here they made
        # the two property tests take over two minutes)
        toml["replace"] = [{"drive": failed[0], "at_s": (times[-1] + 100) / 1e6}]
    if layout in ("raid5", "raid6", "raid10") and draw(st.booleans()):
        toml["init"] = [{"group": "g", "at_s": 0}]
    return toml


def _assert_same(got, want) -> None:
    """The kernel's run (run_engine) is the reference's: arrivals, starts, completions, hits
    and lost requests (the reference finds those sector by sector: tests/reference/layout.py),
    busy time, run events and every drive operation."""
    assert got["arrive"].tolist() == want.arrive
    assert got["hit"].tolist() == want.hit
    assert got["start"].tolist() == want.start
    assert got["done"].tolist() == want.done
    assert got["busy_ns"].tolist() == want.busy
    assert [tuple(e) for e in got["events"].tolist()] == want.events
    recorded = list(zip(*(got[f"op_{k}"].tolist() for k in ("drive", "item", "kind", "qtime",
                                                             "start", "done", "lba", "n")),
                        strict=True))
    assert recorded == want.records


@settings(max_examples=45, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(failing_array(), st.data())
def test_engine_with_failures_equals_reference(toml, data):
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(
        data.draw(st.sampled_from([2000, 5000])), data.draw(st.sampled_from([0, 1]))))
    tasks = plan(arr)
    n = data.draw(st.integers(0, 40))
    arrive = np.cumsum(data.draw(st.lists(st.integers(0, 20_000), min_size=n, max_size=n)))
    nsec = np.array(data.draw(st.lists(st.integers(1, 300), min_size=n, max_size=n)))
    span = min(arr.capacity, 1 << 22)
    lba = np.array([data.draw(st.integers(0, span - int(k))) for k in nsec], dtype=np.int64)
    w = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    # the controller's bus and cache too (test_engine's draws): requests its cache serves
    # after a failure, destages and prefetches planned around one
    kw = dict(ctrl_ns=data.draw(st.sampled_from([0, 500])), **data.draw(controller()))
    got = run_engine(arr, arrive.astype(np.int64), lba, nsec.astype(np.int64),
                     w.astype(np.int64), drive_ops=True, tasks=tasks,
                     chunk=data.draw(st.sampled_from([3, 1000])), **kw)
    want = ref.simulate(arr, arrive, lba, nsec, w, int(arr.models.fixed[0]),
                        int(arr.models.fixed[1]), tasks=tasks,
                        interval_ns=got["bins"]["interval_ns"], **kw)
    _assert_same(got, want)
    # every rebuild that started ended once: with rebuild_end, having rebuilt every row of
    # every piece, or, only after a failure that lost data or of a spare it rebuilt onto,
    # with rebuild_stopped, having rebuilt less, the share rebuilt as its fraction
    ev = got["events"]
    loss_t = ev["t"][ev["code"] == EVENT_NAMES.index("data_loss")]
    fail_t = {int(d): int(t) for d, t, c in zip(ev["drive"], ev["t"], ev["code"], strict=True)
              if c == EVENT_NAMES.index("failure")}
    for t in np.flatnonzero(tasks.TK["kind"] == T.TASK_KINDS["rebuild"]):
        ends = ev[np.isin(ev["code"], [EVENT_NAMES.index("rebuild_end"),
                                       EVENT_NAMES.index("rebuild_stopped")]) & (ev["ref"] == t)]
        assert len(ends) == 1
        p0, npc = tasks.TK["p0"][t], tasks.TK["np"][t]
        whole = tasks.PC["rows"][p0:p0 + npc].sum() * 512
        if ends["code"][0] == EVENT_NAMES.index("rebuild_end"):
            assert ends["bytes"][0] == whole and ends["frac"][0] == T.PPM
        else:
            spares = [fail_t[d] for d in tasks.PC["dst"][p0:p0 + npc].tolist() if d in fail_t]
            assert min([*loss_t.tolist(), *spares], default=ends["t"][0] + 1) <= ends["t"][0]
            assert 0 <= ends["bytes"][0] < whole
            assert ends["frac"][0] == ends["bytes"][0] * T.PPM // whole


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(failing_array(), st.data())
def test_repeating_closed_loop_equals_reference(toml, data):
    """Closed loop repeated while tasks remain (replay --repeat-until-tasks-end): the kernel
    equals the reference request for request, pass after pass (ids k x n + r), with the same
    number of passes; each pass but the last began with tasks left, and the last ended with
    none left unless max_passes stopped it."""
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(
        data.draw(st.sampled_from([2000, 5000])), data.draw(st.sampled_from([0, 1]))))
    tasks = plan(arr)
    n = data.draw(st.integers(1, 12))
    ints = lambda vals: np.array(data.draw(st.lists(vals, min_size=n, max_size=n)),  # noqa: E731
                                 dtype=np.int64)
    nsec = ints(st.integers(1, 300))
    span = min(arr.capacity, 1 << 22)
    lba = np.array([data.draw(st.integers(0, span - int(k))) for k in nsec], dtype=np.int64)
    kw = dict(closed=True, stream=ints(st.sampled_from([0, 3, 4])),
              phase=np.sort(ints(st.sampled_from([0, 1, 2]))),
              outstanding=ints(st.integers(1, 3)), think_ns=ints(st.sampled_from([0, 700])),
              ctrl_ns=data.draw(st.sampled_from([0, 500])),
              max_passes=data.draw(st.sampled_from([1, 2, 400, 400])), **data.draw(controller()))
    # the trace's times: floors counted from each pass's start
    arrive = np.cumsum(ints(st.sampled_from([0, 0, 3000, 20_000])))
    w = ints(st.integers(0, 1))
    got = run_engine(arr, arrive, lba, nsec, w, drive_ops=True, tasks=tasks,
                     chunk=data.draw(st.sampled_from([2, 5, 1000])),
                     ring=data.draw(st.sampled_from([4, 64])), **kw)
    want = ref.simulate(arr, arrive, lba, nsec, w, int(arr.models.fixed[0]),
                        int(arr.models.fixed[1]), tasks=tasks,
                        interval_ns=got["bins"]["interval_ns"], **kw)
    assert (got["passes"], got["tasks_at_end"]) == (want.passes, want.tasks_at_end)
    _assert_same(got, want)
    passes = got["passes"]
    assert len(got["done"]) == passes * n and 1 <= passes <= kw["max_passes"]
    event("one pass" if passes == 1 else "stopped by max_passes" if got["tasks_at_end"]
          else "several passes, until the tasks ended")
    ev = got["events"]
    ends = ev["t"][np.isin(ev["code"], [EVENT_NAMES.index(e) for e in (
        "rebuild_end", "rebuild_stopped", "rebalance_end", "init_end")])]
    last_task = int(ends.max()) if len(ends) else -1
    for k in range(passes - 1):  # pass k + 1 began when pass k ended, with a task to come
        pass_end = int(got["done"][k * n:(k + 1) * n].max())
        assert last_task >= pass_end
        assert got["arrive"][(k + 1) * n:(k + 2) * n].min() >= pass_end
    if passes < kw["max_passes"]:
        assert got["tasks_at_end"] == 0 and last_task <= int(got["done"].max())


def test_rebuild_fans_out_and_accounts_for_every_lost_block():
    """A RAID-5 of 5 with a spare loses drive 2: the rebuild reads each row of every survivor
    once and writes every row of the spare once, and the spare then holds the member."""
    toml = {"group": [{"name": "g", "layout": "raid5", "width": 5, "hot_spares": 1,
                       "drive": "atlas10k", "stripe_unit": "64KiB"}],
            "rebuild": {"unit": "512MiB", "depth": 2}, "failure": [{"drive": 2, "at_s": 0}]}
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(1000, 0))
    tasks = plan(arr)
    got = run_engine(arr, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                     np.zeros(0, np.int64), drive_ops=True, tasks=tasks)
    rows = int(arr.GR["rows"][0])
    for d in (0, 1, 3, 4):
        sel = got["op_drive"] == d
        assert (got["op_kind"][sel] == 3).all() and got["op_n"][sel].sum() == rows
    sel = got["op_drive"] == 5
    assert (got["op_kind"][sel] == 4).all() and got["op_n"][sel].sum() == rows
    assert not (got["op_drive"] == 2).any()
    mp = got["mp"]
    assert mp["members"]["drive"][0, 2] == 5 and mp["missing"][0, 0] == -1  # the spare, whole


@pytest.mark.parametrize("refail", [False, True])
def test_several_pieces_copied_back_at_once_equal_the_reference(refail):
    """Three failed pool drives replaced at once: member maps with two or three pieces being
    copied back at the same time (the copy slots beyond the first), host writes mirrored to
    each new drive, and (``refail``) a new drive failing during its own rebalance. The kernel's
    run is the plain-Python reference's, operation for operation (the property test above
    draws these cases rarely)."""
    toml = {"group": [{"name": "g", "layout": "ddp", "drive": "atlas10k", "stripe_unit": "64KiB",
                       "width": 14, "preservation": 3, "piece": "1GiB", "count": 1}],
            "rebuild": {"priority": "medium", "unit": "256MiB", "depth": 2},
            "failure": [{"drive": d, "at_s": d * 1e-5} for d in range(3)],
            "replace": [{"drive": d, "at_s": 1e-4} for d in range(3)]}
    if refail:
        toml["failure"].append({"drive": 1, "at_s": 0.02})
    # 20 ns a sector: the copies back last about 200 ms, over which the host writes arrive
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(2000, 20))
    tasks = plan(arr)
    reb = np.flatnonzero(tasks.TK["kind"] == T.TASK_KINDS["rebalance"])
    rows = np.concatenate([tasks.PC["row"][tasks.TK["p0"][t]:tasks.TK["p0"][t]
                                           + tasks.TK["np"][t]] for t in reb])
    assert np.bincount(rows).max() >= 2  # some member map has several pieces to copy back
    rng = np.random.default_rng(5)
    n = 200
    arrive = (100_000 + np.cumsum(rng.integers(0, 2_000_000, n))).astype(np.int64)
    nsec = rng.integers(1, 300, n).astype(np.int64)
    lba = np.array([rng.integers(0, arr.capacity - k) for k in nsec], dtype=np.int64)
    w = (rng.random(n) < 0.7).astype(np.int64)
    got = run_engine(arr, arrive, lba, nsec, w, drive_ops=True, tasks=tasks)
    want = ref.simulate(arr, arrive, lba, nsec, w, 2000, 20, tasks=tasks,
                        interval_ns=got["bins"]["interval_ns"])
    _assert_same(got, want)
    # host writes reached each new drive while its pieces were copied back (the mirror), but
    # the one that failed again
    for d in [0, 2] if refail else [0, 1, 2]:
        assert ((got["op_kind"] == 0) & (got["op_drive"] == d) & (got["op_write"] == 1)).any()


def test_second_failure_before_rebuild_ends_loses_data():
    toml = {"group": [{"name": "g", "layout": "raid5", "width": 4, "hot_spares": 1,
                       "drive": "atlas10k", "stripe_unit": "64KiB"}],
            "rebuild": {"unit": "512MiB", "priority": "lowest"},
            "failure": [{"drive": 0, "at_s": 0}, {"drive": 1, "at_s": 0.001}]}
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(1_000_000, 10))
    got = run_engine(arr, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                     np.zeros(0, np.int64), tasks=plan(arr))
    ev = got["events"]
    loss = ev[ev["code"] == EVENT_NAMES.index("data_loss")]
    stripes = int(arr.GR["rows"][0]) // 128
    # drive 1 fails 1 ms into drive 0's rebuild: nearly every stripe is lost
    assert len(loss) == 1 and 0.9 * stripes < loss["lost"][0] <= stripes
    # and the rebuild stops: the units issued after it have nothing to be rebuilt from, so it
    # is not a rebuild_end (it was, 19 ms later in a review's run, the whole member counted
    # as rebuilt); what it wrote is what the units in flight at the loss carried
    names = [EVENT_NAMES[c] for c in ev["code"]]
    assert "rebuild_end" not in names and names.count("rebuild_stopped") == 1
    stop = ev[ev["code"] == EVENT_NAMES.index("rebuild_stopped")][0]
    whole = int(arr.GR["rows"][0]) * 512
    assert stop["bytes"] + loss["lost"][0] * 128 * 512 >= whole
    assert stop["bytes"] <= 4 * 512 << 20  # the units in flight at the loss (depth 4), at most
    assert stop["frac"] == stop["bytes"] * 1_000_000 // whole


@pytest.mark.parametrize("second_s", [0.001, 0.002])
def test_no_rebuild_ends_after_a_raid5_lost_two_members(second_s):
    """Two spares, so both failed drives of a RAID-5 are rebuilt: the second failure (1 ms
    after the first, or at the same instant) loses every stripe not yet rebuilt, and neither
    rebuild can end, each stops having rebuilt what was in flight at most. A lost unit's rows
    stayed counted as rebuilt: the rebuild stopped first left its member 'whole', and the
    other ran to rebuild_end from it (a mutation review: 209 ms after two failures at the
    same instant, the whole member and fraction 1.0). The reference engine agrees."""
    toml = {"group": [{"name": "g", "layout": "raid5", "width": 4, "hot_spares": 2,
                       "drive": "atlas10k", "stripe_unit": "64KiB"}],
            "rebuild": {"unit": "512MiB", "priority": "lowest"},
            "failure": [{"drive": 0, "at_s": 0.001}, {"drive": 1, "at_s": second_s}]}
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(1_000_000, 10))
    z = np.zeros(0, np.int64)
    tasks = plan(arr)
    got = run_engine(arr, z, z, z, z, tasks=tasks)
    assert [tuple(e) for e in got["events"].tolist()] == ref.simulate(
        arr, z, z, z, z, 1_000_000, 10, tasks=tasks).events
    ev = got["events"]
    names = [EVENT_NAMES[c] for c in ev["code"]]
    assert "rebuild_end" not in names and names.count("rebuild_stopped") == 2
    stops = {int(e["drive"]): e for e in ev[ev["code"] == EVENT_NAMES.index("rebuild_stopped")]}
    assert stops[1]["t"] == second_s * 1e9 and stops[1]["frac"] == 0  # nothing to rebuild from
    if second_s == 0.001:  # at the same instant: nothing of either was rebuilt
        assert stops[0]["t"] == 1_000_000 and stops[0]["frac"] == stops[0]["bytes"] == 0
    else:  # the first had 1 ms: its units in flight then, 4 of 512 MiB at most
        assert 0 < stops[0]["bytes"] <= 4 * 512 << 20
    # the windows the replay reports: neither ended, both stopped where the events say
    rw = {r["drive"]: r for r in _rebuild_windows(arr, _Events(got["events"]), tasks)}
    for d in (0, 1):
        assert rw[d]["window_s"] is None and rw[d]["stopped_s"] == stops[d]["t"] / 1e9


class _Events:  # what _rebuild_windows reads of an engine: its events
    def __init__(self, events):
        self._events = events

    def events(self):
        return self._events


_SECOND_FAILURE = """
import json, sys
import numpy as np
from pathlib import Path
from blocklab.pipeline.model.config import parse_array
from blocklab.pipeline.model.array import plan
from blocklab.pipeline.replay import build_array, run_engine
toml = json.loads(sys.argv[1])
arr = build_array(parse_array(toml, Path("x.toml")), fixed_ns=(1_000_000, 10))
z = np.zeros(0, np.int64)
got = run_engine(arr, z, z, z, z, tasks=plan(arr))
print(json.dumps([[int(x) for x in e] for e in got["events"].tolist()]))
"""


def test_second_failure_during_a_rebuild_of_many_small_units_ends():
    """The same with 1 MiB units, four in flight: after the second failure every further unit
    has nothing to rebuild from and completes at once while earlier ones are in flight, so
    units ran more than 63 past their piece's cursor, past the int64 mask of those done: the
    replay never ended (SIGTERM did not stop it; found by a review of failure scenarios). A
    unit now waits while 63 are done past the cursor. Run in a process of its own (a hang
    fails, not stalls, the suite); its events are the plain-Python reference's."""
    import subprocess
    import sys

    toml = {"group": [{"name": "g", "layout": "raid5", "width": 4, "hot_spares": 1,
                       "drive": "atlas10k", "stripe_unit": "64KiB"}],
            "rebuild": {"unit": "1MiB", "priority": "lowest", "depth": 4},
            "failure": [{"drive": 0, "at_s": 0}, {"drive": 1, "at_s": 0.001}]}
    try:
        out = subprocess.run([sys.executable, "-c", _SECOND_FAILURE, json.dumps(toml)],
                             capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise AssertionError("the replay did not end in 300 s (under 1 s with depth 1)") from None
    assert out.returncode == 0, out.stderr
    events = [tuple(e) for e in json.loads(out.stdout.splitlines()[-1])]
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(1_000_000, 10))
    z = np.zeros(0, np.int64)
    want = ref.simulate(arr, z, z, z, z, 1_000_000, 10, tasks=plan(arr))
    assert events == want.events
    codes = [EVENT_NAMES[e[1]] for e in events]
    assert codes.count("data_loss") == 1 and codes.count("rebuild_stopped") == 1
    assert "rebuild_end" not in codes


def test_pool_placement_is_balanced_and_stable():
    """60 drives, 560 slots each, 3 drives preserved: the load is as balanced as a uniform
    random placement makes it (the spread of the drives' piece counts within 1.5 times the
    binomial standard deviation, no drive more than 15 % from the mean); after a failure only
    the failed drive's pieces move, each to a drive not already in its D-stripe, and the load
    stays balanced."""
    pl = PL.place(60, 560, 3, seed=7)
    load = np.bincount(pl.members.ravel(), minlength=60)
    assert load.sum() == len(pl.members) * 10 and len(pl.members) == 57 * 560 // 10
    assert load.std() < 1.5 * np.sqrt(load.mean())
    assert np.abs(load / load.mean() - 1).max() < 0.15
    assert all(len(set(row)) == 10 for row in pl.members)
    before = pl.members.copy()
    hit = np.flatnonzero((before == 13).any(axis=1))
    moved = []
    for i in hit:
        got = PL.replacement(pl, int(i), set(before[i].tolist()), {13})
        assert got is not None
        d = got[0]
        assert d != 13 and d not in before[i]
        moved.append(d)
    new_load = np.bincount(moved, minlength=60) + load
    new_load[13] = 0
    live = np.delete(new_load, 13)
    assert live.std() < 1.5 * np.sqrt(live.mean()) and live.max() <= 560
    # stability: the draws of a D-stripe do not depend on the other drives
    d1 = PL.draws(np.arange(50), 60, 7)
    d2 = PL.draws(np.arange(50), 61, 7)
    assert np.array_equal(d1, d2[:, :60])
    assert len(moved) == len(hit) == load[13]


def test_storage_pool_slices_round_robin():
    toml = {"group": [{"name": "p", "layout": "pool", "width": 10, "raid": "raid5",
                       "group_width": 5, "slice": "1GiB", "count": 2, "fill": 0.5,
                       "drive": "atlas10k"}]}
    arr = build_array(parse_array(toml, ROOT / "x.toml"))
    assert arr.lun_names == ["p.0"]
    # LUN p.0's slices alternate over the two private groups, each slice further into them
    ex = arr.EX[arr.LN["ext0"][0]:arr.LN["ext0"][0] + 6]
    assert ex["row"].tolist() == [0, 1, 0, 1, 0, 1]
    assert ex["base"].tolist() == [0, 0, 1 << 21, 1 << 21, 2 << 21, 2 << 21]


@pytest.mark.parametrize("toml,key,msg", [
    ({"failure": [{"drive": 9, "at_s": 1}]}, "failure[0].drive", "no drive 9"),
    ({"rebuild": {"priority": "urgent"}}, "rebuild.priority", "expected one of lowest"),
    ({"init": [{"group": "nope"}]}, "init[0].group", "no group 'nope'"),
])
def test_bad_failure_config(tmp_path, toml, key, msg):
    base = {"group": [{"name": "g", "layout": "raid5", "width": 4, "drive": "atlas10k"}]}
    with pytest.raises(ConfigError) as e:
        parse_array(base | toml, tmp_path / "a.toml")
    assert str(e.value).startswith(f"{tmp_path / 'a.toml'}: {key}") and msg in str(e.value)


def test_pool_smaller_than_stripe_plus_preservation(tmp_path):
    with pytest.raises(ConfigError) as e:
        parse_array({"group": [{"name": "p", "layout": "ddp", "width": 12, "preservation": 3,
                                "drive": "atlas10k"}]}, tmp_path / "a.toml")
    assert "group[0].width: a pool of 12 drives is smaller than its stripe width 10 plus its " \
           "preservation capacity 3" in str(e.value)


SMALL = ROOT / "traces" / "samples" / "tracefs-fio-loop0-vda.txt.xz"


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    from blocklab.pipeline.ingest import ingest

    t = tmp_path_factory.mktemp("trace") / "t.parquet"
    ingest([str(SMALL)], str(t), device="7:0")
    return t


def _array(tmp_path, extra=""):
    toml = tmp_path / "a.toml"
    toml.write_text('[[group]]\nname = "r5"\nlayout = "raid5"\nwidth = 5\nhot_spares = 1\n'
                    'drive = "savvio_15k3_300g"\n[rebuild]\nunit = "64MiB"\n' + extra)
    return toml


def test_replay_with_a_failure_writes_events(tmp_path, small_trace):
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["replay", str(small_trace), "--array", str(_array(tmp_path)),
                                   "-o", str(run), "--fail", "2@0.5", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    (rb,) = out["rebuilds"]
    assert rb["drive"] == 2 and rb["failed_s"] == 0.5 and rb["window_s"] > 0
    ev = pq.read_table(run / "events.parquet").to_pydict()
    names = ev["event"]
    assert names[0] == "failure" and names[1] == "rebuild_start" and names[-1] == "rebuild_end"
    assert names.count("rebuild_progress") == 9
    assert ev["time_ns"] == sorted(ev["time_ns"]) and set(ev["group"]) == {"r5"}
    end = ev["time_ns"][-1]
    assert (end - ev["time_ns"][0]) / 1e9 == pytest.approx(rb["window_s"])
    fr = [f for f in ev["fraction"] if f is not None]
    assert fr == sorted(fr) and fr[-1] == 1.0
    meta = json.loads((run / "meta.json").read_text())
    assert meta["failures"] == [{"drive": 2, "at_s": 0.5}]
    assert meta["tasks"][0]["kind"] == "rebuild"
    # the rebuild's own operations are in drive_busy: the spare (drive 5) was written
    busy = pq.read_table(run / "drive_busy.parquet").to_pydict()
    assert sum(o for d, o in zip(busy["drive"], busy["ops"], strict=True) if d == 5) > 0


@pytest.mark.parametrize("fail,msg", [
    ("9@0.5", "--fail 9@0.5: no drive 9: the array has drives 0 to 5"),
    ("2@999", "--fail 2@999: failure of drive 2 at 999 s is outside the trace"),
    ("2@-1", "--fail 2@-1: failure of drive 2 at -1 s is outside the trace"),
    ("two@1", "expected DRIVE@SECONDS"),
    # a drive failing twice: the option that does it is named (it named the array file)
    ("2@0.01,2@0.02", "--fail 2@0.02: drive 2 has failed already, at 0.01 s, and is not "
     "replaced by then"),
])
def test_replay_bad_failures(tmp_path, small_trace, fail, msg):
    opts = [x for f in fail.split(",") for x in ("--fail", f)]
    res = CliRunner().invoke(app, ["replay", str(small_trace), "--array", str(_array(tmp_path)),
                                   "-o", str(tmp_path / "run"), *opts])
    assert res.exit_code == 2 and msg in res.stderr and len(res.stderr.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_rebuild_a_second_failure_stopped_is_reported_as_its_event_says(tmp_path,
                                                                          small_trace):
    """A RAID-5's second failure during the first one's rebuild: the replay's summary (the
    JSON and the line) gives the rebuild's stop time and share rebuilt as events.parquet's
    rebuild_stopped row has them, and that row carries its fraction and bytes."""
    run = tmp_path / "run"
    args = ["replay", str(small_trace), "--array", str(_array(tmp_path)), "-o", str(run),
            "--fail", "2@0.5", "--fail", "3@0.6"]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    rb = {r["drive"]: r for r in json.loads(res.stdout)["rebuilds"]}
    ev = pq.read_table(run / "events.parquet").to_pylist()
    (stop,) = [e for e in ev if e["event"] == "rebuild_stopped"]
    assert stop["drive"] == 2 and stop["time_ns"] > 600_000_000
    assert 0 < stop["fraction"] < 1 and stop["bytes"] > 0
    assert rb[2]["window_s"] is None and rb[2]["stopped_s"] == stop["time_ns"] / 1e9
    assert rb[2]["rebuilt_fraction"] == stop["fraction"]
    res = CliRunner().invoke(app, [*args[:5], str(tmp_path / "run2"), *args[6:]])
    assert res.exit_code == 0, res.output
    assert (f"did not end: the rebuild stopped at {stop['time_ns'] / 1e9:,.3f} s with "
            f"{stop['fraction']:.1%} rebuilt, the rest lost to a later failure") in res.stdout
    assert "drive 3 (r5) failed at 0.600 s: rebuild window did not end, " in res.stdout


def test_a_fail_of_a_drive_the_array_file_failed_names_the_option(tmp_path, small_trace):
    """The first --fail (the failure right after the array file's) of a drive the file
    fails before it is named as the option, not as the file; a pool's drive replaced in between
    may fail again."""
    res = CliRunner().invoke(app, ["replay", str(small_trace), "--array", str(_array(
        tmp_path, "[[failure]]\ndrive = 2\nat_s = 0.01\n")), "-o", str(tmp_path / "run"),
        "--fail", "2@0.02"])
    assert res.exit_code == 2 and res.stderr == (
        "blocklab: error: --fail 2@0.02: drive 2 has failed already, at 0.01 s, and is not "
        "replaced by then\n")
    pool = tmp_path / "ddp.toml"
    pool.write_text('[[group]]\nname = "p"\nlayout = "ddp"\nwidth = 12\npiece = "64MiB"\n'
                    'drive = "atlas10k"\n[[failure]]\ndrive = 3\nat_s = 0.01\n'
                    '[[replace]]\ndrive = 3\nat_s = 0.02\n')
    res = CliRunner().invoke(app, ["replay", str(small_trace), "--array", str(pool), "-o",
                                   str(tmp_path / "run"), "--fail", "3@0.03", "--json"])
    assert res.exit_code == 0, res.output
    assert [f["failed_s"] for f in json.loads(res.stdout)["rebuilds"] if f["drive"] == 3] == [
        0.01, 0.03]


def test_a_replacement_after_the_trace_is_refused_as_a_failure_is(tmp_path, small_trace):
    """A [[replace]] after the trace's end was taken (its rebalance ran with no host I/O),
    while a failure there is refused: both are events of the replay now."""
    array = tmp_path / "ddp.toml"
    array.write_text('[[group]]\nname = "p"\nlayout = "ddp"\nwidth = 12\npiece = "64MiB"\n'
                     'drive = "atlas10k"\n[[failure]]\ndrive = 3\nat_s = 0\n'
                     '[[replace]]\ndrive = 3\nat_s = 999\n')
    res = CliRunner().invoke(app, ["replay", str(small_trace), "--array", str(array), "-o",
                                   str(tmp_path / "run")])
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith(f"blocklab: error: {array}: replacement of drive 3 at 999 s "
                                 "is outside the trace (0 to ") and res.stderr.count("\n") == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("group,luns", [
    ({"name": "g", "layout": "raid6", "width": 6, "count": 3, "stripe_unit": "64KiB",
      "drive": "atlas10k"}, 3),
    ({"name": "g", "layout": "ddp", "width": 12, "preservation": 2, "piece": "64MiB",
      "count": 3, "fill": 0.5, "stripe_unit": "64KiB", "drive": "atlas10k"}, 3),
])
def test_init_runs_one_task_per_lun_at_once(group, luns):
    """An [[init]] of a group of several LUNs: one task per LUN, all starting at the same time,
    each over exactly the member maps that LUN's extents use (a pool's D-stripes outside
    every volume are left alone), every member map initialized once."""
    from pathlib import Path

    cfg = parse_array({"group": [group], "init": [{"group": "g", "at_s": 2}]}, Path("x.toml"))
    arr = build_array(cfg)
    p = plan(arr)
    assert len(p.TK) == luns
    assert set(p.TK["t"].tolist()) == {2_000_000_000}
    assert set(p.TK["kind"].tolist()) == {T.TASK_KINDS["init"]}
    # the LUNs' member maps from the extents, independently of pipeline/model/array.py's row_lun
    rows_of_task = [sorted(int(r) for r in p.PC["row"][t["p0"]:t["p0"] + t["np"]])
                    for t in p.TK]
    used = sorted({int(r) for r in arr.EX["row"]}) if group["layout"] == "ddp" else None
    every = sorted(r for rows in rows_of_task for r in rows)
    assert len(every) == len(set(every))  # each member map in one task
    if used is not None:
        assert every == used  # exactly the D-stripes the volumes use
        assert len(every) < int((arr.row_group == 0).sum())  # fill 0.5 leaves some out
    else:
        assert every == sorted(np.flatnonzero(arr.row_group == 0).tolist())


@pytest.mark.parametrize("fill", [0.3, 1.0])
def test_a_pool_rebuilds_only_the_d_stripes_its_volumes_use(fill):
    """A failed pool drive's rebuild takes the pieces of the D-stripes that volumes use, and
    no others (those hold no data, and [[init]] leaves them alone too), so a pool 30 % full
    rebuilds about 30 % of what a full one does (before 2026-11-29 both rebuilt every piece
    on the drive); the members it leaves are not missing either, so a later failure cannot
    count their stripes as lost."""
    from pathlib import Path

    group = {"name": "g", "layout": "ddp", "width": 12, "preservation": 2, "piece": "64MiB",
             "count": 2, "fill": fill, "stripe_unit": "64KiB", "drive": "atlas10k"}
    cfg = parse_array({"group": [group], "failure": [{"drive": 0, "at_s": 1}]},
                      Path("x.toml"))
    arr = build_array(cfg)
    p = plan(arr)
    # the volumes' D-stripes from their extents, independently of array.py's row_lun
    used = {int(r) for r in arr.EX["row"]}
    on_drive = {r for r in range(len(arr.MP)) if arr.row_group[r] == 0
                and 0 in arr.MP["members"]["drive"][r].tolist()}
    pieces = sorted(int(r) for r in p.PC["row"])
    assert pieces == sorted(on_drive & used)
    missing = sorted(int(r) for r in p.AF["row"])
    assert missing == pieces
    if fill < 1:
        assert len(pieces) < 0.5 * len(on_drive)
    else:
        assert len(pieces) == len(on_drive)


def test_a_storage_pools_failure_misses_every_member_map_on_the_drive():
    """A storage pool's private RAID groups carry slices of several LUNs: a failed drive
    makes every member map on it missing, the ones shared by LUNs too (only a dynamic disk
    pool's D-stripes outside every volume are left out)."""
    from pathlib import Path

    group = {"name": "g", "layout": "pool", "raid": "raid5", "width": 10, "group_width": 5,
             "slice": "1GiB", "count": 3, "fill": 1.0, "stripe_unit": "64KiB",
             "drive": "atlas10k"}
    arr = build_array(parse_array({"group": [group], "failure": [{"drive": 0, "at_s": 1}]},
                                  Path("x.toml")))
    on_drive = sorted(r for r in range(len(arr.MP))
                      if 0 in arr.MP["members"]["drive"][r].tolist())
    # the case at hand: maps with slices of several LUNs (row_lun -1: several, or none, and
    # at fill 1.0 every map holds slices)
    assert on_drive and all(arr.row_lun[r] == -1 for r in on_drive)
    assert sorted(int(r) for r in plan(arr).AF["row"]) == on_drive


@pytest.mark.parametrize("queuing", [True, False])
def test_an_idle_rebuild_writes_the_spare_at_its_media_rate(tmp_path, queuing):
    """A RAID-6 group of Savvio 15K.3s (write cache off, as arrays run them) rebuilds a failed
    drive onto a hot spare with nothing else to do: the rebuild keeps several units in flight,
    so the spare has the next write queued while it writes one, and with command queuing it
    writes them at its media rate: the capacity over the rebuild window is the mean of the
    datasheet's outer and inner sustained rates (202 and 151 MB/s), within 10 %. A drive that
    takes one command at a time (``command_queueing = false``) loses a revolution a write."""
    blocks = 4_000_000  # 2 GB: the zones still run from the outer to the inner rate
    drive = {"base": "savvio_15k3_300g", "blocks": blocks, "command_queueing": queuing}
    drive_toml = ", ".join(f"{k} = {json.dumps(v)}" for k, v in drive.items())
    array = tmp_path / "r6.toml"
    array.write_text(f'[[group]]\nname = "r6"\nlayout = "raid6"\nwidth = 6\nhot_spares = 1\n'
                     f'stripe_unit = "128KiB"\ndrive = {{ {drive_toml} }}\n')
    trace = tmp_path / "t.parquet"
    runner = CliRunner()
    res = runner.invoke(app, ["synth", "iometer", "-o", str(trace), "--requests", "10",
                              "--array", str(array)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "--fail", "0@0",
                              "-o", str(tmp_path / "run"), "--json"])
    assert res.exit_code == 0, res.output
    (rebuild,) = json.loads(res.stdout)["rebuilds"]
    rate = blocks * 512 / rebuild["window_s"] / 1e6
    media = (202 + 151) / 2
    if queuing:
        assert 0.9 * media <= rate <= 1.02 * 202, rate
    else:
        assert rate < 0.7 * media, rate


@pytest.mark.parametrize("layout, width, extra", [
    ("raid5", 3, ""), ("raid6", 5, ""), ("raid10", 4, ""),
    ("raid5", 5, '[controller]\ncache = "1MiB"\n'),  # destages planned before the failure
])
def test_no_operation_is_sent_to_a_drive_after_it_failed(tmp_path, layout, width, extra):
    """The writes of a read-modify-write are planned with its reads and sent when they are
    done: one whose drive failed in between was still sent, and the failed drive served it
    (a review found request 96 of this trace written to drive 1 after 1.0 s). A drive that is
    gone serves nothing queued after its failure; each request still completes, and its
    other writes (the parity, the mirror copy) still go."""
    from blocklab.pipeline.synth import synth_iometer

    toml = tmp_path / "a.toml"
    toml.write_text(f'[[group]]\nname = "g"\nlayout = "{layout}"\nwidth = {width}\n'
                    'stripe_unit = "64KiB"\ndrive = "savvio_15k3_300g"\n' + extra)
    trace = tmp_path / "w.parquet"
    synth_iometer(trace, transfer_size="4k", read_pct=0, random_pct=100, align="4k",
                  requests=400, outstanding=2, array=str(toml))
    failed = 1
    sent_late = 0
    for at in (0.5, 1.0, 1.5):  # each a moment inside some read-modify-write here
        run = tmp_path / f"run{at}"
        res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(toml), "-o",
                                       str(run), "--drive-ops", "--fail", f"{failed}@{at}"])
        assert res.exit_code == 0, res.output
        ops = pq.read_table(run / "drive_ops.parquet").to_pydict()
        late = [q for d, q in zip(ops["drive"], ops["queued_ns"], strict=True)
                if d == failed and q > at * 1e9]
        assert late == [], (at, late[:5])
        ios = pq.read_table(run / "ios.parquet", columns=["complete_ns"]).column(0)
        assert ios.null_count == 0 and len(ios) == 400
        # the read-modify-writes in flight at the failure still wrote their other members
        sent_late += sum(1 for d, q, w in zip(ops["drive"], ops["queued_ns"], ops["write"],
                                              strict=True) if d != failed and w and q > at * 1e9)
    assert sent_late > 0


def test_a_rebalance_leaves_no_host_write_behind(tmp_path):
    """A replaced pool drive is filled by copying its pieces back unit by unit, and each
    member switches to the new drive only when its whole piece is copied. A host write to a
    part already copied went only to the old place, so the new drive lacked it after the
    switch (a review counted 179 such writes on this run). Checked from drive_ops alone: every
    host write to a rebalance's source range that the copy had read before the write ended
    also wrote the new drive; and the new drive took host writes before the copy ended."""
    from blocklab.pipeline.synth import synth_iometer

    array = tmp_path / "ddp.toml"
    array.write_text('[[group]]\nname = "pool"\nlayout = "ddp"\nwidth = 14\npreservation = 2\n'
                     'piece = "64MiB"\nstripe_unit = "128KiB"\nscheduler = "clook"\nqueue_depth = 16\n'
                     'drive = { base = "savvio_15k3_300g", blocks = 4000000 }\n'
                     '[rebuild]\npriority = "high"\nunit = "4MiB"\n'
                     '[[failure]]\ndrive = 3\nat_s = 1\n[[replace]]\ndrive = 3\nat_s = 16\n')
    trace = tmp_path / "t.parquet"
    synth_iometer(trace, transfer_size="4k", read_pct=70, random_pct=100, align="4k",
                  requests=10_000, outstanding=4, workers=2, array=str(array))
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(array), "-o", str(run),
                                   "--drive-ops", "--closed-loop", "4", "--think-us", "5000"])
    assert res.exit_code == 0, res.output
    op = {k: np.asarray(v) for k, v in pq.read_table(run / "drive_ops.parquet").to_pydict()
          .items()}
    copy = op["kind"] == 6  # OPK_REBALANCE
    reads, writes = copy & ~op["write"], copy & op["write"]
    new = set(op["drive"][writes].tolist())
    assert new == {3}
    host_writes = (op["kind"] <= 1) & op["write"]  # host writes and destages
    behind = 0
    for i in np.flatnonzero(host_writes & np.isin(op["drive"], op["drive"][reads])):
        rd = reads & (op["drive"] == op["drive"][i])
        lo, hi = op["sector"][i], op["sector"][i] + op["sectors"][i]
        copied = rd & (op["sector"] < hi) & (lo < op["sector"] + op["sectors"]) & (
            op["start_ns"] < op["complete_ns"][i])
        if not copied.any():
            continue  # the copy reads it later: the write is copied with it
        behind += 1
        q = op["request"][i]
        assert ((op["request"] == q) & op["write"] & (op["drive"] == 3)).any(), (i, q)
    assert behind > 100
    end = op["complete_ns"][writes].max()
    assert (host_writes & (op["drive"] == 3) & (op["queued_ns"] < end)).sum() >= behind


def test_a_spare_that_fails_during_its_rebuild_takes_the_rebuilt_rows_with_it():
    """A RAID-1 with two hot spares: drive 0 fails and is rebuilt onto spare 2, which fails in
    turn; that rebuild stops, and spare 3 rebuilds the member from row 0. When drive 1 then
    fails before spare 3 is done, data is lost (both copies of the rows above its cursor are
    gone). Before, the first rebuild ran on to rebuild_end onto the failed spare, the member
    counted as whole, and no data_loss was recorded. The kernel equals the reference."""
    toml = {"group": [{"name": "g", "layout": "raid1", "drive": "atlas10k", "width": 2,
                       "stripe_unit": "64KiB", "hot_spares": 2}],
            "rebuild": {"unit": "256MiB", "depth": 1},
            "failure": [{"drive": 0, "at_s": 0.0}, {"drive": 2, "at_s": 19e-6},
                        {"drive": 1, "at_s": 60e-6}]}
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(2000, 0))
    tasks = plan(arr)
    z = np.zeros(0, np.int64)
    got = run_engine(arr, z, z, z, z, tasks=tasks, drive_ops=True)
    want = ref.simulate(arr, z, z, z, z, 2000, 0, tasks=tasks,
                        interval_ns=got["bins"]["interval_ns"])
    _assert_same(got, want)
    ev = [(EVENT_NAMES[c], int(t), int(d)) for c, t, d in
          zip(got["events"]["code"], got["events"]["t"], got["events"]["drive"], strict=True)]
    ends = [(name, t, d) for name, t, d in ev if name in ("rebuild_end", "rebuild_stopped")]
    # drive 0's rebuild stops with its spare, before drive 1 fails; spare 3's stops at that
    assert [(name, d) for name, _t, d in ends] == [("rebuild_stopped", 0), ("rebuild_stopped", 2)]
    assert 19_000 <= ends[0][1] < 60_000 <= ends[1][1]
    assert ("data_loss", 60_000, 1) in ev


@pytest.mark.parametrize("layout,width", [("raid0", 2), ("raid1", 2)])
def test_a_destage_of_data_on_failed_members_alone_ends(layout, width):
    """A write-back cache of two lines over an array whose member holding the data failed (a
    RAID-0's, both copies of a mirror): the destage of that data has no drive operation and
    is done at once, so the write waiting for its cache room goes in. Before, the destage
    waited for ever and the replay stopped with "no event left but requests are
    incomplete". The kernel equals the reference, and every write completes."""
    toml = {"group": [{"name": "g", "layout": layout, "drive": "atlas10k", "width": width,
                       "stripe_unit": "64KiB"}],
            "failure": [{"drive": d, "at_s": 0.0} for d in range(width if layout == "raid1"
                                                                  else 1)]}
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(2000, 0))
    tasks = plan(arr)
    n = 2
    z = np.zeros(n, np.int64)
    lba = np.array([0, 16], np.int64)  # both on member 0 (the first 64 KiB stripe unit)
    nsec = np.full(n, 16, np.int64)
    kw = dict(cache_lines=2, line_sectors=8, write_back=True, flush_age_ns=512)
    got = run_engine(arr, z, lba, nsec, np.ones(n, np.int64), drive_ops=True, tasks=tasks,
                     **kw)
    want = ref.simulate(arr, z, lba, nsec, np.ones(n, np.int64), 2000, 0, tasks=tasks,
                        interval_ns=got["bins"]["interval_ns"], **kw)
    _assert_same(got, want)
    assert got["hit"].tolist() == [3, 3]  # into the cache, and lost: member 0 is gone
    assert (got["done"] >= 0).all() and len(got["op_drive"]) == 0
