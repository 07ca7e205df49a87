"""``blocklab replay --repeat-until-tasks-end`` (issue 19): read from the run folder, host
requests keep arriving until the last background task has ended, each pass's requests are
named apart, and meta.json counts the passes; the first pass of a repeated replay is the
one-pass replay row for row, and a replay with nothing to wait for is unchanged; max_passes
bounds the run and says so; bad input gets one line and exit 2. (The kernel against the
plain-Python reference: tests/test_failures.py test_repeating_closed_loop_equals_reference.)"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from blocklab.pipeline import scenario
from blocklab.pipeline.cli import app
from blocklab.pipeline.replay import replay
from blocklab.pipeline.synth import synth_ior
from blocklab.traces.errors import BlocklabError

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

runner = CliRunner()

# Five small SSDs (1 GB: the catalog's 200 GB SLC drive with fewer blocks) as a RAID-5 of four
# with a hot spare: drive 1 fails 20 ms in and its rebuild takes a few seconds, many passes of
# the small IOR trace below.
ARRAY = """
[[group]]
name = "g"
layout = "raid5"
width = 4
hot_spares = 1
stripe_unit = "64KiB"
drive = { base = "slc_sas_200g", blocks = 2000000 }

[controller]
command_overhead_us = 10

[rebuild]
priority = "high"
unit = "1MiB"
"""
FAILURE = '\n[[failure]]\ndrive = 1\nat_s = 0.02\n'


def _trace(tmp_path, **kw):
    t = tmp_path / "ior.parquet"
    synth_ior(t, tasks=4, transfer_size="64k", block_size="4m", segments=1,
              file_per_proc=True, **kw)
    return t


def _array(tmp_path, failure=True):
    a = tmp_path / ("failing.toml" if failure else "healthy.toml")
    a.write_text(ARRAY + (FAILURE if failure else ""))
    return a


def _events(run):
    return pq.read_table(run / "events.parquet").to_pylist()


def _task_end_ns(run):
    return max(e["time_ns"] for e in _events(run) if e["event"].endswith("_end"))


def test_host_io_runs_until_the_last_task_ends(tmp_path):
    trace, array = _trace(tmp_path), _array(tmp_path)
    once, rep = tmp_path / "once", tmp_path / "rep"
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o", str(once)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o", str(rep),
                              "--repeat-until-tasks-end"])
    assert res.exit_code == 0, res.output
    meta = json.loads((rep / "meta.json").read_text())
    passes = meta["counts"]["passes"]
    rows = pq.ParquetFile(trace).metadata.num_rows
    assert meta["repeat"] == {"until": "until-tasks-end", "max_passes": 1000,
                              "passes": passes, "rows_per_pass": rows, "limit_reached": False}
    assert f"in {passes} passes of the trace" in res.output
    assert json.loads((once / "meta.json").read_text())["counts"]["passes"] == 1
    # one pass leaves the rebuild alone for most of its window: the test means something
    end_once = _task_end_ns(once)
    ios_once = pq.read_table(once / "ios.parquet")
    assert pc_max(ios_once, "complete_ns") < end_once / 2
    ios = pq.read_table(rep / "ios.parquet")
    assert passes > 2 and meta["counts"]["requests"] == ios.num_rows == passes * rows
    # pass k's requests are row + k x rows: every id once, in order
    assert ios.column("request").to_pylist() == list(range(passes * rows))
    # host requests are in flight at every moment from the start until the last task ends
    # (each task keeps one request outstanding: the union of [arrival, completion] of every
    # request covers the time), and the last pass started before it ended
    end = _task_end_ns(rep)
    arr = ios.column("arrival_ns").to_numpy()
    done = ios.column("complete_ns").to_numpy()
    order = np.argsort(arr, kind="stable")
    reach = np.maximum.accumulate(done[order])
    assert arr[order][0] == 0
    gaps = arr[order][1:] > reach[:-1]
    assert not gaps.any(), f"host idle from {reach[:-1][gaps][0]} ns"
    assert reach[-1] >= end
    assert arr[(passes - 1) * rows:].min() <= end
    # the rebuild is slower under the host I/O that now competes with it for its whole window
    assert end > end_once


def pc_max(table, col):
    return int(table.column(col).to_numpy().max())


def test_first_pass_is_the_one_pass_replay(tmp_path):
    """Passes run one after the other (the trace's phases are barriers), so the first pass of
    a repeated replay is the one-pass replay, row for row and bit for bit; and with no task to
    wait for, the repeated replay is the one-pass replay."""
    trace = _trace(tmp_path)
    for failure in (True, False):
        array = _array(tmp_path, failure)
        a, b = tmp_path / f"a{failure}", tmp_path / f"b{failure}"
        replay(trace, array, a, drive_ops=True)
        r = replay(trace, array, b, drive_ops=True, repeat="until-tasks-end")
        one = pq.read_table(a / "ios.parquet")
        rep = pq.read_table(b / "ios.parquet")
        assert rep.slice(0, one.num_rows).equals(one)
        ops_one = pq.read_table(a / "drive_ops.parquet")
        ops_rep = pq.read_table(b / "drive_ops.parquet")
        first = ops_rep.filter(np.asarray(ops_rep.column("complete_ns")) <=
                               pc_max(one, "complete_ns"))
        host = lambda t: t.filter(np.asarray(t.column("request")) >= 0)  # noqa: E731
        assert host(first).equals(host(ops_one).filter(
            np.asarray(host(ops_one).column("complete_ns")) <= pc_max(one, "complete_ns")))
        if failure:
            assert r.passes > 1
        else:  # nothing to wait for: one pass, the same files
            assert r.passes == 1 and rep.equals(one)
            assert pq.read_table(b / "drive_busy.parquet").equals(
                pq.read_table(a / "drive_busy.parquet"))
            assert ops_rep.equals(ops_one)
        # the drive operations of later passes name their requests as ios.parquet does
        ids = set(rep.column("request").to_pylist())
        assert set(host(ops_rep).column("request").to_pylist()) <= ids


def test_max_passes_bounds_the_run_and_says_so(tmp_path):
    trace, array = _trace(tmp_path), _array(tmp_path)
    out = tmp_path / "run"
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o", str(out),
                              "--repeat-until-tasks-end", "--max-passes", "2", "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    assert r["passes"] == 2 and r["repeat_limit_reached"] is True
    meta = json.loads((out / "meta.json").read_text())
    assert meta["repeat"]["limit_reached"] is True and meta["counts"]["passes"] == 2
    ios = pq.read_table(out / "ios.parquet")
    # the rebuild went on without host I/O after the two passes, and ended (drain)
    assert _task_end_ns(out) > pc_max(ios, "complete_ns")
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o",
                              str(tmp_path / "r2"), "--repeat-until-tasks-end",
                              "--max-passes", "2"])
    assert "--max-passes 2 reached with background tasks still under way" in res.output


def test_ior_repetitions_are_passes_in_the_trace(tmp_path):
    """IOR -i 3 holds three write-then-read repetitions: replayed without a failure, it is
    three passes of the one-repetition trace, request for request."""
    one = _trace(tmp_path)
    three = tmp_path / "ior3.parquet"
    synth_ior(three, tasks=4, transfer_size="64k", block_size="4m", segments=1,
              file_per_proc=True, repetitions=3)
    array = _array(tmp_path, failure=False)
    replay(three, array, tmp_path / "r3")
    ios = pq.read_table(tmp_path / "r3" / "ios.parquet")
    rows = pq.ParquetFile(one).metadata.num_rows
    assert ios.num_rows == 3 * rows
    ops = ios.column("op").to_numpy()
    sectors = ios.column("sector").to_numpy()
    for k in (1, 2):
        assert (ops[k * rows:(k + 1) * rows] == ops[:rows]).all()
        assert (sectors[k * rows:(k + 1) * rows] == sectors[:rows]).all()


def _one_line_exit_2(res, *parts):
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("blocklab: error: "), res.stderr
    for p in parts:
        assert p in lines[0]


def test_bad_input_one_line_exit_2(tmp_path):
    array = _array(tmp_path)
    open_loop = tmp_path / "spc1.parquet"
    res = runner.invoke(app, ["synth", "spc1", "-o", str(open_loop), "--bsu", "1",
                              "--duration", "1", "--array", str(array)])
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    res = runner.invoke(app, ["replay", str(open_loop), "--array", str(array), "-o", str(out),
                              "--repeat-until-tasks-end"])
    _one_line_exit_2(res, str(open_loop), "repeats a closed-loop trace", "open loop")
    assert not out.exists() and not list(tmp_path.glob(".out*"))
    # an open-loop trace replayed closed loop may repeat
    res = runner.invoke(app, ["replay", str(open_loop), "--array", str(array), "-o", str(out),
                              "--repeat-until-tasks-end", "--closed-loop", "4"])
    assert res.exit_code == 0, res.output
    trace = _trace(tmp_path)
    for extra, parts in (
            (["--max-passes", "3"], ["--max-passes: only with --repeat-until-tasks-end"]),
            (["--repeat-until-tasks-end", "--workers", "2"], ["not with --workers"]),
            (["--repeat-until-tasks-end", "--max-passes", "0"], ["--max-passes"])):
        res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o",
                                  str(tmp_path / "x"), *extra])
        _one_line_exit_2(res, *parts)
        assert not (tmp_path / "x").exists()
    with pytest.raises(BlocklabError, match="repeat: expected until-tasks-end, found 'twice'"):
        replay(trace, array, tmp_path / "y", repeat="twice")


HEAD = '''name = "t"
title = "t"
study = "s"
setup = "s"
assumptions = "a"
[[case]]
name = "a"
'''
GROUP = ('[case.array]\n'
         'group = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n')


@pytest.mark.parametrize("case, key, words", [
    ('workload = { generator = "iometer" }\nreplay = { repeat = "forever" }\n',
     "case[0].replay.repeat", "expected 'until-tasks-end', found 'forever'"),
    ('workload = { generator = "spc1", bsu = 1 }\nreplay = { repeat = "until-tasks-end" }\n',
     "case[0].replay.repeat", "spc1 is open loop"),
    ('workload = { generator = "iometer" }\nreplay = { max_passes = 3 }\n',
     "case[0].replay.max_passes", "only with repeat"),
    ('workload = { generator = "iometer" }\n'
     'replay = { repeat = "until-tasks-end", max_passes = 0 }\n',
     "case[0].replay.max_passes", "at least 1, found 0"),
])
def test_scenario_repeat_bad_input(tmp_path, case, key, words):
    f = tmp_path / "s.toml"
    f.write_text(HEAD + case + GROUP)
    with pytest.raises(BlocklabError) as e:
        scenario.load(f)
    assert f"{f}: {key}: " in str(e.value) and words in str(e.value)
    assert "\n" not in str(e.value)
    res = runner.invoke(app, ["scenario", "show", str(f)])
    _one_line_exit_2(res, key)


def test_builtin_failure_cases_repeat():
    sc = scenario.load("ddp-vs-raid6")
    cases = {c.name: c for c in sc.cases}
    for name in ("ddp-60", "raid6-8x4p2"):
        assert cases[name].replay["repeat"] == "until-tasks-end"
    assert "until-tasks-end" in sc.assumptions
