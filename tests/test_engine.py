"""The replay engine against the plain-Python reference (exact, on small random traces, with
the fixed drive model), its invariants with the HDD model, and `blocklab replay`."""

from __future__ import annotations

import json
import stat

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.ingest import ingest
from blocklab.pipeline.model.config import parse_array
from blocklab.pipeline.replay import build_array, dense_ids, run_engine

from .conftest import ROOT
from .reference import engine as ref

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

LAYOUTS = {"raid0": 1, "raid1": 2, "raid10": 2, "raid5": 3, "raid6": 4, "jbod": 1}


@st.composite
def scenario(draw):
    layout = draw(st.sampled_from(list(LAYOUTS)))
    width = draw(st.integers(LAYOUTS[layout], 6))
    if layout == "raid10":
        width += width % 2
    unit = draw(st.sampled_from(["4KiB", "8KiB", "64KiB"]))
    count = draw(st.integers(1, 3))
    volume = draw(st.booleans()) and count > 1
    toml = {"group": [{"name": "g", "layout": layout, "width": width, "stripe_unit": unit,
                       "count": count, "drive": "atlas10k",
                       # (sptf on these fixed-time drives, which have no positioning time: FCFS)
                       "scheduler": draw(st.sampled_from(["fcfs", "sstf", "clook", "sptf"])),
                       "queue_depth": draw(st.sampled_from([1, 2, 8, 64])),
                       # aging: 0 (never), limits a queue of a few ms reaches, the default
                       "max_wait_ms": draw(st.sampled_from([0, 0.2, 3, 500]))}]}
    if volume:
        toml["volume"] = {"stripe_unit": draw(st.sampled_from(["8KiB", "64KiB"]))}
    # coarse times make ties (equal event times) common: the tie-break rules get exercised;
    # on the 512 ns grid, transfers (512 ns per sector at 1000 ps per byte), controller and
    # drive times all fall on the grid, so events of every kind coincide
    grid = draw(st.sampled_from([0, 512]))
    if grid:
        fixed = (512 * draw(st.integers(1, 4)), draw(st.sampled_from([0, 512])))
    else:
        fixed = (draw(st.sampled_from([1000, 2000, 7919])), draw(st.sampled_from([0, 0, 10, 37])))
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=fixed)
    # drives that serve several operations at once (as SSDs do)
    arr.d_maxinf[:] = draw(st.sampled_from([1, 1, 2, 4]))
    n = draw(st.integers(1, 40))
    if grid:
        gaps = st.sampled_from([0, 0, 512, 1024, 1536])
    elif draw(st.booleans()):
        gaps = st.sampled_from([0, 0, 1000, 2000, 3000])
    else:
        gaps = st.integers(0, 30_000)
    arrive = np.cumsum(draw(st.lists(gaps, min_size=n, max_size=n)))
    nsec = np.array(draw(st.lists(st.integers(1, 300), min_size=n, max_size=n)))
    span = min(arr.capacity, draw(st.sampled_from([512, 4096])))
    lba = []
    for k in nsec:  # random, or where the previous request ended (sequential runs)
        if lba and draw(st.booleans()) and lba[-1] + nsec[len(lba) - 1] + k <= span:
            lba.append(lba[-1] + int(nsec[len(lba) - 1]))
        else:
            lba.append(draw(st.integers(0, span - int(k))))
    lba = np.array(lba)
    w = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    closed = draw(st.booleans())
    stream = np.array(draw(st.lists(st.sampled_from([0, 7, 9]), min_size=n, max_size=n)))
    phase = np.sort(draw(st.lists(st.sampled_from([0, 1, 5]), min_size=n, max_size=n)))
    window = np.array(draw(st.lists(st.integers(1, 4), min_size=n, max_size=n)))
    think = np.array(draw(st.lists(st.sampled_from([0, 0, 512, 5120]), min_size=n,
                                   max_size=n)))
    return dict(arr=arr, arrive=arrive.astype(np.int64), lba=lba.astype(np.int64),
                nsec=nsec.astype(np.int64), w=w.astype(np.int64), closed=closed,
                stream=stream, phase=phase, window=window, think=think,
                ctrl=draw(st.sampled_from([0, 0, 512, 1024] if grid else [0, 0, 500, 1000, 3000])),
                path=draw(st.sampled_from([0, 1000, 1000] if grid else [0, 0, 1, 250])),
                chunk=draw(st.sampled_from([1, 3, 7, 1000])), ring=draw(st.sampled_from([4, 64])),
                interval=draw(st.sampled_from([1000, 5000, 10**9])),
                engine=draw(controller()))


