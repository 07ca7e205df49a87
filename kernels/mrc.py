"""LRU miss-ratio curves by reuse (stack) distance, exact or spatially sampled (SHARDS).

A block's stack distance at an access is the number of distinct other blocks accessed since
its previous access (Mattson, Gecsei, Slutz and Traiger, IBM Systems Journal 1970): an LRU
cache of C blocks hits exactly when it is below C. Distances are counted over access
positions (Bennett and Kruskal, 1975; Almasi, Cascaval and Padua, 2002): every tracked block
holds one mark, at the position of its last access, and the distance of an access whose
previous one was at position p is the number of marks after p. Positions are handed out one
per access; when they run out the live marks are renumbered 0..live-1 in order (compaction),
so the tables hold O(distinct blocks), not O(trace).

The marks are a bitmap ``BM`` (one bit per position) with a Fenwick tree ``FW`` of the number
of marks in each 64-bit word: marks after p = the bits above p in its word + the marks of the
later words. The tree has one entry per 64 positions, so it stays in the processor's cache
where a tree over positions would not (measured: about twice the speed on a trace with a
working set of 200 000 blocks). A re-access counts the marks between p and the newest
position, and moves its mark there, with walks that stop where the two ends meet: a short
reuse (the common case) costs a few steps, not the tree's height.

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
slot: key or EMPTY, position; linear probing, backward-shift deletion; key and position side by
side, so a lookup costs one cache miss), ``BM`` and ``FW``, the marks before each bitmap
word ``CW`` (scratch of ``compact``), the exact histogram ``HE[distance, op]`` or
the log-binned weighted histogram ``HL[bin, op]`` of scaled distances, the heap ``HPV`` (hash
values) / ``HPK`` (keys), and the scalars ``ST`` (int64) and ``SW`` (float64). ``process``
returns the row at which it stopped: the number of rows when done, less when the tables must
grow first (the wrapper grows them and calls again from there).
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
#: Queued block accesses per run of ``process`` (the length of QK, QZ, QR, QD).
QUEUE = 1024


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
    """SplitMix64's finalizer (Steele, Lea and Flood, OOPSLA 2014): a well-spread 64-bit hash."""
    z = np.uint64(key) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(inline="always", nrt=False)
def _home(z, hmask):
    return np.int64(z >> np.uint64(32)) & hmask


@njit(inline="always", nrt=False)
def popcount(x):
    """Set bits of a uint64 (the SWAR count of Hacker's Delight, 5-2)."""
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(inline="always", nrt=False)
def _prefix(FW, w):
    """Marks in words 0..w-1."""
    s = np.int64(0)
    while w > 0:
        s += FW[w]
        w &= w - 1
    return s


@njit(inline="always", nrt=False)
def _add(FW, w, v):
    """v more marks in word w (0-based; FW is 1-based)."""
    m = FW.shape[0] - 1
    w += 1
    while w <= m:
        FW[w] += v
        w += w & -w


@njit(inline="always", nrt=False)
def _mark(BM, FW, p):
    BM[p >> 6] |= _ONE << np.uint64(p & 63)
    _add(FW, p >> 6, 1)


@njit(inline="always", nrt=False)
def _unmark(BM, FW, p):
    BM[p >> 6] &= ~(_ONE << np.uint64(p & 63))
    _add(FW, p >> 6, -1)


@njit(inline="always", nrt=False)
def _between(FW, i, j):
    """Marks in words i..j-1 (i <= j): prefix(j) - prefix(i), the two walks stopping where
    they meet, so a short range (a recent block) costs a few steps whatever the tree size."""
    s = np.int64(0)
    while j > i:
        s += FW[j]
        j &= j - 1
    while i > j:
        s -= FW[i]
        i &= i - 1
    return s


@njit(inline="always", nrt=False)
def _since(BM, FW, p, t):
    """Marks at positions p+1 .. t-1 (the mark at p set, none at t or after)."""
    wp = p >> 6
    wt = t >> 6
    mine = BM[wp] >> np.uint64(p & 63) >> _ONE
    if wp == wt:
        return popcount(mine)
    # the rest of p's word, the whole words between, the used part of t's word
    return popcount(mine) + _between(FW, wp + 1, wt + 1)


@njit(inline="always", nrt=False)
def _move(BM, FW, p, t):
    """Move a mark from position p to position t > p: the tree nodes that count both words
    are left alone (the two climbs stop where they meet)."""
    BM[p >> 6] &= ~(_ONE << np.uint64(p & 63))
    BM[t >> 6] |= _ONE << np.uint64(t & 63)
    m = FW.shape[0] - 1
    i = (p >> 6) + 1
    j = (t >> 6) + 1
    while i != j and i <= m:
        if i < j:
            FW[i] -= 1
            i += i & -i
        else:
            FW[j] += 1
            j += j & -j
    while j <= m and i != j:
        FW[j] += 1
        j += j & -j


