"""The golden workload: a tiny seeded trace replayed on two arrays, a captured-style trace for
btt, and every named query's answer over them, checked in under tests/golden/*.csv.

``make golden`` (``python -m tests.golden``) rewrites the CSV files; do it only on purpose (the
engine changed and the new answers were looked at). tests/test_golden.py compares a fresh run
with them; tests/test_query.py checks each query against NumPy/Polars on the same Parquet, which
is the real assertion.
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from blocklab.pipeline.query import run_query
from blocklab.pipeline.replay import replay
from blocklab.traces import store
from blocklab.traces.schema import OP_READ, OP_WRITE, RUN_SCHEMAS

from .blktrace_writer import Request, write_merged

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
ARRAYS = {"raid0": HERE / "arrays" / "spc1-small.toml",
          "raid5": HERE / "arrays" / "golden-raid5.toml",
          "raid5-spare": HERE / "arrays" / "golden-raid5-spare.toml"}
SEED = 20261123
#: The failure the golden raid5 run is given (events.parquet written here, through RUN_SCHEMAS,
#: until replay writes its own): drive 2 fails at 2 s, its rebuild runs from 2.5 s to 5 s.
FAILURE_NS, REBUILD_START_NS, REBUILD_END_NS = 2_000_000_000, 2_500_000_000, 5_000_000_000

#: The inputs each named query runs over (names relative to the work folder), and parameters.
CASES: dict[str, tuple[list[str], dict[str, str]]] = {
    "latency-summary": (["runs"], {}),
    "bandwidth": (["runs"], {"interval_s": "0.5"}),
    "rebuild-windows": (["runs"], {}),
    "phases": (["runs"], {}),
    "drive-utilization": (["runs"], {}),
    "btt": (["bt.parquet"], {}),
    "workload": (["trace.parquet", "runs"], {"extent_kib": "64", "top": "5"}),
    "compare": (["runs"], {}),
    "latency-cdf": (["runs"], {}),
    "size-sweep": (["runs"], {}),
    "trace-summary": (["trace.parquet"], {}),
    "trace-devices": (["trace.parquet"], {}),
    "trace-sizes": (["trace.parquet"], {}),
    "trace-sequential": (["trace.parquet"], {}),
    "task-rates": (["tasks"], {"sample_s": "1.0"}),
    "run-latency": (["runs/raid5"], {}),
    "orion-points": (["orion/trace.parquet", "orion/run"], {}),
    "iostat": (["bt.parquet", "runs"], {"interval_s": "0.5"}),
    "idle-times": (["bt.parquet", "runs"], {}),
}


def workload_columns(n: int = 600, seed: int = SEED) -> dict[str, np.ndarray]:
    """A seeded open-loop mix: random and sequential reads and writes of 4, 8 and 64 KiB on
    two devices, Poisson arrivals at about 80 per second (7.5 s)."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(12.5e6, n)).astype(np.int64)
    t -= t[0]
    size = rng.choice(np.array([4096, 8192, 65536]), n, p=[0.6, 0.3, 0.1]).astype(np.int64)
    op = np.where(rng.random(n) < 0.65, OP_READ, OP_WRITE).astype(np.uint8)
    sector = (rng.integers(0, 1 << 22, n) * 8).astype(np.int64)
    seq = rng.random(n) < 0.3
    for k in range(1, n):
        if seq[k]:
            sector[k] = sector[k - 1] + size[k - 1] // 512
    cols = store.empty_columns(n)
    cols.update(time_ns=t, device=rng.integers(0, 2, n).astype(np.uint32), sector=sector,
                size_bytes=size, op=op, flags=np.zeros(n, np.uint16),
                latency_ns=rng.integers(100_000, 20_000_000, n).astype(np.int64))
    return cols


def write_trace(path: Path, cols: dict[str, np.ndarray], fmt: str = "golden") -> Path:
    with store.TraceWriter(path, store.TraceMeta(source_format=fmt)) as w:
        w.write(store.columns_to_batch(cols))
    return path