@st.composite
def controller(draw):
    """The internal bus and the controller cache (small, so that lines are evicted, writes
    wait for destages and prefetches are refused)."""
    opts = {"bus_ps": draw(st.sampled_from([0, 0, 250, 1000]))}
    if draw(st.booleans()):
        start = draw(st.sampled_from([0.25, 0.5, 0.8, 1.0]))
        opts.update(
            cache_lines=draw(st.sampled_from([2, 4, 16, 200])),
            line_sectors=draw(st.sampled_from([8, 16, 64])),
            write_back=draw(st.booleans()),
            ra_sectors=draw(st.sampled_from([0, 0, 16, 64, 256])),
            flush_start=start, flush_stop=draw(st.sampled_from([0.0, start / 2, start])),
            flush_age_ns=draw(st.sampled_from([512, 5000, 10**9])),
            destage_depth=draw(st.sampled_from([0, 1, 2])))
    return opts


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_engine_equals_reference(sc):
    """Every output of the kernel equals the plain-Python reference's, whatever the chunking
    of the trace and the size of the request ring (small ones force retiring and growing)."""
    assert_engine_equals_reference(sc)


def assert_engine_equals_reference(sc):
    """Replay scenario ``sc`` (as ``scenario`` draws it) through the kernel and the reference
    and compare every output."""
    arr, closed = sc["arr"], sc["closed"]
    kw = dict(closed=closed, ctrl_ns=sc["ctrl"], path_ps=sc["path"],
              stream=sc["stream"] if closed else None, phase=sc["phase"] if closed else None,
              outstanding=sc["window"] if closed else 1, think_ns=sc["think"] if closed else 0,
              **sc["engine"])
    got = run_engine(arr, sc["arrive"], sc["lba"], sc["nsec"], sc["w"], drive_ops=True,
                     chunk=sc["chunk"], ring=sc["ring"], nbins=4, interval_ns=sc["interval"],
                     **kw)
    want = ref.simulate(arr, sc["arrive"], sc["lba"], sc["nsec"], sc["w"],
                        int(arr.models.fixed[0]), int(arr.models.fixed[1]),
                        interval_ns=got["bins"]["interval_ns"], **kw)
    assert got["arrive"].tolist() == want.arrive
    assert got["start"].tolist() == want.start
    assert got["done"].tolist() == want.done
    assert got["busy_ns"].tolist() == want.busy
    assert got["ops"].tolist() == want.ops
    assert got["hit"].tolist() == want.hit
    assert got["cache"]["dirty_lines"] == want.dirty_lines
    recorded = list(zip(*(got[f"op_{k}"].tolist() for k in ("drive", "item", "kind", "qtime",
                                                             "start", "done", "lba", "n")),
                        strict=True))
    assert recorded == want.records  # every drive operation, in the order they started
    bins = got["bins"]
    assert int(bins["end_ns"]) == want.end
    assert bins["busy"].shape[1] == max(-(-want.end // int(bins["interval_ns"])), 1)
    for d in range(len(arr.d_model)):
        assert {b: v for b, v in enumerate(bins["qint"][d].tolist()) if v} == want.qint[d]
        assert {b: v for b, v in enumerate(bins["busy"][d].tolist()) if v} == want.busy_bins[d]
        assert bins["busy"][d].sum() == want.busy[d]


def _small_scenario(n, **over):
    """A scenario on one drive (jbod, fixed 1000 ns per operation), open loop, no volume."""
    toml = {"group": [{"name": "g", "layout": "jbod", "width": 1, "stripe_unit": "4KiB",
                       "drive": "atlas10k"}]}
    sc = dict(arr=build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(1000, 0)),
              closed=False, stream=np.zeros(n, np.int64), phase=np.zeros(n, np.int64),
              window=np.ones(n, np.int64), think=np.zeros(n, np.int64), ctrl=0, path=0,
              chunk=1, ring=4, interval=1000)
    sc.update(over)
    return sc


def test_prefetch_keeps_its_own_lines():
    """A prefetch whose range holds cached clean lines takes the lines it lacks from free lines
    and other clean lines only. The kernel used to evict its own lines for it and then, finding
    them gone further on in its range, take them again: more lines than the room it checked,
    then one from an empty list (line -1: the hash table and the last line corrupted; reads
    hit data never read, a write waited forever, a destage spun on an empty dirty mask).
    Here: four clean lines, 3 and 4 the least recently used, all taken; a sequential read's
    prefetch spans lines 1-5 and lacks 1, 2 and 5: with its own two kept, there is room for
    two, so it is skipped."""
    arrive = np.array([0, 2000, 4000, 6000, 8000, 8500, 12000, 14000])
    lba = np.array([48, 66, 320, 480, 0, 8, 48, 200])
    nsec = np.array([16, 14, 16, 16, 8, 16, 16, 16])
    sc = _small_scenario(len(arrive), arrive=arrive, lba=lba, nsec=nsec,
                         w=np.zeros(len(arrive), np.int64),
                         engine=dict(cache_lines=4, line_sectors=16, write_back=True,
                                     ra_sectors=64))
    assert_engine_equals_reference(sc)
    got = run_engine(sc["arr"], arrive, lba, nsec, sc["w"], drive_ops=True, **sc["engine"])
    assert got["op_kind"].tolist() == [0] * len(arrive)  # no prefetch ran


def test_prefetch_larger_than_the_cache_closed_loop():
    """The first case Hypothesis found (shrunk by hand): closed loop, two LUNs striped in 64
    KiB, a 16-line cache of 16 sectors with 256 sectors of read-ahead (17 lines a prefetch):
    request 11 read sectors the kernel had prefetched into lines taken twice."""
    toml = {"group": [{"name": "g", "layout": "raid0", "width": 1, "stripe_unit": "4KiB",
                       "count": 2, "drive": "atlas10k"}],
            "volume": {"stripe_unit": "64KiB"}}
    n = 17
    w = np.zeros(n, np.int64)
    w[7] = 1
    stream = np.zeros(n, np.int64)
    stream[10] = 7
    phase = np.zeros(n, np.int64)
    phase[16] = 1
    sc = dict(arr=build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(512, 0)),
              arrive=np.zeros(n, np.int64),
              lba=np.array([0, 1, 128, 0, 0, 0, 0, 0, 1, 0, 281, 369, 370, 371, 372, 0, 1]),
              nsec=np.array([1] * 10 + [88] + [1] * 6), w=w, closed=True, stream=stream,
              phase=phase, window=np.ones(n, np.int64), think=np.zeros(n, np.int64), ctrl=0,
              path=0, chunk=1, ring=4, interval=1000,
              engine=dict(bus_ps=0, cache_lines=16, line_sectors=16, write_back=True,
                          ra_sectors=256, flush_start=0.25, flush_stop=0.0, flush_age_ns=512,
                          destage_depth=0))
    sc["arr"].d_maxinf[:] = 1
    assert_engine_equals_reference(sc)


