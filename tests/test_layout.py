"""Layout kernels against the plain-Python reference, and the properties a layout must have:
a bijection on data, rotating parity, no two pieces of one stripe on one drive; write plans."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from blocklab.kernels.layout import raid as R

from .reference import layout as ref

KINDS = {"raid0": R.KIND_RAID0, "raid10": R.KIND_RAID10, "raid5": R.KIND_RAID5,
         "raid6": R.KIND_RAID6}
MIN_WIDTH = {"raid0": 1, "raid10": 2, "raid5": 3, "raid6": 4}


@st.composite
def geometry(draw, kinds=tuple(KINDS)):
    kind = draw(st.sampled_from(kinds))
    width = draw(st.integers(MIN_WIDTH[kind], 10))
    if kind == "raid10":
        width -= width % 2
    unit = draw(st.integers(1, 16))
    stripes = draw(st.integers(1, 3 * width))
    return kind, width, unit, stripes * unit  # drive_sectors: whole stripes


@settings(max_examples=150, deadline=None)
@given(geometry())
def test_map_is_a_bijection_onto_data_cells(g):
    kind, width, unit, drive_sectors = g
    k = KINDS[kind]
    cap = R.capacity(k, width, unit, drive_sectors)
    cells = set()
    for lba in range(cap):
        drive, dsec = R.locate(k, width, unit, drive_sectors, lba)
        assert (drive, dsec) == ref.locate(kind, width, unit, lba)
        assert 0 <= drive < width and 0 <= dsec < drive_sectors
        stripe = dsec // unit
        assert drive != R.parity_drive(k, width, stripe)
        assert drive != R.q_drive(k, width, stripe)
        cells.add((drive, dsec))
    assert len(cells) == cap  # injective, so a bijection onto the cells it uses
    parity_cells = 0
    if kind in ("raid5", "raid6"):
        parity_cells = (drive_sectors // unit) * unit * (1 if kind == "raid5" else 2)
    mirror_cells = cap if kind == "raid10" else 0
    assert cap + parity_cells + mirror_cells == width * drive_sectors


@settings(max_examples=100, deadline=None)
@given(geometry(("raid5", "raid6")))
def test_parity_rotates_and_stripes_use_distinct_drives(g):
    kind, width, unit, _ds = g
    k = KINDS[kind]
    for start in range(0, 3 * width, width):
        p = [R.parity_drive(k, width, s) for s in range(start, start + width)]
        assert sorted(p) == list(range(width))  # every drive holds P once per width stripes
        if kind == "raid6":
            q = [R.q_drive(k, width, s) for s in range(start, start + width)]
            assert sorted(q) == list(range(width))
    for stripe in range(2 * width):
        drives = [R.unit_drive(k, width, stripe, u) for u in range(R.data_drives(k, width))]
        drives.append(R.parity_drive(k, width, stripe))
        if kind == "raid6":
            drives.append(R.q_drive(k, width, stripe))
        assert sorted(drives) == list(range(width))


def _plan(kind, width, unit, drive_sectors, lba, n, write, heads=None):
    ops = np.zeros(R.max_ops(KINDS[kind], width, unit, n) * R.OP_NCOLS, dtype=np.int64)
    heads = R.new_heads(width) if heads is None else heads
    m = R.plan_request(KINDS[kind], width, unit, drive_sectors, lba, n, int(write), heads, ops,
                       R.no_missing())
    return ops[: m * R.OP_NCOLS].reshape(m, R.OP_NCOLS)


@st.composite
def request(draw, kinds=tuple(KINDS)):
    kind, width, unit, drive_sectors = draw(geometry(kinds))
    cap = R.capacity(KINDS[kind], width, unit, drive_sectors)
    lba = draw(st.integers(0, cap - 1))
    n = draw(st.integers(1, cap - lba))
    return kind, width, unit, drive_sectors, lba, n


@settings(max_examples=200, deadline=None)
@given(request(), st.booleans(), st.integers(0, 1 << 20))
def test_data_operations_cover_the_request_exactly(r, write, seed):
    kind, width, unit, drive_sectors, lba, n = r
    heads = np.random.default_rng(seed).integers(0, drive_sectors, width)
    ops = _plan(kind, width, unit, drive_sectors, lba, n, write, heads)
    data = [o for o in ops if o[R.OP_ROLE] == R.ROLE_DATA and o[R.OP_WRITE] == int(write)
            and o[R.OP_PHASE] == 1]
    covered = []
    for o in data:
        covered += [(int(o[R.OP_DRIVE]), int(o[R.OP_SECTOR]) + i) for i in range(o[R.OP_COUNT])]
    want = [R.locate(KINDS[kind], width, unit, drive_sectors, s) for s in range(lba, lba + n)]
    if kind == "raid10" and not write:  # a read may use either copy of the pair
        covered = [(d - d % 2, x) for d, x in covered]
    assert sorted(covered) == sorted(want)
    if kind == "raid10" and write:
        mirrors = [o for o in ops if o[R.OP_ROLE] == R.ROLE_MIRROR]
        assert sum(int(o[R.OP_COUNT]) for o in mirrors) == n
    if not write:
        assert all(o[R.OP_WRITE] == 0 for o in ops)


@settings(max_examples=200, deadline=None)
@given(request(("raid5", "raid6")))
def test_parity_write_plan_matches_reference(r):
    kind, width, unit, drive_sectors, lba, n = r
    ops = _plan(kind, width, unit, drive_sectors, lba, n, True)
    reads, writes = ref.plan_parity_write(kind, width, unit, lba, n)
    got_reads = sorted((int(o[0]), int(o[1]), int(o[2])) for o in ops if o[R.OP_WRITE] == 0)
    got_writes = sorted((int(o[0]), int(o[1]), int(o[2])) for o in ops if o[R.OP_WRITE] == 1)
    assert len(got_reads) == len(reads)  # same strategy: same number of operations
    assert sum(c for *_x, c in got_reads) == sum(c for *_x, c in reads)
    assert _cells(got_writes) == _cells(writes)
    assert all(o[R.OP_PHASE] == 0 for o in ops if o[R.OP_WRITE] == 0)  # reads come first


def _cells(ranges):
    return sorted((d, s + i) for d, s, c in ranges for i in range(c))


def test_full_stripe_write_needs_no_reads():
    for kind, width in (("raid5", 5), ("raid6", 6)):
        d = width - (1 if kind == "raid5" else 2)
        ops = _plan(kind, width, 64, 64 * 10, 64 * d * 3, 64 * d * 2, True)
        assert all(o[R.OP_WRITE] == 1 for o in ops)
        assert len(ops) == 2 * width  # every drive written once per stripe


def test_small_write_is_read_modify_write():
    ops = _plan("raid5", 8, 128, 128 * 10, 5, 8, True)
    # 4 operations: read old data and parity, write new data and parity
    assert sorted((int(o[R.OP_WRITE]), int(o[R.OP_ROLE])) for o in ops) == [
        (0, R.ROLE_DATA), (0, R.ROLE_P), (1, R.ROLE_DATA), (1, R.ROLE_P)]


def test_raid1_reads_balance_and_writes_mirror():
    heads = np.array([100, 7, 50], np.int64)
    ops = _plan_k(R.KIND_RAID1, 3, 10, 1000, 5, 40, False, heads)  # member 1's head is nearest
    assert [(int(o[0]), int(o[1]), int(o[2])) for o in ops] == [(1, 5, 40)]
    assert list(heads) == [100, 45, 50]
    ops = _plan_k(R.KIND_RAID1, 3, 10, 1000, 45, 8, False, heads)  # sequential: stays on 1
    assert [int(o[0]) for o in ops] == [1]
    ops = _plan_k(R.KIND_RAID1, 3, 10, 1000, 5, 40, True, heads)
    assert sorted(int(o[0]) for o in ops) == [0, 1, 2] and list(heads) == [45, 45, 45]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(("raid1", "raid10")), st.integers(1, 3), st.integers(1, 16),
       st.lists(st.tuples(st.integers(0, 400), st.integers(1, 64), st.booleans()),
                min_size=1, max_size=12))
def test_mirror_reads_follow_md_read_balance(kind, half, unit, reqs):
    """The copy each mirrored read uses, over a sequence of requests, equals a plain-Python
    model of Linux md's read_balance (tests/reference/layout.py)."""
    width = 2 * half if kind == "raid10" else half + 1
    ds = unit * 1000
    heads = R.new_heads(width)
    got = []
    k = R.KIND_RAID1 if kind == "raid1" else R.KIND_RAID10
    for lba, n, write in reqs:
        ops = _plan_k(k, width, unit, ds, lba, n, write, heads)
        got += [(int(o[0]), int(o[1]), int(o[2])) for o in ops if o[R.OP_WRITE] == 0]
    want, want_heads = ref.mirror_reads(kind, width, unit, reqs)
    assert got == want and list(heads) == want_heads