def btt_requests(n: int = 300, seed: int = SEED) -> list[Request]:
    """Requests with every block-layer event (Q, G, I, D, C) on two devices, some sequential,
    some overlapping an earlier one, issued out of arrival order at times."""
    rng = np.random.default_rng(seed + 1)
    reqs: list[Request] = []
    t = 1000
    for k in range(n):
        dev = (8 << 20) | (0 if rng.random() < 0.6 else 16)
        t += int(rng.integers(1000, 200_000))
        q = t
        g = q + int(rng.integers(100, 2000))
        i = g + int(rng.integers(100, 5000))
        d = i + int(rng.integers(100, 300_000))
        c = d + int(rng.integers(50_000, 5_000_000))
        same = [r for r in reqs if r.dev == dev]
        nbytes = int(rng.choice([4096, 8192, 65536, 1536]))
        pick = rng.random()
        if same and pick < 0.3:
            sector = same[-1].sector + same[-1].nbytes // 512  # continues the last one
        elif same and pick < 0.45:
            sector = same[-1].sector + 2  # overlaps it
        else:
            sector = int(rng.integers(0, 1 << 24)) * 8
        # btt (and a pairing by sector) cannot tell apart overlapping requests in flight at
        # once: move a request that would overlap one still in flight somewhere random
        while any(r.c >= q and sector < r.sector + r.nbytes // 512
                  and r.sector < sector + nbytes // 512 for r in same):
            sector = int(rng.integers(0, 1 << 24)) * 8
        reqs.append(Request(dev=dev, sector=sector, nbytes=nbytes,
                            op="read" if rng.random() < 0.6 else "write", pid=100 + k % 3,
                            cpu=0, q=q, g=g, i=i, d=d, c=c))
    return reqs


def write_events(run: Path, rows: list[dict]) -> None:
    """events.parquet of a run folder, in the run schema."""
    pq.write_table(pa.Table.from_pylist(rows, schema=RUN_SCHEMAS["events"]),
                   run / "events.parquet")


def make_run(folder: Path, ios: dict[str, np.ndarray], events: list[dict] | None = None,
             busy: dict[str, np.ndarray] | None = None, drives: int = 2,
             interval_ns: int = 1_000_000_000, version: int | None = None) -> Path:
    """A run folder written by hand through RUN_SCHEMAS: ios from ``arrival_ns``,
    ``latency_ns``, ``op``, ``size_bytes`` (and optionally ``sector``); events rows;
    drive_busy columns (else one idle interval per drive); a minimal meta.json."""
    from blocklab.traces.schema import RUN_SCHEMA_VERSION

    folder.mkdir(parents=True, exist_ok=True)
    n = len(ios["arrival_ns"])
    arr = np.asarray(ios["arrival_ns"], np.int64)
    lat = np.asarray(ios["latency_ns"], np.int64)
    pq.write_table(pa.table({
        "request": np.arange(n, dtype=np.int64), "arrival_ns": arr, "start_ns": arr,
        "complete_ns": arr + lat, "latency_ns": lat,
        "op": np.asarray(ios["op"], np.uint8),
        "sector": np.asarray(ios.get("sector", np.arange(n) * 8), np.int64),
        "size_bytes": np.asarray(ios["size_bytes"], np.int64),
        "stream": np.zeros(n, np.uint32), "cache_hit": np.zeros(n, bool),
        "lost": np.zeros(n, bool),
    }, schema=RUN_SCHEMAS["ios"]), folder / "ios.parquet")
    if busy is None:
        busy = {"drive": np.arange(drives, dtype=np.int32),
                "time_ns": np.zeros(drives, np.int64),
                "busy_ns": np.zeros(drives, np.int64)}
    m = len(busy["drive"])
    pq.write_table(pa.table({
        "drive": np.asarray(busy["drive"], np.int32),
        "group": pa.array(["g"] * m).dictionary_encode(),
        "time_ns": np.asarray(busy["time_ns"], np.int64),
        "interval_ns": np.asarray(busy.get("interval_ns", np.full(m, interval_ns)), np.int64),
        "busy_ns": np.asarray(busy["busy_ns"], np.int64),
        "ops": np.asarray(busy.get("ops", np.zeros(m)), np.int64),
        "bytes": np.asarray(busy.get("bytes", np.zeros(m)), np.int64),
        "queue_op_ns": np.asarray(busy.get("queue_op_ns", np.zeros(m)), np.int64),
    }, schema=RUN_SCHEMAS["drive_busy"]), folder / "drive_busy.parquet")
    if events is not None:
        write_events(folder, events)
    meta = {"blocklab_version": "test", "interval_ns": interval_ns,
            "run_schema_version": RUN_SCHEMA_VERSION if version is None else version,
            "counts": {"requests": n},
            "drives": [{"drive": d, "group": "g", "role": "member", "model": "fixed"}
                       for d in range(drives)]}
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def event(time_ns: int, name: str, group: str = "g", drive: int = 0) -> dict:
    return {"time_ns": time_ns, "event": name, "group": group, "drive": drive,
            "fraction": None, "bytes": None, "stripes_lost": None, "detail": None}


def failure_events(group: str, drive: int) -> list[dict]:
    base = {"group": group, "drive": drive, "fraction": None, "bytes": None,
            "stripes_lost": None, "detail": None}
    return [{**base, "time_ns": FAILURE_NS, "event": "failure"},
            {**base, "time_ns": REBUILD_START_NS, "event": "rebuild_start", "fraction": 0.0,
             "bytes": 0},
            {**base, "time_ns": (REBUILD_START_NS + REBUILD_END_NS) // 2,
             "event": "rebuild_progress", "fraction": 0.5, "bytes": 1 << 30},
            {**base, "time_ns": REBUILD_END_NS, "event": "rebuild_end", "fraction": 1.0,
             "bytes": 1 << 31}]


def runs_of(work: Path) -> dict[str, Path]:
    """The plain replays ``build`` writes, by array: runs/raid0 and runs/raid5."""
    return {name: work / "runs" / name for name in ("raid0", "raid5")}


def build(work: Path) -> Path:
    """Write the golden inputs into ``work``: trace.parquet, bt.parquet (ingested from a
    blktrace binary), runs/raid0 and runs/raid5 (replays, raid5 with --drive-ops and the
    failure events), tasks/raid5 (a replay with a real failure and rebuild, its drive
    operations) and orion/ (an Orion trace and its run)."""
    from blocklab.pipeline.ingest import ingest

    work.mkdir(parents=True, exist_ok=True)
    trace = write_trace(work / "trace.parquet", workload_columns())
    bin_path = write_merged(work / "bt.bin", btt_requests(), {100: "fio", 101: "dd",
                                                              102: "kworker"})
    ingest([str(bin_path)], str(work / "bt.parquet"), "blktrace")
    (work / "runs").mkdir(exist_ok=True)
    replay(trace, ARRAYS["raid0"], work / "runs" / "raid0")
    replay(trace, ARRAYS["raid5"], work / "runs" / "raid5", drive_ops=True)
    write_events(work / "runs" / "raid5", failure_events("r5", 2))
    # a real rebuild, sampled at its start (the run ends with the trace), and an Orion matrix
    (work / "tasks").mkdir(exist_ok=True)
    replay(trace, ARRAYS["raid5-spare"], work / "tasks" / "raid5", failures=[(1, 2.0)],
           drive_ops=True, drain=False)
    from blocklab.pipeline.synth import synth_orion

    (work / "orion").mkdir(exist_ok=True)
    synth_orion(work / "orion" / "trace.parquet", matrix="basic", num_disks=1,
                requests_per_slot=5, write_pct=5, seed=SEED, array=ARRAYS["raid0"])
    replay(work / "orion" / "trace.parquet", ARRAYS["raid0"], work / "orion" / "run")
    return work


def answers(work: Path) -> dict[str, pa.Table]:
    """Every named query's answer over the golden inputs (run from ``work``, so run names
    are the relative paths)."""
    here = os.getcwd()
    os.chdir(work)
    try:
        return {name: run_query(paths, name, params=params).table
                for name, (paths, params) in CASES.items()}
    finally:
        os.chdir(here)


def _text(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    if isinstance(v, list):
        return "[" + ";".join(_text(x) for x in v) + "]"
    return str(v)


def to_rows(t: pa.Table) -> list[list[str]]:
    return [list(t.column_names)] + [[_text(r[c]) for c in t.column_names]
                                     for r in t.to_pylist()]


def write_csv(path: Path, t: pa.Table) -> None:
    with open(path, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(to_rows(t))


def read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f))


def same(a: str, b: str, rel: float = 1e-9) -> bool:
    """Cells equal as text, or as numbers within ``rel`` (floating-point sums may differ in
    the last bits between machines)."""
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return math.isclose(x, y, rel_tol=rel, abs_tol=1e-12)


def main(argv: list[str] | None = None) -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="blocklab-golden-") as tmp:
        work = build(Path(tmp))
        GOLDEN.mkdir(exist_ok=True)
        for old in GOLDEN.glob("*.csv"):
            old.unlink()
        for name, table in answers(work).items():
            write_csv(GOLDEN / f"{name}.csv", table)
            print(f"tests/golden/{name}.csv: {table.num_rows} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
