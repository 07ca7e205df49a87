"""The HDD model's tables (kernels/drive/hdd_tables.py): every parameter named once, filled and
read by name, and code outside kernels/ naming parameters, not positions."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from blocklab.kernels.drive import hdd as H
from blocklab.kernels.drive import hdd_tables as T

ROOT = Path(__file__).resolve().parents[1]


def _indices(prefix: str) -> dict[str, int]:
    return {k: v for k, v in vars(T).items() if re.fullmatch(prefix + r"[A-Z0-9_]+", k)
            and k not in (prefix + "N",)}


def test_every_field_has_one_index():
    """The kernel's P_*, Z_* and S_* indices are the fields' positions: each field has exactly
    one, and none is left over."""
    for prefix, names, n in (("P_", T.NAMES, T.P_N), ("Z_", T.ZONE_COLUMNS, T.Z_N),
                             ("S_", T.STATE, T.S_SEGS)):
        idx = _indices(prefix)
        if prefix == "S_":
            idx.pop("S_SEGS")  # where the segments start: after the named fields
            idx.pop("S_WRING")  # and the write ring after the segments
        assert sorted(idx.values()) == list(range(n)) == list(range(len(names))), prefix
    assert T.S_WRING == T.S_SEGS + 3 * T.SEG_MAX
    assert T.S_N == T.S_WRING + T.SEG_MAX
    assert len(set(T.NAMES)) == T.P_N


_value = st.floats(-1e6, 1e6, allow_nan=False)


@given(st.lists(_value, min_size=T.P_N, max_size=T.P_N))
def test_pack_unpack_round_trip(values):
    p = np.array(values)
    assert np.array_equal(H.pack(**H.unpack(p)), p)
    fields = dict(zip(T.NAMES, values, strict=True))
    q = H.pack(**fields)
    assert H.unpack(q) == fields


def test_pack_by_name():
    """Kinds by name or code, flags as bools, defaults where stated, and a clear error for a
    missing, unknown or misspelt field."""
    base = {f.name: 1.0 for f in T.PARAMS if f.default is None}
    p = H.pack(**(base | {"sparing": "to_end", "read_ahead": "dec", "cache_on": False}))
    got = H.unpack(p)
    assert got["sparing"] == T.CHOICES["sparing"].index("to_end")
    assert got["read_ahead"] == 4  # DiskSim's "Buffer continuous read" 4: the DEC scheme
    assert got["cache_on"] == 0.0
    assert got["hpl_a_ms"] == 0.0  # a default
    with pytest.raises(ValueError, match="missing .*rot_ms"):
        H.pack(**{k: v for k, v in base.items() if k != "rot_ms"})
    with pytest.raises(ValueError, match="unknown .*rot_mss"):
        H.pack(**base, rot_mss=1.0)
    with pytest.raises(ValueError, match="sparing"):
        H.pack(**(base | {"sparing": "sideways"}))


def test_zone_table_by_name():
    """Two zones, one with slips: the table's columns and the layout parameters."""
    zones = [T.Zone(first_cyl=0, last_cyl=9, sectors_per_track=100, lbns=3000, track_skew=5,
                    cylinder_skew=9, offset=0, empty_front=0, range_sectors=None,
                    range_lbns=None, front=0, slips=[]),
             T.Zone(first_cyl=10, last_cyl=19, sectors_per_track=80, lbns=2398, track_skew=4,
                    cylinder_skew=7, offset=3, empty_front=0, range_sectors=240,
                    range_lbns=239, front=0, slips=[17, 500])]
    table, layout = H.zone_table(zones)
    assert layout["zones"] == 2 and layout["blocks"] == 5398
    z1 = table[T.Z_N:2 * T.Z_N]
    assert z1[T.Z_FIRST_LBN] == 3000 and z1[T.Z_NSLIP] == 2
    s0 = int(z1[T.Z_SLIP0])
    assert list(table[s0:s0 + 2]) == [17, 500]
    assert table[T.Z_RANGE] > 5398  # one range: larger than any zone
    buckets = table[layout["buckets_at"]:]
    assert len(buckets) == layout["buckets"]
    for i, zone in enumerate(buckets):  # the zone of each bucket's first block
        assert zone == (0 if (i << layout["bucket_shift"]) < 3000 else 1)


def test_pipeline_names_fields_not_positions():
    """No module outside kernels/ indexes the HDD tables by position (``H.P_*``, ``H.Z_*``,
    ``H.S_*``), except the engine's row length ``H.P_N``."""
    found = {}
    for folder in ("pipeline", "tools"):
        for f in (ROOT / folder).rglob("*.py"):
            used = set(re.findall(r"\bH\.([PZS]_[A-Z0-9_]+)", f.read_text())) - {"P_N"}
            if used:
                found[str(f.relative_to(ROOT))] = sorted(used)
    assert not found
