"""The streaming driver: a trace's requests, in batches, through the engine kernel
(``kernels/engine.py``): a ring of request slots the kernel works through, completed requests
retired in trace order to a sink, per-drive statistics in bins, the closed-loop streams. The
replays (pipeline/replay.py, pipeline/parallel.py) run it; ``run_engine`` runs it over arrays
in memory."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from blocklab.kernels import cache as CA
from blocklab.kernels import engine as E
from blocklab.kernels import heap as HP
from blocklab.kernels.drive import hdd as H
from blocklab.kernels.layout import raid as R
from blocklab.traces.schema import SECTOR_BYTES

from .model.array import ArrayModel, Plan
from .model.array import no_plan as plan_none
from .model.config import ArrayConfig

SECTOR = SECTOR_BYTES  # traces/schema.py
#: Rows read from the trace per batch.
BATCH_ROWS = 1 << 17
#: Per-drive statistics: the first interval, and the bins kept per drive (the interval doubles
#: when a run outgrows them).
INTERVAL_NS = 1_000_000_000
NBINS = 2048


@dataclasses.dataclass
class Options:
    """The engine's settings for one replay (``options_for`` fills them from a config)."""

    closed: bool = False
    ctrl_ns: int = 0
    path_ps: int = 0  # host links, ps per byte
    bus_ps: int = 0  # internal bus, ps per byte
    record: bool = False
    interval_ns: int = INTERVAL_NS
    nbins: int = NBINS
    ring: int = 1 << 16  # first ring capacity (grows when needed)
    cache_lines: int = 0
    line_sectors: int = 64
    write_back: bool = True
    ra_sectors: int = 0
    flush_start: float = 0.8  # fractions of the cache
    flush_stop: float = 0.8
    flush_age_ns: int = 10_000_000_000
    destage_depth: int = 0  # 0: two per drive
    drain: bool = True  # after the last host request, finish the rebuilds under way


def options_for(cfg: ArrayConfig) -> dict[str, Any]:
    """Engine options of the controller an array configuration describes."""
    c = cfg.controller
    links = c.link_payload_bytes_per_s()
    return dict(
        ctrl_ns=c.command_overhead_ns,
        path_ps=int(round(1e12 / links)) if links > 0 else 0,
        bus_ps=int(round(1e12 / c.bandwidth_bytes_per_s)) if c.bandwidth_bytes_per_s else 0,
        cache_lines=c.cache_bytes // c.cache_block_bytes,
        line_sectors=c.cache_block_bytes // SECTOR, write_back=c.write_back,
        ra_sectors=c.read_ahead_bytes // SECTOR if c.read_ahead else 0,
        flush_start=c.flush_start, flush_stop=c.flush_stop,
        flush_age_ns=int(c.flush_age_s * 1e9), destage_depth=c.destage_depth)


@dataclasses.dataclass
class Streams:
    """Closed loop: the trace's streams and phases, from a pass over the trace."""

    ids: np.ndarray  # stream id of each dense stream index
    phase_values: np.ndarray  # phase value of each dense phase index
    ph_cnt: np.ndarray  # requests per (phase, stream), phase-major
    max_window: np.ndarray  # per stream: its largest window


#: Columns of one chunk the driver loads: row (trace row number), arrive (ns), lba, nsec,
#: write (0/1), stream (dense index in closed loop), think, phase (dense), outst, and sid (the
#: trace's stream id, for output).
Chunk = dict[str, np.ndarray]


def _new_reqs(cap: int) -> np.ndarray:
    r = np.zeros((cap, E.RQ_N), dtype=np.int64)
    r[:, [E.RQ_GIDX, E.RQ_O_DONE]] = -1
    return r


#: The chunk columns ``E.load_rows`` takes, in its order.
_LOADED = ("row", "arrive", "lba", "nsec", "write", "stream", "think", "phase", "outst", "sid")
#: The names of the columns ``E.retire_rows`` copies out (``E.RETIRE_COLS``), as sinks get them.
_RETIRED = ("row", "arrive", "start", "done", "hit", "write", "lba", "nsec", "stream")


