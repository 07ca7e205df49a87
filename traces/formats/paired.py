"""From block-layer events to requests in arrival order, in bounded memory.

Event formats (blktrace binary, blkparse text, tracefs text) decode chunks of events; this module
feeds them to the pairing kernel, keeps completed requests until no request still in flight
arrived earlier, and releases them sorted by arrival. Requests idle for longer than
``STALE_NS`` (their completion was lost or lies beyond the trace) are released as INCOMPLETE.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from blocklab.kernels import pairing as K
from blocklab.kernels import pairing_release as KR
from blocklab.traces.schema import NULL

from .base import Chunk, ReadContext

#: A request with no event for this long (trace time) is taken as lost.
STALE_NS = 30_000_000_000
#: A request of a flush sequence (kernels/pairing.py) whose data completed this long ago
#: (trace time) and whose 0-byte end has not come is released, completed at its data step:
#: a device's cache flush takes milliseconds, a second is far beyond it, and a trace without
#: the ends (a synthetic one) holds back at most a second of rows.
SEQ_WAIT_NS = 1_000_000_000
#: Upper bound of requests in flight that the state may grow to.
MAX_IN_FLIGHT = 1 << 22


#: blkparse's name for a process the trace never named
UNNAMED = "(null)"


def named_rows(events: np.ndarray, spans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pids, rows): for each process of the event rows (K.TE_* columns) that carry a name
    (``spans[k, 0] >= 0``), its last such row, in order of first appearance from the end. A
    kernel (K.last_named) finds them: NumPy's mask, reversal and unique (a sort) were a tenth
    of a blkparse text ingest's main thread. Its set of pids starts small and grows when half
    full: one the size of the chunk was a memset and page faults per chunk, for the handful
    of processes a trace has (measured: 3.6 -> 1.4 ms a 16 MiB chunk)."""
    rows = len(events)
    pids = np.empty(rows, dtype=np.int64)
    idx = np.empty(rows, dtype=np.int64)
    size = 1 << 10
    while True:
        table = np.empty(size, dtype=np.int64)
        m = K.last_named(events, spans, table, pids, idx)
        if m >= 0:
            return pids[:m], idx[:m]
        size *= 4


