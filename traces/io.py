"""Input files: transparent gzip / zstd / xz decompression, sha256 of the file as read, and
chunking into whole lines (text) or whole byte blocks (binary) so memory stays bounded."""

from __future__ import annotations

import concurrent.futures
import gzip
import hashlib
import lzma
import mmap
import os
import queue
import stat
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .safety import Worker, critical

#: Bytes read per chunk: a few MB keeps the kernels busy and memory small.
CHUNK_BYTES = 8 << 20
#: Bytes ``Input.peek`` reads ahead by default: what format detection sees of an input (a head
#: this long may end in a cut line).
PEEK_BYTES = 1 << 16

#: The pages of a memory-mapped input are unmapped (``Input.mapped_upto``) this many bytes at a
#: time, once read and hashed.
_UNMAP_BYTES = 8 << 20

_POOL: list[concurrent.futures.ThreadPoolExecutor] = []


def decode_threads() -> int:
    """Worker threads that decode or parse the next chunk of an input while the current one is
    paired and written (the kernels release the GIL): one per core beyond the first, at least
    one; ``BLOCKLAB_DECODE_THREADS=0`` decodes on the calling thread (the tests compare both)."""
    env = os.environ.get("BLOCKLAB_DECODE_THREADS")
    if env is not None and env.strip().isdigit():
        return int(env)
    return max(1, (os.cpu_count() or 1) - 1)


def decode_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The shared worker threads of ``decode_threads`` (made on first use)."""
    if not _POOL:
        _POOL.append(concurrent.futures.ThreadPoolExecutor(
            max(1, decode_threads()), thread_name_prefix="blocklab-decode"))
    return _POOL[0]


def close_decode_pool() -> None:
    """Stop the shared worker threads (after their work), if they were started: before a
    command's quick exit (pipeline/cli ``_exit_quickly``)."""
    while _POOL:
        _POOL.pop().shutdown(wait=True)


class ArrayRing:
    """int64 arrays of ``widths`` columns, reused from chunk to chunk by a chunked reader:
    fresh large arrays for every chunk cost a page fault per 4 KiB when first written. It
    keeps ``slots`` sets, taken in turn: two when the next chunk is decoded ahead while the
    previous one's arrays are still being read, one otherwise; a set is handed out again
    once its chunk has been consumed. ``take(rows)`` gives the next set as views of
    ``rows`` rows, its arrays grown first when a chunk needs more.

    ``next_slot()`` then ``take_at(slot, rows)`` split the two: the caller takes its turn in
    order and a worker thread, once it knows the rows, sizes that slot's set (each slot is
    one chunk's at a time, so no two threads touch one slot)."""

    def __init__(self, slots: int, widths: tuple[int, ...]):
        self.slots = slots
        self.widths = widths
        self._sets: list[tuple[np.ndarray, ...] | None] = [None] * slots
        self._turn = 0

    def next_slot(self) -> int:
        slot = self._turn % self.slots
        self._turn += 1
        return slot

    def take_at(self, slot: int, rows: int) -> tuple[np.ndarray, ...]:
        arrays = self._sets[slot]
        if arrays is None or len(arrays[0]) < rows:
            arrays = tuple(np.empty((rows, w), dtype=np.int64) for w in self.widths)
            self._sets[slot] = arrays
        return tuple(a[:rows] for a in arrays)

    def take(self, rows: int) -> tuple[np.ndarray, ...]:
        return self.take_at(self.next_slot(), rows)


def result_of(fut: concurrent.futures.Future) -> Any:
    """``fut.result()`` with a signal held until the result is there (one chunk's decode:
    milliseconds), then raised: a signal's exception raised inside concurrent.futures'
    condition can leave its lock taken, and the pool's thread then blocks for ever on its
    way out (see safety.Worker)."""
    with critical():
        return fut.result()


_MAGICS = {
    b"\x1f\x8b": "gzip",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"\xfd7zXZ\x00": "xz",
}


def compression_of(head: bytes) -> str | None:
    """The compression named by the first bytes of a file (by content, not by name)."""
    for magic, name in _MAGICS.items():
        if head.startswith(magic):
            return name
    return None


