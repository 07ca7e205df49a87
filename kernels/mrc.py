"""LRU miss-ratio curves by reuse (stack) distance, exact or spatially sampled (SHARDS).

A block's stack distance at an access is the number of distinct other blocks accessed since
its previous access (Mattson, Gecsei, Slutz and Traiger, IBM Systems Journal 1970): an LRU
cache of C blocks hits exactly when it is below C. Distances are counted over access
positions (Bennett and Kruskal, 1975; Almasi, Cascaval and Padua, 2002): every tracked block
holds one mark, at the position of its last access, and the distance of an access whose
previous one was at position p is the number of marks after p. Positions are handed out one
per access; when they run out the live marks are renumbered 0..live-1 in order (compaction),
so the tables hold O(distinct blocks), not O(trace).

The marks are counted on three levels, each small enough for the level above it to stay in
the processor's caches: the bitmap ``BM`` (one bit per position), the marks of each group of
512 positions (one 64-byte line of ``BM``) in ``C1`` (uint16), and a Fenwick tree ``F2`` over
the marks of each run of 16 such groups (8,192 positions). Marks after p = the bits after p in
its line + the ``C1`` entries after its group in its run + the runs after its run (the tree).
For 88 M positions ``C1`` is 344 KiB and ``F2`` 43 KiB, where a tree over 64-bit words would
be 5.5 MiB; a short reuse (the common case) stays within a line or a run and does not touch
the tree at all.

Sampling is SHARDS (Waldspurger, Park, Garthwaite and Ahmad, "Efficient MRC Construction with
SHARDS", FAST 2015): a block is tracked when ``hash(block) mod P < T`` (P = 2^24, rate
R = T/P); a tracked access's distance, measured among tracked blocks, is scaled by 1/R and
counts with weight 1/R. Fixed rate keeps T; fixed size keeps at most ``smax`` tracked blocks,
and on overflow lowers T to the largest tracked hash value and drops every block at or above
it (a max-heap of the tracked hash values finds them), so memory is bounded. A count taken at
an earlier, higher rate is worth R_final/R_then of a count taken now (the paper rescales the
histogram at each change; weighting each count by 1/R when taken, and normalizing at the end,
is the same).

State is struct-of-arrays allocated by ``pipeline/mrc.py``: the hash table ``HT`` (one row per
slot: the block's 64-bit hash, which identifies it since the hash is a bijection, and its
position, ``EMPTY`` for a free slot; linear probing from the hash's top bits, backward-shift
deletion; one 16-byte row, so a lookup costs one cache miss), ``BM``, ``C1`` and ``F2``, the
marks before each group ``CB`` (scratch of ``compact``), the exact histogram
``HE[2 * distance + op]`` or the log-binned weighted histogram ``HL[bin, op]`` of scaled distances,
the heap ``HPV`` (hash values mod P) / ``HPK`` (hashes), and the scalars ``ST`` (int64) and
``SW`` (float64). ``process`` returns the row at which it stopped: the number of rows when
done, less when the tables must grow first (the wrapper grows them and calls again from
there).
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
#: Log-binned histogram of scaled distances: bin b holds distances x with
#: 2^(b/BINS_PER_OCTAVE) - 1 <= x < 2^((b+1)/BINS_PER_OCTAVE) - 1 (0.54 % wide).
BINS_PER_OCTAVE = 128
LOG_BINS = BINS_PER_OCTAVE * 64
#: Device index shift in a block key: key = device index << DEV_SHIFT | block number.
DEV_SHIFT = 47
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
#: Queued block accesses per run of ``process`` (the length of QZ, QR, QD).
QUEUE = 1024
#: Requests a run of ``process`` filters at most (the length of QF).
FILTER = 4096


@intrinsic
def prefetch(typingctx, arr, i):
    """Ask the processor to bring row ``i`` of ``arr`` into its caches (LLVM's
    ``llvm.prefetch``: read, high locality, data; a hint with no effect on results)."""
    def codegen(context, builder, sig, args):
        aryty = sig.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        zero = context.get_constant(types.intp, 0)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary,
                                       [args[1]] + [zero] * (aryty.ndim - 1), wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(arr, i), codegen


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
def popcount(x):
    """Set bits of a uint64."""
    return _ctpop(np.uint64(x))


# Array elements at an index known to be in range and not negative. Numba reads a signed
# index as Python does (a negative one counts from the end), which costs a compare and an
# add on every access and keeps short loops from being vectorized; an unsigned index does
# not. (Measured on the exact kernel: the sum of a run's group counts became one scalar load
# and insert per element.)
@njit(inline="always", nrt=False)
def _ld(A, i):
    return A[np.uint64(i)]


@njit(inline="always", nrt=False)
def _st(A, i, v):
    A[np.uint64(i)] = v


@njit(inline="always", nrt=False)
def _shift(HT):
    """The shift that takes a hash to its home slot: its top log2(slots) bits. Top bits, so
    that doubling the table sends slot s's keys to slots 2s and 2s+1 (``rehash`` streams)."""
    n = HT.shape[0] >> 1
    b = 0
    while (np.int64(1) << b) < n:
        b += 1
    return np.uint64(64 - b)


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
def _fw_add(F2, r, v):
    """v more marks in run r (0-based; F2 is 1-based)."""
    m = F2.shape[0] - 1
    r += 1
    while r <= m:
        _st(F2, r, _ld(F2, r) + v)
        r += r & -r


