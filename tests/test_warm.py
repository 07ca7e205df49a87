"""``make setup`` compiles every kernel family (tools/warm.py) and leaves a stamp in the
kernel cache; commands on a terminal compile first, saying so, only when the stamp is missing."""

from __future__ import annotations

import numba

from blocklab.kernels import _jit  # noqa: F401  (sets the cache folder first: patched below)
from blocklab.tools import warm


def test_warm_runs_every_family_and_stamps_the_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "cache"))
    ran: list[str] = []
    monkeypatch.setattr(warm, "FAMILIES", [("a", lambda d: ran.append("a")),
                                           ("b", lambda d: ran.append("b"))])
    told: list[tuple[str, int, int]] = []
    assert not warm.is_warm()
    warm.warm(lambda name, i, n: told.append((name, i, n)))
    assert ran == ["a", "b"] and told == [("a", 0, 2), ("b", 1, 2)]
    assert warm.is_warm() and (tmp_path / "cache" / warm.STAMP).exists()


def test_families_name_every_kind_of_kernel():
    names = " ".join(n for n, _f in warm.FAMILIES)
    for kind in ("engine", "HDD", "generators", "SSD", "pools", "failures", "parsers",
                 "miss-ratio", "risk"):
        assert kind in names
