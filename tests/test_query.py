"""The query library against independent computations: each named query over the golden runs
(and over run folders written here through RUN_SCHEMAS) is recomputed with NumPy or Polars
from the same Parquet files; plus the views, the query headers, the CLI and bad input. btt and
the working set (the trace-side queries) are in tests/test_query_traces.py."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.query import (
    BOTH_VIEWS,
    RUN_VIEWS,
    TRACE_VIEWS,
    catalog,
    connect,
    find_sources,
    placeholders,
    run_query,
)
from blocklab.traces.schema import COLUMNS, RUN_COLUMNS, RUN_SCHEMA_VERSION

from . import golden
from .golden import event, make_run

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

runner = CliRunner()
OPS = {0: "read", 1: "write"}


def close(a, b, rel=1e-9) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-9)


def ios_of(run: Path) -> dict[str, np.ndarray]:
    t = pq.read_table(run / "ios.parquet")
    return {c: t.column(c).to_numpy() for c in t.column_names}


def q(paths, name=None, sql=None, **params) -> list[dict]:
    return run_query([str(p) for p in paths], name, sql,
                     {k: str(v) for k, v in params.items()}).rows()


@pytest.fixture
def work(golden_work: Path) -> Path:
    return golden_work


@pytest.fixture
def runs(golden_runs: dict[str, Path]) -> dict[str, Path]:
    return golden_runs


# ---------------------------------------------------------------------------------------------
# the catalog


def test_every_query_file_has_a_header_and_its_parameters():
    cat = catalog()
    for want in ("latency-summary", "bandwidth", "rebuild-windows", "drive-utilization", "btt",
                 "workload", "compare"):
        assert want in cat
    known = {*RUN_VIEWS, *TRACE_VIEWS, *BOTH_VIEWS}
    for name, info in cat.items():
        assert len(info.description) > 20, name
        assert set(info.views) <= known, (name, info.views)
        assert {p.name for p in info.params} == placeholders(info.sql), name
        for p in info.params:
            assert p.doc, (name, p.name)


def test_list_names_every_query_with_its_parameters():
    res = runner.invoke(app, ["query", "--list", "--format", "json"])
    assert res.exit_code == 0, res.output
    listed = {d["name"]: d for d in json.loads(res.output)}
    assert set(listed) == set(catalog())
    assert listed["bandwidth"]["params"] == [
        {"name": "interval_s", "default": 1.0, "doc": catalog()["bandwidth"].params[0].doc}]
    res = runner.invoke(app, ["query", "--list"])
    assert res.exit_code == 0 and "rebuild-windows" in res.output and "before_s" in res.output


# ---------------------------------------------------------------------------------------------
# each query against NumPy / Polars


def test_latency_summary(runs):
    rows = q([runs["raid0"].parent], "latency-summary")
    seen = 0
    for name, run in runs.items():
        ios = ios_of(run)
        cls = np.where(ios["size_bytes"] > 0,
                       2 ** np.ceil(np.log2(np.maximum(ios["size_bytes"], 1))), 0).astype(int)
        for op in (0, 1):
            for c in [None, *sorted(set(cls[ios["op"] == op].tolist()))]:
                sel = (ios["op"] == op) & ((cls == c) if c is not None else True)
                lat = ios["latency_ns"][sel].astype(float)
                row = next(r for r in rows if r["run"] == name and r["op"] == OPS[op]
                           and r["size_class_bytes"] == c)
                assert row["requests"] == len(lat)
                assert close(row["mean_ms"], lat.mean() / 1e6)
                for key, f in (("p50_ms", .5), ("p90_ms", .9), ("p99_ms", .99),
                               ("p999_ms", .999)):
                    assert close(row[key], np.quantile(lat, f) / 1e6), (name, op, c, key)
                assert close(row["max_ms"], lat.max() / 1e6)
                seen += 1
    assert seen == len(rows)


@pytest.mark.parametrize("quantile", [0.0, 0.5, 0.99, 0.999, 1.0])
def test_run_latency_is_numpy_s_mean_and_quantile(runs, quantile):
    """run-latency (what replay prints) reads its quantile off a sort: the same as numpy's
    linear quantile over the run's latencies."""
    for run in runs.values():
        lat = ios_of(run)["latency_ns"].astype(float)
        (row,) = q([run], "run-latency", q=quantile)
        assert row["requests"] == len(lat)
        assert close(row["mean_ms"], lat.mean() / 1e6)
        assert close(row["quantile_ms"], np.quantile(lat, quantile) / 1e6)


