"""The built-in drive catalog (``pipeline/model/drives/catalog.toml``) and drive models built from
datasheet figures (issue 3, deliverable 3).

A catalog entry is a DiskSim-validated drive (its parameter files, read as they are), a hard
disk described by datasheet figures, or an SSD. Every figure of an entry carries its source and
how it was obtained (stated, measured, derived, proxy, assumed); ``blocklab drives`` lists them.

**A hard disk from its datasheet** (``hdd_drive``), the way DiskSim's drives are described:

- *geometry*: ``ZONES`` zones of equal cylinder count; blocks per track fall linearly from the
  outer to the inner diameter (zoned recording: a track's capacity is proportional to its
  radius, and cylinders are evenly spaced in radius). The stated sustained rates include a
  head switch and a write's settling per track (datasheets quote one sustained rate for reads
  and writes), so a track holds ``rate x (rotation + head switch + write settle) / 512`` blocks;
  when the cylinders are not stated they follow from the capacity. The zones are then scaled
  so that they hold at least the stated capacity (the rest is the drive's spare area);
- *skews*: a track starts where the head arrives, ready to write, after a head switch (track
  skew) or a one-cylinder seek (cylinder skew), each with the write settling time, so sequential
  reads and writes alike lose no revolution (with a skew of the switch alone, a write, which
  settles longer, missed the track's first block and lost a revolution at every track: a
  drive with its write cache on streamed writes at half its rate);
- *seeks*: ``t(d) = single + (full - single) x ((d - 1) / (C - 2)) ** k`` for d >= 1
  cylinders, with the exponent k chosen so that the mean over the seek distances of uniformly
  random requests (|X - Y| for X, Y uniform over the cylinders, d > 0) equals the stated
  average; tabulated at 64 distances and interpolated by the HDD kernel; writes add a settling
  time (stated write seek minus read seek);
- *firmware*: command overheads and cache behaviour measured by DIXtrac on a drive of the
  same class (the entry's ``firmware``), the interface's per-sector time from its link rate,
  the cache's size from the datasheet cut into segments (at most 16, of at least 2 MiB, so that
  a segment holds a large request and its read-ahead); a read that starts where
  the read-ahead has got to is served from it ("almost read hits": modern drives stream
  sequential reads at media speed). The drive's own write cache follows the entry's
  ``write_cache`` (arrays turn it off). With ``command_queueing`` (tagged queuing on SAS, NCQ
  on SATA, where it is optional; an entry that leaves it out has it, as SAS drives and SATA
  drives with NCQ do, and a host that sends one command at a time sets it false) a write
  waiting in the drive's queue has its data taken while the write before it is on the platter,
  so queued sequential writes stream at the media's rate with the write cache off
  (kernels/drive/hdd.py, "Queued writes").

**An SSD** (``ssd_params``): the parameters of ``kernels/drive/ssd.py``, with the write
amplification of greedy garbage collection at the entry's over-provisioning (steady state) or
none (``fresh``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from blocklab.kernels.drive import hdd as H
from blocklab.kernels.drive import ssd as SS
from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import SECTOR_BYTES

from .disksim_params import DiskSimDrive, Zone, disk_defaults, read_drive

ZONES = 16
SEEK_POINTS = 64
LABELS = ("stated", "measured", "derived", "proxy", "assumed")
HDD_KEYS = ("blocks", "rpm", "surfaces", "cylinders", "od_mb_s", "id_mb_s", "seek_single_ms",
            "seek_avg_ms", "seek_full_ms", "write_settle_ms", "head_switch_ms", "cache_mb",
            "interface_mb_s", "write_cache", "firmware")
SSD_KEYS = ("blocks", "channels", "dies", "planes", "page_bytes", "pages_per_block", "read_us",
            "program_us", "erase_ms", "channel_mb_s", "overprovisioning", "interface_mb_s",
            "command_us", "write_command_us", "buffer_pages", "queue_depth")
# figures a drive of each kind may leave out (then: no such limit; ure_per_bit, the
# datasheet's unrecoverable read errors per bit read, is read by blocklab risk --ure catalog)
OPTIONAL_KEYS = {"hdd": ("ure_per_bit", "command_queueing"), "ssd": ("write_mb_s", "ure_per_bit"),
                 "disksim": ()}


class CatalogError(BlocklabError):
    pass


@dataclasses.dataclass(frozen=True)
class Figure:
    value: Any
    source: str
    label: str
    how: str = ""


@dataclasses.dataclass(frozen=True)
class Entry:
    name: str
    kind: str  # "hdd", "ssd" or "disksim"
    model: str
    cls: str
    figures: dict[str, Figure]
    file: str | None = None  # disksim: the parameter file

    def values(self) -> dict[str, Any]:
        return {k: f.value for k, f in self.figures.items()}


def _folder() -> Path:
    return Path(str(resources.files("blocklab.pipeline.model").joinpath("drives")))


@functools.cache
def catalog() -> tuple[dict[str, Entry], dict[str, str], dict[str, dict[str, Any]]]:
    """(entries by name, sources by key, firmware timing sets by key)."""
    path = _folder() / "catalog.toml"
    data = tomllib.loads(path.read_text())
    sources = data.pop("sources")
    firmware = data.pop("firmware")
    entries = {}
    for name, e in data.items():
        kind = e["kind"]
        keys = {"hdd": HDD_KEYS, "ssd": SSD_KEYS, "disksim": ()}[kind]
        figs = {}
        for k in keys + tuple(k for k in OPTIONAL_KEYS[kind] if k in e):
            f = e[k]
            if f["source"] not in sources or f["label"] not in LABELS:
                raise CatalogError(f"{path}: {name}.{k}: unknown source or label")
            figs[k] = Figure(f["value"], f["source"], f["label"], f.get("how", ""))
        entries[name] = Entry(name, kind, e["model"], e["class"], figs, e.get("file"))
    return entries, sources, firmware


def names() -> list[str]:
    return list(catalog()[0])


def ure_per_bit(name: str) -> tuple[float, str] | None:
    """A catalog drive's unrecoverable read errors per bit read and the figure's source
    (document, and how it was obtained), or None when the catalog has no such figure."""
    entries, sources, _fw = catalog()
    e = entries.get(name)
    if e is None or "ure_per_bit" not in e.figures:
        return None
    f = e.figures["ure_per_bit"]
    return float(f.value), f"{sources[f.source]} ({f.label}: {f.how})"


def disksim_path(entry: Entry) -> Path:
    assert entry.file is not None
    return _folder() / "disksim" / entry.file


# ---------------------------------------------------------------------------------------------
# hard disks from datasheet figures


def _seek_exponent(single: float, avg: float, full: float, cyls: int) -> float:
    """The k of t(d) = single + (full - single) ((d-1)/(C-2))^k whose mean over random seek
    distances is ``avg`` (bisection; the mean falls as k grows)."""
    d = np.arange(1, cyls, dtype=float)
    w = (cyls - d)  # P(|X - Y| = d) is proportional to C - d for d > 0
    w /= w.sum()
    x = (d - 1) / max(cyls - 2, 1)

    def mean(k: float) -> float:
        return float(single + (full - single) * np.sum(w * x ** k))

    lo, hi = 0.05, 20.0
    if not mean(hi) <= avg <= mean(lo):
        raise CatalogError(f"average seek {avg} ms cannot lie between single-track {single} ms "
                           f"and full-stroke {full} ms on this curve")
    for _ in range(80):
        mid = (lo + hi) / 2
        if mean(mid) > avg:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def seek_curve(single: float, avg: float, full: float, cyls: int) -> list[tuple[int, float]]:
    """The fitted seek curve as (distance, ms) points for the kernel's interpolation."""
    k = _seek_exponent(single, avg, full, cyls)
    ds = np.unique(np.round(np.geomspace(1, cyls - 1, SEEK_POINTS)).astype(int))
    return [(int(d), single + (full - single) * ((d - 1) / max(cyls - 2, 1)) ** k) for d in ds]


