"""The pipeline's side of the engine (``kernels/engine``, whose front door is ``Engine``):
closed-loop streams from a pass over a trace, and ``run_engine``, which replays request arrays
held in memory (tests, benchmarks). The replays (pipeline/replay.py, pipeline/parallel.py) run
``Engine`` over a trace's batches."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from blocklab.kernels.engine import Engine, Settings, Streams

from .model.array import ArrayModel, Plan
from .model.config import settings_for

__all__ = ["BATCH_ROWS", "Engine", "Settings", "Streams", "closed_streams", "dense_ids",
           "repeated", "run_engine", "settings_for"]

#: Rows read from the trace per batch.
BATCH_ROWS = 1 << 17
#: A batch of requests for Engine.run (kernels/engine/door.py LOADED's columns).
Chunk = dict[str, np.ndarray]


def _array_chunks(cols: dict[str, np.ndarray], size: int) -> Iterator[Chunk]:
    n = len(cols["arrive"])
    for a in range(0, n, size):
        yield {k: v[a:a + size] for k, v in cols.items()}


def repeated(chunks_of_pass: Callable[[int], Iterator[Chunk]], passes: int) -> Iterator[Chunk]:
    """The chunks of passes 0, 1, ... ``passes - 1`` of a trace, one pass after the other
    (``Settings.max_passes``): ``chunks_of_pass(k)`` streams the trace again for pass k, so
    memory does not grow with the passes; the engine reads only the passes it runs."""
    for k in range(passes):
        yield from chunks_of_pass(k)


def run_engine(arr: ArrayModel, arrive_ns: np.ndarray, lba: np.ndarray, nsec: np.ndarray,
               is_write: np.ndarray, closed: bool = False, outstanding: Any = 1,
               think_ns: Any = 0, drive_ops: bool = False, stream: np.ndarray | None = None,
               phase: np.ndarray | None = None, chunk: int = BATCH_ROWS,
               tasks: Plan | None = None, settings: Settings | None = None,
               **engine: Any) -> dict[str, Any]:
    """Replay in-memory request arrays (tests, benchmarks) under ``settings`` (default:
    ``Settings()``), with any Settings field overridden by ``engine`` (ctrl_ns, path_ps,
    cache_lines, max_passes, ...). Returns per-request outputs in request order (with
    repetition, pass k's request i is row k x n + i), per-drive totals and bins, the cache's
    end state, the passes run and (``drive_ops``) every operation."""
    n = len(arrive_ns)
    stream = np.zeros(n, np.int64) if stream is None else np.asarray(stream, np.int64)
    phase = np.zeros(n, np.int64) if phase is None else np.asarray(phase, np.int64)
    cols = {"row": np.arange(n, dtype=np.int64), "arrive": np.asarray(arrive_ns, np.int64),
            "lba": np.asarray(lba, np.int64), "nsec": np.asarray(nsec, np.int64),
            "write": np.asarray(is_write, np.int64), "sid": stream,
            "think": np.broadcast_to(np.asarray(think_ns, np.int64), (n,)).copy(),
            "outst": np.broadcast_to(np.asarray(outstanding, np.int64), (n,)).copy()}
    streams = None
    if closed:
        streams = closed_streams(stream, phase, cols["outst"])
        cols["stream"] = np.searchsorted(streams.ids, stream).astype(np.int64)
        cols["phase"] = np.searchsorted(streams.phase_values, phase).astype(np.int64)
    else:
        cols["stream"] = stream
        cols["phase"] = phase
    opts = dataclasses.replace(settings or Settings(), closed=closed, record=drive_ops, **engine)
    drv = Engine(arr, opts, n, streams, tasks)
    # requests retire in order: each batch fills the next rows of the outputs (which grow
    # when a repeated trace outruns them)
    res: dict[str, Any] = {k: np.zeros(n, np.int64) for k in ("arrive", "start", "done", "hit")}
    filled = 0
    recs: list[np.ndarray] = []

    def sink(c: dict[str, np.ndarray]) -> None:
        nonlocal filled
        k = len(c["done"])
        for name in ("arrive", "start", "done", "hit"):
            if filled + k > len(res[name]):
                grown = np.zeros(max(filled + k, 2 * len(res[name])), np.int64)
                grown[:filled] = res[name][:filled]
                res[name] = grown
            res[name][filled:filled + k] = c[name]
        filled += k

    def pass_chunks(k: int) -> Iterator[Chunk]:
        return _array_chunks({**cols, "row": cols["row"] + k * n}, chunk)

    drv.run(repeated(pass_chunks, opts.max_passes if closed else 1), sink, recs.append)
    passes, tasks_left = drv.passes() if closed else (1, 0)
    assert filled == n * passes
    for name in ("arrive", "start", "done", "hit"):
        res[name] = res[name][:filled]
    res["passes"] = passes
    res["tasks_at_end"] = tasks_left
    res.update(drv.drive_totals())
    res["bins"] = drv.bins()
    res["cache"] = drv.cache_state()
    res["events"] = drv.events()
    res["mp"] = drv.member_maps()
    if drive_ops:
        rc = np.concatenate(recs) if recs else np.zeros(0, Engine.RECORD)
        for name in rc.dtype.names or ():
            res[f"op_{name}"] = rc[name]
    return res


def dense_ids(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct values of ``x`` ascending, each element's index among them): what
    ``np.unique(x, return_inverse=True)`` gives, by counting instead of sorting when the values
    span a range not much larger than ``x`` (stream and phase numbers do; sorting half a million
    equal stream ids cost more than a tenth of a closed-loop replay)."""
    x = np.asarray(x, np.int64)
    if len(x) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lo = int(x.min())
    span = int(x.max()) - lo + 1
    if span > 4 * len(x) + 4096:
        ids, inv = np.unique(x, return_inverse=True)
        return ids.astype(np.int64), inv.reshape(-1).astype(np.int64)
    present = np.bincount(x - lo, minlength=span) > 0
    rank = np.cumsum(present, dtype=np.int64) - 1
    return np.flatnonzero(present).astype(np.int64) + lo, rank[x - lo]


def closed_streams(stream: np.ndarray, phase: np.ndarray, outst: np.ndarray) -> Streams:
    """The streams and phases of a closed-loop trace (phases must not decrease)."""
    ids, si = dense_ids(stream)
    phases, pi = dense_ids(phase)
    ph_cnt = np.bincount(pi * len(ids) + si, minlength=len(ids) * len(phases))
    win = np.zeros(len(ids), dtype=np.int64)
    np.maximum.at(win, si, outst)
    return Streams(ids=ids, phase_values=phases, ph_cnt=ph_cnt.astype(np.int64),
                   max_window=win)