@njit(nrt=False)
def build_marks(BM, FW, live):
    """BM and FW with one mark at each of the positions 0..live-1 (O(len BM))."""
    nw = BM.shape[0]
    m = FW.shape[0] - 1
    for w in range(nw):
        lo = w * 64
        if lo + 64 <= live:
            BM[w] = ~np.uint64(0)
        elif lo < live:
            BM[w] = (_ONE << np.uint64(live - lo)) - _ONE
        else:
            BM[w] = 0
    for j in range(1, m + 1):
        FW[j] = popcount(BM[j - 1]) if j - 1 < nw else 0
    for j in range(1, m + 1):
        q = j + (j & -j)
        if q <= m:
            FW[q] += FW[j]


@njit(nrt=False)
def _find(HT, key, z):
    """The slot holding ``key``, or minus one minus the empty slot where it would go."""
    hmask = HT.shape[0] - 1
    s = _home(z, hmask)
    while True:
        k = HT[s, 0]
        if k == key:
            return s
        if k == EMPTY:
            return -1 - s
        s = (s + 1) & hmask


@njit(nrt=False)
def _delete(HT, s):
    """Empty slot ``s`` (linear probing with backward-shift deletion: no tombstones)."""
    hmask = HT.shape[0] - 1
    j = s
    while True:
        j = (j + 1) & hmask
        k = HT[j, 0]
        if k == EMPTY:
            break
        home = _home(mix(k), hmask)
        # move j back to s unless its home lies cyclically in (s, j]
        if (s <= j and (home <= s or home > j)) or (s > j and home <= s and home > j):
            HT[s, 0] = k
            HT[s, 1] = HT[j, 1]
            s = j
    HT[s, 0] = EMPTY
    HT[s, 1] = EMPTY


@njit(nrt=False)
def compact(ST, HT, BM, FW, CW):
    """Renumber the marks 0..live-1 in position order.

    A mark's new position is its rank, the marks before it: ``CW`` (one entry per bitmap
    word, filled here in one pass) plus the bits below it in its word. The hash table is
    walked slot by slot and each position replaced by its rank, so the table is read and
    written in order rather than at random (the keys' slots), and no key needs to be kept
    per position."""
    pos = ST[S_POS]
    q = 0
    for w in range((pos + 63) >> 6):
        CW[w] = q
        q += popcount(BM[w])
    for s in range(HT.shape[0]):
        if HT[s, 0] != EMPTY:
            p = HT[s, 1]
            w = p >> 6
            HT[s, 1] = CW[w] + popcount(BM[w] & ((_ONE << np.uint64(p & 63)) - _ONE))
    ST[S_POS] = q
    ST[S_COMPACT] += 1
    build_marks(BM, FW, q)


@njit(nrt=False)
def rehash(HT, NT):
    """Copy every key of HT into the empty table NT (another size)."""
    for s in range(HT.shape[0]):
        k = HT[s, 0]
        if k != EMPTY:
            t = -1 - _find(NT, k, mix(k))
            NT[t, 0] = k
            NT[t, 1] = HT[s, 1]


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
    """Remove the top (largest hash value) of the heap and return its key."""
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
def _lower_threshold(ST, HT, BM, FW, HPV, HPK):
    """Fixed size, one block too many: T becomes the largest tracked hash value, and every
    block at or above it is dropped."""
    t = HPV[0]
    ST[S_T] = t
    while ST[S_HEAP] > 0 and HPV[0] >= t:
        k = _heap_pop(HPV, HPK, ST)
        s = _find(HT, k, mix(k))
        _unmark(BM, FW, HT[s, 1])
        _delete(HT, s)
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
def _room(ST, HT, BM, FW, CW, nb):
    """Room for ``nb`` more blocks (compacting the positions when they ran out); False when
    the tables must grow first."""
    cap = BM.shape[0] * 64
    if ST[S_POS] + nb > cap:
        compact(ST, HT, BM, FW, CW)
        if 2 * (ST[S_POS] + nb) > cap:
            return False
    return 2 * (ST[S_LIVE] + nb) <= HT.shape[0]


@njit(inline="always", nrt=False)
def _access(key, z, o, w, exact, smax, ST, SW, HT, BM, FW, HL, HPV, HPK):
    """One tracked access; returns its stack distance, or -1 for a first access. The sampled
    histogram is updated here; the exact one by the caller."""
    ST[S_SMP + o] += 1
    SW[W_TOT + o] += w
    s = _find(HT, key, z)
    t = ST[S_POS]
    ST[S_POS] = t + 1
    if s >= 0:
        p = HT[s, 1]
        d = _since(BM, FW, p, t)
        _move(BM, FW, p, t)
        HT[s, 1] = t
        if not exact:
            HL[log_bin(d * w), o] += w
        return d
    _mark(BM, FW, t)
    s = -1 - s
    HT[s, 0] = key
    HT[s, 1] = t
    ST[S_LIVE] += 1
    ST[S_COLD + o] += 1
    SW[W_COLD + o] += w
    if smax > 0:
        _heap_push(HPV, HPK, ST, np.int64(z & np.uint64(P - 1)), key)
        if ST[S_LIVE] > smax:
            _lower_threshold(ST, HT, BM, FW, HPV, HPK)
    if ST[S_LIVE] > ST[S_MAXLIVE]:
        ST[S_MAXLIVE] = ST[S_LIVE]
    return -1


