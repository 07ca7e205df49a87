"""``blocklab validate disksim``: replay a DiskSim validation trace on the drive its parameter
files describe, the way DiskSim replays it, and score the model against the real drive.

The score is DiskSim's demerit figure (Ruemmler and Wilkes, 1994): the root mean square of the
horizontal distances between the simulated and the measured service-time CDFs, taken at
p = 0.0001, 0.0002, ..., 1.0 with linear interpolation, in milliseconds.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from blocklab.kernels.drive import hdd as H
from blocklab.traces.formats.base import ReadContext
from blocklab.traces.formats.disksim import read_validate
from blocklab.traces.io import Input
from blocklab.traces.schema import OP_WRITE

from .disksim_params import DiskSimDrive, read_drive


def demerit(sim_ms: np.ndarray, real_ms: np.ndarray) -> float:
    """RMS horizontal distance (ms) between two service-time CDFs over p = 0.0001 .. 1."""
    p = np.arange(1, 10001) / 10000.0
    a = np.quantile(np.asarray(sim_ms, dtype=float), p)
    b = np.quantile(np.asarray(real_ms, dtype=float), p)
    return float(np.sqrt(np.mean((a - b) ** 2)))


def drive_params(d: DiskSimDrive) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's parameter vector, zone table and seek table for a DiskSim drive."""
    p = np.zeros(H.P_N)
    p[H.P_ROT_MS] = 60000.0 / d.rpm
    p[H.P_SURFACES] = d.surfaces
    p[H.P_HEAD_SWITCH] = d.head_switch_ms
    p[H.P_WRITE_SETTLE] = d.write_settle_ms
    p[H.P_BULK] = d.bulk_sector_transfer_ms
    p[H.P_BUS_READ] = d.bus_read_block_ms
    p[H.P_BUS_WRITE] = d.bus_write_block_ms
    ov = d.overheads_ms
    for idx, key in ((H.P_OV_RHR, "read hit after read"), (H.P_OV_RHW, "read hit after write"),
                     (H.P_OV_RMR, "read miss after read"), (H.P_OV_RMW, "read miss after write"),
                     (H.P_OV_WHR, "write hit after read"), (H.P_OV_WHW, "write hit after write"),
                     (H.P_OV_WMR, "write miss after read"),
                     (H.P_OV_WMW, "write miss after write"),
                     (H.P_COMPL_R, "read completion"), (H.P_COMPL_W, "write completion")):
        p[idx] = ov[key]
    p[H.P_WRITE_BACK] = 1.0 if d.cache["fast_write_level"] > 0 else 0.0
    p[H.P_MAX_RA] = d.cache["max_read_ahead_blocks"] if d.cache["enable_caching"] else 0
    p[H.P_SEG_BLOCKS] = d.cache["segment_blocks"]
    if d.seek_type.startswith("hpl"):
        p[H.P_SEEK_KIND] = H.SEEK_HPL
        x, a, b, c, e, _single = d.hpl_seek
        p[H.P_HPL_X], p[H.P_HPL_A], p[H.P_HPL_B], p[H.P_HPL_C], p[H.P_HPL_E] = x, a, b, c, e
        curve_t = np.array(d.first_ten_seeks_ms if d.seek_type == "hplplus10" else [], float)
        curve_d = np.arange(1, len(curve_t) + 1, dtype=np.int64)
    else:
        p[H.P_SEEK_KIND] = H.SEEK_CURVE
        curve_d = np.array([c for c, _t in d.seek_curve], dtype=np.int64)
        curve_t = np.array([t for _c, t in d.seek_curve], dtype=float)
    p[H.P_SINGLE_SEEK] = d.single_cylinder_seek_ms
    p[H.P_IMMED_READ] = d.cache["immediate_buffer_read"]
    p[H.P_IMMED_WRITE] = d.cache["immediate_buffer_write"]
    p[H.P_HIGH_WM] = d.cache["high_water_mark"]
    p[H.P_RESELECT] = d.cache["first_reselect_ms"]
    p[H.P_LOW_WM] = d.cache["low_water_mark"]
    # zones: LBNs per zone are its sectors less its spares, scaled so that they add up to the
    # drive's block count (spares and slips are spread, not placed: see kernels/drive/hdd.py)
    raw = np.array([(z.last_cylinder - z.first_cylinder + 1) * d.surfaces * z.blocks_per_track
                    - z.spares for z in d.zones], dtype=float)
    nlbn = np.floor(raw * d.block_count / raw.sum())
    nlbn[-1] += d.block_count - nlbn.sum()
    zones = np.zeros(len(d.zones) * H.Z_N)
    first = 0.0
    for i, z in enumerate(d.zones):
        b = i * H.Z_N
        zones[b + H.Z_FIRST_CYL] = z.first_cylinder
        zones[b + H.Z_LAST_CYL] = z.last_cylinder
        zones[b + H.Z_BPT] = z.blocks_per_track
        zones[b + H.Z_FIRST_LBN] = first
        zones[b + H.Z_NLBN] = nlbn[i]
        zones[b + H.Z_TSKEW] = z.track_skew
        zones[b + H.Z_CSKEW] = z.cylinder_skew
        first += nlbn[i]
    return p, zones, curve_d, curve_t


@dataclasses.dataclass
class ValidateResult:
    drive: str
    trace: str
    requests: int
    demerit_ms: float
    mean_sim_ms: float
    mean_real_ms: float
    sim_hits: int
    real_hits: int
    requests_per_s: float

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def validate_disksim(specs: str | Path, trace: str | Path) -> ValidateResult:
    drive = read_drive(specs)
    p, zones, curve_d, curve_t = drive_params(drive)
    inp = Input(trace)
    ctx = ReadContext()
    chunks = list(read_validate([inp], ctx))
    inp.close()
    cols = {k: np.concatenate([c.cols[k] for c in chunks]) for k in chunks[0].cols}
    start_ns = cols["time_ns"]
    serv_ns = cols["latency_ns"]
    idle_ms = np.zeros(len(start_ns))
    idle_ms[:-1] = (start_ns[1:] - start_ns[:-1] - serv_ns[:-1]) / 1e6
    lbn = cols["sector"].astype(np.int64)
    nblk = (cols["size_bytes"] // 512).astype(np.int64)
    is_write = (cols["op"] == OP_WRITE).astype(np.int64)
    real_ms = serv_ns / 1e6
    sim_ms = np.zeros(len(lbn))
    H.replay_closed(p, zones, curve_d, curve_t, H.new_state(), lbn[:2], nblk[:2], is_write[:2],
                    idle_ms[:2], sim_ms[:2])  # compile or load the kernel outside the timing
    t = time.perf_counter()
    hits = H.replay_closed(p, zones, curve_d, curve_t, H.new_state(), lbn, nblk, is_write,
                           idle_ms, sim_ms)
    elapsed = time.perf_counter() - t
    real_hits = int(ctx.counts.get("validate_class_Hit", 0))
    return ValidateResult(
        drive=drive.name,
        trace=str(trace),
        requests=len(lbn),
        demerit_ms=demerit(sim_ms, real_ms),
        mean_sim_ms=float(sim_ms.mean()),
        mean_real_ms=float(real_ms.mean()),
        sim_hits=int(hits),
        real_hits=real_hits,
        requests_per_s=len(lbn) / elapsed if elapsed > 0 else float("inf"),
    )
