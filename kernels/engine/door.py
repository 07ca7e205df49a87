"""The engine's front door: the settings of one replay (``Settings``, every default stated
here once), and ``Engine``, which builds the kernel's state (``new_state``), feeds it a trace's
requests through a ring of slots (``load``), hands completed requests back in order
(``retire``), grows its tables when the kernel asks, and reads its statistics, records and run
events back by name. Pipeline code needs nothing else of the engine: ``Settings``, ``Streams``,
``Engine`` and the structured dtypes of ``tables`` for the tables it builds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Protocol

import numpy as np

from blocklab.kernels import cache as CA
from blocklab.kernels import heap as HP
from blocklab.kernels.drive import hdd as H
from blocklab.kernels.layout import raid as R

from . import tables as T
from .loop import RETIRE_COLS, link_streams, load_rows, replay, retire_rows

#: The columns a sink gets for each retired request (``RETIRE_COLS``, in its order): trace row,
#: arrival, start and completion (ns), cache hit (1; plus tables.HIT_LOST when part of its
#: data was lost), write, lba, sectors, trace stream id.
RETIRED = ("row", "arrive", "start", "done", "hit", "write", "lba", "nsec", "stream")
#: The chunk columns ``load`` takes: trace row, arrival (ns), lba, sectors, write (0/1),
#: stream (dense index in closed loop), think (ns), phase (dense), outstanding, and sid (the
#: trace's stream id, handed back as "stream").
LOADED = ("row", "arrive", "lba", "nsec", "write", "stream", "think", "phase", "outst", "sid")

#: A batch of requests to load: LOADED's columns, int64 arrays of one length.
Chunk = dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything the engine is told about one replay besides the array and the trace.

    The controller's settings (``pipeline/model/config.py`` ``settings_for`` is the one
    conversion from an array configuration) and the run's: loop, records, statistics bins.
    Times in ns, link and bus rates in picoseconds per byte (0: no limit), sizes in sectors.
    """

    closed: bool = False  # closed loop (streams keep their requests outstanding)
    record: bool = False  # record every drive operation
    drain: bool = True  # after the last host request, finish the tasks under way
    ctrl_ns: int = 0  # controller time per command
    path_ps: int = 0  # host links
    bus_ps: int = 0  # internal bus
    cache_lines: int = 0  # controller cache lines (0: no cache)
    line_sectors: int = 64  # sectors per cache line (32 KiB)
    write_back: bool = True
    ra_sectors: int = 0  # read-ahead per prefetch (0: none)
    flush_start: float = 0.8  # dirty fraction of the cache that starts destaging
    flush_stop: float = 0.8  # dirty fraction at which destaging stops
    flush_age_ns: int = 10_000_000_000  # dirty data older than this is destaged
    destage_depth: int = 0  # destage jobs at once (0: two per drive)
    interval_ns: int = 1_000_000_000  # first statistics interval (doubles when outgrown)
    nbins: int = 2048  # statistics bins kept per drive
    ring: int = 1 << 16  # first capacity of the request ring (grows when needed)
    # closed loop: after the trace's last phase, start it again while background tasks
    # remain, up to this many passes in all (1: one pass). ``run``'s chunks then yield the
    # trace pass after pass (as many passes as this allows; only the passes run are read).
    max_passes: int = 1


@dataclasses.dataclass
class Streams:
    """Closed loop: the trace's streams and phases, from a pass over the trace."""

    ids: np.ndarray  # stream id of each dense stream index
    phase_values: np.ndarray  # phase value of each dense phase index
    ph_cnt: np.ndarray  # requests per (phase, stream), phase-major
    max_window: np.ndarray  # per stream: its largest window


