"""Sizes in bytes from text: the one grammar of every option and configuration key that takes
a size (synth's sizes, the array and scenario files, `cache mrc`, `capture --max-size`).

One-letter suffixes are binary, as fio, IOR and blktrace read them (``4k`` = 4096, ``2G`` =
2 GiB); ``KiB`` ... ``PiB`` are binary too (IEC), ``KB`` ... ``PB`` decimal (SI); ``s`` is a
512-byte sector; no suffix or ``B`` is bytes. Case does not matter. The number may have a
fraction when the size comes out whole (``1.5GiB``); the sign is kept, so that each caller
says in its own words why a size of 0 or below is refused.

Until 2026-11-28 the four callers each had a grammar of their own: the array and scenario
files read ``k``, ``M``, ``G`` as powers of 1000 (``cache = "4G"`` was 4e9 bytes) where every
command read them as powers of 1024, and ``cache mrc`` and ``capture`` read ``KB`` as 1024.
"""

from __future__ import annotations

import re
from fractions import Fraction

from blocklab.traces.schema import SECTOR_BYTES

_SIZE = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+))\s*([A-Za-z]*)\s*$")

#: Bytes per unit, by the unit's name in lower case.
UNITS: dict[str, int] = {"": 1, "b": 1, "s": SECTOR_BYTES}
for _i, _p in enumerate("kmgtp", start=1):
    UNITS[_p] = UNITS[_p + "ib"] = 1 << (10 * _i)
    UNITS[_p + "b"] = 10 ** (3 * _i)

#: The units as a message lists them.
UNIT_NAMES = ("B, s (512-byte sectors), k or KiB, KB, M or MiB, MB, G or GiB, GB, T or TiB, TB, "
              "P or PiB, PB")


def parse_bytes(text: str) -> int:
    """Bytes from ``4096``, ``4k``, ``1MiB``, ``100GB``, ``1.5GiB`` or ``2048s``.

    Raises
    ------
    ValueError
        With the reason in words (the caller names the option or key): not a size, an unknown
        unit (the message lists the known ones), or not a whole number of bytes.
    """
    m = _SIZE.match(text)
    if not m:
        raise ValueError("expected a size such as 4096, 4k, 1MiB, 100GB or 2048s")
    unit = m[2].lower()
    if unit not in UNITS:
        raise ValueError(f"unknown size unit {m[2]!r} (units: {UNIT_NAMES})")
    n = Fraction(m[1]) * UNITS[unit]  # exact: a float rounds 1.1GiB, and truncated 1.3KiB
    if n.denominator != 1:
        raise ValueError(f"{m[1]} {m[2] or 'B'} is not a whole number of bytes")
    return int(n)
