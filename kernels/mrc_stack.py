"""The LRU stack of ``kernels/mrc.py``: the state's layout (``ST``, ``SW``), the hash table of
tracked blocks, the marks of their last accesses and their renumbering, the room checks before
a request, and the max-heap of fixed-size sampling. ``kernels/mrc.py`` says what the curve is
and feeds the requests through these.

Stack distances are counted over access positions (Bennett and Kruskal, 1975; Almasi, Cascaval
and Padua, 2002): every tracked block holds one mark, at the position of its last access, and
the distance of an access whose previous one was at position p is the number of marks after
p. Positions are handed out one per access; when they run out the live marks are renumbered
0..live-1 in order (``compact``), so the tables hold O(distinct blocks), not O(trace).

The marks are counted on three levels, each small enough for the level above it to stay in
the processor's caches: the bitmap ``BM`` (one bit per position), the marks of each group of
512 positions (one 64-byte line of ``BM``) in ``C1`` (uint16), and a Fenwick tree ``F2`` over
the marks of each run of 16 such groups (8,192 positions). Marks after p = the bits after p in
its line + the ``C1`` entries after its group in its run + the runs after its run (the tree).
For 88 M positions ``C1`` is 344 KiB and ``F2`` 43 KiB, where a tree over 64-bit words would
be 5.5 MiB; a short reuse (the common case) stays within a line or a run and does not touch
the tree at all.

The hash table ``HT`` has one row per slot: the block's 64-bit hash (``mix``), which
identifies it since the hash is a bijection, and its position, ``EMPTY`` for a free slot;
linear probing from the hash's top bits, backward-shift deletion; one 16-byte row, so a lookup
costs one cache miss. ``CB`` holds the marks before each group (scratch of ``compact``); the
heap ``HPV`` (hash values mod P) / ``HPK`` (hashes) the tracked blocks of fixed-size sampling.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from blocklab.kernels._jit import njit

EMPTY = -1
P_BITS = 24
#: SHARDS' modulus P (the paper uses 2^24): rates are multiples of 2^-24.
P = 1 << P_BITS
#: Positions per group (one 64-byte line of the bitmap) and groups per run (one F2 entry).
GROUP_BITS = 9
RUN_GROUPS_BITS = 4
RUN_BITS = GROUP_BITS + RUN_GROUPS_BITS

# ST: int64 scalars
S_POS = 0  # positions handed out (the next is S_POS; capacity 64 * len(BM))
S_LIVE = 1  # tracked blocks (marks)
S_T = 2  # sampling threshold: a block is tracked when its hash value < T (T = P: all)
S_HEAP = 3  # blocks in the heap (fixed size)
S_SMAX = 4  # fixed size: most tracked blocks (0: fixed rate or exact)
S_EXACT = 5  # 1: exact histogram HE (T = P), 0: sampled HL
S_REQ = 6  # requests, by op: S_REQ + op
S_ACC = 8  # block accesses, by op (all of them, tracked or not)
S_SMP = 10  # tracked accesses, by op
S_COLD = 12  # tracked first accesses (cold misses), by op
S_COMPACT = 14  # compactions run
S_EVICT = 15  # blocks dropped by lowering T (fixed size)
S_MAXLIVE = 16  # most tracked blocks at once
ST_N = 17
# SW: float64 scalars (sampled: weights 1/R at the time)
W_COLD = 0  # weighted cold misses, by op
W_TOT = 2  # weighted tracked accesses, by op
SW_N = 4

_ONE = np.uint64(1)


@njit(forceinline=True, nrt=False)
def mix(key):
    """SplitMix64's finalizer (Steele, Lea and Flood, OOPSLA 2014): a well-spread 64-bit hash,
    and a bijection, so the hash identifies the key."""
    z = np.uint64(key) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@intrinsic
def _ctpop(typingctx, x):
    """LLVM's ``llvm.ctpop.i64``: one instruction on a processor with one."""
    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64]),
                                            "llvm.ctpop.i64")
        return builder.call(fn, [args[0]])

    return types.int64(x), codegen


