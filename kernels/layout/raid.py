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

**Degraded mode** (issue 5). ``miss`` lists up to three members that are missing, each with a
rebuild cursor: member m is missing for drive rows at or past its cursor (a rebuild writes the
replacement from row 0 up, in whole stripe units, so a stripe is either rebuilt or not). In a
stripe with missing members:

- a read of a missing member's data reconstructs it: RAID-5 reads the same rows of every other
  member; RAID-6 reads ``width - 2`` survivors (the data members and P when one member is
  missing, every survivor when two are); a mirror reads the surviving copy; RAID-0 and JBOD
  have lost it (no operation);
- a write writes what survives. When the members it writes survive (only parities, or data
  members it does not write, are missing) it updates the surviving parity by
  read-modify-write (old data of the written units, old parity), as Linux md's raid5.c
  chooses, or writes the data alone when no parity survives; when a data member it writes is
  missing it reads every survivor over the parity rows (whatever was lost can then be solved
  for) and writes the surviving written units and parities. A full stripe writes every
  survivor with no reads;
- a stripe that has lost more members than the layout tolerates (data loss) is served from
  what survives: reads of lost data and writes to lost members have no operation
  (``request_lost`` says whether a request has such a part: a real array fails it).

``plan_rebuild`` fans one rebuild unit out (reads of the survivors, then the write of the
member being rebuilt) and ``plan_init`` one unit of parity initialization (reads of the data,
then the writes of the parities; a mirror copies its first member to the others).