@pytest.mark.parametrize("engine", [
    dict(),
    dict(cache_lines=4, line_sectors=8, write_back=True, ra_sectors=16, flush_start=0.25,
         flush_stop=0.0, flush_age_ns=512),
    dict(cache_lines=4, line_sectors=8, write_back=False, ra_sectors=16)])
def test_zero_length_requests(engine):
    """Reads and writes of 0 sectors (a trace's size_bytes 0 with op read or write reaches the
    engine) start when they reach the controller, complete with no drive operation and leave
    no cache line behind: in particular no line on the dirty list without dirty sectors,
    which the destage could not cut an extent from."""
    arrive = np.array([0, 0, 100, 3000, 3000, 9000])
    lba = np.array([8, 8, 16, 24, 30, 8])
    nsec = np.array([0, 8, 0, 0, 8, 0])
    w = np.array([1, 1, 1, 0, 1, 1])
    for path in (0, 1000):
        sc = _small_scenario(len(arrive), arrive=arrive, lba=lba, nsec=nsec, w=w, path=path,
                             engine=engine)
        assert_engine_equals_reference(sc)
        got = run_engine(sc["arr"], arrive, lba, nsec, w, path_ps=path, **engine)
        zero = nsec == 0
        if path == 0:  # else they wait their turn on the links (first come, first served)
            assert (got["start"][zero] == got["arrive"][zero]).all()
            assert (got["done"][zero] == got["arrive"][zero]).all()
        if engine.get("write_back"):
            assert got["cache"]["dirty_lines"] <= 2  # the two 8-sector writes' lines at most