@njit(forceinline=True, nrt=False)
def popcount(x):
    """Set bits of a uint64."""
    return _ctpop(np.uint64(x))


# Array elements at an index known to be in range and not negative. Numba reads a signed
# index as Python does (a negative one counts from the end), which costs a compare and an
# add on every access and keeps short loops from being vectorized; an unsigned index does
# not. (Measured on the exact kernel: the sum of a run's group counts became one scalar load
# and insert per element.)
@njit(forceinline=True, nrt=False)
def _ld(A, i):
    return A[np.uint64(i)]


@njit(forceinline=True, nrt=False)
def _st(A, i, v):
    A[np.uint64(i)] = v


@njit(forceinline=True, nrt=False)
def _shift(HT):
    """The shift that takes a hash to its home slot: its top log2(slots) bits. Top bits, so
    that doubling the table sends slot s's keys to slots 2s and 2s+1 (``rehash`` streams)."""
    n = HT.shape[0] >> 1
    b = 0
    while (np.int64(1) << b) < n:
        b += 1
    return np.uint64(64 - b)


@njit(forceinline=True, nrt=False)
def _find(HT, z, hsh):
    """The slot holding hash ``z`` (uint64), or minus one minus the free slot where it would
    go. Slot s is HT[2s] (the hash) and HT[2s+1] (the position, EMPTY when free)."""
    hmask = (HT.shape[0] >> 1) - 1
    s = np.int64(z >> hsh)
    zi = np.int64(z)
    while True:
        if _ld(HT, 2 * s + 1) == EMPTY:
            return -1 - s
        if _ld(HT, 2 * s) == zi:
            return s
        s = (s + 1) & hmask


@njit(nrt=False)
def _delete(HT, s, hsh):
    """Empty slot ``s`` (linear probing with backward-shift deletion: no tombstones)."""
    hmask = (HT.shape[0] >> 1) - 1
    j = s
    while True:
        j = (j + 1) & hmask
        if HT[2 * j + 1] == EMPTY:
            break
        home = np.int64(np.uint64(HT[2 * j]) >> hsh)
        # move j back to s unless its home lies cyclically in (s, j]
        if (s <= j and (home <= s or home > j)) or (s > j and home <= s and home > j):
            HT[2 * s] = HT[2 * j]
            HT[2 * s + 1] = HT[2 * j + 1]
            s = j
    HT[2 * s + 1] = EMPTY


@njit(nrt=False)
def rehash(HT, NT):
    """Copy every key of HT into the empty table NT (twice or more the slots). Homes are the
    hashes' top bits, so slot order is home order in both tables: NT is written in order."""
    hsh = _shift(NT)
    for s in range(HT.shape[0] >> 1):
        if HT[2 * s + 1] != EMPTY:
            t = -1 - _find(NT, np.uint64(HT[2 * s]), hsh)
            NT[2 * t] = HT[2 * s]
            NT[2 * t + 1] = HT[2 * s + 1]


@njit(forceinline=True, nrt=False)
def _fw_add(F2, r, v):
    """v more marks in run r (0-based; F2 is 1-based)."""
    m = F2.shape[0] - 1
    r += 1
    while r <= m:
        _st(F2, r, _ld(F2, r) + v)
        r += r & -r


@njit(forceinline=True, nrt=False)
def _fw_prefix(F2, r):
    """Marks in runs 0..r-1."""
    s = np.int64(0)
    while r > 0:
        s += _ld(F2, r)
        r &= r - 1
    return s


@njit(forceinline=True, nrt=False)
def _mark(BM, C1, F2, p):
    w = p >> 6
    _st(BM, w, _ld(BM, w) | (_ONE << np.uint64(p & 63)))
    g = p >> GROUP_BITS
    _st(C1, g, _ld(C1, g) + 1)
    _fw_add(F2, p >> RUN_BITS, 1)


