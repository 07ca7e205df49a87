"""Joins Parquet files of one schema into one file, in order, without decoding a page: the
parts' column-chunk bytes are copied and one footer is written for them all (the segments of
``blocklab replay --workers``, pipeline/parallel.py).

A Parquet file (apache/parquet-format, README and src/main/thrift/parquet.thrift) is ``PAR1``,
the column chunks' pages, a footer -- a ``FileMetaData`` struct in Thrift's compact protocol
(traces/thrift_compact.py) -- its length as 4 bytes little endian, and ``PAR1``. Pages hold no
file positions; the footer does: per column chunk, ``ColumnMetaData`` ``data_page_offset``,
``dictionary_page_offset``, ``index_page_offset`` and ``bloom_filter_offset``, ``ColumnChunk``
``file_offset`` (deprecated; 0 from Arrow's writer), and per row group ``RowGroup``
``file_offset``. So a part's bytes between its leading ``PAR1`` and its footer (the pages, and
any Bloom filters, which hold no positions either) are copied as they are to where the joined
file has room for them, and its row groups go into the joined footer with those fields moved
by the same distance and ``ordinal`` renumbered. The rest of the footer -- version, schema,
key-value metadata (Arrow's schema), writer, column orders -- is the first part's; every part
must have the same schema; ``num_rows`` is the sum. Statistics travel with their row groups.

Refused, with a one-line error naming the part and the byte offset in it: a file that is not
Parquet or whose footer does not decode; an encrypted one; a page index (its ``OffsetIndex``
holds each page's position: rewriting it would move every later offset; Arrow writes none
unless asked, ``write_page_index``); a column chunk in another file (``file_path``); and a field
of ``FileMetaData``, ``RowGroup``, ``ColumnChunk`` or ``ColumnMetaData`` that parquet.thrift
did not define when this was written (it could be a position this module does not move).

Memory: one part's footer at a time, plus the joined row groups' footer bytes (what any
writer of the joined file holds); pages never pass through Python (``os.copy_file_range``).
"""

from __future__ import annotations

import dataclasses
import errno
import os
import struct
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from .errors import BadInput
from .safety import os_error
from .thrift_compact import (
    FALSE,
    I16,
    I32,
    I64,
    LIST,
    STRUCT,
    TRUE,
    Reader,
    Struct,
    ThriftError,
    Writer,
    encode,
)

MAGIC = b"PAR1"
MAGIC_ENCRYPTED = b"PARE"

# field ids of parquet.thrift's structs that carry or may carry file positions
_FM_VERSION, _FM_SCHEMA, _FM_NUM_ROWS, _FM_ROW_GROUPS = 1, 2, 3, 4
_FM_KNOWN = set(range(1, 8))  # 8, 9: encryption_algorithm, footer_signing_key_metadata
_RG_COLUMNS, _RG_NUM_ROWS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 3, 5, 7
_RG_KNOWN = set(range(1, 8))
_CC_FILE_PATH, _CC_FILE_OFFSET, _CC_META = 1, 2, 3
_CC_PAGE_INDEX = {4: "offset_index_offset", 5: "offset_index_length",
                  6: "column_index_offset", 7: "column_index_length"}
_CC_KNOWN = {1, 2, 3}  # 8, 9: crypto_metadata, encrypted_column_metadata
_CM_OFFSETS = {9: "data_page_offset", 10: "index_page_offset", 11: "dictionary_page_offset",
               14: "bloom_filter_offset"}
_CM_KNOWN = set(range(1, 18))  # through geospatial_statistics (17)
_I16_MAX = (1 << 15) - 1
_COPY_CHUNK = 1 << 23


@dataclasses.dataclass
class _Part:
    path: str
    start: int  # where its pages begin in the joined file
    groups: bytes  # its row groups, moved and renumbered, encoded
    count: int  # row groups
    rows: int


class _Bad(Exception):
    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.message = message
        self.offset = offset


