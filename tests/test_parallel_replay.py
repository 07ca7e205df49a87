"""``blocklab replay --workers``: one trace replayed in time segments on a real Dask
LocalCluster, against the serial replay of the same trace (issue 21, deliverable 2)."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from blocklab.pipeline import cluster as cluster_mod
from blocklab.pipeline import parallel
from blocklab.pipeline.cli import app
from blocklab.pipeline.cluster import numba_cache_base
from blocklab.pipeline.model.array import build_array
from blocklab.pipeline.model.config import load_array
from blocklab.pipeline.parallel import TraceIndex, choose_cuts, replay_parallel
from blocklab.pipeline.replay import replay, run_engine, settings_for
from blocklab.traces import store
from blocklab.traces.store import TraceMeta, TraceWriter, columns_to_batch, empty_columns

from .damage import flip_page_bytes

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

BLOCKLAB = [sys.executable, "-c", "from blocklab.pipeline.cli import main; main()"]

ARRAY = """[[group]]
name = "g"
layout = "raid5"
width = 4
stripe_unit = "64KiB"
drive = "atlas10k"
"""
# a controller cache: clean lines and their order outlive every idle moment
CACHED = ARRAY + ('[controller]\ncache = "4MiB"\nwrite_policy = "write-through"\nread_ahead = true\n'
                  'read_ahead_size = "256KiB"\n')


def write_trace(path: Path, t_ns: np.ndarray, seed: int = 1, batches: int = 4) -> Path:
    """Random 4-64 KiB reads and writes at the times ``t_ns``, over a few row groups (a
    segment then starts in the middle of the file)."""
    n = len(t_ns)
    rng = np.random.default_rng(seed)
    cols = empty_columns(n)
    cols["time_ns"] = np.asarray(t_ns, np.int64)
    # a hot region (cache hits) and the rest of the array
    hot = rng.random(n) < 0.5
    cols["sector"] = np.where(hot, rng.integers(0, 1 << 10, n),
                              rng.integers(0, 1 << 20, n)).astype(np.int64) * 8
    cols["size_bytes"] = rng.choice([4096, 16384, 65536], n).astype(np.int64)
    cols["op"] = (rng.random(n) < 0.3).astype(np.uint8)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(store, "ROW_GROUP_ROWS", -(-n // batches))
        with TraceWriter(path, TraceMeta(source_format="test")) as w:
            w.write(columns_to_batch(cols))
    return path


def bursts(count: int, per: int, within_ns: int, gap_ns: int) -> np.ndarray:
    """``count`` bursts of ``per`` requests ``within_ns`` apart, ``gap_ns`` between bursts:
    the drives go idle in every gap."""
    t = np.arange(per, dtype=np.int64) * within_ns
    return np.concatenate([t + i * (gap_ns + per * within_ns) for i in range(count)])


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("parallel")
    (d / "a.toml").write_text(ARRAY)
    (d / "c.toml").write_text(CACHED)
    # 30 bursts of 80 requests 0.3 ms apart (a queue builds) with 1 s of quiet between (cuts
    # go on the per-drive bins' boundaries, 1 s apart in a run this short)
    write_trace(d / "bursts.parquet", bursts(30, 80, 300_000, 1_000_000_000))
    # Poisson arrivals at 400/s, more than four drives serve: the queue never drains
    rng = np.random.default_rng(7)
    write_trace(d / "saturated.parquet", np.cumsum(rng.exponential(2.5e6, 2000)).astype(
        np.int64), seed=3)
    write_trace(d / "one.parquet", np.array([5_000_000]), batches=1)
    return d


def table(run: Path, name: str):
    return pq.read_table(run / f"{name}.parquet")


def assert_same_run(par: Path, ser: Path, drive_ops: bool = False) -> None:
    """Every row of every Parquet file, and meta.json's counts and end state, equal."""
    names = ["ios", "drive_busy"] + (["drive_ops"] if drive_ops else [])
    assert sorted(p.name for p in par.iterdir()) == sorted(p.name for p in ser.iterdir())
    for name in names:
        a, b = table(par, name), table(ser, name)
        assert a.schema == b.schema, name
        assert a.num_rows == b.num_rows, name
        for col in a.column_names:
            assert a.column(col).equals(b.column(col)), f"{name}.{col}"
    ma, mb = (json.loads((p / "meta.json").read_text()) for p in (par, ser))
    for key in ("counts", "cache_at_end", "interval_ns", "drives", "options", "trace"):
        assert ma[key] == mb[key], key
    assert set(ma) - set(mb) == {"parallel"}


