"""Plain-Python reference of the ``iostat`` and ``idle-times`` queries: the kernel's counters
as /proc/diskstats defines them (Documentation/admin-guide/iostats.rst), kept by walking the
requests' arrival and completion events in time order, then turned into iostat's figures as
sysstat does (iostat.c, rd_stats.c compute_ext_disk_stats): differences of counters over an
interval divided by its length.

The SQL finds busy periods as islands of overlapping spans and spreads every span over the
intervals it crosses; this walks a timeline instead: the number of requests in progress
changes only at an arrival or a completion, and between two such instants it is constant, so
the integral (field 11) and the time with at least one in progress (field 10) are sums of
constant pieces cut at interval boundaries.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass


@dataclass
class Req:
    device: str
    op: int  # 0 read, 1 write, other codes count in aqu-sz and %util only
    arrival_ns: int
    complete_ns: int
    size_bytes: int
    merges: int = 0


def iostat(reqs: list[Req], interval_ns: int) -> list[dict]:
    """One dict per (interval, device), intervals from 0 to the last completion, devices in
    the order of ``sorted`` of their names; the figures as the iostat query names them."""
    reqs = [r for r in reqs if r.complete_ns >= r.arrival_ns]
    end = max(r.complete_ns for r in reqs)
    last_k = max((end - 1) // interval_ns, 0)
    devices = sorted({r.device for r in reqs})
    counters: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in reqs:
        k = min(r.complete_ns // interval_ns, last_k)
        c = counters[(r.device, k)]
        if r.op in (0, 1):
            p = "rd" if r.op == 0 else "wr"
            c[p + "_ios"] += 1
            c[p + "_bytes"] += r.size_bytes
            c[p + "_merges"] += r.merges
            c[p + "_ticks"] += r.complete_ns - r.arrival_ns
    for dev in devices:
        # the timeline of this device: +1 at an arrival, -1 at a completion
        events: list[tuple[int, int]] = []
        for r in reqs:
            if r.device == dev:
                events.append((r.arrival_ns, +1))
                events.append((r.complete_ns, -1))
        events.sort()
        in_progress = 0
        for (t0, d), (t1, _d) in zip(events, events[1:] + [(events[-1][0], 0)], strict=True):
            in_progress += d
            # the piece [t0, t1) has `in_progress` requests, cut at interval boundaries
            t = t0
            while t < t1:
                k = t // interval_ns
                stop = min(t1, (k + 1) * interval_ns)
                c = counters[(dev, min(k, last_k))]
                c["queue"] += in_progress * (stop - t)
                if in_progress > 0:
                    c["busy"] += stop - t
                t = stop
    rows = []
    for k in range(last_k + 1):
        length = min(interval_ns, end - k * interval_ns)
        if length <= 0:
            continue
        secs = length / 1e9
        for dev in devices:
            c = counters[(dev, k)]
            rd, wr = c["rd_ios"], c["wr_ios"]
            rows.append({
                "device": dev, "t_s": k * interval_ns / 1e9, "interval_s": secs,
                "r/s": rd / secs, "w/s": wr / secs,
                "rkB/s": c["rd_bytes"] / 1024 / secs, "wkB/s": c["wr_bytes"] / 1024 / secs,
                "rrqm/s": c["rd_merges"] / secs, "wrqm/s": c["wr_merges"] / secs,
                "r_await": c["rd_ticks"] / rd / 1e6 if rd else 0.0,
                "w_await": c["wr_ticks"] / wr / 1e6 if wr else 0.0,
                "aqu-sz": c["queue"] / length,
                "rareq-sz": c["rd_bytes"] / 1024 / rd if rd else 0.0,
                "wareq-sz": c["wr_bytes"] / 1024 / wr if wr else 0.0,
                "%util": 100 * c["busy"] / length,
            })
    return rows


def idle_periods(reqs: list[Req]) -> dict[str, list[int]]:
    """Per device, the lengths in ns of the stretches with no request in progress between its
    first arrival and its last completion (walking the timeline)."""
    out: dict[str, list[int]] = {}
    for dev in sorted({r.device for r in reqs}):
        events = sorted([(r.arrival_ns, +1) for r in reqs if r.device == dev] +
                        [(r.complete_ns, -1) for r in reqs if r.device == dev],
                        key=lambda e: (e[0], -e[1]))  # arrivals first at one instant
        gaps = []
        n = 0
        idle_since = None
        for t, d in events:
            if d > 0 and n == 0 and idle_since is not None and t > idle_since:
                gaps.append(t - idle_since)
            n += d
            if n == 0:
                idle_since = t
        out[dev] = gaps
    return out


def quantile(xs: list[int], q: float) -> float:
    """numpy.quantile's default (linear between the nearest ranks), as DuckDB's
    quantile_cont."""
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