class DriveFiguresError(ValueError):
    """A drive's figures the model cannot be built from (the array names the drive)."""


def hdd_drive(name: str, v: dict[str, Any], firmware: dict[str, Any]) -> DiskSimDrive:
    """A DiskSim-style drive from datasheet figures ``v`` (module docstring)."""
    rot_ms = 60000.0 / v["rpm"]
    surfaces = int(v["surfaces"])
    hs = float(v["head_switch_ms"])
    ws = float(v["write_settle_ms"])  # added to a write's head switch and seek (skews)

    def bpt(rate_mb_s: float) -> float:
        return rate_mb_s * 1e6 * (rot_ms + hs + ws) / 1000.0 / SECTOR_BYTES

    od, inner = bpt(v["od_mb_s"]), bpt(v["id_mb_s"])
    blocks = int(v["blocks"])
    cyls = int(v["cylinders"]) or math.ceil(blocks / (surfaces * (od + inner) / 2))
    if cyls < ZONES:  # (a zone of no cylinders: a division by zero below)
        raise DriveFiguresError(f"{blocks:,} blocks make {cyls} cylinders; the model needs at "
                                f"least {ZONES} (one a zone): about "
                                f"{math.ceil(ZONES * surfaces * (od + inner) / 2):,} blocks")
    per = cyls // ZONES
    mids = [(z + 0.5) / ZONES for z in range(ZONES)]
    raw = [od + (inner - od) * m for m in mids]
    total = sum(per * surfaces * b for b in raw)
    scale = max(1.0, blocks / total)
    zones = []
    for z in range(ZONES):
        b = max(1, math.ceil(raw[z] * scale))
        first = z * per
        last = cyls - 1 if z == ZONES - 1 else (z + 1) * per - 1
        zones.append(Zone(first_cylinder=first, last_cylinder=last, blocks_per_track=b,
                          offset_of_first_block=0.0,
                          track_skew=float(math.ceil((hs + ws) / rot_ms * b)),
                          cylinder_skew=float(math.ceil((v["seek_single_ms"] + ws) / rot_ms
                                                        * b)),
                          spares=0, slips=[], defects=[]))
    fw = firmware
    sector_ms = SECTOR_BYTES / (v["interface_mb_s"] * 1e6) * 1000.0
    # segments of at least 2 MiB, so that a segment holds a large request and its read-ahead
    segments = max(1, min(int(fw["segments"]), H.SEG_MAX, int(v["cache_mb"] * 1e6) >> 21))
    seg_blocks = int(v["cache_mb"] * 1e6 / SECTOR_BYTES / segments)
    # the controller overheads DIXtrac measured; the others, and the cache keys not set here,
    # are as a DiskSim parameter file that leaves them out has them
    overheads, cache = disk_defaults()
    overheads.update({k.replace("_", " "): float(fw[k]) for k in (
        "read_hit_after_read", "read_hit_after_write", "read_miss_after_read",
        "read_miss_after_write", "write_hit_after_read", "write_hit_after_write",
        "write_miss_after_read", "write_miss_after_write")})
    cache.update({
        "segments": segments, "segment_blocks": seg_blocks,
        "max_write_segments": min(int(fw["max_write_segments"]), segments),
        "enable_caching": 1, "buffer_continuous_read": int(fw["read_ahead"]),
        "fast_write_level": 2 if v["write_cache"] else 0, "combine_seq_writes": 1,
        "allow_read_hits_on_write_data": 1, "allow_almost_read_hits": 1,
        "max_queue_length": 8, "watermark_by_request_size": 1,
        "queued_write_data": 1 if v.get("command_queueing", True) else 0,
    })
    return DiskSimDrive(
        name=name, source=f"blocklab catalog entry {name}", block_count=blocks,
        surfaces=surfaces, cylinders=cyls, rpm=float(v["rpm"]), head_switch_ms=hs,
        single_cylinder_seek_ms=float(v["seek_single_ms"]),
        full_strobe_seek_ms=float(v["seek_full_ms"]),
        write_settle_ms=float(v["write_settle_ms"]),
        seek_curve=seek_curve(float(v["seek_single_ms"]), float(v["seek_avg_ms"]),
                              float(v["seek_full_ms"]), cyls),
        seek_type="extracted", hpl_seek=[], first_ten_seeks_ms=[], access_time_type="trackswitch",
        mapping_scheme=0, sparing_scheme=0, range_size_for_sparing=0, zones=zones,
        overheads_ms=overheads, bulk_sector_transfer_ms=sector_ms, per_request_overhead_ms=0.0,
        cache=cache)


