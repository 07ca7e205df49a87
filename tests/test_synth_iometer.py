"""Iometer traces: every I/O equals a plain-Python transcription of Iometer's worker
(Hypothesis); the read and random percentages hold within stated tolerances on a long run;
closed-loop columns; bad options in one line."""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.synth import synth_iometer
from blocklab.traces.errors import BlocklabError

from .reference import iometer as ref

runner = CliRunner()


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(workers=st.integers(1, 3), requests=st.integers(1, 40), xfer=st.integers(1, 16),
       read_pct=st.integers(0, 100), random_pct=st.integers(0, 100),
       align=st.sampled_from([0, 1, 3, 8, 128]), outstanding=st.integers(1, 64),
       cap=st.integers(64, 4096), start=st.integers(0, 40), disk=st.integers(0, 600),
       seed=st.integers(0, 2**32))
def test_matches_iometer_worker(tmp_path, workers, requests, xfer, read_pct, random_pct, align,
                                outstanding, cap, start, disk, seed):
    out = tmp_path / "io.parquet"
    kw = dict(transfer_size=f"{xfer}s", read_pct=read_pct, random_pct=random_pct,
              align=f"{align}s", outstanding=outstanding, workers=workers, requests=requests,
              starting_sector=start, disk_sectors=disk, seed=seed, capacity=f"{cap}s")
    size = cap - start if disk == 0 else min(disk, cap - start)
    a = align or 1
    if -(-start // a) * a + xfer > start + size:  # not even one aligned transfer fits
        with pytest.raises(BlocklabError, match="does not fit"):
            synth_iometer(out, **kw)
        return
    synth_iometer(out, **kw)
    per = [ref.worker(seed + w, requests, xfer * 512, read_pct, random_pct, align * 512, start,
                      size) for w in range(workers)]
    want = [(w, k, per[w][k][0], per[w][k][1] // 512) for k in range(requests)
            for w in range(workers)]
    t = pq.read_table(out).to_pydict()
    got = list(zip(t["stream"], t["stream_seq"], t["op"], t["sector"], strict=True))
    assert got == want
    assert set(t["outstanding"]) == {outstanding} and set(t["phase"]) == {0}
    assert set(t["size_bytes"]) == {xfer * 512} and set(t["time_ns"]) == {0}
    assert all(s + xfer <= start + size for s in t["sector"])


def test_percentages_hold(tmp_path):
    out = tmp_path / "io.parquet"
    n = 200_000
    synth_iometer(out, transfer_size="8k", read_pct=67, random_pct=25, align="4k", workers=2,
                  requests=n // 2, outstanding=16, seed=3, capacity="64GiB")
    t = pq.read_table(out).to_pydict()
    op = np.array(t["op"])
    sector = np.array(t["sector"])
    stream = np.array(t["stream"])
    tol = 5 * math.sqrt(0.67 * 0.33 / n)  # five standard deviations
    assert abs(float((op == 0).mean()) - 0.67) <= tol
    # sequential I/Os follow their worker's previous one; random ones land anywhere (a random
    # one right after the previous is negligible on 64 GiB)
    seq = np.concatenate([np.diff(sector[stream == w]) == 16 for w in range(2)])
    tol = 5 * math.sqrt(0.25 * 0.75 / len(seq))
    assert abs(float(1 - seq.mean()) - 0.25) <= tol
    assert (sector % 8 == 0).all()


@pytest.mark.parametrize("args, needle", [
    (["--read-pct", "101"], "--read-pct: a percentage from 0 to 100"),
    (["--transfer-size", "1000"], "--transfer-size: must be a positive multiple of 512"),
    (["--transfer-size", "2m", "--capacity", "1m"], "does not fit"),
    (["--starting-sector", "4096"], "--starting-sector: 4096 is not within"),
    (["--transfer-size", "4x"], "--transfer-size: unknown size unit 'x'"),
])
def test_bad_options(tmp_path, args, needle):
    out = tmp_path / "o" / "io.parquet"
    out.parent.mkdir()
    base = ["--capacity", "2m"] if "--capacity" not in args else []
    res = runner.invoke(app, ["synth", "iometer", "-o", str(out), *base, *args])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("blocklab: error: ") and needle in lines[0]
    assert list(out.parent.iterdir()) == []


def test_a_trace_the_disk_cannot_hold_is_refused_early(tmp_path, monkeypatch):
    """`synth ... --requests 1e13` wrote until the disk was full, hours later. The first
    bytes written give the bytes per request; a total past the output disk's free space (the
    real one here: 10^15 requests are petabytes at any compression) is refused then, naming the
    output, and nothing is left; a trace that fits is written whole through the same check."""
    from blocklab.pipeline import synth as synth_mod

    monkeypatch.setattr(synth_mod, "ROOM_CHECK_BYTES", 1)  # check after the first row groups
    out = tmp_path / "o" / "io.parquet"
    out.parent.mkdir()
    res = runner.invoke(app, ["synth", "iometer", "-o", str(out), "--capacity", "64GiB",
                              "--random-pct", "100", "--requests", str(10**15)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"blocklab: error: {out}: "), lines
    m = re.search(r"need about ([\d.,]+) TB .*\(([\d.e+-]+) bytes a request over the first "
                  r"([\d,]+)\), and its disk has ([\d.,]+) (GB|TB) free", lines[0])
    assert m, lines[0]
    per, first = float(m[2]), int(m[3].replace(",", ""))
    assert 0 < first < 10**8 and per > 0
    assert float(m[1].replace(",", "")) == pytest.approx(per * 10**15 / 1e12, rel=0.01)
    assert list(out.parent.iterdir()) == []
    n = 300_000
    synth_iometer(out, requests=n, random_pct=100, capacity="64GiB")
    assert pq.read_metadata(out).num_rows == n
