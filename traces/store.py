"""Read and write trace Parquet files: schema-checked, zstd, atomic, owner-only, with metadata.

A trace file is written under a temporary name beside its destination and renamed only once it
is complete, so a failed or interrupted ingest leaves nothing behind. Traces describe a
production host (process names, offsets, timing), so the file is created readable by its owner
only (mode 0600).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import BlocklabError
from .safety import (
    Worker,
    check,
    critical,
    on_stop,
    os_error,
    output_lock,
    release,
    temporary_name,
    wrote,
)
from .schema import (
    COLUMNS,
    META_KEY,
    NULL,
    NUMPY_DTYPES,
    RUN_SCHEMAS,
    SCHEMA_VERSION,
    TRACE_SCHEMA,
)

#: Rows per Parquet row group: large enough for good compression, small enough to stream.
ROW_GROUP_ROWS = 1 << 18

# Time columns are nearly monotonic: delta encoding before zstd stores them in a few bits.
# Latencies are not, but their deltas need no more bits than the values, and the delta encoder
# is faster than dictionary attempts followed by plain encoding (measured on the bench's 1 M
# requests: 17.2 against 17.5 bytes a request, a quarter less encoding time).
_DELTA_COLUMNS = ["time_ns", "getrq_ns", "insert_ns", "issue_ns", "complete_ns", "latency_ns",
                  "stream_seq"]
# Dictionary encoding pays only for columns with few distinct values: on sectors (or think
# times) pyarrow fills a dictionary page, gives up and writes them plain, which cost 30 % of
# the writer's time for nothing.
_PLAIN_COLUMNS = ["sector", "think_ns"]
_DICT_COLUMNS = [c for c in COLUMNS if c not in _DELTA_COLUMNS and c not in _PLAIN_COLUMNS]
#: zstd level: 1 is a third faster than 3 on trace columns and within 1 % of its size (bench).
ZSTD_LEVEL = 1

# A run's ios.parquet and drive_ops.parquet (RUN_SCHEMAS), written a row group per batch of
# retired requests (64 Ki), the same way: times and request numbers (nearly ascending) delta
# encoded, dictionaries only where values repeat, sectors plain. pyarrow's default (a dictionary
# for every column) fills a dictionary page with the distinct times and sectors of each row
# group before it gives up: measured on the bench's 2 M requests, ios took 0.64 s and 75.6 MB,
# these 0.20 s and 35.2 MB; 4.9 M drive operations 1.13 s and 118 MB, these 0.49 s and 63 MB.
# A segment of a parallel replay writes its part so, and the parts are joined as they are
# (traces/parquet_join.py), so this is also what the parallel replay's workers spend encoding.
_RUN_DELTA = {"ios": ["request", "arrival_ns", "start_ns", "complete_ns", "latency_ns"],
              "drive_ops": ["request", "queued_ns", "start_ns", "complete_ns"]}
_RUN_DICT = {"ios": ["op", "size_bytes", "stream", "cache_hit", "lost"],
             "drive_ops": ["drive", "kind", "sectors", "write", "cache_hit"]}
_RUN_PLAIN = {"ios": ["sector"], "drive_ops": ["sector"]}
for _name, _cols in _RUN_DELTA.items():  # every column in exactly one list
    assert sorted(_cols + _RUN_DICT[_name] + _RUN_PLAIN[_name]) == sorted(
        RUN_SCHEMAS[_name].names), _name


def run_parquet_writer(path: str | os.PathLike[str], name: str) -> pq.ParquetWriter:
    """The writer of a run folder's ``name``.parquet (``ios`` or ``drive_ops``): its schema,
    zstd, the encodings above, statistics, and no page index (traces/parquet_join.py, which
    joins a parallel replay's parts, cannot move one)."""
    return pq.ParquetWriter(
        path, RUN_SCHEMAS[name], compression="zstd", compression_level=ZSTD_LEVEL,
        use_dictionary=_RUN_DICT[name],
        column_encoding={c: "DELTA_BINARY_PACKED" for c in _RUN_DELTA[name]},
        write_statistics=True, write_page_index=False, write_page_checksum=True)


#: Bytes of output written before its projected size is checked against the free disk (synth,
#: replay): enough row groups that their bytes per request are the rest's (one generator's or
#: one replay's rows compress alike throughout), few enough to take a second or two.
ROOM_CHECK_BYTES = 16 << 20


def check_room(output: Path, written: int, done: int, total: int, what: str,
               advice: str = "write it elsewhere or make room", copies: int = 1,
               on_disk: int | None = None) -> None:
    """Refuse, early, an output that cannot fit on its disk: ``written`` bytes hold its first
    ``done`` of ``total`` requests, and the rest, at the same bytes a request, would need more
    than the disk's free space (``synth ... --requests 1e13`` wrote until the disk was full,
    hours later). The bytes not yet flushed and the footer are not counted, so the need is a
    little under the output's size: an output that fits is not refused. ``copies``: the
    output's bytes are on the disk that many times at its peak (a parallel replay's parts and
    the run's files joined from them), ``on_disk`` of them already (default ``written``)."""
    if total <= done or done <= 0:
        return
    peak = copies * written / done * total
    now = written if on_disk is None else on_disk
    free = shutil.disk_usage(output.absolute().parent).free
    if peak - now > free:
        raise BlocklabError(
            f"{output}: {total:,} requests need about {_bytes(peak)} {what} "
            f"({written / done:.3g} bytes a request over the first {done:,}), and its disk has "
            f"{_bytes(now + free)} free; {advice}")


def _bytes(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 1e6:,.1f} MB"


@dataclasses.dataclass
class TraceMeta:
    """File-level metadata stored as JSON under the Parquet key ``blocklab``."""

    source_format: str
    sources: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # name, sha256, bytes
    host: str | None = None
    kernel: str | None = None
    start_utc: str | None = None  # ISO 8601 wall-clock time of time_ns == 0, when known
    blocklab_version: str = ""
    schema_version: int = SCHEMA_VERSION
    linux_devices: bool = False  # device holds dev_t (major<<20|minor)
    counts: dict[str, int] = dataclasses.field(default_factory=dict)  # skipped, unmatched, lost
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> TraceMeta:
        data = json.loads(raw)
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], mode: int = 0o600,
                  record: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it to ``path`` only if the body succeeds.

    The temporary file is created (empty, exclusive) with ``mode`` before the body writes it, so
    the data is never readable by others, even for an instant. ``path`` is locked meanwhile (a
    second writer of it stops with one line) and what killed writers of it left is removed
    first (traces/safety.py). An operating-system error (no space, permission denied, ...)
    comes out as one line naming ``path`` and the cause. The temporary is registered with
    ``safety.on_stop``: a command stopped where this generator's ``except`` is never reached
    still removes it.
    """
    dest = Path(path)
    with output_lock(dest):
        tmp = temporary_name(dest)
        token = None
        try:
            with critical():  # no signal between making the temporary and the try it is in
                if dest.is_dir():
                    raise BlocklabError(f"{dest}: is a folder, expected a file")
                tmp.unlink(missing_ok=True)  # ours (a reused pid): we hold the lock
                token = on_stop(lambda: _unlink(tmp))
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
                os.close(fd)
            yield tmp
            check()  # stopped by a signal that was dropped on its way: no output
            with critical():
                os.chmod(tmp, mode)
                os.replace(tmp, dest)
                release(token, run=False)
                if record:  # (not a command's own working file: a scenario case's array)
                    wrote(dest)
        except BaseException as e:
            if token is not None:
                release(token)  # ours: the name holds our pid
            if isinstance(e, OSError):
                raise os_error(e, dest) from None
            raise


def _unlink(p: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(p)


def _holds(path: Path, key: str) -> bool:
    """Whether ``path`` is a JSON object with the key ``key``."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and key in data


