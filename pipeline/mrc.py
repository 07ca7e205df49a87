"""``blocklab cache mrc``: the LRU miss-ratio curve of a trace, exact or sampled (SHARDS).

The trace is read in batches of Parquet rows (device, sector, size_bytes, op) in file order
(the arrival order) and fed to ``kernels/mrc.py`` (its tables: ``kernels/mrc_stack.py``): one
access per cache block a read or a write touches (blocks of ``block_bytes``, aligned;
discards, flushes and other ops are left out). The exact curve keeps every distinct block
(memory grows with the working set, about 40 to 80 bytes per block); the sampled estimate
tracks a spatial sample of blocks: a fixed rate (memory grows with rate x working set) or a
fixed number of blocks (memory bounded whatever the trace). Reads and writes share one LRU
stack (a write makes its block most recent, as in a cache that holds written data) and are
counted apart.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from blocklab.kernels import mrc as K
from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import SECTOR_BYTES
from blocklab.traces.store import open_trace
from blocklab.traces.units import parse_bytes

SECTOR = SECTOR_BYTES  # traces/schema.py
#: Rows read from the trace at a time.
BATCH_ROWS = 1 << 20


def parse_size(text: str, option: str) -> int:
    """``4KiB``, ``64M``, ``1GiB``, ``4096`` (bytes) -> bytes (traces/units.py: one-letter
    suffixes and KiB, MiB, ... binary, KB, MB, ... decimal). Raises BlocklabError naming
    ``option``."""
    try:
        n = parse_bytes(text)
    except ValueError as e:
        raise BlocklabError(f"{option} {text}: {e}") from None
    if n <= 0:
        raise BlocklabError(f"{option} {text}: expected a whole number of bytes above 0")
    return n


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How blocks are sampled: exact (every block), a fixed rate, or a fixed number."""

    rate: float | None = None  # fixed rate R in (0, 1]
    size: int | None = None  # fixed size: most blocks tracked

    @property
    def exact(self) -> bool:
        return self.size is None and (self.rate is None or self.threshold == K.P)

    @property
    def threshold(self) -> int:
        """SHARDS' T: a block is tracked when hash mod P < T."""
        return K.P if self.rate is None else max(1, round(self.rate * K.P))

    def describe(self) -> str:
        if self.size is not None:
            return f"sampled, fixed size ({self.size:,} blocks)"
        if self.exact:
            return "exact"
        return f"sampled, fixed rate {self.threshold / K.P:.6g}"


