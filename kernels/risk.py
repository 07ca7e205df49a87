"""Monte Carlo of drive failures and rebuild windows: data-loss events of an array over a period
(issue 5, deliverable 6).

An array is ``slots`` (drive positions) and redundancy ``sets`` of slots (a RAID group's
members, a RAID-10 mirror pair, a private group of a storage pool, a D-stripe of a dynamic
disk pool), each with the number of members it can lose (its tolerance). A slot may be in many
sets (a pool drive is in hundreds of D-stripes).

One **trial** is one period of ``period_h`` hours. Every slot starts with a new drive; a drive
fails at the end of a lifetime drawn from a Weibull distribution of shape ``k`` and scale
``eta`` hours (shape 1 is the exponential of mean ``eta``); the slot is then *exposed* for its
rebuild window ``win_h`` (hours) and holds a new drive, of age 0, from the end of the window
(a window of 0: the drive is replaced at once and never exposed).
A failure **loses data** when, in a set that contains the failing slot, exactly ``tolerance``
other members are exposed at that instant (the set goes beyond its tolerance: one data-loss
event, however many sets it hits). Exposure is half-open, [failure, failure + window): a drive
that fails at the very instant another's window ends does not overlap it. Events at the same
instant are taken in the order (time, window ends before failures, slot).

Each trial yields two estimates of its losses:

- the **count** of data-loss events on the simulated path (the crude estimator);
- the **compensator** (conditional estimator): the integral, over the period, of the failure
  hazard of every drive that is *dangerous* (up, and a member of some set that has exactly
  ``tolerance`` members exposed), that is the sum of H(age at the end) - H(age at the start)
  over the intervals a drive is dangerous, H(a) = (a / eta)^k the cumulative hazard. The
  losses are a counting process whose intensity is exactly that hazard, so the compensator has
  the same expectation as the count (Aalen, "Nonparametric inference for a family of counting
  processes", Ann. Statist. 6, 1978; the Doob-Meyer decomposition) and a far smaller variance
  when losses are rare: it needs only the path to reach a set's tolerance, not to exceed it.
  Integrated up to the first loss of the path (or the period's end), it estimates the
  probability of at least one loss.

**Latent defects and scrubbing** (optional): a failing slot's rebuild meets, besides the UREs
its reads meet anyway (``ure_w``: a rate per hour of its window), the latent defects its
survivors gathered since the array's last scrub, ``lat_w`` x (age of that scrub) per hour of
the window: scrubs run every ``scrub_h`` hours at a phase drawn per trial (the first draw of
the trial's URE generator, uniform in [0, scrub_h)), so the age at a failure is uniform in
[0, scrub_h) and a rebuild meets lat_w x W x scrub_h / 2 latent defects on average. The defects
are the ones there at the failure: the window's own scrubs (no redundancy to repair with) and
defects that appear during it are not counted. ``scrub_h`` 0: none (no draw).

Random numbers: SplitMix64 (``kernels/synth.py``); trial ``i`` starts from its own state,
mix(mix(seed) ^ mix(i + 1)) with SplitMix64's finaliser, so a trial's draws do not depend on
how the trials are cut into calls, and the plain-Python reference reproduces them exactly.
Lifetimes by inversion: eta * (-ln(1 - U))^(1/k).
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import njit
from .synth import _MIX1, _MIX2, _S27, _S30, _S31, uniform

# Sums a call of ``simulate`` adds to its ``out`` array (float64; counts are whole numbers).
O_LOSSES = 0  # data-loss events counted on the paths
O_TRIALS_LOST = 1  # trials with at least one data-loss event
O_LAM = 2  # sum of the trials' compensators over the whole period
O_LAM2 = 3  # sum of their squares
O_LAMF = 4  # sum of the compensators up to the first loss (or the period's end)
O_LAMF2 = 5  # sum of their squares
O_TRIALS_CRIT = 6  # trials whose compensator is positive (some set reached its tolerance)
O_FAILURES = 7  # drive failures
O_LIFETIMES = 8  # lifetimes drawn (one per drive put in service, failing or not)
O_TRIALS = 9  # trials run
O_N = 10

# Scalars of the state ``st`` (int64):
ST_NDL, ST_NCRIT, ST_NEX = 0, 1, 2  # dangerous slots listed, sets at tolerance, exposed
ST_N = 3
# Scalars of the float state ``fst``:
F_URE = 0  # URE hazard per hour: the sets at their tolerance, their exposed members' reads
F_N = 1
#: Salt of the URE generator: trial i's URE draws come from trial_state(seed ^ URE_SALT, i),
#: apart from its lifetimes, so that a rate of 0 leaves every other draw as it was.
URE_SALT = 0x5552452D4C534521


@njit(forceinline=True, nrt=False)
def mix(z):
    """SplitMix64's finaliser on a uint64."""
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


