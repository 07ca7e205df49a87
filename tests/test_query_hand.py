"""Named queries over run folders written here by hand (tests/golden.py make_run), on what the
golden runs lack: request sizes that are not powers of two (latency-summary's size classes)
and data_loss events (compare). Beside tests/test_query.py, which is near its size limit."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from blocklab.pipeline.query import run_query

from .golden import event, make_run

OPS = {0: "read", 1: "write"}


def close(a, b, rel=1e-9) -> bool:
    return a is not None and math.isclose(float(a), float(b), rel_tol=rel, abs_tol=1e-9)


def test_latency_summary_size_classes_of_odd_sizes(tmp_path):
    """latency-summary's size class is the smallest power of two at or above the request's
    size (its header): 1 -> 1, 511 -> 512, 6144 -> 8192, 65537 -> 131072 bytes; the reference
    is 2 ** ceil(log2(size)) in NumPy, and each class's figures are recomputed from its
    requests."""
    sizes = np.array([1, 511, 512, 6144, 65537, 4097])
    n = 120
    rng = np.random.default_rng(11)
    size = np.resize(sizes, n)
    op = rng.integers(0, 2, n)
    lat = rng.integers(100_000, 9_000_000, n)
    run = make_run(tmp_path / "odd", {"arrival_ns": np.arange(n) * 1_000_000,
                                      "latency_ns": lat, "op": op, "size_bytes": size})
    rows = run_query([str(run)], "latency-summary").rows()
    cls = (2 ** np.ceil(np.log2(size))).astype(np.int64)
    assert sorted(set(cls.tolist())) == [1, 512, 8192, 131072]
    want = {(OPS[int(o)], int(c)) for o, c in zip(op, cls, strict=True)}
    got = {(r["op"], r["size_class_bytes"]) for r in rows if r["size_class_bytes"] is not None}
    assert got == want
    for r in rows:
        sel = op == (0 if r["op"] == "read" else 1)
        if r["size_class_bytes"] is not None:
            sel &= cls == r["size_class_bytes"]
        x = lat[sel].astype(float)
        assert r["requests"] == len(x), r
        assert close(r["mean_ms"], x.mean() / 1e6), r
        assert close(r["p50_ms"], np.quantile(x, 0.5) / 1e6), r
        assert close(r["p99_ms"], np.quantile(x, 0.99) / 1e6), r
        assert close(r["max_ms"], x.max() / 1e6), r


def _events_of(run: Path) -> list[str]:
    return [e["event"] for e in pq.read_table(run / "events.parquet").to_pylist()]


@pytest.mark.parametrize("losses", [1, 3])
def test_compare_counts_data_loss_events(tmp_path, losses):
    """compare's failures and data_loss rows are the runs' failure and data_loss events,
    counted here from events.parquet; a run with none has 0."""
    ios = {"arrival_ns": [0, 1_000_000, 2_000_000], "latency_ns": [500_000] * 3,
           "op": [0, 1, 0], "size_bytes": [4096] * 3}
    ev = [event(100, "failure", drive=1), event(200, "rebuild_start", drive=1)]
    ev += [event(300 + k, "data_loss", drive=1) for k in range(losses)]
    ev += [event(900, "failure", drive=0)]
    lossy = make_run(tmp_path / "runs" / "lossy", ios, events=ev)
    make_run(tmp_path / "runs" / "calm", ios, events=[event(5, "failure")])
    rows = {r["metric"]: r for r in run_query([str(tmp_path / "runs")], "compare").rows()}
    names = _events_of(lossy)
    assert rows["data_loss"]["lossy"] == sum(n == "data_loss" for n in names) == losses
    assert rows["failures"]["lossy"] == sum(n == "failure" for n in names) == 2
    assert rows["data_loss"]["calm"] == 0 and rows["failures"]["calm"] == 1


def test_a_query_that_asks_for_one_thread_runs_on_one_and_gives_the_rest_back(tmp_path,
                                                                           monkeypatch):
    """iostat's header asks for one DuckDB thread (over 300 M requests two ran out of DuckDB's
    memory limit): it runs on one, seen from inside the query, and the connection has its
    threads again afterwards, for the next query (report asks several on one connection)."""
    from blocklab.pipeline import query as Q

    assert Q.catalog()["iostat"].threads == 1 and Q.catalog()["bandwidth"].threads is None
    run = make_run(tmp_path / "r", {"arrival_ns": [0, 10], "latency_ns": [5, 5],
                                    "op": [0, 1], "size_bytes": [4096, 4096]})
    sources = Q.find_sources([run])
    con = Q.connect(sources, threads=2)
    seen = []
    real = con.sql

    class Spy:  # DuckDB's connection type cannot be patched: wrap its sql
        def __getattr__(self, name):
            return getattr(con, name)

        def sql(self, text, params=None):
            seen.append(con.execute("SELECT current_setting('threads')").fetchall()[0][0])
            return real(text, params=params)

    try:
        spy = Spy()
        Q.named(spy, "iostat", sources)
        _schema, batches = Q.named_batches(spy, "iostat", sources)
        list(batches)
        Q.named(spy, "bandwidth", sources)
        assert seen == [1, 1, 2]
        assert con.execute("SELECT current_setting('threads')").fetchall()[0][0] == 2
    finally:
        con.close()


def test_the_spill_folder_is_owner_only_and_goes_with_the_command(tmp_path, monkeypatch):
    """DuckDB's spill files hold a trace's rows: DuckDB made its folder 0755 and its files
    0644 in a shared /tmp. The folder is now made 0700 for it, and removed when the command
    ends."""
    import os
    import stat
    import tempfile

    from typer.testing import CliRunner

    from blocklab.pipeline import spill
    from blocklab.pipeline.cli import app
    from blocklab.pipeline.query import duck

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(spill, "_spill", [])  # (another test's folder, elsewhere)
    con = duck()
    con.execute("SET memory_limit = '48MB'")
    con.execute("SET preserve_insertion_order = false")
    con.execute("CREATE TABLE t AS SELECT range AS r, random() AS x FROM range(12000000)")
    (folder,) = tmp_path.glob(f"blocklab-duckdb-{os.getpid()}-*")
    spilled = list(folder.iterdir())
    assert spilled and stat.S_IMODE(folder.stat().st_mode) == 0o700
    con.close()
    run = make_run(tmp_path / "r", {"arrival_ns": np.arange(10) * 1000,
                                    "latency_ns": np.full(10, 5000), "op": np.zeros(10, int),
                                    "size_bytes": np.full(10, 4096)})
    res = CliRunner().invoke(app, ["query", str(run), "run-latency"])
    assert res.exit_code == 0, res.output
    assert list(tmp_path.glob("blocklab-duckdb-*")) == []


def test_a_dead_processs_spill_folder_is_removed_by_the_next(tmp_path, monkeypatch):
    """A process killed with SIGKILL (a cluster's worker) never removes its spill folder: the
    next command's first DuckDB connection removes this user's folders whose process is gone,
    and leaves a living process's alone."""
    import os
    import subprocess
    import sys
    import tempfile

    from blocklab.pipeline import spill
    from blocklab.pipeline.query import duck

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(spill, "_spill", [])
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    dead = tmp_path / f"blocklab-duckdb-{gone}-abc123"
    dead.mkdir(mode=0o700)
    (dead / "duckdb_temp_block-1.block").write_bytes(b"rows")
    alive = tmp_path / f"blocklab-duckdb-{os.getppid()}-def456"  # (pytest's parent lives)
    alive.mkdir(mode=0o700)
    duck().close()
    assert not dead.exists() and alive.exists()