class _HashingReader:
    """A raw file reader that feeds every byte it reads into sha256.

    Hashing runs on a helper thread (hashlib releases the GIL on large updates), so it overlaps
    with parsing; at most a few chunks wait for it.
    """

    def __init__(self, raw: BinaryIO, head: bytes = b""):
        self.raw = raw
        self.sha = hashlib.sha256()
        self.nbytes = 0  # bytes handed to the hash
        self.hashed = 0  # bytes hashed
        self._queue: queue.Queue[bytes | memoryview | None] = queue.Queue(maxsize=4)
        self._thread = Worker(self._hash, "sha256")
        # ``head``: the file's first bytes, already read from ``raw`` (a pipe cannot seek back
        # to them): handed out first, hashed first
        self._head = head
        if head:
            with critical():
                self._queue.put(head)
            self.nbytes = len(head)

    def _hash(self) -> None:
        while (data := self._queue.get()) is not None:
            self.sha.update(data)
            self.hashed += len(data)  # (read by Input.mapped_upto on the reader's thread)

    def hexdigest(self) -> str:
        if self._thread.is_alive():
            with critical():
                self._queue.put(None)
            self._thread.join()
        return self.sha.hexdigest()

    def read(self, n: int = -1) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            if 0 <= n < len(head):
                head, self._head = head[:n], head[n:]
                return head
            return head + self._read(n - len(head) if n >= 0 else -1)
        return self._read(n)

    def _read(self, n: int) -> bytes:
        data = self.raw.read(n)
        if data:
            # a signal's exception inside Queue.put can lose the consumer's wake-up: then both
            # threads wait for ever (the clean-up's put(None) on a full queue); it waits
            with critical():
                self._queue.put(data)
        self.nbytes += len(data)
        return data

    def readinto(self, b) -> int:  # used by some decompressors
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if self._thread.is_alive():
            with critical():
                self._queue.put(None)
            self._thread.join()
        self.raw.close()

    @property
    def closed(self) -> bool:
        return self.raw.closed

    def drain(self) -> None:
        while self.read(1 << 20):
            pass

    def hash_view(self, view: memoryview) -> None:
        """Hash ``view``, the next bytes of the file, read by the caller from a memory map of
        it (``Input.mapped``); the raw reader is not used after them."""
        if len(view):
            with critical():
                self._queue.put(view)
            self.nbytes += len(view)


