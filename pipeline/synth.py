"""``blocklab synth`` and ``blocklab spc1 search``: synthetic workloads -> trace Parquet files,
and the highest SPC-1 load an array carries within a response-time limit.

The volume's capacity comes from ``--capacity SIZE`` or from an array configuration
(``--array CONFIG.toml``: the host capacity replay addresses, in sectors). The trace file records
the generator, its options and its seed in the file metadata (``source_format`` ``synth-spc1``,
``synth-ior``, ``synth-iometer``, ``synth-orion``; options under ``extra``); the same options and
seed give a byte-identical file.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from blocklab.traces.errors import BlocklabError
from blocklab.traces.safety import not_an_input
from blocklab.traces.schema import SECTOR_BYTES
from blocklab.traces.store import ROOM_CHECK_BYTES, TraceMeta, TraceWriter, check_room
from blocklab.traces.synth import iometer, ior, orion, parse_count, parse_size, spc1

from . import __version__

Progress = Callable[[int, int], None]


class _Plan(Protocol):
    def batches(self, chunk_rows: int = ...) -> Any: ...
    def extra(self) -> dict[str, Any]: ...


@dataclasses.dataclass
class SynthResult:
    output: str
    generator: str
    requests: int
    elapsed_s: float
    requests_per_s: float
    options: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Volume:
    """Where a synthetic trace goes: its capacity in sectors, and the array it came from."""

    capacity_sectors: int | None
    array: str | None = None
    disks: int | None = None  # drives of the array's groups (count x width), spares excepted


def volume(capacity: str | None, array: str | Path | None, required: bool = True) -> Volume:
    """The capacity from ``--capacity`` or ``--array`` (exactly one; optional when not
    ``required``)."""
    if capacity is not None and array is not None:
        raise BlocklabError("--capacity and --array: give one of them, not both")
    if array is not None:
        from .model.config import load_array
        from .replay import build_array

        cfg = load_array(array)
        return Volume(int(build_array(cfg).capacity), str(array),
                      sum(g.count * g.width for g in cfg.groups))
    if capacity is not None:
        n = parse_size(capacity, "--capacity")
        if n <= 0 or n % SECTOR_BYTES:
            raise BlocklabError(f"--capacity: must be a positive multiple of {SECTOR_BYTES} "
                                f"bytes, found {n}")
        return Volume(n // SECTOR_BYTES)
    if required:
        raise BlocklabError("give the volume's size with --capacity SIZE or --array CONFIG.toml")
    return Volume(None)


def write_trace(output: str | Path, plan: _Plan, generator: str, vol: Volume,
                progress: Progress | None = None, total: int = 0) -> SynthResult:
    """Write the plan's batches to ``output`` (atomic, mode 0600) with its metadata."""
    not_an_input(output, [vol.array] if vol.array is not None else [])
    extra = plan.extra()
    if vol.array is not None:
        extra["array"] = vol.array
    meta = TraceMeta(source_format=f"synth-{generator}", blocklab_version=__version__,
                     extra=extra)
    started = time.perf_counter()
    rows = 0
    room_checked = False
    with TraceWriter(output, meta) as w:
        for batch in plan.batches():
            assert isinstance(batch, pa.RecordBatch)
            w.write(batch)
            rows += batch.num_rows
            if progress:
                progress(rows, max(total, rows))
            done, written = w.encoded
            if not room_checked and done and written >= ROOM_CHECK_BYTES:
                room_checked = True  # (--requests 1e13 wrote until the disk was full)
                check_room(Path(output), written, done, total, "of Parquet",
                           "ask for fewer requests, or write it elsewhere")
    elapsed = time.perf_counter() - started
    return SynthResult(str(output), generator, rows, elapsed,
                       rows / elapsed if elapsed > 0 else 0.0, extra["options"])


def spc1_plan(bsu: int, duration_s: float, seed: int, vol: Volume) -> spc1.Spc1Plan:
    assert vol.capacity_sectors is not None
    return spc1.plan(bsu, duration_s, seed, vol.capacity_sectors)


def synth_spc1(output: str | Path, bsu: int, duration_s: float, seed: int = 0,
               capacity: str | None = None, array: str | Path | None = None,
               progress: Progress | None = None) -> SynthResult:
    """An SPC-1 trace of ``bsu`` BSUs for ``duration_s`` seconds (open loop)."""
    vol = volume(capacity, array)
    p = spc1_plan(bsu, duration_s, seed, vol)
    return write_trace(output, p, "spc1", vol, progress,
                       int(p.offered_iops * p.duration_s))