@njit(inline="always", nrt=False)
def _fw_prefix(F2, r):
    """Marks in runs 0..r-1."""
    s = np.int64(0)
    while r > 0:
        s += _ld(F2, r)
        r &= r - 1
    return s


@njit(inline="always", nrt=False)
def _mark(BM, C1, F2, p):
    w = p >> 6
    _st(BM, w, _ld(BM, w) | (_ONE << np.uint64(p & 63)))
    g = p >> GROUP_BITS
    _st(C1, g, _ld(C1, g) + 1)
    _fw_add(F2, p >> RUN_BITS, 1)


@njit(inline="always", nrt=False)
def _unmark(BM, C1, F2, p):
    w = p >> 6
    _st(BM, w, _ld(BM, w) & ~(_ONE << np.uint64(p & 63)))
    g = p >> GROUP_BITS
    _st(C1, g, _ld(C1, g) - 1)
    _fw_add(F2, p >> RUN_BITS, -1)


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
def log_bin(x):
    """The HL bin of a scaled distance x >= 0."""
    b = np.int64(np.log2(1.0 + x) * BINS_PER_OCTAVE)
    return b if b < LOG_BINS else LOG_BINS - 1


@njit(inline="always", nrt=False)
def _blocks(s, ns, bsec, sh):
    """First and last block of a request of ``ns`` sectors at sector ``s``: a shift when the
    block is a power of two sectors (an arithmetic shift is floor division, negatives too)."""
    if sh >= 0:
        return s >> sh, (s + ns - 1) >> sh
    return s // bsec, (s + ns - 1) // bsec


@njit(inline="always", nrt=False)
def _fits(blocks, HT):
    """Whether the hash table holds ``blocks`` blocks: at most 3/4 of its slots used (linear
    probing's mean probe for a missing key, (1 + 1/(1-a)^2)/2, is 8.5 slots at a = 3/4, and
    four slots share a 64-byte line; the table is 16 bytes a slot, the largest table)."""
    return 4 * blocks <= 3 * (HT.shape[0] >> 1)


@njit(inline="always", nrt=False)
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


@njit(inline="always", nrt=False)
def _room(ST, HT, BM, C1, F2, CB, nb):
    """Room for ``nb`` more blocks (compacting the positions when they ran out); False when
    the tables must grow first."""
    return _positions_for(ST, HT, BM, C1, F2, CB, nb) and _fits(ST[S_LIVE] + nb, HT)