def test_cache_write_of_no_sectors():
    """kernels/cache.py ``write`` of no sectors leaves the line where it was."""
    from blocklab.kernels import cache as CA

    CL, HT = CA.new_tables(2)
    S = np.zeros(CA.CH_N, np.int64)
    CA.init_heads(S, 0, 2)
    line = CA.take(CL, HT, S, 0, 5)
    CA.make_clean(CL, S, 0, line)
    CA.write(CL, S, 0, line, 0, 100)
    assert CL[line, CA.CL_WHERE] == CA.L_CLEAN and S[CA.CN_DIRTY] == 0
    assert S[CA.CH_DIRTY] == CA.NONE
    CA.write(CL, S, 0, line, 0b11, 200)
    assert CL[line, CA.CL_WHERE] == CA.L_DIRTY and S[CA.CN_DIRTY] == 1
    assert CL[line, CA.CL_DIRTY] == 0b11 and CL[line, CA.CL_DIRTY_T] == 200


def test_merged_operations():
    """A 1 MiB read on RAID-5 of 8 drives with 64 KiB units: 16 units; a drive's units in
    consecutive stripes are contiguous on it unless parity sits between them, so the
    operations are the runs of consecutive rows per drive (from the layout's own map)."""
    from blocklab.kernels.layout import raid as R

    toml = {"group": [{"name": "g", "layout": "raid5", "width": 8, "stripe_unit": "64KiB",
                       "drive": "atlas10k"}]}
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(1000, 0))
    got = run_engine(arr, np.array([0]), np.array([0]), np.array([2048]), np.array([0]),
                     drive_ops=True)
    rows: dict[int, list[int]] = {}
    for k in range(16):
        d, off = R.locate(R.KIND_RAID5, 8, 128, int(arr.GR["rows"][0]), k * 128)
        rows.setdefault(int(d), []).append(int(off) // 128)
    runs = sorted((d, x) for d, rr in rows.items() for x in rr if x - 1 not in rr)
    assert len(got["op_drive"]) == len(runs) < 16
    assert sorted(zip(got["op_drive"].tolist(), (got["op_lba"] // 128).tolist(), strict=True)) == runs
    assert got["op_n"].sum() == 2048


def test_operation_slots_grow(tmp_path):
    """More operations in flight than the first slot allocation: all requests complete."""
    toml = {"group": [{"name": "g", "layout": "raid6", "width": 10, "stripe_unit": "4KiB",
                       "drive": "atlas10k"}]}
    arr = build_array(parse_array(toml, tmp_path / "x.toml"), fixed_ns=(1_000_000, 0))
    n = 3000  # all arrive at once: thousands of operations queue
    arrive = np.zeros(n, dtype=np.int64)
    lba = (np.arange(n) * 64).astype(np.int64)
    nsec = np.full(n, 8, dtype=np.int64)
    got = run_engine(arr, arrive, lba, nsec, np.ones(n, dtype=np.int64), ring=16)
    assert (got["done"] > 0).all()
    want = ref.simulate(arr, arrive, lba, nsec, np.ones(n, dtype=np.int64), 1_000_000, 0)
    assert got["done"].tolist() == want.done


SMALL = ROOT / "traces" / "samples" / "tracefs-fio-loop0-vda.txt.xz"


def test_replay_cli_run_folder(tmp_path):
    trace = tmp_path / "t.parquet"
    ingest([str(SMALL)], str(trace), device="7:0")
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["replay", str(trace), "--array",
                                   str(ROOT / "examples" / "arrays" / "raid5-entry.toml"),
                                   "-o", str(run), "--json", "--drive-ops"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["requests"] == 1522
    ios = pq.read_table(run / "ios.parquet").to_pydict()
    arrival, start, done = (np.array(ios[k]) for k in ("arrival_ns", "start_ns", "complete_ns"))
    assert (start >= arrival).all() and (done >= start).all() and (done > arrival).all()
    hit = np.array(ios["cache_hit"])
    lat = done - arrival
    # drive cache hits are served without a media access: on average far faster
    assert hit.any() and (~hit).any() and lat[hit].mean() < lat[~hit].mean()
    meta = json.loads((run / "meta.json").read_text())
    assert meta["counts"]["requests"] == 1522 and len(meta["trace"]["sha256"]) == 64
    # a run holds the trace's offsets and timing: owner-only, like the trace itself
    assert stat.S_IMODE(run.stat().st_mode) == 0o700
    assert {stat.S_IMODE(f.stat().st_mode) for f in run.iterdir()} == {0o600}
    busy = pq.read_table(run / "drive_busy.parquet").to_pydict()
    assert set(busy["drive"]) == set(range(14)) and sum(busy["ops"]) == meta["counts"]["drive_ops"]
    ops = pq.read_table(run / "drive_ops.parquet").to_pydict()
    assert len(ops["drive"]) == meta["counts"]["drive_ops"]
    assert all(c >= s for s, c in zip(ops["start_ns"], ops["complete_ns"], strict=True))
    assert all(q <= s for q, s in zip(ops["queued_ns"], ops["start_ns"], strict=True))
    # per-interval busy time adds up to each drive's operations' service times
    per_drive = np.bincount(ops["drive"], np.subtract(ops["complete_ns"], ops["start_ns"]), 14)
    assert np.bincount(busy["drive"], busy["busy_ns"], 14).tolist() == per_drive.tolist()
    assert set(ops["request"]) <= set(ios["request"])
    # closed loop: 8 outstanding
    res = CliRunner().invoke(app, ["replay", str(trace), "--array",
                                   str(ROOT / "examples" / "arrays" / "raid5-entry.toml"),
                                   "-o", str(tmp_path / "run2"), "--closed-loop", "8"])
    assert res.exit_code == 0, res.output


def test_replay_beyond_capacity(tmp_path):
    trace = tmp_path / "t.parquet"
    (tmp_path / "big.trace").write_text("0 0 999999999999 8 1\n10 0 8 8 1\n")
    ingest([str(tmp_path / "big.trace")], str(trace), fmt="mqsim")
    arrays = ROOT / "examples" / "arrays" / "raid5-entry.toml"
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(arrays),
                                   "-o", str(tmp_path / "run")])
    assert res.exit_code == 2
    assert "row 0 (sector 999999999999" in res.stderr and "--wrap" in res.stderr
    assert not (tmp_path / "run").exists()
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(arrays),
                                   "-o", str(tmp_path / "run"), "--wrap"])
    assert res.exit_code == 0, res.output


def test_wrap_folds_a_request_and_cuts_it_at_the_arrays_end(tmp_path):
    """--wrap folds an address beyond the array to its remainder modulo the capacity, and a
    folded request that would run past the array's last sector is cut there: 64 sectors
    folded to 3 before the end carry 3 x 512 bytes. Every drive operation stays within the
    part of its drive the RAID-5 uses (whole 64 KiB stripe units of the drive's blocks)."""
    from blocklab.pipeline.model.catalog import model
    from blocklab.pipeline.model.config import load_array

    arrays = ROOT / "examples" / "arrays" / "raid5-entry.toml"
    cap = build_array(load_array(arrays)).capacity
    unit = 64 * 1024 // 512
    used = model("savvio_15k3_300g").blocks // unit * unit  # sectors of each drive in use
    assert cap == 13 * used  # 14 drives, one unit of each stripe is parity
    # (lba, sectors, MQSim type: 1 read, 0 write) -> (folded lba, sectors left)
    reqs = [((3 * cap + cap - 3, 64, 1), (cap - 3, 3)), ((2 * cap - 1, 8, 0), (cap - 1, 1)),
            ((cap + 16, 8, 1), (16, 8)), ((cap - 8, 8, 0), (cap - 8, 8)), ((100, 8, 1), (100, 8))]
    text = "".join(f"{k * 1000} 0 {lba} {n} {op}\n" for k, ((lba, n, op), _) in enumerate(reqs))
    (tmp_path / "w.trace").write_text(text)
    trace = tmp_path / "t.parquet"
    ingest([str(tmp_path / "w.trace")], str(trace), fmt="mqsim")
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(arrays), "-o",
                                   str(tmp_path / "run"), "--wrap", "--drive-ops"])
    assert res.exit_code == 0, res.output
    ios = pq.read_table(tmp_path / "run" / "ios.parquet").to_pydict()
    assert ios["sector"] == [lba for _, (lba, _n) in reqs]
    assert ios["size_bytes"] == [n * 512 for _, (_lba, n) in reqs]
    assert all(lba + n <= cap for _, (lba, n) in reqs)
    ops = pq.read_table(tmp_path / "run" / "drive_ops.parquet").to_pydict()
    assert ops["sector"] and set(ops["drive"]) <= set(range(14))
    assert all(0 <= s and s + n <= used for s, n in zip(ops["sector"], ops["sectors"],
                                                        strict=True))


