"""``blocklab risk``: the probability of data loss over a period and the mean time to data loss
of an array, from its rebuild windows (measured by replay under load) and a drive failure model,
by Monte Carlo (issue 5, deliverable 6).

**Inputs.** Each RUN is a run folder of ``blocklab replay ... --fail DRIVE@SECONDS`` (its
array is ``meta.json``'s ``array.config``; its windows come from the ``rebuild-windows`` query),
a folder of run folders (a sweep's output: every run in it), or an array configuration (TOML)
with ``--window-s``. A run's **rebuild window** per group is the *longest* failure-to-rebuild-end
time among that group's failures (the conservative choice: a data loss needs overlapping
windows, and the slowest rebuild, the one that competed hardest with the load or with another
rebuild, is the one that leaves room for them; with one failure per run, as usual, longest and
mean are the same); groups of the run with no failure take the longest window of the run.
``--window-s`` replaces every measured window. Failures of hot spares are ignored (a member
whose spare failed during its rebuild has its window until the rebuild onto the next spare
ends). A run without events (no failure), or whose rebuild did not end within the run (no hot
spare left, a pool out of preservation capacity, a later failure that lost data, or the spare
it wrote onto failed, and stopped it), has no measured window: it needs ``--window-s``.

**Model** (``kernels/risk.py``). The array's redundancy sets come from its member maps
(``pipeline/model/array.py``): a RAID group's members (tolerance 1 for RAID-5, 2 for RAID-6,
n - 1 for an n-way RAID-1, 0 for RAID-0 and JBOD), each mirrored pair of a RAID-10 (tolerance
1), each private group of a storage pool, and each D-stripe of a dynamic disk pool (RAID-6 8+2
pieces on ten of the pool's drives, tolerance 2), as the pool's straw2 placement put them. Hot
spares are not simulated: one is assumed to be there at every failure (replenished between
failures).
Every member drive starts new; it fails after a lifetime drawn from the failure model, is
exposed for its group's window, and is replaced by a new drive (age 0) at the end of the
window. Data is lost when a failure finds, in a set containing it, as many members exposed as
the set tolerates: in a pool, tolerance + 1 overlapping failures lose data only if they share a
D-stripe, which the kernel checks against the pool's actual D-stripes; the share of drive
triples that share one is reported (``ddp_triple_share``). Failures of different drives are
independent; correlated failures and the time to notice a failure are not modelled.

**Unrecoverable read errors** (``--ure RATE`` per bit read, or ``--ure catalog``: each group's
drive's datasheet figure, ``ure_per_bit`` in the drive catalog with its source; off without
``--ure``). While a set is at its tolerance (a RAID-5 group rebuilding one drive, a RAID-6
group or a D-stripe rebuilding two), its rebuilds read the survivors with no redundancy left,
and a URE there loses data. A rebuild is taken to read its group's **rebuild read bytes**
evenly over its window: measured in the run (the rebuild's read operations in
``drive_ops.parquet``, ``replay --drive-ops``; else the bytes rebuilt in ``events.parquet``
times the layout's reads per rebuilt byte: width - 1 for RAID-5, width - 2 for RAID-6, 1 for a
mirror, 8 for a D-stripe), or for an array TOML the members' capacity times that. The kernel
integrates the URE hazard (bits read x -ln(1 - p)) with the failure hazard, so a RAID-5
rebuild of B bits meets a URE with probability 1 - (1 - p)^B (``p_ure_per_rebuild``, printed
beside the results), and a RAID-6's only when a second failure overlaps it (reads during the
overlap). A drive in several sets (a pool's D-stripes) shares its reads out evenly among
them.

**Latent defects and scrubbing** (``--scrub-interval S``, with ``--ure``; off without it, and
then the results are as before). The URE rate then has two parts. What a read meets anyway:
the rebuild's own reads, as above. And latent defects: errors that form on the drives as the
workload uses them and stay unseen until something reads that sector, the part a scrub finds
and repairs (through the redundancy) before a failure. Following Elerath and Pecht (IEEE
Trans. Computers 58(3), 2009; Elerath, "Hard-disk drives: the good, the bad, and the ugly",
CACM 52(6), 2009), defects form on each drive at the read-error rate times the bytes the
workload reads: rho = 8 R -ln(1 - p) per day for ``--workload-read-per-day R`` bytes
(default 2.7e11, the read rate Elerath reports for a field population of 63,000 drives, 7.3e17
bytes in five months), and persist until the next scrub. Scrubs run every S hours; a failure
is independent of their schedule, so the time since the last scrub, A, is uniform in [0, S)
(the mean latent error time of periodic scrubbing, S / 2, Schroeder, Damouras and Gill,
FAST 2010). A rebuild that reads B bytes of members of C bytes each meets the defects of B / C
drives: L A with L = (B / C) rho. At a given A, no URE in a rebuild: exp(-8 B h) exp(-L A),
h = -ln(1 - p); over A: **P = 1 - (1 - p)^(8 B) (1 - exp(-L S)) / (L S)** (printed beside
the results; the expected UREs are 8 B h + L S / 2, which the Markov MTTDL uses). In the
Monte Carlo each trial draws the scrub phase, and a failure's rebuild meets L A spread over
its window. Assumed: defects form uniformly over each drive's capacity and at a constant rate
(Bairavasundaram et al., SIGMETRICS 2007, and Schroeder et al. find them bursty and
correlated: this is their mean), the workload's reads do not find them (only scrubs do), the
defects counted are those present at the failure (not the window's own), and every drive has
been in service for at least S.

**Failure model.** ``--afr F``: exponential lifetimes whose probability of failing within a
year (8760 power-on hours, the year of drive datasheets' AFR) is F: rate -ln(1 - F) / 8760 per
hour. Or Weibull ``--weibull-shape K --weibull-scale-hours ETA`` (shape 1 is the exponential of
mean ETA; below 1 infant mortality, above 1 wear-out). Default: AFR 2 %, the middle of the
annual replacement rates of 2 to 4 % that Schroeder and Gibson report for field populations
("Disk failures in the real world", FAST 2007), several times datasheet AFRs.

**Estimates.** ``--trials`` periods of ``--years`` are simulated (seeded: the same seed gives
the same answer). Per run:

- ``p_loss``: the probability of at least one data-loss event over the period, from the
  trials' compensators up to their first loss (``kernels/risk.py``; the mean over trials, with a
  normal 95 % interval), and, for comparison, the share of trials that did lose data with its
  Wilson interval (``p_loss_counted``);
- ``expected_losses``: the expected number of data-loss events over the period (the mean
  compensator, normal 95 % interval), and the losses counted (``losses_counted``, with
  Garwood's exact Poisson interval);
- ``mttdl_years``: the mean time to data loss as the simulated time over the expected number of
  loss events (trials x period / (trials x expected_losses), i.e. period / expected_losses), its
  interval the period over the ends of expected_losses' interval; ``mttdl_counted_years``: the
  simulated array-years over the losses counted, interval from Garwood's. For Weibull lifetimes
  the loss rate changes with age, and this is the mean over the period.
- For exponential lifetimes, two analytic values: ``mttdl_markov_years``, the classical Markov
  MTTDL (Patterson, Gibson and Katz, SIGMOD 1988, for RAID-5; Chen, Lee, Gibson, Katz and
  Patterson, ACM Computing Surveys 26(2), 1994, for P+Q): MTTF^(r+1) / (n (n-1) ... (n-r)
  MTTR^r) per set of n drives tolerating r, combined over the sets (loss rates add); and
  ``mttdl_independent_years``, the stationary loss rate of the model simulated here (every
  failed drive rebuilt on its own, as the replay engine does): each slot is exposed with
  probability p = W / (MTTF + W), independently, so data is lost at rate (n - r) lambda
  C(n, r) p^r (1 - p)^(n - r) per set. The two agree for tolerance 1; for tolerance r the
  classical formula assumes one repair at a time and is r! times lower (half, for RAID-6).
  For a pool both are scaled by ``ddp_triple_share`` (an approximation).

The normal intervals need enough trials that reach a set's tolerance (``trials_at_tolerance``);
with fewer than 30 the interval is widened to include the counted estimate's exact interval and
a note says so.

**Modules.** The model (failure model, redundancy sets, analytic values, URE and scrubbing) is
``pipeline/risk_model.py``; reading the inputs (run folders, array configurations) is
``pipeline/risk_inputs.py``; this module runs the Monte Carlo and forms the estimates.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from blocklab.kernels import risk as K
from blocklab.traces.errors import BlocklabError

from .model.config import DDP_WIDTH
from .risk_inputs import Input, load_inputs, member_bytes
from .risk_model import (
    DEFAULT_AFR,
    FIELD_READ_PER_DAY,
    HOURS_PER_YEAR,
    FailureModel,
    failure_model,
    markov_mttdl_h,
    p_ure,
    p_ure_scrubbed,
    parse_scrub,
    parse_ure,
    redundancy_sets,
    ure_rates,
)

Z95 = statistics.NormalDist().inv_cdf(0.975)
MIN_AT_TOLERANCE = 30  # below this many trials reaching a tolerance, widen the interval


# ---------------------------------------------------------------------------------------------
# intervals


#: Trials per call of the kernel, at most (``assess``: a signal waits for the call to end).
MAX_CHUNK = 1_000_000


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for a proportion k / n (Wilson, JASA 22, 1927)."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / d
    half = z / d * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # at k = 0 (k = n) the lower (upper) end is exactly 0 (1); rounding would leave 1e-17
    return (0.0 if k == 0 else max(0.0, mid - half)), (1.0 if k == n else min(1.0, mid + half))


def _poisson_cdf(k: int, mu: float) -> float:
    """P(X <= k) for X Poisson(mu), summed in log space."""
    if k < 0:
        return 0.0
    if mu <= 0:
        return 1.0
    terms = [j * math.log(mu) - mu - math.lgamma(j + 1) for j in range(k + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * math.fsum(math.exp(t - top) for t in terms))


def _chi2_wh(p: float, df: float) -> float:
    """The p quantile of chi-square with df degrees of freedom, Wilson and Hilferty's cube
    approximation (PNAS 17, 1931): relative error well under 1e-4 for df in the thousands."""
    z = statistics.NormalDist().inv_cdf(p)
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def garwood(k: int, alpha: float = 0.05) -> tuple[float, float]:
    """Garwood's exact interval for the mean of a Poisson count k (Biometrika 28, 1936): the
    means whose tail beyond k is alpha / 2. Bisection on the Poisson sum for k <= 1000, the
    chi-square form (Wilson-Hilferty) above."""
    if k > 1000:
        return _chi2_wh(alpha / 2, 2 * k) / 2, _chi2_wh(1 - alpha / 2, 2 * k + 2) / 2

    def solve(f: Callable[[float], float], target: float, lo: float, hi: float) -> float:
        # f decreases in mu
        for _ in range(200):
            mid = (lo + hi) / 2
            if f(mid) > target:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-12 * max(1.0, hi):
                break
        return (lo + hi) / 2

    hi = k + 10 + 10 * math.sqrt(k + 1)
    upper = solve(lambda m: _poisson_cdf(k, m), alpha / 2, 0.0, hi)
    lower = 0.0 if k == 0 else solve(lambda m: _poisson_cdf(k - 1, m), 1 - alpha / 2, 0.0, hi)
    return lower, upper


def _mean_ci(s: float, s2: float, n: int) -> tuple[float, float, float]:
    """Mean and normal 95 % interval of n values from their sum and sum of squares."""
    m = float(s) / n
    var = max(0.0, float(s2) / n - m * m) * n / max(1, n - 1)
    half = Z95 * math.sqrt(var / n)
    return m, max(0.0, m - half), m + half


# ---------------------------------------------------------------------------------------------
# the assessment


@dataclasses.dataclass
class RiskResult:
    """One array's figures (module docstring); times in years unless named otherwise."""

    run: str
    array: list[str]
    drives: int
    sets: int
    windows_s: dict[str, float]
    window_source: str
    measured: list[dict[str, Any]]
    ddp_triple_share: dict[str, float]
    failure_model: str
    afr: float | None
    weibull_shape: float
    weibull_scale_hours: float
    years: float
    trials: int
    seed: int
    p_loss: float
    p_loss_ci: tuple[float, float]
    expected_losses: float
    expected_losses_ci: tuple[float, float]
    mttdl_years: float | None
    mttdl_ci_years: tuple[float | None, float | None]
    trials_at_tolerance: int
    losses_counted: int
    trials_lost: int
    p_loss_counted: float
    p_loss_counted_ci: tuple[float, float]
    mttdl_counted_years: float | None
    mttdl_counted_ci_years: tuple[float | None, float | None]
    mttdl_markov_years: float | None
    mttdl_independent_years: float | None
    failures_simulated: int
    lifetimes_simulated: int
    elapsed_s: float
    lifetimes_per_s: float
    notes: list[str]
    # unrecoverable read errors (--ure): per group the rate per bit read, the bytes one
    # rebuild read, and the analytic P(a rebuild meets a URE) = 1 - (1 - p)^bits
    ure_per_bit: dict[str, float] | None = None
    ure_source: str = "not modelled (--ure)"
    rebuild_read_bytes: dict[str, float] = dataclasses.field(default_factory=dict)
    read_source: str = ""
    p_ure_per_rebuild: dict[str, float] = dataclasses.field(default_factory=dict)
    # scrubbing (--scrub-interval): the interval in hours, the workload's bytes read per
    # drive per day, and per group the mean latent defects a rebuild meets (L S / 2)
    scrub_interval_h: float | None = None
    workload_read_per_day_bytes: float | None = None
    latent_defects_per_rebuild: dict[str, float] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _years(h: float) -> float | None:
    return None if not math.isfinite(h) else h / HOURS_PER_YEAR