def refuse_folder_output(dest: Path, marker: str = "meta.json",
                         marker_key: str = "run_schema_version") -> None:
    """What ``AtomicFolder`` refuses of an existing ``dest``, checked without taking anything:
    a file, a symbolic link, a folder that is not one of these outputs. A command whose work
    starts with something slow calls it first (a parallel replay refused a user's folder only
    once its local cluster had started: 6 s, against 1 s serially; a review)."""
    if dest.exists() and not dest.is_dir():
        raise BlocklabError(f"{dest}: exists and is not a folder")
    if dest.is_symlink():  # (the rename would fail once the work is done)
        raise BlocklabError(f"{dest}: a symbolic link; give the folder it names")
    if dest.is_dir() and not _holds(dest / marker, marker_key) and any(dest.iterdir()):
        raise BlocklabError(f"{dest}: exists and is not a run folder (no blocklab {marker}); "
                            "not replaced: remove it or write elsewhere")


class AtomicFolder:
    """A folder written under a temporary name (``.NAME.tmp-PID``, mode 0700) and renamed into
    place by ``commit``; ``fail`` removes it. The folder's name is locked in between, as
    ``atomic_output`` locks a file's.

    Use::

        folder = AtomicFolder(out)
        try:
            ...write into folder.tmp...
            folder.commit()
        except BaseException as e:
            raise folder.fail(e) from None
    """

    def __init__(self, dest: str | os.PathLike[str], mode: int = 0o700,
                 marker: str = "meta.json", marker_key: str = "run_schema_version"):
        """``marker``: the JSON file, with the key ``marker_key``, that says an existing
        folder of that name is one of these outputs, which ``commit`` may replace; an existing
        folder without it that holds anything is refused, not emptied (a user's folder given
        as ``-o`` by mistake: the rename once deleted whatever it held; another tool's
        meta.json is not a run's)."""
        self.dest = Path(dest)
        self._lock = output_lock(self.dest, make_parent=True)
        with critical(raise_at_end=False):  # a signal waits for the try below (check())
            self._lock.__enter__()
            self._open = True
        self.tmp = temporary_name(self.dest)
        self._token: int | None = None
        try:
            check()
            refuse_folder_output(self.dest, marker, marker_key)
            if self.tmp.exists():
                shutil.rmtree(self.tmp)
            # registered before it exists: a signal between the constructor's return and the
            # caller's try still removes it (safety.on_stop)
            self._token = on_stop(lambda: shutil.rmtree(self.tmp, ignore_errors=True))
            self.tmp.mkdir(mode=mode, parents=True)
        except BaseException as e:
            raise self.fail(e) from None

    def _release(self) -> None:
        if self._open:
            self._open = False
            self._lock.__exit__(None, None, None)

    def commit(self, file_mode: int = 0o600) -> None:
        """Give every file ``file_mode`` and rename the folder into place (replacing an older
        folder of that name)."""
        try:
            check()  # stopped by a signal that was dropped on its way: no output
            for part in self.tmp.iterdir():
                part.chmod(file_mode)
            with critical():
                if self.dest.is_dir() and not self.dest.is_symlink():
                    shutil.rmtree(self.dest)
                os.replace(self.tmp, self.dest)
                if self._token is not None:
                    release(self._token, run=False)
                wrote(self.dest)
        except BaseException as e:
            raise self.fail(e) from None
        self._release()

    def fail(self, e: BaseException) -> BaseException:
        """Remove the temporary folder; return what to raise (``e``, or an OSError as one
        line naming the folder and the cause)."""
        if self._token is not None:
            release(self._token)
        self._release()
        return os_error(e, self.dest) if isinstance(e, OSError) else e