@pytest.mark.parametrize("bad, says", [
    ("--speed=0", "--speed must be"), ("--closed-loop=-1", "--closed-loop"),
    ("--speed=nan", "--speed must be a number from 1e-06 to 1e+06"),
    ("--speed=1e-300", "found 1e-300"), ("--speed=inf", "found inf"),
    ("--closed-loop=1000000000", "--closed-loop must be from 0 to 1,048,576"),
    ("--think-us=1e20", "--think-us must be from 0 to")])
def test_replay_bad_options(tmp_path, bad, says):
    """One line, exit 2, before any work (nan and 1e-300 blamed the trace, inf replayed
    every arrival at 0, a billion outstanding ran out of memory, 1e20 us overflowed)."""
    trace = tmp_path / "t.parquet"
    (tmp_path / "t.trace").write_text("0 0 8 8 1\n10 0 16 8 1\n")
    ingest([str(tmp_path / "t.trace")], str(trace), fmt="mqsim")
    arrays = ROOT / "examples" / "arrays" / "raid5-entry.toml"
    extra = ["--closed-loop=4"] if "think" in bad else []
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(arrays), "-o",
                                   str(tmp_path / "r"), bad, *extra])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and says in lines[0], res.stderr
    assert not (tmp_path / "r").exists()


def test_data_path_rate():
    """Host links (2 x 8 Gbit/s: 500 ps per byte) carry host data; the internal bus (1000 MB/s:
    1000 ps per byte) carries every drive operation's data, reserved when it starts."""
    from blocklab.pipeline.model.config import load_array
    from blocklab.pipeline.replay import settings_for

    cfg = parse_array({"group": [{"name": "g", "layout": "raid0", "width": 2,
                                  "stripe_unit": "64KiB", "drive": "atlas10k"}],
                       "controller": {"bandwidth_mb_s": 1000,
                                      "host_links": {"count": 2, "gbit_per_s": 8}}},
                      ROOT / "x.toml")
    opts = settings_for(cfg)
    assert (opts.path_ps, opts.bus_ps) == (500, 1000)
    arr = build_array(cfg, fixed_ns=(10_000, 0))
    two = (np.array([0, 0]), np.array([0, 128]), np.array([0, 0]))
    # 4 KiB each: the bus (4096 ns each) is quicker than the drives (10 us); then the links
    got = run_engine(arr, two[0], two[1], np.array([8, 8]), two[2], settings=opts)
    assert got["done"].tolist() == [10_000 + 2048, 10_000 + 2 * 2048]
    # 64 KiB each: the bus (65536 ns each) is the bottleneck
    got = run_engine(arr, two[0], two[1], np.array([128, 128]), two[2], settings=opts)
    assert got["done"].tolist() == [65536 + 32768, 2 * 65536 + 32768]
    assert load_array(ROOT / "examples" / "arrays" / "raid5-entry.toml").controller \
        .bandwidth_bytes_per_s == 485e6