@pytest.mark.parametrize("array,drive_ops", [("a.toml", True), ("c.toml", False)])
def test_parallel_equals_serial_on_a_trace_with_idle_points(work, cluster, tmp_path, array,
                                                             drive_ops):
    """Bursts with quiet between them: four segments cut in the quiet, stitched, give the
    serial run row for row (ios, drive_busy, drive_ops); the overlaps agree. A first margin of
    16 requests is too short for the cached array (its clean lines come from long before), so
    there the margins grow until the neighbours agree."""
    trace = work / "bursts.parquet"
    assert pq.ParquetFile(trace).metadata.num_row_groups > 1
    ser = tmp_path / "serial"
    replay(trace, work / array, ser, drive_ops=drive_ops)
    par = tmp_path / "par"
    r = replay_parallel(trace, work / array, par, scheduler=cluster.scheduler_address,
                        segments=4, drive_ops=drive_ops, first_margin=16)
    p = r.parallel
    assert p is not None and p["segments"] == 4 and p["agreed"]
    assert p["identical_fraction"] == 1.0 and p["max_latency_diff_ns"] == 0
    assert p["drive_busy_exact"]
    assert_same_run(par, ser, drive_ops)
    # the owner's alone, as a serial run folder is (test_engine): folder 0700, files 0600
    assert stat.S_IMODE(par.stat().st_mode) == 0o700
    assert {stat.S_IMODE(f.stat().st_mode) for f in par.iterdir()} == {0o600}
    meta = json.loads((par / "meta.json").read_text())
    assert meta["parallel"]["cuts"] == p["cuts"]
    # every cut lies in a quiet gap: its request is the first of a burst
    for c in p["cuts"]:
        assert c["request"] % 80 == 0
    assert not [q for q in tmp_path.iterdir() if ".tmp-" in q.name or q.name.endswith(".lock")]
    if array == "c.toml":
        assert max(c["rounds"] for c in p["cuts"]) > 1


def test_a_local_cluster_is_stopped_before_the_stitch(work, tmp_path, monkeypatch):
    """``--workers 2`` without a scheduler: the local cluster's worker processes are gone by
    the time the parts are stitched (nothing can still write into the temporary, and the
    stitch and the summary run on a free machine); the run is the serial one row for row, and
    meta.json says what starting and stopping the cluster cost."""
    trace = work / "bursts.parquet"
    ser = tmp_path / "serial"
    replay(trace, work / "a.toml", ser)
    # (the module's own cluster, when another test started it, has worker processes too)
    before = {c.pid for c in multiprocessing.active_children()}
    seen: list[set[int]] = []
    stitch, connect = parallel._stitch, cluster_mod.connect

    def watched_connect(*a, **k):
        out = connect(*a, **k)
        seen.append({c.pid for c in multiprocessing.active_children()} - before)
        return out

    def watched_stitch(*a, **k):
        seen.append({c.pid for c in multiprocessing.active_children()} - before)
        return stitch(*a, **k)

    monkeypatch.setattr(cluster_mod, "connect", watched_connect)
    monkeypatch.setattr(parallel, "_stitch", watched_stitch)
    par = tmp_path / "par"
    r = replay_parallel(trace, work / "a.toml", par, workers=2, segments=4, first_margin=16)
    p = r.parallel
    assert p is not None and p["scheduler"] == "local" and p["agreed"]
    assert len(seen) == 2 and seen[0] and not seen[1], seen  # workers, then none
    assert p["setup_s"] >= p["warm_s"] > 0 and p["teardown_s"] >= 0
    assert_same_run(par, ser)


def test_the_command_says_what_the_cluster_cost(work, cluster, tmp_path):
    """``blocklab replay --scheduler``: the line about the segments also gives the seconds
    spent connecting, loading kernels and disconnecting, which meta.json holds (what makes a
    short trace slower on a cluster than serially)."""
    par = tmp_path / "par"
    res = CliRunner().invoke(app, ["replay", str(work / "bursts.parquet"), "--array",
                                   str(work / "a.toml"), "-o", str(par), "--scheduler",
                                   cluster.scheduler_address, "--segments", "4"])
    assert res.exit_code == 0, res.output
    p = json.loads((par / "meta.json").read_text())["parallel"]
    line = next(x for x in res.output.splitlines() if "segments on" in x)
    assert line.startswith("  4 segments on ") and "100.00% of" in line
    assert line.endswith(f"; cluster start, stop and kernel loading "
                         f"{p['setup_s'] + p['teardown_s']:.1f} s")
    # a user's workers load (or compile, where their cache lacks them) the kernels: said
    # before and after, where a review found 90 s of silence while they compiled
    assert ("blocklab: loading the kernels on the cluster's 1 machine(s): a machine whose "
            "kernel cache lacks them compiles them first (about a minute)") in res.stderr
    ready = next(x for x in res.stderr.splitlines() if "kernels ready on the cluster" in x)
    assert float(ready.split(" in ")[1].removesuffix(" s")) <= p["warm_s"] + 0.05


