"""``spc1 search`` on a small array: the BSU count it finds meets the response-time limit and one
more BSU does not, checked by generating and replaying those two loads here and measuring the
requests that arrive after the ramp-up; the cap and the case where not even one BSU fits are
reported; bad periods are refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.replay import replay
from blocklab.pipeline.synth import spc1_search, synth_spc1

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

ARRAY = Path(__file__).parent / "arrays" / "spc1-small.toml"
DURATION = 20.0
runner = CliRunner()


def _measured(tmp_path: Path, bsu: int, seed: int, ramp: float) -> tuple[int, float]:
    """Requests arriving after the ramp-up and their mean latency (ms), from ios.parquet."""
    trace = tmp_path / f"spc1-{bsu}-{ramp}.parquet"
    synth_spc1(trace, bsu, ramp + DURATION, seed=seed, array=ARRAY)
    run = tmp_path / f"run-{bsu}-{ramp}"
    replay(trace=trace, array=ARRAY, output=run)
    ios = pq.read_table(run / "ios.parquet", columns=["arrival_ns", "latency_ns"])
    lat = ios["latency_ns"].to_numpy()[ios["arrival_ns"].to_numpy() >= ramp * 1e9]
    return len(lat), float(np.mean(lat)) / 1e6


@pytest.mark.parametrize("ramp", [0.0, 10.0])
def test_search_finds_the_edge(tmp_path, ramp):
    for limit in (30.0, 80.0):
        r = spc1_search(ARRAY, limit, DURATION, seed=1, ramp_s=ramp)
        assert r.bsu >= 1 and not r.capped and r.ramp_s == ramp
        n, mean = _measured(tmp_path, r.bsu, 1, ramp)
        assert mean <= limit and r.mean_latency_ms == pytest.approx(mean, rel=1e-12)
        assert _measured(tmp_path, r.bsu + 1, 1, ramp)[1] > limit
        assert r.iops == n / DURATION
        assert abs(r.iops - 50 * r.bsu) < 5 * (50 * r.bsu / DURATION) ** 0.5


@pytest.mark.parametrize("args, message", [
    (["--ramp-up", "-1"], "--ramp-up: must be 0 or more seconds, found -1.0"),
    (["--duration", "inf"], "--duration: must be positive seconds, at most 4,611,686,018"),
    (["--duration", "0"], "--duration: must be positive seconds"),
])
def test_bad_periods_are_refused(args, message):
    res = runner.invoke(app, ["spc1", "search", "--array", str(ARRAY), *args])
    assert res.exit_code == 2
    assert res.stderr.startswith(f"blocklab: error: {message}") and res.stderr.count("\n") == 1


def test_cli_output_cap_and_nothing_fits():
    res = runner.invoke(app, ["spc1", "search", "--array", str(ARRAY), "--limit-ms", "30",
                              "--duration", "20", "--ramp-up", "0", "--max-bsu", "1",
                              "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)
    assert r["bsu"] == 1 and r["capped"] and r["max_bsu"] == 1
    res = runner.invoke(app, ["spc1", "search", "--array", str(ARRAY), "--limit-ms", "0.5",
                              "--duration", "5", "--ramp-up", "5"])
    assert res.exit_code == 0, res.output
    assert "even 1 BSU (50 IOPS) exceeds 0.5 ms" in res.stdout
    res = runner.invoke(app, ["spc1", "search", "--array", str(ARRAY), "--limit-ms", "30",
                              "--duration", "20", "--ramp-up", "5"])
    assert res.exit_code == 0 and " BSU, " in res.stdout and "IOPS, mean response time" in \
        res.stdout


def test_a_count_whose_writes_outpace_the_drives_is_flagged(tmp_path):
    """A write-back cache takes writes faster than the drives destage them until it fills,
    so a search can pass a count the array does not sustain (on one 2 GiB-cache array, 98 BSU
    after a 60 s ramp-up and 60 s measured, 80 after 180 s and 600 s). Each probe carries the
    cache's dirty share at its end (as meta.json has it), and the CLI notes a count found
    whose cache ended at or above flush_start."""
    array = tmp_path / "cached.toml"
    array.write_text(ARRAY.read_text() + '\n[controller]\ncache = "8MiB"\n')
    res = runner.invoke(app, ["spc1", "search", "--array", str(array), "--limit-ms", "30",
                              "--duration", "10", "--ramp-up", "2", "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)
    for p in r["probes"]:  # independently: the same trace replayed here, its meta.json read
        trace = tmp_path / f"t{p['bsu']}.parquet"
        synth_spc1(trace, p["bsu"], 12.0, seed=0, array=array)
        run = tmp_path / f"r{p['bsu']}"
        replay(trace=trace, array=array, output=run)
        end = json.loads((run / "meta.json").read_text())["cache_at_end"]
        assert p["cache_dirty_end"] == end["dirty_lines"] / end["lines"]
        assert p["flush_start"] == 0.8
    best = next(p for p in r["probes"] if p["bsu"] == r["bsu"])
    assert best["cache_dirty_end"] >= 0.8  # an 8 MiB cache fills in these 12 s
    res = runner.invoke(app, ["spc1", "search", "--array", str(array), "--limit-ms", "30",
                              "--duration", "10", "--ramp-up", "2"])
    assert res.exit_code == 0
    assert res.stderr.startswith(f"blocklab: note: at {r['bsu']} BSU the controller cache "
                                 "ended ")
