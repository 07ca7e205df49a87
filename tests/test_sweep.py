"""``blocklab sweep``: points of a sweep file, results on a real Dask LocalCluster against the
same replays run one by one, resume after a kill, failed points, bad input in one line."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.replay import replay
from blocklab.pipeline.sweep import load_sweep, numba_cache_base, run_sweep, toml_text
from blocklab.traces.store import TraceMeta, TraceWriter, columns_to_batch, empty_columns

from .conftest import needs

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

runner = CliRunner()

BASE = """# the sweeps' base array: RAID-5 of five Atlas 10K drives
[[group]]
name = "g"
layout = "raid5"
width = 5
stripe_unit = "64KiB"
drive = "atlas10k"
"""


def write_trace(path: Path, n: int, gap_ns: int, seed: int = 1) -> Path:
    rng = np.random.default_rng(seed)
    cols = empty_columns(n)
    cols["time_ns"] = np.cumsum(rng.integers(gap_ns // 2, gap_ns * 3 // 2, n)).astype(np.int64)
    cols["sector"] = rng.integers(0, 1 << 21, n).astype(np.int64) * 8
    cols["size_bytes"] = rng.choice([4096, 16384, 65536], n).astype(np.int64)
    cols["op"] = (rng.random(n) < 0.3).astype(np.uint8)
    with TraceWriter(path, TraceMeta(source_format="test")) as w:
        w.write(columns_to_batch(cols))
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sweep")
    write_trace(d / "t.parquet", 300, 4_000_000)
    write_trace(d / "u.parquet", 200, 6_000_000, seed=2)
    (d / "base.toml").write_text(BASE)
    return d


def sweep_file(d: Path, name: str, body: str) -> Path:
    p = d / name
    p.write_text(body)
    return p


GRID = """array = "base.toml"
trace = "t.parquet"
[[axis]]
key = "group[0].layout"
values = ["raid5", "raid6"]
[[axis]]
key = "speed"
values = [1, 2]
"""


# ---------------------------------------------------------------------------------------------
# the sweep file and its points


def test_plan_points_cross_and_zip(work):
    s = load_sweep(sweep_file(work, "grid.toml", GRID))
    assert [p.values for p in s.points] == [
        {"layout": "raid5", "speed": 1}, {"layout": "raid5", "speed": 2},
        {"layout": "raid6", "speed": 1}, {"layout": "raid6", "speed": 2}]
    assert [p.config["group"][0]["layout"] for p in s.points] == ["raid5"] * 2 + ["raid6"] * 2
    assert [p.options["speed"] for p in s.points] == [1, 2, 1, 2]
    assert len({p.id for p in s.points}) == 4
    assert s.points[1].name == "layout=raid5 speed=2"
    # ids depend on the point's values only: not on the axes' order nor on the other points
    swapped = GRID.replace('"group[0].layout"', "SPEED").replace('"speed"', '"group[0].layout"')
    swapped = swapped.replace("SPEED", '"speed"').replace('["raid5", "raid6"]', "TMP")
    swapped = swapped.replace("[1, 2]", '["raid5", "raid6"]').replace("TMP", "[1, 2, 4]")
    s2 = load_sweep(sweep_file(work, "swapped.toml", swapped))
    assert len(s2.points) == 6
    ids = {json.dumps(p.values, sort_keys=True): p.id for p in s2.points}
    for p in s.points:
        assert ids[json.dumps(p.values, sort_keys=True)] == p.id
    z = load_sweep(sweep_file(work, "zip.toml", GRID.replace('trace = "t.parquet"',
                                                             'trace = "t.parquet"\nmode = "zip"')))
    assert [p.values for p in z.points] == [{"layout": "raid5", "speed": 1},
                                           {"layout": "raid6", "speed": 2}]
    res = runner.invoke(app, ["sweep", "plan", str(work / "grid.toml"), "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    assert [p["point"] for p in got["points"]] == [p.id for p in s.points]
    assert [a["name"] for a in got["axes"]] == ["layout", "speed"]


def test_plan_names_a_bad_point_config(work):
    f = sweep_file(work, "w.toml", 'array = "base.toml"\ntrace = "t.parquet"\n'
                   '[[axis]]\nkey = "group[0].width"\nvalues = [5, 2]\n')
    res = runner.invoke(app, ["sweep", "plan", str(f), "--json"])
    assert res.exit_code == 0, res.output
    pts = json.loads(res.output)["points"]
    assert pts[0]["config_error"] is None
    assert "group[0].width: raid5 needs at least 3 drives, found 2" in pts[1]["config_error"]


_keys = st.text("abcxyz_-", min_size=1, max_size=6)
_scalars = (st.integers(-2**63, 2**63 - 1) | st.booleans() | st.text(max_size=12)
            | st.floats(allow_nan=False))
_values = st.recursive(_scalars, lambda c: st.lists(c, max_size=3)
                       | st.dictionaries(_keys, c, max_size=3), max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_keys | st.text(min_size=1, max_size=5), _values, max_size=5))
def test_toml_text_reads_back(data):
    assert tomllib.loads(toml_text(data)) == data


# ---------------------------------------------------------------------------------------------
# results


def _cache_files() -> dict[str, float]:
    root = Path(numba_cache_base())
    return {str(p): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def grid(work, cluster, tmp_path_factory):
    """The 2 x 2 sweep on the cluster, and the same four points replayed one by one here."""
    tmp = tmp_path_factory.mktemp("grid")
    f = sweep_file(work, "grid.toml", GRID)
    # the reference: each point's configuration written by hand, replayed in this process
    ref = {}
    for layout in ("raid5", "raid6"):
        cfg = tmp / f"{layout}.toml"
        cfg.write_text(BASE.replace('layout = "raid5"', f'layout = "{layout}"'))
        for speed in (1, 2):
            ref[(layout, speed)] = replay(work / "t.parquet", cfg, tmp / f"{layout}-{speed}",
                                          speed=speed).output
    cache_before = _cache_files()
    out = tmp / "out"
    r = run_sweep(f, out, scheduler=cluster.scheduler_address)
    return {"sweep": f, "out": out, "ref": ref, "result": r,
            "cache_same": _cache_files() == cache_before}


def test_sweep_matches_replays_one_by_one(grid, cluster):
    f, out, ref, r = grid["sweep"], grid["out"], grid["ref"], grid["result"]
    assert (r.points, r.done, r.skipped, r.failed) == (4, 4, 0, [])
    # the workers loaded the kernels the client compiled: nothing was compiled again (they
    # look in the same cache folder, so a compile would have written there)
    assert grid["cache_same"]
    from distributed import Client

    with Client(cluster.scheduler_address) as c:
        assert set(c.run(numba_cache_base).values()) == {numba_cache_base()}

    pts = {p.id: p for p in load_sweep(f).points}
    rows = duckdb.sql(f"SELECT * FROM read_parquet('{out}/summary/**/*.parquet', "
                      "hive_partitioning = true) ORDER BY run").fetchall()
    cols = [c[0] for c in duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet("
                                     f"'{out}/summary/**/*.parquet', hive_partitioning = true)"
                                     ).fetchall()]
    assert len(rows) == 4 and {"layout", "speed", "p99_ms", "mb_per_s"} <= set(cols)
    for row in rows:
        s = dict(zip(cols, row, strict=True))
        p = pts[s["run"]]
        assert (s["layout"], int(s["speed"])) == (p.values["layout"], p.values["speed"])
        want = Path(ref[(p.values["layout"], p.values["speed"])])
        got = out / p.id
        for stem in ("ios", "drive_busy"):
            assert pq.read_table(got / f"{stem}.parquet").equals(
                pq.read_table(want / f"{stem}.parquet")), (p.name, stem)
        # headline figures against NumPy over the reference run
        ios = pq.read_table(want / "ios.parquet")
        lat = ios.column("latency_ns").to_numpy() / 1e6
        span = (ios.column("complete_ns").to_numpy().max()
                - ios.column("arrival_ns").to_numpy().min()) / 1e9
        assert s["requests"] == len(lat)
        assert s["mean_ms"] == pytest.approx(lat.mean(), rel=1e-9)
        assert s["p99_ms"] == pytest.approx(np.quantile(lat, 0.99), rel=1e-9)
        assert s["mb_per_s"] == pytest.approx(
            ios.column("size_bytes").to_numpy().sum() / 1e6 / span, rel=1e-9)
        assert s["rebuild_window_s"] is None
    # blocklab query over the folder sees the four points as runs named by their ids
    res = runner.invoke(app, ["query", str(out), "--sql",
                              "SELECT run, count(*) AS n FROM ios GROUP BY run ORDER BY run",
                              "--format", "json"])
    assert res.exit_code == 0, res.output
    assert {r["run"]: r["n"] for r in json.loads(res.output)} == {pid: 300 for pid in pts}
    # ... and, joined with the summary, with the axes as columns
    res = runner.invoke(app, ["query", str(out), "--sql",
                              "SELECT s.layout, s.speed, count(*) AS n FROM ios JOIN read_parquet("
                              f"'{out}/summary/**/*.parquet', hive_partitioning = true) s "
                              "USING (run) GROUP BY ALL ORDER BY ALL", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == [{"layout": lay, "speed": sp, "n": 300}
                                      for lay in ("raid5", "raid6") for sp in (1, 2)]
    # rerunning does nothing
    again = run_sweep(f, out, scheduler=cluster.scheduler_address)
    assert (again.done, again.skipped) == (0, 4)
    assert not (out / ".sweep.lock").exists()  # no lock file left (docs/bad-input.md)


def test_failed_point_does_not_stop_the_others(work, cluster, tmp_path):
    f = sweep_file(work, "fail.toml", 'array = "base.toml"\ntrace = "t.parquet"\n'
                   '[[axis]]\nkey = "group[0].width"\nvalues = [4, 2, 6]\n')
    out = tmp_path / "out"
    r = run_sweep(f, out, scheduler=cluster.scheduler_address)
    bad = [p for p in load_sweep(f).points if p.values["width"] == 2][0]
    assert (r.done, len(r.failed)) == (2, 1)
    assert r.failed[0]["point"] == bad.id
    rec = json.loads((out / f"{bad.id}.error.json").read_text())
    assert "group[0].width: raid5 needs at least 3 drives, found 2" in rec["error"]
    assert rec["values"] == {"width": 2} and rec["type"] == "ConfigError"
    assert not (out / bad.id).exists()
    assert len(list((out / "summary").rglob("*.parquet"))) == 2
    # a rerun skips the finished points and tries the failed one again
    t0 = rec["time_utc"]
    time.sleep(1.1)
    r2 = run_sweep(f, out, scheduler=cluster.scheduler_address)
    assert (r2.skipped, r2.done, len(r2.failed)) == (2, 0, 1)
    assert json.loads((out / f"{bad.id}.error.json").read_text())["time_utc"] > t0
    # the CLI: one line per failed point, exit status 1
    res = runner.invoke(app, ["sweep", "run", str(f), "-o", str(out), "--scheduler",
                              cluster.scheduler_address])
    assert res.exit_code == 1
    assert [ln for ln in res.stderr.splitlines() if ln.startswith("blocklab: point")] == [
        f"blocklab: {rec['error']}"]
    assert not (out / ".sweep.lock").exists()


def test_kill_midway_then_resume(work, cluster, tmp_path):
    """A sweep run as the command, interrupted (Ctrl-C to its process group) after its first
    point: the points it finished are whole; the rerun replays only the others."""
    write_trace(tmp_path / "long.parquet", 60_000, 2_000_000, seed=3)
    f = sweep_file(tmp_path, "long.toml", f'array = "{work / "base.toml"}"\n'
                   'trace = "long.parquet"\n[[axis]]\nkey = "group[0].stripe_unit"\n'
                   'values = ["8KiB", "16KiB", "32KiB", "64KiB", "128KiB", "256KiB"]\n')
    out = tmp_path / "out"
    blocklab = [sys.executable, "-c", "from blocklab.pipeline.cli import main; main()"]
    p = subprocess.Popen([*blocklab, "sweep", "run", str(f), "-o", str(out), "--workers", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 600  # a cold kernel cache compiles first (~2 min)
        while not list(out.glob("summary/**/*.parquet")):
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.killpg(p.pid, signal.SIGINT)
        _o, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, (p.returncode, err,
                                 f"{len(list(out.glob('summary/**/*.parquet')))} summaries")
    assert err.strip().splitlines()[-1].startswith("blocklab: interrupted: ")
    assert "Traceback" not in err, err
    # the point in flight left its temporary and lock, until a rerun (a robustness review):
    # the local workers are gone, so what they left goes with the stop
    assert not [q for q in out.rglob(".*") if ".tmp-" in q.name or q.name.endswith(".lock")]
    pts = load_sweep(f).points
    summaries = {q.stem for q in out.glob("summary/**/*.parquet")}
    runs = {q.name for q in out.iterdir() if (q / "meta.json").is_file()}
    assert summaries <= runs and 1 <= len(runs) < len(pts)
    # nothing half-written is visible: every run folder is complete
    for r in runs:
        assert pq.read_table(out / r / "ios.parquet").num_rows == 60_000
    stamps = {r: (out / r / "ios.parquet").stat().st_mtime_ns for r in runs}

    res = run_sweep(f, out, scheduler=cluster.scheduler_address)
    assert res.failed == []
    assert res.skipped == len(summaries) and res.done == len(pts) - len(summaries)
    assert {q.stem for q in out.glob("summary/**/*.parquet")} == {q.id for q in pts}
    for r, t in stamps.items():  # finished points were not replayed again
        assert (out / r / "ios.parquet").stat().st_mtime_ns == t
    assert not [q for q in out.rglob(".*") if ".tmp-" in q.name]


def test_a_stopped_sweep_clears_what_its_stopped_points_left(tmp_path):
    """After a stop, once a local cluster's workers are gone (_clear_after_workers): the
    points in flight left their run folders' temporaries (.POINT.tmp-PID) and locks
    (.POINT.lock), which are no one's now and go; a lock a live process still holds (a point
    of a user's cluster, still running) stays, and so does the sweep's own work. Before, they
    stayed until the next run (about half of a review's stops left some)."""
    import fcntl

    from blocklab.pipeline.sweep import _clear_after_workers

    out = tmp_path / "out"
    (out / "summary").mkdir(parents=True)
    (out / ".p1.tmp-4242").mkdir()
    (out / ".p1.tmp-4242" / "ios.parquet").write_bytes(b"half")
    (out / "summary" / ".x.parquet.tmp-4242").write_bytes(b"half")
    (out / ".p1.lock").write_bytes(b"")
    (out / "p0").mkdir()  # a finished point's run folder
    (out / "p0" / "meta.json").write_text("{}")
    held = out / ".p2.lock"
    with held.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # a point that still runs (a user's cluster)
        _clear_after_workers(out)
        assert held.exists()
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert left == [".p2.lock", "p0", "p0/meta.json", "summary"], left


def test_a_worker_that_dies_loses_only_its_point(work, cluster, tmp_path):
    """SIGKILL to the worker process replaying a point (found by replay's temporary folder,
    .POINT.tmp-PID): Dask runs the point again, every point finishes, nothing is left."""
    write_trace(tmp_path / "long.parquet", 60_000, 2_000_000, seed=4)
    f = sweep_file(tmp_path, "die.toml", f'array = "{work / "base.toml"}"\n'
                   'trace = "long.parquet"\n[[axis]]\nkey = "group[0].stripe_unit"\n'
                   'values = ["8KiB", "16KiB", "32KiB", "64KiB"]\n')
    out = tmp_path / "out"
    box: dict = {}
    th = threading.Thread(target=lambda: box.update(
        r=run_sweep(f, out, scheduler=cluster.scheduler_address)))
    th.start()
    killed = None
    deadline = time.monotonic() + 600  # a cold kernel cache compiles first (~2 min)
    while killed is None and time.monotonic() < deadline and th.is_alive():
        for q in out.glob(".*.tmp-*") if out.is_dir() else []:
            if q.is_dir():
                killed = (q.name[1:].split(".tmp-")[0], int(q.name.rsplit("-", 1)[1]))
                os.kill(killed[1], signal.SIGKILL)
                break
        time.sleep(0.005)
    th.join(600)
    assert killed is not None and not th.is_alive()
    r = box["r"]
    assert (r.done, r.failed) == (4, [])
    assert (out / killed[0] / "meta.json").is_file()
    for p in load_sweep(f).points:
        assert pq.read_table(out / p.id / "ios.parquet").num_rows == 60_000
    assert not [q for q in out.rglob(".*") if ".tmp-" in q.name]


def test_missing_summary_is_written_from_the_run_folder(work, cluster, tmp_path):
    """A run folder without its summary (a run stopped between the two) gets its summary on
    the rerun, without a replay; with events.parquet the summary has the rebuild window."""
    from .golden import FAILURE_NS, REBUILD_END_NS, failure_events, write_events

    f = sweep_file(work, "two.toml", 'array = "base.toml"\ntrace = "t.parquet"\n'
                   '[[axis]]\nkey = "speed"\nvalues = [1, 2]\n')
    out = tmp_path / "out"
    assert run_sweep(f, out, scheduler=cluster.scheduler_address).done == 2
    p1, p2 = load_sweep(f).points
    write_events(out / p2.id, failure_events("g", 1))
    (out / "summary" / p2.partition(load_sweep(f).axes)).unlink()
    stamp = (out / p2.id / "ios.parquet").stat().st_mtime_ns
    r = run_sweep(f, out, scheduler=cluster.scheduler_address)
    assert (r.skipped, r.done, r.failed) == (1, 1, [])
    assert (out / p2.id / "ios.parquet").stat().st_mtime_ns == stamp
    rows = {row[0]: row[1:] for row in duckdb.sql(
        f"SELECT run, failures, rebuild_window_s, rebuild_done FROM read_parquet("
        f"'{out}/summary/**/*.parquet', hive_partitioning = true)").fetchall()}
    assert rows == {p1.id: (0, None, None),
                    p2.id: (1, (REBUILD_END_NS - FAILURE_NS) / 1e9, True)}
    # the report draws the rebuild window against the axis
    from .test_report import _specs, _values

    res = runner.invoke(app, ["report", str(out), "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    data = _values(_specs((tmp_path / "r.html").read_text())["sweep-speed"])[0]
    assert {d["x"]: d["rebuild_window_s"] for d in data} == {1: None, 2: 3.0}


def test_a_trace_rewritten_between_two_runs_is_replayed_again(work, cluster, tmp_path):
    """A resume compares each finished point's trace (meta.json's sha256) with the trace's
    bytes now: a trace rewritten at the same path makes its points run again, and the
    summary then holds only runs of the new trace (it mixed both before); an untouched
    trace's points stay finished."""
    import shutil

    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(work / "base.toml", d / "base.toml")
    write_trace(d / "a.parquet", 150, 4_000_000)
    write_trace(d / "b.parquet", 150, 4_000_000, seed=5)
    f = sweep_file(d, "s.toml", 'array = "base.toml"\n[[axis]]\nkey = "trace"\n'
                   'values = ["a.parquet", "b.parquet"]\n')
    out = tmp_path / "out"
    assert run_sweep(f, out, scheduler=cluster.scheduler_address).done == 2
    pa_, pb = load_sweep(f).points
    stamp = (out / pa_.id / "ios.parquet").stat().st_mtime_ns
    write_trace(d / "b.parquet", 120, 5_000_000, seed=9)  # the same path, other requests
    r = run_sweep(f, out, scheduler=cluster.scheduler_address)
    assert (r.skipped, r.done, r.retraced, r.failed) == (1, 1, 1, [])
    assert (out / pa_.id / "ios.parquet").stat().st_mtime_ns == stamp
    from blocklab.pipeline import runmeta
    from blocklab.pipeline.replay import file_sha256

    assert runmeta.read(out / pb.id).trace.sha256 == file_sha256(d / "b.parquet")
    rows = dict(duckdb.sql(f"SELECT run, requests FROM read_parquet('{out}/summary/**/*."
                           "parquet', hive_partitioning = true)").fetchall())
    assert rows == {pa_.id: 150, pb.id: 120}
    again = run_sweep(f, out, scheduler=cluster.scheduler_address)
    assert (again.skipped, again.done, again.retraced) == (2, 0, 0)
    # a meta.json that cannot be read: that point is not taken as finished, nor counted (or
    # told) as one whose trace changed; its replay will not replace a folder that is not a
    # run folder, so the point fails and says what to do
    (out / pa_.id / "meta.json").write_text("{")
    res = CliRunner().invoke(app, ["sweep", "run", str(f), "-o", str(out), "--scheduler",
                                   cluster.scheduler_address])
    assert res.exit_code == 1, res.output
    assert "0 run now, 1 finished before, 1 failed" in res.stdout, res.stdout
    assert "replayed again" not in res.stdout
    assert f"{pa_.id}: exists and is not a run folder" in res.stderr


def test_failure_axis(work, cluster, tmp_path):
    """An axis over the array's [[failure]] list: the point without a failure has no window,
    the others have the window events.parquet shows (rebuild end minus failure), and a replay
    of the same configuration one by one agrees."""
    (work / "spare.toml").write_text(BASE + "hot_spares = 1\n[rebuild]\nunit = \"4MiB\"\n")
    f = sweep_file(work, "fail.toml", 'array = "spare.toml"\ntrace = "t.parquet"\n'
                   '[[axis]]\nkey = "failure"\nname = "failed"\n'
                   'values = [[], [{ drive = 1, at_s = 0.3 }], [{ drive = 3, at_s = 0.6 }]]\n')
    out = tmp_path / "out"
    r = run_sweep(f, out, scheduler=cluster.scheduler_address)
    assert (r.done, r.failed) == (3, [])
    rows = {row[0]: row[1:] for row in duckdb.sql(
        f"SELECT run, failures, rebuild_window_s, rebuild_done FROM read_parquet("
        f"'{out}/summary/**/*.parquet', hive_partitioning = true)").fetchall()}
    points = load_sweep(f).points
    assert rows[points[0].id] == (0, None, None)
    for p, (drive, at_ns) in zip(points[1:], [(1, 300_000_000), (3, 600_000_000)],
                                 strict=True):
        ev = pq.read_table(out / p.id / "events.parquet").to_pylist()
        fail = [e for e in ev if e["event"] == "failure"]
        end = [e for e in ev if e["event"] == "rebuild_end"]
        assert [(e["drive"], e["time_ns"]) for e in fail] == [(drive, at_ns)]
        assert len(end) == 1 and end[0]["bytes"] > 0
        assert rows[p.id] == (1, pytest.approx((end[0]["time_ns"] - at_ns) / 1e9), True)
    one = replay(work / "t.parquet", out / f"{points[1].id}.toml", tmp_path / "one")
    assert one.rebuilds[0]["window_s"] == pytest.approx(rows[points[1].id][1])


# ---------------------------------------------------------------------------------------------
# bad input: one line, exit status 2, before any work


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BAD = {
    "unknown key": ('[[axis]]\nkey = "group[0].widht"\nvalues = [4, 5]\n',
                    "axis[0].key: group[0].widht is not a key of the array configuration"),
    "unknown table": ('[[axis]]\nkey = "controler.cache"\nvalues = ["1MiB"]\n',
                      "axis[0].key: controler.cache is not a key of the array configuration"),
    "no such group": ('[[axis]]\nkey = "group[3].width"\nvalues = [4]\n',
                      "axis[0].key: group[3]: the base configuration has 1 group entries"),
    "empty axis": ('[[axis]]\nkey = "speed"\nvalues = []\n',
                   "axis[0].values: empty: an axis needs at least one value"),
    "zip lengths": ('mode = "zip"\n[[axis]]\nkey = "speed"\nvalues = [1, 2]\n'
                    '[[axis]]\nkey = "group[0].width"\nvalues = [4, 5, 6]\n',
                    'mode = "zip" needs axes of one length; values per axis: speed 2, width 3'),
    "option type": ('[[axis]]\nkey = "speed"\nvalues = [1, "fast"]\n',
                    "axis[0].values[1]: speed must be a number, found 'fast'"),
    "missing trace": ('[[axis]]\nkey = "trace"\nvalues = ["t.parquet", "nope.parquet"]\n',
                      "axis[0].values[1]: no such trace file nope.parquet"),
    "repeated value": ('[[axis]]\nkey = "speed"\nvalues = [1, 1]\n',
                       "axis[0].values: 1 appears twice"),
    "repeat mode": ('[replay]\nrepeat = "forever"\n',
                    "replay.repeat: repeat must be 'until-tasks-end', found 'forever'"),
    "max passes": ('[replay]\nrepeat = "until-tasks-end"\nmax_passes = 0\n',
                   "replay.max_passes: max_passes must be a whole number of at least 1, "
                   "found 0"),
    # replay's own bounds, at plan time (`sweep plan` said ok, and the points failed)
    "speed bound": ('[[axis]]\nkey = "speed"\nvalues = [1, -2]\n',
                    "axis[0].values[1] (speed): must be a number from 1e-06 to 1e+06"),
    "outstanding bound": ('[replay]\nclosed_loop = 100000000000\n',
                          "replay.closed_loop: must be from 0 to 1,048,576"),
    # the sweep file's value is what is wrong (make fuzz found the missing file named alone)
    "missing array": ("", "array: no such array configuration nope.toml"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_sweep_file(work, tmp_path, case):
    body, needle = BAD[case]
    f = sweep_file(tmp_path, "bad.toml", f'array = "{work / "base.toml"}"\n'
                   f'trace = "{work / "t.parquet"}"\n{body}')
    if case == "missing trace":
        f.write_text(f.read_text().replace('"t.parquet"', f'"{work / "t.parquet"}"'))
    if case == "missing array":
        f.write_text(f.read_text().replace(f'"{work / "base.toml"}"', '"nope.toml"'))
    for cmd in (["sweep", "plan", str(f)], ["sweep", "run", str(f), "-o", str(tmp_path / "o")]):
        res = runner.invoke(app, cmd)
        assert res.exit_code == 2, res.output
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith(f"blocklab: error: {f}: "), lines
        assert needle in lines[0], lines[0]
    assert not (tmp_path / "o").exists()


def test_scheduler_that_does_not_answer(work, tmp_path):
    f = sweep_file(work, "grid.toml", GRID)
    addr = f"tcp://127.0.0.1:{_free_port()}"
    t0 = time.monotonic()
    res = runner.invoke(app, ["sweep", "run", str(f), "-o", str(tmp_path / "o"),
                              "--scheduler", addr, "--timeout", "1"])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    # nothing listens at a port just freed: said at once, where Dask retried for --timeout
    assert lines[0] == (f"blocklab: error: --scheduler {addr}: connection refused (nothing "
                        "listens there: start the scheduler, or check the address)")
    assert time.monotonic() - t0 < 30
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------------------------
# the report of a sweep


def test_report_draws_figures_against_each_axis(grid, tmp_path):
    from .test_report import _specs, _values

    out = tmp_path / "r.html"
    res = runner.invoke(app, ["report", str(grid["out"]), "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    assert r["charts"][:2] == ["sweep-layout", "sweep-speed"]
    page = out.read_text()
    specs = _specs(page)
    rows = duckdb.sql(f"SELECT layout, CAST(speed AS INTEGER) AS speed, p99_ms, mb_per_s "
                      f"FROM read_parquet('{grid['out']}/summary/**/*.parquet', "
                      "hive_partitioning = true)").fetchall()
    want = {(lay, sp): (p99, mb) for lay, sp, p99, mb in rows}
    # against speed: one line per layout, the summary's figures at each speed
    data = _values(specs["sweep-speed"])[0]
    assert {(d["line"], d["x"]): (d["p99_ms"], d["mb_per_s"]) for d in data} == want
    assert all(isinstance(d["x"], int) for d in data)
    # against layout: one line per speed
    data = _values(specs["sweep-layout"])[0]
    assert {(d["x"], int(d["line"])): (d["p99_ms"], d["mb_per_s"]) for d in data} == want
    assert "rebuild_window_s" not in data[0] or all(d["rebuild_window_s"] is None for d in data)
    assert f"<h2>Sweep {grid['out']}</h2>" in page


@needs("chromium")
def test_sweep_report_renders(grid, tmp_path):
    from .test_report import _check_drawn, chromium

    out = tmp_path / "r.html"
    res = runner.invoke(app, ["report", str(grid["out"]), "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    dom, log = chromium(out, tmp_path)
    parts = _check_drawn(dom, log, json.loads(res.output)["charts"])
    assert "mark-line" in parts["sweep-speed"] and "mark-symbol" in parts["sweep-speed"]


@pytest.mark.parametrize("content, says", [
    (b'{"fingerprint": "\x80"}', "byte 17: not UTF-8 text, so not JSON"),
    (b"[1, 2]", "expected an object"),
])
def test_a_damaged_sweep_json_is_one_line_naming_it(work, tmp_path, content, says):
    """An output folder's sweep.json that is not UTF-8 or not an object: sweep run into it
    and the reading of its points each say so in one line naming the file (make fuzz found
    the first one ending in a traceback)."""
    from blocklab.pipeline.sweep import read_points
    from blocklab.traces.errors import BlocklabError

    out = tmp_path / "o"
    out.mkdir()
    (out / "sweep.json").write_bytes(content)
    res = runner.invoke(app, ["sweep", "run", str(sweep_file(work, "grid.toml", GRID)),
                              "-o", str(out)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"blocklab: error: {out / 'sweep.json'}: ")
    assert says in lines[0], lines[0]
    with pytest.raises(BlocklabError, match=f"sweep.json: {says}"):
        read_points(out)