@njit(forceinline=True, nrt=False)
def _unmark(BM, C1, F2, p):
    w = p >> 6
    _st(BM, w, _ld(BM, w) & ~(_ONE << np.uint64(p & 63)))
    g = p >> GROUP_BITS
    _st(C1, g, _ld(C1, g) - 1)
    _fw_add(F2, p >> RUN_BITS, -1)


@njit(forceinline=True, nrt=False)
def _since(BM, C1, F2, p, t, live):
    """Marks at positions p+1 .. t-1 (the mark at p set, none at t or after; ``live`` marks
    in all): the marks after p in its line, the groups after p's in its run, the runs after
    p's. The first two are sums of fixed length (8 words, 16 groups) with the earlier
    entries masked out, without branches; entries past t are empty."""
    wp = p >> 6
    line = wp & -8
    k = wp & 7
    s = popcount(_ld(BM, wp) >> np.uint64(p & 63) >> _ONE)
    for x in range(8):
        s += popcount(_ld(BM, line + x)) & -np.int64(x > k)
    gp = p >> GROUP_BITS
    run = gp & -16
    h = gp & 15
    for x in range(16):
        s += np.int64(_ld(C1, run + x)) & -np.int64(x > h)
    rp = p >> RUN_BITS
    if rp != t >> RUN_BITS:
        s += live - _fw_prefix(F2, rp + 1)
    return s


@njit(forceinline=True, nrt=False)
def _move(BM, C1, F2, p, t):
    """Move a mark from position p to position t > p; the tree is touched only when the two
    lie in different runs, and its nodes that count both runs are left alone (the two climbs
    stop where they meet)."""
    wp = p >> 6
    _st(BM, wp, _ld(BM, wp) & ~(_ONE << np.uint64(p & 63)))
    wt = t >> 6
    _st(BM, wt, _ld(BM, wt) | (_ONE << np.uint64(t & 63)))
    gp = p >> GROUP_BITS
    gt = t >> GROUP_BITS
    _st(C1, gp, _ld(C1, gp) - 1)
    _st(C1, gt, _ld(C1, gt) + 1)
    i = (p >> RUN_BITS) + 1
    j = (t >> RUN_BITS) + 1
    if i == j:
        return
    m = F2.shape[0] - 1
    while i != j and i <= m:
        if i < j:
            _st(F2, i, _ld(F2, i) - 1)
            i += i & -i
        else:
            _st(F2, j, _ld(F2, j) + 1)
            j += j & -j
    while j <= m and i != j:
        _st(F2, j, _ld(F2, j) + 1)
        j += j & -j


@njit(nrt=False)
def build_marks(BM, C1, F2, live):
    """BM, C1 and F2 with one mark at each of the positions 0..live-1 (O(len BM))."""
    nw = BM.shape[0]
    for w in range(nw):
        lo = w * 64
        if lo + 64 <= live:
            BM[w] = ~np.uint64(0)
        elif lo < live:
            BM[w] = (_ONE << np.uint64(live - lo)) - _ONE
        else:
            BM[w] = 0
    gsz = np.int64(1) << GROUP_BITS
    for g in range(C1.shape[0]):
        C1[g] = min(gsz, max(0, live - g * gsz))
    m = F2.shape[0] - 1
    rsz = np.int64(1) << RUN_BITS
    for j in range(1, m + 1):
        F2[j] = min(rsz, max(0, live - (j - 1) * rsz))
    for j in range(1, m + 1):
        q = j + (j & -j)
        if q <= m:
            F2[q] += F2[j]


