"""One segment of a parallel replay (pipeline/parallel.py), as a Dask worker runs it: the
trace's requests from the segment's warm-up to the end of its tail replayed, the kept ones
written as Parquet parts, and the overlaps, bins and end state returned to the client."""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from blocklab.traces.errors import BlocklabError
from blocklab.traces.store import open_trace

from . import driver as DR
from . import replay as RP
from .model.array import build_array
from .model.config import load_array, settings_for

#: The fewest trace rows a segment reads at a time.
_MIN_BATCH = 4096


@dataclasses.dataclass(frozen=True)
class Segment:
    """What a worker needs for one segment (plain data: it travels to the worker). Request
    indices count the trace's read and write requests from 0."""

    index: int
    trace: str
    array: str
    speed: float
    wrap: bool
    drive_ops: bool
    first: int  # first request replayed (warm-up start)
    keep: int  # first request kept
    keep_end: int  # one past the last request kept
    end: int  # one past the last request replayed
    own_ns: tuple[int, int]  # drive operations started in [a, b) are this segment's
    row_group: int  # the row group holding request ``first``
    group_row: int  # trace row of that group's first row
    group_request: int  # request index of that group's first read/write request
    folder: str  # the run folder's temporary: parts go into a .seg-* folder inside it
    rows: int = 0  # the client's trace's rows (0: not checked): the worker's file must match


def run_segment(seg: Segment) -> dict[str, Any]:
    """``replay_segment``; an error any worker would meet again (a full disk, a bad trace)
    comes back as ``{"index", "error"}`` for one line: raised, Dask ran it again, the logs
    printing its traceback each time. A worker that dies still runs again elsewhere."""
    import pyarrow as pa

    try:
        return replay_segment(seg)
    except BlocklabError as e:
        return {"index": seg.index, "error": ("text", str(e))}
    except OSError as e:
        if e.errno is not None:  # the machine's: the run folder's disk, mostly
            return {"index": seg.index, "error": ("os", e.errno, e.strerror or str(e))}
        return {"index": seg.index, "error": ("text", _trace_error(seg, e))}
    except (pa.ArrowException, ValueError) as e:  # the trace's (cut short meanwhile, say)
        return {"index": seg.index, "error": ("text", _trace_error(seg, e))}


def _trace_error(seg: Segment, e: Exception) -> str:
    from .cluster import first_line

    return f"{seg.trace}: {first_line(e)}"


def replay_segment(seg: Segment) -> dict[str, Any]:
    """Replay one segment; write its kept requests (and its own drive operations) into a
    part folder; return the overlaps' results, its bins and its end state."""
    cfg = load_array(seg.array)
    arr = build_array(cfg)
    pf, _meta = open_trace(seg.trace)
    if seg.rows and pf.metadata.num_rows != seg.rows:
        import socket

        raise BlocklabError(f"{seg.trace}: on the worker at {socket.gethostname()} it has "
                            f"{pf.metadata.num_rows:,} rows, on the client {seg.rows:,}: the "
                            "workers must see the client's trace at the same path")
    opts = settings_for(cfg, record=seg.drive_ops)
    n = seg.end - seg.first
    drv = DR.Engine(arr, opts, n)
    # the worker's process id in the name: a test kills the worker that writes it
    part = Path(seg.folder) / f".seg-{seg.index:05d}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    part.mkdir(mode=0o700)
    # Parquet, as the serial replay writes it: the worker encodes its own rows, and the client
    # joins the parts without decoding them (traces/parquet_join.py)
    w = RP._RunWriter(part, seg.drive_ops)
    head_n = seg.keep - seg.first  # warm-up: the overlap with the previous segment starts here
    # results of the requests replayed (index - first): start, done, hit, for the two overlaps
    # only: [first, keep + margin_before) and [keep_end - margin_after, end)
    before = min(seg.keep + (seg.keep - seg.first), seg.keep_end, seg.end) - seg.first
    after = max(seg.keep_end - (seg.end - seg.keep_end), seg.keep) - seg.first
    head = np.zeros((3, before), np.int64)
    tail = np.zeros((3, n - after), np.int64)
    got = 0

    def sink(c: dict[str, np.ndarray]) -> None:
        nonlocal got
        k = len(c["done"])
        lo, hi = got, got + k
        for a, b, arr_, off in ((0, before, head, 0), (after, n, tail, after)):
            x, y = max(lo, a), min(hi, b)
            if x < y:
                arr_[:, x - off:y - off] = (c["start"][x - lo:y - lo], c["done"][x - lo:y - lo],
                                            c["hit"][x - lo:y - lo])
        x, y = max(lo, head_n), min(hi, seg.keep_end - seg.first)
        if x < y:
            kept = {name: v[x - lo:y - lo] for name, v in c.items()}
            w.requests(kept)
        got = hi

    def records(rc: np.ndarray) -> None:
        t = rc["start"]
        mine = rc[(t >= seg.own_ns[0]) & (t < seg.own_ns[1])]
        if len(mine):
            w.records(mine)

    started = time.perf_counter()
    cpu = time.thread_time()
    try:
        drv.run(_segment_chunks(pf, seg, arr), sink, records if seg.drive_ops else None)
    finally:
        w.close()
    bins = drv.bins()
    return {"index": seg.index, "part": str(part), "head": head, "tail": tail,
            "bins": bins, "cache": drv.cache_state(),
            "seconds": time.perf_counter() - started, "cpu_s": time.thread_time() - cpu,
            "replayed": n, "kept": seg.keep_end - seg.keep,
            "bytes": sum(f.stat().st_size for f in part.iterdir()),
            "host": os.uname().nodename}


def load_kernels(array: str, drive_ops: bool) -> float:
    """Load the kernels a segment runs into this process, from the Numba cache the client
    warmed, by replaying a few requests in memory on the array; returns the seconds it took.
    (Run on every worker before the segments start.)"""
    t0 = time.perf_counter()
    cfg = load_array(array)
    arr = build_array(cfg)
    i = np.arange(8, dtype=np.int64)
    DR.run_engine(arr, i * 1_000_000, i * 8 % max(arr.capacity - 8, 1), np.full(8, 8, np.int64),
                  i % 2, drive_ops=drive_ops, settings=settings_for(cfg, record=drive_ops))
    return time.perf_counter() - t0


def _segment_chunks(pf: pq.ParquetFile, seg: Segment, arr: Any) -> Any:
    """The requests ``[seg.first, seg.end)`` as engine chunks, read from the row group that
    holds the first."""
    req = seg.group_request
    groups = range(seg.row_group, pf.metadata.num_row_groups)
    # batches no longer than the rows the segment reads from its group's start (for a short
    # segment, a whole batch of 131,072 rows decoded and converted cost 9 ms of a one-request
    # segment's 15, measured; its length changes no result)
    batch = min(DR.BATCH_ROWS, max(_MIN_BATCH, seg.end - seg.group_request))
    for c in RP._chunks(pf, Path(seg.trace), arr, seg.speed, seg.wrap, 0, 0, None,
                        row_groups=groups, row0=seg.group_row, batch_rows=batch):
        k = len(c["arrive"])
        a, b = max(seg.first - req, 0), min(seg.end - req, k)
        req += k
        if a < b:
            yield {name: v[a:b] for name, v in c.items()}
        if req >= seg.end:
            return


