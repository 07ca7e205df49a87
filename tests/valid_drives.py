"""The validated drives of DiskSim 4.0's ``valid/`` folder: where their parameter files and
traces are (four in the shared folder, the other seven in tests/data/disksim/valid, see its
README), for the tests."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

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


def read_trace(path: Path) -> tuple[np.ndarray, ...]:
    """A DiskSim validation trace (plain or .xz) as columns: (lbn, blocks, write 0/1, measured
    service ms, idle ms before the next request)."""
    import lzma

    if path.suffix == ".xz":
        with lzma.open(path, "rt") as f:
            text = f.read()
    else:
        text = path.read_text()
    rows = [line.split() for line in text.splitlines()]
    lbn = np.array([int(r[2]) for r in rows], dtype=np.int64)
    n = np.array([int(r[3]) for r in rows], dtype=np.int64)
    w = np.array([r[0] == "W" for r in rows], dtype=np.int64)
    real = np.array([float(r[4]) for r in rows]) / 1000
    idle = np.array([float(r[5]) for r in rows]) / 1000
    return lbn, n, w, real, idle