@njit(forceinline=True, nrt=False)
def trial_state(seed, trial):
    """The generator state trial ``trial`` starts from."""
    return mix(mix(np.uint64(seed)) ^ mix(np.uint64(trial + 1)))


@njit(forceinline=True, nrt=False)
def lifetime(rng, scale_h, shape):
    """A Weibull(shape, scale) lifetime in hours; shape 1 skips the power (exponential)."""
    e = -math.log(1.0 - uniform(rng, 0))
    if shape == 1.0:
        return scale_h * e
    return scale_h * e ** (1.0 / shape)


@njit(forceinline=True, nrt=False)
def cum_hazard(age_h, scale_h, shape):
    """H(age) = (age / scale)^shape, the expected failures of a drive by that age."""
    x = age_h / scale_h
    if shape == 1.0:
        return x
    return x ** shape


@njit(nrt=False)
def draw_lifetimes(rng, seed, scale_h, shape, out):
    """Fill ``out`` with lifetimes from the generator of trial 0 (``rng``: one uint64 of
    scratch), for tests of the sampler."""
    rng[0] = trial_state(seed, 0)
    for i in range(len(out)):
        out[i] = lifetime(rng, scale_h, shape)


@njit(forceinline=True, nrt=False)
def _set_critical(s, delta, set_ptr, set_mem, danger, dlist, dpos, st, up, ure_w, set_ure,
                  fst):
    """Set ``s`` reaches (delta 1) or leaves (delta -1) its tolerance: its members' danger
    counts change, and the list of slots with a positive count follows. Its URE hazard rate
    (the exposed members' rebuild reads, ``ure_w``: per slot, the rate of its current
    rebuild) is added to or taken from ``fst[F_URE]``
    (while a set is at its tolerance its exposed members do not change: one more failing or
    one coming back takes it off)."""
    st[ST_NCRIT] += delta
    u = 0.0
    for j in range(set_ptr[s], set_ptr[s + 1]):
        y = set_mem[j]
        if up[y] == 0:
            u += ure_w[y]
        danger[y] += delta
        if delta > 0 and danger[y] == 1:
            dpos[y] = st[ST_NDL]
            dlist[st[ST_NDL]] = y
            st[ST_NDL] += 1
        elif delta < 0 and danger[y] == 0:
            last = dlist[st[ST_NDL] - 1]
            dlist[dpos[y]] = last
            dpos[last] = dpos[y]
            dpos[y] = -1
            st[ST_NDL] -= 1
    if delta > 0:
        set_ure[s] = u
        fst[F_URE] += u
    else:
        fst[F_URE] -= set_ure[s]
        set_ure[s] = 0.0
        if st[ST_NCRIT] == 0 or fst[F_URE] < 0.0:
            fst[F_URE] = 0.0  # no rounding residue left behind


@njit(forceinline=True, nrt=False)
def _count(x, delta, slot_ptr, slot_sets, set_ptr, set_mem, set_tol, cnt, danger, dlist, dpos,
           st, up, ure_w, set_ure, fst):
    """Add ``delta`` to the exposed counts of slot ``x``'s sets, following each set across its
    tolerance."""
    for j in range(slot_ptr[x], slot_ptr[x + 1]):
        s = slot_sets[j]
        old = cnt[s]
        cnt[s] = old + delta
        if old == set_tol[s]:
            _set_critical(s, -1, set_ptr, set_mem, danger, dlist, dpos, st, up, ure_w, set_ure,
                          fst)
        elif old + delta == set_tol[s]:
            _set_critical(s, 1, set_ptr, set_mem, danger, dlist, dpos, st, up, ure_w, set_ure,
                          fst)


