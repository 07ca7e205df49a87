"""``spc1 search`` on a small array: the BSU count it finds meets the response-time limit and one
more BSU does not, checked by generating and replaying those two loads here; the cap and the
case where not even one BSU fits are reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.replay import replay
from blocklab.pipeline.synth import spc1_search, synth_spc1

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

ARRAY = Path(__file__).parent / "arrays" / "spc1-small.toml"
DURATION = 20.0
runner = CliRunner()


def _mean_ms(tmp_path: Path, bsu: int, seed: int) -> float:
    trace = tmp_path / f"spc1-{bsu}.parquet"
    synth_spc1(trace, bsu, DURATION, seed=seed, array=ARRAY)
    return replay(trace=trace, array=ARRAY, output=tmp_path / f"run-{bsu}").mean_latency_ms


def test_search_finds_the_edge(tmp_path):
    for limit in (30.0, 80.0):
        r = spc1_search(ARRAY, limit, DURATION, seed=1)
        assert r.bsu >= 1 and not r.capped
        assert _mean_ms(tmp_path, r.bsu, 1) <= limit
        assert _mean_ms(tmp_path, r.bsu + 1, 1) > limit
        assert r.mean_latency_ms == _mean_ms(tmp_path, r.bsu, 1)
        assert abs(r.iops - 50 * r.bsu) < 5 * (50 * r.bsu / DURATION) ** 0.5


def test_cli_output_cap_and_nothing_fits():
    res = runner.invoke(app, ["spc1", "search", "--array", str(ARRAY), "--limit-ms", "30",
                              "--duration", "20", "--max-bsu", "1", "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)
    assert r["bsu"] == 1 and r["capped"] and r["max_bsu"] == 1
    res = runner.invoke(app, ["spc1", "search", "--array", str(ARRAY), "--limit-ms", "0.5",
                              "--duration", "5"])
    assert res.exit_code == 0, res.output
    assert "even 1 BSU (50 IOPS) exceeds 0.5 ms" in res.stdout
    res = runner.invoke(app, ["spc1", "search", "--array", str(ARRAY), "--limit-ms", "30",
                              "--duration", "20"])
    assert res.exit_code == 0 and " BSU, " in res.stdout and "IOPS, mean response time" in \
        res.stdout
