"""The controller cache's side of the engine: lookups and stores, read-ahead prefetch jobs,
write-back writes waiting for room, and destage jobs (package docstring, point 3; the line
tables are kernels/cache.py)."""

from __future__ import annotations

from blocklab.kernels import cache as CA
from blocklab.kernels._jit import njit
from blocklab.kernels.layout import raid as R

from .drives import _push
from .requests import _finish, _launch, _mark_lost, _piece, _piece_n, _plan, _send_out
from .tables import (
    DESTAGE_SECTORS,
    EX_ROW,
    FILLING,
    G_KIND,
    G_UNIT,
    G_WIDTH,
    HIT,
    HK_JOB,
    HK_RETRY,
    HK_TIMER,
    J_KIND,
    J_LBA,
    J_LUN,
    J_N,
    J_PENDING,
    JOB_DESTAGE,
    JOB_PREFETCH,
    MISS,
    MP_GROUP,
    NONE,
    RQ_CNEXT,
    RQ_LBA,
    RQ_NSEC,
    RQ_O_HIT,
    RQ_O_START,
    S_CACHE,
    S_DESTAGING,
    S_FLUSHING,
    S_FREE_JOBS,
    S_TIMER,
    S_WW_HEAD,
    S_WW_TAIL,
    U_CAP,
    U_EXT0,
    U_EXT_SECT,
    U_LAST_END,
    U_RA_END,
    U_WHEAD,
    U_WTAIL,
)

# ---------------------------------------------------------------------------------------------
# the controller cache


@njit(forceinline=True, nrt=False)
def _lines_of(cfg, lun_lba, n):
    """First and last cache line index of LUN sectors [lun_lba, lun_lba + n)."""
    ls = cfg.line_sectors
    return lun_lba // ls, (lun_lba + n - 1) // ls


@njit(forceinline=True, nrt=False)
def _bits(cfg, k, lun_lba, n):
    """Sector mask, within line k, of LUN sectors [lun_lba, lun_lba + n)."""
    ls = cfg.line_sectors
    lo = max(lun_lba, k * ls) - k * ls
    hi = min(lun_lba + n, (k + 1) * ls) - k * ls
    return CA.mask(lo, hi)


@njit(forceinline=True, nrt=False)
def _lookup(cfg, W, g):
    """(HIT | FILLING | MISS, LUN of the first filling line) of read request ``g``."""
    RQ = W.RQ
    CL = W.CL
    slot = g & (RQ.shape[0] - 1)
    pos = RQ[slot, RQ_LBA]
    end = pos + RQ[slot, RQ_NSEC]
    status = HIT
    wait_lun = NONE
    while pos < end:
        lun, lun_lba, piece_end = _piece(cfg, W, pos, end)
        n = piece_end - pos
        k0, k1 = _lines_of(cfg, lun_lba, n)
        for k in range(k0, k1 + 1):
            line = CA.find(W.HT, (lun << CA.KEY_SHIFT) | k)
            if line == NONE:
                return MISS, NONE
            b = _bits(cfg, k, lun_lba, n)
            if (CL[line, CA.CL_VALID] & b) != b:
                job = CL[line, CA.CL_JOB]
                if job != NONE and W.JB[job, J_KIND] == JOB_PREFETCH:
                    if status == HIT:
                        status = FILLING
                        wait_lun = lun
                else:
                    return MISS, NONE
        pos = piece_end
    return status, wait_lun


