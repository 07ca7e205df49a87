"""Capture: this host's block I/O, through a private tracefs instance, straight to a trace
Parquet file, with loss accounting and cleanup whatever happens.

The capture creates its own tracefs instance, ``instances/blocklab-<pid>``, so the global
tracer and other users' instances are never touched. In it, it sets the per-CPU ring-buffer
size (``--buffer-kb``), the ``mono`` trace clock (the clock of CLOCK_MONOTONIC, so event times
can be compared with the reader's clock and turned into wall-clock time), ``overwrite`` off (a
full buffer drops new events and counts them, rather than overwriting unread ones), a device
filter on each tracepoint, and enables ``block_rq_insert``, ``block_rq_issue`` and
``block_rq_complete`` (with ``--bio-queue`` also ``block_bio_queue``, the bio merges,
``block_getrq`` and ``block_split``, so that every queued bio ends in a request).

One reader polls every CPU's ``trace_pipe_raw`` without blocking and decodes the binary pages
(``traces.formats.tracefs_raw``). Events of different CPUs are merged by time up to a horizon:
a CPU read to empty at reader time T holds no event older than T minus a slack for events being
committed; a CPU not read to empty holds none older than the last event read. Merged events go
to the pairing state (``traces.formats.paired``), requests come out in arrival order, and are
written as Parquet row groups: memory stays bounded by one row group plus the requests in
flight. At the end the per-CPU ``stats`` files give the events the kernel lost (``overrun``,
``commit overrun``, ``dropped events``), stored in the file's metadata.

Whatever ends the capture (its duration, Ctrl-C, SIGTERM, SIGHUP, ``--max-size``, low disk
space, an exception), the instance is removed; only a SIGKILL can leave it, and the next
capture (or ``blocklab capture --cleanup``) removes instances whose capture process is gone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import hmac
import os
import platform
import re
import resource
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from blocklab.kernels import pairing as K
from blocklab.traces.errors import BlocklabError
from blocklab.traces.formats.base import ReadContext
from blocklab.traces.formats.paired import Pairer, ProcessNames, rows_to_chunk
from blocklab.traces.formats.tracefs_raw import PageDecoder, parse_header_page, read_formats
from blocklab.traces.schema import NULL, TIME_COLUMNS
from blocklab.traces.store import TraceMeta, TraceWriter
from blocklab.traces.units import parse_bytes

from . import __version__
from .tracefs import (
    INSTANCE_PREFIX,
    CpuReader,
    Device,
    Instance,
    check_access,
    cpu_stats,
    find_tracefs,
    lost_events,
    mounts,
    remove_instance,
    resolve_device,
    stale_instances,
    warm_decoder,
)

RQ_EVENTS = ("block_rq_insert", "block_rq_issue", "block_rq_complete")
BIO_EVENTS = ("block_bio_queue", "block_bio_backmerge", "block_bio_frontmerge", "block_getrq",
              "block_split")
DEFAULT_BUFFER_KB = 4096
#: Seconds between polls of the per-CPU buffers when they were all read to empty.
POLL_S = 0.05
#: An event with a time stamp this close to the moment its CPU was found empty may still be
#: being committed (an interrupt's event nested inside another): merge it on the next poll.
SLACK_NS = 20_000_000
#: Bytes per request assumed for ``--max-size`` until data is on disk: above the ~20 measured
#: (README, Speed), so the estimate errs on the safe side.
EST_BYTES_PER_REQUEST = 32
#: Room kept for the Parquet footer and the last row group's rounding under ``--max-size``.
SIZE_MARGIN = 16 << 10
#: A capture stops when the output's file system has less free space than this (or 5 % of its
#: size, if smaller).
MIN_FREE_BYTES = 1 << 30




#: The counts a tracefs capture writes even when 0 (docs/formats.md); the others (flush_ends)
#: when the capture counted any.
ALWAYS_COUNTED = ("lost_events", "over_size_limit", "skipped", "incomplete")


@dataclasses.dataclass(frozen=True)
class CaptureOptions:
    """What ``blocklab capture`` was asked to do (sizes in bytes, times in seconds)."""

    output: Path
    devices: tuple[str, ...] = ()
    duration_s: float | None = None
    buffer_kb: int = DEFAULT_BUFFER_KB
    bio_queue: bool = False
    max_size: int | None = None
    anonymize: bool = False
    anonymize_key: Path | None = None  # a secret key file: keyed hashes (implies anonymize)
    blktrace: bool = False


@dataclasses.dataclass
class CaptureStatus:
    """A live view of a capture, passed to the caller's callback about twice a second."""

    instance: str
    elapsed_s: float
    requests: int
    events: int
    lost_events: int
    bytes_estimate: int
    devices: list[str]
    phase: str = "running"  # running, stopping


