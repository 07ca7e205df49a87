"""``blocklab replay --workers N``: one trace replayed in time segments on Dask, stitched into
the run folder a serial replay writes (issue 21, deliverable 2).

How it works
------------
The trace's read and write requests are cut at request indices ``c_1 < ... < c_{S-1}``
(segment k keeps requests ``[c_k, c_{k+1})``). Segment k is one Dask task: it replays requests
``[c_k - M_k, c_{k+1} + M_{k+1})`` from idle drives and an empty cache, with the serial
engine (``kernels/engine`` ``Engine``) unchanged, and keeps the results of its own requests.
``M_k`` is the *margin* of cut k, in requests: before its first request the segment replays
``M_k`` requests of warm-up, so that its drives' queues, heads and caches reach the state the
serial replay has there; after its last one it replays ``M_{k+1}`` more, because a later
arrival can change what an earlier request meets (a drive's scheduler picks among the queued
operations; a write takes cache lines a read would have found).

**The self-check.** Both neighbours of cut k replay the ``2 M_k`` requests around it. The later
one starts cold at ``c_k - M_k`` and the earlier one stops at ``c_k + M_k``, so they are
compared on the middle half, ``[c_k - M_k/2, c_k + M_k/2)``. Where their results (start,
completion, cache hit) agree on every one of those, each neighbour's results near the cut are
the ones the other one, replayed from further away, finds: the margin was enough. Where any
differs, the margin of that cut doubles and both neighbours run again, until they agree or the
margin reaches the limit (a neighbour's length, or ``MAX_MARGIN``). The figures are reported
(meta.json ``parallel``, and the CLI): the fraction of overlap requests identical, and the
largest latency difference, in the last round.

What persists across an idle moment -- no request in flight, no dirty cache data -- is not
nothing: the drives' head positions and their own read-ahead segments, the controller cache's
clean lines and their LRU order, a LUN's sequential-read detector, a mirror's heads. So an
idle point does not by itself make a segment's start exact; the warm-up has to recreate that
state too, and agreement of the overlap is the test that it did. Cuts are put where the trace
has its widest arrival gap near each even split (the likeliest idle point), which is where the
margins converge quickest. On a trace whose queues never drain (saturated) a replay started
late never catches the serial backlog: the agreement stays below 1 and the difference is
reported, not hidden.

**Per-drive bins and drive operations** are owned by time: segment k owns ``[B_k, B_{k+1})``,
where ``B_k`` is a multiple of a grid step ``G`` (the interval a serial replay of this trace
ends with when its last activity is near its last arrival), and ``c_k`` is the first request
arriving at or after ``B_k``. The engine's bins double their interval by merging pairs
(``kernels/engine/drives.py`` ``_fit``), so every segment's bins tile the grid and sum exactly into
the serial run's interval; drive operations are recorded in the order they start, so each
segment's operations started in its own time range, concatenated, are the serial file's rows in
its order. (A run whose completions outrun the last arrival into the next doubling -- a
saturated trace -- can end with an interval coarser than ``G``; its bins are then given to the
segment their start falls in, and ``parallel.drive_busy_exact`` says false.)

**Where exactness is given up**: closed loop (arrivals follow completions: a segment cannot
know when its first request is issued), drive failures and background tasks (a rebuild's
progress spans the whole run), and a trace that cannot be cut (fewer requests than two
segments, or all arriving within one statistics interval, where a cut must fall) are
replayed serially, and the result says why (before a local cluster is started for nothing).

Output: each segment writes its kept rows as Parquet parts (``ios.parquet``, and
``drive_ops.parquet``), with the serial replay's writer (``replay._RunWriter``: the schema,
zstd, no page index), into a ``.seg-*`` folder inside the run folder's temporary
(``replay``'s ``AtomicFolder``): the workers must see the output folder, as a sweep's must.
So the encoding, which was the serial part when the client did it, runs on the workers, in
parallel. The client joins the parts into one ``ios.parquet`` without decoding them
(``traces/parquet_join.py``: each part's pages are copied as they are, and one footer lists
every part's row groups with their byte offsets moved to where the pages now lie). It joins
as results come: the parts of the segments from the first onwards whose results are in are
appended in order while later segments still run; a segment that must run again (its cut's
margin grew) is taken back out, with those after it, when its round starts, and appended
again when its new result comes. The client then writes the footers, drive_busy.parquet and
meta.json and renames the folder into place. Memory is bounded: pages never pass through
the client (the footers' row groups do: a few hundred bytes each), and the overlaps kept for
the check are at most ``MAX_MARGIN`` requests per side.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from blocklab.traces import safety
from blocklab.traces.errors import BlocklabError
from blocklab.traces.parquet_join import ParquetJoin
from blocklab.traces.safety import temporary_name
from blocklab.traces.schema import OP_READ, OP_WRITE
from blocklab.traces.store import (
    ROOM_CHECK_BYTES,
    AtomicFolder,
    check_room,
    open_trace,
    refuse_folder_output,
)

from . import driver as DR
from . import replay as RP
from . import runmeta as RM
from .cluster import RETRIES
from .model.array import build_array, plan
from .model.config import load_array
from .segment import Segment, load_kernels, run_segment

#: The first margin of every cut, in requests.
FIRST_MARGIN = 2048
#: The largest margin, in requests (each side of a cut): bounds a segment's overlap arrays
#: (24 bytes a request, twice) and the replay spent on warm-up.
MAX_MARGIN = 1 << 20
#: Times a cut's margin may double (with FIRST_MARGIN: 2048 -> 1M).
MAX_ROUNDS = 10
#: Cuts go on a grid this many times coarser than the serial run's predicted bin interval
#: (see the module docstring). 1: the finest grid, so that a short trace (its interval is
#: 1 s below 2048 s) can still be cut in many places; a run whose completions outrun its last
#: arrival into one more doubling of the interval then has inexact bins, and says so.
GRID_FACTOR = 1


# ---------------------------------------------------------------------------------------------
# the cut


@dataclasses.dataclass
class TraceIndex:
    """One pass over the trace's time and op columns: what choosing cuts and starting a
    segment at any request needs, in memory bounded by the grid, not the trace."""

    requests: int
    rows: int  # every row of the trace (the rest are not reads or writes)
    grid_ns: int
    # per row group: trace rows and read/write requests before it
    group_rows: list[int]
    group_requests: list[int]
    # per grid line B = i * grid_ns: the first request arriving at or after B (requests if
    # none), and the gap before it (ns; -1 for request 0 or none)
    first_at: np.ndarray
    gap_before: np.ndarray
    backwards: bool  # an arrival earlier than the one before (the serial replay says where)
    size_bytes: int = 0  # of the read and write requests, all told


def _grid(last_arrival_ns: int) -> int:
    """The grid step: GRID_FACTOR x the interval a serial replay's bins end with when its last
    activity is the last arrival (``kernels/engine/drives.py`` ``_fit``)."""
    first = DR.Settings()
    iv = first.interval_ns
    while last_arrival_ns >= first.nbins * iv:
        iv *= 2
    return GRID_FACTOR * iv


def index_trace(pf: pq.ParquetFile, speed: float) -> TraceIndex:
    last = RP._trace_span_ns(pf)
    grid = _grid(int(last / speed))
    lines = int(last / speed) // grid + 2
    first_at = np.full(lines, -1, np.int64)
    gap = np.full(lines, -1, np.int64)
    group_rows: list[int] = []
    group_requests: list[int] = []
    rows = reqs = size = 0
    prev = -1
    backwards = False
    for g in range(pf.metadata.num_row_groups):
        group_rows.append(rows)
        group_requests.append(reqs)
        for b in pf.iter_batches(batch_size=DR.BATCH_ROWS,
                                 columns=["time_ns", "op", "size_bytes"], row_groups=[g]):
            op = b.column("op").to_numpy()
            keep = np.flatnonzero((op == OP_READ) | (op == OP_WRITE))
            rows += len(op)
            if not len(keep):
                continue
            t = b.column("time_ns").to_numpy()[keep]
            size += int(b.column("size_bytes").to_numpy()[keep].sum())
            # the very arithmetic of replay._chunks, so the cut sees the engine's arrivals
            arrive = (t / speed).astype(np.int64) if speed != 1 else t.astype(np.int64)
            before = np.concatenate([[prev], arrive[:-1]])
            if (arrive < before).any():
                backwards = True
            # grid lines in (prev, last of batch]: their first request is in this batch
            lo = prev // grid + 1 if prev >= 0 else 0
            hi = int(arrive[-1]) // grid
            if hi >= lo:
                line = np.arange(lo, hi + 1, dtype=np.int64)
                at = np.searchsorted(arrive, line * grid, side="left")
                first_at[line] = reqs + at
                gap[line] = np.where(reqs + at > 0, arrive[at] - before[at], -1)
            prev = int(arrive[-1])
            reqs += len(keep)
    first_at[first_at < 0] = reqs
    return TraceIndex(reqs, rows, grid, group_rows, group_requests, first_at, gap, backwards,
                      size)


def margin_to_start(cfg: Any, ix: TraceIndex) -> int:
    """The first margin of every cut: FIRST_MARGIN, or the requests that move as many bytes as
    the controller cache holds, whichever is more (at most MAX_MARGIN). A cache keeps the lines
    of the last requests that fit in it, so a warm-up that moves fewer bytes cannot recreate
    what it holds at the cut, and its neighbours cannot agree: each round that finds so
    doubles the margin and replays both neighbours again. A review's 14-drive RAID-5 with a
    512 MiB cache, an SPC-1 trace of 1.95 M requests on 2 workers, took 6 rounds (2,048 to
    65,536 requests; 11.9 M requests replayed, 4 x the serial time) to get there."""
    cache = int(cfg.controller.cache_bytes)
    if cache <= 0 or ix.requests == 0 or ix.size_bytes <= 0:
        return FIRST_MARGIN
    per_request = ix.size_bytes / ix.requests
    return int(min(MAX_MARGIN, max(FIRST_MARGIN, -(-cache // max(int(per_request), 1)))))


def _uncut(ix: TraceIndex, segments: int) -> str:
    """Why no cut was found for ``segments`` segments."""
    if segments < 2:
        return "one segment"
    return (f"its requests cannot be cut in time: a cut falls on a statistics interval's "
            f"edge ({ix.grid_ns / 1e9:g} s here), and they all arrive within one")


def choose_cuts(ix: TraceIndex, segments: int) -> list[int]:
    """Grid lines to cut at (ascending): for each even split of the requests, among the grid
    lines whose first request is within a quarter of a segment of it, those whose arrival gap
    before their first request is at least half the widest there (the likeliest idle
    points), and of those the nearest to the split.

    Nearest, not simply the widest gap: the longest segment is the parallel replay's critical
    path, and the widest gap of a quarter-segment window lands anywhere in it (measured on the
    bench's 10 M Poisson requests: segments of 59 % and 41 %, so 2 workers gave 1.5 x instead of
    nearly 2 x). Half the widest gap is still one of the rarest of the window (of m
    exponential gaps about the square root of m qualify), and where idle points come
    periodically (bursts) every one qualifies and the split's own is taken."""
    n = ix.requests
    if segments < 2 or n < 2:
        return []
    per = n / segments
    lines: list[int] = []
    usable = np.flatnonzero((ix.first_at > 0) & (ix.first_at < n))
    for k in range(1, segments):
        target = k * per
        near = usable[np.abs(ix.first_at[usable] - target) <= per / 4]
        if not len(near):  # no grid line near: the nearest one
            if not len(usable):
                break
            near = usable[[int(np.argmin(np.abs(ix.first_at[usable] - target)))]]
        gaps = ix.gap_before[near]
        wide = near[gaps >= gaps.max() / 2]
        # the nearest to the split; between equals, the later grid line (of the lines in one
        # gap, the one just before the request: what drains in the gap is then the earlier
        # segment's, which replayed all that came before it)
        dist = np.abs(ix.first_at[wide] - target)
        best = int(wide[np.lexsort((wide, -dist))[-1]])
        if not lines or ix.first_at[best] > ix.first_at[lines[-1]]:
            lines.append(best)
    return lines


