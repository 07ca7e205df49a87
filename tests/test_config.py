"""Array configuration: the worked examples load; bad configurations get one line naming the
file and the key."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from blocklab.pipeline.model import catalog as CAT
from blocklab.pipeline.model.config import ConfigError, catalog_path, load_array
from blocklab.pipeline.model.disksim_params import read_drive

from .conftest import ROOT

EXAMPLES = sorted((ROOT / "examples" / "arrays").glob("*.toml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_load(path):
    a = load_array(path)
    assert a.groups and all(g.stripe_unit_bytes % 512 == 0 for g in a.groups)


def test_example_values():
    a = load_array(ROOT / "examples" / "arrays" / "raid6-4p2-x8.toml")
    (g,) = a.groups
    assert (g.layout, g.width, g.stripe_unit_bytes, g.count, g.hot_spares) == (
        "raid6", 6, 128 << 10, 8, 2)
    assert a.luns() == [f"r6.{i}" for i in range(8)]
    assert a.volume is not None and a.volume.stripe_unit_bytes == 1 << 20
    assert a.controller.cache_bytes == 2 << 30 and a.controller.command_overhead_ns == 27_000


@pytest.mark.parametrize("name", [n for n, e in CAT.catalog()[0].items() if e.kind == "disksim"])
def test_catalog_drives_import(name):
    d = read_drive(catalog_path(name))
    assert d.block_count > 0 and d.rpm > 0


BASE = '[[group]]\nname = "a"\nlayout = "raid5"\nwidth = 5\nstripe_unit = "64KiB"\ndrive = "atlas10k"\n'
BAD = [
    (BASE.replace('"raid5"', '"raid7"'), "group[0].layout", "unknown layout 'raid7'"),
    (BASE + "max_wait_ms = -1\n", "group[0].max_wait_ms", "must be at least 0"),
    (BASE.replace('"raid5"', '"raid6"').replace("width = 5", "width = 3"), "group[0].width",
     "raid6 needs at least 4 drives, found 3"),
    (BASE.replace('"64KiB"', "1000"), "group[0].stripe_unit", "not a multiple of the 512-byte"),
    (BASE.replace('"64KiB"', '"64XB"'), "group[0].stripe_unit", "unknown size unit"),
    # sizes the one grammar reads since 2026-11-28 (P, PiB) or that no unit check stopped:
    # each was a NumPy traceback or a petabyte allocation at replay
    (BASE + '[controller]\ncache = "100PiB"\n', "controller.cache", "at most 4,194,304 lines"),
    (BASE + '[controller]\ncache = "1GiB"\nread_ahead = true\nread_ahead_size = "2GiB"\n',
     "controller.read_ahead_size", "at most 1 GiB"),
    (BASE + '[rebuild]\nunit = "100TiB"\n', "rebuild.unit", "at most 1 GiB"),
    (BASE.replace('drive = "atlas10k"\n', ""), "group[0].drive", "missing drive model"),
    (BASE.replace('"atlas10k"', '"wd_raptor"'), "group[0].drive", "unknown drive model"),
    (BASE.replace('"atlas10k"', '{ disksim = "nope.parv" }'), "group[0].drive.disksim",
     "no such file"),
    (BASE + "colour = 3\n", "group[0].colour", "unknown key"),
    (BASE.replace('"atlas10k"', '{ base = "nope" }'), "group[0].drive.base",
     "unknown catalog drive"),
    (BASE.replace('"atlas10k"', '{ base = "intel_s3700_800g", rpm = 7200 }'),
     "group[0].drive.rpm", "unknown key"),
    (BASE.replace('"atlas10k"', '{ base = "intel_s3700_800g", channels = "eight" }'),
     "group[0].drive.channels", "expected a number"),
    (BASE.replace('"atlas10k"', '{ kind = "ssd", channels = 8 }'), "group[0].drive",
     "an inline ssd needs"),
    (BASE.replace('"atlas10k"', '{ kind = "tape" }'), "group[0].drive", "an inline drive needs"),
    (BASE + "[controller]\nwrite_policy = \"sometimes\"\n", "controller.write_policy",
     "expected write-back or write-through"),
    (BASE + "[volume]\nluns = [\"b\"]\n", "volume.luns", "no LUN 'b'"),
    (BASE + "[controller]\nhost_links = { count = 1, gbit_per_s = 1, protocol = \"fc\" }\n",
     "controller.host_links.protocol", "expected one of bytes, aoe, iscsi"),
    (BASE + "[controller]\nhost_links = { protocol = \"aoe\", efficiency = 0.9 }\n",
     "controller.host_links.efficiency", "follows from its MTU"),
    (BASE + "[controller]\nhost_links = { protocol = \"aoe\", mtu = 16000 }\n",
     "controller.host_links.mtu", "at most 9216"),
    (BASE + 'scheduler = "satf"\n', "group[0].scheduler", "expected fcfs, sstf, clook or sptf"),
    (BASE.replace('"atlas10k"', '"intel_s3700_800g"') + 'scheduler = "sptf"\n',
     "group[0].scheduler", "this group's drives are SSDs"),
    (BASE.replace('"atlas10k"', '{ base = "savvio_15k3_300g", command_queueing = false }')
     + 'scheduler = "sptf"\n', "group[0].scheduler", "command_queueing = false"),
    (BASE + 'scheduler = "clook"\n', "group[0].queue_depth",
     "missing: scheduler clook orders the first queue_depth operations"),
    (BASE + 'scheduler = "sptf"\n', "group[0].queue_depth", "the default, 1, is fcfs"),
    ("", "group", "at least one [[group]]"),
    ("[[group]\n", "", "not valid TOML"),
    # far past any array sold: a MemoryError, or a traceback asking for terabytes
    (BASE + "count = 100000000000\n", "group[0].count", "must be at most 10,000"),
    (BASE.replace("width = 5", "width = 100000"), "group[0].width", "must be at most 10,000"),
    (BASE + "count = 2001\n", "group", "10,005 drives in all"),
]


@pytest.mark.parametrize("text,key,msg", BAD)
def test_bad_config_names_the_key(tmp_path: Path, text, key, msg):
    f = tmp_path / "array.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_array(f)
    line = str(e.value)
    assert "\n" not in line and line.startswith(f"{f}: {key}")
    assert msg in line


@pytest.mark.parametrize("drive", ['"atlas10k"', '"cheetah_15k5_146g"',
                                   '{ base = "savvio_15k3_300g", rpm = 10000 }'])
def test_disks_with_command_queueing_take_sptf(tmp_path: Path, drive):
    """A DiskSim drive (a SCSI disk with tagged queuing), a catalog HDD (command queuing by
    default) and an inline one derived from it may order their queues by positioning time."""
    f = tmp_path / "array.toml"
    f.write_text(BASE.replace('"atlas10k"', drive) + 'scheduler = "sptf"\nqueue_depth = 32\n')
    g = load_array(f).groups[0]
    assert (g.scheduler, g.queue_depth) == ("sptf", 32)


def test_a_scheduler_over_one_queued_operation_is_taken_as_written(tmp_path: Path):
    """queue_depth = 1 given with a scheduler is kept (a sweep may go down to it); the engine
    then serves the queue first come, first served, as it would under fcfs."""
    f = tmp_path / "array.toml"
    f.write_text(BASE + 'scheduler = "clook"\nqueue_depth = 1\n')
    g = load_array(f).groups[0]
    assert (g.scheduler, g.queue_depth) == ("clook", 1)


def test_drives_command_lists_the_catalog():
    import json

    from typer.testing import CliRunner

    from blocklab.pipeline.cli import app

    res = CliRunner().invoke(app, ["drives", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["name"] for r in rows] == CAT.names()
    kinds = {r["kind"] for r in rows}
    assert kinds == {"hdd", "ssd", "disksim"}
    for r in rows:
        if r["kind"] == "disksim":
            assert "DiskSim" in r["source"] and r["rpm"] > 0
        else:  # every figure says where it comes from
            assert all(f["source"] and f["label"] in CAT.LABELS for f in r["figures"].values())
    res = CliRunner().invoke(app, ["drives", "savvio_15k3_300g"])
    assert res.exit_code == 0 and "Savvio 15K.3" in res.stdout
    res = CliRunner().invoke(app, ["drives", "nope"])
    assert res.exit_code == 2 and "no drive 'nope'" in res.stderr


def test_ssd_write_path_is_optional(tmp_path: Path):
    """An SSD's ``write_mb_s`` (the controller's write path) may be given, changed or left out;
    an HDD has no such key."""
    from blocklab.kernels.drive import ssd as SS
    from blocklab.pipeline.replay import build_array

    figures = {k: f.value for k, f in CAT.catalog()[0]["intel_s3700_800g"].figures.items()}

    def wpath_ps(drive: str) -> float:
        f = tmp_path / "array.toml"
        f.write_text(BASE.replace('"atlas10k"', drive))
        return float(build_array(load_array(f)).models.sp[SS.P_WPATH_PS])

    assert wpath_ps('"intel_s3700_800g"') == round(1e12 / 460e6)
    assert wpath_ps('{ base = "intel_s3700_800g", write_mb_s = 250 }') == 4000
    inline = ", ".join(f"{k} = {v}" for k, v in figures.items() if k != "write_mb_s")
    assert wpath_ps("{ kind = \"ssd\", " + inline + " }") == 0  # no limit of its own
    f = tmp_path / "array.toml"
    f.write_text(BASE.replace('"atlas10k"', '{ base = "savvio_15k3_300g", write_mb_s = 100 }'))
    with pytest.raises(ConfigError, match="group\\[0\\].drive.write_mb_s"):
        load_array(f)


@pytest.mark.parametrize("proto,mtu,links,frame_us,want", [
    # AoE: (mtu - 36) // 512 sectors a frame, at most a 4 KiB page (the Linux initiator), 60
    # more bytes on the wire (by hand)
    ("aoe", 1500, 1, 0, 125e6 * 1024 / 1084),
    ("aoe", 4200, 1, 0, 125e6 * 4096 / 4156),
    ("aoe", 4000, 1, 0, 125e6 * 3584 / 3644),
    ("aoe", 9000, 2, 0, 250e6 * 4096 / 4156),
    # iSCSI: mtu - 52 bytes a frame, mtu + 38 on the wire, a 48-byte header per 8 KiB PDU
    ("iscsi", 1500, 1, 0, 125e6 * 1448 / 1538 * 8192 / 8240),
    ("iscsi", 9000, 1, 0, 125e6 * 8948 / 9038 * 8192 / 8240),
    # a controller that takes 10 us a frame: 1024 bytes / 10 us, below the two links' rate
    ("aoe", 1500, 2, 10, 1024 / 10e-6),
])
def test_framed_links_carry_what_the_headers_leave(tmp_path: Path, proto, mtu, links, frame_us,
                                                   want):
    f = tmp_path / "array.toml"
    f.write_text(BASE + f"[controller]\nhost_links = {{ count = {links}, gbit_per_s = 1, "
                 f"protocol = \"{proto}\", mtu = {mtu}, frame_us = {frame_us} }}\n")
    c = load_array(f).controller
    assert c.link_payload_bytes_per_s() == pytest.approx(want, rel=1e-12)


def test_a_cache_that_costs_nothing_is_told():
    """A controller cache with no command overhead, internal bus or host link: a hit and a
    cached write take 0 ns, which replay tells (each of the three alone is a cost)."""
    from blocklab.pipeline.model.config import ControllerConfig

    assert ControllerConfig().free_cache_note() is None  # no cache
    free = ControllerConfig(cache_bytes=1 << 30)
    assert "complete in 0 ns" in (free.free_cache_note() or "")
    for cost in ({"command_overhead_ns": 20_000}, {"bandwidth_bytes_per_s": 1e9},
                 {"link_gbit_per_s": 8.0}):
        assert ControllerConfig(cache_bytes=1 << 30, **cost).free_cache_note() is None, cost


@pytest.mark.replays
def test_replay_tells_a_cache_that_costs_nothing(tmp_path):
    """Through the CLI: the note on standard error, once, with its key names whole."""
    from typer.testing import CliRunner

    from blocklab.pipeline.cli import app

    arr = tmp_path / "a.toml"
    arr.write_text('[[group]]\nname = "g"\nlayout = "raid5"\nwidth = 4\ndrive = "atlas10k"\n'
                   '[controller]\ncache = "64MiB"\n')
    runner = CliRunner()
    res = runner.invoke(app, ["synth", "iometer", "--requests", "200", "--array", str(arr),
                              "-o", str(tmp_path / "t.parquet")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["replay", str(tmp_path / "t.parquet"), "--array", str(arr), "-o",
                              str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    notes = [ln for ln in res.stderr.splitlines() if ln.startswith("blocklab: note: ")]
    assert len(notes) == 1 and "complete in 0 ns" in notes[0] and "[controller]" in notes[0]


def test_a_stripe_unit_larger_than_the_drive(tmp_path: Path):
    """No stripe fits a drive: a capacity of 0 divided by, a ZeroDivisionError, before."""
    from blocklab.pipeline.model.array import build_array

    f = tmp_path / "array.toml"
    f.write_text(BASE.replace('"64KiB"', '"1TiB"'))
    with pytest.raises(ConfigError) as e:
        build_array(load_array(f))
    assert str(e.value).startswith(f"{f}: group[0].stripe_unit: 1,099,511,627,776 bytes is "
                                   "more than a drive holds")


def test_a_volume_stripe_unit_larger_than_a_lun(tmp_path: Path):
    """No volume stripe unit fits a LUN: a volume of 0 sectors, and every replay refused with
    "beyond the array's 0 sectors", before. The LUN is named with what it holds, computed
    here from its own drives: 4 data members of atlas10k's whole 64 KiB units."""
    from blocklab.pipeline.model.array import build_array

    f = tmp_path / "array.toml"
    f.write_text('[volume]\nstripe_unit = "1TiB"\n' +
                 BASE.replace("width = 5", "width = 5\ncount = 2"))
    with pytest.raises(ConfigError) as e:
        build_array(load_array(f))
    # atlas10k.parv's "Storage capacity per device = 17938986" blocks, in whole 128-block units
    per_drive = 17938986 // 128 * 128 * 512
    assert str(e.value) == (f"{f}: volume.stripe_unit: 1,099,511,627,776 bytes is more than "
                            f"LUN a.0 holds ({4 * per_drive:,} bytes)")
    f.write_text(f.read_text().replace('"1TiB"', f'"{4 * per_drive}B"'))
    assert build_array(load_array(f)).capacity == 2 * 4 * per_drive // 512