class Array(Protocol):
    """What the engine needs of an array (``pipeline/model/array.py`` ArrayModel has it)."""

    vol_unit: int  # host volume stripe unit, sectors (0: one LUN)
    LN: np.ndarray  # tables.LUN rows
    EX: np.ndarray  # tables.EXTENT rows
    GR: np.ndarray  # tables.GEOMETRY rows
    MP: np.ndarray  # tables.member_map rows
    d_model: np.ndarray  # per drive: MODEL_*
    d_mparam: np.ndarray  # per drive: its model's parameter set
    d_sched: np.ndarray  # per drive: SCHED_*
    d_depth: np.ndarray  # per drive: operations its scheduler looks at
    d_maxwait: np.ndarray  # per drive: ns before the oldest goes first (0: no limit)
    d_maxinf: np.ndarray  # per drive: operations in service at once
    models: T.Models
    ssd_width: int


class Tasks(Protocol):
    """Failures and background tasks (``pipeline/model/array.py`` Plan has them)."""

    FL: np.ndarray  # tables.FAILURE rows
    AF: np.ndarray  # tables.MISSING rows
    TK: np.ndarray  # tables.TASK rows
    PC: np.ndarray  # tables.PIECE rows


@dataclasses.dataclass
class _NoTasks:
    FL: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, T.FAILURE))
    AF: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, T.MISSING))
    TK: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, T.TASK))
    PC: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, T.PIECE))


def _new_reqs(cap: int) -> np.ndarray:
    r = np.zeros((cap, T.RQ_COLS), dtype=np.int64)
    r[:, [T.RQ_GIDX, T.RQ_O_DONE]] = -1
    return r


def kernel_config(arr: Array, s: Settings, nstreams: int, nphases: int) -> T.Cfg:
    """The kernel's scalars (``tables.Cfg``) for an array and settings."""
    lines = s.cache_lines
    return T.Cfg(
        closed=int(s.closed), vol_unit=arr.vol_unit, ctrl_ns=s.ctrl_ns, path_ps=s.path_ps,
        bus_ps=s.bus_ps, record=int(s.record), nphases=nphases, nstreams=nstreams,
        cache_lines=lines, line_sectors=s.line_sectors, write_back=int(s.write_back),
        ra_sectors=s.ra_sectors, flush_start=max(1, int(s.flush_start * lines)),
        flush_stop=int(s.flush_stop * lines), flush_age_ns=s.flush_age_ns,
        destage_depth=s.destage_depth or 2 * len(arr.d_model), drain=int(s.drain))


