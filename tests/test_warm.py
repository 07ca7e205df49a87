"""``make setup`` compiles every kernel family (tools/warm.py) and leaves a stamp in the
kernel cache (the virtual environment's own); commands on a terminal compile first, saying so,
only when the stamp is missing, and commands run from a script say which kernel compiles."""

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
    ``service_queued`` from the cache (tools/warm.py): that holds only if the model's own
    replays and the engine call it with the same argument types, that is, if the cache holds
    one compiled ``service_queued``, not two; ``service`` is a plain function that calls it,
    no kernel of its own. (Numba keeps a folder per kernel source folder, named after its
    path: a cache shared by two checkouts holds one for each, so the count is per folder.)"""
    from collections import Counter
    from pathlib import Path

    from blocklab.kernels._jit import cache_folder

    found = Path(cache_folder()).rglob("hdd.service_queued-*.nbc")
    per_folder = Counter(p.parent for p in found)
    assert per_folder and set(per_folder.values()) == {1}, per_folder
    assert not list(Path(cache_folder()).rglob("hdd.service-*.nbi"))


def test_the_capture_decoder_is_compiled_where_tracefs_cannot_be_read(tmp_path):
    """``make setup`` runs before anything mounts tracefs (the capture tests mount it later):
    the warm then compiles capture's page decoder on a 64-bit kernel's page header and no
    event formats, the same argument types. Before, it skipped the decoder there, and a fresh
    clone's first capture compiled it (CI found the kernel missing from the cache)."""
    import subprocess
    import sys

    code = ("import blocklab.pipeline.tracefs as T\n"
            "def gone():\n    raise OSError('tracefs is not mounted')\n"
            "T.find_tracefs = gone\n"
            "from blocklab.tools import warm\n"
            "from blocklab.kernels import tracefs_raw as R\n"
            "assert not R.decode_pages.signatures\n"
            "warm._capture_decoder()\n"
            "print(len(R.decode_pages.signatures))\n")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["1"]


def test_the_second_process_takes_the_hdd_model_first_and_not_the_engines_replays():
    """The HDD model leads the second process's share (ready before the engine needs it);
    every family that replays (and so needs the whole engine) stays with the engine."""
    names = [n for n, _f in warm.FAMILIES]
    side = [n for n in names if n in warm.SIDE]
    assert side[0] == "HDD model"
    assert "replay engine" not in warm.SIDE
    assert not [n for n in side if "failures" in n or "engine" in n]