class ParquetJoin:
    """The joined file ``out``, written as parts are appended in order.

    ``append(part)`` copies a part's pages to the end and keeps its row groups for the footer;
    ``truncate(k)`` drops the parts from the k-th on (the file shrinks back to where that part
    began), so a caller can append parts as they come and take back those that change;
    ``close()`` writes the footer. The caller removes ``out`` if it stops before ``close``.
    """

    def __init__(self, out: str | os.PathLike[str]):
        self.out = Path(out)
        self._fd = os.open(self.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.pwrite(self._fd, MAGIC, 0)
        self._pos = len(MAGIC)
        self._parts: list[_Part] = []
        self._head: Struct = []  # the first part's FileMetaData (row groups: None)
        self._schema = b""
        self.bytes_copied = 0

    @property
    def parts(self) -> int:
        return len(self._parts)

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self._parts)

    def append(self, part: str | os.PathLike[str]) -> int:
        """Copy ``part``'s pages to the end of the joined file; returns its rows."""
        path = str(part)
        try:
            with open(part, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                footer_at, footer = _footer(f, size)
                p = self._rows_of(path, footer, footer_at)
                try:
                    self._copy(f.fileno(), len(MAGIC), footer_at - len(MAGIC))
                except OSError as e:  # copy_file_range cannot say which side failed
                    raise os_error(e, self.out) from None
        except _Bad as e:
            raise BadInput(path, e.message, offset=e.offset) from None
        except OSError as e:
            raise os_error(e, path) from None
        self._parts.append(p)
        return p.rows

    def truncate(self, keep: int) -> None:
        """Drop the parts appended after the first ``keep``."""
        if keep >= len(self._parts):
            return
        self._pos = self._parts[keep].start
        del self._parts[keep:]
        if not self._parts:
            self._head, self._schema = [], b""
        os.ftruncate(self._fd, self._pos)

    def close(self) -> int:
        """Write the footer and close the file; returns its rows."""
        if not self._parts:
            raise ValueError(f"{self.out}: no parts to join")
        rows = self.rows
        w = Writer()
        last = 0
        for fid, t, v in self._head:
            if fid == _FM_NUM_ROWS:
                w.field(last, fid, I64, rows)
            elif fid == _FM_ROW_GROUPS:
                w.field_header(last, fid, LIST)
                w.list_header(STRUCT, sum(p.count for p in self._parts))
                for p in self._parts:
                    w.out += p.groups
            else:
                w.field(last, fid, t, v)
            last = fid
        w.out.append(0)
        tail = bytes(w.out) + struct.pack("<I", len(w.out)) + MAGIC
        try:
            _pwrite_all(self._fd, tail, self._pos)
            os.ftruncate(self._fd, self._pos + len(tail))
        except OSError as e:
            raise os_error(e, self.out) from None
        self._pos += len(tail)
        self.abort()
        return rows

    def abort(self) -> None:
        """Close the file as it is (after ``close``: nothing)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ParquetJoin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()

    # -- a part's footer

    def _rows_of(self, path: str, footer: bytes, footer_at: int) -> _Part:
        """Decode a part's FileMetaData, its row groups moved to start at ``self._pos``."""
        shift = self._pos - len(MAGIC)
        first_group = sum(p.count for p in self._parts)
        r = Reader(footer)
        head: Struct = []
        groups = Writer()
        count = rows = 0
        seen: dict[int, int] = {}
        try:
            last = 0
            while (h := r.field_header(last)) is not None:
                fid, t = h
                at = r.pos
                if fid not in _FM_KNOWN:
                    raise _Bad("footer: " + _unknown("FileMetaData", fid), footer_at + at)
                if fid == _FM_ROW_GROUPS:
                    _expect(t, LIST, "FileMetaData.row_groups", footer_at + at)
                    et, count = r.list_header()
                    _expect(et, STRUCT, "FileMetaData.row_groups", footer_at + at)
                    for i in range(count):
                        g_at = r.pos
                        rg = r.struct(1)
                        rows += _move_group(rg, i, first_group + i, shift, footer_at,
                                            footer_at + g_at)
                        groups.struct(rg)
                    head.append((fid, t, None))
                elif t in (TRUE, FALSE):
                    head.append((fid, t, t == TRUE))
                else:
                    head.append((fid, t, r.value(t)))
                seen[fid] = t
                last = fid
            if r.pos != len(footer):
                raise _Bad(f"{len(footer) - r.pos} bytes after the footer's end", footer_at + r.pos)
        except ThriftError as e:
            raise _Bad(f"footer: {e.message}", footer_at + e.offset) from None
        for fid, t, name in ((_FM_VERSION, I32, "version"), (_FM_SCHEMA, LIST, "schema"),
                             (_FM_NUM_ROWS, I64, "num_rows"), (_FM_ROW_GROUPS, LIST,
                                                               "row_groups")):
            if seen.get(fid) != t:
                raise _Bad(f"footer: FileMetaData has no {name}", footer_at)
        num_rows = next(v for fid, _t, v in head if fid == _FM_NUM_ROWS)
        if num_rows != rows:
            raise _Bad(f"footer: num_rows {num_rows}, but its row groups hold {rows}", footer_at)
        schema = encode([(1, LIST, next(v for fid, _t, v in head if fid == _FM_SCHEMA))])
        if not self._parts:
            self._head, self._schema = head, schema
        elif schema != self._schema:
            raise _Bad(f"its schema differs from that of {self._parts[0].path}", footer_at)
        return _Part(path, self._pos, bytes(groups.out), count, rows)

    def _copy(self, src: int, at: int, n: int) -> None:
        """Copy ``n`` bytes at ``at`` of ``src`` to the end of the joined file."""
        done = 0
        fast = True
        while done < n:
            k = min(n - done, _COPY_CHUNK)
            if fast:
                try:
                    got = os.copy_file_range(src, self._fd, k, at + done, self._pos + done)
                except OSError as e:
                    # another file system, or a kernel without it: read and write
                    if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP,
                                       errno.EINVAL, errno.ENOTSUP):
                        raise
                    fast = False
                    continue
            else:
                data = os.pread(src, k, at + done)
                got = len(data)
                if got:
                    _pwrite_all(self._fd, data, self._pos + done)
            if got == 0:
                raise _Bad(f"ends at byte {at + done}, before its footer", at + done)
            done += got
        self._pos += n
        self.bytes_copied += n


