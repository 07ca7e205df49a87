"""Thrift's compact protocol, the encoding of a Parquet file's footer: bytes to a generic tree
of fields and back, byte for byte, without the Thrift IDL (traces/parquet_join.py uses it).

The encoding, from the Thrift specification (doc/specs/thrift-compact-protocol.md in
apache/thrift): a struct is a sequence of fields ended by a 0 byte; a field header is one byte
``(id delta << 4) | type`` when the id grows by 1 to 15 over the previous field's, else the
type byte and the id as a zigzag varint; a boolean field's value is its type (1 true, 2
false). i16, i32 and i64 are zigzag varints (unsigned LEB128 of ``(n << 1) ^ (n >> 63)``); i8
is one byte; a double is 8 bytes little endian; binary is a varint length and the bytes; a
uuid is 16 bytes. A list or set header is one byte ``(size << 4) | element type`` for sizes 0
to 14, else ``0xF0 | element type`` and the size as a varint; a map is a 0 byte when empty,
else the size as a varint, a byte ``(key type << 4) | value type`` and the pairs. Booleans in
a list, set or map are one byte each.

The tree keeps what the bytes say, so that decoding and encoding again gives the same bytes:

- a struct is a list of :data:`Field` ``(id, type, value)`` in the order of the bytes;
- i8, i16, i32, i64: ``int``; binary: ``bytes``; double and uuid: their raw ``bytes`` (a
  NaN's bits survive);
- a boolean field: ``True``/``False`` (its type is ``TRUE`` or ``FALSE``); a boolean in a
  container: its byte, as an ``int``;
- a list or set: ``(element type, [values])``; a map: ``(key type, value type, [(key,
  value)])``.

Errors are :class:`ThriftError`, with the byte offset where the bytes stopped making sense.
"""

from __future__ import annotations

from typing import Any

# field and element types (compact protocol); a boolean element type is written as TRUE by
# some implementations (Apache Thrift's C++) and FALSE by the specification: both are read
TRUE, FALSE, I8, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT, UUID = range(1, 14)

#: A field of a struct: (id, compact type, value).
Field = tuple[int, int, Any]
Struct = list[Field]

#: Containers nest at most this deep (a Parquet footer nests five levels).
MAX_DEPTH = 64

_RANGE = {I8: 1 << 7, I16: 1 << 15, I32: 1 << 31, I64: 1 << 63}


