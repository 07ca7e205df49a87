"""fio iologs (``write_iolog``), versions 2 and 3.

Version 3 (``fio version 3 iolog``): ``usec filename action [offset length]`` where usec is the
time since the job's log started (fio's ``log_io_u`` writes ``utime_since_now``), offset and
length in bytes. Version 2 (``fio version 2 iolog``): ``filename action [offset length]`` with
no timestamps; a ``wait`` action's third field is a delay in microseconds, so arrivals are the
running sum of the waits. Actions: read, write, trim (discard), sync and datasync (flush), wait;
add, open and close name the files. Each file is a device and a stream, numbered in order of
appearance (the names are kept in the metadata).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from blocklab.traces.errors import BadInput
from blocklab.traces.io import Input
from blocklab.traces.schema import (
    MAX_REQUEST_BYTES,
    OP_DISCARD,
    OP_FLUSH,
    OP_READ,
    OP_WRITE,
    SECTOR_BYTES,
)

from .base import Chunk, Format, ReadContext
from .fields import K_INT, K_TOKEN, MISSING, check_monotonic, check_rows, field_rows

_OPS = {"read": OP_READ, "write": OP_WRITE, "trim": OP_DISCARD, "sync": OP_FLUSH,
        "datasync": OP_FLUSH}
_FILE_ACTIONS = {"add", "open", "close"}
HEADERS = {2: b"fio version 2 iolog", 3: b"fio version 3 iolog"}


def _version(head: bytes) -> int | None:
    first = head.split(b"\n", 1)[0].strip()
    for v, h in HEADERS.items():
        if first == h:
            return v
    return None


def sniff(head: bytes) -> bool:
    return _version(head) is not None


def read(inputs: list[Input], ctx: ReadContext) -> Iterator[Chunk]:
    (inp,) = inputs
    version = _version(inp.peek(256))
    if version is None:
        raise BadInput(inp.name, "not a fio iolog: expected 'fio version 2|3 iolog'", line=1)
    header = inp.peek(256).split(b"\n", 1)[0]
    inp.read(len(header) + 1)
    files: dict[str, int] = {}
    ctx.extra["files"] = []
    if version == 3:
        kinds, tf, af, of, lf, minf = [K_INT, K_TOKEN, K_TOKEN, K_INT, K_INT], 0, 2, 3, 4, 3
    else:
        kinds, tf, af, of, lf, minf = [K_TOKEN, K_TOKEN, K_INT, K_INT], -1, 1, 2, 3, 2
    fname_field = 1 if version == 3 else 0
    clock = 0
    last = np.iinfo(np.int64).min
    for rows in field_rows(inp, ctx, kinds, minf, f"fio v{version} iolog", first_line=2):
        v = rows.values
        acts = rows.token_text(af)
        names = rows.token_text(fname_field)
        for h in names.values():
            if h not in files:
                files[h] = len(files)
                ctx.extra["files"].append(h)
        act = np.array([acts[h] for h in v[:, af].tolist()], dtype=object)
        known = np.isin(act, list(_OPS) + list(_FILE_ACTIONS) + ["wait"])
        keep = np.ones(len(v), dtype=bool)
        k = check_rows(ctx, inp.name, ~known, rows.lines, "unknown fio iolog action")
        if k is not None:
            keep &= k
        is_io = np.isin(act, list(_OPS)) & keep
        need = is_io & ((v[:, of] == MISSING) | (v[:, lf] == MISSING))
        k = check_rows(ctx, inp.name, need, rows.lines, "fio iolog I/O without offset and length")
        if k is not None:
            keep &= k
            is_io &= k
        bad = is_io & ((v[:, of] < 0) | (v[:, lf] < 0) | (v[:, lf] > MAX_REQUEST_BYTES))
        k = check_rows(ctx, inp.name, bad, rows.lines, "negative or absurd offset or size")
        if k is not None:
            keep &= k
            is_io &= k
        if version == 3:
            t = v[:, tf] * 1000
        else:
            waits = np.where((act == "wait") & keep, np.maximum(v[:, of], 0), 0) * 1000
            cum = clock + np.cumsum(waits)
            t = cum
            clock = int(cum[-1]) if len(cum) else clock
        sel = np.nonzero(is_io)[0]
        ok = check_monotonic(ctx, inp.name, t[sel], rows.lines[sel], last)
        if ok is not None:
            sel = sel[ok]
        if len(sel) == 0:
            continue
        last = int(t[sel].max())
        dev = np.array([files[names[h]] for h in v[sel, fname_field].tolist()], dtype=np.int64)
        op = np.array([_OPS[a] for a in act[sel]], dtype=np.uint8)
        off = np.where(op == OP_FLUSH, 0, v[sel, of])
        cols = {
            "time_ns": t[sel],
            "device": dev.astype(np.uint32),
            "sector": off // SECTOR_BYTES,
            "size_bytes": np.where(op == OP_FLUSH, 0, v[sel, lf]),
            "op": op,
            "flags": np.zeros(len(sel), dtype=np.uint16),
            "stream": dev,
        }
        yield Chunk(cols)


FORMAT = Format(
    name="fio",
    description="fio iolog v2 or v3 (write_iolog): [usec] file action offset length",
    sniff=sniff,
    read=read,
    extensions=(".iolog", ".log"),
)
