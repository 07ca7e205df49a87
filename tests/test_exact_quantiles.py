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
