"""The HDD model's tables described once: its parameter vector, zone table and per-drive state
(``kernels/drive/hdd.py`` serves requests over them), with the plain-Python functions that
build them (``pack``, ``zone_table``, ``new_state``) and read them back (``unpack``).

Every parameter is a named field (``PARAMS``: name, group, meaning and unit); the kernel's
``P_*`` indices are derived from those names, so code outside ``kernels/`` fills a drive's
parameters by name and never by position. Fields whose value is one of a few kinds
(``CHOICES``) take the kind's name or its code. The zone table's columns (``ZONE_COLUMNS``) and
the state's fields (``STATE``) are described the same way.

This module does not import Numba: the pipeline reads it without compiling anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np


class Field(NamedTuple):
    """One parameter of the HDD model: its name (units in the name), the part of the model it
    belongs to (``mechanics``, ``interface``, ``overhead``, ``cache``, ``seek``, ``layout``),
    what it means, and its value when ``pack`` is not given one (None: it must be given)."""

    name: str
    group: str
    doc: str
    default: float | None = None


# The parameter vector (float64), in the kernel's order. The ``overhead`` fields are DiskSim's
# controller overheads under its own names (disksim_diskctlr.c; pipeline/model/disksim_params.py
# reads them); flags are 1.0 (on) or 0.0 (off).
PARAMS: tuple[Field, ...] = (
    Field("rot_ms", "mechanics", "one revolution (60000 / rpm)"),
    Field("surfaces", "mechanics", "data surfaces (heads)"),
    Field("head_switch_ms", "mechanics", "a head switch (a track switch within a cylinder)"),
    Field("write_settle_ms", "mechanics", "added to a write's positioning when the head moved"),
    Field("xfer_read_ms", "interface", "a block read crossing the interface: the slower of the "
          "drive's bulk sector time and the bus's block time (disk_get_blktranstime)"),
    Field("xfer_write_ms", "interface", "a block written crossing the interface (as above)"),
    Field("read_hit_after_read_ms", "overhead", "command overhead of a read hit after a read"),
    Field("read_hit_after_write_ms", "overhead", "... of a read hit after a write"),
    Field("read_miss_after_read_ms", "overhead", "... of a read miss after a read"),
    Field("read_miss_after_write_ms", "overhead", "... of a read miss after a write"),
    Field("write_hit_after_read_ms", "overhead", "... of a write hit after a read"),
    Field("write_hit_after_write_ms", "overhead", "... of a write hit after a write"),
    Field("write_miss_after_read_ms", "overhead", "... of a write miss after a read"),
    Field("write_miss_after_write_ms", "overhead", "... of a write miss after a write"),
    Field("read_completion_ms", "overhead", "a read's completion"),
    Field("write_completion_ms", "overhead", "a write's completion"),
    Field("data_preparation_ms", "overhead", "before the first data crosses the interface"),
    Field("first_reselect_ms", "overhead", "the first reconnection of a request"),
    Field("other_reselect_ms", "overhead", "a later reconnection"),
    Field("read_disconnect_after_read_ms", "overhead", "disconnection after a read command, "
          "the request before a read"),
    Field("read_disconnect_after_write_ms", "overhead", "... the request before a write"),
    Field("write_disconnect_ms", "overhead", "disconnection after a write's data"),
    Field("extra_write_disconnect", "cache", "flag: the HP C2247A's extra write disconnect "
          "after a non-sequential write"),
    Field("extra_disconnect_command_ms", "overhead", "its command overhead"),
    Field("extra_disconnect_1_ms", "overhead", "its first disconnection"),
    Field("extra_disconnect_interval_ms", "overhead", "its delay between disconnections"),
    Field("extra_disconnect_2_ms", "overhead", "its second disconnection"),
    Field("extra_disconnect_seek_delta_ms", "overhead", "when its media write may start, after "
          "the command"),
    Field("minimum_seek_delay_ms", "overhead", "a write's shortest positioning time"),
    Field("write_back", "cache", "flag: a write completes once its data is in the buffer"),
    Field("cache_on", "cache", "flag: reads may hit the buffer"),
    Field("segments", "cache", "buffer segments (1 to SEG_MAX), the write segment included"),
    Field("write_segment", "cache", "flag: the last segment is a dedicated write segment"),
    Field("max_write_segments", "cache", "segments a stream of writes may hold"),
    Field("segment_blocks", "cache", "blocks a segment holds"),
    Field("read_ahead", "cache", "what a read reads ahead to (CHOICES; DiskSim's \"Buffer "
          "continuous read\" codes)"),
    Field("max_read_ahead_blocks", "cache", "blocks read ahead past a request (0: to the "
          "segment's size)"),
    Field("read_ahead_on_idle_hit", "cache", "flag: a hit restarts the read-ahead"),
    Field("high_water_mark", "cache", "share of a read miss in the buffer before the drive "
          "reconnects"),
    Field("watermark_by_request", "cache", "flag: that share is of the request (else of the "
          "segment)"),
    Field("read_on_arrival", "cache", "flag: a read keeps the sectors that pass under the head "
          "before its first one"),
    Field("seek", "seek", "the seek model (CHOICES): the measured curve, or the Ruemmler-Wilkes "
          "equation with the first ten seeks measured"),
    # (the equation's coefficients are unused with the measured curve: 0 there)
    Field("hpl_boundary_cyl", "seek", "Ruemmler-Wilkes: distance where the linear part starts",
          0.0),
    Field("hpl_a_ms", "seek", "Ruemmler-Wilkes: a of a + b sqrt(d)", 0.0),
    Field("hpl_b_ms", "seek", "Ruemmler-Wilkes: b of a + b sqrt(d)", 0.0),
    Field("hpl_c_ms", "seek", "Ruemmler-Wilkes: c of c + e d", 0.0),
    Field("hpl_e_ms", "seek", "Ruemmler-Wilkes: e of c + e d", 0.0),
    Field("zones", "layout", "zones in the zone table (zone_table)"),
    Field("mapping", "layout", "DiskSim's LBN-to-PBN mapping scheme: 0 surfaces in order, 1 "
          "reversed on odd cylinders of the zone, 2 reversed on odd cylinders"),
    Field("sparing", "layout", "how spare space and slips place blocks (CHOICES; the zone "
          "table's comment)"),
    Field("blocks", "layout", "blocks the zones hold (zone_table)"),
    Field("buckets_at", "layout", "index of the zone table's bucket index (zone_table)"),
    Field("bucket_shift", "layout", "bucket i holds the zone of block i << bucket_shift"),
    Field("buckets", "layout", "entries of the bucket index"),
    Field("almost_read_hits", "cache", "flag: a read starting where the read-ahead has got to "
          "is served from it"),
    Field("slip_skew", "layout", "which earlier slips turn a track's first sector on by one "
          "each (CHOICES)"),
    Field("request_overhead_ms", "interface", "DiskSim's per-request overhead: the request "
          "reaches the drive's controller this much later (disk_event_arrive)"),
    Field("queued_write_data", "cache", "flag: command queuing (SCSI tagged queuing, SATA NCQ) "
          "takes a waiting write's command and data while the drive serves the request before "
          "it, so its media write can start as that one's ends (write-through only)", 0.0),
)
NAMES: tuple[str, ...] = tuple(f.name for f in PARAMS)
P_N = len(PARAMS)

# Fields that take one of a few kinds, by name or by code (the position in the tuple).
CHOICES: dict[str, tuple[str, ...]] = {
    "seek": ("curve", "hpl"),
    # spare space and slips (see the zone table below): DiskSim's sparing schemes 0, 2, 3, 8,
    # 9 and 10; 1; 4, 6 and 7; 5
    "sparing": ("range", "track", "to_end", "front_slips"),
    # none; those before the track's cylinder; those before the track itself
    "slip_skew": ("none", "cylinder", "track"),
    # DiskSim's "Buffer continuous read": none, to the end of the track, of the cylinder, of the
    # segment, or the DEC scheme (to the end of the track after the request)
    "read_ahead": ("none", "track", "cylinder", "segment", "dec"),
}


def _p(name: str) -> int:
    return NAMES.index(name)


P_ROT_MS = _p("rot_ms")
P_SURFACES = _p("surfaces")
P_HEAD_SWITCH = _p("head_switch_ms")
P_WRITE_SETTLE = _p("write_settle_ms")
P_XFER_R = _p("xfer_read_ms")
P_XFER_W = _p("xfer_write_ms")
P_OV_RHR = _p("read_hit_after_read_ms")
P_OV_RHW = _p("read_hit_after_write_ms")
P_OV_RMR = _p("read_miss_after_read_ms")
P_OV_RMW = _p("read_miss_after_write_ms")
P_OV_WHR = _p("write_hit_after_read_ms")
P_OV_WHW = _p("write_hit_after_write_ms")
P_OV_WMR = _p("write_miss_after_read_ms")
P_OV_WMW = _p("write_miss_after_write_ms")
P_COMPL_R = _p("read_completion_ms")
P_COMPL_W = _p("write_completion_ms")
P_DATA_PREP = _p("data_preparation_ms")
P_RESELECT1 = _p("first_reselect_ms")
P_RESELECT2 = _p("other_reselect_ms")
P_DISC_RR = _p("read_disconnect_after_read_ms")
P_DISC_RW = _p("read_disconnect_after_write_ms")
P_DISC_W = _p("write_disconnect_ms")
P_XD_ON = _p("extra_write_disconnect")
P_XD_CMD = _p("extra_disconnect_command_ms")
P_XD_DISC1 = _p("extra_disconnect_1_ms")
P_XD_INTER = _p("extra_disconnect_interval_ms")
P_XD_DISC2 = _p("extra_disconnect_2_ms")
P_XD_SEEKDELTA = _p("extra_disconnect_seek_delta_ms")
P_MIN_SEEK = _p("minimum_seek_delay_ms")
P_WRITE_BACK = _p("write_back")
P_QUEUED_WRITES = _p("queued_write_data")
P_CACHE_ON = _p("cache_on")
P_NSEGS = _p("segments")
P_WSEG = _p("write_segment")
P_NWSEGS = _p("max_write_segments")
P_SEG_BLOCKS = _p("segment_blocks")
P_RA_KIND = _p("read_ahead")
P_MAX_RA = _p("max_read_ahead_blocks")
P_RA_IDLE_HIT = _p("read_ahead_on_idle_hit")
P_HIGH_WM = _p("high_water_mark")
P_WM_BY_REQ = _p("watermark_by_request")
P_READ_ARRIVAL = _p("read_on_arrival")
P_SEEK_KIND = _p("seek")
P_HPL_X = _p("hpl_boundary_cyl")
P_HPL_A = _p("hpl_a_ms")
P_HPL_B = _p("hpl_b_ms")
P_HPL_C = _p("hpl_c_ms")
P_HPL_E = _p("hpl_e_ms")
P_NZONES = _p("zones")
P_SERP = _p("mapping")
P_SPARING = _p("sparing")
P_BLOCKS = _p("blocks")
P_BUCKETS_AT = _p("buckets_at")
P_BUCKET_SHIFT = _p("bucket_shift")
P_NBUCKETS = _p("buckets")
P_ALMOST = _p("almost_read_hits")
P_SLIP_SKEW = _p("slip_skew")
P_REQ_OVERHEAD = _p("request_overhead_ms")


def _kind(field: str, name: str) -> int:
    return CHOICES[field].index(name)


SEEK_CURVE = _kind("seek", "curve")
SEEK_HPL = _kind("seek", "hpl")
SPARE_RANGE = _kind("sparing", "range")
SPARE_TRACK = _kind("sparing", "track")
SPARE_TO_END = _kind("sparing", "to_end")
SPARE_FRONT_SLIPS = _kind("sparing", "front_slips")
SKEW_SLIPS_NONE = _kind("slip_skew", "none")
SKEW_SLIPS_CYL = _kind("slip_skew", "cylinder")
SKEW_SLIPS_TRACK = _kind("slip_skew", "track")
RA_NONE = _kind("read_ahead", "none")
RA_TRACK = _kind("read_ahead", "track")
RA_CYL = _kind("read_ahead", "cylinder")
RA_SEG = _kind("read_ahead", "segment")
RA_DEC = _kind("read_ahead", "dec")
SEG_MAX = 16  # cache segments a state vector has room for


def pack(**fields: Any) -> np.ndarray:
    """The kernel's parameter vector (float64, ``P_N`` long) from the fields of ``PARAMS`` by
    name (a field left out takes its default); a ``CHOICES`` field takes its kind's name or
    code, a flag a bool or 0/1. Raises ValueError naming a field that is unknown, missing or not
    one of its kinds."""
    unknown = sorted(set(fields) - set(NAMES))
    missing = [f.name for f in PARAMS if f.name not in fields and f.default is None]
    if unknown or missing:
        raise ValueError(f"HDD parameters: unknown {unknown}, missing {missing}")
    p = np.zeros(P_N)
    for i, f in enumerate(PARAMS):
        name = f.name
        v = fields.get(name, f.default)
        if isinstance(v, str):
            if v not in CHOICES.get(name, ()):
                raise ValueError(f"HDD parameter {name}: {v!r} is not one of "
                                 f"{CHOICES.get(name, ())}")
            v = CHOICES[name].index(v)
        p[i] = v
    return p


def unpack(p: np.ndarray) -> dict[str, float]:
    """The fields of parameter vector ``p`` by name (``pack(**unpack(p))`` gives ``p``)."""
    if p.shape != (P_N,):
        raise ValueError(f"an HDD parameter vector has {P_N} values, not {p.shape}")
    return {name: float(p[i]) for i, name in enumerate(NAMES)}


# ---------------------------------------------------------------- the zone table

# Zone table columns (float64), ``Z_N`` per zone: first and last cylinder, sectors per track,
# first LBN, LBNs, track and cylinder skew (sectors), offset of the first block (sectors), empty
# sectors at the zone's front, sectors per sparing range and LBNs per range (both ``_ONE_RANGE``
# when the zone is one range), index in the table of the zone's first slip, number of slips,
# sectors of a range that come before its blocks (spares at the front). Slips are ascending;
# what they count depends on the ``sparing`` parameter:
#
# - ``range``: zone-relative physical sectors. A range's blocks start ``front`` sectors into it
#   and a slipped sector pushes the range's later blocks on, into its spare sectors (DiskSim's
#   sparing schemes 0, 2, 3, 8, 9 and 10; 9 and 10 have one range per zone).
# - ``front_slips``: as ``range``, but the spares are at the range's front and its slips use
#   them: its blocks start ``front - (slips in the range)`` sectors into it (5).
# - ``track``: zone-relative tracks; a slipped track pushes the later tracks on (1).
# - ``to_end``: the zone's data sectors (the ``LBNs per range`` sectors of each range after its
#   ``front``) numbered in order, and a slipped one pushes every later block of the zone on,
#   across ranges, into the spare space at the zone's end (4, 6, 7).
#
# After the zones and their slips, the table holds a bucket index: entry i is the zone of LBN
# ``i << bucket_shift``.
ZONE_COLUMNS = ("first_cyl", "last_cyl", "sectors_per_track", "first_lbn", "lbns",
                "track_skew", "cylinder_skew", "offset", "empty_front", "range_sectors",
                "range_lbns", "slip0", "slips", "front")
Z_N = len(ZONE_COLUMNS)
Z_FIRST_CYL = ZONE_COLUMNS.index("first_cyl")
Z_LAST_CYL = ZONE_COLUMNS.index("last_cyl")
Z_BPT = ZONE_COLUMNS.index("sectors_per_track")
Z_FIRST_LBN = ZONE_COLUMNS.index("first_lbn")
Z_NLBN = ZONE_COLUMNS.index("lbns")
Z_TSKEW = ZONE_COLUMNS.index("track_skew")
Z_CSKEW = ZONE_COLUMNS.index("cylinder_skew")
Z_OFFSET = ZONE_COLUMNS.index("offset")
Z_DEAD = ZONE_COLUMNS.index("empty_front")
Z_RANGE = ZONE_COLUMNS.index("range_sectors")
Z_RANGE_LBNS = ZONE_COLUMNS.index("range_lbns")
Z_SLIP0 = ZONE_COLUMNS.index("slip0")
Z_NSLIP = ZONE_COLUMNS.index("slips")
Z_FRONT = ZONE_COLUMNS.index("front")
_ONE_RANGE = float(1 << 50)  # sectors (and LBNs) of the sparing range of a one-range zone
_BUCKET_ZONES = 4096  # about this many buckets of a power-of-two number of blocks


class Zone(NamedTuple):
    """One zone as ``zone_table`` takes it (sectors; a skew or offset in whole sectors).
    ``range_sectors`` and ``range_lbns`` are None when the zone is one sparing range; ``slips``
    count what the ``sparing`` parameter says (the zone table's comment)."""

    first_cyl: int
    last_cyl: int
    sectors_per_track: int
    lbns: int
    track_skew: int
    cylinder_skew: int
    offset: int
    empty_front: int
    range_sectors: int | None
    range_lbns: int | None
    front: int
    slips: Sequence[int]


def zone_table(zones: Sequence[Zone]) -> tuple[np.ndarray, dict[str, int]]:
    """The zone table for ``zones`` in LBN order (their slips and the bucket index after them),
    and the layout parameters it fixes (``zones``, ``blocks``, ``buckets_at``,
    ``bucket_shift``, ``buckets``) for ``pack``."""
    nz = len(zones)
    nslips = sum(len(z.slips) for z in zones)
    total = sum(z.lbns for z in zones)
    shift = max(0, int(np.ceil(np.log2(max(total, 1) / _BUCKET_ZONES))))
    nb = (total >> shift) + 1
    t = np.zeros(nz * Z_N + nslips + nb)
    first = 0
    slip_at = nz * Z_N
    for i, z in enumerate(zones):
        b = i * Z_N
        t[b + Z_FIRST_CYL] = z.first_cyl
        t[b + Z_LAST_CYL] = z.last_cyl
        t[b + Z_BPT] = z.sectors_per_track
        t[b + Z_FIRST_LBN] = first
        t[b + Z_NLBN] = z.lbns
        t[b + Z_TSKEW] = z.track_skew
        t[b + Z_CSKEW] = z.cylinder_skew
        t[b + Z_OFFSET] = z.offset
        t[b + Z_DEAD] = z.empty_front
        t[b + Z_RANGE] = _ONE_RANGE if z.range_sectors is None else z.range_sectors
        t[b + Z_RANGE_LBNS] = _ONE_RANGE if z.range_lbns is None else z.range_lbns
        t[b + Z_FRONT] = z.front
        t[b + Z_SLIP0] = slip_at
        t[b + Z_NSLIP] = len(z.slips)
        t[slip_at:slip_at + len(z.slips)] = z.slips
        slip_at += len(z.slips)
        first += z.lbns
    starts = t[Z_FIRST_LBN:nz * Z_N:Z_N]
    t[slip_at:] = np.searchsorted(starts, np.arange(nb) << shift, side="right") - 1
    return t, {"zones": nz, "blocks": first, "buckets_at": slip_at, "bucket_shift": shift,
               "buckets": nb}


class Drive(NamedTuple):
    """Everything the kernel knows of one drive, in the order its functions take them: the
    parameter vector (``pack``), the zone table (``zone_table``) and the seek curve (distances
    in cylinders, int64, ascending; times in ms, float64, which may go on with the seek time
    of every distance from 0 up: ``seek_times``)."""

    params: np.ndarray
    zones: np.ndarray
    seek_cyl: np.ndarray
    seek_ms: np.ndarray


# ---------------------------------------------------------------- the state of a drive

# Per-drive state vector (float64) fields: head position when the mechanism is next free, that
# time, the previous request (write?, its end), an LRU clock, the read-ahead in progress
# (segment, when and where its media walk began, its first block and length), the segment
# being destaged, the read-ahead's walk as far as it has been computed (below), then SEG_MAX
# segments of (first block, end block, last use).
#
# The read-ahead's walk is computed lazily: a read miss computes it only as far as the
# request's last block, and a later request only as far as its own arrival (or its last
# block). ``ra_end_known`` says whether the walk's end is known; until it is, ``free``, ``cyl``
# and ``head`` are stale while a read-ahead is in progress (``settle`` computes them). The walk
# so far is kept as its next run (``m_*``): the run's first block (walk offset), the time the
# run before it ended, when the head is on its track and when its first sector comes under the
# head, that wait, its length on the platter (not cut at the walk's end), its cylinder and
# head, and its physical place (zone base, zone sector, next slip). A run depends only on the
# geometry and on when the run before it ended, so resuming the walk there gives the very
# numbers the walk from its start gives.
STATE = ("cyl", "head", "free", "prev_write", "prev_end", "clock", "ra_seg", "ra_t", "ra_cyl",
         "ra_head", "ra_lbn", "ra_blocks", "destage_seg", "ra_end_known", "m_j", "m_tp", "m_ts",
         "m_tr", "m_wait", "m_geo", "m_c", "m_h", "m_zb", "m_q", "m_nxt", "if_free", "w_next")
S_CYL = STATE.index("cyl")
S_HEAD = STATE.index("head")
S_FREE = STATE.index("free")
S_PREV_WRITE = STATE.index("prev_write")
S_PREV_END = STATE.index("prev_end")
S_CLOCK = STATE.index("clock")
S_PF_SEG = STATE.index("ra_seg")
S_PF_T = STATE.index("ra_t")
S_PF_C0 = STATE.index("ra_cyl")
S_PF_H0 = STATE.index("ra_head")
S_PF_LBN = STATE.index("ra_lbn")
S_PF_N = STATE.index("ra_blocks")
S_DS_SEG = STATE.index("destage_seg")
S_RA_END = STATE.index("ra_end_known")
S_M_J = STATE.index("m_j")
S_M_TP = STATE.index("m_tp")
S_M_TS = STATE.index("m_ts")
S_M_TR = STATE.index("m_tr")
S_M_WAIT = STATE.index("m_wait")
S_M_GEO = STATE.index("m_geo")
S_M_C = STATE.index("m_c")
S_M_H = STATE.index("m_h")
S_M_ZB = STATE.index("m_zb")
S_M_Q = STATE.index("m_q")
S_M_NXT = STATE.index("m_nxt")
S_IF_FREE = STATE.index("if_free")  # when the last request's data phase left the interface
S_W_NEXT = STATE.index("w_next")  # the write ring's next slot
S_SEGS = len(STATE)  # then SEG_MAX segments of (first block, end block, last use)
# then a ring of SEG_MAX: when each of the last write-back writes is on the platter (hdd.py
# _write_timing: a write's data waits for a write segment once every one holds a write)
S_WRING = S_SEGS + 3 * SEG_MAX
S_N = S_WRING + SEG_MAX


def new_state(drives: int = 1) -> np.ndarray:
    """Drive states: heads at cylinder 0 head 0, caches empty, mechanisms idle."""
    st = np.zeros(drives * S_N)
    for d in range(drives):
        b = d * S_N
        st[b + S_PREV_END] = -1
        st[b + S_PF_SEG] = -1
        st[b + S_DS_SEG] = -1
        for k in range(SEG_MAX):
            st[b + S_SEGS + 3 * k] = -1
            st[b + S_SEGS + 3 * k + 1] = -1
    return st


def read_state(st: np.ndarray, d: int = 0) -> dict[str, float]:
    """Drive ``d``'s fields of ``STATE`` by name (its cache segments left out)."""
    return {name: float(st[d * S_N + i]) for i, name in enumerate(STATE)}
