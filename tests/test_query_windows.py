"""The rebuild-windows query against a plain-Python reference: each failure's window (to the
first rebuild_end of its group at or after it, the run's end when none), what the host saw
in it and before it, at the edges (completions exactly at the failure and the end, failures
after the last completion) and on random runs (Hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .golden import event, make_run
from .test_query import close, q


def _rebuild_reference(ios, failures, ends, before_ns=0):
    """Plain NumPy: per failure (time, group, drive), its window and foreground figures."""
    comp = ios["arrival_ns"] + ios["latency_ns"]
    out = []
    for t, grp, drv in failures:
        cands = [e for e in ends if e[1] == grp and e[0] >= t]
        mine = [e for e in cands if e[2] == drv]
        end = min(e[0] for e in (mine or cands)) if cands else None
        first, last = int(ios["arrival_ns"].min()), int(comp.max())
        w_end = end if end is not None else max(last, t)
        base = max(t - before_ns, min(first, t)) if before_ns else min(first, t)
        # an unfinished rebuild's window closes at the last completion, and holds it
        inw = (comp >= t) & ((comp < w_end) | ((comp == w_end) & (end is None)))
        bef = (comp >= base) & (comp < t)

        def p99(sel):
            return np.quantile(ios["latency_ns"][sel], .99) / 1e6 if sel.any() else None

        def mbs(sel, a, b):
            return ios["size_bytes"][sel].sum() / 1e6 / ((b - a) / 1e9) if b > a else None

        # MB/s over the part of each span the host's I/O covered (first arrival, last
        # completion)
        host = max(min(w_end, last) - max(t, first), 0)
        out.append({"window_s": (w_end - t) / 1e9, "rebuild_done": end is not None,
                    "window_host_s": host / 1e9,
                    "window_requests": int(inw.sum()), "before_requests": int(bef.sum()),
                    "window_mb_per_s": mbs(inw, max(t, first), min(w_end, last)),
                    "before_mb_per_s": mbs(bef, base, min(t, last)),
                    "window_p99_ms": p99(inw), "before_p99_ms": p99(bef)})
    return out


def _check_windows(rows, ref):
    assert len(rows) == len(ref)
    for r, w in zip(rows, ref, strict=True):
        for k, v in w.items():
            assert r[k] == v if isinstance(v, bool | int) else close(r[k], v), (k, r[k], v)
        if w["before_mb_per_s"] and w["window_mb_per_s"] is not None:
            assert close(r["mb_per_s_ratio"], w["window_mb_per_s"] / w["before_mb_per_s"])
        if w["before_p99_ms"] and w["window_p99_ms"] is not None:
            assert close(r["p99_ratio"], w["window_p99_ms"] / w["before_p99_ms"])


def test_rebuild_window_of_a_failure(tmp_path):
    """Failure at T = 10 s, rebuild_end at T + W = 25 s: requests before, inside and after."""
    rng = np.random.default_rng(1)
    n = 3000
    arr = np.sort(rng.integers(0, 40_000_000_000, n))
    t_fail, t_end = 10_000_000_000, 25_000_000_000
    inside = (arr >= t_fail) & (arr < t_end)
    lat = np.where(inside, rng.integers(5_000_000, 80_000_000, n),
                   rng.integers(1_000_000, 20_000_000, n))
    ios = {"arrival_ns": arr, "latency_ns": lat, "op": rng.integers(0, 2, n),
           "size_bytes": rng.choice([4096, 65536], n)}
    ev = [event(t_fail, "failure", "g", 3), event(t_fail + 1_000_000, "rebuild_start", "g", 3),
          event(17_000_000_000, "rebuild_progress", "g", 3),
          event(t_end, "rebuild_end", "g", 3)]
    run = make_run(tmp_path / "r", ios, ev, drives=6)
    rows = q([run], "rebuild-windows")
    _check_windows(rows, _rebuild_reference(ios, [(t_fail, "g", 3)], [(t_end, "g", 3)]))
    r = rows[0]
    assert (r["failure_s"], r["rebuild_end_s"], r["window_s"]) == (10.0, 25.0, 15.0)
    assert close(r["rebuild_start_s"], 10.001) and close(r["rebuild_s"], 14.999)
    assert r["p99_ratio"] > 1  # the window's latencies were made slower
    # the baseline limited to the 5 s before the failure
    rows5 = q([run], "rebuild-windows", before_s=5)
    _check_windows(rows5, _rebuild_reference(ios, [(t_fail, "g", 3)], [(t_end, "g", 3)],
                                             before_ns=5_000_000_000))


def test_rebuild_window_edges(tmp_path):
    """Completions exactly at the failure count in the window and exactly at the rebuild's end
    do not (the window is [failure, end)); a failure after the last completion takes its
    baseline over the run's own span."""
    ms = 1_000_000
    arr = np.array([0, 100, 200, 300, 400]) * ms
    lat = np.array([100, 100, 100, 100, 50]) * ms  # completions 100, 200, 300, 400, 450 ms
    ios = {"arrival_ns": arr, "latency_ns": lat, "op": np.array([0, 1, 0, 1, 0]),
           "size_bytes": np.array([4096, 8192, 4096, 8192, 4096])}
    for t_fail, t_end in ((200, 400), (1000, 1500)):
        ev = [event(t_fail * ms, "failure", "g", 0), event(t_end * ms, "rebuild_end", "g", 0)]
        run = make_run(tmp_path / f"r{t_fail}", ios, ev)
        rows = q([run], "rebuild-windows")
        _check_windows(rows, _rebuild_reference(ios, [(t_fail * ms, "g", 0)],
                                                [(t_end * ms, "g", 0)]))
        if t_fail == 200:  # 200 and 300 ms inside, 400 (the end) not
            assert rows[0]["window_requests"] == 2 and rows[0]["before_requests"] == 1
        else:  # all five before, over the run's 0.45 s
            assert rows[0]["before_requests"] == 5
            assert close(rows[0]["before_mb_per_s"], 28672 / 1e6 / 0.45)


