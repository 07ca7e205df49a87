"""exact_quantiles (queries/_macros.sql), the bounded-memory quantiles every named query uses,
against numpy.quantile (linear interpolation, the definition quantile_cont follows) on random
groups of integers and floats with ties, single values and nulls; and under a memory limit
too small for quantile_cont, which it must not need."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blocklab.pipeline.query import duck

QS = [0.0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0]


def _macro(con, table: pa.Table, qs: list[float]) -> dict[tuple[int, float], float]:
    con.register("vals", table)
    rows = con.execute("SELECT g, q, value FROM exact_quantiles('vals', ?)", [qs]).fetchall()
    con.unregister("vals")
    return {(g, q): v for g, q, v in rows}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3),
                          st.one_of(st.none(), st.integers(-5, 10**12))), min_size=1,
                max_size=300),
       st.booleans())
def test_matches_numpy_quantile(rows, as_float):
    g = np.array([r[0] for r in rows], np.int64)
    x = [r[1] for r in rows]
    xs = pa.array([None if v is None else (v / 7 if as_float else v) for v in x],
                  pa.float64() if as_float else pa.int64())
    got = _macro(duck(threads=1), pa.table({"g": g, "x": xs}), QS)
    for grp in sorted(set(g.tolist())):
        vals = np.array([v for gi, v in zip(g.tolist(), xs.to_pylist(), strict=True)
                         if gi == grp and v is not None], np.float64)
        if not len(vals):
            assert not any(k[0] == grp for k in got)  # no values: no rows, as quantile_cont's NULL
            continue
        for q in QS:
            want = float(np.quantile(vals, q))
            assert got[(grp, q)] == pytest.approx(want, rel=1e-12, abs=1e-9), (grp, q)


def test_spills_where_quantile_cont_cannot():
    """Ten million values under a 100 MB limit: exact_quantiles answers (its aggregates
    spill), quantile_cont runs out of memory."""
    import duckdb

    con = duck(threads=1)
    con.execute("SET memory_limit = '100MB'")
    con.execute("CREATE TABLE v AS SELECT i % 3 AS g, (i * 7919) % 10000019 AS x "
                "FROM range(10000000) t(i)")
    got = dict(((g, q), v) for g, q, v in con.execute(
        "SELECT g, q, value FROM exact_quantiles('v', [0.5, 0.99])").fetchall())
    i = np.arange(10_000_000, dtype=np.int64)
    x = (i * 7919) % 10000019
    for grp in range(3):
        for q in (0.5, 0.99):
            assert got[(grp, q)] == pytest.approx(float(np.quantile(x[i % 3 == grp], q)),
                                                  rel=1e-12)
    with pytest.raises(duckdb.OutOfMemoryException):
        con.execute("SELECT g, quantile_cont(x, [0.5, 0.99]) FROM v GROUP BY g").fetchall()



def test_latency_summary_stays_within_the_limit_without_spilling(tmp_path, monkeypatch):
    """latency-summary over three million requests under a 40 MB DuckDB limit (BLOCKLAB_DUCKDB_
    MEMORY) and no temporary disk at all, its percentiles numpy's. Its values come as a UNION
    ALL of two grouping sets; exact_quantiles picks the values of the few buckets it needs by a
    filter against their list, where a join was built on the values' side and ran out of
    memory (10 M requests under 100 MB). Nothing is spilled per request: the query that kept
    its requests' run and operation names in a materialized CTE spilled them, and over a
    billion requests filled 24 GB of disk (it fails here: no room to offload a block)."""
    from blocklab.pipeline import query as Q
    from blocklab.pipeline.query import run_query

    from .golden import make_run

    n = 3_000_000
    rng = np.random.default_rng(1)
    lat = rng.lognormal(15, 1.0, n).astype(np.int64)
    op = rng.integers(0, 2, n)
    make_run(tmp_path / "run", {"arrival_ns": np.arange(n, dtype=np.int64) * 1000,
                                "latency_ns": lat, "op": op,
                                "size_bytes": rng.choice([4096, 65536], n)})
    monkeypatch.setenv("BLOCKLAB_DUCKDB_MEMORY", "40MB")
    duck = Q.duck

    def no_spill(threads=None):
        con = duck(threads)
        con.execute("SET max_temp_directory_size = '0KB'")
        return con

    monkeypatch.setattr(Q, "duck", no_spill)
    rows = run_query([str(tmp_path / "run")], "latency-summary", None, {}).rows()
    every = {r["op"]: r for r in rows if r["size_class_bytes"] is None}
    for name, code in (("read", 0), ("write", 1)):
        x = lat[op == code]
        assert every[name]["requests"] == len(x)
        for col, q in (("p50_ms", 0.5), ("p99_ms", 0.99), ("p999_ms", 0.999)):
            assert every[name][col] == pytest.approx(np.quantile(x, q) / 1e6, rel=1e-12)
