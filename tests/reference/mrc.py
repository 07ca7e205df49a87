"""Plain-Python references of ``kernels/mrc.py``: an LRU cache simulated at each size (an
ordered dictionary, no stack distances), and SHARDS (Waldspurger et al., FAST 2015) run on a
plain list as the LRU stack: the same hash decides which blocks are tracked, each tracked
access's distance is its index in the list of tracked blocks."""

from __future__ import annotations

import math
from collections import OrderedDict

MASK = (1 << 64) - 1
P = 1 << 24


def mix(key: int) -> int:
    """SplitMix64's finalizer, as kernels/mrc.py."""
    z = (key + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def accesses(reqs: list[tuple[int, int, int, int]], block_bytes: int) -> list[tuple[int, int]]:
    """(key, op) per block touched by each read or write (device, sector, size_bytes, op);
    the key as the kernel forms it from a dense device index."""
    bsec = block_bytes // 512
    devs: dict[int, int] = {}
    out = []
    for dev, sector, size, op in reqs:
        d = devs.setdefault(dev, len(devs))
        if op > 1 or size <= 0:
            continue
        nsec = -(-size // 512)
        for b in range(sector // bsec, (sector + nsec - 1) // bsec + 1):
            out.append(((d << 47) | b, op))
    return out


def lru_miss_ratios(acc: list[tuple[int, int]], blocks: int) -> tuple[float, float, float]:
    """Miss ratios (all, reads, writes; nan when no access of that op) of an LRU cache of
    ``blocks`` blocks, simulated."""
    cache: OrderedDict[int, None] = OrderedDict()
    miss = [0, 0]
    tot = [0, 0]
    for key, op in acc:
        tot[op] += 1
        if key in cache:
            cache.move_to_end(key)
        else:
            miss[op] += 1
            cache[key] = None
            if len(cache) > blocks:
                cache.popitem(last=False)
    return (sum(miss) / sum(tot) if sum(tot) else math.nan,
            miss[0] / tot[0] if tot[0] else math.nan, miss[1] / tot[1] if tot[1] else math.nan)


def shards(acc: list[tuple[int, int]], rate: float | None = None, smax: int | None = None
           ) -> tuple[list[tuple[float, float, int]], list[int]]:
    """SHARDS at a fixed rate or a fixed size: (scaled distance or inf for a first access,
    weight 1/R at the time, op) per tracked access, and the number of accesses per op."""
    t = P if rate is None else max(1, round(rate * P))
    stack: list[int] = []  # most recent first
    recs = []
    n = [0, 0]
    for key, op in acc:
        n[op] += 1
        hv = mix(key) & (P - 1)
        if hv >= t:
            continue
        w = P / t
        if key in stack:
            d = stack.index(key)
            stack.remove(key)
            recs.append((d * w, w, op))
        else:
            recs.append((math.inf, w, op))
        stack.insert(0, key)
        if smax is not None and len(stack) > smax:
            t = max(mix(k) & (P - 1) for k in stack)
            stack = [k for k in stack if mix(k) & (P - 1) < t]
    return recs, n


def shards_miss_ratio(recs: list[tuple[float, float, int]], n: list[int], op: int | None,
                      c: float) -> float:
    """SHARDS_adj's miss ratio at cache size ``c`` blocks: weight of tracked accesses at
    scaled distance c or more (first accesses included) over all accesses."""
    ops = (0, 1) if op is None else (op,)
    total = sum(n[o] for o in ops)
    miss = sum(w for x, w, o in recs if o in ops and x >= c)
    return miss / total