def _closed_trace(path, rows):
    """A closed-loop trace file as the synthetic generators write it."""
    from blocklab.traces.store import TraceMeta, TraceWriter, columns_to_batch, empty_columns

    cols = empty_columns(len(rows))
    for k in ("time_ns", "sector", "size_bytes", "op", "stream", "stream_seq", "outstanding",
              "think_ns", "phase"):
        cols[k][:] = [r[k] for r in rows]
    with TraceWriter(path, TraceMeta(source_format="test-closed")) as w:
        w.write(columns_to_batch(cols))


def test_closed_loop_trace_replays_closed(tmp_path):
    """A trace with `outstanding` set replays closed loop without flags: two streams with
    windows 1 and 3, a barrier between two phases, think time; equal to the reference."""
    rng = np.random.default_rng(5)
    rows = []
    seq = {0: 0, 1: 0}
    for ph in (0, 1):
        for _k in range(12):
            for s, win in ((0, 1), (1, 3)):
                rows.append(dict(time_ns=0, sector=int(rng.integers(0, 1 << 20)) * 8,
                                 size_bytes=4096 * int(rng.integers(1, 4)), op=ph, stream=s,
                                 stream_seq=seq[s], outstanding=win, think_ns=1000 * s,
                                 phase=ph))
                seq[s] += 1
    trace = tmp_path / "closed.parquet"
    _closed_trace(trace, rows)
    toml = tmp_path / "a.toml"
    toml.write_text('[[group]]\nname = "g"\nlayout = "raid5"\nwidth = 5\ndrive = "atlas10k"\n')
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(toml), "-o",
                                   str(tmp_path / "run"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["closed_loop"] is True
    ios = pq.read_table(tmp_path / "run" / "ios.parquet").to_pydict()
    # the reference, with the HDD replaced by nothing: check the loop's structure instead
    arrive, done = np.array(ios["arrival_ns"]), np.array(ios["complete_ns"])
    stream, op = np.array(ios["stream"]), np.array(ios["op"])
    for s, win in ((0, 1), (1, 3)):
        for ph in (0, 1):
            sel = (stream == s) & (op == ph)
            a, d = arrive[sel], done[sel]
            # never more than the window in flight: the (win + i)-th issue follows the i-th
            # completion of the stream (plus the think time)
            assert (a[win:] >= np.sort(d)[:-win] + 1000 * s).all()
    # the barrier: nothing of phase 1 issues before every phase-0 request completed
    assert arrive[op == 1].min() >= done[op == 0].max()
    # and the same trace through the in-memory engine and the reference (fixed model)
    arr = build_array(parse_array({"group": [{"name": "g", "layout": "raid5", "width": 5,
                                              "drive": "atlas10k"}]}, toml), fixed_ns=(7000, 3))
    cols = {k: np.array([r[k] for r in rows]) for k in rows[0]}
    kw = dict(closed=True, stream=cols["stream"], phase=cols["phase"],
              outstanding=cols["outstanding"], think_ns=cols["think_ns"])
    nsec = cols["size_bytes"] // 512
    got = run_engine(arr, cols["time_ns"], cols["sector"], nsec, cols["op"], chunk=5, ring=8,
                     **kw)
    want = ref.simulate(arr, cols["time_ns"], cols["sector"], nsec, cols["op"], 7000, 3, **kw)
    assert got["done"].tolist() == want.done and got["arrive"].tolist() == want.arrive


def test_closed_loop_flag_on_open_trace(tmp_path):
    """--closed-loop N on an open-loop trace: N outstanding per stream of the trace."""
    trace = tmp_path / "t.parquet"
    ingest([str(SMALL)], str(trace), device="7:0")
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["replay", str(trace), "--array",
                                   str(ROOT / "examples" / "arrays" / "raid5-entry.toml"),
                                   "-o", str(run), "--closed-loop", "4", "--think-us", "50"])
    assert res.exit_code == 0, res.output
    ios = pq.read_table(run / "ios.parquet").to_pydict()
    a, d = np.array(ios["arrival_ns"]), np.array(ios["complete_ns"])
    # at most 4 in flight at any arrival
    for t in a[::50]:
        assert ((a <= t) & (d > t)).sum() <= 4
    assert (a[4:] >= np.sort(d)[:-4] + 50_000).all()


