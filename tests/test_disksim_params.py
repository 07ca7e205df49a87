"""The DiskSim parameter importer reads all four validated drives in ../shared."""

from __future__ import annotations

import pytest

from blocklab.pipeline.disksim_params import ParamError, parse, read_drive

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


def test_parameter_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.parv"
    bad.write_text("disksim_disk D {\n  Model = source missing.model,\n}\n")
    with pytest.raises(ParamError, match=r"bad.parv:2: sourced file missing.model not found"):
        parse(bad)
    bad.write_text("disksim_disk D {\n  Rotation = 5,\n  [\n")
    with pytest.raises(ParamError, match="bad.parv"):
        parse(bad)
