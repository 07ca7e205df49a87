"""A DiskSim drive's parameters (pipeline/model/disksim_params.py) as the HDD kernel's
parameter vector, zone table and seek table, filled by name (``kernels/drive/hdd_tables.py``
says what each holds):
the catalog builds its HDDs with it, and ``blocklab validate disksim`` replays on it."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from blocklab.kernels.drive import hdd as H

from .disksim_params import DiskSimDrive, ParamError, Zone

# DiskSim 4.0's sparing schemes ("Sparing scheme used"; the names of diskmodel/layout_g1.h, the
# placements its manual's dm_layout_g1 section gives them)
SPARING = {0: "no spares", 1: "spare tracks at the end of each zone",
           2: "spare sectors at the end of each cylinder",
           3: "spare sectors at the end of each track",
           4: "spare sectors at the end of each cylinder, slips pushed to the end of the zone",
           5: "spare sectors at the front of each cylinder",
           6: "spare sectors at the front of each cylinder, slips pushed to the end of the zone",
           7: "slips pushed to the end of the zone, no spare sectors per cylinder",
           8: "spare sectors at the end of each range of cylinders",
           9: "spare sectors at the end of each zone",
           10: "spare sectors at the end of each zone, slips pushed past them"}


@dataclasses.dataclass(frozen=True)
class ZoneLayout:
    """How one zone's blocks sit on its sectors, in the kernel's terms (the zone table of
    ``kernels/drive/hdd_tables.py``): LBNs in the zone, sectors per sparing range and LBNs per
    range (None when the zone is one range), sectors before a range's blocks, and the slips as
    the kernel counts them."""

    lbns: int
    range_sectors: int | None
    range_lbns: int | None
    front: int
    slips: list[int]


def sparing_kind(d: DiskSimDrive) -> tuple[str, str]:
    """(``sparing``, ``slip_skew``) of a drive's sparing scheme, as the kernel names them."""
    s = d.sparing_scheme
    kind = {1: "track", 4: "to_end", 5: "front_slips", 6: "to_end", 7: "to_end"}.get(s, "range")
    # DiskSim's g1_map_pbn_skew turns tracks on by the slips before them only in the
    # per-cylinder ("issectpercyl": 2, 4, 5, 6) and per-track (3) schemes
    skew = {2: "cylinder", 3: "track", 4: "cylinder", 5: "cylinder", 6: "cylinder"}.get(s, "none")
    return kind, skew


