"""Synthetic workload kernels: SPC-1, IOR, Iometer and Orion requests into preallocated columns.

Each ``*_fill`` kernel writes up to ``cap`` rows into the caller's arrays and keeps where it
stopped in small state arrays, so the caller can write a long trace in chunks of bounded
memory; calling it again continues the same sequence. Rows come out in the order the
benchmark issues them: SPC-1 (open loop) by arrival time; the closed-loop generators by phase,
then place in the stream (``stream_seq``), streams interleaved.

Random numbers come from SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom
number generators", OOPSLA 2014; constants as in Vigna's public-domain ``splitmix64.c``): one
64-bit word of state, advanced by a fixed odd constant and mixed. It is simple enough that the
tests' plain-Python references (``tests/reference/``) reproduce it exactly, so offsets that
depend on random draws (IOR's shuffled offsets) are compared value for value.

Output columns (all int64 unless said): ``t_ns`` arrival (open loop) or 0, ``dev`` device,
``sector`` first 512-byte sector on the volume, ``nbytes`` length, ``op`` 0 read / 1 write,
``stream``, ``seq`` place in the stream, ``phase``, ``outst`` outstanding requests of the stream.
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import njit
from .units import SECTOR

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_TWO_M53 = 1.0 / 9007199254740992.0  # 2**-53


@njit(forceinline=True, nrt=False)
def next_u64(rng, i):
    """The next 64-bit output of SplitMix64 generator ``i`` (its state is ``rng[i]``)."""
    z = rng[i] + _GAMMA
    rng[i] = z
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


@njit(forceinline=True, nrt=False)
def uniform(rng, i):
    """A double in [0, 1) from the top 53 bits of the next output."""
    return np.float64(next_u64(rng, i) >> _S11) * _TWO_M53


@njit(forceinline=True, nrt=False)
def below(rng, i, n):
    """A whole number in [0, n): floor(uniform * n), clamped against rounding up to n."""
    r = np.int64(uniform(rng, i) * n)
    return r if r < n else n - 1


@njit(forceinline=True, nrt=False)
def exponential(rng, i, mean):
    """An exponential variate of the given mean (inversion: -ln(1 - U))."""
    return -math.log(1.0 - uniform(rng, i)) * mean


# --------------------------------------------------------------------------------------------
# SPC-1
#
# The stream table (rows = the eight streams of a BSU; see traces/synth/spc1.py for the values
# and their source) has these columns:
SP_ASU, SP_PERMILLE, SP_READ10, SP_KIND, SP_REGION, SP_START, SP_RANGE, SP_RUN = range(8)
SP_NCOLS = 8
KIND_UNIFORM, KIND_HRRW, KIND_SEQ = 0, 1, 2
# Per-stream state (one row per stream of every BSU):
ST_BLOCK, ST_END, ST_LEN, ST_HOFF, ST_REWRITE, ST_RWBLOCK, ST_INIT = range(7)
ST_NCOLS = 7
# Hot regions (one row per hierarchical-reuse random walk):
HR_MIN, HR_TREE, HR_LEVELS, HR_DELTA, HR_LEAF0 = range(5)
HR_NCOLS = 5
LEAF_BLOCKS = 8  # blocks (4 KiB) per leaf of the walk: 32 KiB (spc1.c HRRW_BLOCKS_PER_LEAF)
WALK_FIRST_LEVEL = 7  # the walk's first subtree has 2**7 leaves (spc1.c, HRRW_CLASSIC: h = 7)
WALK_WIDEN_PCT = 44  # chance (%) to widen the subtree one more level (spc1.c: rnd(100) < 44)
WRITE_RANDOM_BLOCK_PCT = 50  # a write picks a random block of the leaf half the time (spc1.c)
REWRITE_PCT = 15  # a write is followed by a second write of the same block (spc1.c)


@njit(nrt=False)
def spc1_init(rng, table, st, hr, n_bsu):
    """Place every walk stream in its hot region: the tree's offset in the region (on a leaf
    boundary) and a first block, as spc1.c's ``hrrw_per_stream`` does at a stream's start."""
    for b in range(n_bsu):
        for k in range(8):
            if table[k, SP_KIND] != KIND_HRRW:
                continue
            s = b * 8 + k
            g = table[k, SP_REGION]
            hoff = hr[g, HR_MIN] + below(rng, 0, hr[g, HR_DELTA] + 1)
            hoff -= hoff % LEAF_BLOCKS
            st[s, ST_HOFF] = hoff
            st[s, ST_BLOCK] = hoff + below(rng, 0, hr[g, HR_TREE])
            st[s, ST_INIT] = 1


@njit(forceinline=True, nrt=False)
def _walk(rng, st, s, hr, g, leaves, write):
    """One step of the hierarchical reuse random walk of stream ``s`` in region ``g``
    (spc1.c ``hrrw``, HRRW_CLASSIC): returns the block to access."""
    if write and st[s, ST_REWRITE]:
        st[s, ST_REWRITE] = 0
        st[s, ST_BLOCK] = st[s, ST_RWBLOCK]
        return st[s, ST_BLOCK]
    hoff = st[s, ST_HOFF]
    old_leaf = (st[s, ST_BLOCK] - hoff) // LEAF_BLOCKS
    h = WALK_FIRST_LEVEL
    th = np.int64(1) << WALK_FIRST_LEVEL
    while h < hr[g, HR_LEVELS] and below(rng, 0, 100) < WALK_WIDEN_PCT:
        h += 1
        th *= 2
    leaf = th * (old_leaf // th) + below(rng, 0, th)
    if write:
        leaf -= leaf % 8  # as spc1.c (CLASSIC) does for writes
    li = hr[g, HR_LEAF0] + leaf
    if not write:
        blk = np.int64(leaves[li])  # reads cycle through the leaf's 8 blocks
        leaves[li] = (blk + 1) % LEAF_BLOCKS
    else:
        if below(rng, 0, 100) < WRITE_RANDOM_BLOCK_PCT:
            blk = below(rng, 0, LEAF_BLOCKS)
        else:
            blk = np.int64(leaves[li])  # the leaf's read cursor (CLASSIC)
        if below(rng, 0, 100) < REWRITE_PCT:
            st[s, ST_REWRITE] = 1
    blk += leaf * LEAF_BLOCKS + hoff
    if write:
        st[s, ST_RWBLOCK] = blk
    st[s, ST_BLOCK] = blk
    return blk


@njit(nrt=False)
def spc1_fill(rng, clock, table, pick, smix, st, hr, leaves, n_bsu, asu_blocks, asu_base,
              mean_gap_ns, end_ns, t_ns, dev, sector, nbytes, op, stream, cap):
    """Generate SPC-1 requests in arrival order until ``end_ns`` or ``cap`` rows.

    The eight streams of every BSU are independent Poisson processes whose rates are the
    stream's intensity times 50 IOPS per BSU. Their superposition is one Poisson process of
    rate 50 x BSU (mean gap ``mean_gap_ns``) in which each arrival belongs to a stream with
    probability proportional to its rate; that is how the kernel draws them: an exponential
    gap, then the stream: a BSU and a thousandth x in 0..999, ``pick[x]`` being the stream
    whose share of the thousandths x falls in (a table instead of a search: the search's
    data-dependent exit is a mispredicted branch). ``clock[0]`` is the time of the last
    arrival (float ns). Sequential transfers take ``smix[U(len(smix))]`` blocks.

    Returns (rows written, 1 if ``end_ns`` was reached else 0).
    """
    n = 0
    while n < cap:
        clock[0] += exponential(rng, 0, mean_gap_ns)
        if clock[0] > end_ns:
            return n, 1
        r = below(rng, 0, 1000 * n_bsu)
        b = r // 1000
        k = pick[r - b * 1000]
        s = b * 8 + k
        a = table[k, SP_ASU]
        size = asu_blocks[a]
        write = below(rng, 0, 10) >= table[k, SP_READ10]
        kind = table[k, SP_KIND]
        nblk = 1
        if kind == KIND_UNIFORM:
            blk = below(rng, 0, size)
        elif kind == KIND_HRRW:
            blk = _walk(rng, st, s, hr, table[k, SP_REGION], leaves, write)
        else:
            nblk = smix[below(rng, 0, smix.shape[0])]
            blk = st[s, ST_BLOCK] + st[s, ST_LEN]
            if st[s, ST_INIT] == 0 or blk + nblk >= st[s, ST_END]:
                # a new run: start and length in percent of the ASU, both on 64 KiB boundaries
                lo = size * table[k, SP_START] // 100
                blk = lo + below(rng, 0, size * table[k, SP_RANGE] // 100)
                end = blk + size * table[k, SP_RUN] // 100
                blk -= blk % 16
                end -= end % 16
                st[s, ST_END] = end
                st[s, ST_INIT] = 1
            st[s, ST_BLOCK] = blk
            st[s, ST_LEN] = nblk
        t_ns[n] = np.int64(clock[0])
        dev[n] = a
        sector[n] = asu_base[a] + blk * 8
        nbytes[n] = nblk * 4096
        op[n] = 1 if write else 0
        stream[n] = s
        n += 1
    return n, 0


# --------------------------------------------------------------------------------------------
# IOR


@njit(nrt=False)
def _shuffle(rng, arr, lo, n):
    """IOR's reorder of a task's offsets: for each i, swap with a random index (rand() % n)."""
    for i in range(n):
        v = below(rng, 0, n)
        tmp = arr[lo + v]
        arr[lo + v] = arr[lo + i]
        arr[lo + i] = tmp


@njit
def ior_random_offsets(seed, n_tasks, xfer, block, fpp, offs, start, counts):
    """Per-task shuffled offsets within one segment, as IOR's ``GetOffsetArrayRandom``.

    File per process: task t's offsets are 0, T, 2T, ... < B, shuffled by a generator seeded
    with seed + t. Shared file: every transfer position of a segment (B x tasks / T of them) is
    given to task ``rand() % tasks``, the same draws on every task (one seed); each task then
    shuffles its own list with the draws that follow. ``offs`` receives the lists one after the
    other, ``start[t]`` where task t's begins, ``counts[t]`` its length.
    """
    rng = np.zeros(1, dtype=np.uint64)
    if fpp:
        per = block // xfer
        for t in range(n_tasks):
            start[t] = t * per
            counts[t] = per
            for j in range(per):
                offs[t * per + j] = j * xfer
            rng[0] = np.uint64(seed + t)
            _shuffle(rng, offs, t * per, per)
        start[n_tasks] = n_tasks * per
        return
    positions = block * n_tasks // xfer
    rng[0] = np.uint64(seed)
    for t in range(n_tasks):
        counts[t] = 0
    for _p in range(positions):
        counts[below(rng, 0, n_tasks)] += 1
    after = rng[0]  # the state every task reaches after the assignment draws
    start[0] = 0
    for t in range(n_tasks):
        start[t + 1] = start[t] + counts[t]
    fill = start[:n_tasks].copy()
    rng[0] = np.uint64(seed)
    for p in range(positions):
        t = below(rng, 0, n_tasks)
        offs[fill[t]] = p * xfer
        fill[t] += 1
    for t in range(n_tasks):
        rng[0] = after
        _shuffle(rng, offs, start[t], counts[t])


@njit(nrt=False)
def ior_fill(state, n_tasks, xfer, block, segments, fpp, random, phase_ops, base, offs, start,
             counts, outstanding, t_ns, dev, sector, nbytes, op, stream, seq, phase, outst, cap):
    """IOR's requests in issue order. Task t moves ``total_t`` = segments x c_t transfers per
    phase (c_t: its transfers per segment); its place in the stream counts on across the
    phases (``phase_ops[p]``: 0 read, 1 write), so its k-th transfer of phase p has
    ``seq`` = p x total_t + k. Rows go by phase, then ``seq``, then task. The k-th transfer is
    in segment i = k // c_t and is the j = k % c_t -th transfer of it:

    - sequential: offset = j*T + i*B (file per process) or j*T + i*N*B + t*B (shared file);
    - random (-z): offset = offs[t][j] + i*B (file per process) or offs[t][j] + i*N*B (shared),

    as in IOR's ``WriteOrRead``. ``base[t]`` is the first sector of task t's file.
    ``state`` = (phase, seq, task). Returns (rows written, 1 when every phase is done).
    """
    p, v, t = state[0], state[1], state[2]
    n_phases = phase_ops.shape[0]
    max_c = 0
    min_c = counts[0]
    for u in range(n_tasks):
        max_c = max(max_c, counts[u])
        min_c = min(min_c, counts[u])
    n = 0
    while n < cap:
        if p >= n_phases:
            break
        if v >= (p + 1) * segments * max_c:
            p += 1
            v = p * segments * min_c  # no task's phase p starts before
            t = 0
            continue
        if t >= n_tasks:
            v += 1
            t = 0
            continue
        c = counts[t]
        total = segments * c
        k = v - p * total
        if 0 <= k < total:
            i = k // c
            j = k - i * c
            if random:
                off = offs[start[t] + j]
                off += i * block if fpp else i * n_tasks * block
            else:
                off = j * xfer
                off += i * block if fpp else i * n_tasks * block + t * block
            t_ns[n] = 0
            dev[n] = 0
            sector[n] = base[t] + off // SECTOR
            nbytes[n] = xfer
            op[n] = phase_ops[p]
            stream[n] = t
            seq[n] = v
            phase[n] = p
            outst[n] = outstanding
            n += 1
        t += 1
    state[0], state[1], state[2] = p, v, t
    return n, 1 if p >= n_phases else 0


# --------------------------------------------------------------------------------------------
# Iometer


@njit(nrt=False)
def iometer_fill(rng, offset, last, state, workers, per_worker, xfer, read_pct, random_pct,
                 align, lo, size, outstanding, t_ns, dev, sector, nbytes, op, stream, seq,
                 phase, outst, cap):
    """Iometer's I/Os of one access specification, workers interleaved (row k*W + w is worker
    w's k-th I/O). Per I/O, as Iometer's Grunt and TargetDisk::Seek: a read if
    Rand(100) < %read; a random seek if Rand(100) < %random, to ``lo + Rand(size)``, else
    sequential, just after the worker's previous transfer; then up to the next multiple of
    ``align`` bytes; back to ``lo`` (aligned) if the transfer would pass ``lo + size``.
    Byte offsets; ``offset[w]`` / ``last[w]`` hold worker w's position and last transfer.
    ``state`` = (k, w). Returns (rows written, 1 when done).
    """
    k, w = state[0], state[1]
    end = lo + size
    n = 0
    while n < cap:
        if w >= workers:
            k += 1
            w = 0
        if k >= per_worker:
            state[0], state[1] = k, w
            return n, 1
        write = below(rng, w, 100) >= read_pct
        if below(rng, w, 100) < random_pct:
            off = lo + below(rng, w, size)
        else:
            off = offset[w] + last[w]
        r = off % align
        if r:
            off += align - r
        if off + xfer > end:
            off = lo
            r = off % align
            if r:
                off += align - r
        offset[w] = off
        last[w] = xfer
        t_ns[n] = 0
        dev[n] = 0
        sector[n] = off // SECTOR
        nbytes[n] = xfer
        op[n] = 1 if write else 0
        stream[n] = w
        seq[n] = k
        phase[n] = 0
        outst[n] = outstanding
        n += 1
        w += 1
    state[0], state[1] = k, w
    return n, 0


# --------------------------------------------------------------------------------------------
# Orion

OS_ID, OS_PHASE, OS_KIND, OS_OUTST, OS_COUNT, OS_SIZE = range(6)
OS_NCOLS = 6
OK_SMALL, OK_LARGE_RAND, OK_LARGE_SEQ = 0, 1, 2


@njit(nrt=False)
def orion_fill(rng, streams, phase_lo, pos, state, write_pct, capacity, t_ns, dev, sector,
               nbytes, op, stream, seq, phase, outst, cap):
    """Orion's matrix: each point is a phase whose streams (rows of ``streams``, those of phase
    p being ``phase_lo[p]`` to ``phase_lo[p+1]``) issue in turn by place k. Small and large
    random I/Os go to a random offset aligned to their size over the whole volume; a large
    sequential stream starts at a random size-aligned offset and goes on from there, wrapping
    at the end (``pos[s]``: its next byte offset, -1 before it starts). Each I/O is a write
    with probability ``write_pct`` %. ``state`` = (phase, k, stream row, max count of the
    phase). Returns (rows written, 1 when done).
    """
    p, k, s, kmax = state[0], state[1], state[2], state[3]
    n_phases = phase_lo.shape[0] - 1
    n = 0
    while n < cap:
        if p >= n_phases:
            break
        if s == -1:  # entering phase p
            kmax = 0
            for u in range(phase_lo[p], phase_lo[p + 1]):
                kmax = max(kmax, streams[u, OS_COUNT])
            s = phase_lo[p]
            k = 0
        if k >= kmax:
            p += 1
            s = -1
            continue
        if s >= phase_lo[p + 1]:
            k += 1
            s = phase_lo[p]
            continue
        if k < streams[s, OS_COUNT]:
            size = streams[s, OS_SIZE]
            kind = streams[s, OS_KIND]
            write = below(rng, 0, 100) < write_pct
            if kind == OK_LARGE_SEQ:
                if pos[s] < 0:
                    pos[s] = below(rng, 0, capacity // size) * size
                off = pos[s]
                pos[s] = off + size
                if pos[s] + size > capacity:
                    pos[s] = 0
            else:
                off = below(rng, 0, capacity // size) * size
            t_ns[n] = 0
            dev[n] = 0
            sector[n] = off // SECTOR
            nbytes[n] = size
            op[n] = 1 if write else 0
            stream[n] = streams[s, OS_ID]
            seq[n] = k
            phase[n] = streams[s, OS_PHASE]
            outst[n] = streams[s, OS_OUTST]
            n += 1
        s += 1
    state[0], state[1], state[2], state[3] = p, k, s, kmax
    return n, 1 if p >= n_phases else 0