**Mirrored reads** (issue 19). A mirror reads each piece from one copy, chosen as Linux md's
RAID-1 ``read_balance`` chooses for rotating disks (drivers/md/raid1.c): the copy where the
previous read of that copy ended (``next_seq_sect``: a sequential stream stays on one disk, so
its drive read-ahead keeps working and the other copy is free), else the copy whose head is
nearest (the least seek). ``heads`` holds, per member, the drive sector where the last
operation planned on it ended (reads and writes both move it; a write moves every copy's); the
layout reads and updates it, so the caller keeps one per member map. Ties go to the lower
member. A missing copy is never chosen.

Everything is integer sectors. The functions are Numba kernels over scalars so that the replay
engine can call them per request; ``plan_request`` fills caller-allocated operation arrays.
"""

from __future__ import annotations

import numpy as np

from blocklab.kernels._jit import njit

KIND_JBOD, KIND_RAID0, KIND_RAID1, KIND_RAID10, KIND_RAID5, KIND_RAID6 = range(6)
KIND_NAMES = ("jbod", "raid0", "raid1", "raid10", "raid5", "raid6")

# Operation rows (columns of the ``ops`` matrix, flattened): drive, drive sector, sectors,
# is write, phase (0: reads that must finish before the writes of phase 1; 1: writes; reads
# of a plain read request are phase 1 too), role (ROLE_*).
OP_DRIVE, OP_SECTOR, OP_COUNT, OP_WRITE, OP_PHASE, OP_ROLE = range(6)
OP_NCOLS = 6
ROLE_DATA, ROLE_P, ROLE_Q, ROLE_MIRROR = 0, 1, 2, 3
MISS_N = 6  # ``miss``: (member, cursor) x 3; member -1 for none


def no_missing() -> np.ndarray:
    """A ``miss`` array with no member missing."""
    return np.array([-1, 0, -1, 0, -1, 0], dtype=np.int64)


def new_heads(width: int) -> np.ndarray:
    """A member map's ``heads`` before any operation: every head at sector 0."""
    return np.zeros(width, dtype=np.int64)


@njit(forceinline=True, nrt=False)
def mirror_copy(heads, first, count, sector, miss, row):
    """The copy (member ``first`` .. ``first + count - 1``) a mirrored read at drive sector
    ``sector`` (drive row ``row``) uses: the one whose head is nearest, a sequential one (at
    distance 0) first; ties the lowest; missing copies skipped (-1 if every copy is)."""
    best = -1
    best_d = 0
    for j in range(count):
        c = first + j
        if miss[0] >= 0 and missing(miss, c, row):
            continue
        d = abs(heads[c] - sector)
        if best < 0 or d < best_d:
            best = c
            best_d = d
    return best


@njit(forceinline=True, nrt=False)
def tolerance(kind, width):
    """Members a stripe can lose and still hold its data."""
    if kind == KIND_RAID6:
        return 2
    if kind == KIND_RAID5 or kind == KIND_RAID10:
        return 1
    if kind == KIND_RAID1:
        return width - 1
    return 0


@njit(forceinline=True, nrt=False)
def missing(miss, member, row):
    """Whether ``member`` is missing at drive row ``row`` (not rebuilt that far)."""
    for j in range(0, MISS_N, 2):
        if miss[j] == member and row >= miss[j + 1]:
            return True
    return False


@njit(forceinline=True, nrt=False)
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


@njit(forceinline=True, nrt=False)
def parity_drive(kind, width, stripe):
    """P's drive in ``stripe`` (-1 for layouts without parity)."""
    if kind == KIND_RAID5 or kind == KIND_RAID6:
        return width - 1 - stripe % width
    return -1


@njit(forceinline=True, nrt=False)
def q_drive(kind, width, stripe):
    """Q's drive in ``stripe`` (RAID-6 only, else -1)."""
    if kind == KIND_RAID6:
        return (width - stripe % width) % width  # the drive after P
    return -1


@njit(forceinline=True, nrt=False)
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


@njit(forceinline=True, nrt=False)
def capacity(kind, width, unit, drive_sectors):
    """LUN capacity in sectors (whole stripes only)."""
    if kind == KIND_JBOD:
        return width * drive_sectors
    if kind == KIND_RAID1:
        return drive_sectors
    return (drive_sectors // unit) * unit * data_drives(kind, width)


@njit(forceinline=True, nrt=False)
def _put(ops, n, drive, sector, count, write, phase, role):
    o = n * OP_NCOLS
    ops[o + OP_DRIVE] = drive
    ops[o + OP_SECTOR] = sector
    ops[o + OP_COUNT] = count
    ops[o + OP_WRITE] = write
    ops[o + OP_PHASE] = phase
    ops[o + OP_ROLE] = role
    return n + 1


@njit(forceinline=True, nrt=False)
def plan_request(kind, width, unit, drive_sectors, lba, sectors, is_write, heads, ops,
                 miss):
    """The drive operations of one request, into the flattened ``ops`` rows; returns how many.

    ``heads`` (per member, read and updated) chooses the copy a mirrored read uses (module
    docstring). ``miss`` lists missing members (module docstring). ``ops`` must hold at least
    ``max_ops(kind, width, unit, sectors)`` rows.
    """
    n = 0
    if sectors <= 0:
        return 0
    if miss[0] >= 0:
        return _plan_degraded(kind, width, unit, drive_sectors, lba, sectors, is_write,
                              heads, ops, miss)
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
                heads[c] = lba + sectors
        else:
            c = mirror_copy(heads, 0, width, lba, miss, 0)
            n = _put(ops, n, c, lba, sectors, 0, 1, ROLE_DATA)
            heads[c] = lba + sectors
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
                        heads[drive] = base + off + take
                        heads[drive + 1] = base + off + take
                    else:
                        c = mirror_copy(heads, drive, 2, base + off, miss, base)
                        n = _put(ops, n, c, base + off, take, 0, 1, ROLE_DATA)
                        heads[c] = base + off + take
                else:
                    n = _put(ops, n, drive, base + off, take, is_write, 1, ROLE_DATA)
                p += take
        else:
            n = _plan_parity_write(kind, width, unit, d, stripe, pos, seg_end, base, ops, n)
        pos = seg_end
    return n


@njit(forceinline=True, nrt=False)
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


@njit(nrt=False)
def _plan_degraded(kind, width, unit, drive_sectors, lba, sectors, is_write, heads, ops,
                   miss):
    """plan_request when members are missing (module docstring), stripe unit by unit."""
    n = 0
    end = lba + sectors
    if kind == KIND_JBOD:
        pos = lba
        while pos < end:
            drive = pos // drive_sectors
            take = min(end, (drive + 1) * drive_sectors) - pos
            if not missing(miss, drive, pos % drive_sectors):
                n = _put(ops, n, drive, pos % drive_sectors, take, is_write, 1, ROLE_DATA)
            pos += take
        return n
    if kind == KIND_RAID1:
        pos = lba
        while pos < end:
            take = min(end, (pos // unit + 1) * unit) - pos
            if is_write:
                for c in range(width):
                    if not missing(miss, c, pos):
                        n = _put(ops, n, c, pos, take, 1, 1, ROLE_DATA if c == 0 else ROLE_MIRROR)
                        heads[c] = pos + take
            else:
                c = mirror_copy(heads, 0, width, pos, miss, pos)
                if c >= 0:
                    n = _put(ops, n, c, pos, take, 0, 1, ROLE_DATA)
                    heads[c] = pos + take
            pos += take
        return n
    d = data_drives(kind, width)
    pos = lba
    while pos < end:
        chunk = pos // unit
        stripe = chunk // d
        stripe_end = (stripe + 1) * d * unit
        seg_end = min(end, stripe_end)
        base = stripe * unit
        if kind == KIND_RAID0 or kind == KIND_RAID10:
            p = pos
            while p < seg_end:
                k = (p // unit) % d
                off = p % unit
                take = min(seg_end, (p // unit + 1) * unit) - p
                drive = unit_drive(kind, width, stripe, k)
                if kind == KIND_RAID0:
                    if not missing(miss, drive, base):
                        n = _put(ops, n, drive, base + off, take, is_write, 1, ROLE_DATA)
                elif is_write:
                    for c in range(2):
                        if not missing(miss, drive + c, base):
                            n = _put(ops, n, drive + c, base + off, take, 1, 1,
                                     ROLE_DATA if c == 0 else ROLE_MIRROR)
                            heads[drive + c] = base + off + take
                else:
                    c = mirror_copy(heads, drive, 2, base + off, miss, base)
                    if c >= 0:
                        n = _put(ops, n, c, base + off, take, 0, 1, ROLE_DATA)
                        heads[c] = base + off + take
                p += take
        else:
            n = _plan_parity_degraded(kind, width, unit, d, stripe, pos, seg_end, base,
                                      is_write, ops, n, miss)
        pos = seg_end
    return n


@njit(nrt=False)
def _plan_parity_degraded(kind, width, unit, d, stripe, pos, seg_end, base, is_write, ops, n,
                          miss):
    """RAID-5/6 request on LUN sectors [pos, seg_end) of one stripe with missing members."""
    first = stripe * d * unit
    k0 = (pos - first) // unit
    k1 = (seg_end - 1 - first) // unit
    npar = 2 if kind == KIND_RAID6 else 1
    pdrive = parity_drive(kind, width, stripe)
    qdrive = q_drive(kind, width, stripe)
    lost = 0
    for c in range(width):
        if missing(miss, c, base):
            lost += 1
    if lost > npar:  # data loss in this stripe: serve what survives
        for k in range(k0, k1 + 1):
            ulo = max(pos - first - k * unit, 0)
            uhi = min(seg_end - first - k * unit, unit)
            drive = unit_drive(kind, width, stripe, k)
            if not missing(miss, drive, base):
                n = _put(ops, n, drive, base + ulo, uhi - ulo, is_write, 1, ROLE_DATA)
        return n
    if not is_write:
        # rows each member must deliver: the requested rows of its own units, and for a
        # missing unit the same rows of the survivors that reconstruct it
        for c in range(width):
            lo = unit
            hi = 0
            for k in range(k0, k1 + 1):
                ulo = max(pos - first - k * unit, 0)
                uhi = min(seg_end - first - k * unit, unit)
                drive = unit_drive(kind, width, stripe, k)
                if drive == c and not missing(miss, c, base):
                    lo = min(lo, ulo)
                    hi = max(hi, uhi)
                elif missing(miss, drive, base) and not missing(miss, c, base):
                    # c helps reconstruct: RAID-5 every survivor; RAID-6 with one missing the
                    # data members and P; with two missing every survivor
                    if kind == KIND_RAID5 or lost == 2 or c != qdrive:
                        lo = min(lo, ulo)
                        hi = max(hi, uhi)
            if hi > lo:
                role = ROLE_P if c == pdrive else (ROLE_Q if c == qdrive else ROLE_DATA)
                n = _put(ops, n, c, base + lo, hi - lo, 0, 1, role)
        return n
    # a write: the parity rows to rewrite, as in a normal write
    if k1 > k0:
        lo = 0
        hi = unit
    else:
        lo = (pos - first) % unit
        hi = (seg_end - 1 - first) % unit + 1
    if pos == first and seg_end == first + d * unit:  # full stripe: every survivor, no reads
        for k in range(d):
            drive = unit_drive(kind, width, stripe, k)
            if not missing(miss, drive, base):
                n = _put(ops, n, drive, base, unit, 1, 1, ROLE_DATA)
        if not missing(miss, pdrive, base):
            n = _put(ops, n, pdrive, base, unit, 1, 1, ROLE_P)
        if npar == 2 and not missing(miss, qdrive, base):
            n = _put(ops, n, qdrive, base, unit, 1, 1, ROLE_Q)
        return n
    written_missing = False  # a unit this write changes is on a missing member
    for k in range(k0, k1 + 1):
        if missing(miss, unit_drive(kind, width, stripe, k), base):
            written_missing = True
    p_ok = not missing(miss, pdrive, base)
    q_ok = npar == 2 and not missing(miss, qdrive, base)
    if not written_missing:
        # the members it writes survive (a parity or a data member it does not write is
        # missing): read-modify-write what survives, the old data of the written units and
        # the surviving parities, as Linux md does (raid5.c handle_stripe_dirtying: a
        # reconstruct-write, which needs the missing unit, costs more there). It read every
        # survivor before 2026-11-28: a 4 KiB write to a degraded 8-drive RAID-5 stripe 8
        # drive operations, not 4
        if p_ok or q_ok:
            for k in range(k0, k1 + 1):
                ulo = max(pos - first - k * unit, 0)
                uhi = min(seg_end - first - k * unit, unit)
                n = _put(ops, n, unit_drive(kind, width, stripe, k), base + ulo, uhi - ulo, 0,
                         0, ROLE_DATA)
            if p_ok:
                n = _put(ops, n, pdrive, base + lo, hi - lo, 0, 0, ROLE_P)
            if q_ok:
                n = _put(ops, n, qdrive, base + lo, hi - lo, 0, 0, ROLE_Q)
    else:  # a unit it writes is missing: read every survivor over the parity rows
        for k in range(d):
            drive = unit_drive(kind, width, stripe, k)
            if not missing(miss, drive, base):
                n = _put(ops, n, drive, base + lo, hi - lo, 0, 0, ROLE_DATA)
        if p_ok:
            n = _put(ops, n, pdrive, base + lo, hi - lo, 0, 0, ROLE_P)
        if q_ok:
            n = _put(ops, n, qdrive, base + lo, hi - lo, 0, 0, ROLE_Q)
    for k in range(k0, k1 + 1):
        ulo = max(pos - first - k * unit, 0)
        uhi = min(seg_end - first - k * unit, unit)
        drive = unit_drive(kind, width, stripe, k)
        if not missing(miss, drive, base):
            n = _put(ops, n, drive, base + ulo, uhi - ulo, 1, 1, ROLE_DATA)
    if p_ok:
        n = _put(ops, n, pdrive, base + lo, hi - lo, 1, 1, ROLE_P)
    if q_ok:
        n = _put(ops, n, qdrive, base + lo, hi - lo, 1, 1, ROLE_Q)
    return n


@njit(nrt=False)
def request_lost(kind, width, unit, drive_sectors, lba, sectors, miss):
    """Whether part of a request lies where no surviving member holds its data or can rebuild
    it (``miss`` as in ``plan_request``): on a missing member of a JBOD or a RAID-0, on every
    copy of a mirror, or on a missing member of a RAID-5/6 stripe that has lost more members
    than the layout tolerates. ``plan_request`` plans no operation for such a part (a read of
    lost data, a write to a lost member: module docstring); a real array answers the request
    with an error. Checked at the granularity ``plan_request`` works in (a drive's piece of a
    JBOD, a stripe unit otherwise; a rebuild's cursor moves in whole units)."""
    if miss[0] < 0 or sectors <= 0:
        return False
    end = lba + sectors
    pos = lba
    if kind == KIND_JBOD:
        while pos < end:
            drive = pos // drive_sectors
            if missing(miss, drive, pos % drive_sectors):
                return True
            pos = (drive + 1) * drive_sectors
        return False
    if kind == KIND_RAID1:
        while pos < end:
            every = True  # every copy missing at this row
            for c in range(width):
                if not missing(miss, c, pos):
                    every = False
            if every:
                return True
            pos = (pos // unit + 1) * unit
        return False
    d = data_drives(kind, width)
    tol = tolerance(kind, width)
    while pos < end:
        chunk = pos // unit
        stripe = chunk // d
        base = stripe * unit
        drive = unit_drive(kind, width, stripe, chunk % d)
        if missing(miss, drive, base):
            if kind == KIND_RAID0:
                return True
            if kind == KIND_RAID10:
                if missing(miss, drive + 1, base):
                    return True
            else:
                lost = 0
                for c in range(width):
                    if missing(miss, c, base):
                        lost += 1
                if lost > tol:
                    return True
        pos = (chunk + 1) * unit
    return False


@njit(nrt=False)
def plan_rebuild(kind, width, member, row, rows, miss, ops):
    """One rebuild unit: reconstruct drive rows [row, row + rows) of ``member`` from the
    survivors (phase 0 reads) and write them to its replacement (phase 1). Returns the number of
    operations, 0 when the layout cannot rebuild (no redundancy, or too many members lost)."""
    n = 0
    if kind == KIND_JBOD or kind == KIND_RAID0:
        return 0
    if kind == KIND_RAID10:
        partner = member ^ 1
        if missing(miss, partner, row):
            return 0
        n = _put(ops, n, partner, row, rows, 0, 0, ROLE_MIRROR)
    elif kind == KIND_RAID1:
        for c in range(width):
            if c != member and not missing(miss, c, row):
                n = _put(ops, n, c, row, rows, 0, 0, ROLE_MIRROR)
                break
        if n == 0:
            return 0
    else:
        need = width - (2 if kind == KIND_RAID6 else 1)
        for c in range(width):
            if n == need:
                break
            if c != member and not missing(miss, c, row):
                n = _put(ops, n, c, row, rows, 0, 0, ROLE_DATA)
        if n < need:
            return 0
    return _put(ops, n, member, row, rows, 1, 1, ROLE_DATA)


@njit(nrt=False)
def plan_init(kind, width, unit, stripe0, nstripes, ops):
    """One unit of parity initialization over stripes [stripe0, stripe0 + nstripes): read each
    stripe's data and write its parities; a mirror reads its first member and writes the
    others. Returns the number of operations (0 for layouts with nothing to initialize)."""
    n = 0
    if kind == KIND_RAID1 or kind == KIND_RAID10:
        step = width if kind == KIND_RAID1 else 2
        for g in range(0, width, step):
            n = _put(ops, n, g, stripe0 * unit, nstripes * unit, 0, 0, ROLE_DATA)
            for c in range(g + 1, g + step):
                n = _put(ops, n, c, stripe0 * unit, nstripes * unit, 1, 1, ROLE_MIRROR)
        return n
    if kind != KIND_RAID5 and kind != KIND_RAID6:
        return 0
    d = data_drives(kind, width)
    for s in range(stripe0, stripe0 + nstripes):
        base = s * unit
        for k in range(d):
            n = _put(ops, n, unit_drive(kind, width, s, k), base, unit, 0, 0, ROLE_DATA)
        n = _put(ops, n, parity_drive(kind, width, s), base, unit, 1, 1, ROLE_P)
        if kind == KIND_RAID6:
            n = _put(ops, n, q_drive(kind, width, s), base, unit, 1, 1, ROLE_Q)
    return n