def assess(inp: Input, model: FailureModel, years: float, trials: int, seed: int,
           progress: Callable[[int, int], None] | None = None,
           ure: float | str | None = None, scrub_h: float = 0.0,
           read_per_day: float = FIELD_READ_PER_DAY) -> RiskResult:
    """Simulate one array (module docstring); ``scrub_h`` 0: no scrubbing modelled."""
    sets = redundancy_sets(inp.arr)
    win_h = [inp.windows_s[g] / 3600.0 for g in sets.group]
    period_h = years * HOURS_PER_YEAR
    rates: dict[str, float] | None = None
    ure_source = "not modelled (--ure)"
    ure_h = None
    p_slot = None
    p_group: dict[str, float] = {}
    if ure is not None:
        rates, ure_source = ure_rates(inp.arr, ure)
        p_group = {g: p_ure(rates[g], inp.read_bytes.get(g, 0.0)) for g in rates}
        # a slot's rebuild reads its group's bytes over its window: URE hazard per hour
        ure_h = np.array([8.0 * inp.read_bytes.get(g, 0.0) * -math.log1p(-rates[g]) / w
                          if w > 0 else 0.0 for g, w in zip(sets.group, win_h, strict=True)])
        p_slot = [-math.log1p(-p_group[g]) for g in sets.group]  # expected UREs per rebuild
    lat_h = None
    latent: dict[str, float] = {}
    if scrub_h > 0 and rates is not None:
        # latent defects a rebuild meets per hour of scrub age: B / C drives' worth of them
        member = member_bytes(inp.arr)
        lat_g = {g: (inp.read_bytes.get(g, 0.0) / member[g] if member.get(g) else 0.0)
                 * 8.0 * read_per_day / 24.0 * -math.log1p(-rates[g]) for g in rates}
        latent = {g: v * scrub_h / 2 for g, v in lat_g.items()}
        p_group = {g: p_ure_scrubbed(rates[g], inp.read_bytes.get(g, 0.0), lat_g[g], scrub_h)
                   for g in rates}
        lat_h = np.array([lat_g[g] / w if w > 0 else 0.0
                          for g, w in zip(sets.group, win_h, strict=True)])
        # the mean UREs per rebuild: its reads' and the latent defects' (L S / 2)
        p_slot = [-math.log1p(-p_ure(rates[g], inp.read_bytes.get(g, 0.0))) + latent[g]
                  for g in sets.group]
    st = K.Structure(np.array(win_h, dtype=np.float64), sets.sets, sets.tol, sets.domain,
                     ure_h, lat_h, scrub_h if lat_h is not None else 0.0)
    # room for a trial's failures: the expected count per slot and a wide margin (the kernel
    # says when a trial needs more, and the buffers grow)
    mean_life = model.scale_h * math.gamma(1 + 1 / model.shape)
    per_slot = period_h / (mean_life + min(win_h, default=0.0))
    cap = int(st.slots * (per_slot + 6 * math.sqrt(per_slot) + 4)) + 64
    runner = K.Runner(st, period_h, model.scale_h, model.shape, seed, cap)
    # a hundredth of the trials at a time (progress), at most a million (about a second
    # here): a signal is taken between calls of the kernel, so 1e11 trials in chunks of 1e9
    # ran on for minutes after SIGTERM. Each trial's draws are its own and the sums run in
    # trial order, so the chunks change no figure
    chunk = max(1000, min(trials // 100, MAX_CHUNK))
    t0 = time.perf_counter()
    done = 0
    while done < trials:
        n = min(chunk, trials - done)
        runner.run(done, n)
        done += n
        if progress is not None:
            progress(done, trials)
    elapsed = time.perf_counter() - t0
    o = runner.out
    n = trials
    notes: list[str] = []
    p, p_lo, p_hi = _mean_ci(o[K.O_LAMF], o[K.O_LAMF2], n)
    el, el_lo, el_hi = _mean_ci(o[K.O_LAM], o[K.O_LAM2], n)
    losses = int(o[K.O_LOSSES])
    lost = int(o[K.O_TRIALS_LOST])
    pc_lo, pc_hi = wilson(lost, n)
    g_lo, g_hi = garwood(losses)
    at_tol = int(o[K.O_TRIALS_CRIT])
    if at_tol < MIN_AT_TOLERANCE:
        notes.append(f"only {at_tol} of {n:,} trials reached a set's tolerance: the intervals "
                     "include the counted estimates' exact ones; raise --trials for a "
                     "narrower estimate")
        p_lo, p_hi = min(p_lo, pc_lo), max(p_hi, pc_hi)
        el_lo, el_hi = min(el_lo, g_lo / n), max(el_hi, g_hi / n)
    p, p_lo, p_hi = min(p, 1.0), min(p_lo, 1.0), min(p_hi, 1.0)

    def inv(x: float) -> float | None:
        return _years(period_h / x) if x > 0 else None

    def inv_count(x: float) -> float | None:
        return _years(n * period_h / x) if x > 0 else None

    markov = indep = None
    if model.exponential:
        c, i = markov_mttdl_h(sets, win_h, model.scale_h, p_slot)
        markov, indep = _years(c), _years(i)
    return RiskResult(
        run=inp.name, array=sets.describe, drives=len(sets.drives), sets=len(sets.sets),
        windows_s=dict(inp.windows_s), window_source=inp.window_source,
        measured=inp.measured, ddp_triple_share=sets.ddp_share,
        failure_model=model.describe(), afr=model.afr, weibull_shape=model.shape,
        weibull_scale_hours=model.scale_h, years=years, trials=n, seed=seed,
        p_loss=p, p_loss_ci=(p_lo, p_hi),
        expected_losses=el, expected_losses_ci=(el_lo, el_hi),
        mttdl_years=inv(el), mttdl_ci_years=(inv(el_hi), inv(el_lo)),
        trials_at_tolerance=at_tol, losses_counted=losses, trials_lost=lost,
        p_loss_counted=lost / n, p_loss_counted_ci=(pc_lo, pc_hi),
        mttdl_counted_years=inv_count(losses),
        mttdl_counted_ci_years=(inv_count(g_hi), inv_count(g_lo)),
        mttdl_markov_years=markov, mttdl_independent_years=indep,
        failures_simulated=int(o[K.O_FAILURES]), lifetimes_simulated=int(o[K.O_LIFETIMES]),
        elapsed_s=elapsed,
        lifetimes_per_s=float(o[K.O_LIFETIMES]) / elapsed if elapsed > 0 else 0.0,
        notes=notes, ure_per_bit=rates, ure_source=ure_source,
        rebuild_read_bytes=dict(inp.read_bytes), read_source=inp.read_source,
        p_ure_per_rebuild=p_group,
        scrub_interval_h=scrub_h if lat_h is not None else None,
        workload_read_per_day_bytes=read_per_day if lat_h is not None else None,
        latent_defects_per_rebuild=latent)


def risk(paths: list[str], window_s: float | None = None, afr: float | None = None,
         weibull_shape: float | None = None, weibull_scale_hours: float | None = None,
         years: float = 5.0, trials: int = 1_000_000, seed: int = 0,
         progress: Callable[[str, int, int], None] | None = None,
         ure: str | None = None, scrub_interval: str | None = None,
         workload_read_per_day: str | None = None) -> list[RiskResult]:
    """``blocklab risk``: one result per array that ``paths`` name."""
    model = failure_model(afr, weibull_shape, weibull_scale_hours)
    ure_rate = parse_ure(ure)
    scrub_h, read_per_day = parse_scrub(scrub_interval, workload_read_per_day, ure_rate)
    if not (math.isfinite(years) and years > 0):
        raise BlocklabError(f"--years: must be positive, found {years:g}")
    if trials < 1:
        raise BlocklabError(f"--trials: at least 1, found {trials}")
    if not 0 <= seed < 1 << 64:
        raise BlocklabError(f"--seed: a whole number from 0 to 2^64 - 1, found {seed}")
    inputs = load_inputs(paths, window_s)
    out = []
    for inp in inputs:
        def step(done: int, total: int, name: str = inp.name) -> None:
            if progress is not None:
                progress(name, done, total)

        out.append(assess(inp, model, years, trials, seed, step, ure_rate, scrub_h,
                          read_per_day))
    return out


# ---------------------------------------------------------------------------------------------
# make bench


def bench_line() -> str:
    """One line for ``make bench``: drive-lifetimes per second of the kernel on eight RAID-6
    (4+2) groups and on a 60-drive pool (AFR 2 %, 5 years), and of the plain-Python reference
    (tests/reference/risk.py) on the RAID-6 groups, measured in the same run."""
    import importlib.util
    import sys

    from .model import placement as PL

    model = failure_model(DEFAULT_AFR, None, None)
    period_h = 5 * HOURS_PER_YEAR
    raid6 = ([list(range(6 * g, 6 * g + 6)) for g in range(8)], [2] * 8, list(range(8)), 10.0)
    # 60 x 300 GB drives in 512 MiB pieces, preservation 3: the ddp-vs-raid6 pool
    pool = PL.place(60, 558, 3, DDP_WIDTH)
    ddp = ([[int(d) for d in row] for row in pool.members], [2] * len(pool.members),
           [0] * len(pool.members), 2.0)

    def speed(sets: list[list[int]], tol: list[int], dom: list[int], w_h: float,
              trials: int) -> float:
        slots = 1 + max(x for s in sets for x in s)
        st = K.Structure(np.full(slots, w_h), sets, tol, dom)
        r = K.Runner(st, period_h, model.scale_h, model.shape, 1, 64 + 4 * slots)
        r.run(0, 100)  # compiled (or loaded from the cache) before the clock starts
        before = r.out[K.O_LIFETIMES]
        t = time.perf_counter()
        r.run(100, trials)
        return float(r.out[K.O_LIFETIMES] - before) / (time.perf_counter() - t)

    k6 = speed(*raid6, trials=2_000_000)
    kp = speed(*ddp, trials=2_000_000)
    line = (f"  risk Monte Carlo       : {k6 / 1e6:.1f} M drive-lifetimes/s on 8 x RAID-6 "
            f"4+2, {kp / 1e6:.1f} M/s on a 60-drive pool (AFR 2 %, 5 years)")
    path = Path(__file__).resolve().parents[1] / "tests" / "reference" / "risk.py"
    spec = importlib.util.spec_from_file_location("ref_risk", path)
    if spec is None or spec.loader is None or not path.exists():
        return line + "; no plain-Python reference here"
    ref = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = ref
    spec.loader.exec_module(ref)
    sets, tol, _dom, w_h = raid6
    lives = 0
    t = time.perf_counter()
    for trial in range(3000):
        ev, n = ref.failures(1, trial, 48, [w_h] * 48, period_h, model.scale_h, model.shape)
        ref.losses(ev, period_h, [w_h] * 48, sets, tol, model.scale_h, model.shape)
        lives += n
    py = lives / (time.perf_counter() - t)
    return line + f"; {k6 / py:,.0f} x the plain-Python reference ({py / 1e3:,.0f} k/s)"