def synth_ior(output: str | Path, tasks: int, transfer_size: str, block_size: str,
              segments: int | str, file_per_proc: bool = False, random: bool = False,
              write: bool = True, read: bool = True, outstanding: int = 1, seed: int = 0,
              align: str = "1m", capacity: str | None = None,
              array: str | Path | None = None, progress: Progress | None = None,
              repetitions: int = 1) -> SynthResult:
    """An IOR trace (closed loop): the write phase, then the read phase, ``repetitions``
    times (IOR -i)."""
    vol = volume(capacity, array, required=False)
    p = ior.plan(tasks, parse_size(transfer_size, "--transfer-size"),
                 parse_size(block_size, "--block-size"), parse_count(segments, "--segments"),
                 file_per_proc, random,
                 write, read, outstanding, seed, parse_size(align, "--align"),
                 vol.capacity_sectors, repetitions)
    return write_trace(output, p, "ior", vol, progress, p.requests)


def synth_iometer(output: str | Path, transfer_size: str = "4k", read_pct: int = 100,
                  random_pct: int = 0, align: str = "0", outstanding: int = 1,
                  workers: int = 1, requests: int = 100_000, starting_sector: int = 0,
                  disk_sectors: int = 0, seed: int = 0, capacity: str | None = None,
                  array: str | Path | None = None,
                  progress: Progress | None = None) -> SynthResult:
    """An Iometer access specification run by ``workers`` workers (closed loop)."""
    vol = volume(capacity, array)
    assert vol.capacity_sectors is not None
    p = iometer.plan(parse_size(transfer_size, "--transfer-size"), read_pct, random_pct,
                     parse_size(align, "--align"), outstanding, workers, requests,
                     starting_sector, disk_sectors, seed, vol.capacity_sectors)
    return write_trace(output, p, "iometer", vol, progress, workers * requests)


def synth_orion(output: str | Path, matrix: str = "basic", large_type: str = "rand",
                size_small: str = "8k", size_large: str = "1m", num_disks: int | None = None,
                num_small: int | None = None, num_large: int | None = None,
                num_streamio: int = orion.DEFAULT_STREAM_IO, write_pct: int = 0,
                requests_per_slot: int = 100, seed: int = 0, capacity: str | None = None,
                array: str | Path | None = None,
                progress: Progress | None = None) -> SynthResult:
    """An Orion matrix (closed loop, one phase per data point)."""
    vol = volume(capacity, array)
    assert vol.capacity_sectors is not None
    disks = num_disks if num_disks is not None else (vol.disks or 1)
    p = orion.plan(matrix, large_type, parse_size(size_small, "--size-small"),
                   parse_size(size_large, "--size-large"), disks, num_small, num_large,
                   num_streamio, write_pct, requests_per_slot, seed, vol.capacity_sectors)
    streams, _lo = p.stream_table()
    return write_trace(output, p, "orion", vol, progress,
                       int(streams[:, 4].sum()) if len(streams) else 0)


# --------------------------------------------------------------------------------------------
# spc1 search


@dataclasses.dataclass
class Spc1Probe:
    bsu: int
    requests: int
    iops: float
    mean_latency_ms: float
    within_limit: bool
    # the share of the controller cache's lines dirty when the run ended (None: no cache), and
    # the share at which destaging starts: a count that ends at or above it was writing faster
    # than the drives destage, and a longer run may find it beyond the limit
    cache_dirty_end: float | None = None
    flush_start: float | None = None

    @property
    def cache_outpaced(self) -> bool:
        return (self.cache_dirty_end is not None and self.flush_start is not None
                and self.cache_dirty_end >= self.flush_start)


@dataclasses.dataclass
class Spc1SearchResult:
    array: str
    limit_ms: float
    duration_s: float
    seed: int
    ramp_s: float
    bsu: int  # the highest BSU count within the limit (0: not even one BSU)
    iops: float  # requests per second of that trace
    mean_latency_ms: float | None
    capped: bool  # the highest BSU tried (max_bsu) was still within the limit
    max_bsu: int
    probes: list[Spc1Probe]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _dirty_at_end(run: Path) -> float | None:
    """The share of the run's controller cache lines dirty at its end (meta.json's
    ``cache_at_end``), or None without a cache."""
    from . import runmeta as RM

    cache = RM.read(run).cache_at_end
    return cache.dirty_lines / cache.lines if cache is not None and cache.lines else None