def test_jbod_concatenates():
    ops = _plan_k(R.KIND_JBOD, 3, 8, 100, 95, 10, False)
    assert [(int(o[0]), int(o[1]), int(o[2])) for o in ops] == [(0, 95, 5), (1, 0, 5)]


def _plan_k(kind, width, unit, drive_sectors, lba, n, write, heads=None):
    ops = np.zeros(R.max_ops(kind, width, unit, n) * R.OP_NCOLS, dtype=np.int64)
    heads = R.new_heads(width) if heads is None else heads
    m = R.plan_request(kind, width, unit, drive_sectors, lba, n, int(write), heads, ops,
                       R.no_missing())
    return ops[: m * R.OP_NCOLS].reshape(m, R.OP_NCOLS)


# ---------------------------------------------------------------------------------------------
# degraded mode (issue 5): missing members with rebuild cursors


@st.composite
def degraded(draw, kinds=("raid0", "raid10", "raid5", "raid6", "raid1")):
    kind = draw(st.sampled_from(kinds))
    if kind == "raid1":
        width = draw(st.integers(2, 4))
        unit = draw(st.integers(1, 8))
        ds = unit * draw(st.integers(1, 12))
    else:
        kind_, width, unit, ds = draw(geometry((kind,)))
    members = draw(st.lists(st.integers(0, width - 1), min_size=1, max_size=3, unique=True))
    miss = [-1, 0, -1, 0, -1, 0]
    for j, m in enumerate(members):
        miss[2 * j] = m
        miss[2 * j + 1] = unit * draw(st.integers(0, ds // unit))  # rebuilt rows below
    k = KINDS.get(kind, R.KIND_RAID1)
    cap = R.capacity(k, width, unit, ds)
    lba = draw(st.integers(0, cap - 1))
    n = draw(st.integers(1, cap - lba))
    return kind, k, width, unit, ds, np.array(miss, np.int64), lba, n


def _dplan(k, width, unit, ds, lba, n, write, miss, heads=None):
    ops = np.zeros(R.max_ops(k, width, unit, n) * R.OP_NCOLS, dtype=np.int64)
    heads = R.new_heads(width) if heads is None else heads
    m = R.plan_request(k, width, unit, ds, lba, n, int(write), heads, ops, miss)
    return ops[: m * R.OP_NCOLS].reshape(m, R.OP_NCOLS)


def _missing_at(miss, member, row):
    return any(miss[j] == member and row >= miss[j + 1] for j in range(0, 6, 2))


def _cells_of(ops, write):
    return {(int(o[0]), int(o[1]) + i) for o in ops if o[R.OP_WRITE] == write
            for i in range(int(o[2]))}


def _roles(kind, width, stripe):
    t = ref.stripe_table(kind, width, stripe)
    return t["data"], [t["P"]] + ([t["Q"]] if kind == "raid6" else [])


@settings(max_examples=300, deadline=None)
@given(degraded(), st.booleans(), st.integers(0, 1 << 20))
def test_degraded_plans_touch_no_missing_member_and_suffice(g, write, seed):
    """Operations never touch a member where it is missing; a read gets every requested
    sector, directly or from enough survivors to reconstruct it; a write writes every surviving
    copy or unit it changes, and every surviving parity it rewrites can be computed from what
    was read (read-modify-write or reconstruct-write, or solving the old parity equations)."""
    kind, k, width, unit, ds, miss, lba, n = g
    heads = np.random.default_rng(seed).integers(0, ds, width)
    ops = _dplan(k, width, unit, ds, lba, n, write, miss, heads)
    for o in ops:
        for i in range(int(o[2])):
            assert not _missing_at(miss, int(o[0]), int(o[1]) + i), (o, miss)
    reads, writes = _cells_of(ops, 0), _cells_of(ops, 1)
    tol = R.tolerance(k, width)
    if kind in ("raid0", "raid1", "raid10"):
        for s in range(lba, lba + n):
            if kind == "raid1":
                copies = [(c, s) for c in range(width)]
            elif kind == "raid10":
                d, x = ref.locate("raid10", width, unit, s)
                copies = [(d, x), (d + 1, x)]
            else:
                copies = [ref.locate("raid0", width, unit, s)]
            alive = [c for c in copies if not _missing_at(miss, *c)]
            if write:
                assert set(alive) <= writes
            elif alive:
                assert any(c in reads for c in alive)
        return
    d = width - (1 if kind == "raid5" else 2)
    by_stripe: dict[int, list[int]] = {}
    for s in range(lba, lba + n):
        by_stripe.setdefault(s // (unit * d), []).append(s)
    for stripe, secs in by_stripe.items():
        data, parity = _roles(kind, width, stripe)
        base = stripe * unit
        lost = [c for c in range(width) if _missing_at(miss, c, base)]
        if len(lost) > tol:
            continue  # data loss: what survives is served, nothing to prove
        if not write:
            for s in secs:
                m, row = ref.locate(kind, width, unit, s)
                if (m, row) in reads:
                    continue
                assert _missing_at(miss, m, row)
                helpers = [c for c in range(width) if c != m and (c, row) in reads]
                assert len(helpers) >= width - (1 if kind == "raid5" else 2)
            continue
        written = {ref.locate(kind, width, unit, s) for s in secs}
        assert {c for c in written if not _missing_at(miss, *c)} <= writes
        rows = sorted({row for _m, row in written}) if len({s // unit for s in secs}) == 1 \
            else list(range(base, base + unit))
        rows = list(range(rows[0], rows[-1] + 1))
        for row in rows:
            wmembers = {m for m, r in written if r == row}
            known = {c for c in data if (c, row) in reads}
            par_read = [p for p in parity if (p, row) in reads]
            unwritten = [c for c in data if c not in wmembers]
            for p in parity:
                if _missing_at(miss, p, row):
                    continue
                assert (p, row) in writes
                rcw = all(c in known for c in unwritten)
                rmw = p in par_read and all(c in known for c in wmembers)
                solve = len([c for c in data if c not in known]) <= len(par_read)
                assert rcw or rmw or solve, (kind, stripe, row, miss, known, par_read)


@settings(max_examples=300, deadline=None)
@given(degraded(), st.booleans())
def test_lost_requests_are_those_a_plain_model_finds_lost(g, write):
    """``request_lost`` (a request with part of its data on no surviving member, which a real
    array fails) equals a sector-by-sector model (tests/reference/layout.py); and a read it
    finds whole is planned with every sector read or rebuilt from survivors (the property
    above), one it finds lost has a sector that no operation reads."""
    kind, k, width, unit, ds, miss, lba, n = g
    got = bool(R.request_lost(k, width, unit, ds, lba, n, miss))
    assert got == ref.lost(kind, width, unit, ds, lba, n,
                           lambda m, r: _missing_at(miss, m, r))
    if got and not write:
        reads = _cells_of(_dplan(k, width, unit, ds, lba, n, 0, miss), 0)
        assert any(ref.locate(kind, width, unit, s) not in reads if kind != "raid1"
                   else all((c, s) not in reads for c in range(width))
                   for s in range(lba, lba + n))


def test_a_jbod_loses_what_its_missing_drive_held():
    miss = np.array([1, 0, -1, 0, -1, 0], np.int64)  # drive 1 (sectors 100-199) missing
    want = {(0, 100): False, (95, 10): True, (150, 10): True, (200, 50): False}
    for (lba, n), lost in want.items():
        assert bool(R.request_lost(R.KIND_JBOD, 3, 8, 100, lba, n, miss)) == lost
        assert ref.lost("jbod", 3, 8, 100, lba, n, lambda m, r: m == 1) == lost
    assert not R.request_lost(R.KIND_JBOD, 3, 8, 100, 0, 300, R.no_missing())


@settings(max_examples=200, deadline=None)
@given(degraded(("raid1", "raid10", "raid5", "raid6")))
def test_rebuild_unit_reads_enough_survivors(g):
    kind, k, width, unit, ds, miss, _lba, _n = g
    member = int(miss[0])
    row = int(miss[1])
    if row >= ds:
        return
    rows = min(unit * 2, ds - row)
    ops = np.zeros((width + 2) * R.OP_NCOLS, dtype=np.int64)
    m = R.plan_rebuild(k, width, member, row, rows, miss, ops)
    ops = ops[: m * R.OP_NCOLS].reshape(m, R.OP_NCOLS)
    reads = [o for o in ops if o[R.OP_WRITE] == 0]
    survivors = [c for c in range(width) if c != member and not _missing_at(miss, c, row)]
    if kind == "raid10":
        survivors = [c for c in survivors if c == member ^ 1]
    need = {"raid1": 1, "raid10": 1, "raid5": width - 1, "raid6": width - 2}[kind]
    if len(survivors) < need:
        assert m == 0  # cannot be rebuilt
        return
    assert len(reads) == need and {int(o[0]) for o in reads} <= set(survivors)
    assert all((int(o[1]), int(o[2]), int(o[4])) == (row, rows, 0) for o in reads)
    (w,) = [o for o in ops if o[R.OP_WRITE] == 1]
    assert (int(w[0]), int(w[1]), int(w[2]), int(w[4])) == (member, row, rows, 1)


@settings(max_examples=60, deadline=None)
@given(geometry(("raid5", "raid6")), st.integers(0, 3), st.integers(1, 3))
def test_initialization_reads_data_and_writes_parity(g, s0, ns):
    kind, width, unit, _ds = g
    ops = np.zeros(ns * (width + 2) * R.OP_NCOLS, dtype=np.int64)
    m = R.plan_init(KINDS[kind], width, unit, s0, ns, ops)
    ops = ops[: m * R.OP_NCOLS].reshape(m, R.OP_NCOLS)
    for stripe in range(s0, s0 + ns):
        data, parity = _roles(kind, width, stripe)
        rows = set(range(stripe * unit, (stripe + 1) * unit))
        assert {(c, r) for c in data for r in rows} <= _cells_of(ops, 0)
        assert {(p, r) for p in parity for r in rows} <= _cells_of(ops, 1)
    assert all(o[R.OP_PHASE] == (1 if o[R.OP_WRITE] else 0) for o in ops)


@settings(max_examples=150, deadline=None)
@given(geometry(("raid5", "raid6")), st.data())
def test_a_degraded_write_whose_members_survive_is_a_read_modify_write(g, data):
    """A write of part of one stripe unit, in a stripe that has lost a member the write does
    not touch (a data member or a parity): the old data of the written unit and the surviving
    parities are read, and the same rows written, as Linux md's raid5.c chooses (a
    reconstruct-write would need the lost unit). It read every survivor: 8 operations for a
    4 KiB write to a degraded 8-drive RAID-5, not 4."""
    kind, width, unit, ds = g
    k = KINDS[kind]
    d = R.data_drives(k, width)
    stripe = data.draw(st.integers(0, ds // unit - 1))
    j = data.draw(st.integers(0, d - 1))  # the unit written
    off = data.draw(st.integers(0, unit - 1))
    n = data.draw(st.integers(1, unit - off))
    target = R.unit_drive(k, width, stripe, j)
    lost = data.draw(st.sampled_from([c for c in range(width) if c != target]))
    miss = np.array([lost, 0, -1, 0, -1, 0], np.int64)
    ops = _dplan(k, width, unit, ds, stripe * d * unit + j * unit + off, n, True, miss)
    parities = [R.parity_drive(k, width, stripe)] + (
        [R.q_drive(k, width, stripe)] if kind == "raid6" else [])
    members = sorted({target} | {p for p in parities if p != lost})
    row = stripe * unit + off
    for w in (0, 1):
        got = sorted((int(o[R.OP_DRIVE]), int(o[R.OP_SECTOR]), int(o[R.OP_COUNT]))
                     for o in ops if o[R.OP_WRITE] == w)
        # (no parity left, as a RAID-5 that lost its parity member: the data written alone)
        want = members if w or len(members) > 1 else []
        assert got == [(c, row, n) for c in want], (w, lost, got)
