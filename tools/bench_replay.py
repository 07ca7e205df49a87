"""The replay section of ``make bench`` (tools/bench.py): single-core replay speeds on the
bench's 8-drive RAID-5 (issue 21, deliverable 3), with the engine on fixed-time drives, the HDD
model alone, the plain-Python reference and a yardstick of the machine's own speed beside them.
Benchmarks report; no test asserts a time."""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def _reference(name: str) -> Any:
    """tests/reference/``name``.py of this checkout (None where it has no tests), imported as
    a module of a package of its own, ``blocklab_reference``: its modules import each other
    relatively (engine.py from .engine_parts), and its dataclasses look their module up."""
    import importlib
    import importlib.util

    folder = Path(__file__).resolve().parents[1] / "tests" / "reference"
    if not (folder / f"{name}.py").exists():
        return None
    if "blocklab_reference" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "blocklab_reference", folder / "__init__.py", submodule_search_locations=[str(folder)])
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = package
        spec.loader.exec_module(package)
    return importlib.import_module(f"blocklab_reference.{name}")


def _model_alone(arr: Any, arrive: np.ndarray, lba: np.ndarray, nsec: np.ndarray,
                 w: np.ndarray, kw: dict[str, Any]) -> float:
    """Nanoseconds per drive operation of the HDD model alone (``hdd.replay_ops``, the best of
    three): the engine's own operations of this replay, served in the order it started them,
    which gives the engine's completions (tests/test_engine.py). With no engine cost at all, a
    replay could go no faster than this times the operations per request."""
    from blocklab.kernels.drive import hdd as H
    from blocklab.pipeline.model.array import hdd_tables
    from blocklab.pipeline.replay import run_engine

    res = run_engine(arr, arrive, lba, nsec, w, drive_ops=True, **kw)
    o = np.argsort(res["op_start"], kind="stable")
    op = [np.ascontiguousarray(res[f"op_{k}"][o])
          for k in ("drive", "start", "qtime", "lba", "n", "write")]
    tables = hdd_tables(arr.models)
    done = np.zeros(len(o), np.int64)
    best = np.inf
    for _ in range(3):
        st = H.new_state(len(arr.d_model))
        t = time.perf_counter()
        H.replay_ops(*tables, st, *op, done)
        best = min(best, time.perf_counter() - t)
    return best / max(len(o), 1) * 1e9


def machine_reference() -> dict[str, float]:
    """This machine's speed today, in code that does not change between commits: a replay's
    figures move with the machine (a side-by-side run of eleven commits on 2026-11-29 found the
    code as fast as on 11-26, when the bench measured it 1.5 x faster). Nanoseconds per
    operation of a binary heap of 64 K keys (kernels/calibrate.py, the best of five; compiled
    here the first time: no command uses it, so make setup does not) and milliseconds to sort
    4 M random int64 with numpy (the best of three)."""
    from blocklab.kernels.calibrate import heap_loop as loop

    loop(1000, 1 << 16)  # (compile, or load from the cache)
    n = 4_000_000
    best = np.inf
    for _ in range(5):
        t = time.perf_counter()
        loop(n, 1 << 16)
        best = min(best, time.perf_counter() - t)
    keys = np.random.default_rng(9).integers(0, 1 << 62, 4_000_000)
    sort_best = np.inf
    for _ in range(3):
        t = time.perf_counter()
        np.sort(keys)
        sort_best = min(sort_best, time.perf_counter() - t)
    return {"heap_ns_per_op": best / n * 1e9, "sort_4m_ms": sort_best * 1e3}


