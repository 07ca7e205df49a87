"""Array layouts: where a LUN's blocks live on its drives, and which drive operations a request
becomes (issue 3, deliverable 2).

A group of ``width`` drives holds one LUN. Space is cut into stripe units of ``unit`` sectors;
a stripe is one unit on every drive at the same drive offset. Layouts (``KIND_*``):

- ``jbod``: the drives concatenated (drive k holds LUN sectors [k*cap, (k+1)*cap)).
- ``raid0``: units round-robin over all drives.
- ``raid1``: every drive holds the whole LUN (an n-way mirror; two drives is classic RAID-1).
- ``raid10``: drives in mirrored pairs (0,1), (2,3), ...; units round-robin over the pairs.
- ``raid5``: left-symmetric, as Linux md's default: in stripe s the parity is on drive
  ``width-1 - s % width`` and data unit k of the stripe on drive ``(parity + 1 + k) % width``,
  so consecutive units walk every drive before one repeats.
- ``raid6``: P+Q, rotating as md's left-symmetric RAID-6: P on ``width-1 - s % width``, Q on
  the next drive, data unit k on ``(P + 2 + k) % width``.

Writes to parity layouts are planned per stripe: a full-stripe write writes data and parity
with no reads; a partial one uses read-modify-write (read the old data and parity it
changes) or reconstruct-write (read the data it does not change), whichever needs fewer
drive operations (ties go to read-modify-write). Parity is rewritten over the smallest range
of rows that covers every sector offset written in the stripe.

Everything is integer sectors. The functions are Numba kernels over scalars so that the replay
engine can call them per request; ``plan_request`` fills caller-allocated operation arrays.
"""

from __future__ import annotations

from blocklab.kernels._jit import njit

KIND_JBOD, KIND_RAID0, KIND_RAID1, KIND_RAID10, KIND_RAID5, KIND_RAID6 = range(6)
KIND_NAMES = ("jbod", "raid0", "raid1", "raid10", "raid5", "raid6")

# Operation rows (columns of the ``ops`` matrix, flattened): drive, drive sector, sectors,
# is write, phase (0: reads that must finish before the writes of phase 1; 1: writes; reads
# of a plain read request are phase 1 too), role (ROLE_*).
OP_DRIVE, OP_SECTOR, OP_COUNT, OP_WRITE, OP_PHASE, OP_ROLE = range(6)
OP_NCOLS = 6
ROLE_DATA, ROLE_P, ROLE_Q, ROLE_MIRROR = 0, 1, 2, 3


@njit(inline="always", nrt=False)
def data_drives(kind, width):
    """Drives' worth of data in one stripe."""
    if kind == KIND_RAID1:
        return 1
    if kind == KIND_RAID10:
        return width // 2
    if kind == KIND_RAID5:
        return width - 1
    if kind == KIND_RAID6:
        return width - 2
    return width


@njit(inline="always", nrt=False)
def parity_drive(kind, width, stripe):
    """P's drive in ``stripe`` (-1 for layouts without parity)."""
    if kind == KIND_RAID5 or kind == KIND_RAID6:
        return width - 1 - stripe % width
    return -1


@njit(inline="always", nrt=False)
def q_drive(kind, width, stripe):
    """Q's drive in ``stripe`` (RAID-6 only, else -1)."""
    if kind == KIND_RAID6:
        return (width - stripe % width) % width  # the drive after P
    return -1


@njit(inline="always", nrt=False)
def unit_drive(kind, width, stripe, k):
    """Drive holding data unit ``k`` (0-based within the stripe); for mirrors, the first copy."""
    if kind == KIND_RAID5:
        return (width - 1 - stripe % width + 1 + k) % width
    if kind == KIND_RAID6:
        return (width - 1 - stripe % width + 2 + k) % width
    if kind == KIND_RAID10:
        return 2 * k
    if kind == KIND_RAID1:
        return 0
    return k


@njit(nrt=False)
def locate(kind, width, unit, drive_sectors, lba):
    """(drive, drive sector) of LUN sector ``lba`` (the first copy for mirrors)."""
    if kind == KIND_JBOD:
        return lba // drive_sectors, lba % drive_sectors
    if kind == KIND_RAID1:
        return 0, lba
    d = data_drives(kind, width)
    chunk = lba // unit
    stripe = chunk // d
    k = chunk % d
    return unit_drive(kind, width, stripe, k), stripe * unit + lba % unit


