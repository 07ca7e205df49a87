"""``blocklab replay``: a trace against an array configuration -> a run folder.

The run folder (written under a temporary name, renamed when complete, owner-only) holds
``ios.parquet`` (per request: arrival, start of its first drive operation, completion,
latency, op, sector, size, cache hit: every drive operation served from a drive cache),
``drive_busy.parquet`` (per drive: busy time and operations) and
``meta.json`` (configuration, trace and config sha256, blocklab version, counts, elapsed time,
requests replayed per second); with ``--drive-ops``, ``drive_ops.parquet`` (every drive
operation: drive, request, start, completion, drive sector, sectors, write).

First version (issue 3 in progress): read and write requests (discards and flushes are counted
and skipped); one drive model per array. Modelled: the controller's per-command processing time,
its data path (host links and internal bandwidth cap as one first-come first-served server) and
the drives' queue scheduling; not yet its cache. The whole trace is replayed in memory
(streaming in chunks comes with the next step).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from blocklab.kernels import engine as E
from blocklab.kernels.drive import hdd as H
from blocklab.kernels.layout import raid as R
from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import OP_READ, OP_WRITE
from blocklab.traces.store import open_trace

from . import __version__
from .config import ArrayConfig, catalog_path, load_array
from .disksim_params import read_drive
from .validate import drive_params

SECTOR = 512
SCHEDULERS = {"fcfs": E.SCHED_FCFS, "sstf": E.SCHED_SSTF, "clook": E.SCHED_CLOOK}


@dataclasses.dataclass
class ArrayModel:
    """The array as the engine sees it: LUN table, group table, drive model."""

    vol_unit: int  # sectors; 0 = no host volume (one LUN)
    lun_group: np.ndarray
    lun_base: np.ndarray
    g_kind: np.ndarray
    g_width: np.ndarray
    g_unit: np.ndarray
    g_drive_sectors: np.ndarray
    drives: int
    capacity: int  # sectors the host can address
    model: int
    fixed: np.ndarray
    hdd: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    d_sched: np.ndarray  # per drive: engine.SCHED_*
    d_depth: np.ndarray  # per drive: command queue depth the scheduler looks into


def build_array(cfg: ArrayConfig, fixed_ns: tuple[int, int] | None = None) -> ArrayModel:
    """LUN and group tables from a configuration; the drive model from its catalog entry or
    DiskSim file (``fixed_ns`` = (per operation, per sector) replaces it, for tests)."""
    refs = {g.drive for g in cfg.groups}
    if len(refs) > 1:
        raise BlocklabError(f"{cfg.source}: group[*].drive: this version replays arrays of one "
                            "drive model only")
    (ref,) = refs
    d = read_drive(catalog_path(ref.catalog) if ref.catalog else Path(str(ref.disksim)))
    hdd = drive_params(d)
    g_kind, g_width, g_unit, g_ds = [], [], [], []
    lun_group, lun_base = [], []
    d_sched: list[int] = []
    d_depth: list[int] = []
    base = 0
    for gi, g in enumerate(cfg.groups):
        per_group = g.count * g.width + g.hot_spares
        d_sched += [SCHEDULERS[g.scheduler]] * per_group
        d_depth += [g.queue_depth] * per_group
        unit = g.stripe_unit_bytes // SECTOR
        g_kind.append(g.kind)
        g_width.append(g.width)
        g_unit.append(unit)
        g_ds.append((d.block_count // unit) * unit if g.kind != R.KIND_JBOD else d.block_count)
        for _i in range(g.count):
            lun_group.append(gi)
            lun_base.append(base)
            base += g.width
        base += g.hot_spares  # spares sit after the group's LUNs (used once failures exist)
    lun_cap = [int(R.capacity(g_kind[g], g_width[g], g_unit[g], g_ds[g])) for g in lun_group]
    names = cfg.luns()
    if cfg.volume is not None:
        idx = [names.index(n) for n in cfg.volume.luns]
        vol_unit = cfg.volume.stripe_unit_bytes // SECTOR
        per_lun = min(lun_cap[i] for i in idx) // vol_unit * vol_unit
        capacity = per_lun * len(idx)
        lun_group = [lun_group[i] for i in idx]
        lun_base = [lun_base[i] for i in idx]
    else:
        vol_unit = 0
        capacity = lun_cap[0]
        lun_group, lun_base = lun_group[:1], lun_base[:1]
    return ArrayModel(
        vol_unit=vol_unit,
        lun_group=np.array(lun_group, dtype=np.int64),
        lun_base=np.array(lun_base, dtype=np.int64),
        g_kind=np.array(g_kind, dtype=np.int64),
        g_width=np.array(g_width, dtype=np.int64),
        g_unit=np.array(g_unit, dtype=np.int64),
        g_drive_sectors=np.array(g_ds, dtype=np.int64),
        drives=base,
        capacity=capacity,
        model=E.MODEL_FIXED if fixed_ns else E.MODEL_HDD,
        fixed=np.array(fixed_ns or (0, 0), dtype=np.int64),
        hdd=hdd,
        d_sched=np.array(d_sched, dtype=np.int64),
        d_depth=np.array(d_depth, dtype=np.int64),
    )


def run_engine(arr: ArrayModel, arrive_ns: np.ndarray, lba: np.ndarray, nsec: np.ndarray,
               is_write: np.ndarray, closed: bool = False, outstanding: int = 1,
               think_ns: int = 0, ctrl_ns: int = 0, drive_ops: bool = False,
               path_ps_per_byte: int = 0) -> dict[str, np.ndarray]:
    """Allocate, run the kernel (growing the operation slots as needed), return results."""
    n = len(arrive_ns)
    max_width = int(arr.g_width.max())
    max_unit = int(arr.g_unit.min())
    per_piece = R.max_ops(R.KIND_RAID6, max_width, max_unit,
                          int(arr.vol_unit or (nsec.max() if n else 1)))
    plan = np.zeros(per_piece * R.OP_NCOLS, dtype=np.int64)
    slots = max(1 << 12, 4 * per_piece)
    out_arrive = np.full(n, -1, dtype=np.int64)
    out_start = np.full(n, -1, dtype=np.int64)
    out_hit = np.zeros(n, dtype=np.int64)
    out_done = np.full(n, -1, dtype=np.int64)
    req = {k: np.zeros(n, dtype=np.int64) for k in ("pending", "phase1", "wait")}
    nd = arr.drives
    q_head = np.full(nd, -1, dtype=np.int64)
    q_tail = np.full(nd, -1, dtype=np.int64)
    busy_until = np.zeros(nd, dtype=np.int64)
    busy_ns = np.zeros(nd, dtype=np.int64)
    d_ops = np.zeros(nd, dtype=np.int64)
    running = np.full(nd, -1, dtype=np.int64)
    cand = np.zeros(nd, dtype=np.int64)
    d_pos = np.zeros(nd, dtype=np.int64)
    cand_flag = np.zeros(nd, dtype=np.int64)
    # events in the heap: one completion per drive, closed-loop arrivals, and requests waiting
    # for the controller (all of them, at worst, when it is the bottleneck)
    heap = [np.zeros(nd + outstanding + (n if ctrl_ns > 0 or path_ps_per_byte > 0 else 0) + 2,
                     dtype=np.int64) for _ in range(4)]
    hst = H.new_state(nd)
    scalars = np.zeros(9, dtype=np.int64)
    ops = _slots(slots)
    scalars[0] = slots
    p, zones, cd, ct = arr.hdd
    rec_names = ("drive", "req", "start", "done", "lba", "n", "write")
    rec = {k: np.zeros(max(4 * n, nd) if drive_ops else 0, dtype=np.int64) for k in rec_names}
    while True:
        status = E.replay(
            arrive_ns, lba, nsec, is_write, out_arrive, out_start, out_done, out_hit,
            arr.vol_unit, arr.lun_group, arr.lun_base, arr.g_kind, arr.g_width, arr.g_unit,
            arr.g_drive_sectors, arr.model, arr.fixed, p, zones, cd, ct, hst,
            closed, outstanding, think_ns, ctrl_ns, path_ps_per_byte,
            ops["req"], ops["drive"], ops["lba"], ops["n"], ops["write"], ops["phase"],
            ops["next"], ops["free"], scalars, req["pending"], req["phase1"], req["wait"],
            q_head, q_tail, busy_until, busy_ns, d_ops, running, *heap, plan, cand, cand_flag,
            arr.d_sched, arr.d_depth, d_pos,
            drive_ops, *(rec[k] for k in rec_names),
        )
        if status == E.OK:
            break
        if status == E.FULL_RECORDS:
            used = int(scalars[7])
            for k in rec_names:
                grown_rec = np.zeros(2 * len(rec[k]) + nd, dtype=np.int64)
                grown_rec[:used] = rec[k][:used]
                rec[k] = grown_rec
            continue
        # grow the operation slots: keep the old ones (in flight), add free ones
        old = len(ops["req"])
        grown = _slots(2 * old)
        for k in ("req", "drive", "lba", "n", "write", "phase", "next"):
            grown[k][:old] = ops[k][:old]
        free_top = int(scalars[0])
        grown["free"][:free_top] = ops["free"][:free_top]
        grown["free"][free_top : free_top + old] = np.arange(old, 2 * old)
        scalars[0] = free_top + old
        ops = grown
    out = {"arrive": out_arrive, "start": out_start, "done": out_done, "hit": out_hit,
           "busy_ns": busy_ns, "ops": d_ops}
    if drive_ops:
        used = int(scalars[7])
        out.update({f"op_{k}": rec[k][:used] for k in rec_names})
    return out


def data_path_ps_per_byte(cfg: ArrayConfig) -> int:
    """Picoseconds per byte of the controller's data path: the slower of the host links (count
    x speed x efficiency) and the internal bandwidth cap; 0 when neither is set."""
    c = cfg.controller
    rates = []
    if c.link_gbit_per_s > 0:
        rates.append(c.host_links * c.link_gbit_per_s * 1e9 / 8 * c.link_efficiency)
    if c.bandwidth_bytes_per_s > 0:
        rates.append(c.bandwidth_bytes_per_s)
    return int(round(1e12 / min(rates))) if rates else 0


def _slots(n: int) -> dict[str, np.ndarray]:
    s = {k: np.full(n, -1, dtype=np.int64) for k in
         ("req", "drive", "lba", "n", "write", "phase", "next")}
    s["free"] = np.arange(n - 1, -1, -1, dtype=np.int64)
    return s


@dataclasses.dataclass
class ReplayResult:
    output: str
    requests: int
    skipped: int
    mean_latency_ms: float
    p99_latency_ms: float
    elapsed_s: float
    requests_per_s: float

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def replay(trace: str | Path, array: str | Path, output: str | Path, speed: float = 1.0,
           closed_loop: int = 0, think_us: float = 0.0, wrap: bool = False,
           drive_ops: bool = False) -> ReplayResult:
    if speed <= 0:
        raise BlocklabError(f"--speed must be positive, found {speed}")
    cfg = load_array(array)
    arr = build_array(cfg)
    _pf, _meta = open_trace(trace)
    t = pq.read_table(trace, columns=["time_ns", "sector", "size_bytes", "op"])
    op = t["op"].to_numpy()
    keep = (op == OP_READ) | (op == OP_WRITE)
    skipped = int((~keep).sum())
    arrive = (t["time_ns"].to_numpy()[keep] / speed).astype(np.int64)
    lba = t["sector"].to_numpy()[keep].astype(np.int64)
    nsec = ((t["size_bytes"].to_numpy()[keep] + SECTOR - 1) // SECTOR).astype(np.int64)
    is_write = (op[keep] == OP_WRITE).astype(np.int64)
    beyond = np.nonzero(lba + nsec > arr.capacity)[0]
    if len(beyond):
        if not wrap:
            k = int(beyond[0])
            raise BlocklabError(
                f"{trace}: request {k} (sector {int(lba[k])}, {int(nsec[k])} sectors) is beyond "
                f"the array's {arr.capacity} sectors; use --wrap to fold addresses")
        lba = lba % arr.capacity
        nsec = np.minimum(nsec, arr.capacity - lba)
    started = time.perf_counter()
    res = run_engine(arr, arrive, lba, nsec, is_write, closed=closed_loop > 0,
                     outstanding=max(closed_loop, 1), think_ns=int(think_us * 1000),
                     ctrl_ns=cfg.controller.command_overhead_ns, drive_ops=drive_ops,
                     path_ps_per_byte=data_path_ps_per_byte(cfg))
    elapsed = time.perf_counter() - started
    arrive, start, done = res["arrive"], res["start"], res["done"]
    latency = done - arrive
    out = Path(output)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(mode=0o700, parents=True)
    try:
        pq.write_table(pa.table({
            "arrival_ns": arrive, "start_ns": start, "complete_ns": done, "latency_ns": latency,
            "op": op[keep].astype(np.uint8), "sector": lba, "size_bytes": nsec * SECTOR,
            "cache_hit": res["hit"].astype(bool),
        }), tmp / "ios.parquet", compression="zstd")
        pq.write_table(pa.table({
            "drive": np.arange(arr.drives, dtype=np.int32), "busy_ns": res["busy_ns"],
            "ops": res["ops"]}), tmp / "drive_busy.parquet", compression="zstd")
        meta = {
            "blocklab_version": __version__,
            "trace": {"path": str(trace), "sha256": _sha256(Path(trace))},
            "array": {"path": str(array), "sha256": _sha256(Path(array)),
                      "config": dataclasses.asdict(cfg)},
            "options": {"speed": speed, "closed_loop": closed_loop, "think_us": think_us,
                        "wrap": wrap},
            "counts": {"requests": int(len(lba)), "skipped_not_read_write": skipped,
                       "drives": arr.drives, "drive_ops": int(res["ops"].sum())},
            "elapsed_s": elapsed,
            "requests_per_s": len(lba) / elapsed if elapsed > 0 else None,
        }
        if drive_ops:
            pq.write_table(pa.table({
                "drive": res["op_drive"].astype(np.int32), "request": res["op_req"],
                "start_ns": res["op_start"], "complete_ns": res["op_done"],
                "sector": res["op_lba"], "sectors": res["op_n"],
                "write": res["op_write"].astype(bool),
            }), tmp / "drive_ops.parquet", compression="zstd")
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(Exception):
            shutil.rmtree(tmp)
        raise
    lat_ms = latency / 1e6
    return ReplayResult(
        output=str(out), requests=int(len(lba)), skipped=skipped,
        mean_latency_ms=float(lat_ms.mean()) if len(lat_ms) else 0.0,
        p99_latency_ms=float(np.quantile(lat_ms, 0.99)) if len(lat_ms) else 0.0,
        elapsed_s=elapsed, requests_per_s=len(lba) / elapsed if elapsed > 0 else 0.0,
    )
