"""What the replay says of requests and rebuilds after failures past what the array can take:
requests with lost data (ios.lost, left out of the latencies) and a rebuild whose spare
failed (issue 5's failures; the engine's side is in test_failures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from blocklab.pipeline.cli import app

from .reference import layout


def _iometer(tmp_path: Path, group: str, read_pct: int, requests: int) -> tuple[Path, Path]:
    """An array of one group (``group``: its TOML lines after the name, 64 KiB stripe unit)
    and a 4 KiB random Iometer trace on it, two outstanding."""
    from blocklab.pipeline.synth import synth_iometer

    toml = tmp_path / "a.toml"
    toml.write_text('[[group]]\nname = "g"\nstripe_unit = "64KiB"\n' + group)
    trace = tmp_path / "w.parquet"
    synth_iometer(trace, transfer_size="4k", read_pct=read_pct, random_pct=100, align="4k",
                  requests=requests, outstanding=2, array=str(toml))
    return toml, trace


def test_requests_to_lost_stripes_are_lost_and_left_out_of_the_latencies(tmp_path):
    """A RAID-5 of 4 that loses a second member (no spare): a read issued after that is lost
    exactly when its stripe unit is on one of the two failed drives (the left-symmetric layout
    of tests/reference/layout.py), its latency is null (a real array fails it; the model
    completed it at once with nothing to read), and the replay's summary counts the lost
    requests and leaves them out of its mean; with one failure nothing is lost."""
    toml, trace = _iometer(tmp_path, 'layout = "raid5"\nwidth = 4\n'
                           'drive = "savvio_15k3_300g"\n', read_pct=100, requests=600)
    for fails in (["0@0.1"], ["0@0.1", "1@0.2"]):
        run = tmp_path / f"run{len(fails)}"
        args = [a for f in fails for a in ("--fail", f)]
        res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(toml), "-o",
                                       str(run), "--json", *args])
        assert res.exit_code == 0, res.output
        ios = pq.read_table(run / "ios.parquet").to_pydict()
        want = [len(fails) == 2 and a > 0.2e9 and layout.locate("raid5", 4, 128, s)[0] in (0, 1)
                for a, s in zip(ios["arrival_ns"], ios["sector"], strict=True)]
        assert ios["lost"] == want
        assert [x is None for x in ios["latency_ns"]] == want
        served = [x for x in ios["latency_ns"] if x is not None]
        out = json.loads(res.output)
        assert out["lost"] == sum(want) and (sum(want) > 100) == (len(fails) == 2)
        assert out["mean_latency_ms"] == pytest.approx(sum(served) / len(served) / 1e6)
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(toml), "-o",
                                   str(tmp_path / "again"), "--fail", "0@0.1", "--fail", "1@0.2"])
    assert f"{sum(want):,} requests lost" in res.output
    # compare: the lost requests counted, and left out of every latency (numpy on the rest)
    again = str(tmp_path / "again")  # (a run is named as given)
    rows = {r["metric"]: r[again] for r in json.loads(CliRunner().invoke(
        app, ["query", again, "compare", "-f", "json"]).output)}
    assert rows["lost_requests"] == sum(want) and rows["requests"] == len(want)
    assert rows["p99_ms"] == pytest.approx(np.quantile(served, 0.99) / 1e6)
    assert rows["max_ms"] == pytest.approx(max(served) / 1e6)


def test_the_replay_says_a_rebuild_stopped_because_its_spare_failed(tmp_path):
    """replay's line for a failure whose rebuild stopped says why: its spare failed (a later
    rebuild starts over on the next spare), not a data loss; the spare's own rebuild ends."""
    toml, trace = _iometer(tmp_path, 'layout = "raid1"\nwidth = 2\nhot_spares = 2\n'
                           'drive = { base = "savvio_15k3_300g", blocks = 400000 }\n',
                           read_pct=70, requests=2000)
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(toml), "-o",
                                   str(tmp_path / "run"), "--json", "--fail", "0@0.01",
                                   "--fail", "2@0.05"])
    assert res.exit_code == 0, res.output
    first, spare = json.loads(res.output)["rebuilds"]
    assert first["spare_failed"] is True and first["window_s"] is None
    assert 0 < first["rebuilt_fraction"] < 1 and first["stopped_s"] >= 0.05
    assert spare["spare_failed"] is None and spare["window_s"] > 0
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(toml), "-o",
                                   str(tmp_path / "again"), "--fail", "0@0.01", "--fail",
                                   "2@0.05"])
    assert "the spare it wrote onto failed" in " ".join(res.output.split())
    # risk's window for drive 0 runs until its member is whole again: the end of the rebuild
    # onto the next spare (the spare's own failure is of no member: it adds no window)
    res = CliRunner().invoke(app, ["risk", str(tmp_path / "again"), "--json", "--trials",
                                   "1000"])
    assert res.exit_code == 0, res.output
    (measured,) = json.loads(res.stdout)[0]["measured"]
    assert measured["drive"] == 0 and measured["rebuild_done"]
    assert measured["window_s"] == pytest.approx(spare["window_s"] + 0.05 - 0.01)
    # with one spare, which fails, the member is never whole again: no window, and why
    toml.write_text(toml.read_text().replace("hot_spares = 2", "hot_spares = 1"))
    one = tmp_path / "one"
    assert CliRunner().invoke(app, ["replay", str(trace), "--array", str(toml), "-o", str(one),
                                    "--fail", "0@0.01", "--fail", "2@0.05"]).exit_code == 0
    res = CliRunner().invoke(app, ["risk", str(one)])
    assert res.exit_code == 2
    assert "the spare it wrote onto failed): no rebuild window" in " ".join(res.output.split())


