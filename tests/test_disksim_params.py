"""The DiskSim parameter importer reads all eleven validated drives of DiskSim's valid/ folder
(four in ../shared, seven in tests/data/disksim/valid) and refuses what the model does not do."""

from __future__ import annotations

import os
import re

import pytest

from blocklab.pipeline.model.disksim_params import ParamError, parse, read_drive

from .valid_drives import valid_path

# name: (block count, surfaces, cylinders, rpm, zones, seek type, bus read ms/block)
DRIVES = {
    "atlas10k": (17938986, 6, 10042, 10025, 24, "extracted", 0.0),
    "barracuda": (4110000, 5, 5172, 7200, 11, "extracted", 0.0),
    "cheetah9LP": (17783240, 12, 6962, 10045, 11, "extracted", 0.0),
    "hp_c2247a": (2054864, 13, 2051, 5400, 8, "hplplus10", 0.17010),
}


@pytest.mark.parametrize("name", list(DRIVES))
def test_reads_the_validated_drives(shared, name):
    d = read_drive(shared / "validation" / "disksim" / f"{name}.parv")
    blocks, surfaces, cyls, rpm, zones, seek, bus = DRIVES[name]
    assert (d.block_count, d.surfaces, d.cylinders, d.rpm) == (blocks, surfaces, cyls, rpm)
    assert len(d.zones) == zones and d.seek_type == seek
    assert d.bus_read_block_ms == pytest.approx(bus)
    assert d.zones[0].first_cylinder == 0 and d.zones[-1].last_cylinder == cyls - 1
    for a, b in zip(d.zones, d.zones[1:], strict=False):
        # zones are in order and do not overlap (some drives leave a cylinder between them)
        assert a.first_cylinder <= a.last_cylinder < b.first_cylinder
    # the zones hold at least the drive's blocks (the rest is spares and slip space)
    raw = sum((z.last_cylinder - z.first_cylinder + 1) * surfaces * z.blocks_per_track
              for z in d.zones)
    assert blocks <= raw
    if seek == "extracted":
        dist = [c for c, _t in d.seek_curve]
        assert dist == sorted(dist) and dist[0] == 1 and len(dist) > 50
    else:
        assert len(d.hpl_seek) == 6 and len(d.first_ten_seeks_ms) == 10


