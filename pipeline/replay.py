"""``blocklab replay``: a trace against an array configuration -> a run folder.

The trace is streamed: rows are read from Parquet in batches into a ring of request slots that
the engine (``kernels/engine``, its front door ``Engine``) works through; completed requests
are retired in trace order and written out as they go, so memory stays bounded whatever the
trace's length.

The run folder (written under a temporary name, renamed when complete, owner-only; columns in
``traces/schema.py`` RUN_COLUMNS):

- ``ios.parquet``: per request, arrival, start, completion, latency (null when lost), op,
  sector, size, stream, cache hit, lost (data on no surviving member: a real array fails it);
- ``drive_busy.parquet``: per drive and interval, busy time, operations, bytes and the integral
  of its queue;
- ``drive_ops.parquet`` (``--drive-ops``): every drive operation;
- ``meta.json``: configuration, trace and config sha256, blocklab version, options, counts, the
  drives, elapsed time and requests replayed per second.

Open loop replays the trace's arrival times (divided by ``speed``). Closed loop is taken when the
trace says so (its ``outstanding`` column, written by the synthetic generators) or asked for with
``closed_loop=N`` (N outstanding per stream of the trace, ``think_us`` between a completion and
the next issue). Discards, flushes and other commands are counted and skipped.

``repeat="until-tasks-end"`` (closed loop) runs the trace again, pass after pass, while
background tasks (rebuilds, rebalances, initializations, started or still to come) remain,
as a benchmark looped until a reconstruction has finished; the pass under way when the last
task ends runs to its end; at most ``max_passes`` passes in all (then the tasks finish
without host I/O and the result says so). Each pass streams the Parquet file again (memory
does not grow with the passes). Pass k (from 0) names its requests ``row + k x rows of the
trace`` in ``ios.parquet`` and ``drive_ops.parquet``; its requests are issued as the first
pass's are (a stream's next one its think time after its previous completion), with the
trace's times counted from the start of the pass.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from blocklab.kernels.engine import tables
from blocklab.traces import safety
from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import (
    EVENT_NAMES,
    OP_READ,
    OP_WRITE,
    RUN_SCHEMA_VERSION,
    RUN_SCHEMAS,
    SECTOR_BYTES,
    format_dev,
)
from blocklab.traces.store import (
    ROOM_CHECK_BYTES,
    AtomicFolder,
    TraceMeta,
    check_room,
    open_trace,
    run_parquet_writer,
)

from . import __version__
from . import runmeta as RM
from .driver import BATCH_ROWS, Chunk, Engine, Streams, dense_ids, repeated, run_engine
from .model.array import ArrayModel, Plan, build_array, plan
from .model.config import ArrayConfig, Failure, load_array, settings_for

__all__ = ["build_array", "run_engine", "replay", "settings_for"]

SECTOR = SECTOR_BYTES  # traces/schema.py
#: What ``repeat`` may ask for: run the trace again while background tasks remain.
REPEAT_MODES = ("until-tasks-end",)
#: The most passes of a repeated trace unless told otherwise (a bound on the replay's time:
#: a short trace under a long rebuild would otherwise run for millions of passes).
DEFAULT_MAX_PASSES = 1000


# ---------------------------------------------------------------------------------------------
# blocklab replay


@dataclasses.dataclass
class ReplayResult:
    output: str
    requests: int
    skipped: int
    closed_loop: bool
    # None (JSON null) when no request has a latency: every one lost, or none in the trace
    # (0.0 read as a measured figure: a replay whose every request failed looked instant)
    mean_latency_ms: float | None
    p99_latency_ms: float | None
    elapsed_s: float
    requests_per_s: float
    # per failure: drive, group, failed_s, window_s (rebuild end - failure; None: no rebuild
    # ended), stripes_lost
    rebuilds: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # replay --workers (pipeline/parallel.py): segments, cuts and the overlaps' agreement, or
    # why the trace was replayed serially; None for a plain serial replay
    parallel: dict[str, Any] | None = None
    # passes of the trace run (repeat); requests counts every pass's
    passes: int = 1
    # repeat: background tasks were still under way when max_passes stopped the repetition
    repeat_limit_reached: bool = False
    # what the user should know of a run that went well (run_notes)
    notes: list[str] = dataclasses.field(default_factory=list)
    # requests lost (ios.lost: part of their data on no surviving member; a real array fails
    # them): not in the mean or the p99
    lost: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes (hex): what meta.json records of the trace and the array
    configuration, and what a sweep's resume compares (sweep.survey)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


_TRACE_COLUMNS = ["time_ns", "sector", "size_bytes", "op", "stream", "think_ns", "phase",
                  "outstanding"]


def _scan(pf: pq.ParquetFile, path: Path, closed_loop: int) -> tuple[int, int, Streams | None]:
    """One pass over the small columns: read/write count, skipped count, and for a closed-loop
    replay the streams and phases (checking phases do not decrease), in bounded memory."""
    total = skipped = 0
    counts: dict[tuple[int, int], int] = {}
    windows: dict[int, int] = {}
    traced_closed = None
    last_phase = -1
    row = 0
    for b in pf.iter_batches(batch_size=BATCH_ROWS, columns=["op", "stream", "phase",
                                                              "outstanding"]):
        op = b.column("op").to_numpy()
        keep = (op == OP_READ) | (op == OP_WRITE)
        total += int(keep.sum())
        skipped += int((~keep).sum())
        out_col = b.column("outstanding")
        if traced_closed is None and len(out_col):
            traced_closed = out_col.null_count < len(out_col)
        if closed_loop or traced_closed:
            st = b.column("stream").fill_null(0).to_numpy().astype(np.int64)[keep]
            # the phases are barriers whatever sets the windows: --closed-loop N on an IOR
            # trace dropped them, and its tasks read what they had not written yet
            ph = b.column("phase").fill_null(0).to_numpy().astype(np.int64)[keep]
            if closed_loop:
                ou = np.full(len(st), closed_loop, np.int64)
            else:
                if out_col.null_count:
                    bad = row + int(np.flatnonzero(out_col.is_null().to_numpy(
                        zero_copy_only=False))[0])
                    raise BlocklabError(f"{path}: row {bad}: a closed-loop trace needs "
                                        "'outstanding' on every row")
                ou = out_col.to_numpy().astype(np.int64)[keep]
                if (ou < 1).any():
                    bad = row + int(np.flatnonzero(keep)[np.flatnonzero(ou < 1)[0]])
                    raise BlocklabError(f"{path}: row {bad}: outstanding must be at least 1")
            prev = np.concatenate([[last_phase], ph[:-1]]) if len(ph) else ph
            down = np.flatnonzero(ph < prev)
            if len(down):
                bad = row + int(np.flatnonzero(keep)[down[0]])
                raise BlocklabError(f"{path}: row {bad}: phase {int(ph[down[0]])} after "
                                    f"phase {int(prev[down[0]])}: a closed-loop trace's "
                                    "rows must be in phase order")
            if len(ph):
                last_phase = int(ph[-1])
            ids, inv = dense_ids(st)
            pv, pinv = dense_ids(ph)
            keys, n = dense_ids(pinv * len(ids) + inv)
            n = np.bincount(n)
            for k, c in zip(keys.tolist(), n.tolist(), strict=True):
                p_, s_ = int(pv[k // len(ids)]), int(ids[k % len(ids)])
                counts[(p_, s_)] = counts.get((p_, s_), 0) + c
            wmax = np.zeros(len(ids), np.int64)
            np.maximum.at(wmax, inv, ou)
            for s_, w_ in zip(ids.tolist(), wmax.tolist(), strict=True):
                windows[s_] = max(windows.get(s_, 0), w_)
        row += len(op)
    if not (closed_loop or traced_closed):
        return total, skipped, None
    sids = np.array(sorted(windows), dtype=np.int64)
    phases = np.array(sorted({p_ for p_, _s in counts}), dtype=np.int64)
    ph_cnt = np.zeros(len(phases) * len(sids), dtype=np.int64)
    for (p_, s_), c in counts.items():
        ph_cnt[np.searchsorted(phases, p_) * len(sids) + np.searchsorted(sids, s_)] = c
    return total, skipped, Streams(ids=sids, phase_values=phases, ph_cnt=ph_cnt,
                                   max_window=np.array([windows[s_] for s_ in sids.tolist()],
                                                       dtype=np.int64))


def _chunks(pf: pq.ParquetFile, path: Path, arr: ArrayModel, speed: float, wrap: bool,
            closed_loop: int, think_ns: int, streams: Streams | None,
            row_groups: range | None = None, row0: int = 0,
            batch_rows: int = BATCH_ROWS) -> Iterator[Chunk]:
    """The read and write requests of the trace as engine chunks of ``batch_rows`` trace rows
    (of ``row_groups`` only, the first of which starts at trace row ``row0``: a segment of a
    parallel replay)."""
    row = row0
    last = -1
    for b in pf.iter_batches(batch_size=batch_rows, columns=_TRACE_COLUMNS,
                             row_groups=row_groups):
        op = b.column("op").to_numpy()
        keep = np.flatnonzero((op == OP_READ) | (op == OP_WRITE))
        rows = row + keep
        row += len(op)
        if not len(keep):
            continue
        t = b.column("time_ns").to_numpy()[keep]
        lba = b.column("sector").to_numpy()[keep].astype(np.int64)
        nsec = ((b.column("size_bytes").to_numpy()[keep] + SECTOR - 1) // SECTOR).astype(np.int64)
        beyond = np.flatnonzero(lba + nsec > arr.capacity)
        if len(beyond):
            if not wrap:
                k = int(beyond[0])
                raise BlocklabError(
                    f"{path}: row {int(rows[k])} (sector {int(lba[k])}, {int(nsec[k])} sectors) "
                    f"is beyond the array's {arr.capacity} sectors; use --wrap to fold addresses")
            lba = lba % arr.capacity
            nsec = np.minimum(nsec, arr.capacity - lba)
        sid = b.column("stream").fill_null(0).to_numpy().astype(np.int64)[keep]
        c: Chunk = {"row": rows.astype(np.int64), "lba": lba, "nsec": nsec,
                    "write": (op[keep] == OP_WRITE).astype(np.int64), "sid": sid}
        if streams is None:
            arrive = (t / speed).astype(np.int64) if speed != 1 else t.astype(np.int64)
            prev = np.concatenate([[last], arrive[:-1]])
            back = np.flatnonzero(arrive < prev)
            if len(back):
                k = int(back[0])
                raise BlocklabError(f"{path}: row {int(rows[k])}: arrival time goes backwards "
                                    "(an open-loop trace must be in arrival order)")
            last = int(arrive[-1])
            c.update(arrive=arrive, stream=sid, think=np.zeros(len(keep), np.int64),
                     phase=np.zeros(len(keep), np.int64), outst=np.ones(len(keep), np.int64))
        else:
            c["arrive"] = t.astype(np.int64)
            c["stream"] = np.searchsorted(streams.ids, sid).astype(np.int64)
            ph = b.column("phase").fill_null(0).to_numpy().astype(np.int64)[keep]
            c["phase"] = np.searchsorted(streams.phase_values, ph).astype(np.int64)
            if closed_loop:  # N outstanding per stream, in the trace's streams and phases
                c.update(think=np.full(len(keep), think_ns, np.int64),
                         outst=np.full(len(keep), closed_loop, np.int64),
                         arrive=np.zeros(len(keep), np.int64))
            else:
                c["think"] = b.column("think_ns").fill_null(0).to_numpy().astype(
                    np.int64)[keep]
                c["outst"] = b.column("outstanding").to_numpy().astype(np.int64)[keep]
        yield c


class _RunWriter:
    """Writes the run folder's Parquet files as results come (in a temporary folder; a
    segment of a parallel replay writes its part the same way, and the parts are joined
    without decoding: pipeline/parallel.py)."""

    def __init__(self, folder: Path, record: bool, room: tuple[Path, int] | None = None):
        self.folder = folder
        #: (the run folder's name, the requests it will hold): the room they need is checked
        #: once the first ROOM_CHECK_BYTES are written (a parallel replay's segments do not)
        self.room = room

        def writer(name: str) -> Any:
            return run_parquet_writer(folder / f"{name}.parquet", name)

        self.ios = writer("ios")
        self.ops = writer("drive_ops") if record else None
        self.rows_ = 0
        self.drive_ops = 0

    def requests(self, c: dict[str, np.ndarray]) -> None:
        lat = c["done"] - c["arrive"]
        # the engine's hit: 1 a cache hit, 2 lost. A lost request has no latency (null): a
        # real array fails it, and the model completed it at once with nothing to read, which
        # every mean and percentile would have taken for a fast request
        lost = (c["hit"] & tables.HIT_LOST).astype(bool)
        self.ios.write_table(pa.table({
            "request": c["row"], "arrival_ns": c["arrive"], "start_ns": c["start"],
            "complete_ns": c["done"],
            "latency_ns": pa.array(lat, mask=lost) if lost.any() else lat,
            "op": c["write"].astype(np.uint8), "sector": c["lba"],
            "size_bytes": c["nsec"] * SECTOR, "stream": c["stream"].astype(np.uint32),
            "cache_hit": c["hit"] == 1, "lost": lost,  # (a lost request is no cache hit)
        }, schema=RUN_SCHEMAS["ios"]))
        self.rows_ += len(lat)
        if self.room is not None:
            self._check_room(*self.room)

    def _check_room(self, out: Path, total: int) -> None:
        """A replay whose run files cannot fit is refused after its first ROOM_CHECK_BYTES,
        not when the disk fills (--drive-ops writes about ten times ios.parquet's bytes)."""
        names = ["ios"] + (["drive_ops"] if self.ops is not None else [])
        written = sum((self.folder / f"{n}.parquet").stat().st_size for n in names)
        if written >= ROOM_CHECK_BYTES:
            self.room = None
            check_room(out, written, self.rows_, total,
                       f"of run files ({', '.join(n + '.parquet' for n in names)})")

    def records(self, rc: np.ndarray) -> None:
        assert self.ops is not None
        self.ops.write_table(pa.table({
            "drive": rc["drive"].astype(np.int32), "request": rc["item"],
            "kind": rc["kind"].astype(np.uint8), "queued_ns": rc["qtime"],
            "start_ns": rc["start"], "complete_ns": rc["done"],
            "sector": rc["lba"], "sectors": rc["n"],
            "write": rc["write"].astype(bool), "cache_hit": rc["hit"].astype(bool),
        }, schema=RUN_SCHEMAS["drive_ops"]))
        self.drive_ops += len(rc)

    def close(self) -> None:
        self.ios.close()
        if self.ops is not None:
            self.ops.close()


def parse_failure(text: str) -> tuple[int, float]:
    """``DRIVE@SECONDS`` (``3@120`` or ``3@120s``) -> (drive, seconds)."""
    drive, sep, at = text.partition("@")
    try:
        if not sep:
            raise ValueError
        return int(drive), float(at.removesuffix("s"))
    except ValueError:
        raise BlocklabError(f"--fail {text}: expected DRIVE@SECONDS, e.g. 3@120") from None


def _trace_span_ns(pf: pq.ParquetFile) -> int:
    """The last arrival time of the trace (its time column's maximum)."""
    span = 0
    for i in range(pf.metadata.num_row_groups):
        stats = pf.metadata.row_group(i).column(0).statistics
        if stats is not None and stats.has_min_max:
            span = max(span, int(stats.max))
        else:
            col = pf.read_row_group(i, columns=["time_ns"]).column(0).to_numpy()
            span = max(span, int(col.max()) if len(col) else 0)
    return span


def run_notes(pf: pq.ParquetFile, meta: TraceMeta, trace: Path, cfg: ArrayConfig) -> list[str]:
    """What to tell the user of a replay of ``trace`` (opened as ``pf``, ``meta``) on ``cfg``
    that went well: a trace of several devices put on one volume (``_devices_note``), a
    controller cache that costs nothing (ControllerConfig.free_cache_note), LUNs the host does
    not address (ArrayConfig.first_lun_note)."""
    return [n for n in (_devices_note(pf, meta, trace), cfg.controller.free_cache_note(),
                        cfg.first_lun_note()) if n]


def _devices_note(pf: pq.ParquetFile, meta: TraceMeta, trace: Path) -> str | None:
    """What to tell a user whose trace holds requests of more than one device: a replay puts
    them all on the one volume, in one address space (a tracefs capture of a loop device and
    its backing disk counts each request twice). Read from the device column's statistics in
    the Parquet footer alone: the lowest and highest device, no pass over the trace."""
    if meta.source_format.startswith("synth-"):
        return None  # a generator's devices (SPC-1's ASUs) are parts of the one host volume
    col = pf.schema_arrow.get_field_index("device")
    lo = hi = None
    for i in range(pf.metadata.num_row_groups):
        stats = pf.metadata.row_group(i).column(col).statistics
        if stats is None or not stats.has_min_max:
            return None  # (a writer without statistics: say nothing rather than scan)
        lo = int(stats.min) if lo is None else min(lo, int(stats.min))
        hi = int(stats.max) if hi is None else max(hi, int(stats.max))
    if lo is None or lo == hi:
        return None
    linux = meta.linux_devices
    return (f"{trace} holds requests of several devices ({format_dev(lo, linux)} to "
            f"{format_dev(hi, linux)}): the replay puts them all on one volume, in one address "
            "space; `blocklab ingest --device` keeps one")


#: Replay's pacing options are refused beyond these: a speed of 1e-300 (or nan) put arrivals
#: past int64 and blamed the trace ("arrival time goes backwards"), and inf put them all at
#: 0; a billion outstanding per stream asked for 60 GB of state (a NVMe device's queues hold
#: 64 K commands each); a think time of 1e20 us overflowed. Each bound is far past any use.
SPEED_RANGE = (1e-6, 1e6)
MAX_OUTSTANDING = 1 << 20
MAX_THINK_US = 86_400e6  # a day


def pace_error(speed: float, closed_loop: int, think_us: float) -> tuple[str, str] | None:
    """What is wrong with replay's pacing options: (the option, ``--speed``, ``--closed-loop``
    or ``--think-us``, and what is wrong with it), or None. The command says ``OPTION
    PROBLEM``; a sweep file names its own key instead."""
    lo, hi = SPEED_RANGE
    if not (math.isfinite(speed) and lo <= speed <= hi):
        return "--speed", (f"must be a number from {lo:g} to {hi:g} (the trace's pace is "
                           f"multiplied by it), found {speed}")
    if not 0 <= closed_loop <= MAX_OUTSTANDING:
        return "--closed-loop", (f"must be from 0 to {MAX_OUTSTANDING:,} requests outstanding "
                                 f"per stream, found {closed_loop}")
    if not (math.isfinite(think_us) and 0 <= think_us <= MAX_THINK_US):
        return "--think-us", f"must be from 0 to {MAX_THINK_US:g} (a day), found {think_us}"
    return None


def _check_failed_once(cfg: Any, in_file: int) -> None:
    """A ``--fail`` of a drive already failed (and not replaced) by then: one line naming the
    option, as its check against the trace's span does; the array file's own failures are
    named by the plan (model/array.py), which names the file."""
    failed: dict[int, float] = {}
    events = sorted([(f.at_s, 0, f.drive, i) for i, f in enumerate(cfg.failures)]
                    + [(r.at_s, 1, r.drive, -1) for r in cfg.replacements])
    for at, what, d, i in events:
        if what == 1:
            failed.pop(d, None)
        elif d in failed and i >= in_file:
            raise BlocklabError(f"--fail {d}@{at:g}: drive {d} has failed already, at "
                                f"{failed[d]:g} s, and is not replaced by then")
        else:
            failed.setdefault(d, at)


def replay(trace: str | Path, array: str | Path, output: str | Path, speed: float = 1.0,
           closed_loop: int = 0, think_us: float = 0.0, wrap: bool = False,
           drive_ops: bool = False, progress: Callable[[int, int | None], None] | None = None,
           failures: list[tuple[int, float]] | None = None,
           drain: bool = True, repeat: str | None = None,
           max_passes: int = DEFAULT_MAX_PASSES) -> ReplayResult:
    """Replay ``trace`` on the array ``array`` describes, with its failures and those given
    (drive, seconds); write the run folder ``output``. With ``drain`` false the run ends with
    the last host request instead of finishing the rebuilds and initializations under way
    (how a task's rate is sampled at its start). ``repeat`` (``REPEAT_MODES``, closed loop)
    runs the trace again while tasks remain, up to ``max_passes`` passes (module docstring).
    ``progress`` gets (requests done, requests in all, None when repeating)."""
    bad = pace_error(speed, closed_loop, think_us)
    if bad:
        raise BlocklabError(" ".join(bad))
    check_repeat(repeat, max_passes)
    safety.not_an_input(output, [trace, array], folder=True)
    from .query import check_settings

    check_settings()  # (the summary at the end comes through DuckDB)
    cfg = load_array(array)
    in_file = len(cfg.failures)  # the array file's failures, then --fail's
    if failures:
        for d, at in failures:
            if not 0 <= d < cfg.drives:
                raise BlocklabError(f"--fail {d}@{at:g}: no drive {d}: the array has drives 0 "
                                    f"to {cfg.drives - 1}")
        cfg = dataclasses.replace(cfg, failures=cfg.failures + tuple(
            Failure(d, at) for d, at in failures))
        _check_failed_once(cfg, in_file)
    arr = build_array(cfg)
    trace = Path(trace)
    pf, trace_meta = open_trace(trace)
    total, skipped, streams = _scan(pf, trace, closed_loop)
    closed = streams is not None
    if repeat and not closed:
        raise BlocklabError(f"{trace}: --repeat-until-tasks-end repeats a closed-loop trace, "
                            "and this one is open loop (no 'outstanding' column): replay it "
                            "with --closed-loop N, or repeat it in its generator (IOR "
                            "--repetitions)")
    if repeat and total == 0:
        raise BlocklabError(f"{trace}: --repeat-until-tasks-end: the trace has no read or "
                            "write request to repeat")
    passes_allowed = max_passes if repeat else 1
    if not closed:  # failures happen during the replay, not before or after it
        span_s = _trace_span_ns(pf) / speed / 1e9
        for i, f in enumerate(cfg.failures):
            if not 0 <= f.at_s <= span_s:
                where = array if i < in_file else f"--fail {f.drive}@{f.at_s:g}"
                raise BlocklabError(f"{where}: failure of drive {f.drive} at {f.at_s:g} s is "
                                    f"outside the trace (0 to {span_s:.6g} s)")
        for r in cfg.replacements:  # as a failure: during the replay (one after was taken)
            if not 0 <= r.at_s <= span_s:
                raise BlocklabError(f"{array}: replacement of drive {r.drive} at {r.at_s:g} s "
                                    f"is outside the trace (0 to {span_s:.6g} s)")
    tasks = plan(arr)
    opts = settings_for(cfg, closed=closed, record=drive_ops, drain=drain,
                        max_passes=passes_allowed)
    out = Path(output)
    folder = AtomicFolder(out)  # locked, written as .NAME.tmp-PID (traces/store.py)
    tmp = folder.tmp
    try:
        w = _RunWriter(tmp, drive_ops, (out, total))  # (one pass: the least a repeat needs)
        drv = Engine(arr, opts, total, streams, tasks)

        def sink(c: dict[str, np.ndarray]) -> None:
            safety.check()  # a signal's stop (traces/safety.py), per chunk
            w.requests(c)
            if progress is not None:
                progress(w.rows_, None if repeat else total)

        rows = pf.metadata.num_rows  # pass k's requests are named row + k x rows

        def pass_chunks(k: int) -> Iterator[Chunk]:
            return _chunks(pf, trace, arr, speed, wrap, closed_loop, int(think_us * 1000),
                           streams, row0=k * rows)

        started = time.perf_counter()
        drv.run(repeated(pass_chunks, passes_allowed), sink,
                w.records if drive_ops else None)
        elapsed = time.perf_counter() - started
        passes, tasks_left = drv.passes() if closed else (1, 0)
        w.close()
        bins = drv.bins()
        _write_busy(tmp, arr, bins)
        _write_events(tmp, arr, drv, tasks)
        rep = (RM.Repeat(until=repeat, max_passes=max_passes, passes=passes, rows_per_pass=rows,
                         limit_reached=tasks_left > 0) if repeat else None)
        meta = run_meta(trace, array, cfg, arr, tasks,
                        RM.RunOptions(speed=speed, closed_loop=closed_loop, think_us=think_us,
                                      wrap=wrap, closed=closed),
                        RM.Counts(requests=total * passes, skipped_not_read_write=skipped,
                                  drives=arr.drives,
                                  drive_ops=int(drv.drive_totals()["ops"].sum()),
                                  passes=passes),
                        drv.cache_state(), int(bins["interval_ns"]), elapsed, rep)
        RM.write(tmp, meta)
        folder.commit(0o600)  # the trace's offsets and timing: the owner's alone
    except BaseException as e:
        raise folder.fail(e) from None
    return ReplayResult(rebuilds=_rebuild_windows(arr, drv, tasks),
        output=str(out), requests=total * passes, skipped=skipped, closed_loop=closed,
        **run_latency(out),
        elapsed_s=elapsed, requests_per_s=total * passes / elapsed if elapsed > 0 else 0.0,
        passes=passes, repeat_limit_reached=bool(repeat) and tasks_left > 0,
        notes=run_notes(pf, trace_meta, trace, cfg),
    )


def run_latency(out: Path) -> dict[str, Any]:
    """The run folder ``out``'s summary for ReplayResult (a serial or a parallel replay's):
    ``mean_latency_ms`` and ``p99_latency_ms`` (None when no request has a latency) and
    ``lost``, from the run folder through DuckDB, out of core (queries/run-latency.sql):
    holding every latency for it grew replay's memory by 8 bytes a request."""
    from .query import run_query

    (lat,) = run_query([out], "run-latency").rows()

    def ms(v: Any) -> float | None:
        return None if v is None else float(v)

    return {"mean_latency_ms": ms(lat["mean_ms"]), "p99_latency_ms": ms(lat["quantile_ms"]),
            "lost": int(lat["lost"])}


def check_repeat(repeat: str | None, max_passes: int) -> None:
    """``repeat`` is one of ``REPEAT_MODES`` (or None) and ``max_passes`` at least 1."""
    if repeat is not None and repeat not in REPEAT_MODES:
        raise BlocklabError(f"repeat: expected {' or '.join(REPEAT_MODES)}, found {repeat!r}")
    if isinstance(max_passes, bool) or not isinstance(max_passes, int) or max_passes < 1:
        raise BlocklabError(f"--max-passes: expected a whole number of at least 1, found "
                            f"{max_passes!r}")


def run_meta(trace: Path, array: str | Path, cfg: ArrayConfig, arr: ArrayModel, tasks: Plan,
             options: RM.RunOptions, counts: RM.Counts, cache_at_end: dict[str, int],
             interval_ns: int, elapsed: float, repeat: RM.Repeat | None = None) -> RM.RunMeta:
    """meta.json of a run folder (the serial and the parallel replay write the same keys)."""
    kinds = {code: name for name, code in tables.TASK_KINDS.items()}
    return RM.RunMeta(
        blocklab_version=__version__,
        run_schema_version=RUN_SCHEMA_VERSION,
        trace=RM.TraceRef(path=str(trace), sha256=file_sha256(trace)),
        array=RM.ArrayRef(path=str(array), sha256=file_sha256(Path(array)),
                          config=dataclasses.asdict(cfg)),
        options=options,
        counts=counts,
        cache_at_end=RM.CacheAtEnd(lines=cache_at_end["lines"],
                                   dirty_lines=cache_at_end["dirty_lines"],
                                   line_bytes=cache_at_end["line_sectors"] * SECTOR),
        failures=tuple(cfg.failures),
        tasks=tuple(RM.TaskRef(task=i, kind=kinds[int(t["kind"])],
                               group=tasks.task_group[i], drive=int(t["drive"]),
                               pieces=int(t["np"]), units=int(t["units"]),
                               unit_bytes=int(t["urows"]) * SECTOR)
                    for i, t in enumerate(tasks.TK)),
        interval_ns=interval_ns,
        drives=tuple(RM.DriveRef(drive=i, group=arr.d_group[i], role=arr.d_role[i],
                                 model=arr.d_name[i])
                     for i in range(arr.drives)),
        elapsed_s=elapsed,
        requests_per_s=counts.requests / elapsed if elapsed > 0 else None,
        repeat=repeat,
    )


def _write_busy(folder: Path, arr: ArrayModel, b: dict[str, np.ndarray]) -> None:
    """drive_busy.parquet from per-drive bins (``Engine.bins``): the last interval ends at
    the run's end (``end_ns``)."""
    nd, nb = b["busy"].shape
    iv = int(b["interval_ns"])
    starts = np.arange(nb, dtype=np.int64) * iv
    length = np.minimum(iv, int(b["end_ns"]) - starts)
    length[length <= 0] = iv  # (a run that ended at 0: one whole interval, as before)
    t = np.tile(starts, nd)
    pq.write_table(pa.table({
        "drive": np.repeat(np.arange(nd, dtype=np.int32), nb),
        "group": pa.array(np.repeat(np.array(arr.d_group, dtype=object), nb).tolist()
                          ).dictionary_encode(),
        "time_ns": t, "interval_ns": np.tile(length, nd),
        "busy_ns": b["busy"].ravel(), "ops": b["ops"].ravel(), "bytes": b["bytes"].ravel(),
        "queue_op_ns": b["qint"].ravel(),
    }, schema=RUN_SCHEMAS["drive_busy"]), folder / "drive_busy.parquet", compression="zstd")


def _write_events(folder: Path, arr: ArrayModel, drv: Engine, tasks: Plan) -> None:
    """events.parquet: failures, data loss, task starts, progress and ends (traces/schema.py
    RUN_COLUMNS["events"]); written whenever the run had failures or tasks."""
    if not len(tasks.FL) and not tasks.tasks:
        return
    ev = drv.events()
    ref = ev["ref"]
    drive = ev["drive"]
    group = [tasks.task_group[int(r)] if r >= 0 else (arr.d_group[int(d)] if d >= 0 else "")
             for r, d in zip(ref.tolist(), drive.tolist(), strict=True)]
    names = [EVENT_NAMES[c] for c in ev["code"].tolist()]
    progress = np.array([n.endswith(("_progress", "_end", "_stopped")) for n in names], bool)
    loss = np.array([n == "data_loss" for n in names], bool)
    pq.write_table(pa.table({
        "time_ns": ev["t"],
        "event": pa.array(names, pa.string()).dictionary_encode(),
        "drive": drive.astype(np.int32),
        "group": pa.array(group, pa.string()).dictionary_encode(),
        "fraction": pa.array(np.where(progress, ev["frac"] / 1e6, 0.0), mask=~progress),
        "bytes": pa.array(ev["bytes"], mask=~progress),
        "stripes_lost": pa.array(ev["lost"], mask=~loss),
        "detail": pa.array([f"task {int(r)}" if r >= 0 else None for r in ref.tolist()],
                           pa.string()),
    }, schema=RUN_SCHEMAS["events"]), folder / "events.parquet", compression="zstd")


def _rebuild_windows(arr: ArrayModel, drv: Engine, tasks: Plan) -> list[dict[str, Any]]:
    """Per failure: when it happened, when its rebuild ended (the window), stripes lost."""
    ev = drv.events()
    name = np.array(EVENT_NAMES, dtype=object)[ev["code"]] if len(ev) else np.zeros(0, object)
    out = []
    for f in tasks.FL:
        d, t = int(f["drive"]), int(f["t"])
        ends = ev[(name == "rebuild_end") & (ev["drive"] == d) & (ev["t"] >= t)]
        stops = ev[(name == "rebuild_stopped") & (ev["drive"] == d) & (ev["t"] >= t)]
        lost = ev["lost"][(name == "data_loss") & (ev["drive"] == d) & (ev["t"] == t)]
        spare_failed = None
        if len(stops):  # stopped by the failure of a spare it wrote onto, or by a data loss
            k = int(stops["ref"][0])
            p0, npc = int(tasks.TK["p0"][k]), int(tasks.TK["np"][k])
            dst = set(tasks.PC["dst"][p0:p0 + npc].tolist())
            spare_failed = any(int(g["drive"]) in dst and int(g["t"]) <= int(stops["t"][0])
                               for g in tasks.FL)
        out.append({"drive": d, "group": arr.d_group[d], "failed_s": t / 1e9,
                    "window_s": (int(ends["t"][0]) - t) / 1e9 if len(ends) else None,
                    # a later failure left part of it nothing to be rebuilt from: when it
                    # stopped, and the share it had rebuilt
                    "stopped_s": int(stops["t"][0]) / 1e9 if len(stops) else None,
                    "rebuilt_fraction": int(stops["frac"][0]) / 1e6 if len(stops) else None,
                    "spare_failed": spare_failed, "stripes_lost": int(lost.sum())})
    return out
