"""DiskSim and MQSim ASCII traces, and DiskSim "validate" traces.

- ``disksim``: DiskSim ASCII, one request per line: ``arrival_ms devno blkno bcount flags``;
  arrival in milliseconds (decimal), blkno and bcount in 512-byte blocks, flags bit 0 set for a
  read (DiskSim's ``DISKSIM_READ``).
- ``mqsim``: the same five fields as MQSim writes them, arrival in integer nanoseconds and the
  last field 1 for a read, 0 for a write (any other value is bad input).
- ``disksim-validate``: ``R|W CLASS blkno bcount servtime idle`` with the service time the
  real drive took and the idle time after it, both in microseconds. CLASS is how the real
  drive served it: ``Hit`` or ``Miss`` for reads; the HP C2247A trace also has ``Doub`` and
  ``Trip`` for writes. ``Hit`` sets the cache-hit flag; the classes are counted in the metadata.
  The trace is closed loop (one request outstanding), so arrivals are rebuilt as DiskSim
  replays it: request k+1 is issued when request k completes plus line k's idle time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np

from blocklab.traces.io import PEEK_BYTES, Input
from blocklab.traces.schema import (
    FLAG_CACHE_HIT,
    MAX_REQUEST_BYTES,
    OP_READ,
    OP_WRITE,
    SECTOR_BYTES,
)

from .base import Chunk, Format, ReadContext, mostly
from .fields import K_FIX3, K_FIX6, K_INT, K_TOKEN, check_monotonic, check_rows, field_rows

_NUM = rb"[+-]?\d+(?:\.\d*)?"
_ASCII = re.compile(rb"^\s*(" + _NUM + rb")\s+\d+\s+\d+\s+\d+\s+\d+\s*$")
_VALIDATE = re.compile(rb"^\s*[RW]\s+[A-Z][a-z]+\s+\d+\s+\d+\s+" + _NUM + rb"\s+" + _NUM + rb"\s*$")


def _lines(head: bytes) -> list[bytes]:
    lines = head.split(b"\n")
    if len(head) >= PEEK_BYTES:
        lines = lines[:-1]  # the last line may be cut
    return [ln for ln in lines[:50] if ln.strip() and not ln.lstrip().startswith(b"#")]


def _sniff_ascii(head: bytes, decimal: bool) -> bool:
    lines = _lines(head)
    if not mostly(lines, _ASCII.match):
        return False
    ms = [m for m in (_ASCII.match(ln) for ln in lines) if m]
    has_dot = any(b"." in m.group(1) for m in ms)
    return has_dot == decimal


def _ascii_chunks(inputs: list[Input], ctx: ReadContext, ms: bool) -> Iterator[Chunk]:
    (inp,) = inputs
    kinds = [K_FIX6 if ms else K_INT, K_INT, K_INT, K_INT, K_INT]
    what = "DiskSim ASCII" if ms else "MQSim"
    last = np.iinfo(np.int64).min
    for rows in field_rows(inp, ctx, kinds, 5, what):
        v = rows.values
        t, dev, blk, cnt, fl = (v[:, k] for k in range(5))
        keep = np.ones(len(v), dtype=bool)
        checks = [
            ((cnt < 0) | (cnt * SECTOR_BYTES > MAX_REQUEST_BYTES), "negative or absurd size"),
            ((blk < 0) | (dev < 0) | (t < 0), "negative time, device or block number"),
        ]
        if not ms:
            # MQSim's type is 0 (write) or 1 (read), nothing else (its README; MQSim itself
            # takes anything but "0" as a read, so a corrupt field would pass as reads
            # unseen); DiskSim's flags are a bit field, bit 0 the read flag
            checks.append(((fl != 0) & (fl != 1), "unknown request type (MQSim: 0 write, 1 read)"))
        for mask, msg in checks:
            k = check_rows(ctx, inp.name, mask & keep, rows.lines, msg)
            if k is not None:
                keep &= k
        order_ok = check_monotonic(ctx, inp.name, t[keep], rows.lines[keep], last)
        if order_ok is not None:
            idx = np.nonzero(keep)[0]
            keep[idx[~order_ok]] = False
        if not keep.all():
            t, dev, blk, cnt, fl = t[keep], dev[keep], blk[keep], cnt[keep], fl[keep]
        if len(t) == 0:
            continue
        last = int(t.max())
        cols = {
            "time_ns": t,
            "device": dev.astype(np.uint32),
            "sector": blk,
            "size_bytes": cnt * SECTOR_BYTES,
            "op": np.where((fl & 1) == 1, OP_READ, OP_WRITE).astype(np.uint8),
            "flags": np.zeros(len(t), dtype=np.uint16),
        }
        yield Chunk(cols)


def read_disksim(inputs: list[Input], ctx: ReadContext) -> Iterator[Chunk]:
    return _ascii_chunks(inputs, ctx, ms=True)


def read_mqsim(inputs: list[Input], ctx: ReadContext) -> Iterator[Chunk]:
    return _ascii_chunks(inputs, ctx, ms=False)


def _sniff_validate(head: bytes) -> bool:
    return mostly(_lines(head), _VALIDATE.match)


def read_validate(inputs: list[Input], ctx: ReadContext) -> Iterator[Chunk]:
    (inp,) = inputs
    kinds = [K_TOKEN, K_TOKEN, K_INT, K_INT, K_FIX3, K_FIX3]
    clock = 0  # issue time of the next request, ns
    for rows in field_rows(inp, ctx, kinds, 6, "DiskSim validate"):
        v = rows.values
        rw = rows.token_text(0)
        hm = rows.token_text(1)
        bad_tok = {h for h, s in rw.items() if s not in ("R", "W")}
        bad_tok |= {h for h, s in hm.items() if not (s.isalpha() and s[:1].isupper())}
        keep = np.ones(len(v), dtype=bool)
        if bad_tok:
            mask = np.isin(v[:, 0], list(bad_tok)) | np.isin(v[:, 1], list(bad_tok))
            k = check_rows(ctx, inp.name, mask, rows.lines,
                           "expected R or W, then the drive's class (Hit, Miss, ...)")
            if k is not None:
                keep &= k
        serv, idle, cnt = v[:, 4], v[:, 5], v[:, 3]
        k = check_rows(
            ctx, inp.name, keep & ((serv < 0) | (idle < 0) | (cnt < 0) | (v[:, 2] < 0)
                                   | (cnt * SECTOR_BYTES > MAX_REQUEST_BYTES)),
            rows.lines, "negative or absurd block, size, service or idle time",
        )
        if k is not None:
            keep &= k
        v = v[keep]
        if len(v) == 0:
            continue
        serv, idle = v[:, 4], v[:, 5]
        step = serv + idle
        starts = clock + np.concatenate([[0], np.cumsum(step[:-1])])
        clock = int(starts[-1] + step[-1])
        is_read = np.array([rw.get(h) == "R" for h in v[:, 0].tolist()])
        classes = [hm.get(h) for h in v[:, 1].tolist()]
        is_hit = np.array([c == "Hit" for c in classes])
        for c in set(classes):
            ctx.count(f"validate_class_{c}", classes.count(c))
        cols = {
            "time_ns": starts,
            "device": np.zeros(len(v), dtype=np.uint32),
            "sector": v[:, 2],
            "size_bytes": v[:, 3] * SECTOR_BYTES,
            "op": np.where(is_read, OP_READ, OP_WRITE).astype(np.uint8),
            "flags": np.where(is_hit, FLAG_CACHE_HIT, 0).astype(np.uint16),
            "latency_ns": serv,
            "complete_ns": starts + serv,
            "issue_ns": starts,
        }
        yield Chunk(cols)
    ctx.extra["closed_loop"] = "one outstanding; arrival = previous completion + idle time"


FORMATS = [
    Format(
        name="disksim-validate",
        description="DiskSim validate trace: R|W Hit|Miss blkno bcount servtime_us idle_us",
        sniff=_sniff_validate,
        read=read_validate,
    ),
    Format(
        name="mqsim",
        description="MQSim ASCII: arrival_ns device lba_sectors size_sectors type(0 write, 1 read)",
        sniff=lambda head: _sniff_ascii(head, decimal=False),
        read=read_mqsim,
    ),
    Format(
        name="disksim",
        description="DiskSim ASCII: arrival_ms device blkno bcount flags(bit0=read)",
        sniff=lambda head: _sniff_ascii(head, decimal=True),
        read=read_disksim,
    ),
]