@dataclasses.dataclass
class CaptureResult:
    output: str
    method: str  # tracefs or blktrace
    requests: int
    events: int
    lost_events: int
    lost_per_cpu: dict[str, dict[str, int]]
    incomplete: int
    stopped_by: str
    elapsed_s: float  # from tracing on to the file's commit
    cpu_s: float  # CPU the capture process used in that time (all its threads)
    bytes: int
    devices: list[dict[str, Any]]
    instance: str | None
    stale_removed: list[str]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)



class _Names(ProcessNames):
    """Process names, replaced by stable hashes when anonymizing."""

    def __init__(self, anonymize: bool, key: bytes | None):
        super().__init__()
        self.anonymize = anonymize
        self.key = key
        self._cache: dict[str, str] = {}

    def update(self, pids, names) -> None:
        if self.anonymize:
            names = [self._cache.setdefault(n, anonymized(n, self.key)) for n in names]
        super().update(pids, names)


def anonymized(name: str, key: bytes | None = None) -> str:
    """A stable stand-in for a process or host name; the name itself is not kept.

    Without a key: SHA-256 of the name, the same text in every capture on every host (so
    captures can be compared), but anyone can hash a candidate name and compare. With a key
    (``load_key``): HMAC-SHA256 under it, the same text in every capture made with that key
    and not to be matched against candidates without it."""
    if key is None:
        digest = hashlib.sha256(b"blocklab-anonymize:" + name.encode()).hexdigest()
    else:
        digest = hmac.new(key, name.encode(), hashlib.sha256).hexdigest()
    return "anon-" + digest[:12]


KEY_BYTES = 32  # a new key's length (HMAC-SHA256's block allows up to 64)
KEY_MIN_BYTES = 16


def load_key(path: Path) -> bytes:
    """The secret key of ``--anonymize-key``: read from ``path``, or made there (32 random
    bytes, readable by the owner only) when the file does not exist. A key file that others
    may read, or one shorter than 16 bytes, is refused with a one-line error."""
    path = Path(path)
    if not path.exists():
        # written whole under a temporary name (mkstemp: mode 0600), then linked into place,
        # which fails if another capture made the file meanwhile: then that key is used
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        except OSError as e:
            raise BlocklabError(f"{path}: cannot create the key file ({e.strerror})") from None
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(KEY_BYTES))
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
    try:
        mode = path.stat().st_mode
        key = path.read_bytes()
    except OSError as e:
        raise BlocklabError(f"{path}: cannot read the key file ({e.strerror})") from None
    if mode & 0o077:
        raise BlocklabError(f"{path}: the key file may be read by others (mode "
                            f"{stat.S_IMODE(mode):04o}); chmod 600 it")
    if len(key) < KEY_MIN_BYTES:
        raise BlocklabError(f"{path}: byte {len(key)}: the key ends there; a key needs at "
                            f"least {KEY_MIN_BYTES} bytes")
    return key


def _rebase(cols: dict[str, np.ndarray], t0: int) -> None:
    for name in TIME_COLUMNS:
        if name == "latency_ns" or name not in cols:
            continue
        col = cols[name]
        cols[name] = col - t0 if name == "time_ns" else np.where(col == NULL, NULL, col - t0)