def _reuse_faults() -> tuple[int, dict[str, str | None]]:
    """Page faults of this thread while it allocates, touches and frees a 4 MiB array 100
    times, and the environment variables that decide it."""
    import resource

    pages = 0
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(100):
        a = np.empty(4 << 20, np.uint8)
        a[::4096] = 1  # one byte a page
        pages += len(a[::4096])
        del a
    faults = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before
    return faults * 100 // pages, {k: os.environ.get(k) for k in ("MALLOC_TRIM_THRESHOLD_",
                                                                  "OMP_NUM_THREADS")}


def test_local_workers_reuse_freed_memory(cluster):
    """The local cluster's workers free and allocate like any process: Dask's default
    MALLOC_TRIM_THRESHOLD_ turned glibc's sliding mmap threshold off, and every freed large
    array came back as fresh pages the kernel faulted in and zeroed again (51 % of the pages
    touched faulted, where this process faults for 1 %); a worker's segment paid about 10 %."""
    from distributed import Client

    with Client(cluster.scheduler_address, set_as_default=False) as client:
        got = client.run(_reuse_faults)
    assert len(got) == 2
    for percent, env in got.values():
        assert percent < 10, (percent, env)
        assert env == {"MALLOC_TRIM_THRESHOLD_": None, "OMP_NUM_THREADS": "1"}


def _cold(arr, opts, cols, a: int, b: int) -> dict:
    """A replay of requests [a, b) from idle drives and a cold cache: what a segment runs."""
    return run_engine(arr, cols["t"][a:b], cols["lba"][a:b], cols["nsec"][a:b],
                      cols["w"][a:b], settings=opts)


def test_saturated_trace_reports_the_difference(work, cluster, tmp_path):
    """A queue that never drains: a replay started late cannot catch the serial backlog, and
    one that stops early misses the arrivals its scheduler would have weighed. The run still
    completes; its reported agreement and largest difference are recomputed here from replays
    of each segment's range (the requests replayed by both neighbours of each cut), and the
    stitched rows are each segment's kept rows of such a replay."""
    trace = work / "saturated.parquet"
    ser = tmp_path / "serial"
    replay(trace, work / "a.toml", ser)
    par = tmp_path / "par"
    r = replay_parallel(trace, work / "a.toml", par, scheduler=cluster.scheduler_address,
                        segments=3, first_margin=32)
    p = r.parallel
    assert p is not None and p["segments"] == 3
    assert not p["agreed"] and p["identical_fraction"] < 1 and p["max_latency_diff_ns"] > 0
    # the margins grew as far as they may: a neighbour's length
    cuts = [0] + [c["request"] for c in p["cuts"]] + [2000]
    for k, c in enumerate(p["cuts"], start=1):
        assert c["margin"] == min(cuts[k] - cuts[k - 1], cuts[k + 1] - cuts[k])
    cfg = load_array(work / "a.toml")
    arr = build_array(cfg)
    opts = settings_for(cfg)
    t = table(ser, "ios")
    cols = {"t": t.column("arrival_ns").to_numpy(), "lba": t.column("sector").to_numpy(),
            "nsec": t.column("size_bytes").to_numpy() // 512,
            "w": t.column("op").to_numpy().astype(np.int64)}
    m = [0] + [c["margin"] for c in p["cuts"]] + [0]
    runs = [_cold(arr, opts, cols, cuts[k] - m[k], cuts[k + 1] + m[k + 1]) for k in range(3)]
    overlap = same = 0
    worst = 0
    for k, c in enumerate(p["cuts"], start=1):
        prev, nxt = runs[k - 1], runs[k]
        # the middle half of what both replay: [cut - margin/2, cut + margin/2)
        h = m[k] // 2
        off = cuts[k] - h - (cuts[k - 1] - m[k - 1])  # its first request, in prev's numbering
        on = m[k] - h  # and in nxt's
        n = 2 * h
        eq = np.ones(n, bool)
        for col in ("start", "done", "hit"):
            eq &= prev[col][off:off + n] == nxt[col][on:on + n]
        d = int(np.abs(prev["done"][off:off + n] - nxt["done"][on:on + n]).max())
        assert (c["overlap"], c["identical"], c["max_latency_diff_ns"]) == (n, int(eq.sum()), d)
        overlap += n
        same += int(eq.sum())
        worst = max(worst, d)
    assert p["overlap_requests"] == overlap
    assert p["identical_fraction"] == pytest.approx(same / overlap)
    assert p["max_latency_diff_ns"] == worst
    got = table(par, "ios").column("complete_ns").to_numpy()
    for k in range(3):
        a = m[k]
        kept = runs[k]["done"][a:a + cuts[k + 1] - cuts[k]]
        assert np.array_equal(got[cuts[k]:cuts[k + 1]], kept)
    # what the disagreement says is so: the stitched run is not the serial one
    assert not np.array_equal(got, t.column("complete_ns").to_numpy())