#: Seconds of each probe's workload before its measurement starts (spc1 search --ramp-up)
SPC1_RAMP_S = 60.0


def spc1_search(array: str | Path, limit_ms: float, duration_s: float = 180.0, seed: int = 0,
                max_bsu: int | None = None,
                progress: Callable[[Spc1Probe], None] | None = None,
                ramp_s: float = SPC1_RAMP_S) -> Spc1SearchResult:
    """The highest BSU count whose SPC-1 trace, replayed on ``array``, has a mean response time
    within ``limit_ms``: BSU 1, 2, 4, ... until one exceeds the limit, then bisection between the
    last within and the first beyond. Each count is one seeded trace of ``ramp_s`` +
    ``duration_s`` seconds, measured over the requests that arrive after the ramp-up: SPC-1
    reports a measurement interval after a ramp-up, and a run measured from a cold start (an
    empty cache taking the writes, empty queues) overstated the count (a review: 107 BSU from
    10 s probes, 48 from 60 s, 42 from 180 s, on one array). The result's BSU is within the
    limit and BSU + 1 is not (unless capped by ``max_bsu`` or by the capacity's BSU limit)."""
    from .query import run_query
    from .replay import replay

    if not limit_ms > 0:
        raise BlocklabError(f"--limit-ms: must be positive, found {limit_ms}")
    if not 0 <= ramp_s <= spc1.MAX_DURATION_S:
        raise BlocklabError(f"--ramp-up: must be 0 or more seconds, found {ramp_s}")
    vol = volume(None, array)
    assert vol.capacity_sectors is not None
    from .model.config import load_array

    flush_start = load_array(array).controller.flush_start  # (the probes' cache note)
    top = spc1.max_bsu(vol.capacity_sectors)
    if max_bsu is not None:
        if max_bsu < 1:
            raise BlocklabError(f"--max-bsu: must be at least 1, found {max_bsu}")
        top = min(top, max_bsu)
    spc1_plan(1, duration_s, seed, vol)  # the capacity and duration errors, before any replay
    spc1_plan(1, ramp_s + duration_s, seed, vol)
    probes: dict[int, Spc1Probe] = {}
    # the measurement interval's requests: those arriving after the ramp-up (exact, from the
    # run's ios.parquet through DuckDB, in bounded memory)
    measured = ("SELECT count(*) AS n, avg(latency_ns) / 1e6 AS ms FROM ios "
                f"WHERE arrival_ns >= {round(ramp_s * 1e9)}")

    with tempfile.TemporaryDirectory(prefix="blocklab-spc1-") as tmp:
        def within(b: int) -> bool:
            trace = Path(tmp) / f"spc1-{b}.parquet"
            write_trace(trace, spc1_plan(b, ramp_s + duration_s, seed, vol), "spc1", vol)
            out = Path(tmp) / f"run-{b}"
            replay(trace=trace, array=array, output=out)
            (row,) = run_query([out], sql=measured).rows()
            n, mean = int(row["n"]), float(row["ms"] if row["ms"] is not None else 0.0)
            dirty = _dirty_at_end(out)
            probe = Spc1Probe(b, n, n / duration_s, mean, mean <= limit_ms, dirty,
                              None if dirty is None else flush_start)
            probes[b] = probe
            trace.unlink()
            if progress:
                progress(probe)
            return probe.within_limit

        lo, hi = 0, None
        b = 1
        while b <= top:
            if within(b):
                lo = b
                b *= 2
            else:
                hi = b
                break
        if hi is None and lo < top:
            if within(top):
                lo = top
            else:
                hi = top
        if hi is not None:
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if within(mid):
                    lo = mid
                else:
                    hi = mid
    best = probes.get(lo)
    return Spc1SearchResult(
        array=str(array), limit_ms=limit_ms, duration_s=duration_s, seed=seed, ramp_s=ramp_s,
        bsu=lo,
        iops=best.iops if best else 0.0,
        mean_latency_ms=best.mean_latency_ms if best else None,
        capped=hi is None and lo > 0, max_bsu=top,
        probes=[probes[k] for k in sorted(probes)])
