"""An output never replaces the command's own input (traces/safety.py ``not_an_input``): the
same file as an input (also through a link), an existing file of an input run folder, or an
output folder, replaced whole, that holds an input, is one line and exit 2, and the input is
left as it was. A new file inside a run folder (a report beside the run) is still written."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blocklab.pipeline.cli import app

runner = CliRunner()

TRACEFS = "".join(
    f"fio-1 [000] ..... 10.{2 * k:06d}: block_rq_issue: 8,0 R 4096 () {100 + 8 * k} + 8 "
    f"be,0,4 [fio]\n<idle>-0 [001] ..s.. 10.{2 * k + 1:06d}: block_rq_complete: 8,0 R () "
    f"{100 + 8 * k} + 8 be,0,4 [0]\n" for k in range(50))
ARRAY = '[[group]]\nname = "g"\nlayout = "raid5"\nwidth = 5\ndrive = "atlas10k"\n'


def _digest(folder: Path) -> dict[str, str]:
    """Every file under ``folder``: its path and sha256."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused(args: list[str], *needles: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("blocklab: error: "), res.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    Path("t.txt").write_text(TRACEFS)
    Path("a.toml").write_text(ARRAY)
    assert runner.invoke(app, ["ingest", "t.txt", "-o", "t.parquet"]).exit_code == 0
    res = runner.invoke(app, ["replay", "t.parquet", "--array", "a.toml", "-o", "run"])
    assert res.exit_code == 0, res.output
    return tmp_path


def test_an_output_that_is_an_input_is_refused(work):
    before = _digest(work)
    os.link("t.txt", "same.txt")  # the same file by another name
    _refused(["ingest", "t.txt", "-o", "t.txt"], "t.txt: is this command's input t.txt")
    _refused(["ingest", "t.txt", "-o", "same.txt"], "is this command's input t.txt")
    _refused(["synth", "iometer", "-o", "a.toml", "--array", "a.toml"], "input a.toml")
    _refused(["report", "run", "-o", "run/meta.json"], "is a file of the input folder run")
    before.pop("same.txt", None)
    assert {k: v for k, v in _digest(work).items() if k != "same.txt"} == before
    Path("run/t.parquet").write_bytes(Path("t.parquet").read_bytes())
    Path("run/a.toml").write_text(ARRAY)
    before = _digest(work)
    _refused(["replay", "run/t.parquet", "--array", "a.toml", "-o", "run"],
             "run: holds this command's input run/t.parquet, and is replaced whole")
    _refused(["replay", "t.parquet", "--array", "run/a.toml", "-o", "run"], "holds this")
    assert _digest(work) == before


def test_a_report_beside_a_run_is_still_written_and_rewritten(work):
    for _ in range(2):  # (the second replaces the report written by the first: no input)
        res = runner.invoke(app, ["report", "run", "-o", "run/report.html"])
        assert res.exit_code == 0, res.output
    assert (work / "run" / "report.html").stat().st_size > 0


@pytest.mark.parametrize("out", ["", "/", ".."])
def test_an_output_with_no_name_is_one_line(work, out):
    """``-o ''`` (the current folder), ``-o /`` or ``-o ..``: pathlib's ValueError was a
    traceback from every command that writes."""
    for args in (["ingest", "t.txt"], ["report", "run"], ["synth", "iometer", "--capacity", "1g"],
                 ["replay", "t.parquet", "--array", "a.toml"]):
        _refused([*args, "-o", out], "an output needs a name of its own")