def test_a_drive_too_small_for_the_models_zones(tmp_path: Path):
    """blocks = 40000 on a 300 GB drive left its 16 zones no cylinders: a ZeroDivisionError.
    The drive and the figure are named, with a size that works (its own blocks, from the
    catalog figures, of one zone's cylinders each)."""
    from blocklab.pipeline.model.array import build_array

    f = tmp_path / "array.toml"
    f.write_text(BASE.replace('"atlas10k"', '{ base = "savvio_15k3_300g", blocks = 40000 }'))
    with pytest.raises(ConfigError) as e:
        build_array(load_array(f))
    m = re.fullmatch(rf"{re.escape(str(f))}: drive savvio_15k3_300g \(blocks=40000\): 40,000 "
                     r"blocks make (\d+) cylinders; the model needs at least 16 \(one a zone\): "
                     r"about ([\d,]+) blocks", str(e.value))
    assert m and int(m[1]) < 16, str(e.value)
    f.write_text(BASE.replace('"atlas10k"', '{ base = "savvio_15k3_300g", blocks = '
                              f'{m[2].replace(",", "")} }}'))
    assert build_array(load_array(f)).capacity > 0


# a list (or a table) where a name belongs: a lookup in a dict of names raised "TypeError:
# unhashable type: 'list'" (a traceback) where a tuple of names gave the one line
LIST_FOR_NAME = [
    (BASE.replace('"raid5"', '["raid5"]'), "group[0].layout", "unknown layout ['raid5']"),
    (BASE.replace('"raid5"', '"pool"').replace("width = 5", "width = 10") + 'raid = ["raid5"]\n',
     "group[0].raid", "unknown layout ['raid5']"),
    (BASE + '[rebuild]\npriority = ["high"]\n', "rebuild.priority", "found ['high']"),
    (BASE.replace('"atlas10k"', '{ base = "savvio_10k4_600g", firmware = ["S11"] }'),
     "group[0].drive.firmware", "unknown firmware timing set ['S11']"),
    (BASE + '[controller]\nhost_links = { protocol = { x = 1 } }\n',
     "controller.host_links.protocol", "found {'x': 1}"),
    (BASE + 'scheduler = ["clook"]\n', "group[0].scheduler", "found ['clook']"),
    ("group = [1]\n", "group[0]", "expected a [[group]] table, found 1"),
    ("volume = 3\n" + BASE, "volume", "expected a [volume] table, found 3"),
]