class ProcessNames:
    """pid -> process name, as learned from the trace (notify records or [comm] fields)."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def update(self, pids: Iterable[int], names: Iterable[str]) -> None:
        for pid, name in zip(pids, names, strict=True):
            self.names[int(pid)] = name

    def learn(self, events: np.ndarray, spans: np.ndarray,
              name_at: Callable[[int, int], str]) -> None:
        """The last name each process has among the event rows (K.TE_* columns) that carry
        one: ``spans[k]`` its (start, end) in the chunk's bytes, start -1 for none, which
        ``name_at(start, end)`` turns into text (``named_rows`` then ``learn_rows``)."""
        self.learn_rows(named_rows(events, spans), spans, name_at)

    def learn_rows(self, rows: tuple[np.ndarray, np.ndarray], spans: np.ndarray,
                   name_at: Callable[[int, int], str]) -> None:
        """``learn`` of the rows ``named_rows`` found (a worker thread may find them)."""
        pids, idx = rows
        if len(pids):
            named = [(pid, name_at(int(spans[k, 0]), int(spans[k, 1])))
                     for pid, k in zip(pids.tolist(), idx.tolist(), strict=True)]
            # blkparse prints a process it has no name for as "(null)" (no notify record:
            # the C library's text for a null string); the binary records give it none
            named = [(pid, name) for pid, name in named if name != UNNAMED]
            self.update([pid for pid, _ in named], [name for _, name in named])

    def column(self, pids: np.ndarray) -> pa.Array | None:
        if not self.names or len(pids) == 0:
            return None
        uniq, inverse = np.unique(pids, return_inverse=True)
        dictionary = [self.names.get(int(p)) for p in uniq]
        if all(d is None for d in dictionary):
            return None
        # DictionaryArray needs unique non-null values: map through a value list
        values = sorted({d for d in dictionary if d is not None})
        pos = {v: i for i, v in enumerate(values)}
        code_of = np.array([pos[d] if d is not None else -1 for d in dictionary], dtype=np.int32)
        codes = code_of[inverse]
        mask = codes < 0
        indices = pa.array(np.where(mask, 0, codes), type=pa.int32(), mask=mask)
        return pa.DictionaryArray.from_arrays(indices, pa.array(values, type=pa.string()))


class Pairer:
    """Streaming state of the pairing kernel plus the reorder buffer.

    Completed requests wait in one flat buffer of R_* rows (``_rows``, the first ``_held``
    rows) until no request still in flight arrived before them: the pairing kernel writes new
    rows after the ones held, and ``sweep`` gathers the releasable ones into columns, sorted by
    arrival, and moves the rest to the front (kernels/pairing_release.py ``release_keys``
    and ``release_take``).
    Before, each chunk's rows were copied out of the kernel's buffer, joined with the ones
    held, split in two, sorted by NumPy's lexsort and transposed: a fifth of the main thread
    of a blktrace binary ingest (measured on the bench's 100 M records)."""

    def __init__(self, expect_queue: bool, ctx: ReadContext, capacity: int = 1 << 10):
        self.expect_queue = expect_queue
        self.ctx = ctx
        self.ent, self.keys, self.vals, self.devk, self.devv, self.free, self.st = (
            K.new_state(capacity)
        )
        # one row buffer, reused: fresh large buffers per chunk cost more in page faults
        # (the kernel zeroing new pages) than the pairing itself
        self._rows = np.empty(0, dtype=np.int64)
        self._held = 0
        self._scratch: tuple[np.ndarray, ...] = (np.empty(0, dtype=np.int64),) * 5

    def _room(self, rows: int) -> np.ndarray:
        """The row buffer, with room for ``rows`` more rows after the ones held."""
        need = (self._held + rows) * K.R_NCOLS
        if len(self._rows) < need:
            grown = np.empty(max(need, 2 * len(self._rows), (1 << 16) * K.R_NCOLS),
                             dtype=np.int64)
            grown[: self._held * K.R_NCOLS] = self._rows[: self._held * K.R_NCOLS]
            self._rows = grown
        return self._rows

    @property
    def capacity(self) -> int:
        return len(self.ent) // K.NF

    def _grow(self) -> None:
        """Double the entry pool and the hash table (requests in flight outgrew them)."""
        cap = self.capacity
        if cap * 2 > MAX_IN_FLIGHT:
            raise RuntimeError(f"more than {cap} requests in flight at once")
        ent, keys, vals, _dk, _dv, free, st = K.new_state(cap * 2)
        ent[: len(self.ent)] = self.ent
        live = self.ent[K.F_STAGE :: K.NF] != K.S_FREE
        free_idx = np.concatenate([np.nonzero(~live)[0], np.arange(cap, 2 * cap)])
        free[: len(free_idx)] = free_idx[::-1]
        st[:] = self.st
        st[K.ST_FREE_TOP] = len(free_idx)
        K.rehash(ent, keys, vals, st)
        self.ent, self.keys, self.vals, self.free, self.st = ent, keys, vals, free, st

    def feed(self, events: np.ndarray) -> None:
        """Pair a time-ordered event matrix (rows of K.TE_* columns)."""
        flat = np.ascontiguousarray(events).reshape(-1)
        start = 0
        n = len(events)
        while start < n:
            out = self._room(n - start)  # (an event completes one request at most)
            rows, used, status = K.pair_events(
                flat[start * K.TE_NCOLS :], n - start, self.ent, self.keys, self.vals,
                self.devk, self.devv, self.free, self.st, out[self._held * K.R_NCOLS :],
                self.expect_queue,
            )
            self._held += rows
            start += used
            if status == K.FULL:
                self._grow()
            elif status == K.TOO_MANY_DEVICES:
                raise RuntimeError(f"more than {K.MAX_DEVICES} devices in one trace")

    def sweep(self, final: bool = False) -> np.ndarray:
        """Evict stale requests; return the rows that can be released, in arrival order, as
        columns: an (R_NCOLS, rows) array, ``[K.R_TIME]`` the arrival times."""
        out = self._room(self.capacity)  # (every request in flight may be evicted)
        now = int(self.st[K.ST_NOW])
        rows, earliest, _dropped, ended = K.pair_sweep(
            self.ent, self.keys, self.vals, self.free, self.st,
            out[self._held * K.R_NCOLS :], now - STALE_NS, now - SEQ_WAIT_NS, final,
        )
        if rows:
            self._held += rows
            self.ctx.count("incomplete", rows - ended)
        if final:
            # 0-byte write completions that ended no request waiting for them: the ends of
            # flush sequences whose rows ended at their data step (no G or Q in the trace)
            self.ctx.count("flush_ends", int(self.st[K.ST_ENDS]))
            self.st[K.ST_ENDS] = 0
        n = self._held
        everything = final or earliest == -1  # (nothing in flight: every row goes)
        if len(self._scratch[0]) < n:
            size = max(n, 1 << 16)
            # idx, key, tcol, scol a row each; slots four (sequence numbers span the rows
            # released and those still in flight)
            self._scratch = (*(np.empty(size, dtype=np.int64) for _ in range(4)),
                             np.empty(4 * size, dtype=np.int64))
        idx, key, tcol, scol, slots = self._scratch
        m, how = KR.release_keys(out, n, earliest, everything, idx, key, tcol, scol, slots)
        order = release_order(how, m, key, tcol, scol)
        cols = np.empty((K.R_NCOLS, m), dtype=np.int64)
        self._held = KR.release_take(out, n, earliest, everything, idx, order, m,
                                    cols.reshape(-1))
        return cols


def release_order(how: int, m: int, key: np.ndarray, tcol: np.ndarray,
                  scol: np.ndarray) -> np.ndarray:
    """The order of the ``m`` rows ``KR.release_keys`` found, by (arrival, sequence number),
    as positions in its ``idx``: the order it placed (``how`` ORDER_DONE), or the sort of its
    packed keys, or of the two columns."""
    if how == KR.ORDER_DONE:
        return key[:m]
    if how == KR.ORDER_BY_KEY:
        return np.argsort(key[:m])  # the keys are distinct: any sort gives one order
    return np.lexsort((scol[:m], tcol[:m]))


def rows_to_chunk(c: np.ndarray, names: ProcessNames) -> Chunk:
    """Released pairing output ``c`` (``Pairer.sweep``'s columns) -> a schema Chunk."""
    n = c.shape[1]
    out = {
        "time_ns": c[K.R_TIME],
        "device": c[K.R_DEV].astype(np.uint32),
        "sector": c[K.R_SECTOR],
        "size_bytes": c[K.R_BYTES],
        "op": c[K.R_OP].astype(np.uint8),
        "flags": c[K.R_FLAGS].astype(np.uint16),
        "getrq_ns": c[K.R_GETRQ],
        "insert_ns": c[K.R_INSERT],
        "issue_ns": c[K.R_ISSUE],
        "complete_ns": c[K.R_COMPLETE],
        "latency_ns": c[K.R_LATENCY],
        "merges": c[K.R_MERGES].astype(np.int32),
        "pid": c[K.R_PID].astype(np.int32),
        "error": c[K.R_ERR].astype(np.int32),
    }
    pids = c[K.R_PID]
    comm = names.column(pids[pids != NULL]) if n else None
    if comm is not None and (pids == NULL).any():
        full = np.full(n, -1, dtype=np.int64)
        full[pids != NULL] = np.arange(int((pids != NULL).sum()))
        comm = comm.take(pa.array(full, mask=full < 0))
    return Chunk(out, comm)


def pair_stream(
    event_chunks: Iterator[np.ndarray],
    names: ProcessNames,
    ctx: ReadContext,
    expect_queue: bool,
) -> Iterator[Chunk]:
    """Turn time-ordered event chunks into request chunks in arrival order."""
    pairer = Pairer(expect_queue, ctx)
    found = False
    for events in event_chunks:
        if ctx.device is not None and len(events):
            keep = events[:, K.TE_DEV] == ctx.device
            if not found:
                ctx.devices.update(np.unique(events[:, K.TE_DEV]).tolist())
                found = bool(keep.any())
            events = events[keep]
        if len(events) == 0:
            continue
        pairer.feed(events)
        cols = pairer.sweep()
        if cols.shape[1]:
            yield rows_to_chunk(cols, names)
    cols = pairer.sweep(final=True)
    if cols.shape[1]:
        yield rows_to_chunk(cols, names)
