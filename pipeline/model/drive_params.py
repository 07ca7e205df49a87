"""A DiskSim drive's parameters (pipeline/model/disksim_params.py) as the HDD kernel's
parameter vector, zone table and seek table (``kernels/drive/hdd.py`` says what each holds):
the catalog builds its HDDs with it, and ``blocklab validate disksim`` replays on it."""

from __future__ import annotations

import dataclasses

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
_HUGE = float(1 << 50)


@dataclasses.dataclass(frozen=True)
class ZoneLayout:
    """How one zone's blocks sit on its sectors, in the kernel's terms (``kernels/drive/hdd.py``,
    zone table): LBNs in the zone, sectors per sparing range, LBNs per range, sectors before a
    range's blocks, and the slips as the kernel counts them."""

    lbns: int
    range_sectors: float
    range_lbns: float
    front: int
    slips: list[int]


def sparing_kind(d: DiskSimDrive) -> tuple[int, int]:
    """(``P_SPARING``, ``P_SLIP_SKEW``) of a drive's sparing scheme."""
    s = d.sparing_scheme
    kind = {1: H.SPARE_TRACK, 4: H.SPARE_TO_END, 5: H.SPARE_FRONT_SLIPS, 6: H.SPARE_TO_END,
            7: H.SPARE_TO_END}.get(s, H.SPARE_RANGE)
    # DiskSim's g1_map_pbn_skew turns tracks on by the slips before them only in the
    # per-cylinder ("issectpercyl": 2, 4, 5, 6) and per-track (3) schemes
    skew = {2: H.SKEW_SLIPS_CYL, 3: H.SKEW_SLIPS_TRACK, 4: H.SKEW_SLIPS_CYL,
            5: H.SKEW_SLIPS_CYL, 6: H.SKEW_SLIPS_CYL}.get(s, H.SKEW_SLIPS_NONE)
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
        return ZoneLayout(phys, _HUGE, _HUGE, 0, [])
    if s == 1:
        return ZoneLayout(phys - z.spares * bpt, _HUGE, _HUGE, 0, slips)
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
        return ZoneLayout(phys - z.spares, _HUGE, _HUGE, 0, slips)
    return ZoneLayout(phys - z.spares - len(z.slips), _HUGE, _HUGE, 0, slips)  # 10


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