def test_a_script_is_told_of_each_kernel_a_command_compiles(tmp_path):
    """A command whose standard error is not a terminal (a script, a log), on an install whose
    kernels are not compiled, says on standard error which kernel it compiles, as Numba
    compiles it (each one Numba saves to its cache: NUMBA_DEBUG_CACHE), and how long it took;
    its standard output is what it prints with the kernels cached, and the next run says
    nothing. Before, a script's command sat silent while the kernels compiled (43 s of a 45 s
    replay with a failure)."""
    import subprocess
    import sys

    src = tmp_path / "t.blkparse.txt"
    src.write_text(warm._TEXT_SAMPLES["warm.blkparse.txt"])
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_DEBUG_CACHE": "1"}

    def ingest() -> subprocess.CompletedProcess[str]:
        p = subprocess.run([sys.executable, "-m", "blocklab.pipeline.cli", "ingest", str(src),
                            "-o", str(tmp_path / "t.parquet")], capture_output=True, text=True,
                           env=env, timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
        return p

    def said(p: subprocess.CompletedProcess[str], what: str) -> list[str]:
        return [ln.split()[3 if what == "compiling" else 2] for ln in p.stderr.splitlines()
                if ln.startswith(f"blocklab: {what} ")]

    def ours(p: subprocess.CompletedProcess[str]) -> str:  # the command's own lines
        return " ".join(ln for ln in p.stdout.splitlines() if not ln.startswith("[cache]"))

    first, again = ingest(), ingest()
    started, done = said(first, "compiling"), said(first, "compiled")
    assert "kernels.textparse.parse_blkparse" in started, first.stderr[-2000:]
    assert started == done  # every kernel told twice, start then end, in order
    saved = " ".join(ln for ln in first.stdout.splitlines() if "data saved" in ln)
    for name in started:  # each one Numba compiled and saved (kernels/textparse.py: textparse.)
        module, func = name.rsplit(".", 1)
        assert f"{module.rsplit('.', 1)[1]}.{func}-" in saved, (name, saved[:500])
    assert said(again, "compiling") == [] and said(again, "compiled") == []
    assert ours(first).split(" format ")[0] == ours(again).split(" format ")[0]


def test_the_kernel_cache_is_the_virtual_environments_own(monkeypatch, tmp_path):
    """Without NUMBA_CACHE_DIR, kernels are cached in the virtual environment blocklab runs
    from, the folder ``make setup`` fills: a command started from that environment by hand
    finds them compiled. Before, only ``make`` pointed Numba there, and a command started any
    other way compiled every kernel again into ~/.cache. Outside a virtual environment, or in
    one this user may not write, the user's cache folder."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    p = subprocess.run([sys.executable, "-c", "from blocklab.kernels import _jit; "
                        "print(_jit._cache_dir())"], capture_output=True, text=True, env=env,
                       check=True)
    folder = p.stdout.strip()
    if sys.prefix != sys.base_prefix:
        assert os.path.dirname(folder) == os.path.join(sys.prefix, "numba-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with monkeypatch.context() as m:
        m.setattr(_jit.os, "access", lambda path, mode: False)  # a venv this user cannot write
        assert _jit._default_base() == str(tmp_path / "blocklab" / "numba")
    with monkeypatch.context() as m:  # root in a user's venv (sudo): not root's to fill
        m.setattr(_jit.os, "geteuid", lambda: os.stat(_jit.sys.prefix).st_uid + 1)
        assert _jit._default_base() == str(tmp_path / "blocklab" / "numba")
    monkeypatch.setattr(_jit.sys, "prefix", _jit.sys.base_prefix)  # no virtual environment
    assert _jit._default_base() == str(tmp_path / "blocklab" / "numba")


#: Public kernels that no command calls (tests and tools/ do): the warm leaves them out.
NO_COMMAND_CALLS = {"hdd_cache.settle", "hdd_geometry.locate", "hdd_geometry.seek_ms",
                    "raid.locate", "risk.draw_lifetimes",
                    # (the engine's sptf calls its parts: position_state, position_place)
                    "hdd.position_ms",
                    # make bench's yardstick of the machine (tools/bench_replay.py)
                    "calibrate.heap_loop"}


def test_the_warm_compiles_every_kernel_a_command_calls(kernels_cached_at_start):
    """Every public kernel is in the cache as the suite starts (after ``make setup``), but for
    those no command calls. Before, three were left out and compiled, silently, in the middle
    of a command: the pairing table's growth (a trace with more than 1,024 requests in
    flight), the blktrace decoder's search for the next record (--skip-bad past junk), and
    IOR's random offsets (-z). Exact in a fresh clone, as CI runs it; on a machine whose
    cache earlier runs of the tests filled, it can pass where CI would not."""
    import importlib
    import pkgutil

    from numba.core.dispatcher import Dispatcher

    import blocklab.kernels as kernels

    if not warm.is_warm():
        pytest.skip("the kernel cache is not warm (make setup warms it; make test runs setup "
                    "first)")
    public = set()
    for m in pkgutil.walk_packages(kernels.__path__, "blocklab.kernels."):
        for name, v in vars(importlib.import_module(m.name)).items():
            if (isinstance(v, Dispatcher) and not name.startswith("_")
                    and v.py_func.__module__ == m.name):
                public.add(f"{m.name.rsplit('.', 1)[1]}.{v.py_func.__qualname__}")
    assert len(public) > 50 and NO_COMMAND_CALLS <= public, sorted(NO_COMMAND_CALLS - public)
    assert sorted(public - kernels_cached_at_start - NO_COMMAND_CALLS) == []
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ""
    for folder in ("pipeline", "traces"):  # what the commands run
        for dirpath, _dirs, files in os.walk(os.path.join(root, folder)):
            for f in files:
                if f.endswith(".py"):
                    with open(os.path.join(dirpath, f)) as fh:
                        code += fh.read()
    for name in NO_COMMAND_CALLS:
        assert f".{name.split('.')[1]}(" not in code, name
