"""Scenarios: every built-in one parses (each case's array is a valid configuration); short
cases run and their figures agree with what the run folder says independently (events.parquet,
ios.parquet, the drive catalog) and with physics the models must show (outer zones are faster,
a link-bound stream runs at the link's payload rate); bad scenario files fail on one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from blocklab.pipeline import scenario
from blocklab.pipeline.cli import app
from blocklab.pipeline.model.catalog import describe
from blocklab.pipeline.query import run_query

from .conftest import ROOT

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

runner = CliRunner()

HEAD = '''name = "t"
title = "t"
study = "s"
setup = "s"
assumptions = "a"
'''
ONE = ('[workload]\ngenerator = "iometer"\n[[case]]\nname = "a"\n[case.array]\n'
       'group = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n')


def test_every_builtin_scenario_loads():
    names = scenario.names()
    assert {"ddp-vs-raid6", "pools-vs-raid-groups", "coraid-sr-aoe",
            "md3000-raid5-vs-raid10", "raid6-spc1"} <= set(names)
    for n in names:
        sc = scenario.load(n)
        assert sc.name == n and sc.cases and sc.setup and sc.assumptions and sc.study
        assert len({c.name for c in sc.cases}) == len(sc.cases)


def _capacity_bytes(drive: str) -> float:
    return next(r for r in describe() if r["name"] == drive)["capacity_gb"] * 1e9


MIRROR = HEAD + """
[[case]]
name = "raid1-2-rebuild"
measure = ["rebuild"]
failure = [{ drive = 0, at_s = 0.5 }]
workload = { generator = "iometer", transfer_size = "1MiB", read_pct = 100, random_pct = 0, align = "1MiB", outstanding = 1, requests = 16 }
[case.array]
group = [{ name = "g", layout = "raid1", width = 2, hot_spares = 1, stripe_unit = "64KiB", drive = "constellation_es_500g", scheduler = "clook", queue_depth = 16 }]
rebuild = { priority = "high", unit = "1MiB", depth = 8 }
controller = { command_overhead_us = 25, cache = "512MiB", cache_block = "32KiB", read_ahead = true }
"""


def test_rebuild_case_against_its_events(tmp_path):
    """A RAID-1 pair of 500 GB SATA drives rebuilds one drive onto the spare: the window and
    rate agree with events.parquet, the whole drive is rebuilt, and the first tenth (outer
    zones) runs faster than the average over the whole disk."""
    f = tmp_path / "mirror.toml"
    f.write_text(MIRROR)
    r = scenario.run(f, tmp_path / "o", ["raid1-2-rebuild"])
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


def test_aoe_links_carry_the_frames_payload(tmp_path):
    """Fifteen drives behind two 1 GbE AoE links: the links are the limit, and they carry
    what the AoE framing leaves of the line rate (AoE r11: (MTU - 36) // 512 sectors a frame,
    at most a 4 KiB page as the Linux initiator sends them, 60 bytes of headers and Ethernet
    overhead a frame), computed here by hand."""
    r = scenario.run("coraid-sr-aoe", tmp_path / "o", ["sr1521-raid0-15"])
    rows = {(x["links"], x["mtu"]): x for x in r.cases[0]["links"]}
    line = 2 * 125e6 / 1e6
    for mtu, sectors in ((9000, 8), (1500, 2)):
        payload = sectors * 512
        want = line * payload / (payload + 60)
        assert rows[2, mtu]["read_mb_per_s"] == pytest.approx(want, rel=0.01)
        assert rows[2, mtu]["read_requests"] == rows[2, mtu]["write_requests"] == 512


def test_task_rate_is_the_data_the_rebuild_moved(tmp_path):
    """A RAID-5 rebuild's rate at its start, from the task-rates query, is what its drive
    operations carried in the sample (summed here from drive_ops.parquet), and a RAID-5 of 14
    reads 13 units for every unit it writes."""
    r = scenario.run("coraid-sr-aoe", tmp_path / "o", ["sr1521-raid5-14-rebuild"])
    (tr,) = r.cases[0]["task_rates"]
    run = tmp_path / "o" / "sr1521-raid5-14-rebuild" / "run"
    ev = pq.read_table(run / "events.parquet").to_pylist()
    t0 = next(e["time_ns"] for e in ev if e["event"] == "rebuild_start")
    t1 = t0 + 10_000_000_000
    ops = pq.read_table(run / "drive_ops.parquet").to_pylist()
    moved = {False: 0.0, True: 0.0}
    for o in ops:
        if o["kind"] in (3, 4) and o["complete_ns"] > t0 and o["start_ns"] < t1:
            frac = (min(o["complete_ns"], t1) - max(o["start_ns"], t0)) / max(
                o["complete_ns"] - o["start_ns"], 1)
            moved[o["write"]] += o["sectors"] * 512 * frac
    assert tr["read_mb_per_s"] == pytest.approx(moved[False] / 1e6 / 10, rel=1e-9)
    assert tr["write_mb_per_s"] == pytest.approx(moved[True] / 1e6 / 10, rel=1e-9)
    assert tr["read_mb_per_s"] / tr["write_mb_per_s"] == pytest.approx(13, rel=0.05)
    (pub,) = [p for p in r.published if p["case"] == "sr1521-raid5-14-rebuild"]
    assert pub["study"] == 561487 and pub["unit"] == "KB/s"
    assert pub["blocklab"] == pytest.approx(tr["processed_mb_per_s"] * 1000)
    assert pub["ratio"] == pytest.approx(pub["blocklab"] / 561487)


def test_orderings_compare_pairs_beyond_the_margin():
    """Two figures of one quantity whose study values differ by more than 10 % make an
    ordering; blocklab keeps it when its values fall in the same order."""
    pubs = [scenario.Published("iops", c, v, "IOPS", "w") for c, v in
            (("a", 100.0), ("b", 105.0), ("c", 200.0))]
    figs = {"a": {"phases": [{"phase": "all", "op": "read", "iops": 150.0, "mb_per_s": 1.0}]},
            "b": {"phases": [{"phase": "all", "op": "read", "iops": 90.0, "mb_per_s": 1.0}]},
            "c": {"phases": [{"phase": "all", "op": "read", "iops": 120.0, "mb_per_s": 1.0}]}}
    rows, orders = scenario.compare(pubs, figs)
    assert [r["ratio"] for r in rows] == pytest.approx([1.5, 90 / 105, 0.6])
    got = {(o["higher"], o["lower"]): o["kept"] for o in orders}
    assert got == {("c", "a"): False, ("c", "b"): True}


def test_rates_in_binary_units_are_converted_by_iec_definitions():
    """A study's KiB/s are 1024 bytes/s and MiB/s 1024^2 (IEC 80000-13), KB/s and MB/s 1000
    and 10^6: blocklab's 2,097,152 bytes/s (two phase rows of 1.048576 MB/s) are 2048 KiB/s,
    2 MiB/s, 2097.152 KB/s and 2.097152 MB/s."""
    figs = {"a": {"phases": [{"phase": "all", "op": op, "iops": 1.0, "mb_per_s": 1.048576}
                             for op in ("read", "write")]}}
    want = {"KiB/s": 2048.0, "MiB/s": 2.0, "KB/s": 2097.152, "MB/s": 2.097152,
            "B/s": 2097152.0}
    pubs = [scenario.Published("throughput", "a", 1000.0, u, "w") for u in want]
    rows, _ = scenario.compare(pubs, figs)
    assert {r["unit"]: r["blocklab"] for r in rows} == pytest.approx(want, rel=1e-12)
    assert [r["ratio"] for r in rows] == pytest.approx([w / 1000 for w in want.values()])
    # the study's figure in bytes/s, as the orderings compare them
    assert [p.study for p in pubs] == pytest.approx([1024e3, 1000 * 2**20, 1e6, 1e9, 1e3])


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
    f = tmp_path / "mirror.toml"
    f.write_text(MIRROR)
    res = runner.invoke(app, ["scenario", "run", str(f), "--case",
                              "raid1-2-rebuild", "-o", str(tmp_path / "o"), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["scenario"] == "t"
    assert len(d["rebuild_windows_s"]["raid1-2-rebuild"]) == 1
    res = runner.invoke(app, ["scenario", "run", "coraid-sr-aoe", "--case",
                              "sr1520-raid5-14-init", "-o", str(tmp_path / "o2"), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    (p,) = d["published"]
    assert set(p) >= {"quantity", "case", "study", "blocklab", "ratio"}
    assert p["quantity"] == "init_rate_start" and p["study"] == 213656
    res = runner.invoke(app, ["scenario", "run", "coraid-sr-aoe", "--case",
                              "sr1520-raid5-14-init", "-o", str(tmp_path / "o3")])
    assert res.exit_code == 0, res.output
    assert "rebuild and initialization rates at their start" in res.output
    assert re.search(r"\d+ of 1 figures within 25 %", res.output)
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
     "s.toml: workload.span: a fraction in (0, 1]"),
    ('links = [[1, 10000]]\n[workload]\ngenerator = "iometer"\n[[case]]\nname = "a"\n'
     'measure = ["links"]\n[case.array]\n'
     'group = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n',
     "case[0].links: expected [count, mtu] pairs"),
    ('[workload]\ngenerator = "iometer"\n[[case]]\nname = "a"\nmeasure = ["oio"]\n'
     '[case.array]\ngroup = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n',
     "case[0].oio: the oio measure needs a list"),
    # an array's [[init]] written before [case.array] is a case key: refused, not dropped
    ('[workload]\ngenerator = "iometer"\n[[case]]\nname = "a"\n'
     'init = [{ group = "g", at_s = 0 }]\n[case.array]\n'
     'group = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n',
     "case[0].init: not a case key"),
    ('[workload]\ngenerator = "iometer"\nblock_size = "1MiB"\n[[case]]\nname = "a"\n'
     '[case.array]\ngroup = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n',
     "s.toml: workload.block_size: not an option of the iometer generator"),
    # spc1 search's ramp-up belongs to a case that measures spc1 (a case that only replays
    # the workload has no search to ramp up)
    ('[workload]\ngenerator = "spc1"\nramp_s = 10\n[[case]]\nname = "a"\n'
     '[case.array]\ngroup = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n',
     "s.toml: workload.ramp_s: not an option of the spc1 generator"),
    # a generator's own check, named by the file's key (it named the flag: --requests)
    ('[workload]\ngenerator = "iometer"\nrequests = -5\n[[case]]\nname = "a"\n'
     '[case.array]\ngroup = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n',
     "s.toml: workload.requests: must be at least 1, found -5"),
    ('[[case]]\nname = "a"\nworkload = { generator = "iometer", requests = -5 }\n'
     '[case.array]\ngroup = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n',
     "case[0].workload.requests: must be at least 1, found -5"),
    ('[workload]\ngenerator = "iometer"\ntransfer_size = "4q"\n[[case]]\nname = "a"\n'
     '[case.array]\ngroup = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n',
     "s.toml: workload.transfer_size: unknown size unit 'q'"),
    (ONE + '[[published]]\nquantity = "speed"\ncase = "a"\nvalue = 1\nunit = "MB/s"\n'
     'where = "t1"\n', "published[0].quantity: unknown quantity 'speed'"),
    (ONE + '[[published]]\nquantity = "iops"\ncase = "b"\nvalue = 1\nunit = "IOPS"\n'
     'where = "t1"\n', "published[0].case: no case 'b'"),
    (ONE + '[[published]]\nquantity = "seq_read"\ncase = "a"\nvalue = 1\nunit = "MB/sec"\n'
     'where = "t1"\n', "published[0].unit: unknown unit 'MB/sec' for seq_read"),
    (ONE + '[[published]]\nquantity = "seq_read"\ncase = "a"\nvalue = 1\nunit = "MB/s"\n',
     "published[0].where: missing"),
    (ONE + '[[published]]\nquantity = "seq_read"\ncase = "a"\nvalue = -3\nunit = "MB/s"\n'
     'where = "t"\n', "published[0].value: expected a positive number"),
    (ONE + '[[published]]\nquantity = "seq_read"\ncase = "a"\nvalue = 3\nunit = "MB/s"\n'
     'where = "t"\nlinks = 2\nmtu = 1500\n', "published[0].links: case a runs no variant"),
    (ONE + '[[published]]\nquantity = "seq_read"\ncase = "a"\nvalue = 3\nunit = "MB/s"\n'
     'where = "t"\ntable = 2\n', "published[0].table: unknown key"),
    # a case name that is no folder name: a TypeError when the case ran (["a"], 1), or a case
    # written beside the output ("../x") or into the output folder itself ("")
    *[(ONE.replace('name = "a"', f"name = {n}"), "case[0].name: expected a name of letters")
      for n in ('["a"]', "1", '"../x"', '""')],
    # the whole name is checked, not a good start ("a/../../x" wrote two levels up, "a/b"
    # inside another folder), and its first character too: ".." is the output's parent, and
    # ".a.kept" the name case a's earlier folder waits under while a runs again
    *[(ONE.replace('name = "a"', f"name = {n}"), "case[0].name: expected a name of letters")
      for n in ('"a/../../x"', '"a/b"', '".."', '".a.kept"')],
    (ONE + ONE[ONE.index("[[case]]"):], "case[1].name: a is already a case's name"),
    # a list where a name belongs: "unhashable type: 'list'", which named no key
    (ONE + '[[published]]\nquantity = ["iops"]\ncase = "a"\nvalue = 1\nunit = "IOPS"\n'
     'where = "t1"\n', "published[0].quantity: unknown quantity ['iops']"),
    (ONE + '[[published]]\nquantity = "iops"\ncase = ["a"]\nvalue = 1\nunit = "IOPS"\n'
     'where = "t1"\n', "published[0].case: no case ['a']"),
    (ONE + '[[published]]\nquantity = "iops"\ncase = "a"\nvalue = 1\nunit = ["IOPS"]\n'
     'where = "t1"\n', "published[0].unit: unknown unit ['IOPS']"),
    (ONE.replace('layout = "raid0"', 'layout = ["raid0"]'),
     "case[0].array: group[0].layout: unknown layout ['raid0']"),
])
def test_bad_scenario_files(tmp_path, body, needle):
    """A bad case or [[published]] entry: one line naming the file and the key, exit 2,
    nothing written."""
    f = tmp_path / "s.toml"
    f.write_text(HEAD + body)
    res = runner.invoke(app, ["scenario", "run", str(f), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2
    line = res.output.strip()
    assert "\n" not in line and line.startswith(f"blocklab: error: {f}") and needle in line, line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("table,kv,needle", [
    ("workload", 'read_pct = "x"', "workload.read_pct: expected a whole number, found 'x'"),
    ("workload", 'outstanding = "many"', "workload.outstanding: expected a whole number"),
    ("workload", 'requests = "10"', "workload.requests: expected a whole number, found '10'"),
    ("workload", "workers = 1.5", "workload.workers: expected a whole number, found 1.5"),
    ("workload", "transfer_size = []", "workload.transfer_size: expected a size such as 4096"),
    ("workload", "random_pct = true", "workload.random_pct: expected a whole number, found true"),
    ("workload", 'span = "x"', "workload.span: expected a number, found 'x'"),
    ("replay", 'speed = "x"', "replay.speed: expected a number, found 'x'"),
    ("replay", "speed = 0", "replay.speed: must be a number from 1e-06"),
    ("replay", "closed_loop = 1.5", "replay.closed_loop: expected a whole number, found 1.5"),
])
@pytest.mark.parametrize("own", [False, True], ids=["scenario", "case"])
def test_a_value_of_the_wrong_type(tmp_path, table, kv, needle, own):
    """A workload or replay value of the wrong type was a traceback from the generator
    (read_pct = "x": a TypeError in traces/synth/iometer.py) or from replay (speed = "x": a
    ValueError), or taken as another value (random_pct = true as 1): one line naming the key
    as the file has it (the scenario's [workload], or the case's own), exit 2, nothing
    written."""
    k, v = kv.split(" = ")
    if own:
        body = (f'[workload]\ngenerator = "iometer"\nrequests = 8\n[[case]]\nname = "a"\n'
                f'{table} = {{ {k} = {v} }}\n')
        needle = f"{tmp_path / 's.toml'}: case[0].{needle}"
    else:
        body = f'[workload]\ngenerator = "iometer"\n{kv}\n[[case]]\nname = "a"\n'
        if table == "replay":
            body = f'[workload]\ngenerator = "iometer"\n[replay]\n{kv}\n[[case]]\nname = "a"\n'
        needle = f"{tmp_path / 's.toml'}: {needle}"
    f = tmp_path / "s.toml"
    f.write_text(HEAD + body + '[case.array]\n'
                 'group = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n')
    res = runner.invoke(app, ["scenario", "run", str(f), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"blocklab: error: {needle}"), lines
    assert not (tmp_path / "o").exists()


def test_a_case_with_another_generator_starts_from_its_own_options(tmp_path):
    """The scenario's IOR options (tasks, block size...) are not given to a case's Iometer."""
    f = tmp_path / "s.toml"
    f.write_text(HEAD + '[workload]\ngenerator = "ior"\ntasks = 4\ntransfer_size = "1MiB"\n'
                 'block_size = "4MiB"\nsegments = 1\n[[case]]\nname = "a"\n'
                 'workload = { generator = "iometer", requests = 8 }\n[case.array]\n'
                 'group = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n')
    sc = scenario.load(str(f))
    assert sc.cases[0].workload == {"generator": "iometer", "requests": 8}


def test_unknown_names(tmp_path):
    res = runner.invoke(app, ["scenario", "run", "no-such"])
    assert res.exit_code == 2 and "no scenario 'no-such'" in res.output
    res = runner.invoke(app, ["scenario", "run", "ddp-vs-raid6", "--case", "zz", "-o",
                              str(tmp_path / "o")])
    assert res.exit_code == 2
    assert re.search(r"no case \['zz'\] \(cases: ddp-60, raid6-8x4p2, ddp-60-init, ", res.output)


def _small_iops(rows, streams):
    """A point's small IOPS in plain Python: over the point, or in a point of both kinds
    until the kind that ran out first ended."""
    small = [x for x in rows if streams[x["stream"]][2]]
    large = [x for x in rows if not streams[x["stream"]][2]]
    t1 = min(max(x["complete_ns"] for x in k) for k in (small, large) if k)
    t0 = min(x["arrival_ns"] for x in rows)
    return sum(1 for x in small if x["complete_ns"] <= t1) / ((t1 - t0) / 1e9)


def test_orion_mixed_points_are_measured_while_both_loads_ran(tmp_path):
    """Each stream of an Orion point has a count of requests, so in a point of small and large
    I/Os one kind runs out first and the other goes on alone; Orion sustains the mix for the
    point's duration. The point is measured while both ran (a review found a third of such a
    point large-only, and small IOPS of 592 over the point where 860 while both ran)."""
    from blocklab.pipeline.synth import synth_orion

    array = ROOT / "examples" / "arrays" / "raid5-entry.toml"
    trace = tmp_path / "o.parquet"
    synth_orion(trace, matrix="point", num_small=10, num_large=2, array=str(array))
    run = tmp_path / "run"
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o", str(run)])
    assert res.exit_code == 0, res.output
    (pt,) = run_query([trace, run], "orion-points").rows()
    tr = pq.read_table(trace, columns=["stream", "phase", "outstanding", "size_bytes"])
    tr = tr.to_pylist()
    small = min(t["size_bytes"] for t in tr)
    streams = {t["stream"]: (t["phase"], t["outstanding"], t["size_bytes"] == small) for t in tr}
    ios = pq.read_table(run / "ios.parquet").to_pylist()
    last = {k: max(x["complete_ns"] for x in ios if streams[x["stream"]][2] == k)
            for k in (True, False)}
    assert last[True] != last[False]  # one kind ran alone at the end
    whole = sum(1 for x in ios if streams[x["stream"]][2]) / (
        (max(last.values()) - min(x["arrival_ns"] for x in ios)) / 1e9)
    assert pt["small_iops"] == pytest.approx(_small_iops(ios, streams), rel=1e-9)
    assert pt["small_iops"] != pytest.approx(whole, rel=0.01)


def test_orion_points_against_the_run_folder(tmp_path):
    """The orion measure's points, recomputed in plain Python from trace.parquet (each stream's
    phase and outstanding count) and ios.parquet; the published 'sustained maximum' is the mean
    of the small-only points in the top quarter of small levels."""
    r = scenario.run("md3000-raid5-vs-raid10", tmp_path / "o", ["raid5-orion"])
    pts = {p["phase"]: p for p in r.cases[0]["orion"]}
    folder = tmp_path / "o" / "raid5-orion"
    tr = pq.read_table(folder / "trace.parquet",
                       columns=["stream", "phase", "outstanding", "size_bytes"]).to_pylist()
    small = min(t["size_bytes"] for t in tr)
    streams = {}
    for t in tr:
        streams.setdefault(t["stream"], (t["phase"], t["outstanding"], t["size_bytes"] == small))
    ios = pq.read_table(folder / "run" / "ios.parquet").to_pylist()
    by_phase: dict[int, list[dict]] = {}
    for i in ios:
        by_phase.setdefault(streams[i["stream"]][0], []).append(i)
    for ph, rows in by_phase.items():
        outs = sum(o for p, o, sm in streams.values() if p == ph and sm)
        assert pts[ph]["small_outstanding"] == outs
        assert pts[ph]["small_iops"] == pytest.approx(_small_iops(rows, streams), rel=1e-9)
    only = [p for p in pts.values() if p["large_outstanding"] == 0 and p["small_outstanding"]]
    top = max(p["small_outstanding"] for p in only)
    want = [p["small_iops"] for p in only if p["small_outstanding"] > 0.75 * top]
    (pub,) = [p for p in r.published if p["quantity"] == "orion_small_iops"]
    assert pub["blocklab"] == pytest.approx(sum(want) / len(want))


TINY = HEAD + """[[case]]
name = "a"
label = "random 8 KiB"
measure = ["phases"]
workload = { generator = "iometer", transfer_size = "8KiB", read_pct = 70, random_pct = 100, outstanding = 4, requests = 300 }
[case.array]
group = [{ name = "g", layout = "raid0", width = 2, stripe_unit = "64KiB", drive = "atlas10k" }]
"""


def test_a_users_folder_named_as_a_case_is_not_replaced_but_its_own_run_is(tmp_path):
    """scenario run -o DIR removed DIR/<case> whatever it held (a user's folder of that name,
    exit 0); a folder a scenario wrote (its array.toml) is still replaced by the next run."""
    (tmp_path / "s.toml").write_text(TINY)
    mine = tmp_path / "mydata" / "a"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("precious")
    res = runner.invoke(app, ["scenario", "run", str(tmp_path / "s.toml"), "-o",
                              str(tmp_path / "mydata")])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == (f"blocklab: error: {mine}: exists and is not a scenario case "
                                  "folder (no array.toml); not replaced: remove it or write "
                                  "elsewhere")
    assert (mine / "notes.txt").read_text() == "precious"
    out = tmp_path / "out"
    for _ in range(2):
        res = runner.invoke(app, ["scenario", "run", str(tmp_path / "s.toml"), "-o", str(out)])
        assert res.exit_code == 0, res.output
    assert json.loads((out / "scenario.json").read_text())["cases"][0]["case"] == "a"


def test_a_failed_run_keeps_the_earlier_runs_case_folders(tmp_path):
    """scenario run removed a case's folder before running it: a run that then failed (here
    a transfer size the generator refuses) left the earlier run's case gone while its
    scenario.json still described it. The earlier folder is kept aside until the case is
    done again, and put back when it fails: case b and scenario.json are as they were, case
    a (done again) whole, and nothing else is left."""
    two = TINY + TINY[TINY.index("[[case]]"):].replace('name = "a"', 'name = "b"')
    (tmp_path / "s.toml").write_text(two)
    out = tmp_path / "out"
    res = runner.invoke(app, ["scenario", "run", str(tmp_path / "s.toml"), "-o", str(out)])
    assert res.exit_code == 0, res.output

    def state() -> dict[str, bytes]:
        return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
                if p.is_file()}

    before = state()
    assert "a/run/meta.json" in before and "b/trace.parquet" in before
    meta = json.loads(before["a/run/meta.json"])
    assert meta["trace"]["path"] == str(out / "a" / "trace.parquet")  # (not the temporary's)
    # case b fails when its workload is generated, after case a was built again
    bad = two[:two.rindex("[[case]]")] + two[two.rindex("[[case]]"):].replace('"8KiB"', '"3000"')
    (tmp_path / "s.toml").write_text(bad)
    res = runner.invoke(app, ["scenario", "run", str(tmp_path / "s.toml"), "-o", str(out)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "case[1].workload.transfer_size" in lines[0], lines
    after = state()
    assert {k: v for k, v in after.items() if not k.startswith("a/")} == \
        {k: v for k, v in before.items() if not k.startswith("a/")}
    assert sorted(after) == sorted(before)  # case a: done again, whole
    assert sorted(p.name for p in out.iterdir()) == ["a", "b", "scenario.json"]


def test_a_killed_runs_kept_case_folder_is_put_back(tmp_path):
    """A run killed (SIGKILL) while a case ran again leaves the earlier folder at .CASE.kept
    and a half case in its place: the next run into that folder puts the earlier one back
    before anything else (here a run that then fails, so it stays)."""
    (tmp_path / "s.toml").write_text(TINY)
    out = tmp_path / "out"
    res = runner.invoke(app, ["scenario", "run", str(tmp_path / "s.toml"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    whole = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    (out / "a").rename(out / ".a.kept")
    (out / "a").mkdir()
    (out / "a" / "array.toml").write_text("half")
    (tmp_path / "s.toml").write_text(TINY.replace('"8KiB"', '"3000"'))
    res = runner.invoke(app, ["scenario", "run", str(tmp_path / "s.toml"), "-o", str(out)])
    assert res.exit_code == 2, res.output
    assert {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*")
            if p.is_file()} == whole


def test_a_symlink_at_a_cases_kept_name_is_not_put_back(tmp_path):
    """Only a folder a run kept aside is put back: a symlink at OUT/.a.kept (to a folder of
    the user's) is left alone, and so are the earlier run's case a, which putting the link
    back would have removed first, and the folder it points to."""
    (tmp_path / "s.toml").write_text(TINY)
    out = tmp_path / "out"
    res = runner.invoke(app, ["scenario", "run", str(tmp_path / "s.toml"), "-o", str(out)])
    assert res.exit_code == 0, res.output

    def files(top):
        return {str(p.relative_to(top)): p.read_bytes() for p in top.rglob("*") if p.is_file()}

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    (out / ".a.kept").symlink_to(mine, target_is_directory=True)
    before = files(out / "a")
    res = runner.invoke(app, ["scenario", "run", str(tmp_path / "s.toml"), "-o", str(out)])
    assert files(out / "a") == before and not (out / "a").is_symlink()
    assert files(mine) == {"notes.txt": b"mine"}
    # refused before any case runs, in one line naming the link (not the rename's ENOTDIR)
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and f"{out / '.a.kept'}: exists and is not a case folder" in lines[0]


def test_a_cases_lost_requests_are_its_runs(tmp_path):
    """A case whose RAID-0 of two loses drive 0 at 0 s: its figures count as lost the
    requests with a sector on drive 0 (tests/reference/layout.py's plain layout), as the run's
    ios.lost has them."""
    from .reference import layout

    (tmp_path / "s.toml").write_text(TINY.replace(
        "[case.array]", "failure = [{ drive = 0, at_s = 0.0 }]\n[case.array]"))
    out = tmp_path / "out"
    res = runner.invoke(app, ["scenario", "run", str(tmp_path / "s.toml"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    ios = pq.read_table(out / "a" / "run" / "ios.parquet").to_pydict()
    want = [layout.lost("raid0", 2, 128, 1 << 40, s, b // 512, lambda m, _r: m == 0)
            for s, b in zip(ios["sector"], ios["size_bytes"], strict=True)]
    assert ios["lost"] == want and 0 < sum(want) < len(want)
    fig = json.loads((out / "scenario.json").read_text())["cases"][0]
    assert fig["lost_requests"] == sum(want) and fig["requests"] == len(want)


def test_a_stop_while_the_earlier_folder_is_removed_keeps_the_finished_case(tmp_path,
                                                                           monkeypatch):
    """A run stopped (Ctrl-C: the signal handler's exception) while it removed a finished
    case's earlier folder (OUT/.a.kept) left that folder half removed under its kept name,
    and the next run put it back over the finished case: the case was gone, and with the
    half folder's array.toml removed first, that run refused it as no scenario case folder.
    The next run now finds case a as the stopped run finished it, and runs again."""
    import shutil

    (tmp_path / "s.toml").write_text(TINY)
    out = tmp_path / "out"
    res = runner.invoke(app, ["scenario", "run", str(tmp_path / "s.toml"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    real = shutil.rmtree

    def stopped(path, *args, **kw):  # the earlier folder's removal, cut short
        if Path(path).name.startswith(".a.") and Path(path).is_dir():
            (Path(path) / "array.toml").unlink()
            raise KeyboardInterrupt
        real(path, *args, **kw)

    monkeypatch.setattr(shutil, "rmtree", stopped)
    with pytest.raises(KeyboardInterrupt):
        scenario.run(tmp_path / "s.toml", out)
    monkeypatch.undo()
    finished = {str(p.relative_to(out / "a")) for p in (out / "a").rglob("*") if p.is_file()}
    assert {"array.toml", "trace.parquet", "run/meta.json"} <= finished
    res = runner.invoke(app, ["scenario", "run", str(tmp_path / "s.toml"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["a", "scenario.json"]


def test_a_size_given_as_a_number_of_bytes_is_taken(tmp_path):
    """A generator's size options are read as sizes (traces/synth parse_size): a number of
    bytes is one, as "8KiB" is, though the generators' signatures say text."""
    f = tmp_path / "s.toml"
    f.write_text(TINY.replace('transfer_size = "8KiB"', "transfer_size = 8192, align = 4096"))
    (case,) = scenario.load(f).cases
    assert case.workload["transfer_size"] == 8192 and case.workload["align"] == 4096


def test_a_search_option_of_the_wrong_type(tmp_path):
    """An spc1 search option (ramp_s, of a case that measures spc1) is checked against the
    search's own type, as a generator's option is against the generator's: one line naming
    the key, before any case runs."""
    f = tmp_path / "s.toml"
    f.write_text(HEAD + '[workload]\ngenerator = "spc1"\nramp_s = "x"\n[[case]]\nname = "a"\n'
                 'measure = ["spc1"]\n[case.array]\n'
                 'group = [{ name = "g", layout = "raid0", width = 2, drive = "atlas10k" }]\n')
    with pytest.raises(scenario.BlocklabError) as e:
        scenario.load(f)
    assert str(e.value) == f"{f}: workload.ramp_s: expected a number, found 'x'"
