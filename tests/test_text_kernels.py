"""The small kernels of the text readers against plain Python: counting a chunk's lines
(kernels/bytescan.count_lines, for io.text_blocks) and the last named row of each process in a
chunk (kernels/pairing.last_named, for the names blkparse and tracefs lines carry)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from blocklab.kernels import pairing as K
from blocklab.kernels.bytescan import count_lines


@given(st.binary(max_size=5000))
def test_count_lines_is_bytes_count(data):
    assert count_lines(np.frombuffer(data, dtype=np.uint8)) == data.count(b"\n")


def _reference(pids: np.ndarray, named: np.ndarray) -> dict[int, int]:
    """Each pid's last row among the named rows with a pid above 0."""
    last: dict[int, int] = {}
    for k, (pid, has) in enumerate(zip(pids.tolist(), named.tolist(), strict=True)):
        if has and pid > 0:
            last[pid] = k
    return last


@given(st.lists(st.tuples(st.integers(-3, 40), st.booleans()), max_size=300),
       st.sampled_from([0, 1 << 20, 1 << 40]))
def test_last_named_is_each_pids_last_named_row(rows, offset):
    n = len(rows)
    events = np.zeros((n, K.TE_NCOLS), dtype=np.int64)
    comms = np.full((n, 2), -1, dtype=np.int64)
    pids = np.array([p + (offset if p > 0 else 0) for p, _ in rows], dtype=np.int64)
    named = np.array([h for _, h in rows], dtype=bool)
    events[:, K.TE_PID] = pids
    comms[named, 0] = 0
    comms[named, 1] = 1
    table = np.empty(1 << max(4, (2 * n - 1).bit_length()), dtype=np.int64)
    out_pid = np.empty(n, dtype=np.int64)
    out_idx = np.empty(n, dtype=np.int64)
    m = K.last_named(events, comms, table, out_pid, out_idx)
    got = dict(zip(out_pid[:m].tolist(), out_idx[:m].tolist(), strict=True))
    assert len(got) == m  # each pid once
    assert got == _reference(pids, named)
