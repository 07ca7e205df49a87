"""LRU miss-ratio curves by reuse (stack) distance, exact or spatially sampled (SHARDS).

A block's stack distance at an access is the number of distinct other blocks accessed since
its previous access (Mattson, Gecsei, Slutz and Traiger, IBM Systems Journal 1970): an LRU
cache of C blocks hits exactly when it is below C. Distances are counted over access
positions (Bennett and Kruskal, 1975; Almasi, Cascaval and Padua, 2002): every tracked block
holds one mark, at the position of its last access, and the distance of an access whose
previous one was at position p is the number of marks after p. Positions are handed out one
per access; when they run out the live marks are renumbered 0..live-1 in order (compaction),
so the tables hold O(distinct blocks), not O(trace).

The positions' marks, the hash table of tracked blocks and the heap of fixed-size sampling are
``kernels/mrc_stack.py``'s (with the state's layout); this module feeds requests through them.

Sampling is SHARDS (Waldspurger, Park, Garthwaite and Ahmad, "Efficient MRC Construction with
SHARDS", FAST 2015): a block is tracked when ``hash(block) mod P < T`` (P = 2^24, rate
R = T/P); a tracked access's distance, measured among tracked blocks, is scaled by 1/R and
counts with weight 1/R. Fixed rate keeps T; fixed size keeps at most ``smax`` tracked blocks,
and on overflow lowers T to the largest tracked hash value and drops every block at or above
it (a max-heap of the tracked hash values finds them), so memory is bounded. A count taken at
an earlier, higher rate is worth R_final/R_then of a count taken now (the paper rescales the
histogram at each change; weighting each count by 1/R when taken, and normalizing at the end,
is the same).

State is struct-of-arrays allocated by ``pipeline/mrc.py``: the stack's tables
(``kernels/mrc_stack.py``: the hash table ``HT``, the marks ``BM``, ``C1`` and ``F2``, their
scratch ``CB``, the heap ``HPV`` / ``HPK``), the exact histogram ``HE[2 * distance + op]`` or
the log-binned weighted histogram ``HL[bin, op]`` of scaled distances, the queue of a run
(``QZ``, ``QO``, ``QR``, ``QD``, ``QS``, ``QF``: see ``process``), and the scalars ``ST``
(int64) and ``SW`` (float64), laid out in ``kernels/mrc_stack.py``. ``process`` returns the
row at which it stopped: the number of rows when done, less when the tables must grow first
(the wrapper grows them and calls again from there).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from blocklab.kernels._jit import njit
from blocklab.kernels.mrc_stack import (
    EMPTY,
    GROUP_BITS,
    P_BITS,
    RUN_BITS,
    RUN_GROUPS_BITS,
    S_ACC,
    S_COLD,
    S_COMPACT,
    S_EVICT,
    S_EXACT,
    S_HEAP,
    S_LIVE,
    S_MAXLIVE,
    S_POS,
    S_REQ,
    S_SMAX,
    S_SMP,
    S_T,
    ST_N,
    SW_N,
    W_COLD,
    W_TOT,
    P,
    _find,
    _heap_push,
    _ld,
    _lower_threshold,
    _mark,
    _move,
    _room,
    _shift,
    _since,
    _st,
    build_marks,
    compact,
    mix,
    popcount,
    rehash,
)

# the curve's front door: what pipeline/mrc.py, tools/ and tests/ call (the state's layout and
# the table functions are kernels/mrc_stack.py's, named here too)
__all__ = ["BINS_PER_OCTAVE", "DEV_SHIFT", "EMPTY", "FILTER", "GROUP_BITS", "LOG_BINS", "P",
           "P_BITS", "QUEUE", "RUN_BITS", "RUN_GROUPS_BITS", "S_ACC", "S_COLD", "S_COMPACT",
           "S_EVICT", "S_EXACT", "S_HEAP", "S_LIVE", "S_MAXLIVE", "S_POS", "S_REQ", "S_SMAX",
           "S_SMP", "S_T", "ST_N", "SW_N", "W_COLD", "W_TOT", "build_marks", "compact",
           "log_bin", "mix", "popcount", "prefetch", "process", "rehash"]

#: Log-binned histogram of scaled distances: bin b holds distances x with
#: 2^(b/BINS_PER_OCTAVE) - 1 <= x < 2^((b+1)/BINS_PER_OCTAVE) - 1 (0.54 % wide).
BINS_PER_OCTAVE = 128
LOG_BINS = BINS_PER_OCTAVE * 64
#: Device index shift in a block key: key = device index << DEV_SHIFT | block number.
DEV_SHIFT = 47
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


@njit(forceinline=True, nrt=False)
def log_bin(x):
    """The HL bin of a scaled distance x >= 0."""
    b = np.int64(np.log2(1.0 + x) * BINS_PER_OCTAVE)
    return b if b < LOG_BINS else LOG_BINS - 1


@njit(forceinline=True, nrt=False)
def _blocks(s, ns, bsec, sh):
    """First and last block of a request of ``ns`` sectors at sector ``s``: a shift when the
    block is a power of two sectors (an arithmetic shift is floor division, negatives too)."""
    if sh >= 0:
        return s >> sh, (s + ns - 1) >> sh
    return s // bsec, (s + ns - 1) // bsec


@njit(forceinline=True, nrt=False)
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


@njit(forceinline=True, nrt=False)
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


@njit(forceinline=True, nrt=False)
def _row(op, nsec, sector, r, sh):
    """Row ``r``'s op and sectors, and the blocks it touches: the first and how many (a block
    is 2^sh sectors)."""
    s = _ld(sector, r)
    ns = _ld(nsec, r)
    first = s >> sh
    return np.int64(_ld(op, r)), ns, first, ((s + ns - 1) >> sh) - first + 1


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
        o, ns, first, nb = _row(op, nsec, sector, r, sh)
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
        o, ns, first, nb = _row(op, nsec, sector, r, sh)
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
def _queue_filtered(dev, sector, nsec, op, i, n, win, bsec, sh, Tu, ST, QZ, QO, QR, QF):
    """Block a power of two sectors, a threshold ``Tu``: ``_filter`` rows ``i..`` (up to
    ``win``, at most ``len(QF)``), then queue the blocks of the marked rows (``QZ``, ``QO``,
    ``QR``; only the tracked ones stay queued) while the queue holds a whole request; the
    filtered rows after the last one queued are counted back out. Returns (the row after
    the run, entries queued, the next run's window: shorter when the queue filled early,
    longer when it was less than half full)."""
    qcap = QZ.shape[0]
    nq = 0
    j = i
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
    return j, nq, win


@njit(nrt=False)
def _queue_requests(dev, sector, nsec, op, i, n, bsec, sh, Tu, ST, QZ, QO, QR):
    """Any block size: queue the blocks of rows ``i..`` request by request (only the tracked
    ones stay queued), counting each request and its block accesses by op, while the queue
    holds a whole request. Returns (the row after the run, entries queued)."""
    qcap = QZ.shape[0]
    nq = 0
    j = i
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
    return j, nq


@njit(nrt=False)
def _alone(dev, sector, nsec, op, i, bsec, sh, Tu, exact, smax, ST, SW, HT, BM, C1, F2, CB,
           HE, HL, HPV, HPK, hsh):
    """Row ``i``, a request of more blocks than the queue holds (not counted yet), alone,
    block by block. False, with nothing done, when the tables must grow first."""
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
        return False
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
    return True


@njit(nrt=False)
def _run_segments(nq, exact, T, ST, SW, HT, BM, C1, F2, CB, HE, HL, QZ, QO, QR, QD, QS, hsh):
    """Exact or a fixed rate (threshold ``T``): the ``nq`` queued accesses, in segments for
    ``_run_fast``. Returns (-1, -1) when all are done, else the entry and the row of the
    request the tables must grow before.

    Before each request, room for its tracked blocks (its queued entries): positions,
    renumbered when they run out (``_positions_for``), and hash slots (``_fits``), else the
    tables grow first. In a segment of whole requests that ends before the entry that would
    not get a position and before the tables could be short, no request needs anything:
    such segments go to ``_run_fast``, and the request at the end of one is checked alone
    (with the counts of the moment), so that renumbering and growth come at the same request
    whatever the queue's length."""
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
                return e, _ld(QR, e)
        _run_fast(e, end, exact, w, ST, SW, HT, BM, C1, F2, HE, HL, QZ, QO, QD, QS, hsh)
        e = end
    return -1, -1