def test_requests_the_cache_serves_are_lost_too(tmp_path):
    """With a write-back controller cache, the requests it serves (a read of a line it holds, a
    write into it) after the second failure of a RAID-5 of 4 are lost exactly as those sent to
    the drives: when their stripe unit is on a failed drive (tests/reference/layout.py); the
    data is gone from the array whatever the cache holds (until 2026-11-29 they counted as
    fast cache hits). The trace keeps to 1 MiB, so most requests hit the cache."""
    from blocklab.pipeline.synth import synth_iometer

    toml = tmp_path / "a.toml"
    toml.write_text('[[group]]\nname = "g"\nstripe_unit = "64KiB"\nlayout = "raid5"\n'
                    'width = 4\ndrive = "savvio_15k3_300g"\n[controller]\ncache = "64MiB"\n'
                    'write_policy = "write-back"\n')
    trace = tmp_path / "w.parquet"
    synth_iometer(trace, transfer_size="4k", read_pct=50, random_pct=100, align="4k",
                  requests=3000, outstanding=2, disk_sectors=2048, array=str(toml))
    runs = {}
    for fails in ([], ["0@0.01", "1@0.02"]):
        run = tmp_path / f"run{len(fails)}"
        res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(toml), "-o",
                                       str(run), *[a for f in fails for a in ("--fail", f)]])
        assert res.exit_code == 0, res.output
        runs[len(fails)] = pq.read_table(run / "ios.parquet").to_pydict()
    ios = runs[2]
    want = [a > 0.02e9 and layout.locate("raid5", 4, 128, s)[0] in (0, 1)
            for a, s in zip(ios["arrival_ns"], ios["sector"], strict=True)]
    assert ios["lost"] == want
    assert [x is None for x in ios["latency_ns"]] == want
    # the cache served many of them: hits in the run without failures, and in this one the
    # requests after the failures that are not lost
    hit_lost = [h and w for h, w in zip(runs[0]["cache_hit"], want, strict=True)]
    writes_lost = [op == 1 and w for op, w in zip(ios["op"], want, strict=True)]
    assert sum(hit_lost) > 200 and sum(writes_lost) > 200, (sum(hit_lost), sum(writes_lost))
    later = [h for h, a in zip(ios["cache_hit"], ios["arrival_ns"], strict=True) if a > 0.02e9]
    assert sum(later) > 200 and not any(h and w for h, w in zip(ios["cache_hit"], want,
                                                                    strict=True))


def test_a_raid0_with_a_write_back_cache_replays_through_a_failure(tmp_path):
    """A RAID-0 of 4 with a small write-back cache loses drive 0: the destages of data on it
    have nothing to write, end at once, and the replay ends (before, it stopped with a
    traceback, "no event left but requests are incomplete", once a write waited for the
    room such a destage held). The requests after the failure with a 4 KiB on drive 0 (the
    stripe units round robin) are lost."""
    toml, trace = _iometer(tmp_path, 'layout = "raid0"\nwidth = 4\ndrive = "savvio_15k3_300g"\n'
                           '[controller]\ncache = "1MiB"\nwrite_policy = "write-back"\n',
                           read_pct=50, requests=3000)
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(toml), "-o", str(run),
                                   "--json", "--fail", "0@0.1"])
    assert res.exit_code == 0, res.output
    ios = pq.read_table(run / "ios.parquet").to_pydict()
    want = [a > 0.1e9 and (s // 128) % 4 == 0
            for a, s in zip(ios["arrival_ns"], ios["sector"], strict=True)]
    assert ios["lost"] == want and sum(want) > 100
    assert json.loads(res.stdout)["lost"] == sum(want)