@njit(inline="always", nrt=False)
def _access(z, o, w, exact, smax, ST, SW, HT, BM, C1, F2, HL, HPV, HPK, hsh):
    """One tracked access of the block of hash ``z``, with every scalar in ``ST`` and ``SW``
    (the general path: any sampling, the tables checked request by request); returns its
    stack distance, or -1 for a first access. The sampled histogram is updated here; the
    exact one by the caller."""
    ST[S_SMP + o] += 1
    SW[W_TOT + o] += w
    s = _find(HT, z, hsh)
    t = ST[S_POS]
    ST[S_POS] = t + 1
    if s >= 0:
        p = HT[2 * s + 1]
        d = _since(BM, C1, F2, p, t, ST[S_LIVE])
        _move(BM, C1, F2, p, t)
        HT[2 * s + 1] = t
        if not exact:
            HL[log_bin(d * w), o] += w
        return d
    _mark(BM, C1, F2, t)
    s = -1 - s
    HT[2 * s] = np.int64(z)
    HT[2 * s + 1] = t
    ST[S_LIVE] += 1
    ST[S_COLD + o] += 1
    SW[W_COLD + o] += w
    if smax > 0:
        _heap_push(HPV, HPK, ST, np.int64(z & np.uint64(P - 1)), np.int64(z))
        if ST[S_LIVE] > smax:
            _lower_threshold(ST, HT, BM, C1, F2, HPV, HPK, hsh)
    if ST[S_LIVE] > ST[S_MAXLIVE]:
        ST[S_MAXLIVE] = ST[S_LIVE]
    return -1


#: Software pipeline of ``_run_fast``: at access e, the hash slot of access e + AHEAD_SLOT
#: is prefetched, and access e + AHEAD_LINE (whose slot came in meanwhile) is looked up and
#: the bitmap line of its position prefetched.
AHEAD_SLOT = 24
AHEAD_LINE = 10


@njit(inline="always", nrt=False)
def _peek(HT, BM, QZ, QS, e, hsh):
    """Look access e up ahead of time: its slot (or -1 when its block is not in the table
    yet) into QS, and its bitmap line prefetched."""
    s = _find(HT, _ld(QZ, e), hsh)
    _st(QS, e, s)
    if s >= 0:
        prefetch(BM, _ld(HT, 2 * s + 1) >> 6)


@njit(nrt=False)
def _run_fast(e0, e1, exact, w, ST, SW, HT, BM, C1, F2, HE, HL, QZ, QO, QD, QS, hsh):
    """Queued accesses e0..e1-1, with room for all of them, exact or at a fixed rate
    (no block is dropped and the weight ``w`` is fixed): the same steps as ``_access``, with
    the scalars held in registers for the run, and memory fetched ahead (``AHEAD_SLOT``,
    ``AHEAD_LINE``; a slot found ahead stays valid, since no block is dropped; a block not
    found ahead is looked up again, as an earlier access may have added it). Exact: the
    distances go to ``QD`` (-1 for a first access) and their histogram rows are
    prefetched; the tracked and cold counts of weight 1.0 are added to ``SW`` as whole
    numbers at the end (the same sums: every partial sum is a whole number below 2^53).
    Sampled: the histogram and the weights are summed access by access, in order."""
    pos = ST[S_POS]
    live = ST[S_LIVE]
    smp1 = np.int64(0)
    cold0 = np.int64(0)
    cold1 = np.int64(0)
    tot0 = SW[W_TOT]
    tot1 = SW[W_TOT + 1]
    wc0 = SW[W_COLD]
    wc1 = SW[W_COLD + 1]
    for e in range(e0, min(e1, e0 + AHEAD_SLOT)):
        prefetch(HT, 2 * np.int64(_ld(QZ, e) >> hsh))
    for e in range(e0, min(e1, e0 + AHEAD_LINE)):
        _peek(HT, BM, QZ, QS, e, hsh)
    for e in range(e0, e1):
        if e + AHEAD_SLOT < e1:
            prefetch(HT, 2 * np.int64(_ld(QZ, e + AHEAD_SLOT) >> hsh))
        if e + AHEAD_LINE < e1:
            _peek(HT, BM, QZ, QS, e + AHEAD_LINE, hsh)
        z = _ld(QZ, e)
        o = _ld(QO, e)
        smp1 += o
        if not exact:
            if o == 0:
                tot0 += w
            else:
                tot1 += w
        s = _ld(QS, e)
        if s < 0:
            s = _find(HT, z, hsh)
        t = pos
        pos += 1
        if s >= 0:
            p = _ld(HT, 2 * s + 1)
            d = _since(BM, C1, F2, p, t, live)
            _move(BM, C1, F2, p, t)
            _st(HT, 2 * s + 1, t)
            if exact:
                _st(QD, e, d)
                prefetch(HE, 2 * d)
            else:
                HL[log_bin(d * w), o] += w
            continue
        _mark(BM, C1, F2, t)
        s = -1 - s
        _st(HT, 2 * s, np.int64(z))
        _st(HT, 2 * s + 1, t)
        live += 1
        cold1 += o
        cold0 += 1 - o
        if exact:
            _st(QD, e, -1)
        elif o == 0:
            wc0 += w
        else:
            wc1 += w
    smp0 = (e1 - e0) - smp1
    ST[S_SMP] += smp0
    ST[S_SMP + 1] += smp1
    ST[S_COLD] += cold0
    ST[S_COLD + 1] += cold1
    ST[S_POS] = pos
    ST[S_LIVE] = live
    if live > ST[S_MAXLIVE]:
        ST[S_MAXLIVE] = live
    if exact:
        SW[W_TOT] += np.float64(smp0)
        SW[W_TOT + 1] += np.float64(smp1)
        SW[W_COLD] += np.float64(cold0)
        SW[W_COLD + 1] += np.float64(cold1)
    else:
        SW[W_TOT] = tot0
        SW[W_TOT + 1] = tot1
        SW[W_COLD] = wc0
        SW[W_COLD + 1] = wc1