class Stack:
    """The LRU stack's tables (kernels/mrc_stack.py), grown when the working set outgrows them."""

    def __init__(self, sampling: Sampling, m: int = 1 << 12, queue: int | None = None,
                 filter_rows: int | None = None):
        self.sampling = sampling
        q = queue or K.QUEUE  # block accesses queued per run of the kernel
        self.QZ = np.zeros(q, np.uint64)
        self.QO = np.zeros(q, np.int64)
        self.QR = np.zeros(q, np.int64)
        self.QD = np.zeros(q, np.int64)
        self.QS = np.zeros(q, np.int64)
        self.QF = np.zeros(filter_rows or K.FILTER, np.uint8)
        self.ST = np.zeros(K.ST_N, np.int64)
        self.SW = np.zeros(K.SW_N, np.float64)
        self.ST[K.S_T] = sampling.threshold
        self.ST[K.S_EXACT] = 1 if sampling.exact else 0
        self.ST[K.S_SMAX] = sampling.size or 0
        self.HL = np.zeros((K.LOG_BINS if not sampling.exact else 1, 2), np.float64)
        heap = (sampling.size or 0) + 2
        self.HPV = np.zeros(heap, np.int64)
        self.HPK = np.zeros(heap, np.int64)
        self.HE = np.zeros((0, 2), np.int64)
        self.HT = np.zeros(0, np.int64)
        self._positions(m)
        self._slots(m)

    def _positions(self, m: int) -> None:
        """Position tables for ``m`` positions (a power of two, at least a group; ``C1`` holds
        at least one whole run, which ``_since`` of kernels/mrc_stack.py reads)."""
        m = max(m, 1 << K.GROUP_BITS)  # a whole line of the bitmap
        runs = -(-m >> K.RUN_BITS)
        self.BM = np.zeros(m // 64, np.uint64)
        self.C1 = np.zeros(runs << K.RUN_GROUPS_BITS, np.uint16)
        self.F2 = np.zeros(runs + 1, np.int32)
        self.CB = np.zeros(m >> K.GROUP_BITS, np.int64)  # compaction's scratch

    def _slots(self, slots: int) -> None:
        """A hash table of ``slots`` slots (a power of two; at most 3/4 of them used:
        ``_fits`` of kernels/mrc_stack.py), and the exact histogram's rows for every distance
        that allows (below 3/4 slots)."""
        old = self.HT
        self.HT = np.empty(2 * slots, np.int64)  # slot s: HT[2s] hash, HT[2s+1] position
        self.HT[1::2] = K.EMPTY
        K.rehash(old, self.HT)
        del old
        rows = 3 * slots // 4 + 1 if self.sampling.exact else 1
        if rows > len(self.HE):
            # grown in place, after the old table is freed, so that the new rows can take
            # its memory: ``resize`` reallocates (a large block is moved by remapping its
            # pages, not copied) and writes zeros in the new rows only. No view of HE is
            # kept across calls, so none is left pointing at the old block.
            self.HE.resize((rows, 2), refcheck=False)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.BM, self.C1, self.F2, self.CB, self.HE, self.HT,
                                      self.HL, self.HPV, self.HPK, self.QZ, self.QO, self.QR,
                                      self.QD, self.QS, self.QF))

    def grow(self, need_blocks: int) -> None:
        """Room for ``need_blocks`` more blocks than are tracked now: compact, then double
        the position tables until the blocks and the new ones take at most an eighth of
        them (when the blocks take more than a quarter, or the new ones do not fit), and
        the hash table until at most 3/4 of it is used (when it is short)."""
        K.compact(self.ST, self.HT, self.BM, self.C1, self.F2, self.CB)
        live = int(self.ST[K.S_POS])
        need = live + need_blocks
        m = len(self.BM) * 64
        if 4 * live > m or need > m:
            # positions: 8 x the blocks (a position costs 0.26 bytes: bitmap, C1, F2, CB),
            # so that compactions (a walk of the hash table each) come at most every 3 x
            # the blocks' accesses (kernels/mrc_stack.py _positions_for)
            while m < 8 * need:
                m *= 2
            self._positions(m)
            K.build_marks(self.BM, self.C1, self.F2, live)
        slots = len(self.HT) // 2
        if 4 * (int(self.ST[K.S_LIVE]) + need_blocks) > 3 * slots:
            while 4 * need > 3 * slots:
                slots *= 2
            self._slots(slots)

    def feed(self, dev: np.ndarray, sector: np.ndarray, nsec: np.ndarray, op: np.ndarray
             ) -> None:
        i, n = 0, len(op)
        while i < n:
            i = K.process(dev, sector, nsec, op, i, self.bsec, self.ST, self.SW, self.HT,
                          self.BM, self.C1, self.F2, self.CB, self.HE.reshape(-1), self.HL,
                          self.HPV, self.HPK, self.QZ, self.QO, self.QR, self.QD, self.QS, self.QF)
            if i < n:
                nb = (sector[i] + nsec[i] - 1) // self.bsec - sector[i] // self.bsec + 1
                self.grow(int(nb))

    bsec: int = 8


@dataclasses.dataclass
class Curve:
    """Miss ratios at cache sizes: all accesses, reads, writes (None: no access of that op)."""

    size_bytes: list[int]
    miss_ratio: list[float | None]
    read_miss_ratio: list[float | None]
    write_miss_ratio: list[float | None]


def _ratios(hits: Callable[[int, np.ndarray], np.ndarray], total: np.ndarray,
            blocks: np.ndarray) -> tuple[list[float | None], ...]:
    """Miss ratios per op and for both from ``hits(op, blocks)`` and ``total[op]``."""
    h = [hits(o, blocks) for o in (0, 1)]
    out = []
    for num, den in ((h[0] + h[1], total[0] + total[1]), (h[0], total[0]), (h[1], total[1])):
        out.append([None if den <= 0 else float(min(1.0, max(0.0, 1.0 - x / den)))
                     for x in num])
    return tuple(out)