def columns_to_batch(
    cols: Mapping[str, np.ndarray], comm: pa.Array | None = None
) -> pa.RecordBatch:
    """Turn reader columns (NumPy, -1 = null in nullable columns) into a schema-exact batch.

    Columns missing from ``cols`` are all null (they must be nullable). ``comm`` is a string or
    dictionary array of the batch's length, or None.
    """
    n = len(cols["time_ns"])
    arrays = []
    for name, (typ, nullable, _unit, _doc) in COLUMNS.items():
        if name == "comm":
            if comm is None:
                arrays.append(pa.nulls(n, typ))
            else:
                arrays.append(comm if comm.type == typ else comm.dictionary_encode())
            continue
        values = cols.get(name)
        if values is None:
            if not nullable:
                raise ValueError(f"column {name} is required")
            arrays.append(pa.nulls(n, typ))
            continue
        values = np.asarray(values)
        if nullable:
            mask = values == NULL
            if mask.any():
                values = np.where(mask, 0, values)
                arrays.append(pa.array(values.astype(typ.to_pandas_dtype()), type=typ, mask=mask))
                continue
        arrays.append(pa.array(values.astype(typ.to_pandas_dtype(), copy=False), type=typ))
    return pa.RecordBatch.from_arrays(arrays, schema=TRACE_SCHEMA)


def empty_columns(n: int) -> dict[str, np.ndarray]:
    """Preallocated reader columns, nullable ones filled with the null sentinel."""
    out = {}
    for name, dtype in NUMPY_DTYPES.items():
        nullable = COLUMNS[name][1]
        out[name] = np.full(n, NULL, dtype=dtype) if nullable else np.zeros(n, dtype=dtype)
    return out