@njit(inline="always", nrt=False)
def capacity(kind, width, unit, drive_sectors):
    """LUN capacity in sectors (whole stripes only)."""
    if kind == KIND_JBOD:
        return width * drive_sectors
    if kind == KIND_RAID1:
        return drive_sectors
    return (drive_sectors // unit) * unit * data_drives(kind, width)


@njit(inline="always", nrt=False)
def _put(ops, n, drive, sector, count, write, phase, role):
    o = n * OP_NCOLS
    ops[o + OP_DRIVE] = drive
    ops[o + OP_SECTOR] = sector
    ops[o + OP_COUNT] = count
    ops[o + OP_WRITE] = write
    ops[o + OP_PHASE] = phase
    ops[o + OP_ROLE] = role
    return n + 1


@njit(nrt=False)
def plan_request(kind, width, unit, drive_sectors, lba, sectors, is_write, mirror_pick, ops):
    """The drive operations of one request, into the flattened ``ops`` rows; returns how many.

    ``mirror_pick`` chooses the copy a mirrored read uses (the caller balances, e.g. by
    request number or by the least-loaded copy). ``ops`` must hold at least
    ``max_ops(kind, width, unit, sectors)`` rows.
    """
    n = 0
    if sectors <= 0:
        return 0
    if kind == KIND_JBOD:
        pos = lba
        end = lba + sectors
        while pos < end:
            drive = pos // drive_sectors
            take = min(end, (drive + 1) * drive_sectors) - pos
            n = _put(ops, n, drive, pos % drive_sectors, take, is_write, 1, ROLE_DATA)
            pos += take
        return n
    if kind == KIND_RAID1:
        if is_write:
            for c in range(width):
                n = _put(ops, n, c, lba, sectors, 1, 1, ROLE_DATA if c == 0 else ROLE_MIRROR)
        else:
            n = _put(ops, n, mirror_pick % width, lba, sectors, 0, 1, ROLE_DATA)
        return n
    d = data_drives(kind, width)
    pos = lba
    end = lba + sectors
    while pos < end:
        chunk = pos // unit
        stripe = chunk // d
        stripe_end = (stripe + 1) * d * unit
        seg_end = min(end, stripe_end)
        base = stripe * unit  # drive sector of the stripe's row
        if kind == KIND_RAID0 or kind == KIND_RAID10 or not is_write:
            p = pos
            while p < seg_end:
                k = (p // unit) % d
                off = p % unit
                take = min(seg_end, (p // unit + 1) * unit) - p
                drive = unit_drive(kind, width, stripe, k)
                if kind == KIND_RAID10:
                    if is_write:
                        n = _put(ops, n, drive, base + off, take, 1, 1, ROLE_DATA)
                        n = _put(ops, n, drive + 1, base + off, take, 1, 1, ROLE_MIRROR)
                    else:
                        n = _put(ops, n, drive + (mirror_pick + k) % 2, base + off, take, 0, 1,
                                 ROLE_DATA)
                else:
                    n = _put(ops, n, drive, base + off, take, is_write, 1, ROLE_DATA)
                p += take
        else:
            n = _plan_parity_write(kind, width, unit, d, stripe, pos, seg_end, base, ops, n)
        pos = seg_end
    return n


@njit(nrt=False)
def _plan_parity_write(kind, width, unit, d, stripe, pos, seg_end, base, ops, n):
    """RAID-5/6 write of LUN sectors [pos, seg_end) within one stripe."""
    first = stripe * d * unit
    k0 = (pos - first) // unit
    k1 = (seg_end - 1 - first) // unit  # last unit touched
    touched = k1 - k0 + 1
    # parity is rewritten over the smallest row range covering every offset written
    if touched == 1:
        lo = (pos - first) % unit
        hi = (seg_end - 1 - first) % unit + 1
    else:
        lo = 0
        hi = unit
    npar = 2 if kind == KIND_RAID6 else 1
    pdrive = parity_drive(kind, width, stripe)
    qdrive = q_drive(kind, width, stripe)
    if pos == first and seg_end == first + d * unit:  # full stripe: no reads
        for k in range(d):
            n = _put(ops, n, unit_drive(kind, width, stripe, k), base, unit, 1, 1, ROLE_DATA)
        n = _put(ops, n, pdrive, base, unit, 1, 1, ROLE_P)
        if npar == 2:
            n = _put(ops, n, qdrive, base, unit, 1, 1, ROLE_Q)
        return n
    # drive operations of each strategy; the writes (touched + npar) are common to both
    rmw_reads = touched + npar
    rcw_reads = d - touched
    for k in range(k0, k1 + 1):
        ulo = max(pos - first - k * unit, 0)
        uhi = min(seg_end - first - k * unit, unit)
        rcw_reads += (1 if ulo > lo else 0) + (1 if uhi < hi else 0)
    use_rmw = rmw_reads <= rcw_reads
    for k in range(k0, k1 + 1):
        ulo = max(pos - first - k * unit, 0)
        uhi = min(seg_end - first - k * unit, unit)
        drive = unit_drive(kind, width, stripe, k)
        if use_rmw:
            n = _put(ops, n, drive, base + ulo, uhi - ulo, 0, 0, ROLE_DATA)
        else:  # reconstruct-write reads what this unit keeps within the parity rows
            if ulo > lo:
                n = _put(ops, n, drive, base + lo, ulo - lo, 0, 0, ROLE_DATA)
            if uhi < hi:
                n = _put(ops, n, drive, base + uhi, hi - uhi, 0, 0, ROLE_DATA)
        n = _put(ops, n, drive, base + ulo, uhi - ulo, 1, 1, ROLE_DATA)
    if use_rmw:
        n = _put(ops, n, pdrive, base + lo, hi - lo, 0, 0, ROLE_P)
        if npar == 2:
            n = _put(ops, n, qdrive, base + lo, hi - lo, 0, 0, ROLE_Q)
    else:
        for k in range(d):
            if k < k0 or k > k1:
                n = _put(ops, n, unit_drive(kind, width, stripe, k), base + lo, hi - lo, 0, 0,
                         ROLE_DATA)
    n = _put(ops, n, pdrive, base + lo, hi - lo, 1, 1, ROLE_P)
    if npar == 2:
        n = _put(ops, n, qdrive, base + lo, hi - lo, 1, 1, ROLE_Q)
    return n


def max_ops(kind: int, width: int, unit: int, sectors: int) -> int:
    """An upper bound of ``plan_request``'s operations for a request of ``sectors``."""
    stripes = sectors // max(unit, 1) + 2
    return (3 * width + 4) * stripes + 2 * width