@njit(forceinline=True, nrt=False)
def _expose(x, delta, slot_dom, dom_tol, dc, active, ex_list, ex_pos, slot_ptr, slot_sets,
            set_ptr, set_mem, set_tol, cnt, danger, dlist, dpos, st, up, ure_w, set_ure, fst):
    """Slot ``x`` fails (delta 1) or comes back (delta -1).

    The sets' counts are kept only while their domain (the slots of sets that share members:
    a RAID group, a whole pool) has at least its smallest tolerance exposed: below that no
    set of it can be at its tolerance. A pool drive is in hundreds of D-stripes; this way a
    lone failure in a pool touches none of them."""
    d = slot_dom[x]
    if delta > 0:
        ex_pos[x] = st[ST_NEX]
        ex_list[st[ST_NEX]] = x
        st[ST_NEX] += 1
        dc[d] += 1
        if active[d]:
            _count(x, 1, slot_ptr, slot_sets, set_ptr, set_mem, set_tol, cnt, danger, dlist,
                   dpos, st, up, ure_w, set_ure, fst)
        elif dc[d] >= dom_tol[d]:  # the domain wakes: count every exposed slot of it
            active[d] = 1
            for k in range(st[ST_NEX]):
                y = ex_list[k]
                if slot_dom[y] == d:
                    _count(y, 1, slot_ptr, slot_sets, set_ptr, set_mem, set_tol, cnt, danger,
                           dlist, dpos, st, up, ure_w, set_ure, fst)
        return
    last = ex_list[st[ST_NEX] - 1]
    ex_list[ex_pos[x]] = last
    ex_pos[last] = ex_pos[x]
    ex_pos[x] = -1
    st[ST_NEX] -= 1
    dc[d] -= 1
    if not active[d]:
        return
    _count(x, -1, slot_ptr, slot_sets, set_ptr, set_mem, set_tol, cnt, danger, dlist, dpos,
           st, up, ure_w, set_ure, fst)
    if dc[d] < dom_tol[d]:  # the domain sleeps: its counts go back to 0
        active[d] = 0
        for k in range(st[ST_NEX]):
            y = ex_list[k]
            if slot_dom[y] == d:
                _count(y, -1, slot_ptr, slot_sets, set_ptr, set_mem, set_tol, cnt, danger,
                       dlist, dpos, st, up, ure_w, set_ure, fst)


@njit(nrt=False)
def init_state(dom_tol, set_ptr, set_mem, set_tol, dc, active, ex_pos, cnt, danger, dlist,
               dpos, st, up, ure_w, set_ure, fst):
    """The state at the start of every trial: no slot exposed, so the domains of tolerance 0
    are awake and their sets of tolerance 0 (RAID-0, JBOD) at their tolerance from the
    start."""
    cnt[:] = 0
    danger[:] = 0
    dpos[:] = -1
    ex_pos[:] = -1
    dc[:] = 0
    st[:] = 0
    set_ure[:] = 0.0
    fst[:] = 0.0
    for d in range(len(dom_tol)):
        active[d] = 1 if dom_tol[d] == 0 else 0
    for s in range(len(set_tol)):
        if set_tol[s] == 0:
            _set_critical(s, 1, set_ptr, set_mem, danger, dlist, dpos, st, up, ure_w, set_ure,
                          fst)


@njit(forceinline=True, nrt=False)
def _before(ta, ka, tb, kb):
    """Timeline order: time, then window ends (kind bit 0) before failures, then slot."""
    if ta != tb:
        return ta < tb
    if (ka & 1) != (kb & 1):
        return (ka & 1) < (kb & 1)
    return (ka >> 1) < (kb >> 1)


@njit(forceinline=True, nrt=False)
def _danger_hazard(a, b, st, dlist, up, renew, scale_h, shape):
    """The failure hazard, integrated from ``a`` to ``b`` hours, of the dangerous drives (up,
    in a set at its tolerance): the losses a failure can cause over that stretch."""
    h = 0.0
    for j in range(st[ST_NDL]):
        y = dlist[j]
        if up[y]:
            h += cum_hazard(b - renew[y], scale_h, shape) - cum_hazard(a - renew[y], scale_h,
                                                                       shape)
    return h


@njit(forceinline=True, nrt=False)
def scrub_age(t, phase, scrub_h):
    """Hours since the last scrub at ``t``, scrubs at phase + k scrub_h; 0 without scrubs."""
    if scrub_h <= 0.0:
        return 0.0
    a = t - phase
    return a - scrub_h * math.floor(a / scrub_h)