@njit(nrt=False)
def _count(dev, sector, nsec, op, i, j, bsec, sh, ST):
    """Requests and block accesses of rows i..j-1, by op."""
    for r in range(i, j):
        o = np.int64(op[r])
        if o > 1 or nsec[r] <= 0:
            continue
        first, last = _blocks(sector[r], nsec[r], bsec, sh)
        ST[S_REQ + o] += 1
        ST[S_ACC + o] += last - first + 1


@njit(nrt=False)
def process(dev, sector, nsec, op, i0, bsec, ST, SW, HT, BM, FW, CW, HE, HL, HPV, HPK,
            QK, QZ, QR, QD):
    """Feed requests ``i0..`` (device index, first sector, sectors, op 0 read / 1 write; other
    ops are skipped) through the LRU stack, one access per block of ``bsec`` sectors touched.

    Requests go in runs: a first tight loop forms each block's key and hash and queues the
    tracked blocks (all of them when exact) in ``QK`` (key), ``QZ`` (hash) and ``QR`` (row),
    counting requests and accesses by op without a branch on the op; the queued blocks' hash
    slots are prefetched; then the queue is processed in order (``QD``: the distances, added
    to the exact histogram afterwards, so that its misses overlap too). A run ends at a
    request boundary when the queue is full; a request of more blocks than the queue holds
    is processed alone, block by block. At a fixed size the threshold can fall within a run:
    a queued block is checked again against the threshold of the moment.

    Returns the row it stopped at: ``len(op)`` when done; less when the tables must grow
    before that row (its blocks might not fit).
    """
    n = op.shape[0]
    qcap = QK.shape[0]
    exact = ST[S_EXACT] == 1
    smax = ST[S_SMAX]
    hmask = HT.shape[0] - 1
    sh = -1
    if bsec & (bsec - 1) == 0:
        sh = 0
        while (np.int64(1) << sh) < bsec:
            sh += 1
    i = i0
    while i < n:
        T = ST[S_T]
        Tu = np.uint64(T)
        nq = 0
        j = i
        r0 = 0
        r1 = 0
        a0 = 0
        a1 = 0
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
            if nb == 1:
                key = base | first
                z = mix(key)
                QK[nq] = key
                QZ[nq] = z
                QR[nq] = j
                nq += np.int64((z & np.uint64(P - 1)) < Tu)
            else:
                for b in range(first, last + 1):
                    key = base | b
                    z = mix(key)
                    QK[nq] = key
                    QZ[nq] = z
                    QR[nq] = j
                    nq += np.int64((z & np.uint64(P - 1)) < Tu)
            r1 += o
            a1 += nb * o
            r0 += 1 - o
            a0 += nb * (1 - o)
            j += 1
        if j == i:
            # one request of more blocks than the queue holds: alone, block by block
            o = np.int64(op[i])
            first, last = _blocks(sector[i], nsec[i], bsec, sh)
            if not _room(ST, HT, BM, FW, CW, last - first + 1):
                return i
            base = np.int64(dev[i]) << DEV_SHIFT
            for b in range(first, last + 1):
                key = base | b
                z = mix(key)
                ST[S_ACC + o] += 1
                T = ST[S_T]
                if np.int64(z & np.uint64(P - 1)) >= T:
                    continue
                w = 1.0 if exact else P / T
                d = _access(key, z, o, w, exact, smax, ST, SW, HT, BM, FW, HL, HPV, HPK)
                if exact and d >= 0:
                    HE[d, o] += 1
            ST[S_REQ + o] += 1
            i += 1
            continue
        # the queued blocks' hash slots are fetched from memory together, not one miss at a
        # time as each access needs its slot
        for e in range(nq):
            prefetch(HT, _home(QZ[e], hmask))
        row = -1
        stop = -1
        for e in range(nq):
            r = QR[e]
            o = np.int64(op[r])
            if r != row:
                row = r
                first, last = _blocks(sector[r], nsec[r], bsec, sh)
                if not _room(ST, HT, BM, FW, CW, last - first + 1):
                    stop = e
                    break
            T = ST[S_T]
            z = QZ[e]
            if np.int64(z & np.uint64(P - 1)) >= T:
                QD[e] = -1
                continue
            w = 1.0 if exact else P / T
            QD[e] = _access(QK[e], z, o, w, exact, smax, ST, SW, HT, BM, FW, HL, HPV, HPK)
        if exact:
            for e in range(nq if stop < 0 else stop):
                d = QD[e]
                if d >= 0:
                    HE[d, np.int64(op[QR[e]])] += 1
        if stop >= 0:
            _count(dev, sector, nsec, op, i, row, bsec, sh, ST)
            return row
        ST[S_REQ] += r0
        ST[S_REQ + 1] += r1
        ST[S_ACC] += a0
        ST[S_ACC + 1] += a1
        i = j
    return i
