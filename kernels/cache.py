"""The array controller's cache: lines of ``line_sectors`` (8 to 64) keyed by (LUN, line),
found through an open-addressing hash table, with a sector mask of valid and of dirty data per
line (bit k = sector k of the line).

Lines are in one of three lists: free; clean (least recently used first: the eviction
order); dirty (oldest first: the destage order). A line being filled by a prefetch or written
by a destage is on no list ("busy") until that job completes; a write to a line under destage
marks it ``rewritten`` so that it stays dirty afterwards.

State: the line table ``CL`` (one row per line, columns CL_*), the hash table ``HT`` (one row
per slot: key or -1, line) and the list heads and counts in the engine's scalar array ``S``
(indices given by the caller as ``base``: CH_* offsets from it). The policy (what is cached
when, destaging, read-ahead) is the engine's (``kernels/engine/``); this module keeps the
structure consistent.
"""

from __future__ import annotations

import numpy as np

from blocklab.kernels._jit import njit

NONE = -1
KEY_SHIFT = 40  # key = lun << KEY_SHIFT | line index
L_FREE, L_CLEAN, L_DIRTY, L_BUSY = 0, 1, 2, 3  # list membership
CL_KEY, CL_VALID, CL_DIRTY, CL_WHERE, CL_JOB, CL_REWRITTEN, CL_DIRTY_T, CL_PREV, CL_NEXT = \
    range(9)
CL_N = 9
# offsets in S from the caller's base: list heads and tails, counts
CH_FREE, CH_CLEAN, CT_CLEAN, CH_DIRTY, CT_DIRTY, CN_FREE, CN_CLEAN, CN_DIRTY = range(8)
CH_N = 8


def new_tables(lines: int) -> tuple[np.ndarray, np.ndarray]:
    """Line and hash tables of a cache of ``lines`` lines (0: no cache), all free."""
    slots = 1 << max(2, int(2 * max(lines, 1) - 1).bit_length())
    cl = np.full((max(lines, 1), CL_N), NONE, np.int64)
    cl[:, [CL_VALID, CL_DIRTY, CL_REWRITTEN, CL_DIRTY_T]] = 0
    cl[:, CL_WHERE] = L_FREE
    if lines:
        cl[:-1, CL_NEXT] = np.arange(1, lines)
        cl[1:, CL_PREV] = np.arange(lines - 1)
    ht = np.full((slots, 2), NONE, np.int64)
    return cl, ht


def init_heads(S: np.ndarray, base: int, lines: int) -> None:
    S[base:base + CH_N] = NONE
    S[base + CN_FREE] = lines
    S[base + CN_CLEAN] = 0
    S[base + CN_DIRTY] = 0
    S[base + CH_FREE] = 0 if lines else NONE


@njit(forceinline=True, nrt=False)
def mask(lo, hi):
    """Bits lo .. hi-1 set (0 <= lo < hi <= 64)."""
    n = hi - lo
    if n >= 64:
        return np.int64(-1)
    return ((np.int64(1) << n) - 1) << lo


@njit(forceinline=True, nrt=False)
def _slot0(HT, key):
    # Fibonacci hashing of the key onto the power-of-two table
    return np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(20)) & (
        HT.shape[0] - 1)


@njit(forceinline=True, nrt=False)
def find(HT, key):
    """The line holding ``key``, or NONE."""
    m = HT.shape[0] - 1
    i = _slot0(HT, key)
    while HT[i, 0] != NONE:
        if HT[i, 0] == key:
            return HT[i, 1]
        i = (i + 1) & m
    return NONE


@njit(nrt=False)
def _h_insert(HT, key, line):
    m = HT.shape[0] - 1
    i = _slot0(HT, key)
    while HT[i, 0] != NONE:
        i = (i + 1) & m
    HT[i, 0] = key
    HT[i, 1] = line


@njit(nrt=False)
def _h_delete(HT, key):
    """Remove ``key`` (linear probing with backward-shift deletion: no tombstones)."""
    m = HT.shape[0] - 1
    i = _slot0(HT, key)
    while HT[i, 0] != key:
        i = (i + 1) & m
    j = i
    while True:
        j = (j + 1) & m
        if HT[j, 0] == NONE:
            break
        home = _slot0(HT, HT[j, 0])
        # move j back to i when its home is not cyclically in (i, j]
        if (i <= j and (home <= i or home > j)) or (i > j and home <= i and home > j):
            HT[i, 0] = HT[j, 0]
            HT[i, 1] = HT[j, 1]
            i = j
    HT[i, 0] = NONE


@njit(nrt=False)
def _unlink(CL, S, b, line):
    """Take ``line`` off its list (it becomes busy)."""
    w = CL[line, CL_WHERE]
    if w == L_BUSY:
        return
    p = CL[line, CL_PREV]
    n = CL[line, CL_NEXT]
    if w == L_FREE:
        h, t, k = CH_FREE, NONE, CN_FREE
    elif w == L_CLEAN:
        h, t, k = CH_CLEAN, CT_CLEAN, CN_CLEAN
    else:
        h, t, k = CH_DIRTY, CT_DIRTY, NONE
    if p == NONE:
        S[b + h] = n
    else:
        CL[p, CL_NEXT] = n
    if n == NONE:
        if t != NONE:
            S[b + t] = p
    else:
        CL[n, CL_PREV] = p
    if k != NONE:
        S[b + k] -= 1
    CL[line, CL_PREV] = NONE
    CL[line, CL_NEXT] = NONE
    CL[line, CL_WHERE] = L_BUSY