def _pwrite_all(fd: int, data: bytes, at: int) -> None:
    view = memoryview(data)
    while view:
        k = os.pwrite(fd, view, at)
        view, at = view[k:], at + k


def _footer(f: BinaryIO, size: int) -> tuple[int, bytes]:
    """(where the footer starts, its bytes) of an open Parquet file of ``size`` bytes."""
    if size < 12:
        raise _Bad(f"{size} bytes: too short for Parquet (at least 12)", 0)
    head = f.read(4)
    f.seek(size - 8)
    tail = f.read(8)
    if tail[4:] == MAGIC_ENCRYPTED:
        raise _Bad("an encrypted footer: not joined", size - 4)
    if head != MAGIC or tail[4:] != MAGIC:
        bad = 0 if head != MAGIC else size - 4
        raise _Bad("not a Parquet file (no 'PAR1' at its start and end)", bad)
    n = struct.unpack("<I", tail[:4])[0]
    if n > size - 12:
        raise _Bad(f"a footer length of {n} bytes, more than the file's {size - 12}", size - 8)
    at = size - 8 - n
    f.seek(at)
    footer = f.read(n)
    if len(footer) != n:
        raise _Bad("the file ended while its footer was read", at + len(footer))
    return at, footer


def _unknown(struct_name: str, fid: int) -> str:
    if (struct_name, fid) in (("FileMetaData", 8), ("FileMetaData", 9), ("ColumnChunk", 8),
                              ("ColumnChunk", 9)):
        return "encrypted: not joined"
    return (f"{struct_name} field {fid}, which this join does not know (it may hold a file "
            "position): not joined")