def exact_hits(HE: np.ndarray) -> Callable[[int, np.ndarray], np.ndarray]:
    """hits(op, c) = accesses of op at stack distance below c (HE[distance, op])."""
    cum = np.concatenate([np.zeros((1, 2), np.int64), np.cumsum(HE, axis=0)], axis=0)

    def hits(o: int, c: np.ndarray) -> np.ndarray:
        return cum[np.minimum(c, cum.shape[0] - 1), o].astype(np.float64)

    return hits


def sampled_hits(HL: np.ndarray) -> Callable[[int, np.ndarray], np.ndarray]:
    """hits(op, c) = weight of scaled distances below c; a bin that straddles c counts in
    proportion to the part of it below c."""
    b = np.arange(HL.shape[0] + 1, dtype=np.float64)
    edges = np.exp2(b / K.BINS_PER_OCTAVE) - 1.0
    cum = np.concatenate([np.zeros((1, 2)), np.cumsum(HL, axis=0)], axis=0)

    def hits(o: int, c: np.ndarray) -> np.ndarray:
        c = np.asarray(c, np.float64)
        j = np.clip(np.searchsorted(edges, c, side="right") - 1, 0, HL.shape[0] - 1)
        frac = np.clip((c - edges[j]) / (edges[j + 1] - edges[j]), 0.0, 1.0)
        return cum[j, o] + frac * HL[j, o]

    return hits


@dataclasses.dataclass
class MrcResult:
    """An LRU miss-ratio curve of one trace (see docs/mrc.md)."""

    trace: str
    method: str
    block_bytes: int
    requests: int
    reads: int
    writes: int
    accesses: int  # block accesses (reads and writes)
    read_accesses: int
    write_accesses: int
    distinct_blocks: float  # exact count, or the sample's estimate (tracked / rate)
    working_set_bytes: float
    rate: float  # the final sampling rate (1 exact)
    resolution_bytes: int  # a sample resolves cache sizes in steps of 1/rate blocks
    tracked_blocks: int  # most blocks held at once
    table_bytes: int  # memory of the tables at the end
    elapsed_s: float
    requests_per_s: float
    curve: Curve
    error: dict[str, Any] | None = None  # against the exact curve (--error)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def default_sizes(block_bytes: int, wss_blocks: float) -> list[int]:
    """Powers of two of blocks, from one block to the first at or above the working set, and
    the working set itself (rounded up to a block)."""
    top = max(1, math.ceil(wss_blocks))
    out, c = [], 1
    while c < top:
        out.append(c)
        c *= 2
    out.append(top)
    return [b * block_bytes for b in out]


def _batches(path: Path, rows: int):
    pf, meta = open_trace(path)
    devmap: dict[int, int] = {}
    for b in pf.iter_batches(batch_size=rows, columns=["device", "sector", "size_bytes", "op"]):
        dev = b.column(0).to_numpy()
        uniq = np.unique(dev)
        for d in uniq.tolist():
            devmap.setdefault(int(d), len(devmap))
        idx = np.array([devmap[int(d)] for d in uniq.tolist()], np.int64)
        dense = idx[np.searchsorted(uniq, dev)]
        size = b.column(2).to_numpy()
        yield (dense, b.column(1).to_numpy(), (size + SECTOR - 1) // SECTOR,
               b.column(3).to_numpy())


def run_stack(path: str | Path, block_bytes: int, sampling: Sampling,
              progress: Callable[[int, int], None] | None = None,
              batch_rows: int = BATCH_ROWS) -> tuple[Stack, float]:
    """Feed the trace through a Stack; returns it and the seconds taken."""
    p = Path(path)
    pf, _meta = open_trace(p)
    total = pf.metadata.num_rows
    st = Stack(sampling)
    st.bsec = block_bytes // SECTOR
    t0 = time.perf_counter()
    done = 0
    for dev, sector, nsec, op in _batches(p, batch_rows):
        st.feed(dev, sector, nsec, op)
        done += len(op)
        if progress:
            progress(done, total)
    return st, time.perf_counter() - t0