@njit(nrt=False)
def _append(CL, S, b, line, w):
    """Put ``line`` at the tail of list ``w`` (L_CLEAN or L_DIRTY)."""
    CL[line, CL_WHERE] = w
    CL[line, CL_NEXT] = NONE
    h, t = (CH_CLEAN, CT_CLEAN) if w == L_CLEAN else (CH_DIRTY, CT_DIRTY)
    tail = S[b + t]
    CL[line, CL_PREV] = tail
    if tail == NONE:
        S[b + h] = line
    else:
        CL[tail, CL_NEXT] = line
    S[b + t] = line
    if w == L_CLEAN:
        S[b + CN_CLEAN] += 1


@njit(forceinline=True, nrt=False)
def room(S, b):
    """Lines that can be taken now (free, or clean and evictable)."""
    return S[b + CN_FREE] + S[b + CN_CLEAN]


@njit(nrt=False)
def take(CL, HT, S, b, key):
    """A line for ``key`` (not present): a free one, else the least recently used clean one
    (evicted). The caller checked ``room``. The line is returned busy (on no list)."""
    return take_keeping(CL, HT, S, b, key, 0, -1)


@njit(nrt=False)
def take_keeping(CL, HT, S, b, key, keep_lo, keep_hi):
    """``take``, but never evicting a clean line whose key is in ``keep_lo .. keep_hi`` (a
    prefetch's own lines: evicting them would drop the data it reads ahead, or, were the key
    looked up again, take a second line for it). The caller checked that enough free lines
    and clean lines outside that range remain; without one this raises instead of
    corrupting the tables."""
    line = S[b + CH_FREE]
    if line == NONE:
        line = S[b + CH_CLEAN]
        while line != NONE and keep_lo <= CL[line, CL_KEY] <= keep_hi:
            line = CL[line, CL_NEXT]
        if line == NONE:
            raise IndexError("cache: no free or evictable line (the caller did not check room)")
        _h_delete(HT, CL[line, CL_KEY])
    _unlink(CL, S, b, line)
    CL[line, CL_KEY] = key
    CL[line, CL_VALID] = 0
    CL[line, CL_DIRTY] = 0
    CL[line, CL_JOB] = NONE
    CL[line, CL_REWRITTEN] = 0
    _h_insert(HT, key, line)
    return line


@njit(nrt=False)
def touch(CL, S, b, line):
    """A clean line was used: it becomes the most recently used."""
    if CL[line, CL_WHERE] == L_CLEAN:
        _unlink(CL, S, b, line)
        _append(CL, S, b, line, L_CLEAN)


@njit(nrt=False)
def make_clean(CL, S, b, line):
    """A busy or clean line with no dirty data goes (back) to the clean list's tail."""
    _unlink(CL, S, b, line)
    _append(CL, S, b, line, L_CLEAN)


@njit(nrt=False)
def write(CL, S, b, line, bits, now):
    """Sectors ``bits`` of ``line`` were written (they are now valid and dirty). A line that
    had no dirty data joins the dirty list's tail, unless a job holds it (its completion
    decides); a line under destage is marked to stay dirty afterwards. No sectors (``bits``
    0) change nothing: a line on the dirty list always has dirty sectors (the destage finds
    its extent from them)."""
    if bits == 0:
        return
    newly = CL[line, CL_DIRTY] == 0
    CL[line, CL_VALID] |= bits
    CL[line, CL_DIRTY] |= bits
    if newly:
        S[b + CN_DIRTY] += 1
    w = CL[line, CL_WHERE]
    if w == L_DIRTY:
        return
    if w == L_BUSY and CL[line, CL_JOB] != NONE:
        CL[line, CL_REWRITTEN] = 1
        return
    _unlink(CL, S, b, line)
    CL[line, CL_DIRTY_T] = now
    _append(CL, S, b, line, L_DIRTY)


@njit(nrt=False)
def hold(CL, S, b, line, job):
    """Take ``line`` off its list for a job (fill or destage)."""
    _unlink(CL, S, b, line)
    CL[line, CL_JOB] = job


@njit(nrt=False)
def release_destaged(CL, S, b, line, now):
    """A destage of ``line`` completed: clean, unless it was written again meanwhile."""
    CL[line, CL_JOB] = NONE
    if CL[line, CL_REWRITTEN]:
        CL[line, CL_REWRITTEN] = 0
        CL[line, CL_DIRTY_T] = now
        _append(CL, S, b, line, L_DIRTY)
    else:
        CL[line, CL_DIRTY] = 0
        S[b + CN_DIRTY] -= 1
        _append(CL, S, b, line, L_CLEAN)


@njit(nrt=False)
def release_filled(CL, S, b, line, now):
    """A fill of ``line`` completed: clean, or dirty if it was written meanwhile."""
    CL[line, CL_JOB] = NONE
    if CL[line, CL_DIRTY] != 0:
        CL[line, CL_REWRITTEN] = 0
        CL[line, CL_DIRTY_T] = now
        _append(CL, S, b, line, L_DIRTY)
    else:
        _append(CL, S, b, line, L_CLEAN)