class ThriftError(ValueError):
    """Bytes that are not a compact-protocol struct; ``offset`` is where reading stopped."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.message = message
        self.offset = offset


class Reader:
    """Reads compact-protocol values from ``buf[pos:end]``."""

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None):
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def _fail(self, message: str, at: int | None = None) -> ThriftError:
        return ThriftError(message, self.pos if at is None else at)

    def byte(self) -> int:
        if self.pos >= self.end:
            raise self._fail("the bytes end inside a value")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self, limit: int = 64) -> int:
        """An unsigned LEB128 of at most ``limit`` bits."""
        at = self.pos
        n = shift = 0
        while True:
            b = self.byte()
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift >= limit:
                raise self._fail(f"a varint longer than {limit} bits", at)
        if n >> limit:
            raise self._fail(f"a varint longer than {limit} bits", at)
        return n

    def zigzag(self, t: int) -> int:
        at = self.pos
        u = self.varint(64 if t == I64 else 32)
        n = (u >> 1) ^ -(u & 1)
        if not -_RANGE[t] <= n < _RANGE[t]:
            raise self._fail(f"an integer out of range for its type ({n})", at)
        return n

    def raw(self, k: int) -> bytes:
        if k > self.end - self.pos:
            raise self._fail(f"{k} bytes of a value, {self.end - self.pos} left")
        b = bytes(self.buf[self.pos:self.pos + k])
        self.pos += k
        return b

    def size(self) -> int:
        """A container's size or a binary's length: no more than the bytes left (every
        element takes at least one byte), so a corrupt size cannot ask for huge memory."""
        at = self.pos
        k = self.varint(32)
        if k > self.end - self.pos:
            raise self._fail(f"a size of {k}, more than the {self.end - self.pos} bytes left", at)
        return k

    def value(self, t: int, depth: int = 0) -> Any:
        """A value of compact type ``t`` (for a container's boolean elements: their byte)."""
        if t in (TRUE, FALSE):
            return self.byte()
        if t == I8:
            b = self.byte()
            return b - 256 if b >= 128 else b
        if t in (I16, I32, I64):
            return self.zigzag(t)
        if t == DOUBLE:
            return self.raw(8)
        if t == BINARY:
            return self.raw(self.size())
        if t == UUID:
            return self.raw(16)
        if depth >= MAX_DEPTH:
            raise self._fail(f"values nested deeper than {MAX_DEPTH}")
        if t in (LIST, SET):
            et, k = self.list_header()
            return (et, [self.value(et, depth + 1) for _ in range(k)])
        if t == MAP:
            k = self.size()
            if not k:
                return (0, 0, [])
            at = self.pos
            kv = self.byte()
            kt, vt = kv >> 4, kv & 0x0F
            for x in (kt, vt):
                if not TRUE <= x <= UUID:
                    raise self._fail(f"unknown element type {x}", at)
            return (kt, vt, [(self.value(kt, depth + 1), self.value(vt, depth + 1))
                             for _ in range(k)])
        if t == STRUCT:
            return self.struct(depth + 1)
        raise self._fail(f"unknown type {t}")

    def list_header(self) -> tuple[int, int]:
        at = self.pos
        h = self.byte()
        et = h & 0x0F
        k = h >> 4
        if k == 15:
            k = self.size()
        elif k > self.end - self.pos:
            raise self._fail(f"a size of {k}, more than the {self.end - self.pos} bytes left",
                             at)
        if not TRUE <= et <= UUID:
            raise self._fail(f"unknown element type {et}", at)
        return et, k

    def field_header(self, last: int) -> tuple[int, int] | None:
        """(id, type) of the next field, None at the struct's stop byte."""
        at = self.pos
        h = self.byte()
        if h == 0:
            return None
        t = h & 0x0F
        if not TRUE <= t <= UUID:
            raise self._fail(f"unknown field type {t}", at)
        delta = h >> 4
        fid = last + delta if delta else self.zigzag(I16)
        return fid, t

    def struct(self, depth: int = 0) -> Struct:
        fields: Struct = []
        last = 0
        while (head := self.field_header(last)) is not None:
            fid, t = head
            if t in (TRUE, FALSE):
                fields.append((fid, t, t == TRUE))
            else:
                fields.append((fid, t, self.value(t, depth)))
            last = fid
        return fields


class Writer:
    """Writes compact-protocol values to a bytearray ``out``."""

    def __init__(self, out: bytearray | None = None):
        self.out = bytearray() if out is None else out

    def varint(self, n: int) -> None:
        if n < 0:
            raise ValueError(f"a negative varint ({n})")
        out = self.out
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)

    def zigzag(self, t: int, n: int) -> None:
        r = _RANGE[t]
        if not -r <= n < r:
            raise ValueError(f"{n} is out of range for its type")
        self.varint((n << 1) ^ (n >> 63))

    def raw(self, b: bytes, k: int | None = None) -> None:
        if k is not None and len(b) != k:
            raise ValueError(f"{len(b)} bytes where {k} are expected")
        self.out += b

    def value(self, t: int, v: Any) -> None:
        if t in (TRUE, FALSE):
            self.out.append(v)
        elif t == I8:
            if not -128 <= v < 128:
                raise ValueError(f"{v} is out of range for i8")
            self.out.append(v & 0xFF)
        elif t in (I16, I32, I64):
            self.zigzag(t, v)
        elif t == DOUBLE:
            self.raw(v, 8)
        elif t == BINARY:
            self.varint(len(v))
            self.raw(v)
        elif t == UUID:
            self.raw(v, 16)
        elif t in (LIST, SET):
            et, items = v
            self.list_header(et, len(items))
            for x in items:
                self.value(et, x)
        elif t == MAP:
            kt, vt, pairs = v
            self.varint(len(pairs))
            if pairs:
                self.out.append((kt << 4) | vt)
                for a, b in pairs:
                    self.value(kt, a)
                    self.value(vt, b)
        elif t == STRUCT:
            self.struct(v)
        else:
            raise ValueError(f"unknown type {t}")

    def list_header(self, et: int, k: int) -> None:
        if k < 15:
            self.out.append((k << 4) | et)
        else:
            self.out.append(0xF0 | et)
            self.varint(k)

    def field_header(self, last: int, fid: int, t: int) -> None:
        delta = fid - last
        if 0 < delta <= 15:
            self.out.append((delta << 4) | t)
        else:
            self.out.append(t)
            self.zigzag(I16, fid)

    def field(self, last: int, fid: int, t: int, v: Any) -> None:
        """One field of a struct whose previous field's id is ``last`` (0 for the first)."""
        if t in (TRUE, FALSE):
            self.field_header(last, fid, TRUE if v else FALSE)
        else:
            self.field_header(last, fid, t)
            self.value(t, v)

    def struct(self, fields: Struct) -> None:
        last = 0
        for fid, t, v in fields:
            self.field(last, fid, t, v)
            last = fid
        self.out.append(0)


def decode(buf: bytes, pos: int = 0, end: int | None = None) -> tuple[Struct, int]:
    """The struct at ``buf[pos:]`` and the offset just past it."""
    r = Reader(buf, pos, end)
    return r.struct(), r.pos


def encode(fields: Struct) -> bytes:
    w = Writer()
    w.struct(fields)
    return bytes(w.out)