def test_one_worker_and_one_request_replay_serially(work, cluster, tmp_path):
    """--workers 1 is the serial replay; a one-request trace cannot be cut, and says so."""
    ser = tmp_path / "serial"
    replay(work / "bursts.parquet", work / "a.toml", ser)
    r = replay_parallel(work / "bursts.parquet", work / "a.toml", tmp_path / "w1", workers=1)
    assert r.parallel == {"segments": 1, "serial_because": "one worker"}
    for name in ("ios", "drive_busy"):
        assert table(tmp_path / "w1", name).equals(table(ser, name))
    r = replay_parallel(work / "one.parquet", work / "a.toml", tmp_path / "one",
                        scheduler=cluster.scheduler_address, segments=4)
    assert r.parallel is not None and r.parallel["serial_because"] == "the trace has one request"
    assert table(tmp_path / "one", "ios").num_rows == 1
    # failures span the run: serial, saying so
    r = replay_parallel(work / "bursts.parquet", work / "a.toml", tmp_path / "fail",
                        scheduler=cluster.scheduler_address, failures=[(1, 1.0)])
    assert r.parallel is not None and "failures" in r.parallel["serial_because"]
    r = replay_parallel(work / "bursts.parquet", work / "a.toml", tmp_path / "closed",
                        scheduler=cluster.scheduler_address, closed_loop=4)
    assert r.parallel is not None and "closed loop" in r.parallel["serial_because"]


def test_a_trace_that_cannot_be_cut_starts_no_cluster(work, tmp_path, monkeypatch):
    """Requests that all arrive within one statistics interval (where a cut must fall):
    replayed serially, saying why with the interval, and without starting a local cluster
    first (it started one, 2.4 s, and said the requests "arrive at once")."""
    from blocklab.pipeline import cluster as C

    def no_cluster(*a, **k):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(C, "connect", no_cluster)
    trace = write_trace(tmp_path / "short.parquet", np.arange(200, dtype=np.int64) * 1000,
                        seed=3)
    r = replay_parallel(trace, work / "a.toml", tmp_path / "w2", workers=2)
    assert r.parallel is not None
    why = r.parallel["serial_because"]
    assert why.startswith("its requests cannot be cut in time") and " s here)" in why, why
    ser = tmp_path / "serial"
    replay(trace, work / "a.toml", ser)
    assert table(tmp_path / "w2", "ios").equals(table(ser, "ios"))
    # the command's line for it is one line, whatever its length, when the output is not a
    # terminal (it wrapped at 100 columns onto an unindented second line: a review)
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(work / "a.toml"),
                                   "-o", str(tmp_path / "w3"), "--workers", "2"])
    assert res.exit_code == 0, res.output
    (line,) = [ln for ln in res.output.splitlines() if "replayed serially" in ln]
    assert line.startswith("  replayed serially: its requests cannot be cut in time")
    assert line.endswith("they all arrive within one") and len(line) > 100, res.output