def new_state(arr: Array, s: Settings, cfg: T.Cfg, total: int, streams: Streams | None,
              tasks: Tasks) -> T.State:
    """The kernel's state at the start of a replay of ``total`` requests: idle drives, an
    empty cache and ring, the array's tables in the kernel's int64 form."""
    i64 = np.int64
    nd = len(arr.d_model)
    ns, nph = cfg.nstreams, cfg.nphases
    cap = 1 << max(4, int(max(min(s.ring, total), 16) - 1).bit_length())
    SM = np.zeros((ns, T.SM_COLS), i64)
    SM[:, [T.SM_HEAD, T.SM_TAIL]] = -1
    ph_cnt = (streams.ph_cnt if streams is not None else np.zeros(1, i64)).reshape(nph, ns)
    PH = np.concatenate([ph_cnt.sum(axis=1, keepdims=True), ph_cnt], axis=1).astype(i64)
    DR = np.zeros((nd, T.D_COLS), i64)
    DR[:, [T.D_QHEAD, T.D_QTAIL, T.D_LASTOP, T.D_BQHEAD, T.D_BQTAIL]] = -1
    for col, v in ((T.D_MAXINF, arr.d_maxinf), (T.D_SCHED, arr.d_sched),
                   (T.D_DEPTH, arr.d_depth), (T.D_MAXWAIT, arr.d_maxwait),
                   (T.D_MODEL, arr.d_model), (T.D_MPARAM, arr.d_mparam)):
        DR[:, col] = v
    TK = T.as_kernel(tasks.TK).copy()
    lines = cfg.cache_lines
    task_depth = int(TK[:, T.TK_DEPTH].sum())
    nj = (cfg.destage_depth + 4 * len(arr.LN) + 64 if lines else 1) + task_depth
    LN = T.as_kernel(arr.LN).copy()
    LN[:, [T.U_LAST_END, T.U_WHEAD, T.U_WTAIL]] = -1
    MP = T.as_kernel(arr.MP).copy()
    S = np.zeros(T.S_COLS, dtype=i64)
    S[T.S_TOTAL] = total
    S[T.S_INTERVAL] = s.interval_ns
    S[T.S_NB] = s.nbins
    S[T.S_BINS_END] = s.nbins * s.interval_ns
    S[T.S_FREE_JOBS] = nj
    S[[T.S_TIMER, T.S_WW_HEAD, T.S_WW_TAIL]] = -1
    S[T.S_TASKS_LEFT] = len(TK)
    S[T.S_PASS] = 1
    S[T.S_PASSES] = max(1, s.max_passes) if cfg.closed and total > 0 else 1
    S[T.S_MARGIN_EV] = 16
    CL, HT = CA.new_tables(lines)
    CA.init_heads(S, T.S_CACHE, lines)
    window = int(streams.max_window.sum()) if streams is not None else 0
    S[T.S_MARGIN_HEAP] = window + int(arr.d_maxinf.sum()) + nj + len(TK) + 16
    S[T.S_MARGIN_REC] = int(arr.d_maxinf.sum())
    nops = 1 << 12
    S[T.S_FREE_OPS] = nops
    return T.State(
        S=S, RQ=_new_reqs(cap), OP=np.full((nops, T.O_COLS), -1, i64),
        OFREE=np.arange(nops - 1, -1, -1, dtype=i64), DR=DR, CAND=np.zeros(nd, i64),
        BN=np.zeros((4, nd * s.nbins), i64),
        RC=np.zeros((max(1 << 16, 4 * nd) if s.record else 1, T.RC_COLS), i64),
        SM=SM, PH=PH, LN=LN, EX=T.as_kernel(arr.EX), GR=T.as_kernel(arr.GR), MP=MP,
        MH=np.zeros((len(MP), (MP.shape[1] - T.MP_MEM) // 2), i64),
        FL=T.as_kernel(tasks.FL), AF=T.as_kernel(tasks.AF), TK=TK,
        PC=T.as_kernel(tasks.PC).copy(), EVT=np.zeros((1024, T.EV_COLS), i64),
        PLAN=np.zeros(R.OP_NCOLS, i64), JB=np.zeros((nj, T.J_COLS), i64),
        JFREE=np.arange(nj - 1, -1, -1, dtype=i64), CL=CL, HT=HT,
        HQ=HP.new_heap(2 * int(S[T.S_MARGIN_HEAP]) + 1024),
        # every replay starts with idle drives: fresh drive-model state
        M=arr.models._replace(hst=H.new_state(nd),
                              sst=np.zeros((nd, arr.ssd_width), np.int64)))


class Engine:
    """One replay: requests in through ``run``'s chunks, completed requests out, in order,
    through its sink; statistics, records and events read back by name."""

    #: What ``run`` hands ``on_records`` and ``events`` returns: structured rows by name.
    RECORD = T.RECORD
    EVENT = T.EVENT

    def __init__(self, arr: Array, settings: Settings, total: int,
                 streams: Streams | None = None, tasks: Tasks | None = None):
        self.arr = arr
        self.settings = settings
        self.total = total
        self.tasks = tasks if tasks is not None else _NoTasks()
        ns = len(streams.ids) if streams is not None else 1
        nph = len(streams.phase_values) if streams is not None else 1
        self.cfg = kernel_config(arr, settings, ns, nph)
        self.W = new_state(arr, settings, self.cfg, total, streams, self.tasks)
        self.W = self.W._replace(PLAN=self._plan_scratch(1))
        self.retired = 0
        self.max_nsec = 0
        self.t_end = 0
        self.out = np.empty((len(RETIRE_COLS), 0), np.int64)  # retire_rows' buffer
        self._events: list[np.ndarray] = []

    def _plan_scratch(self, nsec: int) -> np.ndarray:
        """Planning scratch for pieces of up to ``nsec`` sectors; sets the operations one
        event can plan at most (the margin the kernel keeps free): one host request, a prefetch
        per piece, the destages that may start and the units a task may issue at once."""
        a = self.arr
        c = self.cfg
        geoms = [tuple(int(x) for x in g) for g in T.as_kernel(a.GR)]

        def bound(n: int) -> int:
            return max(R.max_ops(k, w, u, n) for k, w, u, _ds in geoms)

        piece = min(nsec, a.vol_unit) if a.vol_unit else nsec
        pieces = nsec // a.vol_unit + 2 if a.vol_unit else 1
        extents = int(piece // int(a.LN["ext_sect"].min())) + 2
        stripe = max(u * R.data_drives(k, w) for k, w, u, _ds in geoms)
        tk = self.tasks.TK
        unit_rows = int(tk["urows"].max()) if len(tk) else 1
        per_unit = max(max((unit_rows // u + 1) * (w + 2) for _k, w, u, _ds in geoms), 64)
        per_piece = max(bound(piece), bound(c.ra_sectors), bound(stripe + 2 * c.line_sectors),
                        per_unit)
        margin = bound(piece) * pieces * extents
        if c.cache_lines:
            margin += 2 * pieces * bound(max(c.ra_sectors, 1)) + c.destage_depth * \
                bound(stripe + 2 * c.line_sectors)
        if len(tk):
            margin += int(tk["depth"].max()) * per_unit
        self.W.S[T.S_MARGIN_OPS] = margin
        return np.zeros(per_piece * R.OP_NCOLS, dtype=np.int64)

    # -- the ring: load requests into free slots, retire completed ones in order

    def load(self, chunk: Chunk, start: int) -> int:
        """Copy rows ``start..`` of ``chunk`` into free slots; returns how many were taken."""
        W = self.W
        loaded = int(W.S[T.S_LOADED])
        cap = len(W.RQ)
        k = min(len(chunk["arrive"]) - start, cap - (loaded - self.retired))
        if k <= 0:
            return 0
        self._check_addresses(chunk, start, k)
        load_rows(W.RQ, loaded, start, k,
                  *(np.ascontiguousarray(chunk[name], np.int64) for name in LOADED))
        nmax = int(chunk["nsec"][start:start + k].max())
        if nmax > self.max_nsec:
            self.max_nsec = nmax
            self.W = W = W._replace(PLAN=self._plan_scratch(nmax))
        if self.cfg.closed:
            link_streams(W.RQ, W.SM, loaded, k)
        W.S[T.S_LOADED] = loaded + k
        return k

    def _check_addresses(self, chunk: Chunk, start: int, k: int) -> None:
        """Refuse a request outside the array's sectors: the kernels index the layout's
        tables with its address unchecked (Numba does no bounds checks), so one would read
        past them (a segfault, or another request's sectors). Replay folds or refuses such
        requests with a message naming the trace's row before they get here; this is for
        every other caller (tests, benchmarks, a library user's arrays). A request of 0
        sectors is one (it completes with no drive operation)."""
        lba = chunk["lba"][start:start + k]
        nsec = chunk["nsec"][start:start + k]
        bad = (lba < 0) | (nsec < 0) | (nsec > self.arr.capacity - lba)
        if bad.any():
            i = start + int(np.argmax(bad))
            raise ValueError(
                f"request {int(chunk['row'][i])}: sectors {int(chunk['lba'][i])} + "
                f"{int(chunk['nsec'][i])} are not within the array's {self.arr.capacity} sectors")

    def retire(self, sink: Callable[[dict[str, np.ndarray]], None]) -> None:
        """Hand completed requests, in order, to ``sink`` (RETIRED's columns) and free their
        slots. The arrays ``sink`` gets are views of a buffer the next call reuses: a sink that
        keeps them copies them (reused memory costs no page faults; fresh arrays per batch cost
        more than the copies themselves)."""
        RQ = self.W.RQ
        loaded = int(self.W.S[T.S_LOADED])
        if loaded == self.retired:
            return
        if self.out.shape[1] < len(RQ):
            self.out = np.empty((len(RETIRE_COLS), len(RQ)), np.int64)
        k = int(retire_rows(RQ, self.retired, loaded, self.out))
        if k == 0:
            return
        c = dict(zip(RETIRED, self.out[:, :k], strict=True))
        self.t_end = max(self.t_end, int(c["done"].max()))
        sink(c)
        self.retired += k

    def _grow_ring(self) -> None:
        old = self.W.RQ
        cap = 2 * len(old)
        new = _new_reqs(cap)
        live = np.arange(self.retired, int(self.W.S[T.S_LOADED]), dtype=np.int64)
        new[live & (cap - 1)] = old[live & (len(old) - 1)]
        self.W = self.W._replace(RQ=new)

    def _grow_ops(self) -> None:
        old = self.W.OP
        S = self.W.S
        n = len(old)
        new = np.full((2 * n, T.O_COLS), -1, np.int64)
        new[:n] = old
        free = np.zeros(2 * n, np.int64)
        top = int(S[T.S_FREE_OPS])
        free[:top] = self.W.OFREE[:top]
        free[top:top + n] = np.arange(n, 2 * n)
        S[T.S_FREE_OPS] = top + n
        self.W = self.W._replace(OP=new, OFREE=free)

    def run(self, chunks: Iterator[Chunk], sink: Callable[[dict[str, np.ndarray]], None],
            on_records: Callable[[np.ndarray], None] | None = None) -> None:
        """Replay every request of ``chunks``; completed requests go to ``sink`` in order,
        drive operations (with Settings.record) to ``on_records`` (tables.RECORD rows). With
        ``Settings.max_passes`` > 1 (closed loop), ``chunks`` yields the trace's requests pass
        after pass, each pass's rows named apart by the caller; the requests of passes that
        do not run are read ahead at most a ring's worth and never reach ``sink``."""
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
            self.W.S[T.S_FINAL] = 1
            return False

        def fill() -> None:
            """Fill the ring (at least one row: retire, or grow the ring, to make room)."""
            nonlocal pos
            took_any = False
            while True:
                if chunk is None or pos == len(chunk["arrive"]):
                    if not next_chunk():
                        return
                assert chunk is not None
                took = self.load(chunk, pos)
                if took == 0:
                    if took_any:
                        return
                    self.retire(sink)
                    took = self.load(chunk, pos)
                    if took == 0:
                        self._grow_ring()
                        took = self.load(chunk, pos)
                pos += took
                took_any = True

        def flush_records() -> None:
            S = self.W.S
            if on_records is not None and S[T.S_REC]:
                on_records(T.named(self.W.RC[:int(S[T.S_REC])].copy(), T.RECORD))
            S[T.S_REC] = 0

        def flush_events() -> None:
            S = self.W.S
            if S[T.S_EVN]:
                self._events.append(self.W.EVT[:int(S[T.S_EVN])].copy())
            S[T.S_EVN] = 0

        if self.total == 0 and not (self.settings.drain and len(self.tasks.TK)):
            return
        fill()
        while True:
            st = replay(self.cfg, self.W)
            S = self.W.S
            if st == T.DONE:
                break
            if st == T.NEED_INPUT:
                self.retire(sink)
                fill()
            elif st == T.FULL_OPS:
                self._grow_ops()
            elif st == T.FULL_HEAP:
                self.W = self.W._replace(HQ=HP.grown(self.W.HQ, int(S[T.S_HSIZE]),
                                                     2 * len(self.W.HQ)))
            elif st == T.FULL_RECORDS:
                flush_records()
            elif st == T.FULL_EVENTS:
                flush_events()
        self.retire(sink)
        flush_records()
        flush_events()

    # -- what the replay leaves, by name

    def passes(self) -> tuple[int, int]:
        """Closed loop: (passes of the trace run, background tasks that were left when the last
        pass ended: > 0 when ``Settings.max_passes`` stopped the repetition)."""
        S = self.W.S
        return int(S[T.S_PASS]), int(S[T.S_TASKS_AT_END])

    def bins(self) -> dict[str, np.ndarray]:
        """Per drive x interval statistics from 0 to the run's end (``end_ns``): busy time,
        operations and bytes started, queue integral (operations x ns at the drive).

        The end is the last host request's completion, or the completion of an operation
        still in service then, whichever is later: busy time counts an operation to its end
        when it starts. The queue integral, kept as the count at a drive changes, is settled
        to the same end here: the operations in service leave at their completions (their
        events still in the heap), those still queued stay to the end. Unsettled, the last
        interval's queue integral could be below its busy time, which no drive can do (a
        review found 9.9 ms of queue against 11.0 ms busy)."""
        W = self.W
        nd = len(self.arr.d_model)
        iv = int(W.S[T.S_INTERVAL])
        per = W.BN.reshape(4, nd, -1)
        heap = W.HQ[:int(W.S[T.S_HSIZE])]
        done = heap[heap[:, HP.HT_KIND] == T.HK_DONE]
        done_drive = W.OP[done[:, HP.HT_ID], T.O_DRIVE]
        end = max(self.t_end, int(done[:, HP.HT_TIME].max()) if len(done) else 0,
                  int(W.DR[:, T.D_TLAST].max()) if nd else 0)
        used = max(-(-end // iv), 1)
        width = max(used, per.shape[2])
        out = {name: np.zeros((nd, width), np.int64) for name in ("busy", "ops", "bytes", "qint")}
        for name, row in (("busy", T.B_BUSY), ("ops", T.B_OPS), ("bytes", T.B_BYTES),
                          ("qint", T.B_QINT)):
            out[name][:, :per.shape[2]] = per[row]
        for d in np.flatnonzero(W.DR[:, T.D_CNT] > 0).tolist():
            t, cnt = int(W.DR[d, T.D_TLAST]), int(W.DR[d, T.D_CNT])
            for t1 in np.sort(done[done_drive == d, HP.HT_TIME]).tolist() + [end]:
                _spread(out["qint"][d], iv, t, t1, cnt)
                t, cnt = t1, cnt - 1
        res: dict[str, np.ndarray] = {k: v[:, :used] for k, v in out.items()}
        res["interval_ns"] = np.int64(iv)
        res["end_ns"] = np.int64(end)
        return res

    def drive_totals(self) -> dict[str, np.ndarray]:
        """Per drive: busy time (ns) and operations over the whole replay."""
        return {"busy_ns": self.W.DR[:, T.D_BUSY].copy(), "ops": self.W.DR[:, T.D_NOPS].copy()}

    def cache_state(self) -> dict[str, int]:
        """What the controller cache holds at the end (dirty data not yet destaged)."""
        return {"lines": self.cfg.cache_lines,
                "dirty_lines": int(self.W.S[T.S_CACHE + CA.CN_DIRTY]),
                "line_sectors": self.cfg.line_sectors}

    def events(self) -> np.ndarray:
        """The run's events (tables.EVENT rows), in the order they happened."""
        ev = (np.concatenate(self._events) if self._events
              else np.zeros((0, T.EV_COLS), np.int64))
        return T.named(ev, T.EVENT)

    def member_maps(self) -> np.ndarray:
        """The member maps at the end (tables.member_map rows: missing members, replacements)."""
        MP = self.W.MP
        return T.named(MP, T.member_map((MP.shape[1] - T.MP_MEM) // 2))


def _spread(row: np.ndarray, iv: int, t0: int, t1: int, weight: int) -> None:
    """Add ``weight`` x the overlap of [t0, t1) with each bin of ``row`` (bins of ``iv`` ns),
    as the kernels' ``drives._spread``."""
    while t0 < t1:
        b = t0 // iv
        e = min(t1, (b + 1) * iv)
        row[b] += weight * (e - t0)
        t0 = e
