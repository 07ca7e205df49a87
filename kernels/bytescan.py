"""Byte-level scanning helpers shared by the text parsers' kernels (whole numbers, fixed-point
decimals, tokens) over a uint8 buffer. Each returns the new position; failures return -1."""

from __future__ import annotations

from ._jit import njit

SPACE = 32
TAB = 9
NL = 10
CR = 13


@njit(forceinline=True, nrt=False)
def is_digit(c):
    return 48 <= c <= 57


@njit(forceinline=True, nrt=False)
def skip_spaces(buf, i, end):
    while i < end and (buf[i] == SPACE or buf[i] == TAB or buf[i] == CR):
        i += 1
    return i


@njit(forceinline=True, nrt=False)
def line_end(buf, i, n):
    while i < n and buf[i] != NL:
        i += 1
    return i


@njit(forceinline=True, nrt=False)
def parse_uint(buf, i, end):
    """Digits at ``i`` -> (value, next position); position -1 when there is no digit."""
    v = 0
    j = i
    while j < end and 48 <= buf[j] <= 57:
        v = v * 10 + (buf[j] - 48)
        j += 1
    if j == i or j - i > 20:
        return 0, -1
    return v, j  # 20 digits wrap like u64 -> int64 (18446744073709551615 is -1)


@njit(forceinline=True, nrt=False)
def parse_int(buf, i, end):
    """Optionally signed whole number."""
    neg = False
    if i < end and (buf[i] == 45 or buf[i] == 43):
        neg = buf[i] == 45
        i += 1
    v, j = parse_uint(buf, i, end)
    if neg:
        v = -v
    return v, j


@njit(forceinline=True, nrt=False)
def parse_fixed(buf, i, end, digits):
    """Decimal ``123.456`` as an integer scaled by 10**digits (extra digits truncated).

    ``parse_fixed(b"3889.120018", 0, n, 9)`` is 3889120018000 (seconds -> ns). Accepts an
    optional sign and an exponent-free number; returns (value, next position or -1). A number
    whose scaled magnitude passes int64 is refused (-1), not wrapped.
    """
    neg = False
    if i < end and (buf[i] == 45 or buf[i] == 43):
        neg = buf[i] == 45
        i += 1
    whole = 0
    over = False
    j = i
    while j < end and 48 <= buf[j] <= 57:
        if whole > 922337203685477579:  # one more digit would pass int64
            over = True
        else:
            whole = whole * 10 + (buf[j] - 48)
        j += 1
    ndig = j - i
    frac = 0
    used = 0
    if j < end and buf[j] == 46:  # '.'
        j += 1
        k = j
        while j < end and 48 <= buf[j] <= 57:
            if used < digits:
                frac = frac * 10 + (buf[j] - 48)
                used += 1
            j += 1
        ndig += j - k
    if ndig == 0 or j - i > 40:
        return 0, -1
    # reject exponents and other trailing number characters: let the caller see them
    while used < digits:
        frac *= 10
        used += 1
    scale = 1
    for _ in range(digits):
        scale *= 10
    if over or whole > (9223372036854775807 - frac) // scale:
        return 0, -1  # beyond int64 once scaled: it wrapped, 18446744073.709551615 s to -1 ns
    v = whole * scale + frac
    if neg:
        v = -v
    return v, j


@njit(forceinline=True, nrt=False)
def token_end(buf, i, end):
    """End of the non-blank token starting at ``i`` (a newline ends it too: a parser may
    scan a line's fields before it knows where the line ends)."""
    while i < end and buf[i] != SPACE and buf[i] != TAB and buf[i] != CR and buf[i] != NL:
        i += 1
    return i


@njit(forceinline=True, nrt=False)
def fnv1a(buf, i, j):
    """64-bit FNV-1a hash of buf[i:j] (used to identify process names without decoding)."""
    h = -3750763034362895579  # 0xCBF29CE484222325 as int64
    for k in range(i, j):
        h = (h ^ buf[k]) * 1099511628211
    return h


@njit(nrt=False)
def count_lines(buf):
    """Newlines in ``buf`` (uint8). A sum the compiler vectorizes: bytes.count was a tenth of a
    blkparse text ingest's main thread (2.7 GB/s, and it holds the GIL)."""
    n = 0
    for i in range(buf.shape[0]):
        n += buf[i] == NL
    return n
