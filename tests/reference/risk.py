"""Plain-Python reference of ``kernels/risk.py``, written from the model's definitions rather
than from the kernel's loop.

The kernel sweeps one sorted timeline and keeps running state: exposed counts per set,
domains that wake and sleep, a list of dangerous drives, a URE hazard it adds to and takes
from, and URE losses found by comparing a running sum with the next Poisson point. Here
nothing runs: every quantity is a function of time evaluated from the whole list of
failures:

- ``exposed(t)``: the slots whose window [failure, failure + window) holds t;
- a failure loses data when a set containing it has exactly its tolerance of *other* slots
  exposed at that instant, counting failures at the same instant in slot order;
- the URE rate u(t) is the sum, over the sets at their tolerance, of their exposed members'
  rebuild rates (shared out over the sets a slot is in); its integral U(t) is piecewise
  linear, and the URE losses are the points of a unit Poisson process below U(period), each
  placed at U^-1(point) (inversion, not a running comparison);
- the compensator Lambda(t) = U(t) + the sum over drives of the integral of their failure
  hazard over the times before t at which they are dangerous, added up drive by drive along
  each drive's own service lives (renewals);
- the compensator up to the first loss is Lambda at the first loss instant, the earlier of
  the first failure loss and the first URE loss.

The random draws are the kernel's (SplitMix64, the same per-trial states), so the two agree
trial by trial; the sampler (``failures``) is the one part that must follow the kernel's order
of draws.
"""

from __future__ import annotations

import bisect
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
           ure_h: list[float] | None = None, urng: Rng | None = None,
           lat_h: list[float] | None = None, scrub_h: float = 0.0
           ) -> tuple[int, float, float]:
    """(loss events, compensator, compensator up to the first loss) of one trial.

    ``ure_h``: per slot, the URE hazard per hour of its rebuild's reads. ``lat_h`` and
    ``scrub_h``: per slot, the latent defects its rebuild meets per hour of its window per
    hour since the last scrub, scrubs every ``scrub_h`` hours (0: none) at a phase that is
    the first draw of ``urng``. A slot's shares are its figures over the number of sets it is
    in; a set with exactly its tolerance exposed meets its exposed members' shares."""
    slots = sorted({x for s in sets for x in s} | {x for _t, x in events})
    n_slots = 1 + max(slots, default=0)
    ure = list(ure_h or [0.0] * n_slots)
    lat = list(lat_h or [0.0] * n_slots)
    n_in = [sum(1 for s in sets if x in s) for x in range(n_slots)]
    phase = urng.uniform() * scrub_h if scrub_h > 0 and urng is not None else 0.0

    # each failure: when, which slot, until when exposed, the URE rate of its rebuild
    fails = []
    for t, x in sorted(events):  # same instant: slot order
        age = (t - phase) % scrub_h if scrub_h > 0 else 0.0
        rate = (ure[x] + lat[x] * age) / n_in[x] if n_in[x] else 0.0
        fails.append((t, x, t + win_h[x], rate))

    def exposed(t: float) -> dict[int, float]:
        """The slots exposed at t, with their rebuild's URE share."""
        return {x: r for (a, x, b, r) in fails if a <= t < b}

    def at_tolerance(exp: dict[int, float]) -> list[int]:
        return [k for k, s in enumerate(sets) if sum(1 for y in s if y in exp) == tol[k]]

    # failure losses: the other slots exposed at the instant, in the (time, slot) order
    fail_losses = []
    for i, (t, x, _end, _r) in enumerate(fails):
        before = {y for (a, y, b, _r2) in fails[:i] if a <= t < b}
        if any(x in s and sum(1 for y in s if y in before) == tol[k]
               for k, s in enumerate(sets)):
            fail_losses.append(t)

    # the state is constant between these instants
    cuts = sorted({0.0, period_h} | {a for (a, *_r) in fails}
                  | {b for (_a, _x, b, _r) in fails if b < period_h})
    pieces = []  # (start, end, URE rate, dangerous drives)
    for a, b in zip(cuts, cuts[1:], strict=False):
        exp = exposed((a + b) / 2)
        crit = at_tolerance(exp)
        u = sum(exp[y] for k in crit for y in sets[k] if y in exp)
        danger = {y for k in crit for y in sets[k] if y not in exp}
        pieces.append((a, b, u, danger))

    def ure_integral(t: float) -> float:
        """U(t): the URE hazard from 0 to t."""
        return sum(u * (min(b, t) - a) for a, b, u, _d in pieces if a < t)

    # URE losses by inversion: Poisson points below U(period), placed where U reaches them
    ure_times = []
    if urng is not None and ure_integral(period_h) > 0:
        knots = [0.0]  # U at each cut
        for a, b, u, _d in pieces:
            knots.append(knots[-1] + u * (b - a))
        point = -math.log(1.0 - urng.uniform())
        while point <= knots[-1]:
            i = bisect.bisect_left(knots, point) - 1  # the piece where U reaches the point
            a, _b, u, _d = pieces[i]
            ure_times.append(a + (point - knots[i]) / u)
            point += -math.log(1.0 - urng.uniform())

    # each drive's service lives: from a renewal (0, or a window's end) to its next failure
    lives: dict[int, list[tuple[float, float]]] = {}
    for y in slots:
        start = 0.0
        lives[y] = []
        for (a, x, b, _r) in fails:
            if x == y:
                lives[y].append((start, a))
                start = b
        if start < period_h:
            lives[y].append((start, period_h))

    def fail_integral(t: float) -> float:
        """The dangerous drives' failure hazard from 0 to t, drive by drive."""
        total = 0.0
        for y, spans in lives.items():
            for born, died in spans:
                for a, b, _u, danger in pieces:
                    lo, hi = max(a, born), min(b, died, t)
                    if y in danger and hi > lo:
                        total += (cum_hazard(hi - born, scale_h, shape)
                                  - cum_hazard(lo - born, scale_h, shape))
        return total

    n_loss = len(fail_losses) + len(ure_times)
    lam = fail_integral(period_h) + ure_integral(period_h)
    first = min(fail_losses + ure_times, default=None)
    lam_first = lam if first is None else fail_integral(first) + ure_integral(first)
    return n_loss, lam, lam_first
