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
    warm.warm(lambda name, i, n: told.append((name, i, n)), jobs=1)
    assert ran == ["a", "b"] and told == [("a", 0, 2), ("b", 1, 2)]
    assert warm.is_warm() and (tmp_path / "cache" / warm.STAMP).exists()


def test_a_second_process_compiles_the_other_families_into_the_same_cache(tmp_path,
                                                                         monkeypatch):
    """With two jobs, the families after the first compile in a second process (a real one:
    ``python -m blocklab.tools.warm --family ...``) into this process's cache folder, while
    the first runs here; this process then runs every family itself and stamps the cache."""
    cache = tmp_path / "cache"
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(cache))
    seen: dict[str, list[str]] = {}

    def first(d):  # runs here while the second process compiles
        seen["first"] = []

    def risk(d):  # here: what the second process (the real risk family) left in the cache
        seen["risk"] = sorted(p.name for p in cache.rglob("risk.*.nbi"))

    monkeypatch.setattr(warm, "FAMILIES", [("first", first), ("data-loss risk", risk)])
    started: list[list[str]] = []
    real_start = warm._start_lane

    def start(names):
        started.append(names)
        return real_start(names)

    monkeypatch.setattr(warm, "_start_lane", start)
    told: list[str] = []
    warm.warm(lambda name, i, n: told.append(name), jobs=2)
    assert started == [["data-loss risk"]] and told == ["first", "data-loss risk"]
    # kernels/risk.py's kernels, compiled by the second process into this cache folder
    assert seen["risk"] and all(n.startswith("risk.") for n in seen["risk"])
    assert warm.is_warm()


def test_families_name_every_kind_of_kernel():
    names = " ".join(n for n, _f in warm.FAMILIES)
    for kind in ("engine", "HDD", "generators", "SSD", "pools", "failures", "parsers",
                 "miss-ratio", "risk"):
        assert kind in names
