"""Driver for the whitespace-field line formats: chunks of lines -> typed int64 rows, with bad
lines reported by line number (or skipped under ``--skip-bad``)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from blocklab.kernels import fieldparse as P
from blocklab.traces.io import Input, line_at, next_line, text_blocks

from .base import ReadContext

K_INT, K_FIX3, K_FIX6, K_FIX9, K_TOKEN = P.K_INT, P.K_FIX3, P.K_FIX6, P.K_FIX9, P.K_TOKEN
MISSING = P.MISSING


class Rows:
    """Parsed rows of one chunk: values, line numbers and token text lookup."""

    def __init__(self, buf: np.ndarray, values: np.ndarray, lines: np.ndarray, tok: np.ndarray):
        self.buf = buf
        self.values = values
        self.lines = lines
        self.tok = tok

    def __len__(self) -> int:
        return len(self.values)

    def token_text(self, field: int) -> dict[int, str]:
        """Hash -> text of every distinct token in ``field``, in order of first appearance."""
        col = self.values[:, field]
        uniq, idx = np.unique(col, return_index=True)
        order = np.argsort(idx)
        uniq, idx = uniq[order], idx[order]
        raw = self.buf.base if isinstance(self.buf.base, bytes) else self.buf.tobytes()
        out = {}
        for h, k in zip(uniq.tolist(), idx.tolist(), strict=True):
            s, e = self.tok[k, field]
            out[h] = raw[s:e].decode("utf-8", "replace")
        return out


def field_rows(
    inp: Input, ctx: ReadContext, kinds: list[int], min_fields: int, what: str, first_line: int = 1
) -> Iterator[Rows]:
    kinds_arr = np.array(kinds, dtype=np.int64)
    for buf, chunk_line, nlines in text_blocks(inp, first_line=first_line):
        cap = nlines + 1
        out = np.empty((cap, len(kinds)), dtype=np.int64)
        tok = np.zeros((cap, len(kinds), 2), dtype=np.int64)
        lines = np.empty(cap, dtype=np.int64)
        pos, r, line_no = 0, 0, chunk_line
        while True:
            got, pos, status, where, field, line_no = P.parse_fields(
                buf, pos, kinds_arr, min_fields, out[r:], tok[r:], lines[r:], line_no
            )
            r += got
            if status == P.OK:
                break
            _idx, text = line_at(buf, where)
            if status == P.BAD_LINE:
                msg = f"expected {min_fields} fields in a {what} line, found {field}: {text!r}"
            else:
                msg = f"field {field + 1} of a {what} line is not a number: {text!r}"
            ctx.bad(inp.name, msg, line=line_no)
            pos = next_line(buf, where)
            line_no += 1
        if r:
            yield Rows(buf, out[:r], lines[:r], tok[:r])
        if ctx.on_progress:
            ctx.on_progress()


def check_monotonic(ctx: ReadContext, name: str, t: np.ndarray, lines: np.ndarray, last: int):
    """Indices of rows to keep; a row whose time is before the previous one is bad."""
    prev = np.maximum.accumulate(np.concatenate([[last], t]))[:-1]
    bad = t < prev
    if not bad.any():
        return None
    keep = np.ones(len(t), dtype=bool)
    # report (or skip) each offending row in order; rows after a skipped one compare with
    # the running maximum, as the stream continues
    for k in np.nonzero(bad)[0].tolist():
        ctx.bad(name, "time runs backwards", line=int(lines[k]))
        keep[k] = False
    return keep


def check_rows(ctx: ReadContext, name: str, bad: np.ndarray, lines: np.ndarray, msg: str):
    """Report rows flagged ``bad``; returns the keep mask (or None if all good)."""
    if not bad.any():
        return None
    for k in np.nonzero(bad)[0].tolist():
        ctx.bad(name, msg, line=int(lines[k]))
    return ~bad