@njit(forceinline=True, nrt=False)
def _store(cfg, W, g, dirty, now):
    """Put request ``g``'s sectors in the cache: dirty (a write-back write: the caller checked
    there is room) or clean (data read, or written through, while lines are available)."""
    RQ = W.RQ
    CL = W.CL
    S = W.S
    slot = g & (RQ.shape[0] - 1)
    pos = RQ[slot, RQ_LBA]
    end = pos + RQ[slot, RQ_NSEC]
    while pos < end:
        lun, lun_lba, piece_end = _piece(cfg, W, pos, end)
        n = piece_end - pos
        k0, k1 = _lines_of(cfg, lun_lba, n)
        for k in range(k0, k1 + 1):
            key = (lun << CA.KEY_SHIFT) | k
            b = _bits(cfg, k, lun_lba, n)
            line = CA.find(W.HT, key)
            if line == NONE:
                if CA.room(S, S_CACHE) == 0:
                    continue
                line = CA.take(CL, W.HT, S, S_CACHE, key)
                if dirty:
                    CA.write(CL, S, S_CACHE, line, b, now)
                else:
                    CL[line, CA.CL_VALID] = b
                    CA.make_clean(CL, S, S_CACHE, line)
            elif dirty:
                CA.write(CL, S, S_CACHE, line, b, now)
            else:
                CL[line, CA.CL_VALID] |= b
                CA.touch(CL, S, S_CACHE, line)
        pos = piece_end


@njit(nrt=False)
def _scan_lines(cfg, S, RQ, LN, CL, HT, g, touch):
    """Over request ``g``'s cache lines: (lines it spans, lines not cached, its clean lines);
    with ``touch`` its cached clean lines become the most recently used."""
    slot = g & (RQ.shape[0] - 1)
    pos = RQ[slot, RQ_LBA]
    end = pos + RQ[slot, RQ_NSEC]
    total = 0
    missing = 0
    clean = 0
    while pos < end:
        lun, lun_lba, piece_end = _piece_n(cfg, LN.shape[0], pos, end)
        k0, k1 = _lines_of(cfg, lun_lba, piece_end - pos)
        for k in range(k0, k1 + 1):
            total += 1
            line = CA.find(HT, (lun << CA.KEY_SHIFT) | k)
            if line == NONE:
                missing += 1
            elif CL[line, CA.CL_WHERE] == CA.L_CLEAN:
                clean += 1
                if touch:
                    CA.touch(CL, S, S_CACHE, line)
        pos = piece_end
    return total, missing, clean


@njit(nrt=False)
def _fits(cfg, S, RQ, LN, CL, HT, g):
    """Whether write ``g`` can take the lines it lacks now without evicting its own clean
    lines; if so its own are made the most recently used."""
    _total, missing, clean = _scan_lines(cfg, S, RQ, LN, CL, HT, g, False)
    if CA.room(S, S_CACHE) - clean < missing:
        return False
    _scan_lines(cfg, S, RQ, LN, CL, HT, g, True)
    return True


@njit(forceinline=True, nrt=False)
def _new_job(W, kind, lun, lba, n):
    """A job for LUN sectors [lba, lba + n) (the caller checked one is free)."""
    S = W.S
    S[S_FREE_JOBS] -= 1
    j = W.JFREE[S[S_FREE_JOBS]]
    W.JB[j, J_KIND] = kind
    W.JB[j, J_LUN] = lun
    W.JB[j, J_LBA] = lba
    W.JB[j, J_N] = n
    return j


@njit(nrt=False)
def _job_ops(W, j, write, now, ncand):
    """Plan job ``j``'s drive operations and queue them. A job with none (its data is all on
    failed members: a RAID-0 or JBOD member, both copies of a mirror) is done at ``now``, an
    event after this one (until 2026-11-29 it waited for ever, and so did the writes waiting
    for the cache room it held: the replay stopped with "no event left")."""
    JB = W.JB
    first, _last = _plan(W, -j - 1, JB[j, J_LUN], JB[j, J_LBA], JB[j, J_N], write, NONE, NONE)
    if first == NONE:
        _push(W, now, HK_JOB, j)
        return ncand
    return _launch(W, JB, j, J_PENDING, first, now, ncand)


