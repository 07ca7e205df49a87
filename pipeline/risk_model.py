"""The probability model of ``blocklab risk`` (pipeline/risk.py's module docstring describes
it): the drive failure model, an array's redundancy sets, the analytic MTTDL values, and the
unrecoverable-read-error and scrubbing figures, with their option parsers.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from blocklab.kernels.layout import raid as R
from blocklab.traces.errors import BlocklabError

from .model import catalog as C
from .model.array import ArrayModel
from .model.config import DDP_WIDTH, GroupConfig

HOURS_PER_YEAR = 8760.0  # a year of power-on hours, as drive datasheets count AFR
DEFAULT_AFR = 0.02  # Schroeder and Gibson, FAST 2007: field replacement rates of 2 to 4 %


# ---------------------------------------------------------------------------------------------
# the failure model


@dataclasses.dataclass(frozen=True)
class FailureModel:
    """Weibull lifetimes (shape 1: exponential); ``afr`` when given as an AFR."""

    scale_h: float
    shape: float
    afr: float | None = None

    @property
    def exponential(self) -> bool:
        return self.shape == 1.0

    def describe(self) -> str:
        if self.afr is not None:
            return f"exponential, AFR {self.afr:.4g} (MTTF {self.scale_h:,.0f} h)"
        return f"Weibull shape {self.shape:g}, scale {self.scale_h:,.6g} h"


def failure_model(afr: float | None, shape: float | None, scale_h: float | None
                  ) -> FailureModel:
    """The model the options give (module docstring); a one-line error for bad values."""
    if afr is not None and (shape is not None or scale_h is not None):
        raise BlocklabError("--afr and --weibull-shape/--weibull-scale-hours: give one failure "
                            "model")
    if (shape is None) != (scale_h is None):
        raise BlocklabError("--weibull-shape and --weibull-scale-hours go together: give both")
    if shape is not None and scale_h is not None:
        if not (math.isfinite(shape) and shape > 0):
            raise BlocklabError(f"--weibull-shape: must be positive, found {shape:g}")
        if not (math.isfinite(scale_h) and scale_h > 0):
            raise BlocklabError(f"--weibull-scale-hours: must be positive, found {scale_h:g}")
        return FailureModel(scale_h=float(scale_h), shape=float(shape))
    if afr is None:
        afr = DEFAULT_AFR
    if not (0 < afr < 1):
        raise BlocklabError(f"--afr: an annual failure rate is a fraction in (0, 1), found "
                            f"{afr:g}")
    rate_h = -math.log1p(-afr) / HOURS_PER_YEAR
    return FailureModel(scale_h=1.0 / rate_h, shape=1.0, afr=float(afr))


# ---------------------------------------------------------------------------------------------
# the array's redundancy sets


@dataclasses.dataclass
class Sets:
    """The redundancy sets of an array, over its member drives (slots)."""

    drives: list[int]  # slot -> array drive number
    group: list[str]  # slot -> its group's name
    sets: list[list[int]]  # set -> slots
    tol: list[int]  # set -> members it can lose
    domain: list[int]  # set -> domain (a RAID group's set, a mirror pair, a whole pool)
    ddp_share: dict[str, float]  # pool -> share of drive triples that share a D-stripe
    describe: list[str]  # one phrase per config group


def redundancy_sets(arr: ArrayModel) -> Sets:
    """The sets of ``arr``'s member maps (module docstring)."""
    cfg = arr.cfg
    slot: dict[int, int] = {}
    sets: list[list[int]] = []
    tol: list[int] = []
    domain: list[int] = []
    pools: dict[int, int] = {}  # config group -> its domain
    n_dom = [0]

    def new_domain() -> int:
        n_dom[0] += 1
        return n_dom[0] - 1

    def slots_of(drives: list[int]) -> list[int]:
        return [slot.setdefault(d, len(slot)) for d in drives]

    def add(members: list[int], t: int, dom: int | None = None) -> None:
        sets.append(slots_of(members))
        tol.append(t)
        domain.append(new_domain() if dom is None else dom)

    for r in range(len(arr.MP)):
        geom = int(arr.MP["group"][r])
        kind, width = int(arr.GR["kind"][geom]), int(arr.GR["width"][geom])
        members = [int(x) for x in arr.MP["members"]["drive"][r, :width]]
        gi = int(arr.row_group[r])
        if int(arr.row_dstripe[r]) >= 0:  # a D-stripe of a dynamic disk pool
            if gi not in pools:
                pools[gi] = new_domain()
            add(members, int(R.tolerance(R.KIND_RAID6, DDP_WIDTH)), pools[gi])
        elif kind == R.KIND_RAID10:  # mirrored pairs (0, 1), (2, 3), ...
            for k in range(0, width, 2):
                add(members[k:k + 2], 1)
        else:
            add(members, int(R.tolerance(kind, width)))
    drives = sorted(slot, key=lambda d: slot[d])
    share = {}
    for gi, (pl, _first, _pool_drives) in arr.pools.items():
        share[cfg.groups[gi].name] = ddp_triple_share(pl.members, cfg.groups[gi].width)
    return Sets(drives=drives, group=[arr.d_group[d] for d in drives], sets=sets, tol=tol,
                domain=domain, ddp_share=share, describe=[_describe(g) for g in cfg.groups])


