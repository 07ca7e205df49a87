"""The sections of ``make bench`` (tools/bench.py) after ingest, but for replay's
(tools/bench_replay.py): DiskSim validation replays, the kernels' compile time, synthetic
generation, capture, queries, sweeps, the parallel replay and peak memory by command; each
returns its figures (or why it could not run). Benchmarks report; no test asserts a time."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

#: Runs the command in its arguments after the first (the file its output goes to, or "" for
#: none) and prints its exit status, wall seconds and peak RSS (KiB). ``timed`` goes through it
#: because Linux counts in a child's peak RSS the image it was forked from (the bench process,
#: with whatever it holds); forked from this small process, the command's own peak is counted.
_LAUNCH = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
           "r = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], 'wb') if sys.argv[1] "
           "else subprocess.DEVNULL); "
           "print(r.returncode, time.perf_counter() - t, "
           "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def timed(cmd: list[str], stderr: Path | None = None, stdout: Path | None = None,
          env: dict[str, str] | None = None) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one child process (its standard error to
    ``stderr``, its output to ``stdout``, when given; ``env`` its environment), both measured
    around the command alone (``_LAUNCH``)."""
    err = open(stderr, "wb") if stderr is not None else subprocess.DEVNULL  # noqa: SIM115
    try:
        p = subprocess.run([sys.executable, "-c", _LAUNCH, str(stdout or ""), *cmd],
                           stdout=subprocess.PIPE, stderr=err, text=True, check=True, env=env)
    finally:
        if stderr is not None:
            err.close()  # type: ignore[union-attr]
    rc, secs, kib = p.stdout.split()
    if int(rc):
        raise subprocess.CalledProcessError(int(rc), cmd)
    return float(secs), int(kib)


class FolderPeak:
    """The most bytes the files under ``folder`` held at once while the ``with`` block ran
    (sampled every 0.1 s): a command's temporary disk, given the folder as its TMPDIR (DuckDB
    spills there: pipeline/query.py duck)."""

    def __init__(self, folder: Path):
        import threading

        self.folder = folder
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.1):
            total = 0
            for root, _dirs, files in os.walk(self.folder):
                for name in files:
                    try:
                        total += os.path.getsize(os.path.join(root, name))
                    except OSError:  # removed meanwhile
                        pass
            self.peak = max(self.peak, total)

    def __enter__(self) -> FolderPeak:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


#: DiskSim 4.0's own speed on its validation traces (requests/s, -O2), from
#: ../shared/validation/disksim/README.md: a baseline measured there, not in this run.
DISKSIM_SPEED = {"cheetah9LP": 29_900, "atlas10k": 26_600, "barracuda": 23_800,
                 "hp_c2247a": 36_800}


def validation_speeds() -> dict[str, dict[str, float]] | str:
    from blocklab.pipeline.model.config import catalog_path
    from blocklab.pipeline.validate import validate_disksim

    shared = Path(os.environ.get("BLOCKLAB_SHARED", Path(__file__).resolve().parents[2]
                                 / "shared")) / "validation" / "disksim"
    if not shared.is_dir():
        return f"no validation traces at {shared} (set BLOCKLAB_SHARED)"
    out = {}
    for name, base in DISKSIM_SPEED.items():
        # a replay of these traces takes milliseconds: the median of five runs
        runs = [validate_disksim(catalog_path(name.lower()), shared / f"{name}.trace")
                for _ in range(5)]
        r = sorted(runs, key=lambda x: x.requests_per_s)[2]
        out[name] = {"requests_per_s": r.requests_per_s, "vs_disksim": r.requests_per_s / base,
                     "demerit_ms": r.demerit_ms}
    return out


