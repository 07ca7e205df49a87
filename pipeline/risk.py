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
``--window-s`` replaces every measured window. Failures of hot spares are ignored. A run without
events (no failure), or whose rebuild did not end within the run (no hot spare left, a pool out
of preservation capacity), has no measured window: it needs ``--window-s``.

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
from blocklab.kernels.layout import raid as R
from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import OPK_REBUILD_READ, SECTOR_BYTES

from . import query as Q
from .model import catalog as C
from .model.array import ArrayModel, build_array
from .model.config import (
    DDP_WIDTH,
    ArrayConfig,
    ConfigError,
    ControllerConfig,
    DriveRef,
    GroupConfig,
    VolumeConfig,
    load_array,
)

HOURS_PER_YEAR = 8760.0  # a year of power-on hours, as drive datasheets count AFR
DEFAULT_AFR = 0.02  # Schroeder and Gibson, FAST 2007: field replacement rates of 2 to 4 %
Z95 = statistics.NormalDist().inv_cdf(0.975)
MIN_AT_TOLERANCE = 30  # below this many trials reaching a tolerance, widen the interval


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
# inputs: run folders (windows measured) and array configurations


@dataclasses.dataclass
class Input:
    """One array to assess: its name, its model and its windows per group (seconds)."""

    name: str
    arr: ArrayModel
    windows_s: dict[str, float]
    window_source: str  # "measured (longest)", "--window-s"
    measured: list[dict[str, Any]]  # the run's failures with their windows
    read_bytes: dict[str, float] = dataclasses.field(default_factory=dict)  # per rebuild
    read_source: str = ""


def _config_from_meta(name: str, d: Any) -> ArrayConfig:
    """The array configuration a run's meta.json recorded (``dataclasses.asdict`` of it)."""
    try:
        groups = []
        for g in d["groups"]:
            g = dict(g)
            drv = dict(g.pop("drive"))
            drv["overrides"] = tuple(tuple(x) for x in drv.get("overrides") or ())
            groups.append(GroupConfig(**g, drive=DriveRef(**drv)))
        vol = d.get("volume")
        volume = (VolumeConfig(int(vol["stripe_unit_bytes"]), tuple(vol["luns"]))
                  if vol else None)
        return ArrayConfig(source=str(d.get("source", name)), groups=tuple(groups),
                           controller=ControllerConfig(**(d.get("controller") or {})),
                           volume=volume)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BlocklabError(f"run {name}: meta.json: array.config is not a configuration this "
                            f"blocklab reads ({type(e).__name__}: {e})") from None


def _measured(src: Q.Source) -> list[dict[str, Any]]:
    """The run's failures of member drives with their windows (``rebuild-windows``)."""
    res = Q.run_query([], "rebuild-windows", sources=[src])
    roles = {int(d.get("drive", -1)): str(d.get("role", ""))
             for d in src.meta.get("drives") or []}
    return [r for r in res.rows() if roles.get(int(r["drive"])) != "spare"]


def _windows(name: str, arr: ArrayModel, rows: list[dict[str, Any]], events: bool,
             window_s: float | None) -> tuple[dict[str, float], str]:
    groups = [g.name for g in arr.cfg.groups]
    if window_s is not None:
        return {g: window_s for g in groups}, "--window-s"
    if not events:
        raise BlocklabError(f"{name}/events.parquet: no such file: the run had no drive "
                            "failure, so no rebuild window was measured (replay with --fail "
                            "DRIVE@SECONDS, or give --window-s)")
    if not rows:
        raise BlocklabError(f"{name}: no failure of a member drive in the run, so no rebuild "
                            "window was measured (replay with --fail DRIVE@SECONDS, or give "
                            "--window-s)")
    measured: dict[str, float] = {}
    for r in rows:
        if not r["rebuild_done"]:
            raise BlocklabError(
                f"{name}: the rebuild of drive {r['drive']} ({r['group']}, failed at "
                f"{r['failure_s']:g} s) did not end within the run (no hot spare, or a pool out "
                "of preservation capacity): no rebuild window; give --window-s")
        measured[r["group"]] = max(measured.get(r["group"], 0.0), float(r["window_s"]))
    longest = max(measured.values())
    return {g: measured.get(g, longest) for g in groups}, "measured (longest)"


def _reads_per_rebuilt_byte(g: GroupConfig) -> float:
    """Bytes a rebuild reads from the survivors per byte it rebuilds, by layout: the other
    members of a RAID-5 stripe, all but one of a RAID-6 stripe's survivors (one parity
    suffices), the mirror, the eight other pieces of a D-stripe (RAID-6 8+2: eight)."""
    kind = g.raid if g.layout == "pool" else g.layout
    width = g.group_width if g.layout == "pool" else g.width
    return {"raid5": width - 1, "raid6": width - 2, "raid1": 1, "raid10": 1,
            "ddp": DDP_WIDTH - 2}.get(kind, 0.0)


