"""Plain-Python reference of ``kernels/risk.py``: the same random draws, and the loss condition
and compensator computed by brute force from the whole list of failures (no running counts, no
domains, no sorted timeline): for every failure, which slots are exposed at that instant; for
every interval between two instants at which anything changes, which drives are dangerous.
"""

from __future__ import annotations

import math

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix(z: int) -> int:
    z &= MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


class Rng:
    """SplitMix64 as kernels/synth.py runs it."""

    def __init__(self, state: int):
        self.state = state & MASK

    def uniform(self) -> float:
        self.state = (self.state + GAMMA) & MASK
        return (mix(self.state) >> 11) * 2.0 ** -53


def trial_rng(seed: int, trial: int) -> Rng:
    return Rng(mix(mix(seed) ^ mix(trial + 1)))


def lifetime(rng: Rng, scale_h: float, shape: float) -> float:
    e = -math.log(1.0 - rng.uniform())
    return scale_h * e if shape == 1.0 else scale_h * e ** (1.0 / shape)


def cum_hazard(age_h: float, scale_h: float, shape: float) -> float:
    return age_h / scale_h if shape == 1.0 else (age_h / scale_h) ** shape


def failures(seed: int, trial: int, slots: int, win_h: list[float], period_h: float,
             scale_h: float, shape: float) -> tuple[list[tuple[float, int]], int]:
    """One trial's failures (time, slot) and the lifetimes drawn."""
    rng = trial_rng(seed, trial)
    out = []
    lives = 0
    for x in range(slots):
        t = 0.0
        while True:
            t += lifetime(rng, scale_h, shape)
            lives += 1
            if t >= period_h:
                break
            out.append((t, x))
            t += win_h[x]
            if t >= period_h:
                break
    return out, lives


def ure_rng(seed: int, trial: int) -> Rng:
    """The trial's URE generator, as kernels/risk.py seeds it (seed ^ URE_SALT)."""
    return trial_rng(seed ^ 0x5552452D4C534521, trial)


def losses(events: list[tuple[float, int]], period_h: float, win_h: list[float],
           sets: list[list[int]], tol: list[int], scale_h: float, shape: float,
           ure_h: list[float] | None = None, urng: Rng | None = None
           ) -> tuple[int, float, float]:
    """(loss events, compensator, compensator up to the first loss) of one trial.

    ``ure_h``: per slot, the URE hazard per hour of its rebuild's reads; a set with exactly
    its tolerance exposed meets each exposed member's share (its hazard over the number of
    sets it is in), and a URE loss happens where the trial's cumulative URE hazard crosses
    the points of a unit-rate Poisson process drawn from ``urng``."""
    ev = sorted(events)  # (time, slot): failures at the same instant in slot order
    slots_n = 1 + max([x for s in sets for x in s] + [x for _t, x in ev], default=0)
    ure = list(ure_h or [0.0] * slots_n)
    n_in = [sum(1 for s in sets if x in s) for x in range(len(ure))]
    share = [ure[x] / n_in[x] if n_in[x] else 0.0 for x in range(len(ure))]

    def exposed_before(i: int) -> set[int]:
        """Slots exposed when failure i happens: failed earlier in the order, window open."""
        t, _x = ev[i]
        return {y for (tj, y) in ev[:i] if tj <= t < tj + win_h[y]}

    def exposed_at(t: float) -> set[int]:
        return {y for (tj, y) in ev if tj <= t < tj + win_h[y]}

    def dangerous(y: int, exp: set[int]) -> bool:
        return y not in exp and any(y in s and len(exp & set(s)) == tol[k]
                                    for k, s in enumerate(sets))

    def ure_rate(exp: set[int]) -> float:
        return sum(share[x] for k, s in enumerate(sets) if len(exp & set(s)) == tol[k]
                   for x in exp & set(s))

    n_loss = 0
    first_loss = None
    for i, (t, x) in enumerate(ev):
        if dangerous(x, exposed_before(i)):
            n_loss += 1
            if first_loss is None:
                first_loss = t
    # instants at which anything changes
    cuts = {0.0, period_h}
    for t, y in ev:
        cuts.add(t)
        if t + win_h[y] < period_h:
            cuts.add(t + win_h[y])
    cuts = sorted(c for c in cuts if c <= period_h)
    slots = {x for s in sets for x in s}

    def renewed(y: int, t: float) -> float:
        """When slot y's drive at time t went into service."""
        starts = [tj + win_h[yj] for (tj, yj) in ev if yj == y and tj + win_h[yj] <= t]
        return max(starts, default=0.0)

    def fail_hazard(a: float, b: float, exp: set[int], mid: float) -> float:
        h = 0.0
        for y in slots:
            if dangerous(y, exp):
                r = renewed(y, mid)
                h += cum_hazard(b - r, scale_h, shape) - cum_hazard(a - r, scale_h, shape)
        return h

    # URE losses on the path: crossings of the cumulative URE hazard
    ure_first = None
    ure_first_lam = None
    acc = 0.0
    nxt = None
    lam = 0.0
    for a, b in zip(cuts, cuts[1:], strict=False):
        mid = (a + b) / 2
        exp = exposed_at(mid)
        u = ure_rate(exp)
        fh = fail_hazard(a, b, exp, mid)
        if u > 0.0:
            assert urng is not None
            dh = u * (b - a)
            if nxt is None:
                nxt = -math.log(1.0 - urng.uniform())
            if acc + dh >= nxt:
                if ure_first is None:
                    tau = a + (nxt - acc) / u
                    ure_first = tau
                    ure_first_lam = lam + fail_hazard(a, tau, exp, mid) + (nxt - acc)
                while acc + dh >= nxt:
                    n_loss += 1
                    nxt += -math.log(1.0 - urng.uniform())
            acc += dh
            lam += dh
        lam += fh
    # the compensator up to the first loss of either kind
    lam_first = None
    lam2 = 0.0
    if ure_first is not None and (first_loss is None or ure_first <= first_loss):
        lam_first = ure_first_lam
    elif first_loss is not None:
        for a, b in zip(cuts, cuts[1:], strict=False):
            if a >= first_loss:
                break
            mid = (a + b) / 2
            exp = exposed_at(mid)
            lam2 += ure_rate(exp) * (b - a) + fail_hazard(a, b, exp, mid)
        lam_first = lam2
    if lam_first is None:
        lam_first = lam
    return n_loss, lam, lam_first