def _describe(g: GroupConfig) -> str:
    spares = f" + {g.hot_spares} spare{'s' if g.hot_spares != 1 else ''}" if g.hot_spares else ""
    if g.layout == "ddp":
        return f"{g.name}: ddp of {g.width} (8+2 D-stripes, preservation {g.preservation})"
    if g.layout == "pool":
        return (f"{g.name}: pool of {g.width} in private {g.raid} groups of {g.group_width}"
                f"{spares}")
    count = f"{g.count} x " if g.count > 1 else ""
    return f"{g.name}: {count}{g.layout} of {g.width}{spares}"


def ddp_triple_share(members: np.ndarray, drives: int) -> float:
    """The share of the pool's drive triples {a, b, c} that lie together in some D-stripe
    (``members``: D-stripes x 10 drive indices): the probability that three overlapping
    failures, of drives taken at random, lose data."""
    n = int(drives)
    if n < 3:
        return 0.0
    total = n * (n - 1) * (n - 2) // 6
    seen = np.zeros(total, dtype=bool)
    ms = np.sort(np.asarray(members, dtype=np.int64), axis=1)
    w = ms.shape[1]
    combos = np.array([(i, j, k) for i in range(w) for j in range(i + 1, w)
                       for k in range(j + 1, w)], dtype=np.int64)
    for lo in range(0, len(ms), 4096):
        block = ms[lo:lo + 4096]
        a, b, c = block[:, combos[:, 0]], block[:, combos[:, 1]], block[:, combos[:, 2]]
        # the combinatorial rank of a < b < c
        seen[(c * (c - 1) * (c - 2) // 6 + b * (b - 1) // 2 + a).ravel()] = True
    return float(seen.sum()) / total


# ---------------------------------------------------------------------------------------------
# analytic values


def markov_mttdl_h(sets: Sets, windows_h: list[float], mttf_h: float,
                   ure_slot: list[float] | None = None) -> tuple[float, float]:
    """(classical, independent-rebuild) MTTDL in hours of the sets, exponential lifetimes
    (module docstring); loss rates of the sets add. ``ure_slot``: per slot, the expected
    number of UREs its rebuild meets, U = bits x -ln(1 - p) (the probability of at least one
    is 1 - exp(-U) = 1 - (1 - p)^bits; the Monte Carlo counts every URE met without
    redundancy as a loss event, so its MTTDL is set against U); then a set of tolerance r also
    loses data when r failures overlap and the last rebuild meets a URE: falling(n, r)
    lambda^r W^(r-1) U added to the classical rate (n lambda U for RAID-5, the URE term of
    Elerath and Pecht, IEEE Trans. Computers 58(3), 2009, with U for its probability), and
    (n - r + 1) lambda C(n, r - 1) p^(r-1) U to the independent one."""
    classic = 0.0
    indep = 0.0
    lam = 1.0 / mttf_h
    domains: dict[int, list[int]] = {}
    for i in range(len(sets.sets)):
        domains.setdefault(sets.domain[i], []).append(i)
    for members in domains.values():
        s0 = sets.sets[members[0]]
        r = sets.tol[members[0]]
        if len(members) > 1:  # a pool: its drives, the share of triples that lose data
            slots = sorted({x for i in members for x in sets.sets[i]})
            share = sets.ddp_share.get(sets.group[slots[0]], 1.0)
        else:
            slots, share = s0, 1.0
        n = len(slots)
        w = max(windows_h[x] for x in slots)
        if n <= r:
            continue
        falling = math.prod(n - i for i in range(r + 1))
        if w > 0 or r == 0:
            classic += share * falling * lam ** (r + 1) * w ** r
        p = w / (mttf_h + w)
        indep += share * (n - r) * lam * math.comb(n, r) * p ** r * (1 - p) ** (n - r)
        if ure_slot is not None and r >= 1:
            pu = max(ure_slot[x] for x in slots)
            classic += share * math.prod(n - i for i in range(r)) * lam ** r * w ** (r - 1) * pu
            indep += (share * (n - r + 1) * lam * math.comb(n, r - 1) * p ** (r - 1)
                      * (1 - p) ** (n - r + 1) * pu)
    return (math.inf if classic == 0 else 1 / classic, math.inf if indep == 0 else 1 / indep)


# ---------------------------------------------------------------------------------------------
# unrecoverable read errors

#: The largest URE rate accepted: datasheets give 1e-14 (desktop) to 1e-17 (SSDs) per bit.
MAX_URE = 1e-10


def parse_ure(text: str | None) -> float | str | None:
    """``--ure``: None (not modelled), ``catalog`` or a rate per bit read in (0, 1e-10]."""
    if text is None:
        return None
    if text.strip().lower() == "catalog":
        return "catalog"
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (0 < v <= MAX_URE):
        raise BlocklabError(f"--ure {text}: expected catalog or a rate per bit read in (0, "
                            f"{MAX_URE:g}] (datasheets: 1e-14 to 1e-17)")
    return v


def ure_rates(arr: ArrayModel, ure: float | str) -> tuple[dict[str, float], str]:
    """Each group's URE rate per bit read, and where it comes from."""
    if not isinstance(ure, str):
        return {g.name: float(ure) for g in arr.cfg.groups}, "--ure"
    out: dict[str, float] = {}
    src: list[str] = []
    for g in arr.cfg.groups:
        name = g.drive.catalog
        fig = C.ure_per_bit(name) if name else None
        if fig is None:
            what = name or g.drive.disksim or "an inline drive"
            raise BlocklabError(f"--ure catalog: the drive of group {g.name} ({what}) has no "
                                "ure_per_bit in the catalog: give --ure RATE")
        out[g.name] = fig[0]
        src.append(f"{name}: {fig[0]:g} per bit, {fig[1]}")
    return out, "catalog: " + "; ".join(dict.fromkeys(src))


#: Bytes a drive's workload reads per day, the default of --workload-read-per-day: Elerath,
#: "Hard-disk drives: the good, the bad, and the ugly", CACM 52(6), 2009: a study of 63,000
#: drives read 7.3e17 bytes in five months, about 2.7e11 bytes per drive per day.
FIELD_READ_PER_DAY = 2.7e11


def parse_scrub(interval: str | None, read_per_day: str | None, ure: float | str | None
                ) -> tuple[float, float]:
    """``--scrub-interval`` (a duration: hours, days) and ``--workload-read-per-day`` (a size):
    (scrub interval in hours, 0 for none; bytes read per drive per day)."""
    from blocklab.traces.synth import parse_size

    from .iostat import parse_interval

    rate = FIELD_READ_PER_DAY
    if read_per_day is not None:
        rate = float(parse_size(read_per_day, "--workload-read-per-day"))
        if rate <= 0:
            raise BlocklabError(f"--workload-read-per-day {read_per_day}: expected a size "
                                "above 0 (bytes a drive's workload reads per day, e.g. 270GB)")
    if interval is None:
        if read_per_day is not None:
            raise BlocklabError("--workload-read-per-day: goes with --scrub-interval (it sets "
                                "how fast latent defects form between scrubs)")
        return 0.0, rate
    hours = parse_interval(interval, "--scrub-interval") / 3600.0
    if ure is None:
        raise BlocklabError(f"--scrub-interval {interval}: needs --ure (latent defects form "
                            "at the URE rate)")
    return hours, rate


def p_ure_scrubbed(rate: float, read_bytes: float, latent: float, scrub_h: float) -> float:
    """P(at least one URE) in a rebuild reading ``read_bytes`` that also meets ``latent`` x A
    latent defects, A uniform in [0, scrub_h): 1 - (1 - p)^bits (1 - exp(-L S)) / (L S)."""
    x = latent * scrub_h
    keep = 1.0 if x == 0 else -math.expm1(-x) / x
    return -math.expm1(8.0 * read_bytes * math.log1p(-rate) + math.log(keep))


def p_ure(rate: float, read_bytes: float) -> float:
    """P(at least one URE) reading ``read_bytes``: 1 - (1 - p)^bits (computed without
    cancellation)."""
    return -math.expm1(8.0 * read_bytes * math.log1p(-rate))
