"""The replay engine against the plain-Python reference (exact, on small random traces, with
the fixed drive model), its invariants with the HDD model, and `blocklab replay`."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.config import parse_array
from blocklab.pipeline.ingest import ingest
from blocklab.pipeline.replay import build_array, run_engine

from .conftest import ROOT
from .reference import engine as ref

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
                       "scheduler": draw(st.sampled_from(["fcfs", "sstf", "clook"])),
                       "queue_depth": draw(st.sampled_from([1, 2, 8, 64]))}]}
    if volume:
        toml["volume"] = {"stripe_unit": draw(st.sampled_from(["8KiB", "64KiB"]))}
    # coarse times make ties (equal event times) common: the tie-break rules get exercised
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(
        draw(st.sampled_from([1000, 2000, 7919])), draw(st.sampled_from([0, 0, 10, 37]))))
    n = draw(st.integers(1, 40))
    gaps = st.sampled_from([0, 0, 1000, 2000, 3000]) if draw(st.booleans()) \
        else st.integers(0, 30_000)
    arrive = np.cumsum(draw(st.lists(gaps, min_size=n, max_size=n)))
    nsec = np.array(draw(st.lists(st.integers(1, 300), min_size=n, max_size=n)))
    span = min(arr.capacity, 4096)
    lba = np.array([draw(st.integers(0, span - int(k))) for k in nsec])
    w = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)))
    closed = draw(st.booleans())
    return arr, arrive.astype(np.int64), lba.astype(np.int64), nsec.astype(np.int64), \
        w.astype(np.int64), closed, draw(st.integers(1, 4)), draw(st.integers(0, 5000)), \
        draw(st.sampled_from([0, 0, 500, 1000, 3000])), draw(st.sampled_from([0, 0, 1, 250]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_engine_equals_reference(sc):
    arr, arrive, lba, nsec, w, closed, outstanding, think, ctrl, path = sc
    got = run_engine(arr, arrive, lba, nsec, w, closed=closed, outstanding=outstanding,
                     think_ns=think, ctrl_ns=ctrl, drive_ops=True, path_ps_per_byte=path)
    a, s, d, busy, ops = ref.simulate(arr, arrive, lba, nsec, w, int(arr.fixed[0]),
                                      int(arr.fixed[1]), closed, outstanding, think, ctrl, path)
    assert got["arrive"].tolist() == a
    assert got["start"].tolist() == s
    assert got["done"].tolist() == d
    assert got["busy_ns"].tolist() == busy
    assert got["ops"].tolist() == ops
    recorded = list(zip(*(got[f"op_{k}"].tolist() for k in ("drive", "req", "start", "done",
                                                             "lba", "n")), strict=True))
    assert recorded == ref.records  # every drive operation, in the order they started


def test_operation_slots_grow(tmp_path):
    """More operations in flight than the first slot allocation: all requests complete."""
    toml = {"group": [{"name": "g", "layout": "raid6", "width": 10, "stripe_unit": "4KiB",
                       "drive": "atlas10k"}]}
    arr = build_array(parse_array(toml, tmp_path / "x.toml"), fixed_ns=(1_000_000, 0))
    n = 3000  # all arrive at once: thousands of operations queue
    arrive = np.zeros(n, dtype=np.int64)
    lba = (np.arange(n) * 64).astype(np.int64)
    nsec = np.full(n, 8, dtype=np.int64)
    got = run_engine(arr, arrive, lba, nsec, np.ones(n, dtype=np.int64))
    assert (got["done"] > 0).all()
    a, s, d, busy, ops = ref.simulate(arr, arrive, lba, nsec, np.ones(n, dtype=np.int64),
                                      1_000_000, 0)
    assert got["done"].tolist() == d


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
    busy = pq.read_table(run / "drive_busy.parquet").to_pydict()
    assert len(busy["drive"]) == 14 and sum(busy["ops"]) == meta["counts"]["drive_ops"]
    ops = pq.read_table(run / "drive_ops.parquet").to_pydict()
    assert len(ops["drive"]) == meta["counts"]["drive_ops"]
    assert all(c >= s for s, c in zip(ops["start_ns"], ops["complete_ns"], strict=True))
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
    assert "request 0 (sector 999999999999" in res.stderr and "--wrap" in res.stderr
    assert not (tmp_path / "run").exists()
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(arrays),
                                   "-o", str(tmp_path / "run"), "--wrap"])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("bad", ["--speed=0", "--closed-loop=-1"])
def test_replay_bad_options(tmp_path, bad):
    res = CliRunner().invoke(app, ["replay", "x.parquet", "--array", "a.toml", "-o",
                                   str(tmp_path / "r"), bad])
    assert res.exit_code == 2


def test_data_path_rate():
    """A data path of 1 ns per byte: a 4 KiB read alone takes its drive time plus 4096 ns."""
    from blocklab.pipeline.config import load_array
    from blocklab.pipeline.replay import data_path_ps_per_byte

    cfg = parse_array({"group": [{"name": "g", "layout": "raid0", "width": 2,
                                  "stripe_unit": "64KiB", "drive": "atlas10k"}],
                       "controller": {"bandwidth_mb_s": 1000,
                                      "host_links": {"count": 2, "gbit_per_s": 8}}},
                      ROOT / "x.toml")
    assert data_path_ps_per_byte(cfg) == 1000  # min(1000 MB/s, 2 x 8 Gbit/s = 2000 MB/s)
    arr = build_array(cfg, fixed_ns=(10_000, 0))
    got = run_engine(arr, np.array([0, 0]), np.array([0, 128]), np.array([8, 8]),
                     np.array([0, 0]), path_ps_per_byte=1000)
    # both reads finish on their drives at 10 us, then share the path one after the other
    assert got["done"].tolist() == [10_000 + 4096, 10_000 + 2 * 4096]
    assert load_array(ROOT / "examples" / "arrays" / "raid5-entry.toml").controller \
        .bandwidth_bytes_per_s == 485e6