class TraceWriter:
    """Streams record batches into a trace Parquet file; ``commit`` makes it appear atomically.

    Use as a context manager: leaving the block with an exception removes the temporary file.
    """

    def __init__(self, path: str | os.PathLike[str], meta: TraceMeta):
        self.path = Path(path)
        self.meta = meta
        self.rows = 0
        # batches, or reader columns (``write_columns``) the writer's thread converts
        self._pending: list[pa.RecordBatch | tuple[Mapping[str, np.ndarray], pa.Array | None]] = []
        self._pending_rows = 0
        # Row groups are encoded and compressed on a second thread (pyarrow releases the GIL),
        # overlapping with parsing on the first; the queue holds at most two row groups, so
        # memory stays bounded when the disk is slower than the parser.
        self._queue: queue.Queue[list[Any] | None] = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._writer: pq.ParquetWriter | None = None
        self._thread: Worker | None = None
        #: (rows, bytes of the file) as the writer thread left them after its last table: a
        #: pair taken together, so bytes per row from it do not count rows still queued, nor
        #: bytes of a table half written (synth's check of the room a trace needs)
        self.encoded: tuple[int, int] = (0, 0)
        self._ctx = atomic_output(self.path)
        with critical(raise_at_end=False):  # a signal waits for the try below (check())
            self._tmp = self._ctx.__enter__()
        # Everything from here to the end of __init__ is inside the try: an exception (a
        # signal's) raised before __init__ returns never reaches a __exit__ (the ``with`` has
        # not begun), so this is the only clean-up there is. A signal that came just after the
        # lock was taken, while the writer thread started, left the lock and the temporary
        # behind (tests/test_signals.py, about one stopped ingest in twenty).
        try:
            check()
            self._writer = pq.ParquetWriter(
                self._tmp,
                TRACE_SCHEMA,
                compression="zstd",
                compression_level=ZSTD_LEVEL,
                use_dictionary=_DICT_COLUMNS,
                column_encoding={c: "DELTA_BINARY_PACKED" for c in _DELTA_COLUMNS},
                write_statistics=True,
                # a CRC-32 per page (Parquet's page header crc), checked on every read
                # (open_trace): a trace damaged after it was written (a bad copy, a failing
                # disk) was read as other numbers without a word (a review changed 2,000
                # bytes of a trace: its sector column came out different, and replay and mrc
                # answered from it)
                write_page_checksum=True,
            )
            self._thread = Worker(self._drain, "parquet-writer")
        except BaseException as e:
            self.abort(e)  # stops the thread if it started, removes the file and the lock
            if isinstance(e, OSError):  # as __exit__ does: one line naming the output
                raise os_error(e, self.path) from None
            raise

    @property
    def bytes_written(self) -> int:
        """Bytes already encoded into the (temporary) file: the row groups written so far."""
        try:
            return self._tmp.stat().st_size
        except FileNotFoundError:
            return 0

    def _drain(self) -> None:
        assert self._writer is not None  # started after the writer was made
        while True:
            items = self._queue.get()
            if items is None:
                return
            if self._error is None:
                try:
                    table = pa.Table.from_batches(
                        [b if isinstance(b, pa.RecordBatch) else columns_to_batch(*b)
                         for b in items], schema=TRACE_SCHEMA)
                    self._writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
                    self.encoded = (self.encoded[0] + table.num_rows, self.bytes_written)
                except BaseException as e:  # reported to the producer on its next call
                    self._error = e

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def write(self, batch: pa.RecordBatch) -> None:
        check()  # a signal's stop, should the handler's exception have been dropped
        self._add(batch, batch.num_rows)

    def write_columns(self, cols: Mapping[str, np.ndarray], comm: pa.Array | None = None
                      ) -> None:
        """``write(columns_to_batch(cols, comm))`` with the conversion done on the writer's
        thread, beside the reader's, which pairs the events and is the one an ingest waits
        for (measured on the bench's 5 M blktrace records: the reader's CPU 0.317 -> 0.276 s;
        the whole command 1.36 -> 1.22 s, and on their 5 M-line blkparse text 1.63 -> 1.52 s,
        medians of 8 runs alternating with the code before). ``cols`` and ``comm`` are the
        writer's from now on (not to be changed)."""
        check()
        self._add((cols, comm), len(cols["time_ns"]))

    def _add(self, item: Any, rows: int) -> None:
        if rows == 0:
            return
        self._pending.append(item)
        self._pending_rows += rows
        self.rows += rows
        if self._pending_rows >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        self._check()
        if self._pending:
            with critical():  # see io._HashingReader.read: a put cut by a signal can hang
                self._queue.put(self._pending)
            self._pending = []
            self._pending_rows = 0

    def _stop(self) -> None:
        if self._thread is None:  # __init__ stopped before it started
            return
        with critical():
            self._queue.put(None)
        self._thread.join()

    def commit(self) -> None:
        self._flush()
        self._stop()
        self._check()
        assert self._writer is not None
        self._writer.add_key_value_metadata({META_KEY: self.meta.to_json()})
        self._writer.close()
        self._ctx.__exit__(None, None, None)

    def abort(self, exc: BaseException | None = None) -> None:
        self._error = self._error or RuntimeError("aborted")  # the thread skips what is left
        with contextlib.suppress(BaseException):
            self._stop()
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        exc = exc or RuntimeError("aborted")
        with contextlib.suppress(BaseException):
            self._ctx.__exit__(type(exc), exc, exc.__traceback__)

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, et, ev, tb) -> None:
        if et is None:
            try:
                self.commit()
            except BaseException as e:
                self.abort(e)
                if isinstance(e, OSError):
                    raise os_error(e, self.path) from None
                raise
        else:
            self.abort(ev)
            if isinstance(ev, OSError):  # no space, a quota, ...: one line naming the file
                raise os_error(ev, self.path) from None