@njit(nrt=False)
def _prefetch(cfg, W, lun, now, ncand):
    """Start a prefetch of the next ``ra_sectors`` at the LUN's read-ahead point; returns
    (started, ncand)."""
    CL = W.CL
    LN = W.LN
    S = W.S
    a = LN[lun, U_RA_END]
    n = min(cfg.ra_sectors, LN[lun, U_CAP] - a)
    if n <= 0:
        return False, ncand
    k0, k1 = _lines_of(cfg, a, n)
    missing = 0
    own_clean = 0
    for k in range(k0, k1 + 1):
        line = CA.find(W.HT, (lun << CA.KEY_SHIFT) | k)
        if line == NONE:
            missing += 1
        elif CL[line, CA.CL_WHERE] == CA.L_CLEAN:
            own_clean += 1
    if missing == 0:  # all there already
        LN[lun, U_RA_END] = a + n
        return True, ncand
    # the lines it lacks come from free lines and clean lines outside its range: evicting its
    # own would drop what it reads ahead (and the loop below would take them again)
    if CA.room(S, S_CACHE) - own_clean < missing or S[S_FREE_JOBS] == 0:
        return False, ncand
    j = _new_job(W, JOB_PREFETCH, lun, a, n)
    lo = (lun << CA.KEY_SHIFT) | k0
    for k in range(k0, k1 + 1):
        key = (lun << CA.KEY_SHIFT) | k
        if CA.find(W.HT, key) == NONE:
            CA.hold(CL, S, S_CACHE, CA.take_keeping(CL, W.HT, S, S_CACHE, key, lo, lo + k1 - k0),
                    j)
    LN[lun, U_RA_END] = a + n
    return True, _job_ops(W, j, 0, now, ncand)


@njit(forceinline=True, nrt=False)
def _sequential(cfg, W, g, now, ncand):
    """A read arrives: note where it ends on each LUN, and keep sequential readers' prefetch
    ``ra_sectors`` ahead of them."""
    RQ = W.RQ
    LN = W.LN
    slot = g & (RQ.shape[0] - 1)
    pos = RQ[slot, RQ_LBA]
    end = pos + RQ[slot, RQ_NSEC]
    while pos < end:
        lun, lun_lba, piece_end = _piece(cfg, W, pos, end)
        e = lun_lba + piece_end - pos
        seq = lun_lba == LN[lun, U_LAST_END]
        LN[lun, U_LAST_END] = e
        if seq and cfg.ra_sectors > 0:
            if LN[lun, U_RA_END] < e:
                LN[lun, U_RA_END] = e
            while LN[lun, U_RA_END] - e < cfg.ra_sectors:
                started, ncand = _prefetch(cfg, W, lun, now, ncand)
                if not started:
                    break
        pos = piece_end
    return ncand


@njit(forceinline=True, nrt=False)
def _read(cfg, W, g, now, ncand):
    """A read request is at the controller (again, after waiting for a prefetch). Returns
    (ncand, True if it goes to the drives, the request if it is done now, else NONE): the
    caller sends it to the drives or finishes it (see ``replay``)."""
    if cfg.cache_lines == 0:
        return ncand, True, NONE
    status, lun = _lookup(cfg, W, g)
    if status == HIT:
        RQ = W.RQ
        slot = g & (RQ.shape[0] - 1)
        RQ[slot, RQ_O_START] = now
        RQ[slot, RQ_O_HIT] = 1
        _mark_lost(cfg, W, g)
        _scan_lines(cfg, W.S, RQ, W.LN, W.CL, W.HT, g, True)
        return ncand, False, _send_out(cfg, W, g, now)
    if status == FILLING:
        RQ = W.RQ
        LN = W.LN
        cap = RQ.shape[0] - 1
        RQ[g & cap, RQ_CNEXT] = NONE
        if LN[lun, U_WTAIL] == NONE:
            LN[lun, U_WHEAD] = g
        else:
            RQ[LN[lun, U_WTAIL] & cap, RQ_CNEXT] = g
        LN[lun, U_WTAIL] = g
        return ncand, False, NONE
    return ncand, True, NONE


@njit(forceinline=True, nrt=False)
def _lowest_bit(x):
    """The lowest set bit of ``x`` (not 0)."""
    k = 0
    while (x >> k) & 1 == 0:
        k += 1
    return k


