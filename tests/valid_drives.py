"""The validated drives of DiskSim 4.0's ``valid/`` folder: where their parameter files and
traces are (four in the shared folder, the other seven in tests/data/disksim/valid, see its
README), for the tests."""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent / "data" / "disksim" / "valid"
SHARED = Path(os.environ.get("BLOCKLAB_SHARED", HERE.parents[4] / "shared")).resolve()

# name: sparing scheme (of its .model)
VALID = {"atlas10k": 9, "atlas_III": 7, "barracuda": 8, "cheetah4LP": 8, "cheetah9LP": 9,
         "dec_rz26": 3, "hp_c2247a": 1, "hp_c2490a": 1, "hp_c3323a": 1, "ibm18es": 7,
         "st41601n": 2}
IN_SHARED = ("atlas10k", "barracuda", "cheetah9LP", "hp_c2247a")


def valid_path(name: str) -> Path:
    """The drive's ``.parv``."""
    if name in IN_SHARED:
        return SHARED / "validation" / "disksim" / f"{name}.parv"
    return HERE / f"{name}.parv"


def trace_path(name: str) -> Path:
    if name in IN_SHARED:
        return SHARED / "validation" / "disksim" / f"{name}.trace"
    return HERE / f"{name}.trace.xz"