@pytest.mark.parametrize("text,key,msg", LIST_FOR_NAME, ids=[k for _t, k, _m in LIST_FOR_NAME])
def test_a_list_where_a_name_belongs(tmp_path: Path, text, key, msg):
    """One line naming the file and the key, exit 2, no output: as scheduler = ["clook"]
    already got."""
    from typer.testing import CliRunner

    from blocklab.pipeline.cli import app

    f = tmp_path / "array.toml"
    f.write_text(text)
    out = tmp_path / "out" / "w.parquet"
    out.parent.mkdir()
    res = CliRunner().invoke(app, ["synth", "iometer", "--requests", "1", "--array", str(f),
                                   "-o", str(out)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"blocklab: error: {f}: {key}: "), lines[0]
    assert msg in lines[0]
    assert list(out.parent.iterdir()) == []


def test_several_luns_without_a_volume_are_said_to_get_no_host_io(tmp_path):
    """Two RAID-5 LUNs and no [volume]: the host addresses the first alone (every host
    operation lands on its four drives, drive_ops shows) and replay says so in a note; with a
    [volume] over both, both get host I/O and nothing is said."""
    from typer.testing import CliRunner

    from blocklab.pipeline.cli import app
    from blocklab.pipeline.synth import synth_iometer

    group = '[[group]]\nname = "g"\nlayout = "raid5"\nwidth = 4\ncount = 2\ndrive = "atlas10k"\n'
    for volume, said in (("", True), ('[volume]\nluns = ["g.0", "g.1"]\n', False)):
        toml = tmp_path / f"a{said}.toml"
        toml.write_text(group + volume)
        trace = tmp_path / f"w{said}.parquet"
        synth_iometer(trace, transfer_size="4k", read_pct=100, random_pct=100, align="4k",
                      requests=300, outstanding=2, array=str(toml))
        run = tmp_path / f"run{said}"
        res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(toml), "-o",
                                       str(run), "--drive-ops"])
        assert res.exit_code == 0, res.output
        assert ("and no [volume]: the host addresses g.0 alone" in " ".join(
            res.output.split())) == said
        drives = set(pq.read_table(run / "drive_ops.parquet", columns=["drive"]).column(0)
                     .to_pylist())
        assert (drives <= {0, 1, 2, 3}) == said and drives & {0, 1, 2, 3}


@pytest.mark.parametrize("count,luns", [(1, None), (2, "g.0, g.1"), (3, "g.0, g.1, ...")])
def test_the_first_lun_note_names_the_first_two_luns(tmp_path, count, luns):
    """The note lists the first two LUNs, and '...' only when there are more (three, here);
    an array of one LUN gets none."""
    f = tmp_path / "a.toml"
    f.write_text(BASE.replace('name = "a"', 'name = "g"') + f"count = {count}\n")
    note = load_array(f).first_lun_note()
    if luns is None:
        assert note is None
    else:
        assert note is not None and note.startswith(
            f"the array has {count} LUNs ({luns}) and no [volume]: the host addresses g.0 "
            "alone"), note
