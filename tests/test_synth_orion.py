"""Orion traces: the matrix's data points as Orion's user guide defines them, one phase each;
small random and large (random or sequential) I/Os as separate streams with their outstanding
counts; sizes, alignment and the write percentage (stated tolerance); issue order."""

from __future__ import annotations

import math

import numpy as np
import pyarrow.parquet as pq
import pytest

from blocklab.pipeline.synth import synth_orion
from blocklab.traces.errors import BlocklabError
from blocklab.traces.store import open_trace

CAP = "4GiB"


def _load(path):
    t = pq.read_table(path).to_pydict()
    return {k: np.array(v) for k, v in t.items() if k in (
        "phase", "stream", "stream_seq", "outstanding", "size_bytes", "sector", "op", "time_ns")}


def _points(matrix, s, n):
    """The guide's matrices over small levels 0..s and large levels 0..n."""
    every = [(a, b) for b in range(n + 1) for a in range(s + 1)]
    pts = {
        "basic": [(a, 0) for a in range(1, s + 1)] + [(0, b) for b in range(1, n + 1)],
        "detailed": every,
        "row": [(a, n) for a in range(s + 1)],
        "col": [(s, b) for b in range(n + 1)],
        "point": [(s, n)],
        "max": [p for p in every if p[0] == s or p[1] == n],
    }[matrix]
    return [p for p in pts if p != (0, 0)]


@pytest.mark.parametrize("matrix", ["basic", "detailed", "row", "col", "point", "max"])
@pytest.mark.parametrize("kind", ["rand", "seq"])
def test_matrix_points_and_streams(tmp_path, matrix, kind):
    out = tmp_path / "o.parquet"
    per_slot = 3
    synth_orion(out, matrix=matrix, large_type=kind, num_disks=1, num_small=3, num_large=2,
                num_streamio=2, requests_per_slot=per_slot, capacity=CAP, seed=1)
    _pf, meta = open_trace(out)
    points = [(p["small"], p["large"]) for p in meta.extra["points"]]
    assert sorted(points) == sorted(_points(matrix, 3, 2))
    t = _load(out)
    assert (t["time_ns"] == 0).all()
    order = np.lexsort((t["stream"], t["stream_seq"], t["phase"]))
    assert (order == np.arange(len(order))).all()  # phase, then place, streams interleaved
    assert sorted(set(t["phase"].tolist())) == list(range(len(points)))
    seen_ids: set[int] = set()
    for ph, (s, n) in enumerate(points):
        mine = t["phase"] == ph
        small = mine & (t["size_bytes"] == 8192)
        large = mine & (t["size_bytes"] == 1 << 20)
        assert int(small.sum()) == s * per_slot
        if s:
            assert len(set(t["stream"][small])) == 1 and set(t["outstanding"][small]) == {s}
        ids = set(t["stream"][large].tolist())
        if kind == "rand":
            assert int(large.sum()) == n * per_slot
            assert len(ids) == min(n, 1) and set(t["outstanding"][large]) <= {n}
        else:  # n sequential streams, each with num_streamio outstanding
            assert int(large.sum()) == n * 2 * per_slot and len(ids) == n
            assert set(t["outstanding"][large]) <= {2}
        here = set(t["stream"][mine].tolist())
        assert not here & seen_ids  # a point's streams are its own
        seen_ids |= here
        for sid in here:
            seq = t["stream_seq"][t["stream"] == sid]
            assert (seq == np.arange(len(seq))).all()


def test_sizes_alignment_writes_and_sequential_streams(tmp_path):
    out = tmp_path / "o.parquet"
    synth_orion(out, matrix="detailed", large_type="seq", num_disks=2, write_pct=30,
                requests_per_slot=200, capacity=CAP, seed=9)
    t = _load(out)
    cap = 4 << 30
    small = t["size_bytes"] == 8192  # the defaults: 8 KiB small, 1 MiB large
    assert set(t["size_bytes"].tolist()) == {8192, 1 << 20}
    assert (t["sector"][small] % 16 == 0).all() and (t["sector"][~small] % 2048 == 0).all()
    assert ((t["sector"] * 512 + t["size_bytes"]) <= cap).all()
    n = len(t["op"])
    assert abs(float(t["op"].mean()) - 0.3) <= 5 * math.sqrt(0.3 * 0.7 / n)
    # default levels: 5 small and 2 large per disk -> small 0..10, large 0..4
    _pf, meta = open_trace(out)
    assert meta.extra["options"]["num_small"] == 10 and meta.extra["options"]["num_large"] == 4
    for sid in np.unique(t["stream"][~small]):
        s = t["sector"][t["stream"] == sid]
        step = np.diff(s)
        assert ((step == 2048) | (s[1:] == 0)).all()  # on by 1 MiB, or wrapped to the start


def test_bad_options(tmp_path):
    with pytest.raises(BlocklabError, match="--matrix: one of basic"):
        synth_orion(tmp_path / "o.parquet", matrix="diagonal", capacity=CAP)
    with pytest.raises(BlocklabError, match="no data point"):
        synth_orion(tmp_path / "o.parquet", matrix="point", num_small=0, num_large=0,
                    capacity=CAP)
    with pytest.raises(BlocklabError, match="--size-large: .* larger than the volume"):
        synth_orion(tmp_path / "o.parquet", capacity="512k")
    assert not (tmp_path / "o.parquet").exists()