class Input:
    """One input file opened for reading its decompressed bytes, hashing the file as it goes."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.name = str(path)
        source: str | os.PathLike[str] | int = path
        if self.name == "-":  # standard input, as most tools take "-"; read as a stream
            self.name = "<stdin>"
            source = "/dev/stdin" if os.path.exists("/dev/stdin") else 0
        try:
            raw = open(source, "rb")  # noqa: SIM115 - closed in close()
        except FileNotFoundError:
            from .errors import BlocklabError

            raise BlocklabError(f"{self.name}: no such file") from None
        except IsADirectoryError:
            from .errors import BlocklabError

            raise BlocklabError(f"{self.name}: is a directory, expected a trace file") from None
        st = os.fstat(raw.fileno())
        # a named pipe, /dev/stdin or a process substitution is read as a stream, once: its
        # size is not known before its end (``size`` 0 until ``finish``)
        self.regular = stat.S_ISREG(st.st_mode)
        self.size = st.st_size if self.regular else 0
        head = b""
        while len(head) < 8 and (more := raw.read(8 - len(head))):
            head += more
        self._hashing = _HashingReader(raw, head)
        self.compression = compression_of(head)
        self.stream: Any
        if self.compression == "gzip":
            self.stream = gzip.GzipFile(fileobj=self._hashing, mode="rb")  # type: ignore[call-overload]
        elif self.compression == "xz":
            self.stream = lzma.LZMAFile(self._hashing, mode="rb")  # type: ignore[arg-type]
        elif self.compression == "zstd":
            import zstandard

            self.stream = zstandard.ZstdDecompressor().stream_reader(
                self._hashing,  # type: ignore[arg-type]
                read_across_frames=True,
            )
        else:
            self.stream = self._hashing
        self._peeked = b""
        self.consumed = 0  # decompressed bytes handed out so far
        self._map: np.ndarray | None = None
        self._mm: mmap.mmap | None = None
        self._dropped = 0  # the map's pages before this offset are unmapped

    def peek(self, n: int = PEEK_BYTES) -> bytes:
        """The first ``n`` decompressed bytes, without consuming them."""
        while len(self._peeked) < n:
            data = self._read_raw(n - len(self._peeked))
            if not data:
                break
            self._peeked += data
        return self._peeked[:n]

    def _read_raw(self, n: int) -> bytes:
        try:
            return self.stream.read(n)
        except (OSError, EOFError, lzma.LZMAError, zlib.error) as e:
            from .errors import BadInput

            raise BadInput(self.name, f"corrupt {self.compression} data ({e})") from None
        except Exception as e:  # zstandard.ZstdError
            if type(e).__name__ == "ZstdError":
                from .errors import BadInput

                raise BadInput(self.name, f"corrupt zstd data ({e})") from None
            raise

    def read(self, n: int) -> bytes:
        if self._peeked:
            data, self._peeked = self._peeked[:n], self._peeked[n:]
            if len(data) < n:
                data += self._read_raw(n - len(data))
        else:
            data = self._read_raw(n)
        self.consumed += len(data)
        return data

    def mapped(self) -> np.ndarray | None:
        """The whole file as a read-only uint8 array over a memory map of it, or None.

        Offered when the file is regular, uncompressed, not empty, and nothing has been read
        from it but its ``peek``. A reader that takes it reads the file through the map and
        calls ``mapped_upto`` as it goes (the hash and the progress follow); ``read`` is not
        used then. Reading through the map saves two copies of every byte: the kernel's into
        a fresh buffer, and the join with the last chunk's cut record (on a blktrace binary
        ingest of 4.8 GB, a tenth of the main thread, measured). A file that another process
        shortens while it is mapped stops the process (SIGBUS), as with ripgrep's maps: traces
        are ingested once written. ``BLOCKLAB_MMAP=0`` turns maps off (the tests read both
        ways)."""
        if self._map is not None:
            return self._map
        if (os.environ.get("BLOCKLAB_MMAP", "1") == "0" or not self.regular
                or self.compression is not None or self.consumed or self.size == 0
                or self.name == "<stdin>"):  # (stdin from a file may not start at its 0)
            return None
        try:  # the file opened, not its name again: renamed or replaced since, it is the same
            self._mm = mmap.mmap(self._hashing.raw.fileno(), 0, access=mmap.ACCESS_READ)
        except (ValueError, OSError):  # emptied since it was opened, or not mappable: read it
            return None
        if hasattr(mmap, "MADV_SEQUENTIAL"):
            self._mm.madvise(mmap.MADV_SEQUENTIAL)
        self._map = np.frombuffer(self._mm, dtype=np.uint8)
        self.size = len(self._map)
        return self._map

    def mapped_upto(self, end: int, done: int) -> None:
        """The reader of ``mapped`` has taken the file's bytes up to ``end``, and is done with
        those before ``done``: hash the new ones, and unmap the pages that it and the hash no
        longer need. The pages of a map count in the process's resident memory until they are
        unmapped (they stay in the page cache): without this, a 4.8 GB ingest peaked at
        5.1 GB resident (measured), growing with the file."""
        assert self._map is not None and self._mm is not None
        if end > self._hashing.nbytes:
            self._hashing.hash_view(self._map[self._hashing.nbytes : end].data)
        self.consumed = end
        hi = min(done, self._hashing.hashed) // mmap.PAGESIZE * mmap.PAGESIZE
        if hi - self._dropped >= _UNMAP_BYTES and hasattr(mmap, "MADV_DONTNEED"):
            self._mm.madvise(mmap.MADV_DONTNEED, self._dropped, hi - self._dropped)
            self._dropped = hi

    def progress(self) -> int:
        """Bytes of the file on disk read so far (for progress bars)."""
        return self._hashing.nbytes

    def finish(self) -> dict[str, object]:
        """Read whatever is left (so the hash covers the whole file); return name, sha256, size."""
        if self._map is not None:
            # the hash and the size are those of the bytes ingested: the map's (a file that
            # grew since it was mapped is not read further)
            self.mapped_upto(len(self._map), 0)
        else:
            self._hashing.drain()
        self.close()
        digest = self._hashing.hexdigest()
        if not self.regular:
            self.size = self._hashing.nbytes
        return {"name": self.path.name, "sha256": digest, "bytes": self.size}

    def close(self) -> None:
        if self.stream is not self._hashing:
            self.stream.close()
        self._hashing.close()  # (its thread has hashed every view of the map: joined)
        self._map = self._mm = None  # the map goes with the last view of it


def text_chunks(
    inp: Input, chunk_bytes: int | None = None, first_line: int = 1
) -> Iterator[tuple[np.ndarray, int]]:
    """Yield ``(buffer, first_line_number)`` with whole lines only; the last line gets a newline.

    ``buffer`` is a read-only uint8 view of a ``bytes`` object (``buffer.base``); line numbers
    are 1-based (``first_line`` when the caller already consumed header lines).
    """
    for buf, line, _lines in text_blocks(inp, chunk_bytes, first_line):
        yield buf, line


def text_blocks(
    inp: Input, chunk_bytes: int | None = None, first_line: int = 1, mapped: bool = False,
    count: bool = True,
) -> Iterator[tuple[np.ndarray, int, int]]:
    """``text_chunks`` with the number of lines of each buffer: ``(buffer, first_line,
    lines)``, for a caller that sizes its arrays by it (counting them again was a tenth of a
    blkparse text ingest).

    ``mapped``: a caller that does not need ``buffer.base`` to be ``bytes`` (it slices the
    buffer itself) takes, from a file ``Input.mapped`` offers, windows of the map: no copy of
    the file's bytes (the read, then the join of a cut line with the next read).

    ``count=False``: the lines are not counted (``lines`` and every ``first_line`` but the
    first are -1): for a caller that counts them on a worker thread (formats/textevents)."""
    from blocklab.kernels.bytescan import count_lines  # (a kernel: Numba, once a reader needs it)

    def counted(view: np.ndarray) -> int:
        return int(count_lines(view)) if count else -1

    chunk_bytes = chunk_bytes or CHUNK_BYTES  # read at call time: tests shrink it
    m = inp.mapped() if mapped else None
    if m is not None:
        yield from _mapped_blocks(inp, m, chunk_bytes, first_line, counted)
        return
    carry = b""
    line = first_line
    while True:
        data = inp.read(chunk_bytes)
        if not data:
            if carry:
                tail = np.frombuffer(carry + b"\n", dtype=np.uint8)
                yield tail, line, counted(tail)
            return
        cut = data.rfind(b"\n")
        if cut < 0:
            carry += data
            continue
        # one copy: the carried part line and this read up to its last newline
        block = b"".join((carry, memoryview(data)[: cut + 1])) if carry else data[: cut + 1]
        carry = data[cut + 1 :]
        view = np.frombuffer(block, dtype=np.uint8)
        lines = counted(view)
        yield view, line, lines
        line = line + lines if lines >= 0 else -1


def _mapped_blocks(inp: Input, m: np.ndarray, chunk_bytes: int, line: int,
                   counted: Callable[[np.ndarray], int]) -> Iterator[tuple[np.ndarray, int, int]]:
    """``text_blocks`` over the map ``m`` of ``inp``: windows of about ``chunk_bytes`` cut
    after their last newline (a longer window when a line is longer); a last line without
    its newline is copied with one. ``counted(block)``: its lines, or -1."""
    pos = 0
    # the caller may still read the two blocks before this one (their names:
    # formats/textevents parses two ahead of the block it pairs)
    done = prev = 0
    n = len(m)
    while pos < n:
        end = min(pos + chunk_bytes, n)
        cut = _last_newline(m, pos, end)
        while cut < 0 and end < n:  # a line longer than the window
            end = min(pos + 2 * (end - pos), n)
            cut = _last_newline(m, pos, end)
        if cut < 0:  # the last line, without its newline
            block = np.frombuffer(m[pos:n].tobytes() + b"\n", dtype=np.uint8)
            cut = n - 1
        else:
            block = m[pos : cut + 1]
        lines = counted(block)
        inp.mapped_upto(cut + 1, done)
        yield block, line, lines
        line = line + lines if lines >= 0 else -1
        done, prev, pos = prev, pos, cut + 1


def _last_newline(m: np.ndarray, lo: int, hi: int) -> int:
    """Offset of the last newline in ``m[lo:hi]``, or -1; searched from the end, 64 KiB at a
    time (lines are short: the first step finds one)."""
    while hi > lo:
        a = max(lo, hi - (1 << 16))
        hits = np.flatnonzero(m[a:hi] == 10)
        if len(hits):
            return a + int(hits[-1])
        hi = a
    return -1


def line_at(buf: np.ndarray, pos: int) -> tuple[int, str]:
    """(index of the line holding byte ``pos`` within ``buf``, that line's text, shortened).
    Searched in place (a window of a map is not copied)."""
    start = _last_newline(buf, 0, pos) + 1
    end = _next_newline(buf, pos)
    end = len(buf) if end < 0 else end
    text = buf[start:end].tobytes().decode("utf-8", "replace").strip()
    if len(text) > 80:
        text = text[:77] + "..."
    return int(np.count_nonzero(buf[:start] == 10)), text


def next_line(buf: np.ndarray, pos: int) -> int:
    """Offset of the first byte after the newline at or after ``pos`` (``len(buf)`` when
    there is none)."""
    end = _next_newline(buf, pos)
    return len(buf) if end < 0 else end + 1


def _next_newline(m: np.ndarray, pos: int) -> int:
    """Offset of the first newline at or after ``pos``, or -1; searched 64 KiB at a time
    (with --skip-bad, once per bad line: not through the rest of an 8 MiB window)."""
    n = len(m)
    while pos < n:
        hits = np.flatnonzero(m[pos : pos + (1 << 16)] == 10)
        if len(hits):
            return pos + int(hits[0])
        pos += 1 << 16
    return -1