def curve_of(st: Stack, sizes: list[int], block_bytes: int) -> Curve:
    ST, SW = st.ST, st.SW
    blocks = np.array([max(1, s // block_bytes) for s in sizes], np.int64)
    if st.sampling.exact:
        total = np.array([ST[K.S_ACC], ST[K.S_ACC + 1]], np.float64)
        r = _ratios(exact_hits(st.HE), total, blocks)
    else:
        # SHARDS_adj: misses over the expected weight of the sampled accesses, which is every
        # access (each is tracked with probability R and then weighs 1/R); the sample's
        # shortfall or excess is taken as accesses at distance 0 (Waldspurger et al., 2015,
        # section 4.3). The paper applies it at a fixed rate; at a fixed size the expectation
        # holds all the same (an access at rate R_t weighs 1/R_t).
        tot_w = np.array([SW[K.W_TOT], SW[K.W_TOT + 1]])
        n_all = np.array([ST[K.S_ACC], ST[K.S_ACC + 1]], np.float64)
        hits = sampled_hits(st.HL)

        def adj(o: int, c: np.ndarray) -> np.ndarray:
            return hits(o, c) + (n_all[o] - tot_w[o])

        r = _ratios(adj, n_all, blocks)
    return Curve(list(sizes), *r)


def mrc(path: str | Path, block_bytes: int = 4096, sizes: list[int] | None = None,
        sample_rate: float | None = None, sample_size: int | None = None,
        error: bool = False, progress: Callable[[int, int], None] | None = None,
        batch_rows: int = BATCH_ROWS) -> MrcResult:
    """The LRU miss-ratio curve of the trace at ``path``.

    Parameters
    ----------
    block_bytes
        Cache block (line) size in bytes, a multiple of 512.
    sizes
        Cache sizes in bytes to evaluate (default: powers of two blocks up to the working
        set, and the working set).
    sample_rate, sample_size
        SHARDS sampling at a fixed rate in (0, 1], or of at most this many blocks; neither:
        exact.
    error
        Also compute the exact curve and report the estimate's error against it.
    """
    if block_bytes <= 0 or block_bytes % SECTOR:
        raise BlocklabError(f"--block {block_bytes}: expected a multiple of {SECTOR} bytes")
    if sample_rate is not None and not 0 < sample_rate <= 1:
        raise BlocklabError(f"--sample {sample_rate:g}: expected a rate in (0, 1]")
    if sample_size is not None and sample_size < 1:
        raise BlocklabError(f"--sample-size {sample_size}: expected at least 1 block")
    if sample_rate is not None and sample_size is not None:
        raise BlocklabError("--sample and --sample-size: give one of them")
    if sizes is not None:
        for s in sizes:
            if s <= 0:
                raise BlocklabError(f"--sizes {s}: expected sizes above 0")
    sampling = Sampling(sample_rate, sample_size)
    st, secs = run_stack(path, block_bytes, sampling, progress, batch_rows)
    ST = st.ST
    rate = int(ST[K.S_T]) / K.P
    tracked = int(ST[K.S_LIVE])
    distinct = tracked / rate
    sz = sorted(set(sizes)) if sizes else default_sizes(block_bytes, distinct)
    curve = curve_of(st, sz, block_bytes)
    err = None
    if error and not sampling.exact:
        ex, _s = run_stack(path, block_bytes, Sampling(), None, batch_rows)
        exact = curve_of(ex, sz, block_bytes)
        # a sample resolves distances in steps of 1/R blocks: smaller caches are not compared
        keep = [s // block_bytes >= 1 / rate for s in sz]
        err = {"against": "exact", "distinct_blocks": int(ex.ST[K.S_LIVE]),
               "sizes_compared": sum(keep), "from_bytes": math.ceil(1 / rate) * block_bytes}
        for name in ("miss_ratio", "read_miss_ratio", "write_miss_ratio"):
            a, b = getattr(curve, name), getattr(exact, name)
            d = [abs(x - y) for x, y, k in zip(a, b, keep, strict=True)
                 if x is not None and y is not None and k]
            err[name] = {"mean_abs": float(np.mean(d)) if d else None,
                         "max_abs": float(np.max(d)) if d else None,
                         "exact": b}
    reqs = int(ST[K.S_REQ] + ST[K.S_REQ + 1])
    return MrcResult(
        trace=str(path), method=sampling.describe(), block_bytes=block_bytes,
        requests=reqs, reads=int(ST[K.S_REQ]), writes=int(ST[K.S_REQ + 1]),
        accesses=int(ST[K.S_ACC] + ST[K.S_ACC + 1]), read_accesses=int(ST[K.S_ACC]),
        write_accesses=int(ST[K.S_ACC + 1]), distinct_blocks=distinct,
        working_set_bytes=distinct * block_bytes, rate=rate,
        resolution_bytes=math.ceil(1 / rate) * block_bytes,
        tracked_blocks=int(ST[K.S_MAXLIVE]), table_bytes=st.nbytes, elapsed_s=secs,
        requests_per_s=reqs / secs if secs > 0 else 0.0, curve=curve, error=err)


def _bench_batches(total: int, batch: int, seed: int = 1):
    """The bench trace, in batches: 4 KiB requests, 70 % reads; 90 % of them on a hot set of
    2^20 blocks drawn Zipf(1.2) (hashed over the device so that hot blocks are not
    neighbours), 10 % a sequential scan through fresh blocks (a backup or a table scan)."""
    rng = np.random.default_rng(seed)
    scan = 1 << 30
    for lo in range(0, total, batch):
        n = min(batch, total - lo)
        hot = (rng.zipf(1.2, n) % (1 << 20)) * 2654435761 % (1 << 28)
        is_scan = rng.random(n) < 0.1
        k = np.cumsum(is_scan)
        block = np.where(is_scan, scan + k, hot).astype(np.int64)
        scan += int(k[-1]) if n else 0
        yield (np.zeros(n, np.int64), block * 8, np.full(n, 8, np.int64),
               (rng.random(n) < 0.3).astype(np.uint8))


def bench_lines(requests: int = 100_000_000, batch: int = 1 << 20) -> list[str]:
    """Lines for ``make bench``: requests/s of the exact and the sampled kernels on one core
    over the bench trace (``_bench_batches``; its generation is not timed), beside the goals
    (issue 23: 20 M/s exact, 100 M/s sampled, for a 100M-request trace): wall-clock, and in
    brackets per second of the thread's processor time (``time.thread_time``), which other
    jobs on a shared machine inflate less."""
    def speed(sampling: Sampling) -> tuple[float, float, Stack]:
        st = Stack(sampling)
        st.bsec = 8
        warm = next(_bench_batches(1000, 1000, seed=9))
        Stack(sampling).feed(*warm)  # compiled (or loaded) before the clock starts
        secs = cpu = 0.0
        for cols in _bench_batches(requests, batch):
            t, c = time.perf_counter(), time.thread_time()
            st.feed(*cols)
            secs += time.perf_counter() - t
            cpu += time.thread_time() - c
        return requests / secs, requests / cpu, st

    ex, exc, st = speed(Sampling())
    fr, frc, _ = speed(Sampling(rate=0.01))
    fs, fsc, fst = speed(Sampling(size=1 << 16))
    return [
        f"  MRC exact (1 core)     : {ex / 1e6:6.1f} M requests/s ({exc / 1e6:.1f} M/s of CPU "
        f"time) (goal 20 M/s) over {requests / 1e6:.0f} M 4 KiB requests, "
        f"{int(st.ST[K.S_LIVE]) / 1e6:.1f} M distinct blocks, tables {st.nbytes / 2**30:.2f} GiB",
        f"  MRC sampled (1 core)   : {fr / 1e6:6.1f} M requests/s ({frc / 1e6:.0f} M/s of CPU "
        f"time) at rate 0.01, {fs / 1e6:6.1f} M/s ({fsc / 1e6:.0f}) at a fixed 65,536 blocks "
        f"(tables {fst.nbytes / 2**20:.1f} MiB) (goal 100 M/s)",
    ]