# ---------------------------------------------------------------------------------------------
# SSDs


def write_amplification(rho: float) -> float:
    """Greedy garbage collection under uniform random writes with over-provisioning ``rho``:
    (1 + rho) / (2 rho) (Agarwal and Marrow 2010), at least 1."""
    return max(1.0, (1 + rho) / (2 * rho)) if rho > 0 else float("inf")


def ssd_params(v: dict[str, Any], fresh: bool = False,
               rated_overprovisioning: float | None = None) -> np.ndarray:
    """The SSD kernel's parameter vector for figures ``v``. ``write_command_us`` is the
    controller's time per write in the rated steady state (1 / the rated random write IOPS),
    at ``rated_overprovisioning`` (default: ``v``'s own). The kernel is given a fresh
    write's time, that divided by the write amplification at the rated over-provisioning,
    and charges a write ``wa`` times it (kernels/drive/ssd.py: the pages garbage collection
    moves go through the controller)."""
    wpath = v.get("write_mb_s", 0)
    rated = float(v["overprovisioning"] if rated_overprovisioning is None
                  else rated_overprovisioning)
    return SS.pack(
        channels=v["channels"], dies=v["dies"], planes=v["planes"],
        page_sectors=v["page_bytes"] // SECTOR_BYTES, read_ns=v["read_us"] * 1000,
        program_ns=v["program_us"] * 1000, erase_ns=v["erase_ms"] * 1e6,
        pages_per_block=v["pages_per_block"],
        channel_ps=round(1e12 / (v["channel_mb_s"] * 1e6)),
        link_ps=round(1e12 / (v["interface_mb_s"] * 1e6)),
        command_ns=round(v["command_us"] * 1000),
        write_command_ns=round(v["write_command_us"] * 1000 / write_amplification(rated)),
        write_amplification=1.0 if fresh else write_amplification(float(v["overprovisioning"])),
        buffer_pages=v["buffer_pages"],
        # the controller's write path (kernels/drive/ssd.py); 0: no limit
        write_path_ps=round(1e12 / (wpath * 1e6)) if wpath > 0 else 0)