@njit(nrt=False)
def sweep(ev_t, ev_s, n_ev, period_h, scale_h, shape, S, W, tl_t, tl_k, urng, res):
    """One trial's losses from its failures (``ev_t[:n_ev]`` hours, ``ev_s`` slots; a slot's
    failures at least its window apart). ``S`` is ``Structure.arrays()``, ``W`` the state
    ``Runner`` keeps, ``urng`` the trial's URE generator. Writes res[0] losses, res[1]
    compensator, res[2] compensator up to the first loss. Leaves the state as ``init_state``
    made it.

    Unrecoverable read errors: while a set is at its tolerance, its exposed members' rebuilds
    read the survivors with no redundancy left, and a URE there loses data. Their hazard (per
    hour: ``fst[F_URE]``) is integrated with the failure hazard into the compensator; on the
    path, URE losses happen where the cumulative URE hazard of the trial crosses the points of
    a unit-rate Poisson process (exponential gaps drawn from ``urng``), so a set at tolerance
    for a while reading B bits meets no URE with probability exp(-B h) = (1 - p)^B. With
    scrubs (``S``'s scrub_h > 0) a failing slot's rebuild rate adds its latent defects, lat_w
    x the scrub age at the failure (module docstring); the scrub phase is the first draw of
    ``urng``."""
    (win_h, slot_ptr, slot_sets, slot_dom, dom_tol, set_ptr, set_mem, set_tol, ure_w, lat_w,
     scrub) = S
    (cnt, danger, dlist, dpos, st, up, renew, dc, active, ex_list, ex_pos, set_ure, fst,
     ure_now) = W
    scrub_h = scrub[0]
    phase = uniform(urng, 0) * scrub_h if scrub_h > 0.0 else 0.0
    n = 0
    for i in range(n_ev):
        x = ev_s[i]
        tl_t[n] = ev_t[i]
        tl_k[n] = 2 * x + 1
        n += 1
        end = ev_t[i] + win_h[x]
        if win_h[x] > 0.0 and end < period_h:
            tl_t[n] = end
            tl_k[n] = 2 * x
            n += 1
    for i in range(1, n):  # insertion sort: a trial has few events
        t = tl_t[i]
        k = tl_k[i]
        j = i - 1
        while j >= 0 and _before(t, k, tl_t[j], tl_k[j]):
            tl_t[j + 1] = tl_t[j]
            tl_k[j + 1] = tl_k[j]
            j -= 1
        tl_t[j + 1] = t
        tl_k[j + 1] = k
    losses = 0
    lam = 0.0
    lam_first = -1.0
    t_prev = 0.0
    ure_acc = 0.0  # the trial's cumulative URE hazard
    ure_next = -1.0  # where the next URE loss happens on that scale (drawn when first needed)
    for i in range(n + 1):
        t = tl_t[i] if i < n else period_h
        if t > t_prev:
            fail_h = _danger_hazard(t_prev, t, st, dlist, up, renew, scale_h, shape)
            u = fst[F_URE]
            if u > 0.0:
                dh = u * (t - t_prev)
                if ure_next < 0.0:
                    ure_next = -math.log(1.0 - uniform(urng, 0))
                if ure_acc + dh >= ure_next:
                    if lam_first < 0.0:
                        # the first loss is this URE, at tau inside the interval
                        tau = t_prev + (ure_next - ure_acc) / u
                        lam_first = (lam + _danger_hazard(t_prev, tau, st, dlist, up, renew,
                                                          scale_h, shape)
                                     + (ure_next - ure_acc))
                    while ure_acc + dh >= ure_next:
                        losses += 1
                        ure_next += -math.log(1.0 - uniform(urng, 0))
                ure_acc += dh
                lam += dh
            lam += fail_h
        t_prev = t
        if i == n:
            break
        x = tl_k[i] >> 1
        if tl_k[i] & 1:  # a failure
            if danger[x] > 0:
                losses += 1
                if lam_first < 0.0:
                    lam_first = lam
            if win_h[x] > 0.0:
                up[x] = 0
                # this rebuild's URE rate: its reads, and the latent defects since the scrub
                ure_now[x] = ure_w[x] + lat_w[x] * scrub_age(t, phase, scrub_h)
                _expose(x, 1, slot_dom, dom_tol, dc, active, ex_list, ex_pos, slot_ptr,
                        slot_sets, set_ptr, set_mem, set_tol, cnt, danger, dlist, dpos, st, up,
                        ure_now, set_ure, fst)
            else:  # no window: replaced at once, never exposed
                renew[x] = t
        else:  # the window ends: a new drive
            up[x] = 1
            renew[x] = t
            _expose(x, -1, slot_dom, dom_tol, dc, active, ex_list, ex_pos, slot_ptr,
                    slot_sets, set_ptr, set_mem, set_tol, cnt, danger, dlist, dpos, st, up,
                    ure_now, set_ure, fst)
    # back to the initial state for the next trial
    while st[ST_NEX] > 0:
        x = ex_list[st[ST_NEX] - 1]
        up[x] = 1
        _expose(x, -1, slot_dom, dom_tol, dc, active, ex_list, ex_pos, slot_ptr, slot_sets,
                set_ptr, set_mem, set_tol, cnt, danger, dlist, dpos, st, up, ure_now, set_ure,
                fst)
    for x in range(len(renew)):
        renew[x] = 0.0
    res[0] = losses
    res[1] = lam
    res[2] = lam if lam_first < 0.0 else lam_first


