"""``make setup`` compiles every kernel family (tools/warm.py) and leaves a stamp in the
kernel cache; commands on a terminal compile first, saying so, only when the stamp is missing."""

from __future__ import annotations

import os

import numba
import pytest

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


FIELD_SAMPLES = {  # one or two requests of each ASCII format, as a person would ingest them
    "t.mqsim": "0 0 8 8 1\n1500000 0 64 8 0\n",
    "t.fio": "fio version 2 iolog\n/dev/sda add\n/dev/sda open\n/dev/sda read 0 4096\n"
             "/dev/sda write 8192 4096\n/dev/sda close\n",
    "t.validate": "R Miss 8 8 5000.0 0.0\nW Miss 64 8 6000.0 10.0\n",
    "t.msr": "128166372003061629,hm,0,Read,3221225472,4096,1331\n",
}


@pytest.mark.skipif(not warm.is_warm(), reason="the kernel cache is not warm (make setup warms "
                    "it; make test runs setup first)")
def test_after_the_warm_no_ingest_compiles(tmp_path):
    """After ``make setup``, ingesting a file of any format compiles nothing: Numba saves no
    kernel to its cache (NUMBA_DEBUG_CACHE says each save). Before, the warm ran only the
    tracefs text parser, and a person's first blktrace or blkparse ingest sat compiling for a
    second or so, silently."""
    import subprocess
    import sys

    from blocklab.tools.bench import synth_blktrace

    synth_blktrace(tmp_path / "t.blktrace.0", 8)
    files = [tmp_path / "t.blktrace.0"]
    for name, text in {**warm._TEXT_SAMPLES, **FIELD_SAMPLES}.items():
        (tmp_path / name).write_text(text)
        files.append(tmp_path / name)
    env = {**os.environ, "NUMBA_DEBUG_CACHE": "1"}
    for i, f in enumerate(files):
        p = subprocess.run([sys.executable, "-m", "blocklab.pipeline.cli", "ingest", str(f), "-o",
                            str(tmp_path / f"o{i}.parquet")], capture_output=True, text=True,
                           env=env, timeout=300)
        assert p.returncode == 0, (f.name, p.stderr[-2000:])
        saved = [ln for ln in (p.stdout + p.stderr).splitlines() if "data saved" in ln]
        assert not saved, (f.name, saved[:3])


@pytest.mark.skipif(not warm.is_warm(), reason="the kernel cache is not warm (make setup warms "
                    "it; make test runs setup first)")
def test_the_hdd_models_service_is_compiled_once_for_the_engine_and_the_model():
    """The second process compiles the HDD model first so that the engine's compile links its
    ``service`` from the cache (tools/warm.py): that holds only if both call it with the same
    argument types, that is, if the cache holds one compiled ``service``, not two. (Numba
    keeps a folder per kernel source folder, named after its path: a cache shared by two
    checkouts holds one ``service`` for each, so the count is per folder.)"""
    from collections import Counter
    from pathlib import Path

    from blocklab.kernels._jit import cache_folder

    per_folder = Counter(p.parent for p in Path(cache_folder()).rglob("hdd.service-*.nbc"))
    assert per_folder and set(per_folder.values()) == {1}, per_folder


def test_the_second_process_takes_the_hdd_model_first_and_not_the_engines_replays():
    """The HDD model leads the second process's share (ready before the engine needs it);
    every family that replays (and so needs the whole engine) stays with the engine."""
    names = [n for n, _f in warm.FAMILIES]
    side = [n for n in names if n in warm.SIDE]
    assert side[0] == "HDD model"
    assert "replay engine" not in warm.SIDE
    assert not [n for n in side if "failures" in n or "engine" in n]