# ---------------------------------------------------------------------------------------------
# the parallel replay


@dataclasses.dataclass
class CutCheck:
    """The self-check at one cut, in the last round."""

    request: int  # the cut: first request of the later segment
    time_ns: int
    margin: int  # requests replayed by both neighbours on each side
    overlap: int  # requests compared
    identical: int
    max_latency_diff_ns: int
    rounds: int


def _compare(tail: np.ndarray, head: np.ndarray, margin: int) -> tuple[int, int, int]:
    """(requests compared, identical, largest |completion difference| in ns) of the earlier
    segment's tail and the later one's head, both the requests ``[cut - margin, cut +
    margin)``: the middle half of them, ``[cut - margin/2, cut + margin/2)``. The first
    quarter is the later segment's cold start and the last quarter the earlier one's end
    (requests that did not meet the arrivals after it), where they are expected to differ;
    agreeing in between, each is what the other, replayed from further away, finds.
    Arrivals are the trace's, so a completion difference is the latency difference."""
    h = max(margin // 2, 1)
    a, b = tail[:, margin - h:margin + h], head[:, margin - h:margin + h]
    k = min(a.shape[1], b.shape[1])
    a, b = a[:, :k], b[:, :k]
    same = (a == b).all(axis=0)
    diff = int(np.abs(a[1] - b[1]).max()) if k else 0
    return k, int(same.sum()), diff


def _serial(note: str, **kw: Any) -> RP.ReplayResult:
    r = RP.replay(**kw)
    r.parallel = {"segments": 1, "serial_because": note}
    return r


def replay_parallel(trace: str | Path, array: str | Path, output: str | Path,
                    workers: int | None = None, scheduler: str | None = None,
                    segments: int | None = None, timeout: float = 10.0, speed: float = 1.0,
                    closed_loop: int = 0, think_us: float = 0.0, wrap: bool = False,
                    drive_ops: bool = False,
                    failures: list[tuple[int, float]] | None = None,
                    progress: Callable[[int, int], None] | None = None,
                    first_margin: int | None = None) -> RP.ReplayResult:
    """Replay ``trace`` in ``segments`` time segments (default: one per worker) on a Dask
    cluster (``scheduler``, or a local one of ``workers`` processes) and write the run folder
    ``output`` a serial replay writes, plus meta.json ``parallel``: the cuts, margins and the
    agreement of the overlaps. Replays serially, saying why in ``result.parallel``, what
    cannot be cut (see the module docstring). ``progress(done, total)`` counts segments.
    ``first_margin``: every cut's first margin, in requests (default ``margin_to_start``)."""
    if workers is not None and workers < 1:
        raise BlocklabError(f"--workers must be at least 1, found {workers}")
    if segments is not None and segments < 1:
        raise BlocklabError(f"--segments must be at least 1, found {segments}")
    safety.not_an_input(output, [trace, array], folder=True)
    from .query import check_settings

    check_settings()  # (the summary at the end comes through DuckDB)
    kw: dict[str, Any] = dict(trace=trace, array=array, output=output, speed=speed,
                              closed_loop=closed_loop, think_us=think_us, wrap=wrap,
                              drive_ops=drive_ops, failures=failures)
    if RP.pace_error(speed, closed_loop, think_us):
        return RP.replay(**kw)  # its one-line error
    trace = Path(trace)
    cfg = load_array(array)
    pf, trace_meta = open_trace(trace)
    if closed_loop:
        return _serial("closed loop: a request is issued when an earlier one completes, so "
                       "no segment can start on its own", **kw)
    if pf.schema_arrow.get_field_index("outstanding") >= 0:
        col = pf.read_row_group(0, columns=["outstanding"]).column(0) \
            if pf.metadata.num_row_groups else None
        if col is not None and len(col) and col.null_count < len(col):
            return _serial("the trace is closed loop (its outstanding column): no segment "
                           "can start on its own", **kw)
    arr = build_array(cfg)
    tasks = plan(arr)
    if failures or cfg.failures or tasks.tasks:
        return _serial("drive failures and background tasks span the whole run (a rebuild's "
                       "progress and the missing members carry across any cut)", **kw)
    if workers == 1 and not scheduler and segments in (None, 1):
        return _serial("one worker", **kw)
    ix = index_trace(pf, speed)
    if ix.backwards:
        return RP.replay(**kw)  # the serial replay names the row where time goes backwards
    if ix.requests <= 1:
        return _serial("the trace has one request" if ix.requests else "the trace has no "
                       "requests", **kw)
    refuse_folder_output(Path(output))  # (before a cluster starts: AtomicFolder, in _run)
    local = segments or workers or os.cpu_count() or 1  # (a local cluster's default size)
    if not scheduler and not choose_cuts(ix, local):
        # known before a local cluster is started for nothing (2.4 s of a short trace)
        return _serial(_uncut(ix, local), **kw)
    client, cluster = None, None

    def release() -> None:
        """Close the client, then a local cluster, each once (even if closing the client
        fails)."""
        nonlocal client, cluster
        c, k = client, cluster
        client = cluster = None
        try:
            if c is not None:
                c.close()
        finally:
            if k is not None:
                k.close()

    try:
        from .cluster import connect, warm_cluster, warm_kernels

        t0 = time.perf_counter()
        client, cluster = connect(scheduler, workers, timeout)
        connect_s = time.perf_counter() - t0
        nworkers = len(client.scheduler_info().get("workers", {})) or (workers or 1)
        want = segments or nworkers
        lines = choose_cuts(ix, want)
        if not lines:
            release()
            return _serial(_uncut(ix, want), **kw)
        t_warm = time.perf_counter()
        warm_s = warm_kernels()
        t0 = time.perf_counter()
        warm_cluster(client, local=cluster is not None)
        warm_s += time.perf_counter() - t0  # (a user's workers may compile: it counts)
        # every worker process loads the kernels from the cache before the segments start
        # (at once, each in its own process): otherwise each worker's first segment does, in
        # the time the segments are measured by (1 to 3 s here, against a serial replay's
        # process that has them)
        t0 = time.perf_counter()
        client.run(load_kernels, str(Path(array).absolute()), drive_ops, on_error="ignore")
        warm_s += time.perf_counter() - t0
        setup_s = connect_s + time.perf_counter() - t_warm
        first = margin_to_start(cfg, ix) if first_margin is None else first_margin
        res = _run(client, ix, lines, cfg, arr, tasks, trace, Path(array), Path(output),
                   speed, wrap, drive_ops, nworkers, scheduler or "local", warm_s, setup_s,
                   release, progress, first)
        res.notes = RP.run_notes(pf, trace_meta, trace, cfg)
        return res
    finally:
        try:
            release()
        finally:
            # a local worker may have written into the temporary after it was removed (a
            # stop while segments ran); the workers are gone now. (The name holds this
            # process's id.)
            shutil.rmtree(temporary_name(Path(output)), ignore_errors=True)


@dataclasses.dataclass
class _Cuts:
    """The cuts of a parallel replay (see the module docstring) and their margins, which
    grow round by round where a cut's neighbours disagree."""

    cuts: list[int]  # segment k keeps requests [cuts[k], cuts[k + 1])
    bounds: list[int]  # segment k owns bins and drive operations in [bounds[k], bounds[k + 1])
    limit: list[int]  # the largest margin of cut k (1..S-1): at most a neighbour's length
    margin: list[int]  # requests replayed by both neighbours on each side of cut k
    rounds: list[int]  # times the margin of cut k has doubled

    @classmethod
    def plan(cls, ix: TraceIndex, lines: list[int], first_margin: int) -> _Cuts:
        n = ix.requests
        cuts = [0] + [int(ix.first_at[g]) for g in lines] + [n]
        bounds = [-1] + [g * ix.grid_ns for g in lines] + [1 << 62]
        S = len(cuts) - 1
        limit = [0] + [min(cuts[k] - cuts[k - 1], cuts[k + 1] - cuts[k], MAX_MARGIN)
                       for k in range(1, S)] + [0]
        margin = [0] + [min(first_margin, limit[k]) for k in range(1, S)] + [0]
        return cls(cuts, bounds, limit, margin, [0] * (S + 1))

    @property
    def segments(self) -> int:
        return len(self.cuts) - 1

    def segment(self, k: int, ix: TraceIndex, trace: Path, array: Path, speed: float,
                wrap: bool, drive_ops: bool, tmp: Path) -> Segment:
        """Segment k with the margins of this round."""
        cuts, margin = self.cuts, self.margin
        first, end = cuts[k] - margin[k], cuts[k + 1] + margin[k + 1]
        g = int(np.searchsorted(ix.group_requests, first, side="right")) - 1
        return Segment(k, str(trace), str(array), speed, wrap, drive_ops, first, cuts[k],
                       cuts[k + 1], end, (self.bounds[k], self.bounds[k + 1]), g,
                       ix.group_rows[g], ix.group_requests[g], str(tmp), ix.rows)

    def check(self, results: dict[int, dict[str, Any]], checks: dict[int, CutCheck]) -> list[int]:
        """Compare each cut's neighbours (into ``checks``); double the margin of each cut
        whose overlap disagrees, while it may grow; return the segments to replay again."""
        again: set[int] = set()
        for k in range(1, self.segments):
            a, b = results[k - 1], results[k]
            nk, same, diff = _compare(a["tail"], b["head"], self.margin[k])
            checks[k] = CutCheck(self.cuts[k], self.bounds[k], self.margin[k], nk, same, diff,
                                 self.rounds[k] + 1)
            if same < nk and self.margin[k] < self.limit[k] and \
                    self.rounds[k] + 1 < MAX_ROUNDS:
                self.margin[k] = min(2 * self.margin[k], self.limit[k])
                self.rounds[k] += 1
                again |= {k - 1, k}
        return sorted(again)


class _Joins:
    """The run's Parquet files, joined from the segments' parts in segment order as their
    results come (see the module docstring), and the time spent joining."""

    def __init__(self) -> None:
        self.files: list[tuple[str, ParquetJoin]] = []
        self.joined = 0  # segments whose parts are in the run's files, in order
        self.seconds = self.cpu_s = 0.0

    def open(self, tmp: Path, drive_ops: bool) -> None:
        for name in ["ios"] + (["drive_ops"] if drive_ops else []):
            self.files.append((name, ParquetJoin(tmp / f"{name}.parquet")))

    def rewind(self, k: int) -> None:
        """Take segment k and those after it back out (they are to be replayed again)."""
        if self.joined > k:
            for _name, j in self.files:
                j.truncate(k)
            self.joined = k

    def ready(self, results: dict[int, dict[str, Any]], pending: set[int], S: int) -> None:
        """Append the parts of the segments that follow those joined, while their results
        are in and not to be replaced in this round: the join overlaps the segments still
        running. A segment replayed again later is taken back out (with those after it)
        when its round starts."""
        t0, c0 = time.perf_counter(), time.thread_time()
        while self.joined < S and self.joined in results and self.joined not in pending:
            safety.check()
            for name, j in self.files:
                j.append(Path(results[self.joined]["part"]) / f"{name}.parquet")
            self.joined += 1
        self.seconds += time.perf_counter() - t0
        self.cpu_s += time.thread_time() - c0

    def abort(self) -> None:
        for _name, j in self.files:
            j.abort()


class _Rounds:
    """The segments' results, round by round, as Dask returns them."""

    def __init__(self, client: Any, trace: Path,
                 progress: Callable[[int, int], None] | None,
                 room: tuple[Path, Path, int]) -> None:
        self.client = client
        self.trace = trace
        self.progress = progress
        self.room = room  # (run folder, its temporary, requests): see _check_room
        self.room_checked = False
        self.results: dict[int, dict[str, Any]] = {}
        self.futures: list[Any] = []  # the round's, while it runs
        self.done = 0  # segments finished, reruns included
        self.replayed = 0  # requests replayed: warm-ups, tails and reruns included
        self.lost_attempts = 0  # segments' attempts whose worker died (Dask ran them again)

    def run(self, segments: list[Segment], joins: _Joins, S: int) -> None:
        """Submit one round's segments and take their results as they come (a segment's
        earlier result and its parts are replaced), joining the parts that are ready."""
        from distributed import as_completed

        from .cluster import first_line

        pending = {seg.index for seg in segments}
        self.futures = futures = [
            self.client.submit(run_segment, seg, key=f"blocklab-seg-{seg.index}-"
                               f"{uuid.uuid4().hex[:12]}", pure=False, retries=RETRIES)
            for seg in segments]
        for fut in as_completed(futures, loop=self.client.loop):
            safety.check()
            try:
                r = fut.result()
            except BlocklabError:
                raise
            except Exception as e:  # KilledWorker after RETRIES, a lost scheduler
                lost = ("; the connection to the Dask scheduler was lost"
                        if self.client.status != "running" else "")
                # a fault of the machines, not of the request: exit 1 (docs/bad-input.md; it
                # was 2, "bad input", until 2026-11-30)
                raise safety.SystemFault(
                    f"{self.trace}: a segment of the parallel replay failed{lost}: "
                    f"{type(e).__name__}: {first_line(e)}") from None
            if "error" in r:  # (run_segment: met again anywhere, so not run again)
                kind, *what = r["error"]
                if kind == "os":
                    raise safety.os_error(OSError(*what), self.room[0]) from None
                # the workers were given absolute paths (see _run): the message names the
                # trace as the user gave it, as a serial replay's does (a review)
                given = str(self.trace)
                raise BlocklabError(what[-1].replace(str(Path(given).absolute()), given)
                                    ) from None
            old = self.results.get(r["index"])
            if old is not None:
                shutil.rmtree(old["part"], ignore_errors=True)
            self._drop_dead_attempts(r)
            self.results[r["index"]] = r
            pending.discard(r["index"])
            self.replayed += r["replayed"]
            self.done += 1
            self._check_room()
            if self.progress is not None:
                self.progress(self.done, self.done + len(futures) - sum(
                    f.done() for f in futures))
            joins.ready(self.results, pending, S)
        self.futures = []

    def _drop_dead_attempts(self, r: dict[str, Any]) -> None:
        """Remove, and count, the parts of this segment's attempts whose worker died (Dask ran
        the segment again elsewhere): they stayed in the temporary until the run's end,
        uncounted, and the command never said a worker had died (a review). Only one attempt
        of a segment runs at a time, so any other part of it is a dead one's."""
        keep = Path(r["part"]).name
        for q in Path(r["part"]).parent.glob(f".seg-{r['index']:05d}-*"):
            if q.name != keep:
                shutil.rmtree(q, ignore_errors=True)
                self.lost_attempts += 1

    def _check_room(self) -> None:
        """Refuse, once the parts in hold ROOM_CHECK_BYTES, a run whose files cannot fit: at
        its peak the parts and the files joined from them are both on the disk."""
        if self.room_checked:
            return
        written = sum(r["bytes"] for r in self.results.values())
        if written < ROOM_CHECK_BYTES:
            return
        out, tmp, total = self.room
        self.room_checked = True
        on_disk = sum(f.stat().st_size for f in tmp.rglob("*") if f.is_file())
        check_room(out, written, sum(r["kept"] for r in self.results.values()), total,
                   "of run files and, until they are joined, the segments' parts", copies=2,
                   on_disk=on_disk)

    def cancel(self) -> None:
        if self.futures:
            with contextlib.suppress(Exception):
                self.client.cancel(self.futures)


def _parallel_record(cuts: _Cuts, checks: dict[int, CutCheck], rounds: _Rounds,
                     joins: _Joins, info: dict[str, Any], ix: TraceIndex, nworkers: int,
                     scheduler: str, warm_s: float, setup_s: float,
                     teardown_s: float) -> dict[str, Any]:
    """meta.json ``parallel``: the segments, the cuts' self-checks and the times."""
    S = cuts.segments
    results = rounds.results
    overlap = sum(c.overlap for c in checks.values())
    identical = sum(c.identical for c in checks.values())
    return {
        "segments": S, "workers": nworkers, "scheduler": scheduler,
        "requests_replayed": rounds.replayed,  # warm-ups, tails and reruns included
        # attempts whose worker died partway (each found by the part it left): not counted
        # in requests_replayed, which counts what the workers returned
        "attempts_lost": rounds.lost_attempts,
        "overlap_requests": overlap, "identical_fraction": identical / overlap
        if overlap else 1.0,
        "max_latency_diff_ns": max((c.max_latency_diff_ns for c in checks.values()),
                                   default=0),
        "agreed": identical == overlap,
        "drive_busy_exact": info["bins_exact"],
        # setup_s: connecting to (or starting) the cluster and loading the kernels, warm_s
        # included; teardown_s: disconnecting (and stopping a local cluster). What a cluster
        # kept up between replays would not pay again
        "grid_ns": ix.grid_ns, "warm_s": warm_s, "setup_s": setup_s, "teardown_s": teardown_s,
        "cuts": [dataclasses.asdict(checks[k]) for k in range(1, S)],
        "segment_seconds": [results[k]["seconds"] for k in range(S)],
        "segment_cpu_s": [results[k]["cpu_s"] for k in range(S)],
        "stitch_s": info["seconds"],
        "join_s": joins.seconds + info["join_s"], "join_cpu_s": joins.cpu_s + info["join_cpu_s"],
    }


def _run(client: Any, ix: TraceIndex, lines: list[int], cfg: Any, arr: Any, tasks: Any,
         trace: Path, array: Path, out: Path, speed: float, wrap: bool, drive_ops: bool,
         nworkers: int, scheduler: str, warm_s: float, setup_s: float,
         release: Callable[[], None], progress: Callable[[int, int], None] | None,
         first_margin: int) -> RP.ReplayResult:
    n = ix.requests
    cuts = _Cuts.plan(ix, lines, first_margin)
    S = cuts.segments
    folder = AtomicFolder(out)
    tmp = folder.tmp
    rounds = _Rounds(client, trace, progress, (out, tmp, n))
    joins = _Joins()
    try:
        joins.open(tmp, drive_ops)
        todo = list(range(S))
        checks: dict[int, CutCheck] = {}
        started = time.perf_counter()
        while todo:
            joins.rewind(todo[0])
            # the workers get absolute paths: they run in their own working folders, and a
            # relative trace name there replayed another file of that name, or none (a
            # review found a worker's traces/idle.parquet replayed in the client's place)
            rounds.run([cuts.segment(k, ix, trace.absolute(), array.absolute(), speed, wrap,
                                     drive_ops, tmp.absolute()) for k in todo], joins, S)
            todo = cuts.check(rounds.results, checks)
        elapsed = time.perf_counter() - started
        assert joins.joined == S, (joins.joined, S)
        # the cluster's work is done: free it now (a local one's workers stop, so none can
        # still write into the temporary), not after the stitch and the run's summary. Every
        # part is in: a failure to close does not cost the run (the handles are gone either
        # way, and the command's end retries nothing)
        t0 = time.perf_counter()
        with contextlib.suppress(Exception):
            release()
        teardown_s = time.perf_counter() - t0
        results = [rounds.results[k] for k in range(S)]
        info = _stitch(tmp, arr, results, joins.files, cuts.bounds)
        par = _parallel_record(cuts, checks, rounds, joins, info, ix, nworkers, scheduler,
                               warm_s, setup_s, teardown_s)
        skipped = ix.rows - n
        meta = RP.run_meta(trace, array, cfg, arr, tasks,
                           RM.RunOptions(speed=speed, closed_loop=0, think_us=0.0, wrap=wrap,
                                         closed=False),
                           RM.Counts(requests=n, skipped_not_read_write=skipped,
                                     drives=arr.drives, drive_ops=info["drive_ops"],
                                     passes=1),
                           results[S - 1]["cache"], info["interval_ns"], elapsed)
        RM.write(tmp, dataclasses.replace(meta, parallel=par))
        folder.commit(0o600)
    except BaseException as e:
        rounds.cancel()
        joins.abort()
        raise folder.fail(e) from None
    res = RP.ReplayResult(output=str(out), requests=n, skipped=skipped, closed_loop=False,
                          **RP.run_latency(out), elapsed_s=elapsed,
                          requests_per_s=n / elapsed if elapsed > 0 else 0.0)
    res.parallel = par
    return res


def _stitch(tmp: Path, arr: Any, results: list[dict[str, Any]],
            joins: list[tuple[str, ParquetJoin]], bounds: list[int]) -> dict[str, Any]:
    """Finish the run's files: the footers of ios.parquet (and drive_ops.parquet), whose
    segments' parts are all appended; drive_busy.parquet from their own bins, summed; remove
    the parts."""
    t0, c0 = time.perf_counter(), time.thread_time()
    for _name, j in joins:
        j.close()
    join_s, join_cpu = time.perf_counter() - t0, time.thread_time() - c0
    # bins: each segment's own time range at its interval, summed at the final interval
    iv = max(int(r["bins"]["interval_ns"]) for r in results)
    # to the run's end, as the serial replay's (Engine.bins: the last segment's end)
    end = max(int(r["bins"]["end_ns"]) for r in results)
    used = max(-(-end // iv), 1)
    nd = arr.drives
    names = ("busy", "ops", "bytes", "qint")
    width = used
    for r in results:
        width = max(width, -(-r["bins"]["busy"].shape[1] * int(r["bins"]["interval_ns"]) // iv))
    total = {k: np.zeros((nd, width), np.int64) for k in names}
    exact = True
    for k, r in enumerate(results):
        b = r["bins"]
        siv = int(b["interval_ns"])
        nb = b["busy"].shape[1]
        start = np.arange(nb, dtype=np.int64) * siv
        a, z = bounds[k], bounds[k + 1]
        mine = (start >= a) & (start < z) if k else start < z
        if (a > 0 and a % siv) or (z < (1 << 62) and z % siv):
            exact = False  # a bin straddles the boundary: given to the segment it starts in
        f = iv // siv
        for name in names:
            x = np.where(mine, b[name], 0)
            pad = (-nb) % f
            x = np.pad(x, ((0, 0), (0, pad))).reshape(nd, -1, f).sum(axis=2)
            total[name][:, :x.shape[1]] += x
    bins = {name: total[name][:, :used] for name in names}
    bins["interval_ns"] = np.asarray(iv, np.int64)
    bins["end_ns"] = np.asarray(end, np.int64)
    RP._write_busy(tmp, arr, bins)
    for r in results:
        shutil.rmtree(r["part"], ignore_errors=True)
    # parts of attempts that died (Dask ran their segment again) are in the temporary too
    for p in tmp.glob(".seg-*"):
        shutil.rmtree(p, ignore_errors=True)
    return {"interval_ns": iv, "drive_ops": int(total["ops"].sum()), "bins_exact": exact,
            "seconds": time.perf_counter() - t0, "join_s": join_s, "join_cpu_s": join_cpu}