@njit(nrt=False)
def _count(sector, nsec, op, i, j, bsec, sh, ST, sign):
    """Add (sign 1) or take away (sign -1) the requests and block accesses of rows i..j-1,
    by op."""
    for r in range(i, j):
        o = np.int64(op[r])
        if o > 1 or nsec[r] <= 0:
            continue
        first, last = _blocks(sector[r], nsec[r], bsec, sh)
        ST[S_REQ + o] += sign
        ST[S_ACC + o] += sign * (last - first + 1)


@njit(nrt=False)
def _filter(dev, sector, nsec, op, i, j, sh, Tu, ST, QF):
    """Rows i..j-1 (block a power of two sectors): QF[r - i] = 1 for a read or write that
    has a block to look at (its one block is tracked, or it has more than one block), else 0;
    requests and block accesses are counted by op. No branch and no store that depends on
    a row, so that the compiler runs it on vectors: the untracked rows cost a few
    instructions each."""
    r0 = np.int64(0)
    r1 = np.int64(0)
    a0 = np.int64(0)
    a1 = np.int64(0)
    m = np.uint64(P - 1)
    for r in range(i, j):
        o = np.int64(_ld(op, r))
        ns = _ld(nsec, r)
        s = _ld(sector, r)
        first = s >> sh
        nb = ((s + ns - 1) >> sh) - first + 1
        ok = (o <= 1) & (ns > 0)
        z = mix((np.int64(_ld(dev, r)) << DEV_SHIFT) | first)
        look = ok & (((z & m) < Tu) | (nb != 1))
        _st(QF, r - i, np.uint8(look))
        v = np.int64(ok)
        r1 += v & o
        r0 += v & (1 - o)
        a1 += (nb & -(v & o))
        a0 += (nb & -(v & (1 - o)))
    ST[S_REQ] += r0
    ST[S_REQ + 1] += r1
    ST[S_ACC] += a0
    ST[S_ACC + 1] += a1


@njit(nrt=False)
def _queue_simple(dev, sector, nsec, op, i, j, sh, ST, QZ, QO, QR):
    """Every block tracked, block a power of two sectors: when each of rows i..j-1 is a read
    or a write of one block, queue them all (``QZ``, ``QO``, ``QR``), count them by op and
    return True; else return False, with nothing counted. One loop without branches, which
    the compiler runs on vectors."""
    r1 = np.int64(0)
    a = np.int64(0)
    bad = np.int64(0)
    for r in range(i, j):
        o = np.int64(_ld(op, r))
        ns = _ld(nsec, r)
        s = _ld(sector, r)
        first = s >> sh
        nb = ((s + ns - 1) >> sh) - first + 1
        bad |= np.int64((o > 1) | (ns <= 0) | (nb != 1))
        _st(QZ, r - i, mix((np.int64(_ld(dev, r)) << DEV_SHIFT) | first))
        _st(QO, r - i, o)
        _st(QR, r - i, r)
        r1 += o
        a += nb
    if bad != 0:
        return False
    ST[S_REQ] += (j - i) - r1
    ST[S_REQ + 1] += r1
    ST[S_ACC] += (j - i) - r1
    ST[S_ACC + 1] += r1
    return True