@njit(forceinline=True, nrt=False)
def _highest_bit(x):
    """The highest set bit of ``x`` (not 0)."""
    k = 63
    while (x >> k) & 1 == 0:
        k -= 1
    return k


@njit(nrt=False)
def _destage_one(cfg, W, now, ncand):
    """Destage the oldest dirty line with its dirty neighbours in the same RAID stripe."""
    CL = W.CL
    HT = W.HT
    S = W.S
    line = S[S_CACHE + CA.CH_DIRTY]
    key = CL[line, CA.CL_KEY]
    lun = key >> CA.KEY_SHIFT
    k = key & ((1 << CA.KEY_SHIFT) - 1)
    grp = W.MP[W.EX[W.LN[lun, U_EXT0] + (k * cfg.line_sectors) // W.LN[lun, U_EXT_SECT],
                     EX_ROW], MP_GROUP]
    stripe = W.GR[grp, G_UNIT] * R.data_drives(W.GR[grp, G_KIND], W.GR[grp, G_WIDTH])
    stripe *= max(1, DESTAGE_SECTORS // stripe)  # whole stripes, up to 4 MiB at once
    ls = cfg.line_sectors
    s0 = (k * ls) // stripe * stripe
    lo_k = s0 // ls
    hi_k = (s0 + stripe - 1) // ls
    k0 = k
    while k0 > lo_k:
        x = CA.find(HT, (lun << CA.KEY_SHIFT) | (k0 - 1))
        if x == NONE or CL[x, CA.CL_WHERE] != CA.L_DIRTY:
            break
        k0 -= 1
    k1 = k
    while k1 < hi_k:
        x = CA.find(HT, (lun << CA.KEY_SHIFT) | (k1 + 1))
        if x == NONE or CL[x, CA.CL_WHERE] != CA.L_DIRTY:
            break
        k1 += 1
    first = CL[CA.find(HT, (lun << CA.KEY_SHIFT) | k0), CA.CL_DIRTY]
    last = CL[CA.find(HT, (lun << CA.KEY_SHIFT) | k1), CA.CL_DIRTY]
    if first == 0 or last == 0:  # the bit scans below would never end
        raise IndexError("replay: a cache line on the dirty list has no dirty sectors")
    a = k0 * ls + _lowest_bit(first)
    e = k1 * ls + _highest_bit(last) + 1
    j = _new_job(W, JOB_DESTAGE, lun, a, e - a)
    for kk in range(k0, k1 + 1):
        CA.hold(CL, S, S_CACHE, CA.find(HT, (lun << CA.KEY_SHIFT) | kk), j)
    S[S_DESTAGING] += 1
    return _job_ops(W, j, 1, now, ncand)


@njit(forceinline=True, nrt=False)
def _destage(cfg, W, now, ncand):
    """Start the destages the policy asks for (module docstring, 3) and keep a timer for the
    oldest dirty data."""
    if cfg.cache_lines == 0 or cfg.write_back == 0:
        return ncand
    S = W.S
    ndirty = S[S_CACHE + CA.CN_DIRTY]
    if ndirty >= cfg.flush_start:
        S[S_FLUSHING] = 1
    elif ndirty <= cfg.flush_stop:
        S[S_FLUSHING] = 0
    while S[S_DESTAGING] < cfg.destage_depth and S[S_CACHE + CA.CH_DIRTY] != NONE \
            and S[S_FREE_JOBS] > 0:
        old = now - W.CL[S[S_CACHE + CA.CH_DIRTY], CA.CL_DIRTY_T] >= cfg.flush_age_ns
        if not (S[S_FLUSHING] or old):
            break
        ncand = _destage_one(cfg, W, now, ncand)
    head = S[S_CACHE + CA.CH_DIRTY]
    if head != NONE and S[S_TIMER] == NONE:
        t = W.CL[head, CA.CL_DIRTY_T] + cfg.flush_age_ns
        if t > now:
            S[S_TIMER] = t
            _push(W, t, HK_TIMER, 0)
    return ncand


@njit(forceinline=True, nrt=False)
def _cache_write(cfg, W, g, now):
    """Write request ``g``'s data goes into the write-back cache: the request is done (the
    caller finishes it)."""
    slot = g & (W.RQ.shape[0] - 1)
    _store(cfg, W, g, True, now)
    W.RQ[slot, RQ_O_START] = now
    W.RQ[slot, RQ_O_HIT] = 1
    _mark_lost(cfg, W, g)


@njit(forceinline=True, nrt=False)
def _write_in(cfg, W, g, now, ncand):
    """Write request ``g``'s data is at the controller. Returns (ncand, True if it goes to the
    drives, the request if it is done now, else NONE), as ``_read``."""
    if cfg.cache_lines > 0 and cfg.write_back:
        S = W.S
        total, _m, _c = _scan_lines(cfg, S, W.RQ, W.LN, W.CL, W.HT, g, False)
        if total <= cfg.cache_lines:
            fin = NONE
            if S[S_WW_HEAD] == NONE and _fits(cfg, S, W.RQ, W.LN, W.CL, W.HT, g):
                _cache_write(cfg, W, g, now)
                fin = g
            else:  # wait, in order, for room
                RQ = W.RQ
                cap = RQ.shape[0] - 1
                RQ[g & cap, RQ_CNEXT] = NONE
                if S[S_WW_TAIL] == NONE:
                    S[S_WW_HEAD] = g
                else:
                    RQ[S[S_WW_TAIL] & cap, RQ_CNEXT] = g
                S[S_WW_TAIL] = g
            return _destage(cfg, W, now, ncand), False, fin
    return ncand, True, NONE


@njit(nrt=False)
def _retry_writes(cfg, W, now):
    """Writes waiting for cache room take it, in order, while there is enough."""
    S = W.S
    RQ = W.RQ
    while S[S_WW_HEAD] != NONE:
        g = S[S_WW_HEAD]
        if not _fits(cfg, S, RQ, W.LN, W.CL, W.HT, g):
            return
        S[S_WW_HEAD] = RQ[g & (RQ.shape[0] - 1), RQ_CNEXT]
        if S[S_WW_HEAD] == NONE:
            S[S_WW_TAIL] = NONE
        _cache_write(cfg, W, g, now)
        _finish(cfg, W, g, now)


@njit(nrt=False)
def _job_done(cfg, W, j, now, ncand):
    """Job ``j``'s drive work is complete."""
    CL = W.CL
    JB = W.JB
    S = W.S
    lun = JB[j, J_LUN]
    k0, k1 = _lines_of(cfg, JB[j, J_LBA], JB[j, J_N])
    for k in range(k0, k1 + 1):
        line = CA.find(W.HT, (lun << CA.KEY_SHIFT) | k)
        if line == NONE or CL[line, CA.CL_JOB] != j:
            continue
        if JB[j, J_KIND] == JOB_DESTAGE:
            CA.release_destaged(CL, S, S_CACHE, line, now)
        else:
            CL[line, CA.CL_VALID] |= _bits(cfg, k, JB[j, J_LBA], JB[j, J_N])
            CA.release_filled(CL, S, S_CACHE, line, now)
    W.JFREE[S[S_FREE_JOBS]] = j
    S[S_FREE_JOBS] += 1
    _retry_writes(cfg, W, now)  # lines were cleaned, or filled (clean and evictable)
    if JB[j, J_KIND] == JOB_DESTAGE:
        S[S_DESTAGING] -= 1
    else:  # the reads waiting on this LUN look again, in order, one event each
        LN = W.LN
        g = LN[lun, U_WHEAD]
        LN[lun, U_WHEAD] = NONE
        LN[lun, U_WTAIL] = NONE
        while g != NONE:
            _push(W, now, HK_RETRY, g)
            g = W.RQ[g & (W.RQ.shape[0] - 1), RQ_CNEXT]
    return _destage(cfg, W, now, ncand)
