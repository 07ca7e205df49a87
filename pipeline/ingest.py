"""Ingest: trace files of any supported format -> one trace Parquet file in the blocklab schema.

Sources are read in chunks (bounded memory), merged by time when there are several, rebased so
that the earliest request is at time 0, and written as Parquet row groups under a temporary
name that is renamed only when everything succeeded.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import platform
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from blocklab.traces import formats
from blocklab.traces.errors import BlocklabError
from blocklab.traces.formats.base import Chunk, Format, ReadContext
from blocklab.traces.io import Input
from blocklab.traces.safety import not_an_input
from blocklab.traces.schema import NULL, NUMPY_DTYPES, TIME_COLUMNS, format_dev, parse_dev
from blocklab.traces.store import TraceMeta, TraceWriter

from . import __version__

_PERCPU = re.compile(r"^(?P<base>.+)\.blktrace\.(?P<cpu>\d+)$")


@dataclasses.dataclass
class IngestResult:
    output: str
    format: str
    requests: int
    sources: list[dict[str, object]]
    counts: dict[str, int]
    elapsed_s: float
    input_bytes: int

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def group_sources(paths: list[str]) -> list[list[Path]]:
    """Group per-CPU blktrace files (NAME.blktrace.N) into sets; a bare NAME whose
    NAME.blktrace.* files exist stands for that set, as ``blkparse -i NAME`` reads it."""
    groups: dict[str, list[Path]] = {}
    order: list[str] = []
    for raw in paths:
        p = Path(raw)
        if raw == "-":  # standard input (io.Input reads it as a stream)
            if "-" in groups:
                raise BlocklabError("-: standard input given twice")
            groups["-"] = [p]
            order.append("-")
            continue
        if not p.exists():
            cpus = sorted(p.parent.glob(p.name + ".blktrace.*"))
            cpus = [c for c in cpus if _PERCPU.match(c.name)]
            if not cpus:
                raise BlocklabError(f"{raw}: no such file (nor {raw}.blktrace.N per-CPU files)")
            key = str(p)
            groups[key] = sorted(cpus, key=lambda c: int(_PERCPU.match(c.name)["cpu"]))  # type: ignore[index]
            order.append(key)
            continue
        m = _PERCPU.match(p.name)
        key = str(p.parent / m["base"]) + ".blktrace" if m else str(p)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(p)
    return [groups[k] for k in order]


def _merge(streams: list[Iterator[Chunk]]) -> Iterator[Chunk]:
    """Merge chunk streams, each in time order, into one stream in time order."""
    if len(streams) == 1:
        yield from streams[0]
        return
    pending: list[Chunk | None] = [None] * len(streams)
    done = [False] * len(streams)
    while True:
        for i, s in enumerate(streams):
            while not done[i] and (pending[i] is None or len(pending[i]) == 0):  # type: ignore[arg-type]
                nxt = next(s, None)
                if nxt is None:
                    done[i] = True
                else:
                    pending[i] = nxt
        live = [i for i in range(len(streams)) if pending[i] is not None and len(pending[i])]  # type: ignore[arg-type]
        if not live:
            return
        waiting = [i for i in live if not done[i]]
        horizon = min(int(pending[i].cols["time_ns"][-1]) for i in waiting) if waiting else None  # type: ignore[union-attr]
        parts: list[Chunk] = []
        keys = []
        for i in live:
            ch = pending[i]
            assert ch is not None
            t = ch.cols["time_ns"]
            take = len(t) if horizon is None else int(np.searchsorted(t, horizon, side="right"))
            if take:
                parts.append(ch.take(np.arange(take)))
                keys.append(np.full(take, i))
                pending[i] = ch.take(np.arange(take, len(t)))
        yield _concat(parts, np.concatenate(keys))


def _concat(parts: list[Chunk], keys: np.ndarray) -> Chunk:
    import pyarrow as pa

    # sources of different formats carry different columns: a missing one is null
    names = list(dict.fromkeys(k for p in parts for k in p.cols))
    cols = {
        k: np.concatenate([
            p.cols[k] if k in p.cols else np.full(len(p), NULL, dtype=NUMPY_DTYPES[k])
            for p in parts
        ])
        for k in names
    }
    comms = [p.comm for p in parts]
    comm = None
    if any(c is not None for c in comms):
        arrays = [
            (c.cast(pa.string()) if c is not None else pa.nulls(len(p), pa.string()))
            for c, p in zip(comms, parts, strict=True)
        ]
        comm = pa.concat_arrays(arrays)
    order = np.lexsort((keys, cols["time_ns"]))
    merged = Chunk(cols, comm)
    return merged.take(order)


def _rebase(chunk: Chunk, t0: int) -> None:
    for name in TIME_COLUMNS:
        if name == "latency_ns" or name not in chunk.cols:
            continue
        col = chunk.cols[name]
        chunk.cols[name] = np.where(col == NULL, NULL, col - t0) if name != "time_ns" else col - t0


def ingest(
    sources: list[str],
    output: str,
    fmt: str = "auto",
    device: str | None = None,
    skip_bad: int = 0,
    progress: Callable[[int, int | None], None] | None = None,
) -> IngestResult:
    """Ingest ``sources`` into the trace file ``output``; returns what was done.

    Raises BadInput (with file and line or byte offset) or BlocklabError on bad input; no output
    file is left behind then.
    """
    started = time.perf_counter()
    if not sources:
        raise BlocklabError("no input files given")
    groups = group_sources(sources)
    not_an_input(output, [p for g in groups for p in g])
    try:
        dev = parse_dev(device) if device else None
    except ValueError as e:
        raise BlocklabError(f"--device {device}: {e}") from None
    inputs: list[Input] = []
    budget = _Budget(skip_bad)
    streams = []
    contexts = []
    fmts: list[Format] = []
    total = 0

    def tick() -> None:
        if progress:  # (a pipe's size is not known: no total, so no time left either)
            progress(sum(i.progress() for i in inputs),
                     total if all(i.regular for i in inputs) else None)

    try:
        for group in groups:
            ins = [Input(p) for p in group]
            inputs.extend(ins)
            total += sum(i.size for i in ins)
            # a per-CPU set's first file is empty when that CPU saw no event: the set's format
            # is its first file with content's
            probe = next((i for i in ins if i.peek()), ins[0])
            f = formats.detect(probe.peek(), probe.name) if fmt == "auto" else formats.get(fmt)
            if len(ins) > 1 and not f.groups_files:
                raise BlocklabError(f"{ins[1].name}: format {f.name} reads one file at a time")
            ctx = budget.context(device=dev, on_progress=tick)
            fmts.append(f)
            contexts.append(ctx)
            streams.append(_filtered(f.read(ins, ctx), ctx))
        meta = TraceMeta(source_format=",".join(sorted({f.name for f in fmts})))
        meta.blocklab_version = __version__
        with TraceWriter(output, meta) as writer:
            merged = _merge(streams)
            first = next(merged, None)
            t0 = int(first.cols["time_ns"][0]) if first is not None else 0
            chunks = [first] if first is not None else []
            for chunk in _chain(chunks, merged):
                _rebase(chunk, t0)
                writer.write_columns(chunk.cols, chunk.comm)
            seen = set().union(*(c.devices for c in contexts)) - {NULL}
            if dev is not None and writer.rows == 0 and seen and dev not in seen:
                # a device the inputs do not have is a mistake, not an empty trace (as
                # `trace iostat --device` says); the output is not written
                linux = all(c.linux_devices for c in contexts)
                have = ", ".join(format_dev(d, linux) for d in sorted(seen))
                raise BlocklabError(f"--device {device}: no such device in "
                                    f"{', '.join(i.name for i in inputs)} (devices: {have})")
            meta.sources = [i.finish() for i in inputs]
            _fill_meta(meta, contexts, t0, budget)
        tick()
    except BaseException:
        for i in inputs:
            i.close()
        raise
    return IngestResult(
        output=str(output),
        format=meta.source_format,
        requests=writer.rows,
        sources=meta.sources,
        counts=meta.counts,
        elapsed_s=time.perf_counter() - started,
        input_bytes=sum(i.size for i in inputs),
    )


def _chain(first: list[Chunk], rest: Iterator[Chunk]) -> Iterator[Chunk]:
    yield from first
    yield from rest


def _filtered(stream: Iterator[Chunk], ctx: ReadContext) -> Iterator[Chunk]:
    """The chunks of ``stream`` with the requests of ``ctx.device`` only (all without it);
    the devices met are noted in ``ctx.devices`` until a request of it is kept, as the
    readers that keep a device early note them (for the error when none is: no cost once
    one is)."""
    dev = ctx.device
    kept = False
    for chunk in stream:
        if dev is not None:
            keep = chunk.cols["device"] == dev
            if not kept and len(chunk):
                ctx.devices.update(np.unique(chunk.cols["device"]).tolist())
                kept = bool(keep.any())
            if not keep.all():
                chunk = chunk.take(np.nonzero(keep)[0])
        if len(chunk):
            yield chunk


class _Budget:
    """One ``--skip-bad`` budget shared by every source's reader."""

    def __init__(self, n: int):
        self.n = n
        self.contexts: list[ReadContext] = []

    def context(self, **kw) -> ReadContext:
        ctx = _SharedCtx(self, **kw)
        self.contexts.append(ctx)
        return ctx

    @property
    def used(self) -> int:
        return sum(c.skipped for c in self.contexts)