def compile_times() -> dict[str, float]:
    """Seconds to compile every kernel family from an empty Numba cache (``python -m
    blocklab.tools.warm``, what ``make setup`` runs: two processes on two cores), the same in
    one process (``-j 1``), and, the baseline, to load them all from the cache in a new
    process: what the first command on a machine costs beyond every later one."""
    out: dict[str, float] = {}
    warm = [sys.executable, "-m", "blocklab.tools.warm", "-q"]
    for name, args in (("compile_s", warm), ("compile_one_process_s", [*warm, "-j", "1"])):
        with tempfile.TemporaryDirectory(prefix="blocklab-bench-cache-") as cache:
            env = dict(os.environ, NUMBA_CACHE_DIR=cache)
            t = time.perf_counter()
            subprocess.run(args, env=env, check=True, stdout=subprocess.DEVNULL)
            out[name] = time.perf_counter() - t
            if name == "compile_s":
                t = time.perf_counter()
                subprocess.run(warm, env=env, check=True, stdout=subprocess.DEVNULL)
                out["load_s"] = time.perf_counter() - t
    return out


def synth_speeds() -> dict[str, float]:
    """Synthetic workload generation (issue 4), requests per second on one core: each
    generator's kernel alone (columns reused in memory; best of three after a warm-up), and an
    SPC-1 trace written to Parquet end to end (Arrow conversion, zstd on the writer thread)."""
    from blocklab.pipeline.synth import synth_spc1
    from blocklab.traces.schema import SECTOR_BYTES
    from blocklab.traces.synth import iometer, ior, kernel_rate, orion, spc1

    cap = (1 << 40) // SECTOR_BYTES  # a 1 TiB volume
    plans = {  # about 10 M requests each
        "spc1": (lambda: spc1.plan(2000, 100.0, 1, cap), False),  # 100 k IOPS, 100 s
        "ior": (lambda: ior.plan(64, 4096, 1 << 20, 320, False, True, seed=1), True),
        "iometer": (lambda: iometer.plan(4096, 67, 50, 0, 32, 4, 2_500_000, 0, 0, 1, cap), True),
        "orion": (lambda: orion.plan("detailed", "seq", 8192, 1 << 20, 4, None, None, 4, 30,
                                     2000, 1, cap), True),
    }
    out: dict[str, float] = {}
    for name, (make, closed) in plans.items():
        small = make()
        kernel_rate(small.kernel(), closed, 1 << 10)  # compile or load the cached kernel
        best = 0.0
        for _ in range(3):
            rows, secs = kernel_rate(make().kernel(), closed)
            best = max(best, rows / secs)
        out[f"{name}_kernel_requests_per_s"] = best
    with tempfile.TemporaryDirectory(prefix="blocklab-bench-synth-") as tmp:
        synth_spc1(Path(tmp) / "warm.parquet", 1, 10.0, capacity="1TiB")
        r = synth_spc1(Path(tmp) / "spc1.parquet", 2000, 100.0, seed=1, capacity="1TiB")
        out["spc1_parquet_requests_per_s"] = r.requests_per_s
        out["spc1_parquet_bytes_per_request"] = (Path(tmp) / "spc1.parquet").stat().st_size \
            / r.requests
    return out