@njit(nrt=False)
def _run_sized(nq, exact, smax, sector, nsec, bsec, sh, ST, SW, HT, BM, C1, F2, CB, HL, HPV,
               HPK, QZ, QO, QR, QD, hsh):
    """Fixed size: the ``nq`` queued accesses one by one, the tables checked at each request
    and each block against the threshold of the moment (an untracked one gets ``QD`` -1).
    Returns (-1, -1) when all are done, else the entry and the row of the request the tables
    must grow before."""
    # the queued blocks' hash slots are fetched from memory together, not one miss at a time
    # as each access needs its slot
    for e in range(nq):
        prefetch(HT, 2 * np.int64(_ld(QZ, e) >> hsh))
    row = -1
    for e in range(nq):
        r = QR[e]
        o = QO[e]
        if r != row:
            row = r
            first, last = _blocks(sector[r], nsec[r], bsec, sh)
            if not _room(ST, HT, BM, C1, F2, CB, last - first + 1):
                return e, row
        T = ST[S_T]
        z = QZ[e]
        if np.int64(z & np.uint64(P - 1)) >= T:
            QD[e] = -1
            continue
        w = 1.0 if exact else P / T
        QD[e] = _access(z, o, w, exact, smax, ST, SW, HT, BM, C1, F2, HL, HPV, HPK, hsh)
    return -1, -1