@njit(nrt=False)
def simulate(first_trial, trials, seed, period_h, scale_h, shape, S, W, ev_t, ev_s, tl_t, tl_k,
             rng, urng, res, out):
    """Run trials ``first_trial`` .. ``first_trial + trials - 1`` and add their sums to
    ``out`` (O_*). Returns -1 when done, or the trial whose failures overflowed ``ev_t``
    (nothing of it added): grow the buffers and continue from there."""
    win_h = S[0]
    cap = len(ev_t)
    slots = len(win_h)
    for trial in range(first_trial, first_trial + trials):
        rng[0] = trial_state(seed, trial)
        n_ev = 0
        lives = 0
        for x in range(slots):
            t = 0.0
            while True:
                t += lifetime(rng, scale_h, shape)
                lives += 1
                if t >= period_h:
                    break
                if n_ev == cap:
                    return trial
                ev_t[n_ev] = t
                ev_s[n_ev] = x
                n_ev += 1
                t += win_h[x]
                if t >= period_h:
                    break
        urng[0] = trial_state(seed ^ np.uint64(URE_SALT), trial)
        sweep(ev_t, ev_s, n_ev, period_h, scale_h, shape, S, W, tl_t, tl_k, urng, res)
        out[O_LOSSES] += res[0]
        if res[0] > 0:
            out[O_TRIALS_LOST] += 1
        out[O_LAM] += res[1]
        out[O_LAM2] += res[1] * res[1]
        out[O_LAMF] += res[2]
        out[O_LAMF2] += res[2] * res[2]
        if res[1] > 0.0:
            out[O_TRIALS_CRIT] += 1
        out[O_FAILURES] += n_ev
        out[O_LIFETIMES] += lives
        out[O_TRIALS] += 1
    return -1


class Structure:
    """An array for the kernels: per slot its window (hours) and the sets it is in (CSR);
    per set its members (CSR) and tolerance; domains (sets that share slots, each slot in
    one) with their smallest tolerance. ``domains`` gives each set's domain; by default the
    connected groups of sets that share slots."""

    def __init__(self, win_h: np.ndarray, sets: list[list[int]], tol: list[int],
                 domains: list[int] | None = None, ure_h: np.ndarray | None = None,
                 lat_h: np.ndarray | None = None, scrub_h: float = 0.0):
        slots = len(win_h)
        self.win_h = np.ascontiguousarray(win_h, dtype=np.float64)
        # URE hazard per hour of a slot's rebuild (bits it reads per hour x the hazard per
        # bit), shared out over the sets the slot is in: a set at its tolerance meets the
        # share of the reads that are of its own stripes
        ure = np.zeros(slots) if ure_h is None else np.asarray(ure_h, dtype=np.float64)
        n_in = np.zeros(slots)
        for s_ in sets:
            for x in s_:
                n_in[x] += 1
        self.ure_w = np.where(n_in > 0, ure / np.maximum(n_in, 1), 0.0)
        # latent defects (scrubbing): a slot's rebuild meets lat_h x (hours since the last
        # scrub) defects per hour of its window, shared out the same way
        if not (math.isfinite(scrub_h) and scrub_h >= 0):
            raise ValueError("the scrub interval must be 0 (none) or positive")
        lat = np.zeros(slots) if lat_h is None else np.asarray(lat_h, dtype=np.float64)
        self.lat_w = np.where(n_in > 0, lat / np.maximum(n_in, 1), 0.0)
        self.scrub = np.array([float(scrub_h)])
        self.set_ptr = np.zeros(len(sets) + 1, np.int64)
        self.set_ptr[1:] = np.cumsum([len(s) for s in sets])
        self.set_mem = np.array([x for s in sets for x in s], dtype=np.int64)
        self.set_tol = np.array(tol, dtype=np.int64)
        by_slot: list[list[int]] = [[] for _ in range(slots)]
        for i, s in enumerate(sets):
            for x in s:
                by_slot[x].append(i)
        self.slot_ptr = np.zeros(slots + 1, np.int64)
        self.slot_ptr[1:] = np.cumsum([len(b) for b in by_slot])
        self.slot_sets = np.array([i for b in by_slot for i in b], dtype=np.int64)
        if domains is None:
            domains = _components(slots, sets)
        n_dom = max(domains, default=-1) + 1
        self.slot_dom = np.zeros(slots, np.int64)  # a slot in no set: domain 0, never counted
        self.dom_tol = np.full(max(n_dom, 1), np.iinfo(np.int64).max, np.int64)
        for i, s in enumerate(sets):
            d = domains[i]
            self.dom_tol[d] = min(self.dom_tol[d], tol[i])
            for x in s:
                self.slot_dom[x] = d

    @property
    def slots(self) -> int:
        return len(self.win_h)

    def arrays(self) -> tuple[np.ndarray, ...]:
        return (self.win_h, self.slot_ptr, self.slot_sets, self.slot_dom, self.dom_tol,
                self.set_ptr, self.set_mem, self.set_tol, self.ure_w, self.lat_w, self.scrub)


