"""Compile the replay kernels into Numba's on-disk cache (or load them from it) with a replay of
a few requests: ``python -m blocklab.pipeline.warm``.

``make test`` starts this in the background as the suite starts (tests/conftest.py runs the
files that replay last), so the engine, the largest kernel, compiles on the second core while
the ingest, capture and generator tests run on the first: on a fresh clone of a 2-core machine
the compile no longer adds to the suite's time. The kernels compiled are the very ones the
replays use (Numba compiles a kernel per argument types, and these are the engine's own)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from blocklab.kernels.drive import hdd as H
from blocklab.pipeline.config import parse_array
from blocklab.pipeline.replay import build_array, run_engine


def main() -> int:
    cfg = parse_array({"group": [{"name": "g", "layout": "raid5", "width": 4,
                                  "drive": "atlas10k"}]}, Path("warm.toml"))
    arr = build_array(cfg)
    n = 8
    lba = np.arange(n, dtype=np.int64) * 64
    nsec = np.full(n, 8, np.int64)
    w = np.arange(n, dtype=np.int64) % 2
    run_engine(arr, np.arange(n, dtype=np.int64) * 1000, lba, nsec, w)
    run_engine(arr, np.zeros(n, np.int64), lba, nsec, w, closed=True, outstanding=2)
    m = arr.models
    out = np.zeros(n)
    H.replay_closed(m.hp[:H.P_N], m.hz[m.hz_off[0]:m.hz_off[1]],
                    m.hcd[m.hc_off[0]:m.hc_off[1]], m.hct[m.hc_off[0]:m.hc_off[1]],
                    H.new_state(), lba, nsec, w, np.zeros(n), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