def replay_speeds(scale: float = 1.0, reps: int = 5) -> dict[str, float]:
    """Engine throughput on an 8-drive RAID-5 of Atlas 10K drives (HDD model), and the
    plain-Python reference simulator's on the same small trace (fixed drive model): the
    median of ``reps`` replays of each case; ``scale`` multiplies every trace's length (the
    bench's figures are at 1; tests/test_bench_sections.py runs the section small)."""
    from blocklab.pipeline.model.config import parse_array
    from blocklab.pipeline.replay import build_array, run_engine

    cfg = parse_array({"group": [{"name": "r5", "layout": "raid5", "width": 8,
                                  "stripe_unit": "64KiB", "drive": "atlas10k"}]},
                      Path("bench.toml"))
    arr = build_array(cfg)
    rng = np.random.default_rng(3)
    out: dict[str, float] = {f"machine_{k}": v for k, v in machine_reference().items()}

    def r5(scheduler, fixed_ns=None):
        """The same RAID-5, its drives looking at 64 queued operations with ``scheduler``."""
        return build_array(parse_array({"group": [{
            "name": "r5", "layout": "raid5", "width": 8, "stripe_unit": "64KiB",
            "drive": "atlas10k", "scheduler": scheduler, "queue_depth": 64}]},
            Path("bench.toml")), fixed_ns=fixed_ns)

    clook = r5("clook")

    def run(name, n, size_sectors, sequential, iops, closed=0, arr=arr):
        n = max(int(n * scale), 200)
        rng = np.random.default_rng(3)  # the same requests for the HDD and fixed-time runs
        if sequential:
            lba = (np.arange(n, dtype=np.int64) * size_sectors) % (arr.capacity - size_sectors)
        else:
            lba = rng.integers(0, (arr.capacity - size_sectors) // 8, n).astype(np.int64) * 8
        # closed loop: every request is ready at 0, so 64 are always outstanding
        arrive = (np.zeros(n) if closed else
                  np.cumsum(rng.exponential(1e9 / iops, n))).astype(np.int64)
        nsec = np.full(n, size_sectors, dtype=np.int64)
        w = (rng.random(n) < 0.3).astype(np.int64)
        kw = dict(closed=closed > 0, outstanding=max(closed, 1))
        run_engine(arr, arrive[:64], lba[:64], nsec[:64], w[:64], **kw)
        rates = []
        for _ in range(reps):  # the median of five, as issue 21 states its goals
            t = time.perf_counter()
            res = run_engine(arr, arrive, lba, nsec, w, **kw)
            rates.append(n / (time.perf_counter() - t))
        out[name] = float(np.median(rates))
        out[name.replace("requests_per_s", "drive_ops_per_request")] = float(res["ops"].sum()) / n
        if arr.models.hp.size and not name.startswith("fixed") and "sptf" not in name:
            out[name.replace("requests_per_s", "model_ns_per_op")] = _model_alone(
                arr, arrive[:n // 5], lba[:n // 5], nsec[:n // 5], w[:n // 5], kw)

    # 400 requests/s of 4 KiB, 30 % writes (read-modify-write: 4 operations) keep the eight
    # drives about two-thirds busy: a steady state, not a queue growing without bound
    run("random_4k_open_requests_per_s", 1_000_000, 8, False, 400)
    # 20 requests/s of 1 MiB (30 % writes): busy drives, not a queue growing without bound
    run("sequential_1m_open_requests_per_s", 200_000, 2048, True, 20)
    run("random_4k_closed64_requests_per_s", 500_000, 8, False, 0, closed=64, arr=clook)
    # the same with the drives ordering their queues by positioning time (the HDD model ranks
    # every queued operation at each pick): what sptf costs against C-LOOK
    run("random_4k_closed64_sptf_requests_per_s", 500_000, 8, False, 0, closed=64,
        arr=r5("sptf"))
    # the same requests on drives that take a fixed time (5 ms + 1 us a sector): what the
    # engine costs without the HDD model
    farr = build_array(cfg, fixed_ns=(5_000_000, 1000))
    fclook = r5("clook", fixed_ns=(5_000_000, 1000))
    run("fixed_random_4k_open_requests_per_s", 1_000_000, 8, False, 400, arr=farr)
    run("fixed_sequential_1m_open_requests_per_s", 200_000, 2048, True, 20, arr=farr)
    run("fixed_random_4k_closed64_requests_per_s", 500_000, 8, False, 0, closed=64, arr=fclook)
    # the reference simulator, on a trace small enough for Python
    ref = _reference("engine")
    if ref is not None:
        n = max(int(20_000 * scale), 200)
        lba = rng.integers(0, farr.capacity // 8 - 1, n).astype(np.int64) * 8
        arrive = np.cumsum(rng.exponential(1e9 / 600, n)).astype(np.int64)
        nsec = np.full(n, 8, dtype=np.int64)
        w = (rng.random(n) < 0.3).astype(np.int64)
        # Python's cyclic collector scans every live object each full collection, and a
        # process that compiled kernels holds hundreds of thousands of Numba's: measured, the
        # reference then ran 10x slower (1.8 k instead of 20 k requests/s), so the ratio said
        # more about this process than about the reference. Objects alive now are set aside
        gc.collect()
        gc.freeze()
        try:
            t = time.perf_counter()
            ref.simulate(farr, arrive, lba, nsec, w, 5_000_000, 1000)  # returns a Result
            py = n / (time.perf_counter() - t)
        finally:
            gc.unfreeze()
        run_engine(farr, arrive[:10], lba[:10], nsec[:10], w[:10])
        t = time.perf_counter()
        run_engine(farr, arrive, lba, nsec, w)
        nb = n / (time.perf_counter() - t)
        out["reference_python_requests_per_s"] = py
        out["kernel_vs_reference"] = nb / py
    return out
