"""Plain-Python reference of the array layouts and of RAID-5/6 write planning, written from
the layouts' descriptions (Linux md's left-symmetric RAID-5 and RAID-6), sector by sector."""

from __future__ import annotations


def stripe_table(kind: str, width: int, stripe: int) -> dict[str, object]:
    """Roles of the drives in one stripe: {'data': [drive of unit 0, 1, ...], 'P': d, 'Q': d}.

    Left-symmetric: the parity starts on the last drive and moves one drive to the left each
    stripe; the data then starts right after the parity (after Q for RAID-6) and wraps.
    """
    if kind == "raid0":
        return {"data": list(range(width))}
    if kind == "raid10":
        return {"data": [2 * k for k in range(width // 2)]}
    p = (width - 1) - (stripe % width)
    if kind == "raid5":
        return {"data": [(p + 1 + k) % width for k in range(width - 1)], "P": p}
    q = (p + 1) % width
    return {"data": [(q + 1 + k) % width for k in range(width - 2)], "P": p, "Q": q}


def locate(kind: str, width: int, unit: int, lba: int) -> tuple[int, int]:
    table_width = len(stripe_table(kind, width, 0)["data"])  # type: ignore[arg-type]
    chunk, off = divmod(lba, unit)
    stripe, k = divmod(chunk, table_width)
    drive = stripe_table(kind, width, stripe)["data"][k]  # type: ignore[index]
    return drive, stripe * unit + off


def _ranges(cells: set[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """Coalesce (drive, sector) cells into (drive, start, count) ranges."""
    out = []
    for drive in sorted({d for d, _s in cells}):
        secs = sorted(s for d, s in cells if d == drive)
        start = prev = secs[0]
        for s in secs[1:]:
            if s != prev + 1:
                out.append((drive, start, prev - start + 1))
                start = s
            prev = s
        out.append((drive, start, prev - start + 1))
    return out


def plan_parity_write(kind: str, width: int, unit: int, lba: int, sectors: int):
    """(reads, writes) as coalesced ranges for a RAID-5/6 write, choosing per stripe the
    strategy with fewer operations (ties: read-modify-write), sector by sector."""
    d = width - (1 if kind == "raid5" else 2)
    reads: list[tuple[int, int, int]] = []
    writes: list[tuple[int, int, int]] = []
    by_stripe: dict[int, list[int]] = {}
    for s in range(lba, lba + sectors):
        by_stripe.setdefault(s // (unit * d), []).append(s)
    for stripe, secs in sorted(by_stripe.items()):
        t = stripe_table(kind, width, stripe)
        parity = [t["P"]] + ([t["Q"]] if kind == "raid6" else [])
        written = set()
        offsets = set()
        units = set()
        for s in secs:
            drive, dsec = locate(kind, width, unit, s)
            written.add((drive, dsec))
            offsets.add(dsec % unit)
            units.add((s // unit) % d)
        base = stripe * unit
        if len(secs) == d * unit:
            writes += _ranges(written | {(p, base + o) for p in parity for o in range(unit)})
            continue
        if len(units) == 1:
            rows = range(min(offsets), max(offsets) + 1)
        else:
            rows = range(unit)
        par = {(p, base + o) for p in parity for o in rows}
        rmw_reads = _ranges(written) + _ranges(par)
        keep = {(drive, base + o) for drive in t["data"] for o in rows} - written  # type: ignore[union-attr]
        rcw_reads = _ranges(keep)
        chosen = rmw_reads if len(rmw_reads) <= len(rcw_reads) else rcw_reads
        reads += chosen
        writes += _ranges(written) + _ranges(par)
    return reads, writes


def mirror_reads(kind: str, width: int, unit: int, requests, heads=None):
    """The copy each piece of a sequence of healthy mirror requests reads, as Linux md's RAID-1
    read_balance picks for rotating disks (drivers/md/raid1.c): the first copy whose
    next_seq_sect is the piece's sector (a sequential read), else the copy with the least
    distance to its head position, the first on ties. Writes move every copy's head to their
    end. ``requests`` are (lba, sectors, is_write); returns [(drive, sector, count)] of the
    reads, in order, and the heads after them."""
    heads = list(heads) if heads is not None else [0] * width
    out = []
    for lba, n, write in requests:
        if kind == "raid1":
            pieces = [(0, width, lba, n)]
        else:  # raid10: units round-robin over the pairs (2p, 2p+1)
            pieces = []
            pos = lba
            while pos < lba + n:
                take = min(lba + n, (pos // unit + 1) * unit) - pos
                chunk = pos // unit
                pair, row = chunk % (width // 2), chunk // (width // 2)
                pieces.append((2 * pair, 2, row * unit + pos % unit, take))
                pos += take
        for first, count, sector, take in pieces:
            copies = range(first, first + count)
            if write:
                for c in copies:
                    heads[c] = sector + take
                continue
            seq = [c for c in copies if heads[c] == sector]
            c = seq[0] if seq else min(copies, key=lambda c: (abs(heads[c] - sector), c))
            out.append((c, sector, take))
            heads[c] = sector + take
    return out, heads


def lost(kind: str, width: int, unit: int, drive_sectors: int, lba: int, sectors: int,
         missing_at) -> bool:
    """Whether a sector of the request is held by no surviving member and cannot be rebuilt
    from the survivors, sector by sector: ``missing_at(member, drive_sector)`` says whether a
    member is missing there. JBOD and RAID-0 hold a sector once; a mirror loses it with its
    last copy; RAID-5 and RAID-6 rebuild a missing member's sector from the others of its
    stripe row while at most one (two) of the row's members are missing."""
    for s in range(lba, lba + sectors):
        if kind == "jbod":
            if missing_at(s // drive_sectors, s % drive_sectors):
                return True
            continue
        if kind == "raid1":
            copies = [(c, s) for c in range(width)]
        else:
            member, row = locate(kind, width, unit, s)
            copies = [(member, row), (member + 1, row)] if kind == "raid10" else [(member, row)]
        if not all(missing_at(m, r) for m, r in copies):
            continue
        if kind in ("raid0", "raid1", "raid10"):
            return True
        row = copies[0][1]
        gone = sum(1 for c in range(width) if missing_at(c, row))
        if gone > (1 if kind == "raid5" else 2):
            return True
    return False
