"""Plain-Python reference of the HDD model's pieces: seek interpolation, the Ruemmler-Wilkes
seek equation, block location with skews, and DiskSim's demerit figure."""

from __future__ import annotations

import bisect
import math


def seek_curve(curve: list[tuple[int, float]], dist: int) -> float:
    if dist <= 0:
        return 0.0
    ds = [d for d, _t in curve]
    if dist <= ds[0]:
        return curve[0][1]
    if dist >= ds[-1]:
        return curve[-1][1]
    i = bisect.bisect_right(ds, dist) - 1
    (d0, t0), (d1, t1) = curve[i], curve[i + 1]
    return t0 + (dist - d0) / (d1 - d0) * (t1 - t0)


def seek_hpl(x, a, b, c, e, first_ten, dist):
    if dist <= 0:
        return 0.0
    if dist <= len(first_ten):
        return first_ten[dist - 1]
    return a + b * math.sqrt(dist) if dist < x else c + e * dist


def locate(zones: list[dict], surfaces: int, lbn: int):
    """zones: dicts with first_cyl, bpt, first_lbn, nlbn, tskew, cskew (in LBN order)."""
    z = next((z for z in zones if lbn < z["first_lbn"] + z["nlbn"]), zones[-1])
    off = lbn - z["first_lbn"]
    track, sector = divmod(off, z["bpt"])
    cyl_in_zone, head = divmod(track, surfaces)
    skew = cyl_in_zone * (z["cskew"] + (surfaces - 1) * z["tskew"]) + head * z["tskew"]
    return z["first_cyl"] + cyl_in_zone, head, ((sector + skew) % z["bpt"]) / z["bpt"]


def demerit(sim: list[float], real: list[float]) -> float:
    """RMS horizontal distance between the two empirical CDFs at p = 0.0001 .. 1 (DiskSim's
    definition, with linear interpolation between order statistics)."""

    def q(xs, p):
        xs = sorted(xs)
        h = (len(xs) - 1) * p
        lo = math.floor(h)
        hi = min(lo + 1, len(xs) - 1)
        return xs[lo] + (h - lo) * (xs[hi] - xs[lo])

    ps = [k / 10000 for k in range(1, 10001)]
    return math.sqrt(sum((q(sim, p) - q(real, p)) ** 2 for p in ps) / len(ps))