@pytest.mark.parametrize("max_wait_ms", [0, 20])
def test_queue_aging_bounds_a_starved_operation(max_wait_ms):
    """C-LOOK starves an operation beyond a sequential stream that keeps the queue full just
    ahead of the head: it waits for the whole backlog. With aging it waits its limit and at
    most the operation in service (1 ms) more."""
    toml = {"group": [{"name": "g", "layout": "jbod", "width": 1, "drive": "atlas10k",
                       "scheduler": "clook", "queue_depth": 64, "max_wait_ms": max_wait_ms}]}
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(1_000_000, 0))
    n = 400  # 4 KiB sequential every 0.9 ms against 1 ms of service: the queue keeps growing
    arrive = (np.arange(n) * 900_000).astype(np.int64)
    lba = (np.arange(n) * 8).astype(np.int64)
    far = 200  # arrives behind a backlog of about 20 and goes far beyond the stream
    lba[far] = 1_000_000
    nsec = np.full(n, 8, dtype=np.int64)
    w = np.zeros(n, dtype=np.int64)
    got = run_engine(arr, arrive, lba, nsec, w)
    wait = int(got["done"][far] - arrive[far])
    want = ref.simulate(arr, arrive, lba, nsec, w, 1_000_000, 0)
    assert got["done"].tolist() == want.done
    if max_wait_ms == 0:
        assert wait > (n - far - 64) * 1_000_000  # behind the stream until the trace ends
    else:
        assert max_wait_ms * 1e6 <= wait <= max_wait_ms * 1e6 + 2_000_000