def test_run_latency_rejects_a_quantile_beyond_one(runs):
    res = runner.invoke(app, ["query", str(runs["raid0"]), "run-latency", "-p", "q=1.5"])
    assert res.exit_code == 2 and "q must be between 0 and 1" in res.output
    assert len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize("interval_s", [1.0, 0.3])
def test_bandwidth(runs, interval_s):
    rows = q([runs["raid0"].parent], "bandwidth", interval_s=interval_s)
    iv = int(round(interval_s * 1e9))
    want = []
    for name, run in runs.items():
        ios = ios_of(run)
        end = int(ios["complete_ns"].max())
        # intervals [j iv, (j + 1) iv) up to the run's end; the last one ends there (a
        # completion exactly at its start belongs to the one before), and its rates are per
        # its own length (before: per a whole interval, 304 reads in 0.489 s as 304 IOPS)
        last = max((end - 1) // iv, 0)
        k = np.minimum(ios["complete_ns"] // iv, last)
        for op in (0, 1):
            sel = ios["op"] == op
            n = np.bincount(k[sel], minlength=last + 1)
            b = np.bincount(k[sel], weights=ios["size_bytes"][sel], minlength=last + 1)
            for j in range(last + 1):
                length = min(iv, end - j * iv) / 1e9
                want.append((name, OPS[op], j * iv / 1e9, int(n[j]), int(b[j]),
                             b[j] / 1e6 / length, n[j] / length, length))
    got = [(r["run"], r["op"], r["t_s"], r["requests"], r["bytes"], r["mb_per_s"], r["iops"],
            r["interval_s"]) for r in rows]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g[:2] == w[:2] and g[3:5] == w[3:5] and close(g[2], w[2])
        assert close(g[5], w[5]) and close(g[6], w[6]) and close(g[7], w[7])
    assert any(w[7] < interval_s for w in want)  # some run ends inside an interval
    total = sum(int(ios_of(r)["size_bytes"].sum()) for r in runs.values())
    assert sum(r["bytes"] for r in rows) == total


def test_bandwidth_rejects_a_zero_interval(runs):
    res = runner.invoke(app, ["query", str(runs["raid0"]), "bandwidth", "-p", "interval_s=0"])
    assert res.exit_code == 2
    assert "bandwidth" in res.output and "interval_s must be" in res.output
    assert len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize("interval_s", [0.0, 2.0])
def test_drive_utilization(runs, interval_s):
    rows = q([runs["raid0"].parent], "drive-utilization", interval_s=interval_s)
    frames = []
    for name, run in runs.items():
        frames.append(pl.read_parquet(run / "drive_busy.parquet")
                      .with_columns(pl.lit(name).alias("run"),
                                    pl.col("group").cast(pl.Utf8)))
    b = pl.concat(frames)
    iv = int(round(interval_s * 1e9))
    b = b.with_columns(((pl.col("time_ns") // iv) * iv if iv else pl.col("time_ns"))
                       .alias("t"))
    want = (b.group_by(["run", "drive", "t"])
            .agg(pl.col("interval_ns").sum(), pl.col("busy_ns").sum(), pl.col("ops").sum(),
                 pl.col("bytes").sum(), pl.col("queue_op_ns").sum())
            .sort(["run", "drive", "t"]).to_dicts())
    assert len(rows) == len(want)
    for r, w in zip(rows, want, strict=True):
        assert (r["run"], r["drive"]) == (w["run"], w["drive"])
        assert close(r["t_s"], w["t"] / 1e9)
        assert close(r["busy_fraction"], w["busy_ns"] / w["interval_ns"])
        assert close(r["queue_depth"], w["queue_op_ns"] / w["interval_ns"])
        assert r["ops"] == w["ops"]
        assert close(r["mb_per_s"], w["bytes"] / 1e6 / (w["interval_ns"] / 1e9))
        assert r["role"] == "member" and r["group"] in ("r0", "r5")


def test_compare_keeps_a_run_without_requests(tmp_path):
    """A run that replayed nothing dropped out of the table (an analysis review): it has its
    column, requests 0 and no rates or latencies, beside a run with requests."""
    z = np.zeros(0, np.int64)
    empty = make_run(tmp_path / "s" / "empty", {"arrival_ns": z, "latency_ns": z, "op": z,
                                                "size_bytes": z})
    full = make_run(tmp_path / "s" / "full", {"arrival_ns": [0, 10], "latency_ns": [5, 5],
                                              "op": [0, 1], "size_bytes": [4096, 4096]})
    assert empty.parent == full.parent
    rows = {r["metric"]: r for r in q([empty.parent], "compare")}
    assert rows["requests"]["empty"] == 0 and rows["requests"]["full"] == 2
    assert rows["p99_ms"]["empty"] is None and rows["mb_per_s"]["empty"] is None
    assert rows["failures"]["empty"] == 0
    # no rate, span or latency of nothing (a 0 would read as a measured figure)
    for m in ("duration_s", "iops", "mb_per_s", "read_mb_per_s", "write_mb_per_s", "mean_ms",
              "p50_ms", "p99_ms", "p999_ms", "max_ms"):
        assert rows[m]["empty"] is None, (m, rows[m]["empty"])
        assert rows[m]["full"] is not None, m


def test_compare(runs):
    rows = {r["metric"]: r for r in q([runs["raid0"].parent], "compare")}
    for name, run in runs.items():
        ios = ios_of(run)
        lat = ios["latency_ns"].astype(float)
        dur = (ios["complete_ns"].max() - ios["arrival_ns"].min()) / 1e9
        busy = pl.read_parquet(run / "drive_busy.parquet").group_by("drive").agg(
            (pl.col("busy_ns").sum() / pl.col("interval_ns").sum()).alias("f"))["f"]
        want = {
            "requests": len(lat), "duration_s": dur, "iops": len(lat) / dur,
            "mb_per_s": ios["size_bytes"].sum() / 1e6 / dur,
            "read_mb_per_s": ios["size_bytes"][ios["op"] == 0].sum() / 1e6 / dur,
            "write_mb_per_s": ios["size_bytes"][ios["op"] == 1].sum() / 1e6 / dur,
            "mean_ms": lat.mean() / 1e6, "p50_ms": np.quantile(lat, .5) / 1e6,
            "p99_ms": np.quantile(lat, .99) / 1e6, "p999_ms": np.quantile(lat, .999) / 1e6,
            "max_ms": lat.max() / 1e6,
            "read_p99_ms": np.quantile(lat[ios["op"] == 0], .99) / 1e6,
            "write_p99_ms": np.quantile(lat[ios["op"] == 1], .99) / 1e6,
            "drive_busy_mean": float(busy.mean()), "drive_busy_max": float(busy.max()),
            "failures": 1 if name == "raid5" else 0, "data_loss": 0,
            "lost_requests": int(ios["lost"].sum()),
        }
        assert list(rows) == list(want)
        for k, v in want.items():
            assert close(rows[k][name], v), (name, k)


def test_latency_cdf(runs):
    rows = q([runs["raid0"].parent], "latency-cdf")
    fr = [i / 200 for i in range(200)] + [0.998, 0.999, 0.9995, 0.9999, 0.99995, 0.99999, 1.0]
    # each fraction once (0.995 came twice)
    for name, run in runs.items():
        ios = ios_of(run)
        for op in (0, 1):
            lat = ios["latency_ns"][ios["op"] == op].astype(float)
            mine = [r for r in rows if r["run"] == name and r["op"] == OPS[op]]
            assert [r["fraction"] for r in mine] == pytest.approx(fr)
            assert [r["latency_ms"] for r in mine] == pytest.approx(
                list(np.quantile(lat, fr) / 1e6), rel=1e-9)
            assert all(r["requests"] == len(lat) for r in mine)


def _fixed_size_runs(root: Path, sizes: list[int], n: int = 50) -> list[Path]:
    rng = np.random.default_rng(5)
    out = []
    for s in sizes:
        arr = np.sort(rng.integers(0, 2_000_000_000, n))
        lat = rng.integers(1_000_000, 5_000_000 + s * 100, n)
        op = rng.integers(0, 2, n)
        out.append(make_run(root / f"size-{s // 1024}k", {
            "arrival_ns": arr, "latency_ns": lat, "op": op, "size_bytes": np.full(n, s)}))
    return out


def test_size_sweep(tmp_path):
    runs = _fixed_size_runs(tmp_path / "sweep", [4096, 65536, 1 << 20])
    rows = q([tmp_path / "sweep"], "size-sweep")
    assert [r["size_bytes"] for r in rows] == [4096] * 2 + [65536] * 2 + [1 << 20] * 2
    for run in runs:
        ios = ios_of(run)
        dur = (ios["complete_ns"].max() - ios["arrival_ns"].min()) / 1e9
        for op in (0, 1):
            sel = ios["op"] == op
            r = next(x for x in rows if x["run"] == run.name and x["op"] == OPS[op])
            assert r["requests"] == int(sel.sum())
            assert close(r["mb_per_s"], ios["size_bytes"][sel].sum() / 1e6 / dur)
            assert close(r["iops"], sel.sum() / dur)
            assert close(r["p99_ms"], np.quantile(ios["latency_ns"][sel], .99) / 1e6)
    # a run whose requests differ in size has none
    mixed = make_run(tmp_path / "mixed", {"arrival_ns": [0, 10], "latency_ns": [5, 5],
                                          "op": [0, 0], "size_bytes": [4096, 8192]})
    assert [r["size_bytes"] for r in q([mixed], "size-sweep")] == [None]


# ---------------------------------------------------------------------------------------------
# phases on run folders written here (rebuild-windows: test_query_windows.py)


def _phases_reference(ios, failures, ends, starts=None) -> list[tuple]:
    """The phases query in plain Python: (phase, op, requests, MB/s, IOPS, mean ms). The
    phase after the failure is "degraded" when no rebuild started after it (``starts``; None:
    one did)."""
    arr = [int(x) for x in ios["arrival_ns"]]
    comp = [a + int(x) for a, x in zip(arr, ios["latency_ns"], strict=False)]
    ops = [int(o) for o in ios["op"]]
    size = [int(x) for x in ios["size_bytes"]]
    t0, t1 = min(arr), max(comp)
    if failures:
        f = min(failures)
        later = [e for e in ends if e >= f]
        end = max(later) if later else None
        rebuilt = starts is None or any(s >= f for s in starts)
        spans = [("before", t0, f), ("rebuilding" if rebuilt else "degraded", f,
                                     end if end is not None else t1 + 1)]
        if end is not None and end <= t1:
            spans.append(("after", end, t1 + 1))
    else:
        spans = [("all", t0, t1 + 1)]
    out = []
    for name, a, b in spans:
        for op in sorted(set(ops)):
            idx = [i for i in range(len(arr)) if ops[i] == op]
            oa = min(arr[i] for i in idx)
            ob = max(comp[i] for i in idx) + 1
            act = max(min(b, ob) - max(a, oa), 0) / 1e9
            sel = [i for i in idx if a <= comp[i] < b]
            nbytes = sum(size[i] for i in sel)
            mean = (sum(comp[i] - arr[i] for i in sel) / len(sel) / 1e6) if sel else None
            out.append((name, "read" if op == 0 else "write", len(sel),
                        nbytes / 1e6 / act if act else None, len(sel) / act if act else None,
                        mean))
    return out


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 50), seed=st.integers(0, 2**31),
       fail=st.one_of(st.none(), st.integers(0, 12_000)),
       w=st.one_of(st.none(), st.integers(0, 12_000)), started=st.booleans())
def test_phases_property(tmp_path_factory, n, seed, fail, w, started):
    rng = np.random.default_rng(seed)
    ms = 1_000_000
    ios = {"arrival_ns": np.sort(rng.integers(0, 10_000, n)) * ms,
           "latency_ns": rng.integers(1, 500, n) * ms, "op": rng.integers(0, 2, n),
           "size_bytes": rng.integers(1, 64, n) * 512}
    ev, failures, ends, starts = [], [], [], []
    if fail is not None:
        ev.append(event(fail * ms, "failure", "g", 0))
        failures.append(fail * ms)
        if started or w is not None:  # a rebuild that ended started; one may never end
            ev.append(event(fail * ms, "rebuild_start", "g", 0))
            starts.append(fail * ms)
        if w is not None:
            ev.append(event((fail + w) * ms, "rebuild_end", "g", 0))
            ends.append((fail + w) * ms)
    run = make_run(tmp_path_factory.mktemp("p") / "r", ios, ev)
    rows = q([run], "phases")
    ref = _phases_reference(ios, failures, ends, starts)
    assert [(r["phase"], r["op"], r["requests"]) for r in rows] == [x[:3] for x in ref]
    for r, x in zip(rows, ref, strict=False):
        for got, want in ((r["mb_per_s"], x[3]), (r["iops"], x[4]), (r["mean_ms"], x[5])):
            assert (got is None) == (want is None) and (want is None or close(got, want))


def test_phases_of_a_replay_with_a_failure(runs):
    rows = q([runs["raid5"]], "phases")
    ios = ios_of(runs["raid5"])
    ref = _phases_reference(ios, [golden.FAILURE_NS], [golden.REBUILD_END_NS])
    assert [(r["phase"], r["op"], r["requests"]) for r in rows] == [x[:3] for x in ref]
    assert sum(r["requests"] for r in rows) == len(ios["arrival_ns"])


# ---------------------------------------------------------------------------------------------
# views and inputs


def test_run_names_and_nested_folders(tmp_path, runs):
    root = tmp_path / "sweep"
    shutil.copytree(runs["raid0"], root / "a" / "x=1")
    shutil.copytree(runs["raid5"], root / "b")
    shutil.copytree(runs["raid0"], root / ".hidden.tmp-1")  # a replay's temporary folder
    (root / "summary").mkdir()  # a folder with no run in it
    names = [s.name for s in find_sources([root])]
    assert names == ["a/x=1", "b"]
    rows = q([root], sql="SELECT run, count(*) AS n FROM ios GROUP BY run ORDER BY run")
    assert [r["run"] for r in rows] == ["a/x=1", "b"] and all(r["n"] == 600 for r in rows)
    direct = q([str(runs["raid0"]) + "/"], sql="SELECT DISTINCT run FROM ios")
    assert direct == [{"run": str(runs["raid0"])}]


def test_missing_optional_files_are_empty_tables_of_their_schema(runs):
    srcs = find_sources([runs["raid0"]])  # replayed without --drive-ops, no events
    assert not (runs["raid0"] / "drive_ops.parquet").exists()
    assert not (runs["raid0"] / "events.parquet").exists()
    con = connect(srcs)
    for view in ("drive_ops", "events", "trace"):
        assert con.execute(f"SELECT count(*) FROM {view}").fetchone() == (0,)
        cols = [d[0] for d in con.execute(f"SELECT * FROM {view}").description]
        want = RUN_COLUMNS[view] if view in RUN_COLUMNS else {**COLUMNS, "request": None}
        assert cols == ["run", *want]
    # the same types as a run that has the file
    con2 = connect(find_sources([runs["raid5"]]))
    for view in ("drive_ops", "events"):
        t1 = [str(d[1]) for d in con.execute(f"SELECT * FROM {view}").description]
        t2 = [str(d[1]) for d in con2.execute(f"SELECT * FROM {view}").description]
        assert t1 == t2, view
    assert con2.execute("SELECT count(*) FROM drive_ops").fetchone()[0] > 0
    con.close()
    con2.close()


def test_an_empty_answer_names_the_files_its_runs_lack(runs):
    """A query with no rows says which optional file the runs lack and what writes it; one
    whose runs have its files says nothing more."""
    res = runner.invoke(app, ["query", str(runs["raid0"]), "task-rates"])
    assert res.exit_code == 0, res.output
    note = res.stderr.strip().replace("\n", " ")
    assert note.startswith(f"(no rows: run {runs['raid0']}: no drive_ops.parquet"), note
    assert "--drive-ops" in note and "no events.parquet" in note
    res = runner.invoke(app, ["query", str(runs["raid5"]), "task-rates"])
    assert res.exit_code == 0, res.output
    # (this run has both files and no background task: no rows, and no file to blame)
    assert (runs["raid5"] / "drive_ops.parquet").is_file()
    assert (runs["raid5"] / "events.parquet").is_file()
    assert res.stderr == "(no rows)\n"


def test_runs_and_traces_together(work, runs):
    rows = q([work / "trace.parquet", runs["raid0"]],
             sql="SELECT run, count(*) AS n FROM requests GROUP BY run ORDER BY run")
    assert {r["run"]: r["n"] for r in rows} == {str(work / "trace.parquet"): 600,
                                                str(runs["raid0"]): 600}
    meta = q([runs["raid5"]], sql="SELECT run, interval_ns, requests, run_schema_version "
                                  "FROM runs")
    assert meta[0]["requests"] == 600 and meta[0]["run_schema_version"] == RUN_SCHEMA_VERSION
    drives = q([runs["raid5"]], sql="SELECT * FROM drives ORDER BY drive")
    assert [d["drive"] for d in drives] == [0, 1, 2, 3] and drives[0]["group"] == "r5"


# ---------------------------------------------------------------------------------------------
# the CLI


def test_cli_formats_agree(runs):
    base = ["query", str(runs["raid0"]), str(runs["raid5"]), "latency-summary"]
    want = run_query([str(runs["raid0"]), str(runs["raid5"])], "latency-summary").rows()
    res = runner.invoke(app, [*base, "--format", "json"])
    assert res.exit_code == 0 and json.loads(res.output) == want
    res = runner.invoke(app, [*base, "--format", "csv"])
    assert res.exit_code == 0
    got = list(csv.DictReader(io.StringIO(res.output)))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        for k, v in w.items():
            assert (g[k] == "" if v is None else close(g[k], v) if isinstance(v, float)
                    else g[k] == str(v)), k
    res = runner.invoke(app, base)
    assert res.exit_code == 0 and "p999_ms" in res.output and "raid0" in res.output


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(0, 30), max_size=8), keep=st.integers(0, 25))
def test_a_table_keeps_the_first_and_last_rows(sizes, keep):
    """The table's rows, from record batches of any sizes: every row when there are at most
    ``keep`` (or ``keep`` is 0), else the first ceil(keep/2) and the last floor(keep/2), as
    slicing the whole list gives them."""
    from blocklab.pipeline.cli._app import _ends

    at = np.cumsum([0, *sizes])
    batches = [pa.record_batch({"i": pa.array(range(a, b), pa.int64())})
               for a, b in zip(at[:-1], at[1:], strict=True)]
    head, tail, total = _ends(iter(batches), keep)
    rows = [{"i": i} for i in range(int(at[-1]))]
    assert total == len(rows)
    if keep == 0 or len(rows) <= keep:
        assert (head, tail) == (rows, [])
    else:
        assert head == rows[:(keep + 1) // 2]
        assert tail == (rows[len(rows) - keep // 2:] if keep // 2 else [])


def test_cli_table_of_a_long_answer_shows_its_ends(runs):
    """A table of more rows than --max-rows shows the first and the last of them, those the
    csv output (every row) has first and last, and says how many there are."""
    base = ["query", str(runs["raid0"]), "--sql",
            "SELECT request, latency_ns FROM ios ORDER BY request"]
    every = list(csv.DictReader(io.StringIO(runner.invoke(app, [*base, "-f", "csv"]).output)))
    assert len(every) > 12
    res = runner.invoke(app, [*base, "--max-rows", "12"])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("\u2502")]
    cells = [[c.strip() for c in ln.strip("\u2502").split("\u2502")] for ln in lines]
    want = [r["request"] for r in every[:6]] + ["\u2026"] + [r["request"] for r in every[-6:]]
    assert [c[0].replace(",", "") for c in cells] == want
    assert f"({len(every):,} rows, 12 shown" in res.stderr
    res = runner.invoke(app, [*base, "--max-rows", "0"])
    assert res.exit_code == 0 and "shown" not in res.stderr
    assert sum(ln.startswith("\u2502") for ln in res.stdout.splitlines()) == len(every)


def test_cli_table_folds_a_value_too_long_for_its_column(runs):
    """A value wider than the table (a run folder's path, here a word of 158 characters) is
    folded onto the next lines whole, as the csv output gives it: rich's default cut it with
    an ellipsis, and two long values that differ at their end read alike."""
    base = ["query", str(runs["raid0"]), "--sql",
            "SELECT 'run-' || repeat('0123456789', 15) || '-end' AS v"]
    (want,) = [r["v"] for r in csv.DictReader(io.StringIO(
        runner.invoke(app, [*base, "-f", "csv"]).output))]
    assert len(want) == 158
    res = runner.invoke(app, base)
    assert res.exit_code == 0, res.output
    cells = [ln.strip("\u2502").strip() for ln in res.stdout.splitlines()
             if ln.startswith("\u2502")]
    assert "".join(cells) == want, res.stdout


def test_cli_sql_with_parameters(runs):
    res = runner.invoke(app, ["query", str(runs["raid0"]), "--sql",
                              "SELECT count(*) AS n FROM ios WHERE op = $op", "-p", "op=1",
                              "-f", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == [{"n": int((ios_of(runs["raid0"])["op"] == 1).sum())}]


# ---------------------------------------------------------------------------------------------
# bad input: one line naming the run and the query, exit status 2


def _fails(args: list[str], *needles: str) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert len(line.splitlines()) == 1, line
    assert line.startswith("blocklab: error: "), line
    for n in needles:
        assert n in line, (n, line)
    return line


def test_run_folder_of_another_schema_version(tmp_path, runs):
    for version in (RUN_SCHEMA_VERSION + 1, RUN_SCHEMA_VERSION - 1, None):
        run = tmp_path / f"v{version}"
        shutil.copytree(runs["raid0"], run)
        meta = json.loads((run / "meta.json").read_text())
        meta["run_schema_version"] = version
        (run / "meta.json").write_text(json.dumps(meta))
        _fails(["query", str(run), "latency-summary"], "query latency-summary", f"run {run}",
               f"run schema version {version}")
    # inside a sweep folder, the run is named by its relative path
    root = tmp_path / "sweep"
    shutil.copytree(tmp_path / f"v{RUN_SCHEMA_VERSION + 1}", root / "p" / "q")
    _fails(["query", str(root), "compare"], "query compare", "run p/q", "schema version")


def test_missing_files(tmp_path, runs):
    run = tmp_path / "noios"
    shutil.copytree(runs["raid0"], run)
    (run / "ios.parquet").unlink()
    _fails(["query", str(run), "bandwidth"], "query bandwidth", f"run {run}",
           "ios.parquet: no such file")
    _fails(["query", str(tmp_path / "nothing"), "bandwidth"], "query bandwidth", "nothing",
           "no such file or folder")
    empty = tmp_path / "empty"
    empty.mkdir()
    _fails(["query", str(empty), "compare"], "query compare", "no run folder")
    bad = tmp_path / "badmeta"
    shutil.copytree(runs["raid0"], bad)
    (bad / "meta.json").write_text("{ not json")
    _fails(["query", str(bad), "compare"], "query compare", f"run {bad}", "meta.json: line 1")
    short = tmp_path / "short"
    shutil.copytree(runs["raid0"], short)
    pq.write_table(pq.read_table(short / "ios.parquet").drop(["latency_ns"]),
                   short / "ios.parquet")
    _fails(["query", str(short), "compare"], f"run {short}", "lacks columns latency_ns")
    notparquet = tmp_path / "np"
    shutil.copytree(runs["raid0"], notparquet)
    (notparquet / "drive_busy.parquet").write_bytes(b"junk")
    _fails(["query", str(notparquet), "compare"], f"run {notparquet}",
           "drive_busy.parquet: not a Parquet file")


def test_sql_that_fails(runs):
    _fails(["query", str(runs["raid0"]), "--sql", "SELECT nosuch FROM ios"], "query --sql",
           str(runs["raid0"]), "nosuch")
    _fails(["query", str(runs["raid0"]), "--sql", "SELEC 1"], "query --sql", "syntax error")
    _fails(["query", str(runs["raid0"]), "--sql", "SELECT $x"], "$x has no value")
    _fails(["query", str(runs["raid0"]), "--sql", "SELECT 1", "-p", "x=1"], "x is not used")


def test_bad_query_names_and_parameters(work, runs):
    _fails(["query", str(runs["raid0"]), "no-such"], "query no-such", "no such query")
    _fails(["query", str(runs["raid0"]), "bandwidth", "-p", "width=2"], "query bandwidth",
           "unknown parameter width")
    _fails(["query", str(runs["raid0"]), "bandwidth", "-p", "interval_s=fast"],
           "query bandwidth", "interval_s=fast", "expected a number")
    _fails(["query", str(runs["raid0"]), "workload", "-p", "top=2.5"], "expected an integer")
    _fails(["query", str(runs["raid0"]), "bandwidth", "-p", "interval_s"], "expected K=V")
    _fails(["query", str(runs["raid0"])], "is an input", "query NAME")
    _fails(["query", str(work / "trace.parquet"), "latency-summary"],
           "query latency-summary reads run folders")
    _fails(["query", str(runs["raid0"]), "btt"], "query btt reads traces")
    _fails(["query", str(runs["raid0"]), "compare", "--format", "xml"], "--format")
    junk = work / "junk.parquet"
    pq.write_table(pa.table({"a": [1]}), junk)
    _fails(["query", str(junk), "btt"], "query btt", "junk.parquet", "not a blocklab trace")
    junk.unlink()


def test_two_inputs_with_one_name(tmp_path, runs):
    for d in ("a", "b"):
        shutil.copytree(runs["raid0"], tmp_path / d / "same")
    _fails(["query", str(tmp_path / "a"), str(tmp_path / "b"), "compare"],
           "query compare", "both named 'same'")


def _flip_until(f: Path, refused) -> bool:
    """Flip one byte of ``f``'s Parquet footer after another (each XOR 0x0F, restored when it
    does not do) until ``refused(f)``; False if no single flip does that."""
    data = bytearray(f.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    for at in range(len(data) - 8 - footer, len(data) - 8):
        data[at] ^= 0x0F
        f.write_bytes(bytes(data))
        if refused(f):
            return True
        data[at] ^= 0x0F
    f.write_bytes(bytes(data))
    return False


def _duckdb_refuses(f: Path) -> bool:
    """pyarrow reads the schema, DuckDB cannot open the file."""
    import duckdb

    try:
        pq.read_schema(f)
    except Exception:  # noqa: BLE001 - pyarrow refuses it: not the case wanted
        return False
    try:
        duckdb.connect().execute(f"DESCRIBE SELECT * FROM read_parquet('{f}')")
    except duckdb.Error:
        return True
    return False


def _pyarrow_lacks(f: Path) -> bool:
    """pyarrow refuses the footer as not implemented (a type it has no reader for), not as
    invalid."""
    try:
        pq.ParquetFile(f)
    except pa.ArrowNotImplementedError:
        return True
    except Exception:  # noqa: BLE001
        return False
    return False


def test_a_run_file_duckdb_cannot_open_is_one_line_naming_it(runs, tmp_path):
    """A run's Parquet file whose footer pyarrow reads but DuckDB refuses (make fuzz found a
    flipped column type ending in a DuckDB traceback when the views were made): one line
    naming the run and the file, exit 2."""
    run = tmp_path / "run"
    shutil.copytree(runs["raid5"], run)
    assert _flip_until(run / "drive_busy.parquet", _duckdb_refuses)
    res = CliRunner().invoke(app, ["query", str(run), "compare"])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"blocklab: error: run {run}: drive_busy.parquet: not a "
                               "readable Parquet file ("), lines[0]


def test_a_footer_pyarrow_has_no_reader_for_is_one_line_naming_the_file(runs, work, tmp_path):
    """A damaged footer that names a type pyarrow does not implement (make fuzz: a flipped
    byte of events.parquet; ArrowNotImplementedError, which the checks did not catch, ended
    in a traceback): one line naming the file, for a run's file and for a trace."""
    run = tmp_path / "run"
    shutil.copytree(runs["raid5"], run)
    assert _flip_until(run / "events.parquet", _pyarrow_lacks)
    trace = tmp_path / "t.parquet"
    shutil.copy(work / "trace.parquet", trace)
    assert _flip_until(trace, _pyarrow_lacks)
    for args, start in ((["query", str(run), "compare"], f"run {run}: events.parquet: "),
                        (["query", str(trace), "trace-summary"], f"{trace}: ")):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2, res.output
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, res.stderr
        assert lines[0].startswith("blocklab: error: "), lines[0]
        assert f"{start}not a Parquet file (" in lines[0], lines[0]
