"""Everything a scenario, a sweep or a report's chart folders write is its owner's alone:
folders 0700, files 0600 (the runs in them already were; the scenario's top folder, its cases'
array files, the sweep's sweep.json and summary folders, and --png folders were 0755 and
0644, found by a walk-through)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blocklab.pipeline.cli import app

runner = CliRunner()
ARRAY = '[[group]]\nname = "g"\nlayout = "raid5"\nwidth = 5\ndrive = "atlas10k"\n'
TRACE = "".join(f"{k * 1000} 0 {8 * k} 8 {k % 2}\n" for k in range(200))


def _modes(top: Path) -> set[tuple[str, int]]:
    """(kind, mode) of ``top`` and of everything under it (lock files aside: removed)."""
    return {("dir" if p.is_dir() else "file", stat.S_IMODE(p.stat().st_mode))
            for p in [top, *top.rglob("*")]}


@pytest.mark.replays
def test_scenario_sweep_and_chart_folders_are_owner_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("a.toml").write_text(ARRAY)
    Path("t.trace").write_text(TRACE)
    assert runner.invoke(app, ["ingest", "t.trace", "--format", "mqsim", "-o",
                               "t.parquet"]).exit_code == 0
    res = runner.invoke(app, ["scenario", "run", "pools-vs-raid-groups", "--case", "group-9",
                              "-o", "sc"])
    assert res.exit_code == 0, res.output
    Path("s.toml").write_text('array = "a.toml"\ntrace = "t.parquet"\n[[axis]]\n'
                              'key = "speed"\nvalues = [1.0, 2.0]\n[[axis]]\n'
                              'key = "think_us"\nvalues = [0]\n')
    res = runner.invoke(app, ["sweep", "run", "s.toml", "-o", "sw", "--workers", "1"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["report", "sc/group-9/run", "-o", "r.html", "--svg",
                              "charts/svg"])
    assert res.exit_code == 0, res.output
    for top in ("sc", "sw", "charts/svg"):
        assert _modes(Path(top)) == {("dir", 0o700), ("file", 0o600)}, top


LINKS = '''name = "t"
title = "t"
study = "s"
setup = "s"
assumptions = "a"
[[case]]
name = "l"
measure = ["links"]
links = [[1, 1500], [2, 9000]]
workload = { generator = "iometer", transfer_size = "64KiB", read_pct = 100, random_pct = 0, align = "64KiB", outstanding = 2, requests = 8 }
[case.array]
group = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]
controller = { host_links = { count = 1, gbit_per_s = 1, protocol = "aoe", mtu = 1500 } }
'''


@pytest.mark.replays
def test_a_links_cases_variant_folders_are_owner_only(tmp_path):
    """A links case writes a folder per variant (links-COUNTxMTU, its array.toml and its
    read and write runs): folders 0700, files 0600, as the rest of a scenario's output."""
    (tmp_path / "s.toml").write_text(LINKS)
    res = runner.invoke(app, ["scenario", "run", str(tmp_path / "s.toml"), "-o",
                              str(tmp_path / "sc")])
    assert res.exit_code == 0, res.output
    variants = sorted(p.name for p in (tmp_path / "sc" / "l").glob("links-*"))
    assert variants == ["links-1x1500", "links-2x9000"]
    for v in variants:
        assert (tmp_path / "sc" / "l" / v / "read" / "run" / "ios.parquet").is_file()
        assert _modes(tmp_path / "sc" / "l" / v) == {("dir", 0o700), ("file", 0o600)}, v
    assert _modes(tmp_path / "sc") == {("dir", 0o700), ("file", 0o600)}


def test_folders_made_on_the_way_to_an_output_are_owner_only(tmp_path):
    """replay -o new/runs/run1 made new/ and new/runs/ with the umask's mode (0777 under umask
    000) around its 0700 run folder; now each is 0700, and an existing folder keeps its mode."""
    import os
    import stat

    from blocklab.traces.safety import make_folders

    (tmp_path / "old").mkdir(mode=0o755)
    old = os.umask(0)
    try:
        make_folders(tmp_path / "old" / "new" / "runs")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "old").stat().st_mode) == 0o755
    for d in (tmp_path / "old" / "new", tmp_path / "old" / "new" / "runs"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
