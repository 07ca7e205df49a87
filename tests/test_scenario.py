"""Scenarios: every built-in one parses (each case's array is a valid configuration); short
cases run and their figures agree with what the run folder says independently (events.parquet,
ios.parquet, the drive catalog) and with physics the models must show (outer zones are faster,
a link-bound stream runs at the link's payload rate); bad scenario files fail on one line."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from blocklab.pipeline import scenario
from blocklab.pipeline.catalog import describe
from blocklab.pipeline.cli import app

runner = CliRunner()

HEAD = '''name = "t"
title = "t"
study = "s"
setup = "s"
assumptions = "a"
'''


def test_every_builtin_scenario_loads():
    names = scenario.names()
    assert {"ddp-vs-raid6", "pools-vs-raid-groups", "sata-rebuild-rates",
            "entry-array-raid5-vs-raid10", "raid6-spc1"} <= set(names)
    for n in names:
        sc = scenario.load(n)
        assert sc.name == n and sc.cases and sc.setup and sc.assumptions and sc.study
        assert len({c.name for c in sc.cases}) == len(sc.cases)


def _capacity_bytes(drive: str) -> float:
    return next(r for r in describe() if r["name"] == drive)["capacity_gb"] * 1e9


def test_rebuild_case_against_its_events(tmp_path):
    """A RAID-1 pair of 500 GB SATA drives rebuilds one drive onto the spare: the window and
    rate agree with events.parquet, the whole drive is rebuilt, and the first tenth (outer
    zones) runs faster than the average over the whole disk."""
    r = scenario.run("sata-rebuild-rates", tmp_path / "o", ["raid1-2-rebuild"])
    (case,) = r.cases
    (rb,) = case["rebuilds"]
    ev = pq.read_table(tmp_path / "o" / "raid1-2-rebuild" / "run" / "events.parquet").to_pylist()
    fail = next(e for e in ev if e["event"] == "failure")
    end = next(e for e in ev if e["event"] == "rebuild_end")
    assert fail["time_ns"] == 500_000_000 and fail["drive"] == 0
    assert rb["window_s"] == pytest.approx((end["time_ns"] - fail["time_ns"]) / 1e9)
    assert rb["rebuild_mb_per_s"] == pytest.approx(end["bytes"] / 1e6 / rb["window_s"])
    cap = _capacity_bytes("constellation_es_500g")
    assert cap * 0.99 <= end["bytes"] <= cap
    assert rb["first_tenth_mb_per_s"] > rb["rebuild_mb_per_s"]
    assert r.rebuild_windows_s() == {"raid1-2-rebuild": [rb["window_s"]]}
    saved = json.loads((tmp_path / "o" / "scenario.json").read_text())
    assert saved["rebuild_windows_s"]["raid1-2-rebuild"] == [rb["window_s"]]


def test_links_case_is_bound_by_the_link_or_the_drive(tmp_path):
    """One drive behind 1 GbE links: one link carries 112 MB/s of payload at MTU 1500 and 118
    at 9000 (the drive is faster); with two links the drive is the limit at either MTU."""
    r = scenario.run("sata-rebuild-rates", tmp_path / "o", ["single-links"])
    rows = {(x["links"], x["mtu"]): x for x in r.cases[0]["links"]}
    assert rows[1, 1500]["read_mb_per_s"] == pytest.approx(112, rel=0.01)
    assert rows[1, 9000]["read_mb_per_s"] == pytest.approx(118, rel=0.01)
    two = rows[2, 1500]["read_mb_per_s"]
    assert 118 * 1.05 < two < 224
    assert rows[2, 9000]["read_mb_per_s"] == pytest.approx(two, rel=0.01)
    for (_n, _mtu), x in rows.items():
        assert x["read_requests"] == x["write_requests"] == 2048


def test_phases_of_a_case_count_every_request(tmp_path):
    r = scenario.run("pools-vs-raid-groups", tmp_path / "o", ["group-9"])
    (case,) = r.cases
    assert sum(p["requests"] for p in case["phases"]) == case["requests"] == 200_000
    ios = pq.read_table(tmp_path / "o" / "group-9" / "run" / "ios.parquet",
                        columns=["op"]).column("op").to_numpy()
    reads = next(p for p in case["phases"] if p["op"] == "read")["requests"]
    assert reads == int((ios == 0).sum())
    assert reads / len(ios) == pytest.approx(0.70, abs=0.01)


def test_span_limits_the_addresses(tmp_path):
    """workload.span = 0.5: Iometer's maximum disk size, half the volume."""
    r = scenario.run("pools-vs-raid-groups", tmp_path / "o", ["groups-4x15-50"])
    assert r.cases[0]["requests"] == 200_000
    t = pq.read_table(tmp_path / "o" / "groups-4x15-50" / "trace.parquet",
                      columns=["sector", "size_bytes"])
    top = max(s + n // 512 for s, n in zip(t.column("sector").to_pylist(),
                                           t.column("size_bytes").to_pylist(), strict=False))
    # four RAID-5 14+1 groups of the catalog's 200 GB SSD, 64 KiB stripe units
    per_drive = _capacity_bytes("slc_sas_200g") // 512 // 128 * 128
    cap = 4 * 14 * per_drive
    assert cap / 2 * 0.99 < top <= cap / 2