class _SharedCtx(ReadContext):
    def __init__(self, budget: _Budget, **kw):
        super().__init__(skip_bad=budget.n, **kw)
        self._budget = budget

    def bad(self, path, message, *, line=None, offset=None):
        self.skip_bad = self._budget.n - self._budget.used + self.skipped
        return super().bad(path, message, line=line, offset=offset)


def _fill_meta(meta: TraceMeta, contexts: list[ReadContext], t0: int, budget: _Budget) -> None:
    counts: dict[str, int] = {}
    for c in contexts:
        for k, v in c.counts.items():
            counts[k] = counts.get(k, 0) + v
    counts["skipped"] = budget.used
    meta.counts = counts
    meta.linux_devices = all(c.linux_devices for c in contexts)
    c0 = contexts[0]
    meta.host = next((c.host for c in contexts if c.host), None)
    meta.kernel = next((c.kernel for c in contexts if c.kernel), None)
    start_ns = None
    if all(c.clock == "unix" for c in contexts):
        start_ns = t0
    elif c0.start_unix_ns is not None:
        start_ns = c0.start_unix_ns + t0
    if start_ns is not None:
        meta.start_utc = (
            dt.datetime.fromtimestamp(start_ns // 1_000_000_000, dt.UTC)
            + dt.timedelta(microseconds=(start_ns % 1_000_000_000) // 1000)
        ).isoformat()
    meta.extra = {"t0_source_ns": t0, "ingest_host_platform": platform.system()}
    for c in contexts:
        meta.extra.update(c.extra)