def drive_params(d: DiskSimDrive) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's parameter vector, layout table (zones, then their slips) and seek table for a
    DiskSim drive (see ``kernels/drive/hdd.py`` for what each parameter does)."""
    where = d.source
    _check_layout(d)
    ov = d.overheads_ms
    c = d.cache
    p = np.zeros(H.P_N)
    p[H.P_ROT_MS] = 60000.0 / d.rpm
    p[H.P_SURFACES] = d.surfaces
    p[H.P_HEAD_SWITCH] = d.head_switch_ms
    p[H.P_WRITE_SETTLE] = d.write_settle_ms
    # DiskSim's disk_get_blktranstime: a block crosses the interface at the slower of the
    # drive's bulk sector time and the bus's block time
    p[H.P_XFER_R] = max(d.bulk_sector_transfer_ms, d.bus_read_block_ms)
    p[H.P_XFER_W] = max(d.bulk_sector_transfer_ms, d.bus_write_block_ms)
    for idx, key in ((H.P_OV_RHR, "read hit after read"), (H.P_OV_RHW, "read hit after write"),
                     (H.P_OV_RMR, "read miss after read"), (H.P_OV_RMW, "read miss after write"),
                     (H.P_OV_WHR, "write hit after read"), (H.P_OV_WHW, "write hit after write"),
                     (H.P_OV_WMR, "write miss after read"),
                     (H.P_OV_WMW, "write miss after write"),
                     (H.P_COMPL_R, "read completion"), (H.P_COMPL_W, "write completion"),
                     (H.P_DATA_PREP, "data preparation"), (H.P_RESELECT1, "first reselect"),
                     (H.P_RESELECT2, "other reselect"),
                     (H.P_DISC_RR, "read disconnect after read"),
                     (H.P_DISC_RW, "read disconnect after write"),
                     (H.P_DISC_W, "write disconnect"), (H.P_XD_CMD, "extra disconnect command"),
                     (H.P_XD_DISC1, "extra disconnect 1"),
                     (H.P_XD_INTER, "extra disconnect interval"),
                     (H.P_XD_DISC2, "extra disconnect 2"),
                     (H.P_XD_SEEKDELTA, "extra disconnect seek delta"),
                     (H.P_MIN_SEEK, "minimum seek delay")):
        p[idx] = ov[key]
    p[H.P_XD_ON] = 1.0 if c["extra_write_disconnect"] else 0.0
    p[H.P_WRITE_BACK] = 1.0 if c["fast_write_level"] > 0 else 0.0
    p[H.P_CACHE_ON] = 1.0 if c["enable_caching"] else 0.0
    p[H.P_ALMOST] = 1.0 if c.get("allow_almost_read_hits", 0) else 0.0
    p[H.P_REQ_OVERHEAD] = d.per_request_overhead_ms
    nseg = int(c["segments"])
    if not 1 <= nseg <= H.SEG_MAX:
        raise ParamError(f"{where}: Number of buffer segments must be 1 to {H.SEG_MAX}, "
                         f"not {nseg}")
    p[H.P_NSEGS] = nseg
    p[H.P_WSEG] = 1.0 if c["separate_write_segment"] and nseg > 1 else 0.0
    p[H.P_NWSEGS] = max(1, int(c["max_write_segments"]))
    p[H.P_SEG_BLOCKS] = c["segment_blocks"]
    p[H.P_RA_KIND] = int(c["buffer_continuous_read"]) if c["enable_caching"] else H.RA_NONE
    p[H.P_MAX_RA] = c["max_read_ahead_blocks"]
    p[H.P_RA_IDLE_HIT] = c["read_ahead_on_idle_hit"]
    p[H.P_HIGH_WM] = c["high_water_mark"]
    p[H.P_WM_BY_REQ] = c["watermark_by_request_size"]
    # a drive that reads "any free blocks", or reads with zero latency ("immediate buffer
    # read"), reads from the moment its head settles and keeps what it read before the request
    # (Quantum Atlas 10K II product manual, section 6.4, "Zero latency read/write")
    p[H.P_READ_ARRIVAL] = 1.0 if c["read_any_free_blocks"] or c["immediate_buffer_read"] else 0.0
    if d.seek_type.startswith("hpl"):
        p[H.P_SEEK_KIND] = H.SEEK_HPL
        x, a, b, cc, e, _single = d.hpl_seek
        p[H.P_HPL_X], p[H.P_HPL_A], p[H.P_HPL_B], p[H.P_HPL_C], p[H.P_HPL_E] = x, a, b, cc, e
        curve_t = np.array(d.first_ten_seeks_ms if d.seek_type == "hplplus10" else [], float)
        curve_d = np.arange(1, len(curve_t) + 1, dtype=np.int64)
    else:
        p[H.P_SEEK_KIND] = H.SEEK_CURVE
        curve_d = np.array([cyl for cyl, _t in d.seek_curve], dtype=np.int64)
        curve_t = np.array([t for _c, t in d.seek_curve], dtype=float)
    p[H.P_SINGLE_SEEK] = d.single_cylinder_seek_ms
    p[H.P_NZONES] = len(d.zones)
    p[H.P_SERP] = d.mapping_scheme
    p[H.P_SPARING], p[H.P_SLIP_SKEW] = sparing_kind(d)
    nz = len(d.zones)
    zl = [zone_layout(d, z) for z in d.zones]
    nslips = sum(len(x.slips) for x in zl)
    total = sum(x.lbns for x in zl)
    # the bucket index: a few thousand buckets of a power-of-two number of blocks
    shift = max(0, int(np.ceil(np.log2(max(total, 1) / 4096))))
    nb = (total >> shift) + 1
    zones = np.zeros(nz * H.Z_N + nslips + nb)
    first = 0
    slip_at = nz * H.Z_N
    for i, z in enumerate(d.zones):  # in LBN order, as listed
        nlbn, rs, rl = zl[i].lbns, zl[i].range_sectors, zl[i].range_lbns
        b = i * H.Z_N
        zones[b + H.Z_FIRST_CYL] = z.first_cylinder
        zones[b + H.Z_LAST_CYL] = z.last_cylinder
        zones[b + H.Z_BPT] = z.blocks_per_track
        zones[b + H.Z_FIRST_LBN] = first
        zones[b + H.Z_NLBN] = nlbn
        zones[b + H.Z_TSKEW] = int(z.track_skew)  # DiskSim truncates skews to whole sectors
        zones[b + H.Z_CSKEW] = int(z.cylinder_skew)
        zones[b + H.Z_OFFSET] = int(z.offset_of_first_block)
        zones[b + H.Z_DEAD] = z.empty_front
        zones[b + H.Z_RANGE] = rs
        zones[b + H.Z_RANGE_LBNS] = rl
        zones[b + H.Z_FRONT] = zl[i].front
        zones[b + H.Z_SLIP0] = slip_at
        slips = zl[i].slips
        zones[b + H.Z_NSLIP] = len(slips)
        zones[slip_at:slip_at + len(slips)] = slips
        slip_at += len(slips)
        first += nlbn
    # DiskSim maps as many blocks as its zones hold, which may differ from "Block count"
    p[H.P_BLOCKS] = first
    starts = zones[H.Z_FIRST_LBN:nz * H.Z_N:H.Z_N]
    p[H.P_BUCKETS_AT] = slip_at
    p[H.P_BUCKET_SHIFT] = shift
    p[H.P_NBUCKETS] = nb
    zones[slip_at:] = np.searchsorted(starts, np.arange(nb) << shift, side="right") - 1
    return p, zones, curve_d, curve_t
