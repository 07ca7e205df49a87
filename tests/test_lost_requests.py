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
from blocklab.traces.schema import EVENT_NAMES

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
        # a lost request is no cache hit (the engine's hit is 3 for one no drive served)
        assert not any(h for h, lost in zip(ios["cache_hit"], want, strict=True) if lost)
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


def test_the_first_request_of_a_run_is_marked_lost_as_any_other():
    """A RAID-0 of two drives whose drive 0 fails at 0 s: the trace's first request (the
    engine's item 0), a read of drive 0's first stripe unit, and a write there later are lost
    (hit 3: tables.HIT_LOST, and no drive operation waited), the read of drive 1's unit
    between them is served (hit 0: the fixed model's drives never hit their cache). By hand
    from the layout (64 KiB units: sectors 0-127 on drive 0, 128-255 on drive 1); the
    reference engine agrees."""
    from blocklab.pipeline.model.array import plan
    from blocklab.pipeline.model.config import parse_array
    from blocklab.pipeline.replay import build_array, run_engine

    from .conftest import ROOT
    from .reference import engine as ref

    toml = {"group": [{"name": "g", "layout": "raid0", "drive": "atlas10k", "width": 2,
                       "stripe_unit": "64KiB"}], "failure": [{"drive": 0, "at_s": 0.0}]}
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(2000, 0))
    tasks = plan(arr)
    arrive, lba = np.array([10_000, 20_000, 30_000]), np.array([0, 128, 64])
    nsec, write = np.full(3, 8), np.array([0, 0, 1])
    got = run_engine(arr, arrive, lba, nsec, write, tasks=tasks, drive_ops=True)
    assert got["hit"].tolist() == [3, 0, 3]
    want = ref.simulate(arr, arrive, lba, nsec, write, 2000, 0, tasks=tasks,
                        interval_ns=got["bins"]["interval_ns"])
    assert want.hit == [3, 0, 3]


def test_a_replay_that_lost_every_request_gives_no_latency(tmp_path):
    """A JBOD of one drive that fails at 0 s: every request is lost, and the summary says
    there is no latency rather than a mean of 0 ms (the figure of nothing served)."""
    toml, trace = _iometer(tmp_path, 'layout = "jbod"\nwidth = 1\ndrive = "atlas10k"\n',
                           read_pct=50, requests=40)
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(toml), "-o",
                                   str(tmp_path / "run"), "--fail", "0@0"])
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "40 requests, no latency (every request was lost)" in said, said
    assert "40 requests lost" in said and "latency mean" not in said
    # and --json gives null, not 0.0: no figure rather than an instant replay
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(toml), "-o",
                                   str(tmp_path / "run2"), "--fail", "0@0", "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["lost"] == got["requests"] == 40
    assert got["mean_latency_ms"] is None and got["p99_latency_ms"] is None


def test_a_failed_spare_takes_the_rows_rebuilt_onto_it():
    """A RAID-1 of two with one hot spare (drive 2): drive 1 fails at 0 s and is rebuilt onto
    the spare in 256 MiB units of a few microseconds each (fixed-time drives), so that several
    have completed when the spare fails at 50 us. What they rebuilt is gone with it: member 1
    is missing from row 0 again (no spare is left to rebuild it), and every later read is
    served by drive 0, the one copy left, none lost; the reference engine agrees."""
    from blocklab.pipeline.model.array import plan
    from blocklab.pipeline.model.config import parse_array
    from blocklab.pipeline.replay import build_array, run_engine

    from .conftest import ROOT
    from .reference import engine as ref

    toml = {"group": [{"name": "g", "layout": "raid1", "drive": "atlas10k", "width": 2,
                       "stripe_unit": "64KiB", "hot_spares": 1}],
            "rebuild": {"unit": "256MiB", "depth": 1},
            "failure": [{"drive": 1, "at_s": 0.0}, {"drive": 2, "at_s": 50e-6}]}
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(2000, 0))
    tasks = plan(arr)
    n = 12
    arrive = 100_000 + 10_000 * np.arange(n)
    lba = (np.arange(n) * 1_000_003 * 8) % (int(arr.capacity) - 8)  # rows all over the drive
    nsec, write = np.full(n, 8), np.zeros(n, np.int64)
    got = run_engine(arr, arrive, lba, nsec, write, tasks=tasks, drive_ops=True)
    ev = got["events"]
    rebuilt = ev["bytes"][ev["code"] == EVENT_NAMES.index("rebuild_stopped")]
    assert len(rebuilt) == 1 and rebuilt[0] >= 2 * 256 << 20  # (rows below the cursor)
    assert got["mp"]["missing"][0].tolist() == [1, 0, -1, 0, -1, 0]
    host = got["op_item"] >= 0
    assert got["op_drive"][host].tolist() == [0] * n and got["hit"].tolist() == [0] * n
    want = ref.simulate(arr, arrive, lba, nsec, write, 2000, 0, tasks=tasks,
                        interval_ns=got["bins"]["interval_ns"])
    assert want.hit == [0] * n and want.start == got["start"].tolist()
    assert want.records == list(zip(*(got[f"op_{k}"].tolist() for k in (
        "drive", "item", "kind", "qtime", "start", "done", "lba", "n")), strict=True))


def test_a_spare_that_fails_after_its_rebuild_stopped_did_not_stop_it():
    """A RAID-5 of four with one hot spare (drive 4): drive 0 fails at 0 s and is rebuilt onto
    the spare in units of a few microseconds (fixed-time drives); drive 1 fails at 20 us,
    which loses every stripe not yet rebuilt and stops that rebuild; the spare fails at
    100 us, after the stop. The replay's windows say the rebuild stopped at a loss, not
    because its spare failed (replay --json's spare_failed false, where a failure of the
    spare at any time read as the cause)."""
    from blocklab.pipeline.model.array import plan
    from blocklab.pipeline.model.config import parse_array
    from blocklab.pipeline.replay import _rebuild_windows, build_array, run_engine

    from .conftest import ROOT

    toml = {"group": [{"name": "g", "layout": "raid5", "drive": "atlas10k", "width": 4,
                       "stripe_unit": "64KiB", "hot_spares": 1}],
            "rebuild": {"unit": "256MiB", "depth": 1},
            "failure": [{"drive": 0, "at_s": 0.0}, {"drive": 1, "at_s": 20e-6},
                        {"drive": 4, "at_s": 100e-6}]}
    arr = build_array(parse_array(toml, ROOT / "x.toml"), fixed_ns=(2000, 0))
    z = np.zeros(0, np.int64)
    tasks = plan(arr)
    got = run_engine(arr, z, z, z, z, tasks=tasks)
    ev = got["events"]
    (stop,) = ev[ev["code"] == EVENT_NAMES.index("rebuild_stopped")]
    assert stop["drive"] == 0 and 20_000 <= stop["t"] < 100_000

    class Events:  # what _rebuild_windows reads of an engine
        def events(self):
            return ev

    rw = {r["drive"]: r for r in _rebuild_windows(arr, Events(), tasks)}
    assert rw[0]["stopped_s"] == stop["t"] / 1e9 and rw[0]["spare_failed"] is False
    assert rw[0]["stripes_lost"] == 0 and rw[1]["stripes_lost"] > 0
