"""Fuzzing the other inputs (issue 22): array, scenario and sweep TOML files, and run folders
given to query, report and risk, damaged as files get damaged. The property is the ingest
fuzzer's: exit 0 (with a valid output where the command writes one) or exit 2 with one line
naming the file; never a traceback; nothing left behind on failure."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.traces.store import open_trace

from .fuzzing import check_outcome, damaged, fuzz_settings

pytestmark = pytest.mark.fuzz
runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
ARRAYS = {p.name: p.read_bytes() for p in [*sorted((ROOT / "tests" / "arrays").glob("*.toml")),
                                            *sorted((ROOT / "examples" / "arrays").glob("*.toml"))]}
SCENARIOS = {p.name: p.read_bytes() for p in sorted((ROOT / "scenarios").glob("*.toml"))}
SWEEPS = {
    "grid": b'array = "base.toml"\ntrace = "t.parquet"\n[[axis]]\nkey = "group[0].layout"\n'
            b'values = ["raid5", "raid6"]\n[[axis]]\nkey = "speed"\nvalues = [1, 2]\n',
    "zip": b'mode = "zip"\narray = "base.toml"\ntrace = "t.parquet"\n[replay]\nwrap = true\n'
           b'[[axis]]\nkey = "group[0].stripe_unit"\nvalues = ["16KiB", "64KiB"]\n'
           b'[[axis]]\nname = "w"\nkey = "group[0].width"\nvalues = [2, 3]\n',
}


def _in_tmp(name: str, data: bytes):
    d = Path(tempfile.mkdtemp(prefix="blocklab-fuzz-"))
    src = d / name
    src.write_bytes(data)
    out = d / "out"
    out.mkdir()
    return d, src, out


@fuzz_settings(40)
@given(data=st.data(), sample=st.sampled_from(sorted(ARRAYS)))
def test_damaged_array_toml(data, sample):
    bad, _what = data.draw(damaged(ARRAYS[sample]), label="damage")
    d, src, out = _in_tmp("array.toml", bad)
    try:
        res = runner.invoke(app, ["synth", "iometer", "-o", str(out / "t.parquet"),
                                  "--requests", "20", "--array", str(src)])
        check_outcome(res, src, out, lambda: open_trace(out / "t.parquet"))
    finally:
        shutil.rmtree(d)


@fuzz_settings(30)
@given(data=st.data(), sample=st.sampled_from(sorted(SCENARIOS)))
def test_damaged_scenario_toml(data, sample):
    bad, _what = data.draw(damaged(SCENARIOS[sample]), label="damage")
    d, src, out = _in_tmp("s.toml", bad)
    try:
        res = runner.invoke(app, ["scenario", "show", str(src)])
        check_outcome(res, src, out)
    finally:
        shutil.rmtree(d)


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sweep-fuzz")
    shutil.copy(ROOT / "tests" / "arrays" / "golden-raid5.toml", d / "base.toml")
    res = runner.invoke(app, ["synth", "iometer", "-o", str(d / "t.parquet"), "--requests",
                              "20", "--capacity", "1GiB"])
    assert res.exit_code == 0, res.output
    return d


@fuzz_settings(40)
@given(data=st.data(), sample=st.sampled_from(sorted(SWEEPS)))
def test_damaged_sweep_toml(sweep_dir, data, sample):
    bad, _what = data.draw(damaged(SWEEPS[sample]), label="damage")
    src = sweep_dir / "sweep.toml"
    src.write_bytes(bad)
    res = runner.invoke(app, ["sweep", "plan", str(src)])
    check_outcome(res, src, sweep_dir / "absent")


# --- run folders


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    """A real run folder with a failure and its rebuild (every file a run can have)."""
    d = tmp_path_factory.mktemp("run-fuzz")
    arr = ROOT / "tests" / "arrays" / "golden-raid5.toml"
    res = runner.invoke(app, ["synth", "iometer", "-o", str(d / "t.parquet"), "--requests",
                              "400", "--random-pct", "100", "--array", str(arr)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["replay", str(d / "t.parquet"), "--array", str(arr), "-o",
                              str(d / "run"), "--fail", "1@0.01", "--drive-ops"])
    assert res.exit_code == 0, res.output
    return d / "run"


RUN_FILES = ["meta.json", "ios.parquet", "drive_busy.parquet", "events.parquet",
             "drive_ops.parquet"]


@fuzz_settings(60)
@given(data=st.data(), victim=st.sampled_from(RUN_FILES),
       command=st.sampled_from(["query", "report", "risk"]))
def test_damaged_run_folder(run_folder, data, victim, command):
    d = Path(tempfile.mkdtemp(prefix="blocklab-fuzz-"))
    try:
        run = d / "run"
        shutil.copytree(run_folder, run)
        f = run / victim
        if data.draw(st.booleans(), label="delete instead"):
            f.unlink()
        else:
            bad, _what = data.draw(damaged(f.read_bytes()), label="damage")
            f.write_bytes(bad)
        out = d / "out"
        out.mkdir()
        args = {"query": ["query", str(run), "latency-summary"],
                "report": ["report", str(run), "-o", str(out / "r.html")],
                "risk": ["risk", str(run), "--trials", "200"]}[command]
        res = runner.invoke(app, args)
        check_outcome(res, run, out)
    finally:
        shutil.rmtree(d)
