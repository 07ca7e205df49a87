"""Plain-Python IOR, written from IOR's source (github.com/hpc/ior, src/ior.c): the checks of
``ValidateTests`` in their order, ``GetOffsetArrayRandom`` and the offset loop of ``WriteOrRead``,
task by task as each MPI rank runs them; then the ranks' requests interleaved in issue order.

IOR draws with the C library's ``rand()``; blocklab's generator draws with SplitMix64, which is
transcribed here from its published definition (Steele, Lea, Flood 2014) so that shuffled
offsets can be compared value for value.
"""

from __future__ import annotations

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed: int):
        self.state = seed & MASK

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """rand() % n's stand-in: floor(U * n) with U the top 53 bits over 2**53."""
        return min(int((self.next() >> 11) * 2.0**-53 * n), n - 1)


def validate(tasks, transfer, block, segments, random, write, read) -> str | None:
    """IOR's message for options it refuses (the first check that fails), else None."""
    access = 8  # sizeof(IOR_size_t)
    if tasks <= 0:
        return "too few tasks for testing"
    if not (write or read):
        return "test must write, read, or check read/write file"
    if segments < 0:
        return "segment count must be positive value"
    if block % access != 0:
        return "block size must be a multiple of access size"
    if block < 0:
        return "block size must be non-negative integer"
    if transfer % access != 0:
        return "transfer size must be a multiple of access size"
    if transfer < 0:
        return "transfer size must be non-negative integer"
    if transfer == 0:
        return "test will not complete with zero transfer size"
    if block % transfer != 0:
        return "block size must be a multiple of transfer size"
    if block < transfer:
        return "block size must not be smaller than transfer size"
    if random and block == transfer:
        return ("IOR will randomize access within a block and repeats the same pattern for all "
                "segments, therefore choose blocksize > transferSize")
    return None


def offset_array_random(tasks, transfer, block, fpp, seed, rank) -> list[int]:
    """GetOffsetArrayRandom for one rank."""
    if fpp:
        rng = SplitMix64(seed + rank)
        arr = [i * transfer for i in range(block // transfer)]
    else:
        rng = SplitMix64(seed)
        count = sum(1 for _ in range(0, block * tasks, transfer) if rng.below(tasks) == rank)
        rng = SplitMix64(seed)  # srandom(seed): the same draws again
        arr = [i for i in range(0, block * tasks, transfer) if rng.below(tasks) == rank]
        assert len(arr) == count
    n = len(arr)
    for i in range(n):
        v = rng.below(n)
        arr[v], arr[i] = arr[i], arr[v]
    return arr


def rank_offsets(tasks, transfer, block, segments, fpp, random, seed, rank) -> list[int]:
    """The file offsets one rank moves in one phase, in its order (WriteOrRead)."""
    if random:
        rnd = offset_array_random(tasks, transfer, block, fpp, seed, rank)
        count = len(rnd)
    else:
        count = block // transfer
    out = []
    for i in range(segments):
        for j in range(count):
            if random:
                off = rnd[j] + (i * block if fpp else i * tasks * block)
            else:
                off = j * transfer + (i * block if fpp else i * tasks * block + rank * block)
            out.append(off)
    return out


def file_starts(tasks, transfer, block, segments, fpp, align) -> list[int]:
    """blocklab's allocator: files from sector 0 in task order, each on a multiple of align."""
    size = segments * block * (1 if fpp else tasks)
    starts, pos = [], 0
    for _ in range(tasks if fpp else 1):
        pos = (pos + align - 1) // align * align
        starts.append(pos)
        pos += size
    return starts * (1 if fpp else tasks)


def requests(tasks, transfer, block, segments, fpp, random, write, read, seed, align=1 << 20,
             repetitions=1):
    """Rows (stream, stream_seq, phase, op, sector, size): each rank's transfers numbered on
    across the phases, all rows ordered by phase, then stream_seq, then rank; TestIoSys's loop
    over ``repetitions`` runs the write and read phases again, with the same offsets."""
    phases = []
    for _rep in range(repetitions):
        if write:
            phases.append(1)
        if read:
            phases.append(0)
    starts = file_starts(tasks, transfer, block, segments, fpp, align)
    rows = []
    for r in range(tasks):
        offs = rank_offsets(tasks, transfer, block, segments, fpp, random, seed, r)
        for p, op in enumerate(phases):
            for k, off in enumerate(offs):
                rows.append((r, p * len(offs) + k, p, op, (starts[r] + off) // 512, transfer))
    return sorted(rows, key=lambda row: (row[2], row[1], row[0]))
