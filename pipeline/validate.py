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
from blocklab.traces.schema import OP_WRITE, SECTOR_BYTES

from .model.disksim_params import ParamError, read_drive
from .model.drive_params import drive_params


def demerit(sim_ms: np.ndarray, real_ms: np.ndarray) -> float:
    """RMS horizontal distance (ms) between two service-time CDFs over p = 0.0001 .. 1."""
    p = np.arange(1, 10001) / 10000.0
    a = np.quantile(np.asarray(sim_ms, dtype=float), p)
    b = np.quantile(np.asarray(real_ms, dtype=float), p)
    return float(np.sqrt(np.mean((a - b) ** 2)))


# DiskSim 4.0's own demerits on its validation traces, as its valid/runvalid script states them
# ("rms should be about"), by (the disk's name in its parameter files, the trace's file name).
# The script has none for the Seagate ST41601N.
DISKSIM_DEMERITS = {
    ("QUANTUM_QM39100TD-SW", "atlas_III.trace"): 0.378,
    ("SEAGATE_ST32171W", "barracuda.trace"): 0.349,
    ("SEAGATE_ST34501N_validate", "cheetah4LP.trace"): 0.318,
    ("SEAGATE_ST39102LW_validate", "cheetah9LP.trace"): 0.107,
    ("IBM_DNES-309170W_validate", "ibm18es.trace"): 0.135,
    ("QUANTUM_TORNADO_validate", "atlas10k.trace"): 0.268,
    ("HP_C2247A_validate", "hp_c2247a.trace"): 0.090,
    ("HP_C3323A_validate", "hp_c3323a.trace"): 0.306,
    ("HP_C2490A_validate", "hp_c2490a.trace"): 0.254,
    ("DEC_RZ26_validate", "dec_rz26.trace"): 0.340,
}


def disksim_demerit(drive: str, trace: str | Path) -> float | None:
    """DiskSim's own demerit (ms) for this drive on this validation trace, where its valid/
    folder gives one (the trace may be compressed: ``NAME.trace.xz``)."""
    name = Path(trace).name
    for ext in (".xz", ".gz", ".zst"):
        name = name.removesuffix(ext)
    return DISKSIM_DEMERITS.get((drive, name))


# ``--without``: parts of the model that can be switched off, to measure what each is worth on
# a real drive's trace (what a simpler, faster model would give up): the HDD parameters each
# sets, by name (kernels/drive/hdd_tables.py)
PARTS: dict[str, dict[str, float | str]] = {
    # the on-drive cache: no hits, read-ahead, write-back or read on arrival
    "cache": {"cache_on": 0.0, "read_ahead": "none", "write_back": 0.0, "read_on_arrival": 0.0,
              "almost_read_hits": 0.0},
    "read-ahead": {"read_ahead": "none"},
    # keeping what passes under the head before a read's first sector (not in DiskSim)
    "read-on-arrival": {"read_on_arrival": 0.0},
    # every write completes after its media write
    "write-back": {"write_back": 0.0},
    # the controller's command, reselection, disconnection and completion overheads
    "overheads": {f.name: 0.0 for f in H.PARAMS if f.group == "overhead"},
    # head switch time and write settling
    "switches": {"head_switch_ms": 0.0, "write_settle_ms": 0.0},
}


def _check_parts(parts: tuple[str, ...] | list[str]) -> None:
    for name in parts:
        if name not in PARTS:
            raise ParamError(f"--without {name}: not a part of the model "
                             f"(parts: {', '.join(PARTS)})")


def without_parts(p: np.ndarray, parts: tuple[str, ...] | list[str]) -> np.ndarray:
    """A copy of the parameter vector ``p`` with the named ``PARTS`` switched off."""
    _check_parts(parts)
    fields: dict[str, float | str] = dict(H.unpack(p))
    for name in parts:
        fields.update(PARTS[name])
    return H.pack(**fields)


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
    without: list[str] = dataclasses.field(default_factory=list)
    disksim_demerit_ms: float | None = None  # DiskSim's own on this trace, where known

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def validate_disksim(specs: str | Path, trace: str | Path,
                     without: tuple[str, ...] | list[str] = ()) -> ValidateResult:
    """Replay ``trace`` on the drive ``specs`` describes, with the ``without`` parts of the
    model switched off (``PARTS``), and score it against the measured service times."""
    _check_parts(without)
    drive = read_drive(specs)
    p, zones, curve_d, curve_t = drive_params(drive)
    p = without_parts(p, without)
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
    nblk = (cols["size_bytes"] // SECTOR_BYTES).astype(np.int64)
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
        without=list(dict.fromkeys(without)),
        disksim_demerit_ms=disksim_demerit(drive.name, trace),
    )