def test_rebuild_windows_several_groups_and_unfinished(tmp_path):
    rng = np.random.default_rng(2)
    n = 2000
    arr = np.sort(rng.integers(0, 30_000_000_000, n))
    ios = {"arrival_ns": arr, "latency_ns": rng.integers(1_000_000, 50_000_000, n),
           "op": rng.integers(0, 2, n), "size_bytes": rng.choice([4096, 8192], n)}
    ev = [event(5_000_000_000, "failure", "a", 1), event(12_000_000_000, "rebuild_end", "a", 7),
          event(8_000_000_000, "failure", "b", 4),  # never rebuilt
          event(9_000_000_000, "rebuild_end", "a", 9),  # an earlier end, another drive
          event(20_000_000_000, "failure", "a", 9)]  # after every end of group a
    run = make_run(tmp_path / "r", ios, ev, drives=10)
    rows = q([run], "rebuild-windows")
    ref = _rebuild_reference(
        ios, [(5_000_000_000, "a", 1), (8_000_000_000, "b", 4), (20_000_000_000, "a", 9)],
        [(12_000_000_000, "a", 7), (9_000_000_000, "a", 9)])
    _check_windows(rows, ref)
    assert [r["rebuild_done"] for r in rows] == [True, False, False]
    assert rows[0]["window_s"] == 4.0  # no end names drive 1: the group's first end (9 s)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 60), seed=st.integers(0, 2**31),
       # past the last completion too (a failure after the trace's requests); on a 100 ms grid
       # too, where completions fall exactly on the failure and on the rebuild's end
       t_fail=st.one_of(st.integers(0, 20_000), st.integers(0, 120).map(lambda k: 100 * k)),
       w=st.one_of(st.none(), st.integers(0, 10_000), st.integers(0, 50).map(lambda k: 100 * k)),
       before=st.integers(0, 3_000), grid=st.booleans())
def test_rebuild_windows_property(tmp_path_factory, n, seed, t_fail, w, before, grid):
    rng = np.random.default_rng(seed)
    ms = 1_000_000
    step = 100 if grid else 1
    ios = {"arrival_ns": np.sort(rng.integers(0, 10_000 // step, n)) * step * ms,
           "latency_ns": rng.integers(1, max(2, 500 // step), n) * step * ms,
           "op": rng.integers(0, 2, n), "size_bytes": rng.integers(1, 64, n) * 512}
    ev = [event(t_fail * ms, "failure", "g", 0)]
    ends = []
    if w is not None:
        ev.append(event((t_fail + w) * ms, "rebuild_end", "g", 0))
        ends.append(((t_fail + w) * ms, "g", 0))
    run = make_run(tmp_path_factory.mktemp("p") / "r", ios, ev)
    _check_windows(q([run], "rebuild-windows", before_s=before / 1000),
                   _rebuild_reference(ios, [(t_fail * ms, "g", 0)], ends, before * ms))