@njit(nrt=False)
def _add_exact(HE, QD, QO, m):
    """The exact distances of queued entries ``0..m-1`` into the histogram (a first access,
    -1, adds 0 to row 0)."""
    for e in range(m):
        d = _ld(QD, e)
        k = 2 * max(d, 0) + _ld(QO, e)
        _st(HE, k, _ld(HE, k) + np.int64(d >= 0))


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
      marked rows' tracked blocks are queued (``_queue_filtered``);
    - else (other block sizes, requests of several blocks) request by request
      (``_queue_requests``).

    Exact or at a fixed rate (no block is dropped), ``_run_fast`` processes the run in
    segments that need no renumbering and no growth (``_run_segments``); at a fixed size the
    run goes access by access, the tables checked at each request, and a queued block is
    checked again against the threshold of the moment (it can fall within a run:
    ``_run_sized``). Exact distances (``QD``) are added to the histogram after the run, so
    that its cache misses overlap (``_add_exact``). A run ends when the queue is full, at a
    request boundary (the rows after it are counted back out); a request of more blocks than
    the queue holds is processed alone, block by block (``_alone``).

    The helpers are called once per run (up to ``len(QZ)`` accesses), not per access, so
    they are plain calls; the per-access steps inside them are inlined.

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
        if T == P and sh >= 0 and \
                _queue_simple(dev, sector, nsec, op, i, min(n, i + qcap), sh, ST, QZ, QO, QR):
            j = min(n, i + qcap)
            nq = j - i
        elif sh >= 0:
            j, nq, win = _queue_filtered(dev, sector, nsec, op, i, n, win, bsec, sh, Tu, ST,
                                         QZ, QO, QR, QF)
        else:
            j, nq = _queue_requests(dev, sector, nsec, op, i, n, bsec, sh, Tu, ST, QZ, QO, QR)
        if j == i and j < n:
            if not _alone(dev, sector, nsec, op, i, bsec, sh, Tu, exact, smax, ST, SW, HT, BM,
                          C1, F2, CB, HE, HL, HPV, HPK, hsh):
                return i
            i += 1
            continue
        if smax == 0:
            stop, row = _run_segments(nq, exact, T, ST, SW, HT, BM, C1, F2, CB, HE, HL, QZ,
                                      QO, QR, QD, QS, hsh)
        else:
            stop, row = _run_sized(nq, exact, smax, sector, nsec, bsec, sh, ST, SW, HT, BM, C1,
                                   F2, CB, HL, HPV, HPK, QZ, QO, QR, QD, hsh)
        if exact:
            _add_exact(HE, QD, QO, nq if stop < 0 else stop)
        if stop >= 0:
            _count(sector, nsec, op, row, j, bsec, sh, ST, -1)
            return row
        i = j
    return i