def query_speeds(rows: int = 50_000_000) -> dict[str, Any]:
    """DuckDB over ``rows`` ios-shaped result rows (a run folder written in a temporary folder,
    one hour of requests, zstd Parquet as replay writes it): the ``bandwidth`` query (per
    second, by op), exact p50/p99/p99.9 by op with exact_quantiles (queries/_macros.sql, in
    the connection's memory limit, as every named query computes them), the same with one
    quantile_cont of the list of quantiles (the baseline: DuckDB's own, which holds every
    value in memory, run with the limit lifted), and ``latency-summary``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from blocklab.pipeline import runmeta
    from blocklab.pipeline.query import connect, execute, find_sources, named
    from blocklab.traces.schema import RUN_SCHEMA_VERSION, RUN_SCHEMAS

    tmp = Path(tempfile.mkdtemp(prefix="blocklab-bench-query-"))
    out: dict[str, Any] = {"rows": float(rows)}
    try:
        run = tmp / "run"
        run.mkdir()
        rng = np.random.default_rng(6)
        chunk = 5_000_000
        t0 = 0
        started = time.perf_counter()
        with pq.ParquetWriter(run / "ios.parquet", RUN_SCHEMAS["ios"], compression="zstd") as w:
            for a in range(0, rows, chunk):
                n = min(chunk, rows - a)
                arrive = t0 + np.cumsum(rng.exponential(3.6e12 / rows, n)).astype(np.int64)
                t0 = int(arrive[-1])
                lat = rng.lognormal(np.log(2e6), 1.0, n).astype(np.int64) + 50_000
                w.write_table(pa.table({
                    "request": np.arange(a, a + n, dtype=np.int64), "arrival_ns": arrive,
                    "start_ns": arrive + 10_000, "complete_ns": arrive + lat, "latency_ns": lat,
                    "op": (rng.random(n) < 0.3).astype(np.uint8),
                    "sector": rng.integers(0, 1 << 31, n) * 8,
                    "size_bytes": rng.choice(np.array([4096, 8192, 65536]), n),
                    "stream": np.zeros(n, np.uint32), "cache_hit": np.zeros(n, bool),
                    "lost": np.zeros(n, bool),
                }, schema=RUN_SCHEMAS["ios"]), row_group_size=1 << 20)
        runmeta.write(run, runmeta.RunMeta(run_schema_version=RUN_SCHEMA_VERSION,
                                           interval_ns=1_000_000_000))
        out["write_s"] = time.perf_counter() - started
        out["parquet_mb"] = (run / "ios.parquet").stat().st_size / 1e6
        src = find_sources([run])
        con = connect(src)

        def best(f) -> float:
            times = []
            for _ in range(2):  # the first pass also reads the file into the page cache
                t = time.perf_counter()
                f()
                times.append(time.perf_counter() - t)
            return min(times)

        out["bandwidth_s"] = best(lambda: named(con, "bandwidth", src, {"interval_s": "1"}))
        exact = ("WITH v AS (SELECT op AS g, latency_ns AS x FROM ios) "
                 "SELECT g, q, value FROM exact_quantiles('v', [0.5, 0.99, 0.999])")
        one = ("SELECT op, quantile_cont(latency_ns, [0.5, 0.99, 0.999]) AS q "
               "FROM ios GROUP BY op")
        out["percentiles_s"] = best(lambda: execute(con, exact, {}, "bench", src))
        out["latency_summary_s"] = best(lambda: named(con, "latency-summary", src))
        limit = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        out["memory_limit"] = limit
        con.execute("RESET memory_limit")  # DuckDB's default, 80 % of RAM
        out["percentiles_each_s"] = best(lambda: execute(con, one, {}, "bench", src))
        out["threads"] = float(con.execute("SELECT current_setting('threads')").fetchone()[0])
        con.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def capture_speed() -> dict[str, object] | str:
    """``blocklab capture`` on a loop device over tmpfs under fio (io_uring, 4 KiB random
    reads and writes, queue depth 32) at rising request rates: for each rate, the requests
    captured against fio's count, the events lost, and the CPU the capture process used
    (its rusage). Baselines from the same run: fio alone (the machine's ceiling) and a reader
    of the text ``trace_pipe`` files (no parsing) at the highest rate, the obvious alternative
    to decoding the binary pages."""
    from blocklab.pipeline.tracefs import find_tracefs

    if os.geteuid() != 0:
        return "needs root (tracefs instances, loop devices)"
    if not shutil.which("fio") or not shutil.which("losetup"):
        return "needs fio and losetup (make tools)"
    try:
        tracefs = find_tracefs()
    except Exception as e:  # reported, not raised: the rest of the bench still runs
        return str(e)
    img = Path(f"/dev/shm/blocklab-bench-{os.getpid()}.img")
    with open(img, "wb") as f:
        f.truncate(256 << 20)
    dev = subprocess.run(["losetup", "-f", "--show", str(img)], check=True,
                         capture_output=True, text=True).stdout.strip()
    nomerges = Path("/sys/block") / Path(dev).name / "queue" / "nomerges"
    saved = nomerges.read_text().strip()
    nomerges.write_text("2")  # one request per fio I/O, so counts compare exactly
    out: dict[str, object] = {}
    try:
        out["fio_alone_requests_per_s"] = _fio(dev, 0) / _FIO_SECS
        steps = [_capture_step(dev, rate) for rate in (25_000, 50_000, 100_000, 150_000, 0)]
        out["steps"] = steps
        ok = [s for s in steps if s["zero_loss"]]
        out["max_zero_loss_requests_per_s"] = max(
            (s["fio_requests_per_s"] for s in ok), default=0.0)
        top = max(steps, key=lambda s: s["fio_requests_per_s"])
        out["text_reader"] = _text_reader(tracefs, dev, int(top["target_per_s"]))
    finally:
        nomerges.write_text(saved)
        subprocess.run(["losetup", "-d", dev], check=False)
        img.unlink(missing_ok=True)
    return out


#: Seconds of each fio run of ``capture_speed``.
_FIO_SECS = 3


def _fio(dev: str, rate: int) -> int:
    """Requests fio completes on ``dev`` in ``_FIO_SECS`` (io_uring, 4 KiB random reads and
    writes, queue depth 32) at ``rate`` requests/s (0: as fast as it can)."""
    limit = [f"--rate_iops={rate // 2},{rate // 2}"] if rate else []
    r = subprocess.run(["fio", "--name=bench", f"--filename={dev}", "--direct=1",
                        "--ioengine=io_uring", "--iodepth=32", "--rw=randrw", "--bs=4k",
                        "--time_based", f"--runtime={_FIO_SECS}", "--norandommap",
                        "--output-format=json", *limit],
                       check=True, capture_output=True, text=True)
    job = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]
    return job["read"]["total_ios"] + job["write"]["total_ios"]


def _capture_step(dev: str, rate: int) -> dict[str, Any]:
    """``blocklab capture`` of ``dev`` while fio runs at ``rate``: requests captured against
    fio's, events lost, and the capture's CPU (its own report and the process's rusage)."""
    secs = _FIO_SECS
    cap = Path(f"/dev/shm/blocklab-bench-{os.getpid()}.parquet")
    proc = subprocess.Popen([sys.executable, "-m", "blocklab.pipeline.cli", "capture", "-d",
                             dev, "-o", str(cap), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    while "capturing" not in (line := proc.stderr.readline()):
        if not line:
            raise RuntimeError(f"capture did not start: {proc.communicate()}")
    n = _fio(dev, rate)
    proc.send_signal(signal.SIGINT)
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout = proc.stdout.read() if proc.stdout else ""
    proc.communicate()
    res = json.loads(stdout)
    cap.unlink(missing_ok=True)
    # the capture's own CPU (reported by it: from tracefs set-up to the file's commit)
    # and the whole process's (rusage: Python start-up and imports included)
    cpu = res["cpu_s"]
    return {"target_per_s": rate, "fio_requests_per_s": n / secs,
            "captured": res["requests"], "fio_requests": n,
            "lost_events": res["lost_events"], "capture_cpu_s": cpu,
            "capture_cpu_pct": 100 * cpu / res["elapsed_s"],
            "process_cpu_s": usage.ru_utime + usage.ru_stime,
            "cpu_us_per_request": 1e6 * cpu / max(n, 1),
            "zero_loss": res["lost_events"] == 0 and res["requests"] == n}


def _text_reader(tracefs: Path, dev: str, rate: int) -> dict[str, float]:
    """The baseline: a thread reading the text of the per-CPU trace_pipe files of an instance
    like the capture's while fio runs at ``rate``, and that thread's CPU."""
    import threading

    from blocklab.pipeline.tracefs import remove_instance

    inst = tracefs / "instances" / f"blocklab-{os.getpid()}"
    os.mkdir(inst)
    try:
        st = os.stat(dev)
        devt = (os.major(st.st_rdev) << 20) | os.minor(st.st_rdev)
        for name, val in (("tracing_on", "0"), ("buffer_size_kb", "4096"),
                          ("trace_clock", "mono"), ("options/overwrite", "0")):
            (inst / name).write_text(val)
        for ev in ("block_rq_insert", "block_rq_issue", "block_rq_complete"):
            (inst / "events" / "block" / ev / "filter").write_text(f"dev == {devt}")
            (inst / "events" / "block" / ev / "enable").write_text("1")
        fds = [os.open(p / "trace_pipe", os.O_RDONLY | os.O_NONBLOCK)
               for p in sorted((inst / "per_cpu").iterdir())]
        done = threading.Event()
        got = {"bytes": 0, "cpu": 0.0}

        def reader() -> None:
            t0 = time.thread_time()
            while True:
                idle = True
                for fd in fds:
                    while True:
                        try:
                            b = os.read(fd, 1 << 16)
                        except BlockingIOError:
                            break
                        if not b:
                            break
                        got["bytes"] += len(b)
                        idle = False
                if idle and done.is_set():
                    break
                if idle:
                    time.sleep(0.05)
            got["cpu"] = time.thread_time() - t0

        th = threading.Thread(target=reader)
        th.start()
        (inst / "tracing_on").write_text("1")
        n = _fio(dev, rate)
        (inst / "tracing_on").write_text("0")
        done.set()
        th.join()
        for fd in fds:
            os.close(fd)
        return {"fio_requests_per_s": n / _FIO_SECS, "cpu_s": got["cpu"],
                "cpu_us_per_request": 1e6 * got["cpu"] / max(n, 1),
                "bytes_per_request": got["bytes"] / max(n, 1)}
    finally:
        remove_instance(inst)


def sweep_speeds() -> dict[str, float]:
    """``blocklab sweep`` on a LocalCluster of this machine: the same 8-point sweep (4 stripe
    units x 2 loads of a 1,000,000-request trace on a RAID-5 of five Atlas 10K drives) with one
    worker process and with two. Points per minute over the points alone (first submitted to
    last done) and over the whole run (cluster start and kernel warm-up included)."""
    from blocklab.pipeline.sweep import run_sweep
    from blocklab.traces.store import TraceMeta, TraceWriter, columns_to_batch, empty_columns

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="blocklab-bench-sweep-") as tmp:
        d = Path(tmp)
        n = 1_000_000
        rng = np.random.default_rng(5)
        cols = empty_columns(n)
        # about 67 requests/s: the drives about half busy, a steady state
        cols["time_ns"] = np.cumsum(rng.exponential(1.5e7, n)).astype(np.int64)
        cols["sector"] = rng.integers(0, 1 << 22, n).astype(np.int64) * 8
        cols["size_bytes"] = rng.choice([4096, 16384, 65536], n).astype(np.int64)
        cols["op"] = (rng.random(n) < 0.3).astype(np.uint8)
        with TraceWriter(d / "t.parquet", TraceMeta(source_format="bench")) as w:
            w.write(columns_to_batch(cols))
        (d / "a.toml").write_text('[[group]]\nname = "g"\nlayout = "raid5"\nwidth = 5\n'
                                  'drive = "atlas10k"\n')
        (d / "s.toml").write_text(
            'array = "a.toml"\ntrace = "t.parquet"\n[[axis]]\nkey = "group[0].stripe_unit"\n'
            'values = ["16KiB", "32KiB", "64KiB", "128KiB"]\n[[axis]]\nkey = "speed"\n'
            "values = [1, 2]\n")
        for workers in (1, 2):
            r = run_sweep(d / "s.toml", d / f"out{workers}", workers=workers)
            assert r.done == 8 and not r.failed, r
            out[f"w{workers}_points_per_min"] = r.done / r.points_s * 60
            out[f"w{workers}_points_per_min_whole"] = r.done / r.elapsed_s * 60
            out[f"w{workers}_points_s"] = r.points_s
            out[f"w{workers}_whole_s"] = r.elapsed_s
        out["speedup_2_over_1"] = out["w1_points_s"] / out["w2_points_s"]
        out["speedup_2_over_1_whole"] = out["w1_whole_s"] / out["w2_whole_s"]
        out["requests_per_point"] = n
    return out


def timed_replay(trace: str, array: str, out: str) -> float:
    """Wall seconds of one serial replay (a Dask task of ``_machine_ceiling``)."""
    from blocklab.pipeline.replay import replay

    t = time.perf_counter()
    replay(Path(trace), Path(array), Path(out))
    return time.perf_counter() - t


def _machine_ceiling(client: Any, d: Path) -> dict[str, float]:
    """What two workers can give on this machine at this moment: the same serial replay on
    one worker alone, then on both workers at once (no coordination between them at all);
    ``ceiling`` = 2 x alone / the slower of the pair, 2.0 where both cores are free. A shared
    or throttled machine gives less (this project's VM gave 0.98 to 1.99 x within minutes), and
    no parallel replay can beat it."""
    workers = sorted(client.scheduler_info()["workers"])
    args = (str(d / "t.parquet"), str(d / "a.toml"))
    alone = client.submit(timed_replay, *args, str(d / "ceiling-0"), workers=[workers[0]],
                          pure=False).result()
    pair = client.gather([client.submit(timed_replay, *args, str(d / f"ceiling-{i + 1}"),
                                        workers=[w], pure=False)
                          for i, w in enumerate(workers[:2])])
    return {"ceiling_alone_s": alone, "ceiling_pair_s": max(pair),
            "ceiling": 2 * alone / max(pair)}


def parallel_replay_speeds(n: int = 2_000_000) -> dict[str, float]:
    """``blocklab replay --workers`` (pipeline/parallel.py) against ``--workers 1`` (the serial
    replay) in the same run, on a trace of ``n`` 4-64 KiB requests with Poisson arrivals that
    keep a RAID-5 of five Atlas 10K drives about half busy; the fixed cost of one segment (a
    Dask task replaying one request: the round trip, opening the trace, building the array,
    writing its part) measured on the same cluster; and from these the speed-up on P workers
    of P segments: T_P = serial + overhead + (n / P + 2 M) / rate + stitch, where rate is a
    worker's requests per second in a segment, M the mean margin the cuts ended with, stitch
    the time from the last segment's end to complete files, and serial what the client does
    alone besides (the pass over the trace that chooses the cuts, the run summary). Beside the wall
    times, the CPU seconds: the serial replay's (this process), the segments' (each worker
    thread's) and the client's joining of the parts; and the 1-minute load average before and
    after, as the machine is shared."""
    from blocklab.pipeline.cluster import connect, warm_kernels
    from blocklab.pipeline.parallel import Segment, replay_parallel, run_segment
    from blocklab.pipeline.replay import replay
    from blocklab.traces.store import TraceMeta, TraceWriter, columns_to_batch, empty_columns

    out: dict[str, float] = {"requests": float(n)}
    with tempfile.TemporaryDirectory(prefix="blocklab-bench-parallel-") as tmp:
        d = Path(tmp)
        rng = np.random.default_rng(9)
        with TraceWriter(d / "t.parquet", TraceMeta(source_format="bench")) as w:
            t0 = 0
            for a in range(0, n, 1 << 20):
                k = min(1 << 20, n - a)
                cols = empty_columns(k)
                cols["time_ns"] = t0 + np.cumsum(rng.exponential(1.5e7, k)).astype(np.int64)
                t0 = int(cols["time_ns"][-1])
                cols["sector"] = rng.integers(0, 1 << 22, k).astype(np.int64) * 8
                cols["size_bytes"] = rng.choice([4096, 16384, 65536], k).astype(np.int64)
                cols["op"] = (rng.random(k) < 0.3).astype(np.uint8)
                w.write(columns_to_batch(cols))
        (d / "a.toml").write_text('[[group]]\nname = "g"\nlayout = "raid5"\nwidth = 5\n'
                                  'drive = "atlas10k"\n')
        warm_kernels()
        out["load_before"] = os.getloadavg()[0]
        t, c = time.perf_counter(), time.process_time()
        replay(d / "t.parquet", d / "a.toml", d / "w1")
        out["w1_s"] = time.perf_counter() - t
        out["w1_cpu_s"] = time.process_time() - c
        t = time.perf_counter()
        r = replay_parallel(d / "t.parquet", d / "a.toml", d / "w2", workers=2)
        out["w2_whole_s"] = time.perf_counter() - t
        out["load_after"] = os.getloadavg()[0]
        par = r.parallel
        assert par is not None and par["segments"] == 2, par
        # the whole command less the cluster's start and stop and the kernels' loading
        # (setup_s and teardown_s, which a cluster kept up between replays pays once), as the
        # serial figure is the whole replay call with the kernels loaded: the pass over the
        # trace that chooses the cuts and the run summary from ios.parquet count on both
        # sides (before, the segments and the stitch alone were timed)
        out["cluster_s"] = par["setup_s"] + par["teardown_s"]
        out["w2_s"] = out["w2_whole_s"] - out["cluster_s"]
        out["w2_segments_s"] = r.elapsed_s
        # what runs on the client alone, before the segments and after the stitch: the pass
        # over the trace that chooses the cuts, meta.json, the run summary
        out["serial_s"] = out["w2_s"] - r.elapsed_s - par["stitch_s"]
        out["stitch_s"] = par["stitch_s"]
        out["segment_cpu_s"] = float(sum(par["segment_cpu_s"]))
        out["segment_cpu_max_s"] = float(max(par["segment_cpu_s"]))
        out["join_s"] = par["join_s"]
        out["join_cpu_s"] = par["join_cpu_s"]
        out["identical_fraction"] = par["identical_fraction"]
        out["speedup_2_over_1"] = out["w1_s"] / out["w2_s"]
        out["speedup_2_over_1_whole"] = out["w1_s"] / out["w2_whole_s"]
        margins = [c["margin"] for c in par["cuts"]] or [0]
        out["mean_margin"] = float(np.mean(margins))
        rate = par["requests_replayed"] / sum(par["segment_seconds"])
        out["segment_requests_per_s"] = rate
        # the fixed cost of one segment: tasks of one request each, on a cluster already up
        client, cluster = connect(None, 2, 10.0)  # the local cluster replay --workers 2 makes
        try:
            (d / "parts").mkdir()
            seg = Segment(0, str(d / "t.parquet"), str(d / "a.toml"), 1.0, False, False, 0, 0,
                          1, 1, (-1, 1 << 62), 0, 0, 0, str(d / "parts"))
            client.submit(run_segment, seg, pure=False).result()  # loads the kernels
            k = 20
            t = time.perf_counter()
            for i in range(k):
                client.submit(run_segment, dataclasses.replace(seg, index=i + 1),
                              pure=False).result()
            out["segment_overhead_s"] = (time.perf_counter() - t) / k
            out.update(_machine_ceiling(client, d))
        finally:
            client.close()
            cluster.close()
        for p in (2, 100):
            tp = out["serial_s"] + out["segment_overhead_s"] + \
                (n / p + 2 * out["mean_margin"]) / rate + out["stitch_s"]
            out[f"projected_speedup_{p}"] = out["w1_s"] / tp
    return out


#: The trace sizes of the memory figures (issue 21, deliverable 1: peak RSS at 10 M and 100 M
#: requests, and the bytes per request between them).
MEMORY_SIZES = (10_000_000, 100_000_000)
#: SPC-1 business scaling units of the memory figures' trace: 100 requests/s, which keep the
#: 8-drive RAID-5 of Atlas 10K below saturation while it is whole. While it rebuilds a failed
#: drive (at the default priority) the queues grow for the rebuild's hour and drain after it
#: (over 20 M requests, failure half-way: writes waited 84 s on average in the rebuild window,
#: 28 ms before and after); at 150 requests/s they grew further still, and replay's memory with
#: them. The queues, and so replay's memory, stay bounded by the window's length.
MEMORY_BSU = 2
MEMORY_ARRAY = """[[group]]
name = "r5"
layout = "raid5"
width = 8
stripe_unit = "64KiB"
drive = "atlas10k"
hot_spares = 1
"""


def memory_scaling(sizes: tuple[int, ...] = MEMORY_SIZES) -> dict[str, Any]:
    """Peak RSS of each command, a child process each, on an SPC-1 trace of each size: synth
    itself, replay open loop, closed loop (an Iometer trace of the same size, 8 workers of 8
    outstanding) and with a drive failure half-way
    (rebuilding to the hot spare), latency-summary over the run, and report; and for each
    command the bytes per request between the smallest and the largest size (the growth
    with the trace: the goal is about zero)."""
    blocklab = [sys.executable, "-m", "blocklab.pipeline.cli"]
    out: dict[str, Any] = {"sizes": list(sizes), "rss_mb": {}, "seconds": {}, "spill_mb": {}}
    with tempfile.TemporaryDirectory(prefix="blocklab-bench-memory-") as tmp:
        d = Path(tmp)
        (d / "a.toml").write_text(MEMORY_ARRAY)
        for n in sizes:
            duration = n / (50 * MEMORY_BSU)
            trace = d / f"t{n}.parquet"
            steps = {
                "synth spc1": ["synth", "spc1", "--bsu", str(MEMORY_BSU), "--duration",
                               f"{duration:.3f}", "--array", str(d / "a.toml"), "-o",
                               str(trace)],
                "replay open loop": ["replay", str(trace), "--array", str(d / "a.toml"),
                                     "-o", str(d / f"open{n}")],
                # closed loop: an Iometer trace (8 workers of 8 outstanding 4 KiB random I/Os,
                # 70 % reads), whose streams take turns in the file as they do in time. An
                # open-loop trace replayed with --closed-loop N keeps its streams' file order:
                # a stream that is rarer in the file races ahead of the common ones, and the
                # rows between are held until their streams catch up (memory then grows
                # with the trace: 600 bytes a request measured on SPC-1 at 1 M and 5 M)
                "synth iometer": ["synth", "iometer", "--workers", "8", "--outstanding", "8",
                                  "--requests", str(n // 8), "--random-pct", "100",
                                  "--read-pct", "70", "--align", "4096", "--array",
                                  str(d / "a.toml"), "-o", str(d / f"io{n}.parquet")],
                "replay closed loop": ["replay", str(d / f"io{n}.parquet"), "--array",
                                       str(d / "a.toml"), "-o", str(d / f"closed{n}")],
                "replay with failure": ["replay", str(trace), "--array", str(d / "a.toml"),
                                        "--fail", f"2@{duration / 2:.3f}", "-o",
                                        str(d / f"fail{n}")],
                "query latency-summary": ["query", str(d / f"open{n}"), "latency-summary"],
                # the queries that sort a whole stream (windows over time buckets): bounded
                # memory, temporary disk growing with the run
                "query iostat": ["query", str(d / f"open{n}"), "iostat", "-f", "csv"],
                "query workload": ["query", str(d / f"open{n}"), "workload"],
                "report": ["report", str(d / f"fail{n}"), "-o", str(d / f"r{n}.html")],
            }
            for name, args in steps.items():
                spill = d / f"tmp-{n}-{name.replace(' ', '-')}"  # the command's TMPDIR
                try:
                    with FolderPeak(spill) as disk:
                        secs, rss = timed([*blocklab, *args], stderr=d / "stderr.txt",
                                          env={**os.environ, "TMPDIR": str(spill)})
                except subprocess.CalledProcessError:
                    lines = (d / "stderr.txt").read_text(errors="replace").strip().splitlines()
                    out.setdefault("failed", {})[f"{name} at {n:,}"] = \
                        lines[-1] if lines else "no message"
                    secs, rss = float("nan"), 0
                shutil.rmtree(spill, ignore_errors=True)
                out["rss_mb"].setdefault(name, {})[n] = rss / 1024
                out["seconds"].setdefault(name, {})[n] = secs
                out["spill_mb"].setdefault(name, {})[n] = disk.peak / 1e6
            for p in d.glob(f"*{n}*"):  # the next size's files need the room
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
        lo, hi = min(sizes), max(sizes)
        out["bytes_per_request"] = {
            name: (r[hi] - r[lo]) * 2**20 / (hi - lo) for name, r in out["rss_mb"].items()}
    return out


def memory_lines(m: dict[str, Any]) -> list[str]:
    sizes = m["sizes"]
    head = ", ".join(f"{n / 1e6:g} M" for n in sizes)
    lines = [f"  peak RSS by command at {head} requests (goal < 2 GB at 1,000 M; bytes per "
             "request between them: goal about 0)"]
    for name, r in m["rss_mb"].items():
        figs = ", ".join(f"{r[n]:,.0f} MB" for n in sizes)
        secs = ", ".join(f"{m['seconds'][name][n]:.0f} s" for n in sizes)
        spill = m.get("spill_mb", {}).get(name, {})
        disk = ("; temporary disk " + ", ".join(f"{spill[n]:,.0f} MB" for n in sizes)
                if any(spill.get(n, 0) >= 1 for n in sizes) else "")
        lines.append(f"    {name:<22}: {figs}  ({m['bytes_per_request'][name]:+.1f} bytes/request;"
                     f" {secs}{disk})")
    for what, why in m.get("failed", {}).items():
        lines.append(f"    FAILED {what}: {why}")
    return lines