@njit(nrt=False)
def process(dev, sector, nsec, op, i0, bsec, ST, SW, HT, BM, C1, F2, CB, HE, HL, HPV, HPK,
            QZ, QO, QR, QD, QS, QF):
    """Feed requests ``i0..`` (device index, first sector, sectors, op 0 read / 1 write; other
    ops are skipped) through the LRU stack, one access per block of ``bsec`` sectors touched.

    Requests go in runs, each of up to ``len(QZ)`` queued block accesses (hash ``QZ``, op
    ``QO``, row ``QR``):

    - exact, with the block a power of two sectors: when every row of the run is a read or a
      write of one block (the common case), ``_queue_simple`` queues them all in one loop the
      compiler vectorizes;
    - sampled, block a power of two sectors: ``_filter`` marks the rows (up to ``len(QF)``)
      that have a tracked block or more than one block, counting requests and accesses by
      op in one vectorized loop, so that an untracked request costs a few instructions; the
      marked rows' tracked blocks are queued;
    - else (other block sizes, requests of several blocks) request by request.

    Exact or at a fixed rate (no block is dropped), ``_run_fast`` processes the run in
    segments that need no renumbering and no growth (see below); at a fixed size the run
    goes access by access, the tables checked at each request, and a queued block is
    checked again against the threshold of the moment (it can fall within a run). Exact
    distances (``QD``) are added to the histogram after the run, so that its cache misses
    overlap. A run ends when the queue is full, at a request boundary (the rows after it
    are counted back out); a request of more blocks than the queue holds is processed
    alone, block by block.

    Returns the row it stopped at: ``len(op)`` when done; less when the tables must grow
    before that row (its blocks might not fit).
    """
    n = op.shape[0]
    qcap = QZ.shape[0]
    exact = ST[S_EXACT] == 1
    smax = ST[S_SMAX]
    sh = -1
    if bsec & (bsec - 1) == 0:
        sh = 0
        while (np.int64(1) << sh) < bsec:
            sh += 1
    hsh = _shift(HT)
    # rows filtered per run: as many as the queue holds when every block is tracked, else
    # more; a run that fills the queue early (requests of many blocks) shortens the next
    win = qcap if ST[S_T] == P else QF.shape[0]
    i = i0
    while i < n:
        T = ST[S_T]
        Tu = np.uint64(T)
        nq = 0
        j = i
        if T == P and sh >= 0 and \
                _queue_simple(dev, sector, nsec, op, i, min(n, i + qcap), sh, ST, QZ, QO, QR):
            j = min(n, i + qcap)
            nq = j - i
        elif sh >= 0:
            jf = min(n, i + min(win, QF.shape[0]))
            _filter(dev, sector, nsec, op, i, jf, sh, Tu, ST, QF)
            while j < jf:
                if _ld(QF, j - i) == 0:
                    j += 1
                    continue
                s = sector[j]
                first = s >> sh
                nb = ((s + nsec[j] - 1) >> sh) - first + 1
                if nq + nb > qcap:
                    break
                base = np.int64(dev[j]) << DEV_SHIFT
                o = np.int64(op[j])
                for b in range(first, first + nb):
                    z = mix(base | b)
                    _st(QZ, nq, z)
                    _st(QO, nq, o)
                    _st(QR, nq, j)
                    nq += np.int64((z & np.uint64(P - 1)) < Tu)
                j += 1
            if j < jf:
                _count(sector, nsec, op, j, jf, bsec, sh, ST, -1)
                win = max(64, j - i)
            elif 2 * nq < qcap:
                win = min(QF.shape[0], 2 * win)
        else:
            while j < n:
                o = np.int64(op[j])
                ns = nsec[j]
                if o > 1 or ns <= 0:
                    j += 1
                    continue
                first, last = _blocks(sector[j], ns, bsec, sh)
                nb = last - first + 1
                if nq + nb > qcap:
                    break
                base = np.int64(dev[j]) << DEV_SHIFT
                for b in range(first, last + 1):
                    z = mix(base | b)
                    _st(QZ, nq, z)
                    _st(QO, nq, o)
                    _st(QR, nq, j)
                    nq += np.int64((z & np.uint64(P - 1)) < Tu)
                ST[S_REQ + o] += 1
                ST[S_ACC + o] += nb
                j += 1
        if j == i and j < n:
            # one request of more blocks than the queue holds: alone, block by block (it is
            # not counted yet)
            o = np.int64(op[i])
            first, last = _blocks(sector[i], nsec[i], bsec, sh)
            base = np.int64(dev[i]) << DEV_SHIFT
            need = last - first + 1
            if smax == 0:
                # exact or a fixed rate: room for its tracked blocks, as a queued request
                need = 0
                for b in range(first, last + 1):
                    need += np.int64((mix(base | b) & np.uint64(P - 1)) < Tu)
            if not _room(ST, HT, BM, C1, F2, CB, need):
                return i
            for b in range(first, last + 1):
                z = mix(base | b)
                ST[S_ACC + o] += 1
                T = ST[S_T]
                if np.int64(z & np.uint64(P - 1)) >= T:
                    continue
                w = 1.0 if exact else P / T
                d = _access(z, o, w, exact, smax, ST, SW, HT, BM, C1, F2, HL, HPV, HPK, hsh)
                if exact and d >= 0:
                    HE[2 * d + o] += 1
            ST[S_REQ + o] += 1
            i += 1
            continue
        stop = -1
        row = -1
        if smax == 0:
            # Exact or a fixed rate: before each request, room for its tracked blocks (its
            # queued entries, q): positions, renumbered when they run out
            # (_positions_for), and hash slots (_fits), else the tables grow first. In a
            # segment of whole requests that ends before the entry that would not get a
            # position and before the tables could be short, no request needs anything:
            # such segments go to _run_fast, and the request at the end of one is checked
            # alone (with the counts of the moment), so that renumbering and growth come at
            # the same request whatever the queue's length.
            w = 1.0 if exact else P / T
            e = 0
            while e < nq:
                end = min(nq, e + BM.shape[0] * 64 - ST[S_POS],
                          e + 3 * (HT.shape[0] >> 1) // 4 - ST[S_LIVE])
                if end < nq:
                    while end > e and _ld(QR, end - 1) == _ld(QR, end):
                        end -= 1
                if end == e:
                    end = e + 1
                    while end < nq and _ld(QR, end) == _ld(QR, e):
                        end += 1
                    if not _room(ST, HT, BM, C1, F2, CB, end - e):
                        stop = e
                        row = _ld(QR, e)
                        break
                _run_fast(e, end, exact, w, ST, SW, HT, BM, C1, F2, HE, HL, QZ, QO, QD, QS,
                          hsh)
                e = end
        else:
            # the queued blocks' hash slots are fetched from memory together, not one miss
            # at a time as each access needs its slot
            for e in range(nq):
                prefetch(HT, 2 * np.int64(_ld(QZ, e) >> hsh))
            for e in range(nq):
                r = QR[e]
                o = QO[e]
                if r != row:
                    row = r
                    first, last = _blocks(sector[r], nsec[r], bsec, sh)
                    if not _room(ST, HT, BM, C1, F2, CB, last - first + 1):
                        stop = e
                        break
                T = ST[S_T]
                z = QZ[e]
                if np.int64(z & np.uint64(P - 1)) >= T:
                    QD[e] = -1
                    continue
                w = 1.0 if exact else P / T
                QD[e] = _access(z, o, w, exact, smax, ST, SW, HT, BM, C1, F2, HL, HPV, HPK,
                                hsh)
        if exact:
            # a first access (-1) adds 0 to row 0
            for e in range(nq if stop < 0 else stop):
                d = _ld(QD, e)
                k = 2 * max(d, 0) + _ld(QO, e)
                _st(HE, k, _ld(HE, k) + np.int64(d >= 0))
        if stop >= 0:
            _count(sector, nsec, op, row, j, bsec, sh, ST, -1)
            return row
        i = j
    return i