def _components(slots: int, sets: list[list[int]]) -> list[int]:
    """Each set's connected group (sets sharing a slot are connected), numbered from 0."""
    parent = list(range(slots))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for s in sets:
        for x in s[1:]:
            a, b = root(s[0]), root(x)
            if a != b:
                parent[b] = a
    ids: dict[int, int] = {}
    return [ids.setdefault(root(s[0]), len(ids)) if s else ids.setdefault(-1 - i, len(ids))
            for i, s in enumerate(sets)]


class Runner:
    """Scratch buffers and state for ``simulate`` over one structure; ``run`` adds trials."""

    def __init__(self, s: Structure, period_h: float, scale_h: float, shape: float,
                 seed: int, cap: int):
        if not (period_h > 0 and scale_h > 0 and shape > 0):
            raise ValueError("period, scale and shape must be positive")
        self.s = s
        self.period_h, self.scale_h, self.shape = float(period_h), float(scale_h), float(shape)
        self.seed = np.uint64(int(seed) & ((1 << 64) - 1))
        n = s.slots
        nd = len(s.dom_tol)
        self.W = (np.zeros(len(s.set_tol), np.int64),  # cnt
                  np.zeros(n, np.int64),  # danger
                  np.zeros(n, np.int64),  # dlist
                  np.zeros(n, np.int64),  # dpos
                  np.zeros(ST_N, np.int64),  # st
                  np.ones(n, np.uint8),  # up
                  np.zeros(n, np.float64),  # renew
                  np.zeros(nd, np.int64),  # dc
                  np.zeros(nd, np.uint8),  # active
                  np.zeros(n, np.int64),  # ex_list
                  np.zeros(n, np.int64),  # ex_pos
                  np.zeros(len(s.set_tol), np.float64),  # set_ure
                  np.zeros(F_N, np.float64),  # fst
                  s.ure_w.copy())  # ure_now: the URE rate of each slot's current rebuild
        (cnt, danger, dlist, dpos, st, up, _renew, dc, active, _ex, ex_pos, set_ure,
         fst, ure_now) = self.W
        init_state(s.dom_tol, s.set_ptr, s.set_mem, s.set_tol, dc, active, ex_pos, cnt, danger,
                   dlist, dpos, st, up, ure_now, set_ure, fst)
        self.res = np.zeros(3, np.float64)
        self.rng = np.zeros(1, np.uint64)
        self.urng = np.zeros(1, np.uint64)
        self.out = np.zeros(O_N, np.float64)
        self._alloc(max(int(cap), 16))

    def _alloc(self, cap: int) -> None:
        self.ev_t = np.zeros(cap, np.float64)
        self.ev_s = np.zeros(cap, np.int64)
        self.tl_t = np.zeros(2 * cap, np.float64)
        self.tl_k = np.zeros(2 * cap, np.int64)

    def run(self, first_trial: int, trials: int) -> None:
        """Add trials ``first_trial`` .. ``first_trial + trials - 1`` to ``out``."""
        end = first_trial + trials
        S = self.s.arrays()
        while first_trial < end:
            stop = simulate(first_trial, end - first_trial, self.seed, self.period_h,
                            self.scale_h, self.shape, S, self.W, self.ev_t, self.ev_s,
                            self.tl_t, self.tl_k, self.rng, self.urng, self.res, self.out)
            if stop < 0:
                return
            # a trial had more failures than the buffers hold: grow them, redo that trial
            self._alloc(len(self.ev_t) * 4)
            first_trial = int(stop)