@njit(nrt=False)
def compact(ST, HT, BM, C1, F2, CB):
    """Renumber the marks 0..live-1 in position order.

    A mark's new position is its rank, the marks before it: ``CB`` (one entry per group,
    filled here in one pass) plus the bits before it in its line. The hash table is walked
    slot by slot and each position replaced by its rank, so the table is read and written in
    order rather than at random, and no key needs to be kept per position."""
    pos = ST[S_POS]
    q = 0
    for g in range((pos + (1 << GROUP_BITS) - 1) >> GROUP_BITS):
        CB[g] = q
        q += np.int64(C1[g])
    for s in range(HT.shape[0] >> 1):
        p = _ld(HT, 2 * s + 1)
        if p != EMPTY:
            w = p >> 6
            r = _ld(CB, p >> GROUP_BITS)
            for x in range(w & -8, w):
                r += popcount(_ld(BM, x))
            _st(HT, 2 * s + 1, r + popcount(_ld(BM, w) & ((_ONE << np.uint64(p & 63)) - _ONE)))
    ST[S_POS] = q
    ST[S_COMPACT] += 1
    build_marks(BM, C1, F2, q)


@njit(forceinline=True, nrt=False)
def _heap_push(HPV, HPK, ST, v, k):
    i = ST[S_HEAP]
    ST[S_HEAP] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if HPV[parent] >= v:
            break
        HPV[i] = HPV[parent]
        HPK[i] = HPK[parent]
        i = parent
    HPV[i] = v
    HPK[i] = k


@njit(nrt=False)
def _heap_pop(HPV, HPK, ST):
    """Remove the top (largest hash value) of the heap and return its hash."""
    top = HPK[0]
    n = ST[S_HEAP] - 1
    ST[S_HEAP] = n
    v = HPV[n]
    k = HPK[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and HPV[c + 1] > HPV[c]:
            c += 1
        if HPV[c] <= v:
            break
        HPV[i] = HPV[c]
        HPK[i] = HPK[c]
        i = c
    if n > 0:
        HPV[i] = v
        HPK[i] = k
    return top


@njit(nrt=False)
def _lower_threshold(ST, HT, BM, C1, F2, HPV, HPK, hsh):
    """Fixed size, one block too many: T becomes the largest tracked hash value, and every
    block at or above it is dropped."""
    t = HPV[0]
    ST[S_T] = t
    while ST[S_HEAP] > 0 and HPV[0] >= t:
        z = np.uint64(_heap_pop(HPV, HPK, ST))
        s = _find(HT, z, hsh)
        _unmark(BM, C1, F2, HT[2 * s + 1])
        _delete(HT, s, hsh)
        ST[S_LIVE] -= 1
        ST[S_EVICT] += 1


@njit(forceinline=True, nrt=False)
def _fits(blocks, HT):
    """Whether the hash table holds ``blocks`` blocks: at most 3/4 of its slots used (linear
    probing's mean probe for a missing key, (1 + 1/(1-a)^2)/2, is 8.5 slots at a = 3/4, and
    four slots share a 64-byte line; the table is 16 bytes a slot, the largest table)."""
    return 4 * blocks <= 3 * (HT.shape[0] >> 1)


@njit(forceinline=True, nrt=False)
def _positions_for(ST, HT, BM, C1, F2, CB, nb):
    """Positions for ``nb`` more accesses, renumbering them when they ran out; False when
    the position tables must grow first: renumbering would leave less than 3/4 of them
    free (positions are cheap, and a renumbering walks the hash table), or too few."""
    cap = BM.shape[0] * 64
    if ST[S_POS] + nb <= cap:
        return True
    if 4 * ST[S_LIVE] > cap:
        return False
    compact(ST, HT, BM, C1, F2, CB)
    return ST[S_POS] + nb <= cap


@njit(forceinline=True, nrt=False)
def _room(ST, HT, BM, C1, F2, CB, nb):
    """Room for ``nb`` more blocks (compacting the positions when they ran out); False when
    the tables must grow first."""
    return _positions_for(ST, HT, BM, C1, F2, CB, nb) and _fits(ST[S_LIVE] + nb, HT)