def test_a_drive_read_again_sees_every_change_of_its_files(shared, tmp_path):
    """read_drive keeps what it parsed (a parallel replay's every segment builds its array):
    the same answer as a first read, a copy each caller may change, and a fresh parse once any
    file it read holds other text, the sourced ones and the seek curve too, even rewritten at
    the same size and time stamp (a coarse file clock)."""
    src = shared / "validation" / "disksim"
    names = ("barracuda.parv", "barracuda.diskspecs", "barracuda.model", "barracuda.seek")
    for f in names:
        (tmp_path / f).write_text((src / f).read_text())
    parv = tmp_path / "barracuda.parv"
    first = read_drive(parv)
    assert read_drive(parv) == first
    first.zones.clear()
    first.seek_curve[0] = (1, 99.0)
    again = read_drive(parv)
    assert len(again.zones) == 11 and again.seek_curve[0] == (1, 1.943)
    seek = tmp_path / "barracuda.seek"
    st = seek.stat()
    seek.write_text(seek.read_text().replace("1,\t1.94300", "1,\t1.80000"))
    os.utime(seek, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert seek.stat().st_size == st.st_size
    assert read_drive(parv).seek_curve[0] == (1, 1.8)
    model = tmp_path / "barracuda.model"
    model.write_text(model.read_text().replace("Number of data surfaces = 5",
                                               "Number of data surfaces =  4"))
    assert read_drive(parv).surfaces == 4
    model.unlink()
    with pytest.raises(ParamError, match="sourced file barracuda.model not found"):
        read_drive(parv)


def test_links_to_one_drive_file_read_the_files_beside_them(shared, tmp_path):
    """Two links to one .parv in two folders, each folder with its own model: each reads its
    own folder's (sourced files are looked up beside the path given), and names its path."""
    src = shared / "validation" / "disksim"
    (tmp_path / "x.parv").write_text((src / "barracuda.parv").read_text())
    for sub, surfaces in (("a", 5), ("b", 4)):
        d = tmp_path / sub
        d.mkdir()
        for f in ("barracuda.diskspecs", "barracuda.seek"):
            (d / f).write_text((src / f).read_text())
        (d / "barracuda.model").write_text((src / "barracuda.model").read_text().replace(
            "Number of data surfaces = 5", f"Number of data surfaces = {surfaces}"))
        (d / "x.parv").symlink_to(tmp_path / "x.parv")
    for sub, surfaces in (("a", 5), ("b", 4), ("a", 5)):
        d = read_drive(tmp_path / sub / "x.parv")
        assert (d.surfaces, d.source) == (surfaces, str(tmp_path / sub / "x.parv"))


def test_a_seek_curve_that_is_not_text_names_its_line(shared, tmp_path):
    """Bytes that are not UTF-8 in a seek curve: a ParamError naming the file and line (was a
    UnicodeDecodeError, not a one-line error)."""
    src = shared / "validation" / "disksim"
    for f in ("barracuda.parv", "barracuda.diskspecs", "barracuda.model"):
        (tmp_path / f).write_text((src / f).read_text())
    (tmp_path / "barracuda.seek").write_bytes(b"Seek distances measured: 2\n1,\t1.9\n\xff\xfe,2\n")
    with pytest.raises(ParamError, match=r"barracuda.seek:3: expected 'distance, time_ms'"):
        read_drive(tmp_path / "barracuda.parv")


def test_parameter_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.parv"
    bad.write_text("disksim_disk D {\n  Model = source missing.model,\n}\n")
    with pytest.raises(ParamError, match=r"bad.parv:2: sourced file missing.model not found"):
        parse(bad)
    bad.write_text("disksim_disk D {\n  Rotation = 5,\n  [\n")
    with pytest.raises(ParamError, match="bad.parv"):
        parse(bad)


# the seven drives of DiskSim's valid/ folder not in the shared one: (block count, surfaces,
# cylinders, rpm, zones, seek type, sparing scheme)
VALID_MORE = {
    "atlas_III": (17783250, 10, 8057, 7200, 9, "extracted", 7),
    "cheetah4LP": (8887200, 8, 6581, 10033, 7, "extracted", 8),
    "dec_rz26": (2050860, 14, 2599, 5360, 1, "extracted", 3),
    "hp_c2490a": (4165272, 18, 2629, 6398, 11, "extracted", 1),
    "hp_c3323a": (2056008, 7, 2982, 5396, 8, "extracted", 1),
    "ibm18es": (17916240, 5, 11474, 7200, 55, "extracted", 7),
    "st41601n": (2676846, 17, 2098, 5397, 14, "extracted", 2),
}


@pytest.mark.parametrize("name", list(VALID_MORE))
def test_reads_the_other_valid_drives(name):
    d = read_drive(valid_path(name))
    blocks, surfaces, cyls, rpm, zones, seek, scheme = VALID_MORE[name]
    assert (d.block_count, d.surfaces, d.cylinders, d.rpm) == (blocks, surfaces, cyls, rpm)
    assert d.seek_type == seek and d.sparing_scheme == scheme and len(d.zones) == zones
    # (the HP C2490A's last zone ends on cylinder 2629 of 0-2628: DiskSim does not check)
    assert d.zones[0].first_cylinder == 0 and d.zones[-1].last_cylinder <= cyls
    for a, b in zip(d.zones, d.zones[1:], strict=False):
        assert a.first_cylinder <= a.last_cylinder < b.first_cylinder
    assert len(d.seek_curve) > 50


@pytest.mark.parametrize(("key", "old", "new", "msg"), [
    ("Preseeking level", "0", "1", "'Preseeking level = 1' is not modelled (only 0"),
    ("Time scale for overheads", "1.000000", "2.0", "'Time scale for overheads = 2.0' is not"),
    ("Combine seq writes", "1", "0", "'Combine seq writes = 0' is not modelled (only 1"),
    ("Seek type", "extracted", "linear", "'Seek type = linear' is not modelled (only extracted"),
    ("Access time type", "trackSwitchPlusRotation", "averageRotation",
     "'Access time type = averageRotation' is not modelled"),
])
def test_keys_the_model_does_not_do_are_refused(tmp_path, key, old, new, msg):
    src = valid_path("ibm18es").parent
    for f in ("ibm18es.parv", "ibm18es.diskspecs", "ibm18es.model", "ibm18es.seek"):
        text = (src / f).read_text()
        pat = re.compile(rf"({re.escape(key)}\s*=\s*){re.escape(old)}\b")
        (tmp_path / f).write_text(pat.sub(lambda m: m.group(1) + new, text))
    with pytest.raises(ParamError, match=re.escape(msg)):
        read_drive(tmp_path / "ibm18es.parv")