class Driver:
    """Runs the engine over chunks of requests, retiring completed ones in order."""

    def __init__(self, arr: ArrayModel, opts: Options, total: int,
                 streams: Streams | None = None, tasks: Plan | None = None):
        self.arr = arr
        self.opts = opts
        self.total = total
        nd = arr.drives
        cap = 1 << max(4, int(max(min(opts.ring, total), 16) - 1).bit_length())
        self.retired = 0
        ns = len(streams.ids) if streams is not None else 1
        nph = len(streams.phase_values) if streams is not None else 1
        lines = opts.cache_lines
        depth = opts.destage_depth or 2 * nd
        tasks = tasks or plan_none()
        self.tasks = tasks
        self.cfg = E.Cfg(
            closed=int(opts.closed), vol_unit=arr.vol_unit, ctrl_ns=opts.ctrl_ns,
            path_ps=opts.path_ps, bus_ps=opts.bus_ps, record=int(opts.record), nphases=nph,
            nstreams=ns, cache_lines=lines, line_sectors=opts.line_sectors,
            write_back=int(opts.write_back), ra_sectors=opts.ra_sectors,
            flush_start=max(1, int(opts.flush_start * lines)),
            flush_stop=int(opts.flush_stop * lines), flush_age_ns=opts.flush_age_ns,
            destage_depth=depth, drain=int(opts.drain))
        i64 = np.int64
        SM = np.zeros((ns, E.SM_N), i64)
        SM[:, [E.SM_HEAD, E.SM_TAIL]] = -1
        ph_cnt = (streams.ph_cnt if streams is not None else np.zeros(1, i64)).reshape(nph, ns)
        PH = np.concatenate([ph_cnt.sum(axis=1, keepdims=True), ph_cnt], axis=1).astype(i64)
        DR = np.zeros((nd, E.D_N), i64)
        DR[:, [E.D_QHEAD, E.D_QTAIL, E.D_LASTOP, E.D_BQHEAD, E.D_BQTAIL]] = -1
        DR[:, E.D_MAXINF] = arr.d_maxinf
        DR[:, E.D_SCHED] = arr.d_sched
        DR[:, E.D_DEPTH] = arr.d_depth
        DR[:, E.D_MAXWAIT] = arr.d_maxwait
        DR[:, E.D_MODEL] = arr.d_model
        DR[:, E.D_MPARAM] = arr.d_mparam
        task_depth = int(tasks.TK[:, E.TK_DEPTH].sum()) if tasks.tasks else 0
        nj = (depth + 4 * len(arr.LN) + 64 if lines else 1) + task_depth
        LN = arr.LN.copy()
        LN[:, [E.U_LAST_END, E.U_WHEAD, E.U_WTAIL]] = -1
        S = np.zeros(E.S_N, dtype=i64)
        S[E.S_TOTAL] = total
        S[E.S_INTERVAL] = opts.interval_ns
        S[E.S_NB] = opts.nbins
        S[E.S_BINS_END] = opts.nbins * opts.interval_ns
        S[E.S_FREE_JOBS] = nj
        S[[E.S_TIMER, E.S_WW_HEAD, E.S_WW_TAIL]] = -1
        S[E.S_TASKS_LEFT] = tasks.tasks
        S[E.S_MARGIN_EV] = 16
        CL, HT = CA.new_tables(lines)
        CA.init_heads(S, E.S_CACHE, lines)
        window = int(streams.max_window.sum()) if streams is not None else 0
        S[E.S_MARGIN_HEAP] = window + int(arr.d_maxinf.sum()) + nj + tasks.tasks + 16
        S[E.S_MARGIN_REC] = int(arr.d_maxinf.sum())
        nops = 1 << 12
        S[E.S_FREE_OPS] = nops
        self.W = E.State(
            S=S, RQ=_new_reqs(cap), OP=np.full((nops, E.O_N_COLS), -1, i64),
            OFREE=np.arange(nops - 1, -1, -1, dtype=i64), DR=DR, CAND=np.zeros(nd, i64),
            BN=np.zeros((4, nd * opts.nbins), i64),
            RC=np.zeros((max(1 << 16, 4 * nd) if opts.record else 1, E.RC_N_COLS), i64),
            SM=SM, PH=PH, LN=LN, EX=arr.EX, GR=arr.GR, MP=arr.MP.copy(),
            MH=np.zeros((len(arr.MP), (arr.MP.shape[1] - E.MP_MEM) // 2), i64), FL=tasks.FL,
            AF=tasks.AF, TK=tasks.TK.copy(), PC=tasks.PC.copy(),
            EVT=np.zeros((1024, E.EV_N_COLS), i64), PLAN=self._plan_scratch(S, 1),
            JB=np.zeros((nj, E.J_N_COLS), i64),
            JFREE=np.arange(nj - 1, -1, -1, dtype=i64), CL=CL, HT=HT,
            HQ=HP.new_heap(2 * int(S[E.S_MARGIN_HEAP]) + 1024),
            # every replay starts with idle drives: fresh drive-model state
            M=arr.models._replace(hst=H.new_state(nd),
                                  sst=np.zeros((nd, arr.ssd_width), np.int64)))
        self.max_nsec = 0
        self.t_end = 0
        self.out = np.empty((len(E.RETIRE_COLS), 0), np.int64)  # retire_rows' buffer
        self.events: list[np.ndarray] = []

    def _plan_scratch(self, S: np.ndarray, nsec: int) -> np.ndarray:
        """Planning scratch for pieces of up to ``nsec`` sectors; sets the operations one
        event can plan at most (the margin the kernel keeps free): one host request, a prefetch
        per piece, the destages that may start and the units a task may issue at once."""
        a = self.arr
        o = self.opts
        geoms = [tuple(int(x) for x in g) for g in a.GR]

        def bound(n: int) -> int:
            return max(R.max_ops(k, w, u, n) for k, w, u, _ds in geoms)

        piece = min(nsec, a.vol_unit) if a.vol_unit else nsec
        pieces = nsec // a.vol_unit + 2 if a.vol_unit else 1
        extents = int(piece // int(a.LN[:, E.U_EXT_SECT].min())) + 2
        stripe = max(u * R.data_drives(k, w) for k, w, u, _ds in geoms)
        tk = self.tasks.TK
        unit_rows = int(tk[:, E.TK_UROWS].max()) if len(tk) else 1
        per_unit = max(max((unit_rows // u + 1) * (w + 2) for _k, w, u, _ds in geoms), 64)
        per_piece = max(bound(piece), bound(o.ra_sectors), bound(stripe + 2 * o.line_sectors),
                        per_unit)
        margin = bound(piece) * pieces * extents
        if o.cache_lines:
            margin += 2 * pieces * bound(max(o.ra_sectors, 1)) + self.cfg.destage_depth * \
                bound(stripe + 2 * o.line_sectors)
        if len(tk):
            margin += int(tk[:, E.TK_DEPTH].max()) * per_unit
        S[E.S_MARGIN_OPS] = margin
        return np.zeros(per_piece * R.OP_NCOLS, dtype=np.int64)

    # -- ring management

    def _grow_ring(self) -> None:
        old = self.W.RQ
        cap = 2 * len(old)
        new = _new_reqs(cap)
        live = np.arange(self.retired, int(self.W.S[E.S_LOADED]), dtype=np.int64)
        new[live & (cap - 1)] = old[live & (len(old) - 1)]
        self.W = self.W._replace(RQ=new)

    def _retire(self, sink: Callable[[dict[str, np.ndarray]], None]) -> None:
        """Hand completed requests, in order, to ``sink`` and free their slots. The arrays
        ``sink`` gets are views of a buffer the next call reuses: a sink that keeps them
        copies them (reused memory costs no page faults; fresh arrays per batch cost more
        than the copies themselves)."""
        RQ = self.W.RQ
        loaded = int(self.W.S[E.S_LOADED])
        if loaded == self.retired:
            return
        if self.out.shape[1] < len(RQ):
            self.out = np.empty((len(E.RETIRE_COLS), len(RQ)), np.int64)
        k = int(E.retire_rows(RQ, self.retired, loaded, self.out))
        if k == 0:
            return
        c = dict(zip(_RETIRED, self.out[:, :k], strict=True))
        self.t_end = max(self.t_end, int(c["done"].max()))
        sink(c)
        self.retired += k

    def _load(self, chunk: Chunk, start: int) -> int:
        """Copy rows ``start..`` of ``chunk`` into free slots; returns how many were taken."""
        W = self.W
        loaded = int(W.S[E.S_LOADED])
        cap = len(W.RQ)
        k = min(len(chunk["arrive"]) - start, cap - (loaded - self.retired))
        if k <= 0:
            return 0
        E.load_rows(W.RQ, loaded, start, k,
                    *(np.ascontiguousarray(chunk[name], np.int64) for name in _LOADED))
        nmax = int(chunk["nsec"][start:start + k].max())
        if nmax > self.max_nsec:
            self.max_nsec = nmax
            self.W = W = W._replace(PLAN=self._plan_scratch(W.S, nmax))
        if self.opts.closed:
            E.link_streams(W.RQ, W.SM, loaded, k)
        W.S[E.S_LOADED] = loaded + k
        return k

    def run(self, chunks: Iterator[Chunk], sink: Callable[[dict[str, np.ndarray]], None],
            on_records: Callable[[np.ndarray], None] | None = None) -> None:
        """Replay every request of ``chunks``; completed requests go to ``sink`` in order,
        drive operations (with Options.record) to ``on_records`` (rows of RC_* columns)."""
        it = iter(chunks)
        chunk: Chunk | None = None
        pos = 0

        def next_chunk() -> bool:
            nonlocal chunk, pos
            for c in it:
                if len(c["arrive"]):
                    chunk, pos = c, 0
                    return True
            chunk = None
            self.W.S[E.S_FINAL] = 1
            return False

        def load() -> None:
            """Fill the ring (at least one row: retire, or grow the ring, to make room)."""
            nonlocal pos
            took_any = False
            while True:
                if chunk is None or pos == len(chunk["arrive"]):
                    if not next_chunk():
                        return
                assert chunk is not None
                took = self._load(chunk, pos)
                if took == 0:
                    if took_any:
                        return
                    self._retire(sink)
                    took = self._load(chunk, pos)
                    if took == 0:
                        self._grow_ring()
                        took = self._load(chunk, pos)
                pos += took
                took_any = True

        def flush_records() -> None:
            S = self.W.S
            if on_records is not None and S[E.S_REC]:
                on_records(self.W.RC[:int(S[E.S_REC])].copy())
            S[E.S_REC] = 0

        def flush_events() -> None:
            S = self.W.S
            if S[E.S_EVN]:
                self.events.append(self.W.EVT[:int(S[E.S_EVN])].copy())
            S[E.S_EVN] = 0

        if self.total == 0 and not (self.opts.drain and self.tasks.tasks):
            return
        load()
        while True:
            st = E.replay(self.cfg, self.W)
            S = self.W.S
            if st == E.DONE:
                break
            if st == E.NEED_INPUT:
                self._retire(sink)
                load()
            elif st == E.FULL_OPS:
                self._grow_ops()
            elif st == E.FULL_HEAP:
                self.W = self.W._replace(HQ=HP.grown(self.W.HQ, int(S[E.S_HSIZE]),
                                                     2 * len(self.W.HQ)))
            elif st == E.FULL_RECORDS:
                flush_records()
            elif st == E.FULL_EVENTS:
                flush_events()
        self._retire(sink)
        flush_records()
        flush_events()

    def _grow_ops(self) -> None:
        old = self.W.OP
        S = self.W.S
        n = len(old)
        new = np.full((2 * n, E.O_N_COLS), -1, np.int64)
        new[:n] = old
        free = np.zeros(2 * n, np.int64)
        top = int(S[E.S_FREE_OPS])
        free[:top] = self.W.OFREE[:top]
        free[top:top + n] = np.arange(n, 2 * n)
        S[E.S_FREE_OPS] = top + n
        self.W = self.W._replace(OP=new, OFREE=free)

    def bins(self) -> dict[str, np.ndarray]:
        """Per drive x interval statistics up to the last interval with activity."""
        BN = self.W.BN
        nd = self.arr.drives
        iv = int(self.W.S[E.S_INTERVAL])
        per = BN.reshape(4, nd, -1)
        active = np.flatnonzero((per[E.B_BUSY] != 0).any(axis=0)
                                | (per[E.B_QINT] != 0).any(axis=0))
        used = max(self.t_end // iv + 1, int(active[-1]) + 1 if len(active) else 0)
        return {"interval_ns": np.int64(iv), "busy": per[E.B_BUSY, :, :used],
                "ops": per[E.B_OPS, :, :used], "bytes": per[E.B_BYTES, :, :used],
                "qint": per[E.B_QINT, :, :used]}

    def cache_state(self) -> dict[str, int]:
        """What the controller cache holds at the end (dirty data not yet destaged)."""
        return {"lines": self.cfg.cache_lines,
                "dirty_lines": int(self.W.S[E.S_CACHE + CA.CN_DIRTY]),
                "line_bytes": self.cfg.line_sectors * SECTOR}


def _array_chunks(cols: dict[str, np.ndarray], size: int) -> Iterator[Chunk]:
    n = len(cols["arrive"])
    for a in range(0, n, size):
        yield {k: v[a:a + size] for k, v in cols.items()}


def run_engine(arr: ArrayModel, arrive_ns: np.ndarray, lba: np.ndarray, nsec: np.ndarray,
               is_write: np.ndarray, closed: bool = False, outstanding: Any = 1,
               think_ns: Any = 0, drive_ops: bool = False, stream: np.ndarray | None = None,
               phase: np.ndarray | None = None, chunk: int = BATCH_ROWS,
               tasks: Plan | None = None, **engine: Any) -> dict[str, Any]:
    """Replay in-memory request arrays (tests, benchmarks); ``engine`` takes any Options
    field (ctrl_ns, path_ps, cache_lines, ...). Returns per-request outputs in request order,
    per-drive totals and bins, the cache's end state and (``drive_ops``) every operation."""
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
    opts = Options(closed=closed, record=drive_ops, **engine)
    drv = Driver(arr, opts, n, streams, tasks)
    # requests retire in order: each batch fills the next rows of the outputs
    res: dict[str, Any] = {k: np.zeros(n, np.int64) for k in ("arrive", "start", "done", "hit")}
    filled = 0
    recs: list[np.ndarray] = []

    def sink(c: dict[str, np.ndarray]) -> None:
        nonlocal filled
        k = len(c["done"])
        for name in ("arrive", "start", "done", "hit"):
            res[name][filled:filled + k] = c[name]
        filled += k

    drv.run(_array_chunks(cols, chunk), sink, recs.append)
    assert filled == n
    res["busy_ns"] = drv.W.DR[:, E.D_BUSY].copy()
    res["ops"] = drv.W.DR[:, E.D_NOPS].copy()
    res["bins"] = drv.bins()
    res["cache"] = drv.cache_state()
    res["events"] = (np.concatenate(drv.events) if drv.events
                     else np.zeros((0, E.EV_N_COLS), np.int64))
    res["mp"] = drv.W.MP
    if drive_ops:
        rc = np.concatenate(recs) if recs else np.zeros((0, E.RC_N_COLS), np.int64)
        for name, col in (("drive", E.RC_DRIVE), ("item", E.RC_ITEM), ("kind", E.RC_KIND),
                          ("qtime", E.RC_QTIME), ("start", E.RC_START), ("done", E.RC_DONE),
                          ("lba", E.RC_LBA), ("n", E.RC_N), ("write", E.RC_WRITE),
                          ("hit", E.RC_HIT)):
            res[f"op_{name}"] = rc[:, col]
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
