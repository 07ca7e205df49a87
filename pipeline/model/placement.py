"""Where a dynamic disk pool puts its pieces (issue 5, deliverable 3): a deterministic
pseudo-random placement of the CRUSH family.

A pool of N drives holds its data in D-stripes: RAID-6 8+2 stripes whose ten pieces (one per
member, ``piece`` sectors each) live on ten distinct drives. Every (D-stripe, drive) pair gets
a *straw2 draw*: ``ln(u) / weight`` with u uniform in (0, 1] from a hash of the pair (straw2,
as Ceph's CRUSH computes it: each drive wins in proportion to its weight, and a drive's draws do
not depend on which other drives exist). A D-stripe's members are its ten highest draws among the
drives that still have room; every drive has room for ``slots`` pieces. A preservation capacity
of ``k`` drives' worth is kept free: the pool holds ``(N - k) x slots / 10`` D-stripes, so every
drive keeps some slots free for rebuilds.

Properties the tests check: the load is balanced (every drive's piece count is close to the
mean), and stable: when a drive fails, only the pieces that were on it move: each to the
D-stripe's best remaining draw among the drives not already in it that have a free slot.
"""

from __future__ import annotations

import dataclasses

import numpy as np

MASK64 = (1 << 64) - 1


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele, Lea and Flood 2014) on uint64 arrays."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def draws(dstripes: np.ndarray, drives: int, seed: int, weights: np.ndarray | None = None
          ) -> np.ndarray:
    """straw2 draws ln(u) / w of every (D-stripe, drive): shape (len(dstripes), drives)."""
    i = dstripes.astype(np.uint64)[:, None]
    j = np.arange(drives, dtype=np.uint64)[None, :]
    with np.errstate(over="ignore"):
        h = _mix(_mix(i * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)) ^ (j + np.uint64(1)))
    u = ((h >> np.uint64(11)).astype(np.float64) + 1.0) / float(1 << 53)  # (0, 1]
    w = np.ones(drives) if weights is None else np.asarray(weights, float)
    return np.log(u) / w[None, :]


@dataclasses.dataclass
class Placement:
    members: np.ndarray  # (D-stripes, width): drive of each piece
    slot: np.ndarray  # (D-stripes, width): the piece's slot on its drive
    used: np.ndarray  # (drives, slots): 1 where a slot holds a piece
    order: np.ndarray  # (D-stripes, drives): drives by decreasing draw


def place(drives: int, slots: int, preservation: int, width: int = 10,
          seed: int = 0) -> Placement:
    """The pool's initial placement (module docstring)."""
    if drives < width + preservation:
        raise ValueError(f"a pool of {drives} drives is smaller than its stripe width {width} "
                         f"plus its preservation capacity {preservation}")
    count = (drives - preservation) * slots // width
    order = np.argsort(-draws(np.arange(count), drives, seed), axis=1, kind="stable")
    members = np.zeros((count, width), np.int64)
    slot = np.zeros((count, width), np.int64)
    fill = np.zeros(drives, np.int64)
    for i in range(count):
        k = 0
        for d in order[i]:
            if fill[d] < slots:
                members[i, k] = d
                slot[i, k] = fill[d]
                fill[d] += 1
                k += 1
                if k == width:
                    break
        if k < width:
            raise ValueError("pool placement ran out of free slots")
    used = np.zeros((drives, slots), np.int8)
    used[members.ravel(), slot.ravel()] = 1
    return Placement(members=members, slot=slot, used=used, order=order)


def replacement(p: Placement, dstripe: int, current: set[int], failed: set[int]
                ) -> tuple[int, int] | None:
    """(drive, slot) that takes over a failed piece of ``dstripe``, whose members are now
    ``current``: its best draw among live drives not in it with a free slot (that slot is
    then taken); None when the preservation capacity is used up."""
    for d in p.order[dstripe]:
        d = int(d)
        if d in failed or d in current:
            continue
        free = np.flatnonzero(p.used[d] == 0)
        if len(free):
            p.used[d, free[0]] = 1
            return d, int(free[0])
    return None