def _utc(unix_ns: int) -> str:
    return (dt.datetime.fromtimestamp(unix_ns // 1_000_000_000, dt.UTC)
            + dt.timedelta(microseconds=(unix_ns % 1_000_000_000) // 1000)).isoformat()


def _mono_to_unix() -> int:
    """CLOCK_REALTIME - CLOCK_MONOTONIC, from the tightest of a few bracketed readings."""
    best = None
    for _ in range(5):
        a = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        r = time.time_ns()
        b = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if best is None or b - a < best[0]:
            best = (b - a, r - (a + b) // 2)
    assert best is not None
    return best[1]


def _free_bytes(path: Path) -> tuple[int, int]:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


def _parse_cpus(text: str) -> list[int]:
    out: list[int] = []
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


class _Stopper:
    """Signals (SIGINT, SIGTERM, SIGHUP) and the caller's event end a capture gracefully.

    The signal handler only sets attributes: it runs in the main thread between two bytecodes,
    possibly inside the main thread's own ``Event.wait`` with that event's lock held, where
    ``Event.set`` waited for the same lock forever (a capture hung on Ctrl-C, tracing on and
    dropping every event, in about 1 test run in 30). The main loop's waits are short
    (``wait``), so it sees the signal within one poll."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self, external: threading.Event | None):
        self.event = external or threading.Event()
        self.reason: str | None = None
        self._signalled = False
        self._old: dict[int, Any] = {}

    def _handler(self, signum, _frame) -> None:
        if self.reason is None:
            self.reason = signal.Signals(signum).name
        self._signalled = True  # (no lock taken here: see the class's docstring)

    def __enter__(self) -> _Stopper:
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                self._old[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)

    def stop(self, reason: str) -> None:
        """Stop for ``reason`` (the capture's own thread: not from a signal handler)."""
        if self.reason is None:
            self.reason = reason
        self.event.set()

    def wait(self, seconds: float) -> None:
        """Wait up to ``seconds`` (short: a signal shows at the end of it) unless stopping."""
        if not self.stopping:
            self.event.wait(seconds)

    @property
    def stopping(self) -> bool:
        if self._signalled and not self.event.is_set():
            # a signal's stop is told to the caller's event too, as before the handler took
            # no lock: here, from the loop that asks, never from the handler
            self.event.set()
        return self.event.is_set()


# ------------------------------------------------------------------------------------------
# the capture


def _prepare(opts: CaptureOptions) -> tuple[Path, list[Device], bytes | None]:
    """Every check that needs nothing created: one-line errors before touching tracefs. The
    one file it may make is the ``--anonymize-key`` file, which is meant to outlive the
    capture (``load_key``)."""
    if sys.byteorder != "little":
        raise BlocklabError("capture decodes little-endian ring buffers only")
    if opts.buffer_kb < 4:
        raise BlocklabError("--buffer-kb: at least 4 (one page per CPU)")
    if opts.duration_s is not None and opts.duration_s <= 0:
        raise BlocklabError("--duration: must be positive")
    # who may capture first: a user without root learns that before anything else
    instances = Path() if opts.blktrace else check_access(find_tracefs())
    if opts.blktrace and os.geteuid() != 0:
        raise BlocklabError("--blktrace needs root")
    devices = [resolve_device(s) for s in opts.devices]
    out_dir = Path(opts.output).resolve().parent
    if not out_dir.is_dir():
        raise BlocklabError(f"{opts.output}: folder {out_dir} does not exist")
    key = load_key(opts.anonymize_key) if opts.anonymize_key is not None else None
    return instances, devices, key


def capture(opts: CaptureOptions, on_status: Callable[[CaptureStatus], None] | None = None,
            stop: threading.Event | None = None) -> CaptureResult:
    """Capture block I/O into ``opts.output`` until the duration passes, a signal (SIGINT,
    SIGTERM, SIGHUP) arrives, ``stop`` is set, or the size limit is reached.

    ``on_status`` is called once tracing is on, then about twice a second. Raises BlocklabError
    for problems a person can fix (permissions, no tracefs, a device that does not exist);
    no instance and no output file are left behind on any error.
    """
    if opts.anonymize_key is not None and not opts.anonymize:
        opts = dataclasses.replace(opts, anonymize=True)
    instances, devices, key = _prepare(opts)
    if opts.blktrace:
        return _capture_blktrace(opts, devices, on_status, stop, key)
    return _Capture(opts, instances, devices, on_status, stop, key).run()


class _Capture:
    def __init__(self, opts, instances, devices, on_status, stop, key):
        self.opts = opts
        self.key = key
        self.instances = instances
        self.devices = devices
        self.on_status = on_status
        self.external_stop = stop
        self.names = _Names(opts.anonymize, key)
        self.ctx = ReadContext()
        self.pairer = Pairer(expect_queue=False, ctx=self.ctx)
        self.pending: list[np.ndarray] = []
        self.t0: int | None = None
        self.events_enabled = list(RQ_EVENTS) + (list(BIO_EVENTS) if opts.bio_queue else [])
        self._last_status = 0.0
        self.stopper: _Stopper | None = None

    # -- the pieces of one poll

    def _release(self, horizon: int, writer: TraceWriter) -> None:
        """Pair the merged events older than ``horizon``; write the requests that are done."""
        if self.pending:
            allev = np.concatenate(self.pending) if len(self.pending) > 1 else self.pending[0]
            t = allev[:, K.TE_TIME]
            ready = t < horizon
            rel = allev[ready]
            keep = allev[~ready]
            self.pending = [keep] if len(keep) else []
            if len(rel):
                # stable: events of one CPU keep their ring-buffer order on equal times
                rel = rel[np.argsort(rel[:, K.TE_TIME], kind="stable")]
                self.pairer.feed(rel)
        self._write(self.pairer.sweep(), writer)

    def _write(self, cols: np.ndarray, writer: TraceWriter) -> None:
        """Write the released requests ``cols`` (``Pairer.sweep``'s columns)."""
        n = cols.shape[1]
        if not n:
            return
        if self.opts.max_size is not None:
            # requests that arrive after the limit was reached (the last poll before tracing
            # stopped) are counted, not written: the file stays under --max-size
            room = max(0, (self.opts.max_size - SIZE_MARGIN) // EST_BYTES_PER_REQUEST
                       - writer.rows)
            if n > room:
                self.ctx.count("over_size_limit", n - room)
                cols = cols[:, :room]
                if self.stopper is not None:
                    self.stopper.stop("max-size")
                if not room:
                    return
        chunk = rows_to_chunk(cols, self.names)
        if self.t0 is None:
            self.t0 = int(chunk.cols["time_ns"][0])
        _rebase(chunk.cols, self.t0)
        if self.opts.anonymize:
            chunk.cols["pid"] = np.full(len(chunk), NULL, dtype=np.int32)
        writer.write_columns(chunk.cols, chunk.comm)

    def _poll(self, readers: list[CpuReader], decoder: PageDecoder) -> tuple[int, bool]:
        """Read every CPU once; returns (the merge horizon, whether any CPU has more)."""
        horizon = None
        more = False
        for r in readers:
            t_read = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            n, drained = r.read()
            if n:
                ev = decoder.decode(r.buf, n, str(r.path))
                if len(ev):
                    self.pending.append(ev)
                    r.last_ts = int(ev[-1, K.TE_TIME])
            h = t_read - SLACK_NS if drained else r.last_ts + 1
            horizon = h if horizon is None else min(horizon, h)
            more |= not drained
        return (horizon if horizon is not None else 0), more

    def _estimate_bytes(self, writer: TraceWriter) -> int:
        return max(writer.bytes_written, writer.rows * EST_BYTES_PER_REQUEST) + SIZE_MARGIN

    # -- the whole capture

    def run(self) -> CaptureResult:
        opts = self.opts
        # replaced when tracing goes on: elapsed time and CPU are counted from there
        t_on = time.perf_counter()
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        stale = [str(p) for p in stale_instances(self.instances)]
        for p in stale:
            remove_instance(Path(p))
        inst = Instance(self.instances, f"{INSTANCE_PREFIX}{os.getpid()}")
        readers: list[CpuReader] = []
        writer: TraceWriter | None = None
        stopped_by = "end"
        lost_stats: dict[str, dict[str, int]] = {}
        with _Stopper(self.external_stop) as stopper:
            self.stopper = stopper
            try:
                inst.create()
                inst.write("tracing_on", "0")
                cpus = self._setup(inst)
                header = parse_header_page((inst.path / "events" / "header_page").read_text())
                formats = read_formats(inst.path / "events", self.events_enabled)
                page_size = self._page_size(inst)
                decoder = PageDecoder(header, formats, page_size, self.names)
                readers = [CpuReader(c, inst.path / "per_cpu" / f"cpu{c}" / "trace_pipe_raw",
                                      page_size) for c in cpus]
                warm_decoder(decoder, page_size)
                meta = self._meta()
                writer = TraceWriter(opts.output, meta)
                offset = _mono_to_unix()
                capture_start_mono = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
                inst.write("tracing_on", "1")
                t_on = time.perf_counter()
                ru0 = resource.getrusage(resource.RUSAGE_SELF)
                self._status(inst, writer, decoder, t_on, cpus, force=True)
                while not stopper.stopping:
                    horizon, more = self._poll(readers, decoder)
                    self._release(horizon, writer)
                    now = time.perf_counter()
                    if opts.duration_s is not None and now - t_on >= opts.duration_s:
                        stopper.stop("duration")
                    est = self._estimate_bytes(writer)
                    if opts.max_size is not None and est >= opts.max_size:
                        stopper.stop("max-size")
                    self._status(inst, writer, decoder, t_on, cpus)
                    if self._disk_low(est - writer.bytes_written):
                        stopper.stop("disk-space")
                    if not more:
                        stopper.wait(POLL_S)
                stopped_by = stopper.reason or "stop"
                if self.on_status:
                    self._status(inst, writer, decoder, t_on, cpus, force=True, phase="stopping")
                # stop recording, then read what is left to the last page
                inst.write("tracing_on", "0")
                elapsed_on = time.perf_counter() - t_on
                # an event reserved just before tracing stopped may still be being committed
                time.sleep(SLACK_NS / 1e9)
                while True:
                    _h, more = self._poll(readers, decoder)
                    if not more:
                        break
                self._release(np.iinfo(np.int64).max, writer)
                self._write(self.pairer.sweep(final=True), writer)
                lost_stats = cpu_stats(inst, cpus)
                for r in readers:
                    r.close()
                remove_instance(inst.path)
                self._finish_meta(meta, decoder, lost_stats, stopped_by, offset,
                                  capture_start_mono, elapsed_on, stale)
                writer.commit()
            except BaseException as e:
                if writer is not None:
                    writer.abort(e)
                raise
            finally:
                for r in readers:
                    with contextlib.suppress(OSError):
                        r.close()
                if inst.path.exists():
                    remove_instance(inst.path)
        # CPU of this process (all its threads) from tracing on to the file's commit
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu_s = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        return CaptureResult(
            output=str(opts.output), method="tracefs", requests=writer.rows,
            events=decoder.events, lost_events=lost_events(lost_stats), lost_per_cpu=lost_stats,
            incomplete=self.ctx.counts.get("incomplete", 0), stopped_by=stopped_by,
            elapsed_s=time.perf_counter() - t_on, cpu_s=cpu_s,
            bytes=Path(opts.output).stat().st_size,
            devices=[d.as_dict() for d in self.devices], instance=inst.name,
            stale_removed=stale,
        )

    def _setup(self, inst: Instance) -> list[int]:
        opts = self.opts
        inst.write("buffer_size_kb", str(opts.buffer_kb))
        clocks = inst.read("trace_clock")
        if "mono" not in clocks.replace("[", " ").replace("]", " ").split():
            raise BlocklabError(f"{inst.path}/trace_clock: this kernel lacks the mono clock "
                                f"(has: {clocks.strip()})")
        inst.write("trace_clock", "mono")
        if (inst.path / "options" / "overwrite").exists():
            inst.write("options/overwrite", "0")
        expr = " || ".join(d.filter() for d in self.devices)
        for ev in self.events_enabled:
            base = f"events/block/{ev}"
            if not (inst.path / base).is_dir():
                raise BlocklabError(f"{inst.path / base}: this kernel has no tracepoint "
                                    f"block:{ev}")
            if expr:
                inst.write(f"{base}/filter", expr)
            inst.write(f"{base}/enable", "1")
        online = Path("/sys/devices/system/cpu/online")
        cpus = _parse_cpus(online.read_text()) if online.exists() else []
        present = {int(p.name[3:]) for p in (inst.path / "per_cpu").iterdir()
                   if p.name.startswith("cpu")}
        return [c for c in cpus if c in present] or sorted(present)

    def _page_size(self, inst: Instance) -> int:
        sub = inst.path / "buffer_subbuf_size_kb"
        if sub.exists():
            return int(sub.read_text().split()[0]) * 1024
        return os.sysconf("SC_PAGE_SIZE")

    def _disk_low(self, pending_bytes: int) -> bool:
        free, total = _free_bytes(Path(self.opts.output).resolve().parent)
        return free - pending_bytes < min(MIN_FREE_BYTES, total // 20)

    def _status(self, inst, writer, decoder, t_on, cpus, force=False, phase="running") -> None:
        if not self.on_status:
            return
        now = time.perf_counter()
        if not force and now - self._last_status < 0.5:
            return
        self._last_status = now
        try:
            lost = lost_events(cpu_stats(inst, cpus))
        except OSError:
            lost = 0
        self.on_status(CaptureStatus(
            instance=inst.name, elapsed_s=now - t_on, requests=writer.rows,
            events=decoder.events, lost_events=lost, bytes_estimate=self._estimate_bytes(writer),
            devices=[d.spec for d in self.devices] or ["all"], phase=phase))

    def _meta(self) -> TraceMeta:
        host = socket.gethostname()
        meta = TraceMeta(source_format="tracefs-capture")
        meta.blocklab_version = __version__
        meta.host = anonymized(host, self.key) if self.opts.anonymize else host
        meta.kernel = platform.release()
        meta.linux_devices = True
        return meta

    def _finish_meta(self, meta, decoder, stats, stopped_by, offset, start_mono, elapsed_on,
                     stale) -> None:
        t0 = self.t0 if self.t0 is not None else start_mono
        meta.start_utc = _utc(t0 + offset)
        # every count of the capture's context (the pairing's incomplete and flush_ends, the
        # writer's over_size_limit): it listed four by name and dropped flush_ends
        meta.counts = {**dict.fromkeys(ALWAYS_COUNTED, 0), **self.ctx.counts,
                       "lost_events": lost_events(stats)}
        meta.extra = {
            "capture": {
                "method": "tracefs",
                "started_utc": _utc(start_mono + offset),
                "duration_s": elapsed_on,
                "stopped_by": stopped_by,
                "devices": [d.as_dict() for d in self.devices],
                "events_enabled": self.events_enabled,
                "buffer_kb": self.opts.buffer_kb,
                "trace_clock": "mono",
                "t0_mono_ns": t0,
                "events_decoded": decoder.events,
                "lost_per_cpu": stats,
                "pages_flagged_missed": int(decoder.lost[1]),
                "missed_stored_on_pages": int(decoder.lost[0]),
                "anonymized": self.opts.anonymize,
                "anonymized_with_key": self.key is not None,
                "stale_instances_removed": stale,
            }
        }


# ------------------------------------------------------------------------------------------
# blktrace, where the kernel allows it


def _blktrace_failure(text: str) -> str | None:
    for line in text.splitlines():
        low = line.lower()
        if ("not permitted" in low or "failed" in low or "permission denied" in low
                or "no such" in low or "invalid" in low or "not mounted" in low):
            return line.strip()
    return None


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


def _capture_blktrace(opts: CaptureOptions, devices: list[Device], on_status, stop,
                      key: bytes | None) -> CaptureResult:
    """Run blktrace on the devices and ingest its per-CPU files into the trace schema."""
    from .ingest import ingest

    started = time.perf_counter()
    exe = shutil.which("blktrace")
    if exe is None:
        raise BlocklabError("--blktrace: blktrace is not installed (Debian package blktrace)")
    if not devices:
        raise BlocklabError("--blktrace needs --device (blktrace traces named devices)")
    debugfs = next((Path(p) for p, fs in mounts() if fs == "debugfs"), None)
    if debugfs is None:
        raise BlocklabError("--blktrace: debugfs is not mounted, blktrace cannot run here "
                            "(mount -t debugfs none /sys/kernel/debug), or capture without "
                            "--blktrace (tracefs)")
    nodes = []
    for d in devices:
        node = Path("/dev") / d.name
        if d.first_sector is not None or not node.exists():
            raise BlocklabError(f"--device {d.spec}: --blktrace needs a whole disk with a "
                                f"/dev node")
        nodes.append(node)
    out = Path(opts.output)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.blktrace-", dir=out.resolve().parent))
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        # -b KiB per sub-buffer, 4 sub-buffers per CPU (blktrace's default -n): --buffer-kb
        cmd = [exe, "-r", str(debugfs), "-D", str(work), "-o", "cap",
               "-b", str(max(opts.buffer_kb // 4, 4))]
        if opts.duration_s is not None:
            cmd += ["-w", str(max(1, round(opts.duration_s)))]
        for n in nodes:
            cmd += ["-d", str(n)]
        stopped_by = "duration"
        with _Stopper(stop) as stopper, open(work / "blktrace.log", "w+") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            t_on = time.perf_counter()
            try:
                # where the kernel refuses, blktrace reports it and exits at once (status 0):
                # wait until it is running (its per-CPU files appear) before saying it is on
                while (proc.poll() is None and time.perf_counter() - t_on < 3.0
                       and not any(work.glob("cap.blktrace.*"))):
                    time.sleep(0.02)
                if proc.poll() is not None:
                    log.seek(0)
                    failure = _blktrace_failure(log.read())
                    if failure:
                        raise BlocklabError(f"--blktrace: the kernel does not allow blktrace "
                                            f"here ({failure}); capture without --blktrace "
                                            "uses tracefs")
                if on_status:
                    on_status(CaptureStatus("blktrace", 0.0, 0, 0, 0, 0,
                                            [d.spec for d in devices]))
                while proc.poll() is None:
                    if opts.max_size is not None and _dir_bytes(work) >= opts.max_size:
                        stopper.stop("max-size")
                    if stopper.stopping:
                        proc.send_signal(signal.SIGINT)
                        proc.wait(timeout=30)
                        break
                    if on_status:
                        on_status(CaptureStatus("blktrace", time.perf_counter() - t_on, 0, 0,
                                                0, _dir_bytes(work),
                                                [d.spec for d in devices]))
                    stopper.wait(0.2)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            stopped_by = stopper.reason or "duration"
            log.seek(0)
            text = log.read()
        files = sorted(p for p in work.iterdir() if ".blktrace." in p.name)
        failure = _blktrace_failure(text)
        if failure or not files:
            raise BlocklabError(f"--blktrace: the kernel does not allow blktrace here "
                                f"({failure or 'no per-CPU files written'}); capture without "
                                f"--blktrace uses tracefs")
        # blktrace's summary: "Total: N events (dropped D), K KiB data" per device
        dropped = sum(int(m) for m in re.findall(r"\(dropped (\d+)\)", text))
        tmp_parquet = work / "ingested.parquet"
        names = sorted({p.name.split(".blktrace.")[0] for p in files})
        ingest([str(work / n) for n in names], str(tmp_parquet))
        requests = _rewrite(tmp_parquet, out, opts, dropped, stopped_by, devices,
                            time.perf_counter() - t_on, key)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return CaptureResult(
        output=str(out), method="blktrace", requests=requests, events=0, lost_events=dropped,
        lost_per_cpu={}, incomplete=0, stopped_by=stopped_by,
        elapsed_s=time.perf_counter() - started,
        cpu_s=(ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime),
        bytes=out.stat().st_size, devices=[d.as_dict() for d in devices], instance=None,
        stale_removed=[])


def _rewrite(src: Path, dest: Path, opts: CaptureOptions, dropped: int, stopped_by: str,
             devices: list[Device], duration_s: float, key: bytes | None) -> int:
    """Copy an ingested trace to ``dest`` with the capture's metadata (and anonymized)."""
    import pyarrow as pa

    from blocklab.traces.store import open_trace

    pf, src_meta = open_trace(src)
    meta = TraceMeta(source_format="blktrace-capture")
    meta.blocklab_version = __version__
    host = socket.gethostname()
    meta.host = anonymized(host, key) if opts.anonymize else host
    meta.kernel = platform.release()
    meta.start_utc = src_meta.start_utc
    meta.linux_devices = True
    meta.counts = dict(src_meta.counts, lost_events=dropped)
    meta.extra = {"capture": {"method": "blktrace", "stopped_by": stopped_by,
                              "duration_s": duration_s,
                              "devices": [d.as_dict() for d in devices],
                              "anonymized": opts.anonymize,
                              "anonymized_with_key": key is not None}}
    with TraceWriter(dest, meta) as w:
        for batch in _batches(pf):
            if opts.anonymize:
                comm = batch.column("comm")
                if comm.null_count < len(comm):
                    plain = comm.cast(pa.string()).to_pylist()
                    comm = pa.array([None if c is None else anonymized(c, key) for c in plain],
                                    type=pa.string()).dictionary_encode()
                cols = {n: batch.column(n) for n in batch.schema.names}
                cols["comm"] = comm
                cols["pid"] = pa.nulls(len(batch), pa.int32())
                batch = pa.RecordBatch.from_arrays(list(cols.values()), schema=batch.schema)
            w.write(batch)
        return w.rows


def _batches(pf) -> Iterator:
    yield from pf.iter_batches(batch_size=1 << 16)


def parse_size(text: str) -> int:
    """``500M``, ``2G``, ``64KiB`` or a number of bytes -> bytes (traces/units.py: one-letter
    suffixes and KiB, MiB, ... binary, KB, MB, ... decimal)."""
    try:
        size = parse_bytes(text)
    except ValueError as e:
        raise BlocklabError(f"--max-size {text!r}: {e}") from None
    if size <= 0:  # (0 wrote an empty trace and said nothing)
        raise BlocklabError(f"--max-size {text!r}: expected a size above 0")
    return size
