"""A byte-level parser of whitespace-separated records with typed fields, for the line formats
with one request per line (DiskSim ASCII and validate traces, MQSim, fio iologs).

Each line's fields are parsed by kind into one row of an int64 matrix:

- K_INT: a whole number (optionally signed)
- K_FIX3 / K_FIX6 / K_FIX9: a decimal scaled by 10**3 / 10**6 / 10**9 (ms->ns is K_FIX6)
- K_TOKEN: an FNV-1a hash of the token; the token's (start, end) is kept in ``tok`` so the
  caller can decode the distinct ones (file names, op words)

Lines that start with '#' and blank lines are skipped. A line with fewer fields than
``min_fields`` has missing trailing fields set to ``MISSING`` (the caller decides).
"""

from __future__ import annotations

from ._jit import njit
from .bytescan import fnv1a, line_end, parse_fixed, parse_int, skip_spaces, token_end

K_INT, K_FIX3, K_FIX6, K_FIX9, K_TOKEN = 0, 1, 2, 3, 4
OK, BAD_LINE, BAD_FIELD = 0, 1, 2
MISSING = -(1 << 62)


@njit(nrt=False)
def parse_fields(buf, pos, kinds, min_fields, out, tok, lines, line_no):
    """Parse lines from ``buf[pos:]``.

    ``out[r, f]`` gets field f of row r, ``tok[r, f, 0:2]`` the byte span of token fields,
    ``lines[r]`` the 1-based line number (counting from ``line_no`` at ``pos``).
    Returns (rows, next position, status, status position, field index, line number at pos).
    """
    n = len(buf)
    nk = len(kinds)
    r = 0
    while pos < n:
        start = pos
        end = line_end(buf, pos, n)
        pos = end + 1
        i = skip_spaces(buf, start, end)
        if i >= end or buf[i] == 35:
            line_no += 1
            continue
        f = 0
        while f < nk:
            i = skip_spaces(buf, i, end)
            if i >= end:
                break
            j = token_end(buf, i, end)
            k = kinds[f]
            if k == K_TOKEN:
                out[r, f] = fnv1a(buf, i, j)
                tok[r, f, 0] = i
                tok[r, f, 1] = j
            else:
                if k == K_INT:
                    v, e = parse_int(buf, i, j)
                elif k == K_FIX3:
                    v, e = parse_fixed(buf, i, j, 3)
                elif k == K_FIX6:
                    v, e = parse_fixed(buf, i, j, 6)
                else:
                    v, e = parse_fixed(buf, i, j, 9)
                if e != j:
                    return r, start, BAD_FIELD, start, f, line_no
                out[r, f] = v
            i = j
            f += 1
        if f < min_fields:
            return r, start, BAD_LINE, start, f, line_no
        while f < nk:
            out[r, f] = MISSING
            f += 1
        lines[r] = line_no
        line_no += 1
        r += 1
    return r, pos, OK, pos, 0, line_no