def _expect(t: int, want: int, what: str, at: int) -> None:
    if t != want:
        raise _Bad(f"footer: {what} has Thrift type {t}, expected {want}", at)


def _move_group(rg: Struct, index: int, ordinal: int, shift: int, footer_at: int,
                at: int) -> int:
    """Move a RowGroup's positions by ``shift`` bytes (in place); returns its rows.
    ``index``: its number in its part; ``at``: where it is in the part (for errors)."""
    where = f"row group {index}"

    def moved(v: int, what: str) -> int:
        if not len(MAGIC) <= v < footer_at:
            raise _Bad(f"footer: {where}: {what} {v} is outside the part's pages (bytes "
                       f"{len(MAGIC)} to {footer_at})", at)
        return v + shift

    rows = -1
    for i, (fid, t, v) in enumerate(rg):
        if fid not in _RG_KNOWN:
            raise _Bad(f"footer: {where}: " + _unknown("RowGroup", fid), at)
        if fid == _RG_NUM_ROWS:
            _expect(t, I64, "RowGroup.num_rows", at)
            rows = v
        elif fid == _RG_FILE_OFFSET:
            _expect(t, I64, "RowGroup.file_offset", at)
            rg[i] = (fid, t, moved(v, "its file_offset"))
        elif fid == _RG_COLUMNS:
            _expect(t, LIST, "RowGroup.columns", at)
            et, columns = v
            _expect(et, STRUCT, "RowGroup.columns", at)
            for j, cc in enumerate(columns):
                _move_chunk(cc, f"{where} column {j}", moved, at)
    if rows < 0:
        raise _Bad(f"footer: {where} has no num_rows", at)
    k = next((i for i, (fid, _t, _v) in enumerate(rg) if fid == _RG_ORDINAL), None)
    if k is not None:
        # the joined file's numbering; an i16 cannot count past 32767, and the field is
        # optional (it seeds an encrypted file's keys only)
        if ordinal <= _I16_MAX:
            rg[k] = (_RG_ORDINAL, I16, ordinal)
        else:
            del rg[k]
    return rows


def _move_chunk(cc: Struct, where: str, moved: Callable[[int, str], int], at: int) -> None:
    has_meta = False
    for i, (fid, t, v) in enumerate(cc):
        if fid in _CC_PAGE_INDEX:
            raise _Bad(f"footer: {where} has a page index ({_CC_PAGE_INDEX[fid]}): not joined "
                       "(its page positions would move; write parts without one)", at)
        if fid not in _CC_KNOWN:
            raise _Bad(f"footer: {where}: " + _unknown("ColumnChunk", fid), at)
        if fid == _CC_FILE_PATH:
            raise _Bad(f"footer: {where} is in another file ({v!r}): not joined", at)
        if fid == _CC_FILE_OFFSET:
            _expect(t, I64, "ColumnChunk.file_offset", at)
            if v:  # 0: none (Arrow's writer)
                cc[i] = (fid, t, moved(v, "its file_offset"))
        elif fid == _CC_META:
            _expect(t, STRUCT, "ColumnChunk.meta_data", at)
            has_meta = True
            for m, (mid, mt, mv) in enumerate(v):
                if mid not in _CM_KNOWN:
                    raise _Bad(f"footer: {where}: " + _unknown("ColumnMetaData", mid), at)
                if mid in _CM_OFFSETS:
                    _expect(mt, I64, f"ColumnMetaData.{_CM_OFFSETS[mid]}", at)
                    v[m] = (mid, mt, moved(mv, _CM_OFFSETS[mid]))
    if not has_meta:
        raise _Bad(f"footer: {where} has no meta_data", at)


def join(parts: Iterable[str | os.PathLike[str]], out: str | os.PathLike[str]) -> int:
    """Join ``parts`` (in order) into ``out``; returns its rows. On an error ``out`` is
    removed."""
    j = ParquetJoin(out)
    try:
        for p in parts:
            j.append(p)
        return j.close()
    except BaseException:
        j.abort()
        Path(out).unlink(missing_ok=True)
        raise
