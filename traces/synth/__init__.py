"""Synthetic workload generators (SPC-1, IOR, Iometer, Orion) -> record batches of the trace
schema, so that everything downstream of ingest works on them unchanged.

Each generator module validates its options into a plan (a frozen dataclass whose ``batches``
method yields Arrow record batches in chunks of bounded memory, and whose ``extra`` is the
metadata recorded in the trace file); the hot loops are Numba kernels in
``blocklab.kernels.synth``. ``blocklab.pipeline.synth`` writes the file.

Closed-loop generators (IOR, Iometer, Orion) fill the closed-loop columns of the schema:
``stream``, ``stream_seq``, ``outstanding``, ``think_ns`` (0) and ``phase``, with ``time_ns`` 0.
SPC-1 is open loop: arrival times, and the closed-loop columns null.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa

from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import SECTOR_BYTES
from blocklab.traces.store import columns_to_batch
from blocklab.traces.units import parse_bytes

SECTOR = SECTOR_BYTES  # traces/schema.py
#: Rows per record batch a generator yields: large enough to amortise the kernel call and the
#: Arrow conversion, small enough that memory stays bounded (about 80 MB of columns).
CHUNK_ROWS = 1 << 20

def parse_size(text: str | int, option: str) -> int:
    """Bytes from ``4096``, ``4k``, ``1MiB``, ``100GB``, ``2048s`` (traces/units.py: one-letter
    suffixes binary, as IOR's string_to_bytes (src/option.c) and fio read them; the sign is
    kept, so that callers can report negative sizes in their own words)."""
    if isinstance(text, int):
        return text
    try:
        return parse_bytes(text)
    except ValueError as e:
        raise BlocklabError(f"{option}: {e}, found {text!r}") from None


def parse_count(text: str | int, option: str) -> int:
    """A count as IOR reads its counts (``-s``: string_to_bytes in src/option.c): digits with
    an optional k, m, g, t or p, binary (``-s 1k`` is 1,024 segments). Other units (``KiB``,
    ``KB``) are refused here, where IOR would read the first letter and drop the rest."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    m = re.fullmatch(r"\s*([+-]?\d+)\s*([kmgtp]?)\s*", str(text), re.IGNORECASE)
    if not m:
        raise BlocklabError(f"{option}: expected a whole count such as 16 or 4k (k = 1024, as "
                            f"IOR reads it), found {text!r}")
    return int(m[1]) << (10 * " kmgtp".index(m[2].lower() or " "))


def seed_state(seed: int, n: int = 1) -> np.ndarray:
    """SplitMix64 states for ``n`` generators: seed, seed + 1, ... (unsigned 64-bit)."""
    if seed < 0:
        raise BlocklabError(f"--seed: must be a whole number >= 0, found {seed}")
    return np.array([(seed + i) & ((1 << 64) - 1) for i in range(n)], dtype=np.uint64)


def new_columns(n: int, closed: bool) -> dict[str, np.ndarray]:
    """Fresh kernel output arrays for one chunk (fresh each time: Arrow may keep a view of
    them until the writer thread has written the batch)."""
    names = ["t_ns", "dev", "sector", "nbytes", "op", "stream"]
    if closed:
        names += ["seq", "phase", "outst"]
    return {k: np.empty(n, dtype=np.int64) for k in names}


def to_batch(cols: dict[str, np.ndarray], n: int) -> pa.RecordBatch:
    """The first ``n`` rows of kernel output as a record batch of the trace schema."""
    out = {
        "time_ns": cols["t_ns"][:n],
        "device": cols["dev"][:n],
        "sector": cols["sector"][:n],
        "size_bytes": cols["nbytes"][:n],
        "op": cols["op"][:n],
        "flags": np.zeros(n, dtype=np.uint16),
        "stream": cols["stream"][:n],
    }
    if "seq" in cols:
        out["stream_seq"] = cols["seq"][:n]
        out["phase"] = cols["phase"][:n]
        out["outstanding"] = cols["outst"][:n]
        out["think_ns"] = np.zeros(n, dtype=np.int64)
    return columns_to_batch(out)


#: A generator's kernel call: fill(columns, cap) -> (rows written, 1 when done).
Fill = Callable[[dict[str, np.ndarray], int], tuple[int, int]]


def chunks(fill: Fill, closed: bool, chunk_rows: int) -> Iterator[pa.RecordBatch]:
    """Call ``fill(cols, cap) -> (rows, done)`` until done, yielding each chunk as a batch."""
    while True:
        cols = new_columns(chunk_rows, closed)
        n, done = fill(cols, chunk_rows)
        if n:
            yield to_batch(cols, int(n))
        if done:
            return


def kernel_rate(fill: Fill, closed: bool, chunk_rows: int = CHUNK_ROWS) -> tuple[int, float]:
    """Run a generator's kernel to the end into one reused set of columns (no Arrow, no file):
    rows generated, and seconds taken. For ``make bench``."""
    cols = new_columns(chunk_rows, closed)
    rows = 0
    started = time.perf_counter()
    while True:
        n, done = fill(cols, chunk_rows)
        rows += int(n)
        if done:
            return rows, time.perf_counter() - started