def test_aging_under_overload_keeps_the_queue_sorted_between_batches():
    """Every operation of an overloaded queue has waited past max_wait: the oldest goes first
    and begins a batch of 16 picks in C-LOOK order, as Linux's deadline elevator checks its
    expiries only between batches (fifo_batch). Checked at every pick, the queue was served
    first come, first served for good once overloaded (IOPS fell as the load rose: a review's
    RAID-5 of 15K drives, 1,638 IOPS at 256 outstanding, 1,013 at 1,024)."""
    toml = {"group": [{"name": "g", "layout": "jbod", "width": 1, "drive": "atlas10k",
                       "scheduler": "clook", "queue_depth": 64, "max_wait_ms": 5}]}
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(1_000_000, 0))
    n = 320  # all at once, 1 ms each: from 5 ms on, every queued operation is past its limit
    rng = np.random.default_rng(3)
    arrive = np.zeros(n, dtype=np.int64)
    lba = (rng.permutation(n) * 4096).astype(np.int64)
    nsec = np.full(n, 8, dtype=np.int64)
    w = np.zeros(n, dtype=np.int64)
    got = run_engine(arr, arrive, lba, nsec, w)
    assert got["done"].tolist() == ref.simulate(arr, arrive, lba, nsec, w, 1_000_000, 0).done
    order = np.argsort(got["done"], kind="stable")[10:]  # service order once all are aged
    # a batch's picks go up the disk (C-LOOK), an aged pick jumps to the oldest left
    ups = (np.diff(lba[order]) > 0).mean()
    assert ups > 0.8, ups  # first come, first served on these shuffled addresses: about 0.5


@given(st.lists(st.one_of(st.integers(-50, 50), st.integers(-(1 << 62), 1 << 62)), max_size=60))
def test_dense_ids_is_numpys_unique(values):
    """Stream and phase numbering by counting gives what sorting (np.unique) gives, whether
    the values span a small range (counted) or a huge one (sorted)."""
    x = np.array(values, dtype=np.int64)
    ids, idx = dense_ids(x)
    want, inv = np.unique(x, return_inverse=True)
    assert ids.tolist() == want.tolist()
    assert idx.tolist() == inv.reshape(-1).tolist()


@pytest.mark.parametrize("drive,scheduler", [("atlas10k", "fcfs"), ("cheetah_15k5_146g", "sptf")])
def test_the_model_alone_gives_the_engines_completions(drive, scheduler):
    """``hdd.replay_ops``, the model without the engine (what ``make bench`` times per
    operation): fed the engine's own operations of a RAID-5 replay (random 4 KiB reads and
    read-modify-writes, then sequential 1 MiB ones, 8 outstanding), in the order the engine
    started them, with the times it started and queued them, it completes each when the
    engine did and hits the cache where the engine's operation did: the engine adds nothing
    to a drive's service time."""
    from blocklab.kernels.drive import hdd as H
    from blocklab.pipeline.model.array import hdd_tables

    arr = build_array(parse_array({"group": [{
        "name": "r5", "layout": "raid5", "width": 5, "stripe_unit": "64KiB", "drive": drive,
        "scheduler": scheduler, "queue_depth": 8}]}, ROOT / "t.toml"))
    rng = np.random.default_rng(5)
    n = 3000
    lba = np.r_[rng.integers(0, arr.capacity // 8 - 8, n) * 8,
                np.arange(n) * 2048 % (arr.capacity - 2048)].astype(np.int64)
    nsec = np.r_[np.full(n, 8), np.full(n, 2048)].astype(np.int64)
    w = (rng.random(2 * n) < 0.3).astype(np.int64)
    res = run_engine(arr, np.zeros(2 * n, np.int64), lba, nsec, w, closed=True, outstanding=8,
                     drive_ops=True, bus_ps=0)
    o = np.argsort(res["op_start"], kind="stable")
    op = {k: res[f"op_{k}"][o] for k in ("drive", "start", "qtime", "lba", "n", "write",
                                          "done", "hit")}
    done = np.zeros(len(o), np.int64)
    hits = H.replay_ops(*hdd_tables(arr.models), H.new_state(len(arr.d_model)), op["drive"],
                        op["start"], op["qtime"],
                        op["lba"], op["n"], op["write"], done)
    assert len(o) > 2 * n
    assert np.array_equal(done, op["done"])
    assert hits == int(op["hit"].sum()) > 0