def zone_layout(d: DiskSimDrive, z: Zone) -> ZoneLayout:
    """A zone's layout under the drive's sparing scheme. Its LBN count is DiskSim's
    (``dm_layout_g1_compute_blksinband``, diskmodel/layout_g1_load.c)."""
    cyls = z.last_cylinder - z.first_cylinder + 1
    bpt = z.blocks_per_track
    bpc = bpt * d.surfaces
    phys = cyls * bpc - z.empty_front
    s = d.sparing_scheme
    slips = sorted(z.slips)
    if s == 0:  # DiskSim's no-sparing mapping reads no slips
        return ZoneLayout(phys, None, None, 0, [])
    if s == 1:
        return ZoneLayout(phys - z.spares * bpt, None, None, 0, slips)
    if s in (2, 5):
        return ZoneLayout(phys - z.spares * cyls, bpc, bpc - z.spares,
                          z.spares if s == 5 else 0, slips)
    if s == 3:
        return ZoneLayout(phys - z.spares * cyls * d.surfaces, bpt, bpt - z.spares, 0, slips)
    if s in (4, 6, 7):
        # slips push blocks along the zone's data sectors: count them in data-sector numbers
        # (_check_layout refuses slips in a cylinder's spare sectors)
        fr = z.spares if s == 6 else 0
        rl = bpc - z.spares
        u = [q // bpc * rl + q % bpc - fr for q in slips]
        lbns = phys - len(z.slips) - (z.spares * cyls if s != 7 else 0)
        return ZoneLayout(lbns, bpc, rl, fr, u)
    if s == 8:
        rs = bpc * d.range_size_for_sparing
        return ZoneLayout(phys - z.spares * (cyls // d.range_size_for_sparing), rs,
                          rs - z.spares, 0, slips)
    if s == 9:
        return ZoneLayout(phys - z.spares, None, None, 0, slips)
    return ZoneLayout(phys - z.spares - len(z.slips), None, None, 0, slips)  # 10


def _check_layout(d: DiskSimDrive) -> None:
    """Refuse what DiskSim's layout cannot place, naming the file and the zone."""
    where = d.source
    s = d.sparing_scheme
    if s not in SPARING:
        raise ParamError(f"{where}: sparing scheme {s} is not one of DiskSim's (0-10: "
                         + "; ".join(f"{k} {v}" for k, v in SPARING.items()) + ")")
    if d.mapping_scheme not in (0, 1, 2):
        raise ParamError(f"{where}: LBN-to-PBN mapping scheme {d.mapping_scheme} is not "
                         "supported (0 normal, 1 and 2 cylinder switch on surface)")
    if s == 8 and d.range_size_for_sparing < 1:
        raise ParamError(f"{where}: Rangesize for sparing must be at least 1 with sparing "
                         f"scheme 8, not {d.range_size_for_sparing}")
    for i, z in enumerate(d.zones):
        zw = f"{where}: zone {i + 1} (cylinders {z.first_cylinder}-{z.last_cylinder})"
        bpt = z.blocks_per_track
        if z.last_cylinder < z.first_cylinder or bpt < 1:
            raise ParamError(f"{zw}: needs at least one cylinder and one block per track")
        unit = {2: bpt * d.surfaces, 3: bpt, 4: bpt * d.surfaces, 5: bpt * d.surfaces,
                6: bpt * d.surfaces, 8: bpt * d.surfaces * max(d.range_size_for_sparing, 1)}
        if s in unit and not 0 <= z.spares < unit[s]:
            raise ParamError(f"{zw}: {z.spares} spares do not fit a sparing range of "
                             f"{unit[s]} sectors")
        if s == 7 and z.spares:
            # DiskSim counts no blocks for them (compute_blksinband) but its g1_ltop skips them
            # in every cylinder, so it would place the zone's last blocks past its end
            raise ParamError(f"{zw}: sparing scheme 7 keeps its spares at the end of the "
                             f"disk, not {z.spares} per cylinder")
        if len(set(z.slips)) != len(z.slips):
            raise ParamError(f"{zw}: a slip is listed twice")
        room = {2: bpt * d.surfaces, 3: bpt, 5: bpt * d.surfaces,
                8: bpt * d.surfaces * max(d.range_size_for_sparing, 1)}.get(s)
        if room:
            # slips that use a range's spares: no more than it has (a last range of fewer
            # cylinders than "Rangesize for sparing" has none: DiskSim counts none for it)
            full = ((z.last_cylinder - z.first_cylinder + 1) * bpt * d.surfaces) // room
            per: dict[int, int] = {}
            for q in z.slips:
                per[q // room] = per.get(q // room, 0) + 1
            over = [r for r, k in per.items() if k > (z.spares if r < full else 0)]
            if over:
                raise ParamError(f"{zw}: more slips than spares in sparing range {over[0] + 1} "
                                 f"({per[over[0]]} slips, "
                                 f"{z.spares if over[0] < full else 0} spares)")
        if s == 8:
            rs = bpt * d.surfaces * d.range_size_for_sparing
            part = (z.last_cylinder - z.first_cylinder + 1) % d.range_size_for_sparing
            if part * bpt * d.surfaces > rs - z.spares:
                # DiskSim's g1_ltop_sectperrangespare numbers the last range's blocks as a full
                # range's and would place those past a full range's LBNs beyond the zone
                raise ParamError(f"{zw}: its last {part} cylinders hold more blocks than a "
                                 f"range of {d.range_size_for_sparing} less its spares")
        if s in (1, 9) and len(z.slips) > z.spares:
            raise ParamError(f"{zw}: {len(z.slips)} slips but {z.spares} spares")
        if s in (4, 6):
            fr = z.spares if s == 6 else 0
            bpc = bpt * d.surfaces
            bad = [q for q in z.slips if not fr <= q % bpc < fr + bpc - z.spares]
            if bad:
                # DiskSim's g1_ltop then leaves the next data sector empty and its
                # g1_map_pbn_skew counts the slip by its physical place: not modelled
                raise ParamError(f"{zw}: slips in a cylinder's spare sectors are not modelled "
                                 f"with sparing scheme {s} ({', '.join(map(str, bad[:5]))})")
        pairs = list(zip(z.defects[::2], z.defects[1::2], strict=False))
        if len(z.defects) % 2:
            raise ParamError(f"{zw}: defects must come in pairs (defect, spare it moves to)")
        if s != 0 and any(a != b for a, b in pairs):
            # a defect "remapped" to itself changes nothing in DiskSim's g1_ltop_* (they skip
            # it), which is what the validation drives list (the Cheetah 4LP's one defect)
            raise ParamError(f"{zw}: defects remapped to another sector are not modelled "
                             f"({', '.join(f'{a} -> {b}' for a, b in pairs if a != b)})")
        if zone_layout(d, z).lbns < 0:
            raise ParamError(f"{zw}: more spares and slips than sectors")


def drive_params(d: DiskSimDrive) -> H.Drive:
    """The kernel's parameter vector, zone table (zones, their slips, the bucket index) and seek
    table for a DiskSim drive (``kernels/drive/hdd_tables.py`` names every parameter)."""
    _check_layout(d)
    c = d.cache
    nseg = int(c["segments"])
    if not 1 <= nseg <= H.SEG_MAX:
        raise ParamError(f"{d.source}: Number of buffer segments must be 1 to {H.SEG_MAX}, "
                         f"not {nseg}")
    zones, layout = H.zone_table([_zone(d, z) for z in d.zones])
    seek, curve_d, curve_t = _seek(d)
    sparing, slip_skew = sparing_kind(d)
    p = H.pack(
        rot_ms=60000.0 / d.rpm, surfaces=d.surfaces, head_switch_ms=d.head_switch_ms,
        write_settle_ms=d.write_settle_ms,
        # DiskSim's disk_get_blktranstime: a block crosses the interface at the slower of the
        # drive's bulk sector time and the bus's block time
        xfer_read_ms=max(d.bulk_sector_transfer_ms, d.bus_read_block_ms),
        xfer_write_ms=max(d.bulk_sector_transfer_ms, d.bus_write_block_ms),
        request_overhead_ms=d.per_request_overhead_ms,
        # the controller's overheads: the kernel's names are DiskSim's ("read hit after read")
        **{k.replace(" ", "_") + "_ms": v for k, v in d.overheads_ms.items()},
        extra_write_disconnect=bool(c["extra_write_disconnect"]),
        write_back=c["fast_write_level"] > 0, cache_on=bool(c["enable_caching"]),
        # command queuing's early data phase for waiting writes: catalog drives only (a DiskSim
        # parameter file has no such key: DiskSim's validated drives keep DiskSim's timing)
        queued_write_data=bool(c.get("queued_write_data", 0)),
        almost_read_hits=bool(c["allow_almost_read_hits"]),
        segments=nseg, write_segment=bool(c["separate_write_segment"]) and nseg > 1,
        max_write_segments=max(1, int(c["max_write_segments"])),
        segment_blocks=c["segment_blocks"],
        # DiskSim's "Buffer continuous read" codes are the kernel's read-ahead kinds
        read_ahead=int(c["buffer_continuous_read"]) if c["enable_caching"] else "none",
        max_read_ahead_blocks=c["max_read_ahead_blocks"],
        read_ahead_on_idle_hit=c["read_ahead_on_idle_hit"],
        high_water_mark=c["high_water_mark"],
        watermark_by_request=c["watermark_by_request_size"],
        # a drive that reads "any free blocks", or reads with zero latency ("immediate buffer
        # read"), reads from the moment its head settles and keeps what it read before the
        # request (Quantum Atlas 10K II product manual, section 6.4, "Zero latency read/write")
        read_on_arrival=bool(c["read_any_free_blocks"] or c["immediate_buffer_read"]),
        mapping=d.mapping_scheme, sparing=sparing, slip_skew=slip_skew, **seek, **layout)
    # the seek time of every distance the drive can move (up to the table's size), after the
    # curve's own times: a seek is then one load (kernels/drive/hdd_geometry.py, _seek)
    table = np.empty(min(max(z.last_cylinder for z in d.zones) + 1, H.SEEK_TABLE_MAX))
    H.seek_times(p, curve_d, curve_t, table)
    return H.Drive(p, zones, curve_d, np.concatenate([curve_t, table]))


def _zone(d: DiskSimDrive, z: Zone) -> H.Zone:
    """One zone as the kernel's zone table takes it (DiskSim truncates skews and the first
    block's offset to whole sectors)."""
    zl = zone_layout(d, z)
    return H.Zone(first_cyl=z.first_cylinder, last_cyl=z.last_cylinder,
                  sectors_per_track=z.blocks_per_track, lbns=zl.lbns,
                  track_skew=int(z.track_skew), cylinder_skew=int(z.cylinder_skew),
                  offset=int(z.offset_of_first_block), empty_front=z.empty_front,
                  range_sectors=zl.range_sectors, range_lbns=zl.range_lbns, front=zl.front,
                  slips=zl.slips)


def _seek(d: DiskSimDrive) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """(the seek parameters, the seek table's distances in cylinders and times in ms): the
    measured curve, or the Ruemmler-Wilkes equation with its measured first ten seeks."""
    if d.seek_type.startswith("hpl"):
        x, a, b, cc, e, _single = d.hpl_seek
        curve_t = np.array(d.first_ten_seeks_ms if d.seek_type == "hplplus10" else [], float)
        curve_d = np.arange(1, len(curve_t) + 1, dtype=np.int64)
        return ({"seek": "hpl", "hpl_boundary_cyl": x, "hpl_a_ms": a, "hpl_b_ms": b,
                 "hpl_c_ms": cc, "hpl_e_ms": e}, curve_d, curve_t)
    curve_d = np.array([cyl for cyl, _t in d.seek_curve], dtype=np.int64)
    curve_t = np.array([t for _c, t in d.seek_curve], dtype=float)
    return {"seek": "curve"}, curve_d, curve_t