def test_cli_run_json_and_table(tmp_path):
    res = runner.invoke(app, ["scenario", "run", "sata-rebuild-rates", "--case",
                              "raid1-2-rebuild", "-o", str(tmp_path / "o"), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["scenario"] == "sata-rebuild-rates"
    assert len(d["rebuild_windows_s"]["raid1-2-rebuild"]) == 1
    res = runner.invoke(app, ["scenario", "run", "sata-rebuild-rates", "--case",
                              "raid1-2-init", "-o", str(tmp_path / "o2")])
    assert res.exit_code == 0, res.output
    assert "parity initialization (MB/s per member drive)" in res.output
    res = runner.invoke(app, ["scenario", "list", "--json"])
    assert res.exit_code == 0 and "ddp-vs-raid6" in {s["name"] for s in json.loads(res.output)}
    res = runner.invoke(app, ["scenario", "show", "ddp-vs-raid6"])
    assert res.exit_code == 0 and "McGonigal" in res.output


@pytest.mark.parametrize("body,needle", [
    ("", "needs at least one [[case]]"),
    ('[[case]]\nname = "a"\nworkload = { generator = "fio" }\n[case.array]\n'
     'group = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n',
     "case[0].workload.generator: expected one of"),
    ('[workload]\ngenerator = "iometer"\n[[case]]\nname = "a"\nmeasure = ["speed"]\n'
     '[case.array]\ngroup = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n',
     "case[0].measure: unknown ['speed']"),
    ('[workload]\ngenerator = "iometer"\n[[case]]\nname = "a"\n[case.array]\n'
     'group = [{ name = "g", layout = "raid5", width = 2, drive = "atlas10k" }]\n',
     "case[0].array: group[0].width: raid5 needs at least 3 drives"),
    ('[workload]\ngenerator = "iometer"\nspan = 1.5\n[[case]]\nname = "a"\n[case.array]\n'
     'group = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n',
     "case[0].workload.span: a fraction in (0, 1]"),
    ('links = [[1, 4000]]\n[workload]\ngenerator = "iometer"\n[[case]]\nname = "a"\n'
     'measure = ["links"]\n[case.array]\n'
     'group = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n',
     "case[0].links: expected [count, mtu] pairs"),
    ('[workload]\ngenerator = "iometer"\n[[case]]\nname = "a"\nmeasure = ["oio"]\n'
     '[case.array]\ngroup = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n',
     "case[0].oio: the oio measure needs a list"),
])
def test_bad_scenario_files(tmp_path, body, needle):
    f = tmp_path / "s.toml"
    f.write_text(HEAD + body)
    res = runner.invoke(app, ["scenario", "run", str(f), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2
    line = res.output.strip()
    assert "\n" not in line and line.startswith(f"blocklab: error: {f}") and needle in line, line
    assert not (tmp_path / "o").exists()


def test_unknown_names(tmp_path):
    res = runner.invoke(app, ["scenario", "run", "no-such"])
    assert res.exit_code == 2 and "no scenario 'no-such'" in res.output
    res = runner.invoke(app, ["scenario", "run", "ddp-vs-raid6", "--case", "zz", "-o",
                              str(tmp_path / "o")])
    assert res.exit_code == 2
    assert re.search(r"no case \['zz'\] \(cases: ddp-60, raid6-8x4p2\)", res.output)