class TraceFile(pq.ParquetFile):
    """A trace's ParquetFile: batch by batch (no pre-buffering), each page's CRC checked where
    the writer stored one, and a read that fails names the file and where it is damaged (a
    trace cut or changed under a reader was reported as the replay's run folder, or as
    "blocklab: error: blocklab: ...")."""

    def __init__(self, path: Path):
        # pre_buffer=False: with pyarrow's default (True), iter_batches keeps every column
        # chunk it has read cached until the file is closed, so reading a trace batch by batch
        # held the whole (compressed) file in memory: measured, 75 MB for an 8 M-request
        # trace against 14 MB without, growing with the trace
        super().__init__(path, pre_buffer=False, page_checksum_verification=True)
        self.path = path

    def iter_batches(self, *args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        it = super().iter_batches(*args, **kwargs)
        while True:
            try:
                batch = next(it)
            except StopIteration:
                return
            except (pa.ArrowException, OSError) as e:
                raise self.damaged(e) from None
            yield batch

    def read(self, *args: Any, **kwargs: Any) -> pa.Table:
        try:
            return super().read(*args, **kwargs)
        except (pa.ArrowException, OSError) as e:
            raise self.damaged(e) from None

    def read_row_group(self, *args: Any, **kwargs: Any) -> pa.Table:
        try:
            return super().read_row_group(*args, **kwargs)
        except (pa.ArrowException, OSError) as e:
            raise self.damaged(e) from None

    def damaged(self, e: BaseException) -> BlocklabError:
        """One line naming the file, the first damaged column chunk's byte offset (found by
        reading each chunk on its own), and pyarrow's reason."""
        if isinstance(e, OSError) and e.errno is not None:  # the system's (EIO), not the data
            return os_error(e, self.path)
        where = ""
        with contextlib.suppress(Exception):  # (a file cut short may not open again)
            where = _first_damage(self.path)
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return BlocklabError(f"{self.path}: damaged{where}: {reason}; the file changed after "
                             "it was written (write it again)")


def _first_damage(path: Path) -> str:
    """Where the first column chunk that fails to read on its own is (row group, column, the
    byte its data start at), or "" when each reads."""
    pf = pq.ParquetFile(path, pre_buffer=False, page_checksum_verification=True)
    md = pf.metadata
    for rg in range(md.num_row_groups):
        for c in range(md.num_columns):
            col = md.row_group(rg).column(c)
            try:
                pf.read_row_group(rg, columns=[col.path_in_schema])
            except (pa.ArrowException, OSError):
                off = col.dictionary_page_offset or col.data_page_offset
                return f" in row group {rg}'s column {col.path_in_schema} (its data start " \
                       f"at byte {off:,})"
    return ""


def open_trace(path: str | os.PathLike[str]) -> tuple[pq.ParquetFile, TraceMeta]:
    """Open a trace file, checking it is a blocklab trace with the current schema."""
    p = Path(path)
    if not p.exists():
        raise BlocklabError(f"{p}: no such file")
    try:
        pf = TraceFile(p)
    except (pa.ArrowException, OSError) as e:  # (ArrowNotImplementedError: a damaged footer)
        raise BlocklabError(f"{p}: not a Parquet file ({e})") from None
    kv = pf.metadata.metadata or {}
    if META_KEY not in kv:
        raise BlocklabError(f"{p}: a Parquet file, but not a blocklab trace (no blocklab metadata)")
    meta = TraceMeta.from_json(kv[META_KEY])
    if meta.schema_version != SCHEMA_VERSION:
        raise BlocklabError(
            f"{p}: trace schema version {meta.schema_version}, this blocklab reads {SCHEMA_VERSION}"
        )
    missing = [n for n in TRACE_SCHEMA.names if n not in pf.schema_arrow.names]
    if missing:
        raise BlocklabError(f"{p}: trace lacks columns {', '.join(missing)}")
    return pf, meta


def read_trace(path: str | os.PathLike[str], columns: list[str] | None = None) -> pa.Table:
    pf, _ = open_trace(path)
    return pf.read(columns=columns)
