"""The engine's front door (kernels/engine/door.py, tables.py; docs/engine.md): pipeline code
reaches the engine through a handful of names and builds or reads its tables by field name,
never by a kernel column index; the structured dtypes sit on the columns the kernels index."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from blocklab.kernels.engine import Settings, tables
from blocklab.pipeline.model.config import ControllerConfig, parse_array, settings_for
from blocklab.pipeline.replay import build_array

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = sorted(p for p in (ROOT / "pipeline").rglob("*.py"))
#: What pipeline code may name of the engine: the front door, the dtypes of the tables it
#: builds or reads, the codes by name, the drive models' tuple, the ppm unit of a share and
#: the lost bit of a retired request's hit.
ALLOWED = {"Engine", "Settings", "Streams", "tables", "LUN", "EXTENT", "GEOMETRY",
           "member_map", "FAILURE", "MISSING", "TASK", "PIECE", "RECORD", "EVENT",
           "TASK_KINDS", "SCHEDULERS", "DRIVE_MODELS", "Models", "PPM", "HIT_LOST"}


def _engine_names(path: Path) -> set[str]:
    """The engine names a module uses: names imported from blocklab.kernels.engine[.x], and
    attributes taken of a module alias bound to one."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "blocklab.kernels.engine"):
            for a in node.names:
                names.add(a.name)
                if a.name == "tables" or node.module != "blocklab.kernels.engine":
                    aliases.add(a.asname or a.name)
        elif isinstance(node, ast.ImportFrom) and node.module == "blocklab.kernels":
            for a in node.names:
                if a.name == "engine":
                    aliases.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("blocklab.kernels.engine"):
                    aliases.add(a.asname or a.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in aliases:
            names.add(node.attr)
    return names


@pytest.mark.parametrize("path", PIPELINE, ids=lambda p: str(p.relative_to(ROOT)))
def test_pipeline_names_only_the_front_door(path):
    used = _engine_names(path)
    assert used <= ALLOWED, f"{path.relative_to(ROOT)} names {sorted(used - ALLOWED)}"


def test_the_check_sees_a_column_constant(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("from blocklab.kernels.engine import tables as T\nx = T.RQ_LBA\n"
                 "from blocklab.kernels import engine as E\ny = E.S_TOTAL\n")
    assert {"RQ_LBA", "S_TOTAL"} <= _engine_names(f)


def test_dtypes_sit_on_the_kernel_columns():
    """A structured row and its int64 kernel form are the same memory, field by column."""
    tk = np.zeros(3, tables.TASK)
    tk["urows"] = [5, 6, 7]
    tk["drive"] = -1
    k = tables.as_kernel(tk)
    assert k.shape == (3, tables.TK_COLS)
    assert k[:, tables.TK_UROWS].tolist() == [5, 6, 7]
    assert (k[:, tables.TK_DRIVE] == -1).all()
    mp = np.zeros(2, tables.member_map(3))
    mp["members"]["drive"][1] = [4, 5, 6]
    mp["missing"][0, 0] = 9
    km = tables.as_kernel(mp)
    assert km[1, tables.MP_MEM:tables.MP_MEM + 6:2].tolist() == [4, 5, 6]
    assert km[0, tables.MP_MISS] == 9
    back = tables.named(km, tables.member_map(3))
    assert back["members"]["drive"][1].tolist() == [4, 5, 6]
    for name, dt, width in (("RECORD", tables.RECORD, tables.RC_COLS),
                            ("EVENT", tables.EVENT, tables.EV_COLS),
                            ("PIECE", tables.PIECE, tables.PC_COLS),
                            ("LUN", tables.LUN, tables.U_COLS),
                            ("GEOMETRY", tables.GEOMETRY, tables.G_COLS)):
        assert dt.itemsize == 8 * width, name


def test_event_codes_follow_the_schema_names():
    from blocklab.traces.schema import EVENT_NAMES

    for code, name in enumerate(EVENT_NAMES):
        assert getattr(tables, f"X_{name.upper()}") == code


def test_controller_defaults_are_the_engines():
    """Each default is stated once: an empty [controller] gives the engine's own defaults."""
    cfg = parse_array({"group": [{"name": "g", "layout": "raid5", "width": 4,
                                  "drive": "atlas10k", "stripe_unit": "64KiB"}],
                       "controller": {"cache": "64MiB"}}, ROOT / "x.toml")
    got = settings_for(cfg)
    base = Settings()
    for f in ("line_sectors", "flush_start", "flush_stop", "flush_age_ns", "destage_depth",
              "write_back", "ctrl_ns"):
        assert getattr(got, f) == getattr(base, f), f
    assert got.cache_lines == (64 << 20) // (base.line_sectors * 512)
    assert ControllerConfig().flush_age_s * 1e9 == base.flush_age_ns
    # the run's own fields pass through
    assert dataclasses.replace(got, closed=True) == settings_for(cfg, closed=True)


def test_built_array_tables_are_named():
    cfg = parse_array({"group": [{"name": "g", "layout": "raid6", "width": 6,
                                  "drive": "atlas10k", "stripe_unit": "64KiB"}]},
                      ROOT / "x.toml")
    arr = build_array(cfg)
    assert arr.GR["kind"].tolist() == [cfg.groups[0].kind]
    assert arr.GR["width"].tolist() == [6]
    assert arr.MP["members"]["drive"][0].tolist() == list(range(6))
    assert arr.LN["cap"][0] == arr.capacity


def test_the_kernels_sector_is_the_schemas():
    from blocklab.kernels.units import SECTOR
    from blocklab.traces.schema import SECTOR_BYTES

    assert SECTOR == tables.SECTOR == SECTOR_BYTES


def test_ssd_parameters_by_name():
    """The SSD kernel's parameters are filled by name: each catalog figure lands on the field
    the kernel reads it from, and a missing or unknown field is refused."""
    from blocklab.kernels.drive import ssd as SS
    from blocklab.pipeline.model.catalog import ssd_params

    v = {"channels": 8, "dies": 4, "planes": 2, "page_bytes": 16384, "read_us": 50,
         "program_us": 500, "erase_ms": 3, "pages_per_block": 256, "channel_mb_s": 400,
         "interface_mb_s": 600, "command_us": 10, "write_command_us": 12,
         "overprovisioning": 0.28, "buffer_pages": 64}
    p = ssd_params(v, fresh=True)
    assert p[SS.P_CH] == 8 and p[SS.P_PLANES] == 2 and p[SS.P_PAGE_SECT] == 32
    assert p[SS.P_TPROG_NS] == 500_000 and p[SS.P_TBERS_NS] == 3e6
    # 12 us a write at the rated write amplification (1 + 0.28) / (2 x 0.28): 5.25 us fresh
    assert p[SS.P_CH_PS] == 2500 and p[SS.P_CTRL_W_NS] == 5_250 and p[SS.P_WA] == 1.0
    assert p[SS.P_WPATH_PS] == 0  # no write path figure: no limit
    with pytest.raises(ValueError, match="missing"):
        SS.pack(channels=1)
    with pytest.raises(ValueError, match="unknown"):
        SS.pack(**{n: 1 for n in SS.PARAMS}, rpm=7200)



@pytest.mark.replays
@pytest.mark.parametrize("case", ["past the end", "before the start", "negative", "to the end"])
def test_a_request_outside_the_array_is_refused_not_read_past_the_tables(case):
    """run_engine with a request ending past the array's last sector (or starting before its
    first, or of a negative length) raised nothing and read past the layout's tables: a
    segfault. The request is named; one that ends exactly at the last sector replays."""
    from blocklab.pipeline.replay import run_engine

    arr = build_array(parse_array({"group": [{"name": "g", "layout": "raid5", "width": 4,
                                              "drive": "atlas10k", "stripe_unit": "64KiB"}]},
                                  ROOT / "x.toml"))
    end = arr.capacity
    lba, nsec = {"past the end": (end - 4, 8), "before the start": (-8, 8),
                 "negative": (8, -8), "to the end": (end - 8, 8)}[case]
    args = (arr, np.arange(3, dtype=np.int64) * 1000, np.array([0, 64, lba], np.int64),
            np.array([8, 8, nsec], np.int64), np.zeros(3, np.int64))
    if case == "to the end":
        got = run_engine(*args)
        assert (got["done"] > got["arrive"]).all()
        return
    with pytest.raises(ValueError, match=rf"^request 2: sectors {lba} \+ {nsec} are not "
                                         rf"within the array's {end} sectors$"):
        run_engine(*args)