def test_a_cached_arrays_first_margin_moves_what_its_cache_holds(work, cluster, tmp_path):
    """A cache keeps the lines of the last requests that fit in it, so a warm-up moving fewer
    bytes cannot recreate it at the cut: the first margin is the requests that move as many
    bytes as the cache holds (a review's 512 MiB cache took 6 rounds from 2,048 requests, 4 x
    the serial time). It takes fewer rounds than 2,048 requests did, and both equal the
    serial run."""
    (tmp_path / "big.toml").write_text(ARRAY + '[controller]\ncache = "256MiB"\n')
    n = 40_000
    rng = np.random.default_rng(17)
    trace = write_trace(tmp_path / "t.parquet",
                        np.cumsum(rng.exponential(2e7, n)).astype(np.int64), seed=9)
    sizes = pq.read_table(trace, columns=["size_bytes"]).column(0).to_numpy()
    want = -(-(256 << 20) // int(sizes.sum() / n))
    ser = tmp_path / "serial"
    replay(trace, tmp_path / "big.toml", ser)
    rounds = {}
    for name, first in (("default", None), ("small", parallel.FIRST_MARGIN)):
        r = replay_parallel(trace, tmp_path / "big.toml", tmp_path / name, segments=2,
                            scheduler=cluster.scheduler_address, first_margin=first)
        assert r.parallel is not None and r.parallel["agreed"]
        assert_same_run(tmp_path / name, ser)
        (cut,) = r.parallel["cuts"]
        rounds[name] = cut["rounds"]
        if first is None:  # the margin it agreed at: the cache's, or doublings of it
            assert cut["margin"] in (want << k for k in range(cut["rounds"]))
    assert parallel.FIRST_MARGIN < want
    assert rounds["default"] < rounds["small"], rounds


def test_a_folder_that_is_not_a_run_is_refused_before_a_cluster_starts(work, tmp_path,
                                                                        monkeypatch):
    """-o naming a user's folder: refused (its files untouched) before a local cluster is
    started, as a serial replay refuses it (it was refused once the cluster had started,
    6 s later; a review)."""
    from blocklab.pipeline import cluster as C

    def no_cluster(*a, **k):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(C, "connect", no_cluster)
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("mine")
    with pytest.raises(parallel.BlocklabError, match="exists and is not a run folder"):
        replay_parallel(work / "bursts.parquet", work / "a.toml", mine, workers=2)
    assert [q.name for q in mine.iterdir()] == ["todo.txt"]


def test_a_worker_that_dies_mid_segment(work, cluster, tmp_path):
    """SIGKILL to the worker process writing a segment (its process id is in the part's
    name): Dask runs the segment again elsewhere and the run still equals the serial one."""
    n = 60_000
    rng = np.random.default_rng(11)
    trace = write_trace(tmp_path / "long.parquet",
                        np.cumsum(rng.exponential(2e7, n)).astype(np.int64), seed=5)
    ser = tmp_path / "serial"
    replay(trace, work / "a.toml", ser)
    par = tmp_path / "par"
    box: dict = {}
    th = threading.Thread(target=lambda: box.update(r=replay_parallel(
        trace, work / "a.toml", par, scheduler=cluster.scheduler_address, segments=2)))
    th.start()
    killed = None
    deadline = time.monotonic() + 600
    while killed is None and time.monotonic() < deadline and th.is_alive():
        for q in tmp_path.glob(".par.tmp-*/.seg-*"):
            killed = int(q.name.split("-")[2])
            os.kill(killed, signal.SIGKILL)
            break
        time.sleep(0.005)
    th.join(600)
    assert killed is not None and not th.is_alive()
    assert box["r"].parallel["segments"] == 2
    assert box["r"].parallel["attempts_lost"] == 1  # (its part removed, the death told)
    assert_same_run(par, ser)


def test_sigterm_leaves_no_run_folder(work, tmp_path):
    """SIGTERM while the segments run on a local cluster: exit 143, no run folder, no
    temporary, no lock."""
    n = 200_000
    rng = np.random.default_rng(13)
    trace = write_trace(tmp_path / "t.parquet",
                        np.cumsum(rng.exponential(2e7, n)).astype(np.int64))
    out = tmp_path / "run"
    p = subprocess.Popen([*BLOCKLAB, "replay", str(trace), "--array", str(work / "a.toml"),
                          "-o", str(out), "--workers", "2"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "NUMBA_CACHE_DIR": numba_cache_base()})
    deadline = time.monotonic() + 600
    seen = False
    while time.monotonic() < deadline and p.poll() is None:
        if list(tmp_path.glob(".run.tmp-*/.seg-*")):
            seen = True
            break
        time.sleep(0.01)
    assert seen, p.communicate()
    p.send_signal(signal.SIGTERM)
    _out, err = p.communicate(timeout=120)
    assert p.returncode == 128 + signal.SIGTERM, err
    assert "nothing half-written" in err
    assert sorted(q.name for q in tmp_path.iterdir()) == ["t.parquet"]


def _workers_of(pid: int) -> list[int]:
    """The local cluster's worker processes among ``pid``'s children (multiprocessing's
    spawn: ``-c from multiprocessing.spawn import spawn_main``)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == pid and b"spawn_main" in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue  # (not a process, or gone)
    return found


def test_ctrl_c_while_the_workers_start_is_one_line(work, tmp_path):
    """A terminal's Ctrl-C goes to the whole process group. Sent as soon as the local
    cluster's worker processes exist (Python is importing Dask in them, before their preload
    ignores SIGINT), it printed 17 to 86 lines of KeyboardInterrupt tracebacks from the
    workers with the command's one line, then two of multiprocessing's resource tracker
    (a review, 2026-11-30). Now the workers start with SIGINT blocked: one line, exit 130,
    nothing left, and the workers gone once they notice."""
    trace = write_trace(tmp_path / "t.parquet", bursts(30, 80, 300_000, 1_000_000_000))
    out = tmp_path / "run"
    p = subprocess.Popen([*BLOCKLAB, "replay", str(trace), "--array", str(work / "a.toml"),
                          "-o", str(out), "--workers", "2"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env={**os.environ, "NUMBA_CACHE_DIR": numba_cache_base()})
    deadline = time.monotonic() + 600
    workers: list[int] = []
    while not workers and time.monotonic() < deadline and p.poll() is None:
        workers = _workers_of(p.pid)
        time.sleep(0.002)
    assert workers, p.communicate()
    os.killpg(p.pid, signal.SIGINT)  # (the group: what the terminal does)
    _out, err = p.communicate(timeout=120)  # (to the end of the workers' standard error)
    assert p.returncode == 128 + signal.SIGINT, err
    assert err.splitlines() == ["blocklab: stopped by SIGINT; nothing half-written was kept"]
    assert sorted(q.name for q in tmp_path.iterdir()) == ["t.parquet"]


def test_a_scheduler_lost_mid_replay_is_one_line(work, tmp_path):
    """A user's cluster (dask scheduler and dask worker, as a user starts them) whose scheduler
    is killed while the segments run: exit 1 (a fault of the machines, not of the request;
    2 until 2026-11-30) with one error line that says the scheduler was lost, no run folder
    and no temporary. The Dask client printed 40 lines of its reconnect
    attempts' traceback before that line."""
    import socket

    dask = str(Path(sys.executable).parent / "dask")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    addr = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "NUMBA_CACHE_DIR": numba_cache_base()}
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)]
    try:
        procs.append(subprocess.Popen([dask, "worker", addr, "--nworkers", "2", "--nthreads",
                                       "1", "--no-dashboard"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, env=env,
                                      start_new_session=True))
        rng = np.random.default_rng(13)
        trace = write_trace(tmp_path / "t.parquet",
                            np.cumsum(rng.exponential(2e7, 200_000)).astype(np.int64))
        p = subprocess.Popen([*BLOCKLAB, "replay", str(trace), "--array",
                              str(work / "a.toml"), "-o", str(tmp_path / "run"),
                              "--scheduler", addr, "--workers", "2", "--timeout", "60"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 600
        while (time.monotonic() < deadline and p.poll() is None
               and not list(tmp_path.glob(".run.tmp-*/.seg-*"))):
            time.sleep(0.01)
        assert p.poll() is None, p.communicate()
        os.killpg(procs[0].pid, signal.SIGKILL)
        _out, err = p.communicate(timeout=300)
    finally:
        for q in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(q.pid, signal.SIGKILL)
            q.wait(60)
    assert p.returncode == 1, err
    assert all(line.startswith("blocklab: ") for line in err.splitlines()), err
    (error,) = [line for line in err.splitlines() if line.startswith("blocklab: error: ")]
    assert "the connection to the Dask scheduler was lost" in error, err
    assert sorted(q.name for q in tmp_path.iterdir()) == ["t.parquet"]


def _index(t_ns: np.ndarray, grid_ns: int) -> TraceIndex:
    """A TraceIndex of arrivals ``t_ns`` on a grid (as index_trace builds from a file)."""
    lines = int(t_ns[-1]) // grid_ns + 2
    first = np.searchsorted(t_ns, np.arange(lines, dtype=np.int64) * grid_ns)
    gap = np.where((first > 0) & (first < len(t_ns)),
                   t_ns[np.minimum(first, len(t_ns) - 1)] - t_ns[np.maximum(first - 1, 0)], -1)
    return TraceIndex(requests=len(t_ns), rows=len(t_ns), grid_ns=grid_ns, group_rows=[0],
                      group_requests=[0], first_at=first.astype(np.int64), gap_before=gap,
                      backwards=False)


@pytest.mark.parametrize("segments", [2, 3, 4])
def test_cuts_balance_the_segments_and_seek_idle_points(segments):
    """The longest segment is the parallel replay's critical path: on Poisson arrivals the
    cuts split the requests evenly (each segment within 3 % of its share), on a wide gap (at
    least half the widest within a quarter segment of the split); on bursts with quiet between
    them every cut starts a burst."""
    rng = np.random.default_rng(segments)
    t = np.cumsum(rng.exponential(1e6, 200_000)).astype(np.int64)
    ix = _index(t, 2_000_000)
    lines = choose_cuts(ix, segments)
    cuts = [0] + [int(ix.first_at[g]) for g in lines] + [ix.requests]
    sizes = np.diff(cuts)
    assert len(sizes) == segments and np.all(np.abs(sizes / (ix.requests / segments) - 1) < 0.03)
    per = ix.requests / segments
    for k, g in enumerate(lines, 1):
        window = np.abs(ix.first_at - k * per) <= per / 4
        assert ix.gap_before[g] >= ix.gap_before[window].max() / 2
    b = bursts(40, 80, 300_000, 1_000_000_000)
    ixb = _index(b, 50_000_000)
    for g in choose_cuts(ixb, segments):
        assert ixb.first_at[g] % 80 == 0 and ixb.gap_before[g] > 900_000_000


def test_a_local_cluster_that_cannot_start_is_one_line(monkeypatch):
    """A worker killed while the local cluster starts made Dask raise "Nanny failed to start"
    through the command: a 79-line traceback, exit 1 (a review). Now one line, still exit 1:
    a fault of the machine."""
    import distributed

    from blocklab.traces.safety import SystemFault

    def fails(*a, **k):
        raise RuntimeError("Nanny failed to start.")

    monkeypatch.setattr(distributed, "LocalCluster", fails)
    with pytest.raises(SystemFault) as e:
        cluster_mod.connect(None, 2, 10)
    assert str(e.value) == ("the local Dask cluster did not start: RuntimeError: Nanny failed "
                            "to start.")
    assert e.value.exit_status == 1


def test_a_local_cluster_larger_than_the_machine_is_refused():
    """--workers 100,000 on a local cluster sat silent for 10 minutes, growing to 3.2 GB."""
    from blocklab.pipeline.cluster import LOCAL_PER_CORE, connect
    from blocklab.traces.errors import BlocklabError

    cap = LOCAL_PER_CORE * (os.cpu_count() or 1)
    with pytest.raises(BlocklabError, match=f"at most {cap} worker processes"):
        connect(None, 100_000, 1.0)
    with pytest.raises(BlocklabError, match="--workers"):
        connect(None, cap + 1, 1.0)


def test_relative_paths_reach_the_workers_as_the_clients(work, cluster, tmp_path, monkeypatch):
    """The workers run in their own working folders: a relative trace name was opened there,
    so a worker's own file of that name was replayed in the client's place (a review) or none
    was found. The client now sends absolute paths, and the run equals the serial one."""
    ser = tmp_path / "serial"
    replay(work / "bursts.parquet", work / "a.toml", ser)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "t.parquet").write_bytes((work / "bursts.parquet").read_bytes())
    (tmp_path / "in" / "a.toml").write_text(ARRAY)
    monkeypatch.chdir(tmp_path / "in")  # the workers' folder is still this process's first
    r = replay_parallel("t.parquet", "a.toml", "par", scheduler=cluster.scheduler_address,
                        segments=4)
    assert r.parallel is not None and r.parallel["segments"] == 4
    a, b = table(tmp_path / "in" / "par", "ios"), table(ser, "ios")
    assert a.equals(b)


def test_damage_a_worker_finds_names_the_trace_as_given(work, cluster, tmp_path, monkeypatch):
    """A damaged page of the sector column, which only the workers read (the client's pass
    reads time, op and size): the one line names the trace as the user gave it, as a serial
    replay does, not by the absolute path the workers were sent (a review)."""
    (tmp_path / "in").mkdir()
    trace = tmp_path / "in" / "t.parquet"
    trace.write_bytes((work / "bursts.parquet").read_bytes())
    flip_page_bytes(trace, "sector", row_group=1)
    monkeypatch.chdir(tmp_path / "in")
    with pytest.raises(parallel.BlocklabError) as e:
        replay_parallel("t.parquet", work / "a.toml", "par", scheduler=cluster.scheduler_address,
                        segments=2)
    assert str(e.value).startswith("t.parquet: damaged in row group 1's column sector"), e.value


def test_a_worker_whose_trace_is_not_the_clients_says_so(work, tmp_path):
    """A worker that sees another file at the trace's path (another machine's): one line
    naming the trace and both row counts, not a replay of the other file."""
    from blocklab.pipeline.segment import Segment, run_segment

    seg = Segment(0, str(work / "bursts.parquet"), str(work / "a.toml"), 1.0, False, False,
                  0, 0, 10, 10, (0, 1), 0, 0, 0, str(tmp_path), rows=2401)
    res = run_segment(seg)
    assert res["error"][0] == "text"
    assert res["error"][1].startswith(f"{work / 'bursts.parquet'}: on the worker at ")
    assert res["error"][1].endswith("it has 2,400 rows, on the client 2,401: the workers must "
                                    "see the client's trace at the same path")


def test_each_segment_carries_the_clients_row_count(work):
    """The client sends every segment its trace's row count, which the worker checks against
    the file it opens (the test above): a segment without it (rows 0) would not check."""
    import pyarrow.parquet as pq

    from blocklab.pipeline.parallel import _Cuts, index_trace

    trace = work / "bursts.parquet"
    pf = pq.ParquetFile(trace)
    ix = index_trace(pf, 1.0)
    cuts = _Cuts.plan(ix, choose_cuts(ix, 4), 64)
    assert cuts.segments > 1
    for k in range(cuts.segments):
        seg = cuts.segment(k, ix, trace, work / "a.toml", 1.0, False, False, work)
        assert seg.rows == pf.metadata.num_rows == 2400


@pytest.mark.parametrize("server", ["banner", "silent"])
def test_a_scheduler_address_that_is_not_dask_is_one_line(tmp_path, server):
    """--scheduler at a port that takes the connection and is not Dask: one that speaks first
    (an SSH banner) died with a traceback (Dask read the banner as a 2.8 EiB frame), one that
    says nothing (an HTTP server) hung for ten minutes whatever --timeout said."""
    import socket

    lsn = socket.socket()
    lsn.bind(("127.0.0.1", 0))
    lsn.listen()
    held: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                c, _ = lsn.accept()
                held.append(c)
                if server == "banner":
                    c.sendall(b"SSH-2.0-OpenSSH_9.6p1\r\n")

    threading.Thread(target=serve, daemon=True).start()
    trace = write_trace(tmp_path / "t.parquet", bursts(3, 10, 300_000, 1_000_000_000))
    (tmp_path / "a.toml").write_text(ARRAY)
    addr = f"tcp://127.0.0.1:{lsn.getsockname()[1]}"
    try:
        p = subprocess.run([*BLOCKLAB, "replay", str(trace), "--array", str(tmp_path / "a.toml"),
                            "-o", str(tmp_path / "run"), "--scheduler", addr, "--timeout", "1"],
                           capture_output=True, text=True, timeout=120)
    finally:
        lsn.close()
        for c in held:
            c.close()
    assert p.returncode == 2, p.stderr
    want = ("what answered is not a Dask scheduler (its first bytes are not Dask's protocol)"
            if server == "banner" else "no Dask scheduler answered within 1 s (the address "
            "took the connection but did not speak Dask's protocol)")
    assert p.stderr == f"blocklab: error: --scheduler {addr}: {want}\n"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("address,want", [
    ("", "--scheduler: an empty address (give the scheduler's, as tcp://HOST:PORT, or leave "
         "--scheduler out for a local cluster)"),
    ("notanaddress", "--scheduler notanaddress: not a Dask scheduler's address (missing port "
                     "number in address 'notanaddress'); give it as tcp://HOST:PORT"),
    ("http://127.0.0.1:9", "--scheduler http://127.0.0.1:9: not a Dask scheduler's address "
                           "(Dask speaks inproc, tcp, tls, ucx, ws, wss, not http); give it as "
                           "tcp://HOST:PORT"),
    ("refused", "connection refused (nothing listens there: start the scheduler, or check the "
                "address)"),
])
def test_an_address_no_scheduler_can_be_at_is_one_line_at_once(work, tmp_path, address, want):
    """An empty --scheduler ran a local cluster; a malformed one said "no Dask scheduler
    answered within 2 s"; a refused one was retried for the whole --timeout and said "Timed
    out" (a review). Each is now one line before anything starts: exit 2, nothing written."""
    import socket

    if address == "refused":  # a port just freed: nothing listens there
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
        want = f"--scheduler {address}: {want}"
    res = CliRunner().invoke(app, ["replay", str(work / "bursts.parquet"), "--array",
                                   str(work / "a.toml"), "-o", str(tmp_path / "run"),
                                   "--scheduler", address, "--timeout", "600"])
    assert res.exit_code == 2, res.output
    assert res.output == f"blocklab: error: {want}\n"
    assert list(tmp_path.iterdir()) == []


def test_a_local_cluster_leaves_no_scratch_folder(work, tmp_path, monkeypatch):
    """Dask left an empty, world-readable $TMPDIR/dask-scratch-space after every local
    cluster (the folder its workers spill to): the workers and the scheduler now use a folder
    of the command's own, 0700, removed when the cluster closes."""
    import tempfile

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    seen: list[int] = []
    real = cluster_mod.tempfile.mkdtemp

    def mkdtemp(*a, **k):
        p = real(*a, **k)
        seen.append(os.stat(p).st_mode)
        return p

    monkeypatch.setattr(cluster_mod.tempfile, "mkdtemp", mkdtemp)
    r = replay_parallel(work / "bursts.parquet", work / "a.toml", tmp_path / "par", workers=2)
    assert r.parallel is not None and r.parallel["segments"] == 2
    assert seen and all(stat.S_IMODE(m) == 0o700 for m in seen)
    left = sorted(p.name for p in tmp.iterdir() if not p.name.startswith("blocklab-duckdb-"))
    assert left == []
