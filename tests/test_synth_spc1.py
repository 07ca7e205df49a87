"""SPC-1 traces against the SPC-1 stream table (as published in NetApp's spc1.c v1.4): stream
shares, read fractions, exponential arrivals, the sequential streams' transfer-size mix and
runs, and the hot regions' skew and reuse, each within a stated statistical tolerance; the ASU
layout; bad capacities and BSU counts; the same seed gives the same bytes.

Tolerances: five standard deviations of the estimate (binomial sqrt(p(1-p)/n) for fractions,
sigma/sqrt(n) for means), so a correct generator fails one check in about 3.5 million; the
seed is fixed, so the tests are deterministic anyway.
"""

from __future__ import annotations

import math
import os
import stat

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.synth import synth_spc1
from blocklab.traces.errors import BlocklabError
from blocklab.traces.store import open_trace

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

runner = CliRunner()

# The SPC-1 stream table: stream k of a BSU -> (ASU, intensity, read fraction, pattern).
SPEC = [
    (1, 0.035, 0.5, "uniform"),
    (1, 0.281, 0.5, "walk"),
    (1, 0.070, 1.0, "seq"),
    (1, 0.210, 0.5, "walk"),
    (2, 0.018, 0.3, "uniform"),
    (2, 0.070, 0.3, "walk"),
    (2, 0.035, 1.0, "seq"),
    (3, 0.281, 0.0, "seq"),
]
SEQ_SIZES = {1: 0.40, 2: 0.24, 4: 0.20, 8: 0.08, 16: 0.08}  # 4 KiB blocks: 10, 6, 5, 2, 2 of 25
# A capacity whose ASU-1 and ASU-2 hold 40960 blocks of 4 KiB: hot regions (5 %) of 2048
# blocks = 256 leaves of 32 KiB, a power of two, so each walk's tree is its whole region.
CAP = 728178
ASU_BLOCKS = (40960, 40960, CAP * 10 // 100 // 8)
ASU_BASE = (0, 40960 * 8, 2 * 40960 * 8)
BSU, DURATION = 2, 2000.0


def tol(p: float, n: int) -> float:
    return 5 * math.sqrt(p * (1 - p) / n) if 0 < p < 1 else 0.0


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("spc1") / "spc1.parquet"
    synth_spc1(path, BSU, DURATION, seed=11, capacity=f"{CAP}s")
    t = pq.read_table(path).to_pydict()
    cols = {k: np.array(t[k]) for k in ("time_ns", "device", "sector", "size_bytes", "op",
                                        "stream")}
    cols["k"] = cols["stream"] % 8
    cols["asu_block"] = (cols["sector"] - np.array((0, *ASU_BASE))[cols["device"]]) // 8
    cols["blocks"] = cols["size_bytes"] // 4096
    cols["path"] = path
    assert t["outstanding"] == [None] * len(t["op"])  # open loop
    return cols


def test_stream_shares_and_read_fractions(trace):
    n = len(trace["k"])
    assert abs(n - 50 * BSU * DURATION) < 5 * math.sqrt(50 * BSU * DURATION)  # Poisson count
    for k, (asu, intensity, read, _pat) in enumerate(SPEC):
        mine = trace["k"] == k
        nk = int(mine.sum())
        assert abs(nk / n - intensity) <= tol(intensity, n), f"stream {k} share {nk / n}"
        assert (trace["device"][mine] == asu).all()
        reads = float((trace["op"][mine] == 0).mean())
        assert abs(reads - read) <= tol(read, nk), f"stream {k} read fraction {reads}"


def test_arrivals_are_poisson(trace):
    t = trace["time_ns"]
    assert (np.diff(t) >= 0).all()
    gaps = np.diff(t) / 1e9
    mean = 1 / (50 * BSU)
    assert abs(gaps.mean() - mean) <= 5 * mean / math.sqrt(len(gaps))
    below = float((gaps < mean).mean())  # exponential: P(gap < mean) = 1 - 1/e
    assert abs(below - (1 - math.exp(-1))) <= tol(1 - math.exp(-1), len(gaps))
    # one stream alone (BSU 1's ASU3-1) is a Poisson process of its intensity x 50 IOPS
    g = np.diff(t[trace["stream"] == 8 + 7]) / 1e9
    m = 1 / (50 * SPEC[7][1])
    assert abs(g.mean() - m) <= 5 * m / math.sqrt(len(g))
    assert abs(float((g < m).mean()) - (1 - math.exp(-1))) <= tol(1 - math.exp(-1), len(g))


def test_sequential_streams(trace):
    seq = np.isin(trace["k"], [2, 6, 7])
    sizes = trace["blocks"][seq]
    for b, p in SEQ_SIZES.items():
        assert abs(float((sizes == b).mean()) - p) <= tol(p, len(sizes)), f"{b} blocks"
    assert set(np.unique(trace["blocks"][~seq])) == {1}  # random streams move 4 KiB
    for k, lo_pct, hi_pct in ((2, 20, 70), (6, 20, 70), (7, 0, 100)):
        for b in range(BSU):
            mine = trace["stream"] == 8 * b + k
            blk, ln = trace["asu_block"][mine], trace["blocks"][mine]
            size = ASU_BLOCKS[SPEC[k][0] - 1]
            assert blk.min() >= size * lo_pct // 100
            assert (blk + ln).max() <= size * hi_pct // 100
            contiguous = blk[1:] == blk[:-1] + ln[:-1]
            assert contiguous.mean() > 0.99  # runs of 10 % (30 %) of the ASU, ~3.6 blocks each
            starts = blk[1:][~contiguous]
            assert (starts % 16 == 0).all()  # runs start on 64 KiB boundaries


def test_hot_regions_skew_and_reuse(trace):
    regions = {1: (1, 15), 3: (1, 70), 5: (2, 47)}  # stream -> (ASU, start % of the ASU)
    for k, (asu, pct) in regions.items():
        lo = ASU_BLOCKS[asu - 1] * pct // 100 // 8 * 8
        blk = trace["asu_block"][trace["k"] == k]
        assert blk.min() >= lo and blk.max() < lo + 2048, f"stream {k} outside its region"
    # skew: ASU-1's two 5 % regions get its walk streams plus a tenth of its uniform stream
    # (its sequential runs stay within 20 %..70 %)
    on1 = trace["device"] == 1
    b1 = trace["asu_block"][on1]
    hot = ((b1 >= 6144) & (b1 < 6144 + 2048)) | ((b1 >= 28672) & (b1 < 28672 + 2048))
    i = [s[1] for s in SPEC]
    want = (i[1] + i[3] + 0.1 * i[0]) / (i[0] + i[1] + i[2] + i[3])
    assert abs(float(hot.mean()) - want) <= tol(want, int(on1.sum()))
    assert want > 0.8  # 10 % of the ASU takes over 80 % of its I/O
    # reuse: reads of a leaf (32 KiB) take its 8 blocks in turn, 0, 1, 2, ... (shared by BSUs)
    walk0 = (trace["k"] == 1) & (trace["op"] == 0)
    rel = trace["asu_block"][walk0] - 6144
    seen: dict[int, int] = {}
    for r in rel:
        leaf, blk = divmod(int(r), 8)
        assert blk == seen.get(leaf, 0), f"leaf {leaf} read block {blk}"
        seen[leaf] = (blk + 1) % 8
    # the walk: a read stays in the previous access's subtree of 128 leaves unless it widens
    # (44 %) to the whole 256-leaf tree, where it lands in the same half by chance: 0.56 + 0.22
    same = total = 0
    for b in range(BSU):
        mine = trace["stream"] == 8 * b + 1
        leaf = (trace["asu_block"][mine] - 6144) // 8
        is_read = trace["op"][mine][1:] == 0
        stay = (leaf[1:] // 128) == (leaf[:-1] // 128)
        same += int(stay[is_read].sum())
        total += int(is_read.sum())
    assert abs(same / total - 0.78) <= tol(0.78, total)
    # writes are followed by a rewrite of the same block 15 % of the time
    again = total_w = 0
    for b in range(BSU):
        mine = (trace["stream"] == 8 * b + 1) & (trace["op"] == 1)
        blk = trace["asu_block"][mine]
        again += int((blk[1:] == blk[:-1]).sum())
        total_w += len(blk) - 1
    assert 0.15 - tol(0.15, total_w) <= again / total_w <= 0.17 + tol(0.17, total_w)


def test_asu_layout(trace):
    for a in (1, 2, 3):
        on = trace["device"] == a
        lo = ASU_BASE[a - 1] * 1
        assert trace["sector"][on].min() >= lo
        assert (trace["sector"][on] + trace["blocks"][on] * 8).max() <= lo + ASU_BLOCKS[a - 1] * 8
    assert (trace["sector"] % 8 == 0).all()
    _pf, meta = open_trace(trace["path"])
    assert meta.source_format == "synth-spc1"
    assert meta.extra["options"] == {"bsu": BSU, "duration_s": DURATION, "seed": 11,
                                     "capacity_sectors": CAP}
    assert [a["first_sector"] for a in meta.extra["asu"]] == list(ASU_BASE)
    assert stat.S_IMODE(os.stat(trace["path"]).st_mode) == 0o600


def test_same_seed_same_bytes(tmp_path):
    a, b, c = (tmp_path / f"{n}.parquet" for n in "abc")
    synth_spc1(a, 3, 30.0, seed=4, capacity="1GiB")
    synth_spc1(b, 3, 30.0, seed=4, capacity="1GiB")
    synth_spc1(c, 3, 30.0, seed=5, capacity="1GiB")
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_capacity_too_small_and_too_many_bsus(tmp_path):
    # ASU-1 and ASU-2 need 20480 blocks: 45 % of 364089 sectors is the first capacity that has
    synth_spc1(tmp_path / "x.parquet", 1, 1.0, capacity="364089s")
    with pytest.raises(BlocklabError, match="too small for SPC-1.*at least 364089 sectors"):
        synth_spc1(tmp_path / "x.parquet", 1, 1.0, capacity="364088s")
    # ASU-2's 2048-block hot region holds two walk subtrees of 128 leaves: two BSUs
    with pytest.raises(BlocklabError, match="3 BSUs exceed .* at most 2 BSUs"):
        synth_spc1(tmp_path / "x.parquet", 3, 1.0, capacity=f"{CAP}s")
    out = tmp_path / "o" / "spc1.parquet"
    out.parent.mkdir()
    res = runner.invoke(app, ["synth", "spc1", "--bsu", "100000", "--capacity", "1GiB",
                              "-o", str(out)])
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("blocklab: error: --bsu: 100000 BSUs exceed")
    assert list(out.parent.iterdir()) == []
    res = runner.invoke(app, ["synth", "spc1", "--bsu", "1", "-o", str(out)])
    assert res.exit_code == 2 and "--capacity SIZE or --array" in res.stderr


def test_capacity_from_array(tmp_path):
    from blocklab.pipeline.model.config import load_array
    from blocklab.pipeline.replay import build_array

    cfg = os.path.join(os.path.dirname(__file__), "arrays", "spc1-small.toml")
    out = tmp_path / "t.parquet"
    res = runner.invoke(app, ["synth", "spc1", "--bsu", "2", "--duration", "5", "--array", cfg,
                              "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    cap = build_array(load_array(cfg)).capacity
    _pf, meta = open_trace(out)
    assert meta.extra["options"]["capacity_sectors"] == cap
    t = pq.read_table(out).to_pydict()
    assert max(s + n // 512 for s, n in zip(t["sector"], t["size_bytes"], strict=True)) <= cap