def _member_bytes(arr: ArrayModel) -> dict[str, float]:
    """Bytes of a member drive each group uses (its member map's sectors per member)."""
    out: dict[str, float] = {}
    for r in range(len(arr.MP)):
        geom = int(arr.MP["group"][r])
        name = arr.cfg.groups[int(arr.row_group[r])].name
        per = float(arr.GR["rows"][geom]) * SECTOR_BYTES
        if int(arr.row_dstripe[r]) >= 0:  # a pool's D-stripe: one piece per member
            per = float(arr.cfg.groups[int(arr.row_group[r])].piece_bytes)
            out[name] = out.get(name, 0.0) + per * DDP_WIDTH / arr.cfg.groups[
                int(arr.row_group[r])].width
        else:
            out[name] = max(out.get(name, 0.0), per)
    return out


def _rebuild_reads(src: Q.Source, arr: ArrayModel, rows: list[dict[str, Any]]
                   ) -> tuple[dict[str, float], str]:
    """Bytes one rebuild of each group read in the run: its rebuild_read drive operations
    (replay --drive-ops) over its rebuilds, else the bytes rebuilt (events) times the layout's
    reads per rebuilt byte; groups without a rebuild in the run take their members' capacity
    times that."""
    groups = {g.name: g for g in arr.cfg.groups}
    cap = _member_bytes(arr)
    out = {n: cap.get(n, 0.0) * _reads_per_rebuilt_byte(g) for n, g in groups.items()}
    rebuilds: dict[str, int] = {}
    for r in rows:
        rebuilds[r["group"]] = rebuilds.get(r["group"], 0) + 1
    if not rebuilds:
        return out, "members' capacity x the layout's reads per rebuilt byte"
    if (src.path / "drive_ops.parquet").is_file():
        res = Q.run_query([], sql=(
            "SELECT d.\"group\" AS g, sum(o.sectors) * 512 AS b FROM drive_ops o "
            "JOIN drives d ON d.run = o.run AND d.drive = o.drive "
            f"WHERE o.kind = {OPK_REBUILD_READ} GROUP BY ALL"), sources=[src])
        for row in res.rows():
            if row["g"] in rebuilds:
                out[row["g"]] = float(row["b"]) / rebuilds[row["g"]]
        return out, "measured: the rebuilds' read operations (drive_ops.parquet)"
    res = Q.run_query([], sql=(
        "SELECT \"group\" AS g, drive, max(bytes) AS b FROM events "
        "WHERE event = 'rebuild_end' GROUP BY ALL"), sources=[src])
    done: dict[str, list[float]] = {}
    for row in res.rows():
        if row["b"] is not None:
            done.setdefault(row["g"], []).append(float(row["b"]))
    for name, bs in done.items():
        if name in groups:
            out[name] = max(bs) * _reads_per_rebuilt_byte(groups[name])
    return out, ("bytes rebuilt (events.parquet) x the layout's reads per rebuilt byte "
                 "(replay --drive-ops measures the reads)")


def load_inputs(paths: list[str], window_s: float | None) -> list[Input]:
    """The arrays that ``paths`` name, with their windows (module docstring)."""
    if window_s is not None and not (math.isfinite(window_s) and window_s >= 0):
        raise BlocklabError(f"--window-s: must be a number of seconds, at least 0, found "
                            f"{window_s:g}")
    if not paths:
        raise BlocklabError("risk: give at least one RUN (a run folder, or an array TOML with "
                            "--window-s)")
    out: list[Input] = []
    for raw in paths:
        p = Path(raw)
        if p.is_file() and p.suffix.lower() == ".toml":
            if window_s is None:
                raise BlocklabError(f"{raw}: an array configuration has no measured rebuild "
                                    "window: give --window-s (or a run folder)")
            arr = _build(raw, load_array(p))
            cap = _member_bytes(arr)
            out.append(Input(raw, arr, {g.name: window_s for g in arr.cfg.groups},
                             "--window-s", [],
                             {g.name: cap.get(g.name, 0.0) * _reads_per_rebuilt_byte(g)
                              for g in arr.cfg.groups},
                             "members' capacity x the layout's reads per rebuilt byte"))
            continue
        for src in Q.find_sources([raw]):
            if src.kind != "run":
                raise BlocklabError(f"{src.name}: a trace, not a run folder (replay it with "
                                    "--fail DRIVE@SECONDS first)")
            cfg = _config_from_meta(src.name, (src.meta.get("array") or {}).get("config"))
            arr = _build(src.name, cfg)
            events = (src.path / "events.parquet").is_file()
            rows = _measured(src) if events else []
            win, how = _windows(src.name, arr, rows, events, window_s)
            reads, read_how = _rebuild_reads(src, arr, rows)
            out.append(Input(src.name, arr, win, how, [
                {"drive": r["drive"], "group": r["group"], "failure_s": r["failure_s"],
                 "window_s": r["window_s"], "rebuild_done": r["rebuild_done"]} for r in rows],
                reads, read_how))
    return out


def _build(name: str, cfg: ArrayConfig) -> ArrayModel:
    try:
        return build_array(cfg)
    except ConfigError:
        raise
    except BlocklabError as e:
        raise BlocklabError(f"{name}: {e}") from None
    except (OSError, ValueError) as e:
        raise BlocklabError(f"{name}: the array cannot be built ({e})") from None


# ---------------------------------------------------------------------------------------------
# intervals


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
        member = _member_bytes(inp.arr)
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
    chunk = max(1000, trials // 100)
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