# ---------------------------------------------------------------------------------------------
# models for the engine


@dataclasses.dataclass
class DriveModel:
    """What the engine needs of one drive model."""

    name: str
    kind: str  # "hdd" or "ssd"
    blocks: int
    queue_depth: int  # operations the drive serves at once (1 for a disk)
    hdd: H.Drive | None = None  # the HDD kernel's tables (kernels/drive/hdd_tables.py)
    ssd: np.ndarray | None = None


def model(name: str | None = None, overrides: dict[str, Any] | None = None,
          disksim: str | None = None, kind: str | None = None) -> DriveModel:
    """The model of catalog drive ``name`` with figures replaced by ``overrides``; of an inline
    drive of ``kind`` whose figures are all in ``overrides``; or of the DiskSim parameter file
    ``disksim``."""
    from .drive_params import drive_params

    if disksim is not None:
        d = read_drive(disksim)
        return DriveModel(Path(disksim).name, "hdd", d.block_count, 1, hdd=drive_params(d))
    entries, _sources, firmware = catalog()
    base: dict[str, Any] | None = None  # the catalog entry's own figures
    if name is not None:
        e = entries[name]
        if e.kind == "disksim":
            d = read_drive(disksim_path(e))
            return DriveModel(name, "hdd", d.block_count, 1, hdd=drive_params(d))
        base = e.values()
        v = base | (overrides or {})
        kind = e.kind
    else:
        v = {"firmware": "S11"} | (overrides or {})
        name = f"inline {kind}"
    if kind == "hdd":
        return DriveModel(name, "hdd", int(v["blocks"]), 1,
                          hdd=drive_params(hdd_drive(name, v, firmware[v["firmware"]])))
    # a catalog drive's write_command_us is rated at its own over-provisioning: an override
    # of the over-provisioning alone keeps the controller and changes the write amplification
    # (a drive given less spare writes slower); one of write_command_us too is taken as rated
    # at the over-provisioning given
    rated = (base["overprovisioning"] if base is not None
             and "write_command_us" not in (overrides or {}) else None)
    return DriveModel(name, "ssd", int(v["blocks"]), int(v["queue_depth"]),
                      ssd=ssd_params(v, fresh=bool(v.get("fresh", False)),
                                     rated_overprovisioning=rated))


def describe() -> list[dict[str, Any]]:
    """Every catalog drive with its figures and their sources (for ``blocklab drives``)."""
    entries, sources, _fw = catalog()
    rows = []
    for e in entries.values():
        row: dict[str, Any] = {"name": e.name, "kind": e.kind, "model": e.model,
                               "class": e.cls}
        if e.kind == "disksim":
            d = read_drive(disksim_path(e))
            row.update(capacity_gb=d.block_count * SECTOR_BYTES / 1e9, rpm=d.rpm,
                       source=f"DiskSim 4.0 parameters extracted from the real drive "
                              f"(CMU PDL): {e.file}")
        else:
            row.update(capacity_gb=int(e.figures["blocks"].value) * SECTOR_BYTES / 1e9,
                       rpm=e.figures["rpm"].value if "rpm" in e.figures else None,
                       figures={k: {"value": f.value, "label": f.label,
                                    "source": sources[f.source], "how": f.how}
                                for k, f in e.figures.items()})
        rows.append(row)
    return rows
