"""Array configuration: TOML -> frozen dataclasses (issue 3, deliverable 1; first part).

An array is an optional host volume striped over LUNs, one or more RAID groups (each a LUN,
or ``count`` identical LUNs) of drives, and a controller. A group also says how its drives
schedule their queues (``scheduler`` fcfs, sstf, clook or sptf; ``queue_depth``: how many queued
operations the drive chooses among; ``max_wait_ms``: queue aging, an operation that has
waited that long goes first, 500 ms by default). Every size takes a unit (``512``
is bytes; ``"128KiB"``, ``"1MiB"``, ``"2048s"`` for sectors). Worked examples are in
``examples/arrays/``. Errors name the file and the key: ``array.toml: group[1].width: raid6
needs at least 4 drives, found 3``.

Drive models come from the built-in catalog (``pipeline/model/drives/catalog.toml``, listed by
``blocklab drives``: modern HDDs and SSDs described by their datasheets, and the four drives
DiskSim 4.0 validated against measurements), from a DiskSim parameter file
(``drive = { disksim = "path/to/drive.parv" }``, relative to the config file), or inline:
``drive = { base = "savvio_15k3_300g", cache_mb = 16 }`` changes figures of a catalog drive, and
``drive = { kind = "ssd", channels = 8, ... }`` gives every figure of a new one (the keys are
those of the catalog's entries of that kind; an SSD's ``write_mb_s``, the controller's
sustained write rate, may be left out: no limit beyond the link and the flash).
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeGuard

from blocklab.kernels.engine import Settings
from blocklab.kernels.layout import raid as R
from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import SECTOR_BYTES
from blocklab.traces.units import parse_bytes

from . import catalog as CAT

SECTOR = SECTOR_BYTES  # traces/schema.py
_ENGINE = Settings()  # the engine's defaults
RAID_LAYOUTS = {name: kind for kind, name in enumerate(R.KIND_NAMES)}
#: ddp: a dynamic disk pool (declustered RAID-6 8+2); pool: a storage pool of private RAID
#: groups whose LUNs are carved in slices.
LAYOUTS = {**RAID_LAYOUTS, "ddp": R.KIND_RAID6, "pool": -1}
MIN_WIDTH = {"jbod": 1, "raid0": 1, "raid1": 2, "raid10": 2, "raid5": 3, "raid6": 4, "ddp": 11,
             "pool": 1}
DDP_WIDTH = 10  # a D-stripe: RAID-6 8+2
#: Rebuild priority -> the share of a busy drive's operations rebuild work gets. The shares make
#: a rebuild under load take 2, 3.5, 6 and 8 times as long as at "highest", the ratios NetApp
#: and IBM publish for their priority levels (SANtricity / DS "modification priority" table).
LINK_PROTOCOLS = ("bytes", "aoe", "iscsi")
#: The data an AoE frame carries at most, whatever the MTU: the Linux aoe initiator (driver
#: v47, drivers/block/aoe/aoecmd.c aoecmd_ata_rw: ``if (bcnt > buf->bv_resid) bcnt =
#: buf->bv_resid``) never lets a frame span a bio_vec, and a bio_vec of that kernel holds one
#: page (4 KiB on x86), so at MTU 9000 a frame carries 8 sectors, not the 17 that would fit.
#: 4200 is the smallest MTU whose frame holds a whole page (Coraid recommends MTU 4200 for the
#: SR1520, study footnote 1).
AOE_FRAME_MAX = 4096
PRIORITIES = {"lowest": 1 / 8, "low": 1 / 6, "medium": 1 / 3.5, "high": 1 / 2, "highest": 1.0}


class ConfigError(BlocklabError):
    pass


#: Drives in one array, at most: 10,000 replay in 3.4 s and 320 MB (RAID-5 groups; a DDP pool
#: of 2,000, 470 MB), past the largest arrays sold (a DDP pool holds up to a few hundred
#: drives); a million took 25 s and 2.2 GB before running out of memory, and a width of
#: 100,000 asked for 1.3 TB (a traceback either way).
MAX_DRIVES = 10_000
_MAX_WHY = " (drives in one array)"


@dataclasses.dataclass(frozen=True)
class DriveRef:
    """Where a group's drive model comes from: a catalog entry (with figures replaced by
    ``overrides``), an inline drive (``kind`` and every figure in ``overrides``) or a DiskSim
    parameter file."""

    catalog: str | None = None
    disksim: str | None = None  # path of a .parv or .diskspecs
    kind: str | None = None  # inline drive without a base: "hdd" or "ssd"
    overrides: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        if self.disksim:
            return Path(self.disksim).name
        name = self.catalog or f"inline {self.kind}"
        return name + ("" if not self.overrides else " (" + ", ".join(
            f"{k}={v}" for k, v in self.overrides) + ")")


def catalog_path(name: str) -> Path:
    """The DiskSim parameter file of a DiskSim catalog drive."""
    return CAT.disksim_path(CAT.catalog()[0][name])


@dataclasses.dataclass(frozen=True)
class GroupConfig:
    name: str
    layout: str
    width: int
    stripe_unit_bytes: int
    count: int
    hot_spares: int
    drive: DriveRef
    scheduler: str = "fcfs"  # the drives' queue scheduling: fcfs, sstf, clook, sptf
    queue_depth: int = 1  # how many queued operations a drive's scheduler looks at
    # queue aging: an operation that has waited this long is served next, whatever the
    # scheduler prefers (0: never). The default is the read deadline of Linux's own deadline
    # elevator (block/mq-deadline.c, read_expire = HZ / 2); drive firmware's is not published.
    max_wait_ms: float = 500.0
    # ddp: preservation capacity (drives' worth of reserved space) and the D-piece size
    preservation: int = 2
    piece_bytes: int = 512 << 20
    # pool: the private groups' layout and width, and the slice LUNs are carved in
    raid: str = "raid5"
    group_width: int = 5
    slice_bytes: int = 1 << 30
    # ddp and pool: the share of the capacity the group's ``count`` LUNs take
    fill: float = 1.0

    @property
    def kind(self) -> int:
        """raid.KIND_* of a group's stripes (a storage pool: of its private groups)."""
        return RAID_LAYOUTS[self.raid] if self.layout == "pool" else LAYOUTS[self.layout]

    @property
    def drives(self) -> int:
        """Drives the group occupies, spares included."""
        return (self.width if self.layout in ("ddp", "pool") else self.count * self.width) + \
            self.hot_spares


@dataclasses.dataclass(frozen=True)
class VolumeConfig:
    """A host volume (LVM, md, XVM) striping over the LUNs in order."""

    stripe_unit_bytes: int
    luns: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class ControllerConfig:
    """The array controller (kernels/engine/__init__.py says what each setting does; settings_for
    converts it to the engine's Settings)."""

    # the settings the engine also has take its defaults (kernels/engine/door.py Settings)
    command_overhead_ns: int = _ENGINE.ctrl_ns
    cache_bytes: int = 0  # 0: no cache
    cache_block_bytes: int = _ENGINE.line_sectors * SECTOR  # cache line: 4, 8, 16 or 32 KiB
    write_back: bool = _ENGINE.write_back
    read_ahead: bool = False
    read_ahead_bytes: int = 1 << 20  # prefetched at a time ahead of a sequential reader
    flush_start: float = _ENGINE.flush_start  # dirty fraction of the cache that starts destaging
    flush_stop: float = _ENGINE.flush_stop  # dirty fraction at which it stops
    flush_age_s: float = _ENGINE.flush_age_ns / 1e9  # dirty data older than this is destaged
    destage_depth: int = _ENGINE.destage_depth  # destage jobs at once (0: two per drive)
    bandwidth_bytes_per_s: float = 0.0  # internal cap (backplane/bus); 0 = none
    host_links: int = 1
    link_gbit_per_s: float = 0.0  # 0 = unlimited
    link_efficiency: float = 1.0
    # what the links carry: "bytes" (a payload efficiency, link_efficiency) or a framed
    # protocol, "aoe" or "iscsi", whose payload per Ethernet frame follows from the MTU
    link_protocol: str = "bytes"
    link_mtu: int = 1500  # Ethernet MTU (bytes), for a framed protocol
    # controller time per frame (receive or send: interrupt, header, buffer, command), the
    # cost that bounds a software target at small MTUs; 0 = none
    link_frame_ns: int = 0

    def free_cache_note(self) -> str | None:
        """What to tell a user whose cache costs nothing: with a controller cache and no
        command overhead, internal bus or host link, a cache hit, and a write-back write the
        cache takes, complete in 0 ns, which no real array gives (measured: every write of an
        Orion trace on examples/arrays/nearline-raid6-inline.toml, 1 MiB ones too). These are
        the engine's defaults, kept: an array file says what its controller is."""
        if self.cache_bytes <= 0 or self.command_overhead_ns > 0 \
                or self.bandwidth_bytes_per_s > 0 or self.link_payload_bytes_per_s() > 0:
            return None
        return ("the controller has a cache but no command_overhead_us, bandwidth_mb_s or "
                "host_links: a cache hit, and a write the cache takes, complete in 0 ns; give "
                "them in [controller] for latencies a real array would show (docs/arrays.md)")

    def link_payload_bytes_per_s(self) -> float:
        """What the host links carry of data per second, all links together: the wire rate
        less the protocol's headers per frame, and no more than the controller's frame
        processing allows (0: unlimited).

        AoE (ATA over Ethernet, Coraid's AoE specification r11, and the Linux aoe driver's
        drivers/block/aoe/aoecmd.c): one ATA command per frame, carrying whole 512-byte
        sectors after a 24-byte Ethernet+AoE header and a 12-byte ATA header: (MTU - 36) // 512
        sectors, and no more than one 4 KiB page (``AOE_FRAME_MAX``): 2 at MTU 1500, 8 at 4200
        and above. iSCSI (RFC 7143) over TCP/IPv4: MTU
        less 20 (IP), 20 (TCP) and 12 (the timestamp option Linux sends by default) of payload
        per frame, and a 48-byte basic header segment per 8 KiB PDU (the default
        MaxRecvDataSegmentLength). Every frame also takes 38 bytes of the wire beyond the MTU:
        14 Ethernet header, 4 FCS, 8 preamble and start delimiter, 12 inter-frame gap (IEEE
        802.3).
        """
        if self.link_gbit_per_s <= 0:
            return 0.0
        wire = self.host_links * self.link_gbit_per_s * 1e9 / 8
        if self.link_protocol == "bytes":
            return wire * self.link_efficiency
        payload = float(self.link_payload_per_frame())
        if self.link_protocol == "aoe":
            on_wire = payload + 36 + 4 + 8 + 12  # header + ATA header + FCS, preamble, gap
        else:
            on_wire = self.link_mtu + 38.0
            payload *= 8192 / (8192 + 48)
        rate = wire * payload / on_wire
        if self.link_frame_ns > 0:  # one controller processes every link's frames
            rate = min(rate, payload / (self.link_frame_ns * 1e-9))
        return rate

    def link_payload_per_frame(self) -> int:
        """Data bytes an Ethernet frame carries under the link protocol."""
        if self.link_protocol == "aoe":
            return min((self.link_mtu - 36) // SECTOR * SECTOR, AOE_FRAME_MAX)
        return self.link_mtu - 52


@dataclasses.dataclass(frozen=True)
class Failure:
    drive: int  # array drive number (meta.json drives)
    at_s: float


@dataclasses.dataclass(frozen=True)
class Replacement:
    drive: int  # a failed drive of a ddp pool, replaced by a new one
    at_s: float


@dataclasses.dataclass(frozen=True)
class Init:
    group: str
    at_s: float


@dataclasses.dataclass(frozen=True)
class RebuildPolicy:
    priority: str = "high"
    rate_mb_s: float = 0.0  # cap (0: none)
    start_delay_s: float = 0.0
    unit_bytes: int = 1 << 20  # rebuilt per unit of work (rounded to whole stripe units)
    depth: int = 0  # units in flight (0: 4 for a RAID group, one per drive for a pool)

    @property
    def share(self) -> float:
        return PRIORITIES[self.priority]


@dataclasses.dataclass(frozen=True)
class ArrayConfig:
    source: str
    groups: tuple[GroupConfig, ...]
    controller: ControllerConfig
    volume: VolumeConfig | None = None
    failures: tuple[Failure, ...] = ()
    rebuild: RebuildPolicy = RebuildPolicy()
    inits: tuple[Init, ...] = ()
    replacements: tuple[Replacement, ...] = ()

    @property
    def drives(self) -> int:
        return sum(g.drives for g in self.groups)

    def first_lun_note(self) -> str | None:
        """What to tell a user whose array has several LUNs and no [volume]: the host
        addresses the first alone and the others get no host I/O (a docs review found this
        said nowhere; it is what the array model does: pipeline/model/array.py)."""
        luns = self.luns()
        if self.volume is not None or len(luns) < 2:
            return None
        more = f", {luns[1]}" + (", ..." if len(luns) > 2 else "")
        return (f"the array has {len(luns)} LUNs ({luns[0]}{more}) and no [volume]: the host "
                f"addresses {luns[0]} alone and the others get no host I/O; a [volume] "
                "stripes the host over them (docs/arrays.md)")

    def luns(self) -> list[str]:
        """LUN names in order: a group with count > 1 gives NAME.0, NAME.1, ... (a RAID group
        is ``count`` identical groups of one LUN each; a pool carves ``count`` LUNs)."""
        out = []
        for g in self.groups:
            out += [g.name] if g.count == 1 else [f"{g.name}.{i}" for i in range(g.count)]
        return out


def settings_for(cfg: ArrayConfig, **run: Any) -> Settings:
    """The engine's settings for an array configuration's controller: the one conversion from
    configuration to the engine (times to ns, rates to picoseconds per byte, sizes to
    sectors); ``run`` sets the run's own fields (closed, record, drain, interval_ns, ...)."""
    c = cfg.controller
    links = c.link_payload_bytes_per_s()
    return Settings(
        ctrl_ns=c.command_overhead_ns,
        path_ps=int(round(1e12 / links)) if links > 0 else 0,
        bus_ps=int(round(1e12 / c.bandwidth_bytes_per_s)) if c.bandwidth_bytes_per_s else 0,
        cache_lines=c.cache_bytes // c.cache_block_bytes,
        line_sectors=c.cache_block_bytes // SECTOR, write_back=c.write_back,
        ra_sectors=c.read_ahead_bytes // SECTOR if c.read_ahead else 0,
        flush_start=c.flush_start, flush_stop=c.flush_stop,
        flush_age_ns=int(c.flush_age_s * 1e9), destage_depth=c.destage_depth, **run)


class _Ctx:
    def __init__(self, path: Path):
        self.path = path

    def fail(self, key: str, msg: str) -> ConfigError:
        return ConfigError(f"{self.path}: {key}: {msg}")

    def size(self, key: str, value: Any, sector_multiple: bool = True, high: int | None = None,
             what: str = "") -> int:
        """Bytes of a size key; past ``high`` (when given) refused as "at most ``what``"."""
        if isinstance(value, bool):
            raise self.fail(key, f"expected a size, found {value!r}")
        if isinstance(value, int):
            n = value
        elif isinstance(value, str):
            try:  # traces/units.py: the grammar every command's size options take
                n = parse_bytes(value)
            except ValueError as e:
                raise self.fail(key, f"{e}, found {value!r}") from None
        else:
            raise self.fail(key, f"expected a size such as 4096 or \"128KiB\", found {value!r}")
        if n <= 0:
            raise self.fail(key, f"must be positive, found {n}")
        if sector_multiple and n % SECTOR:
            raise self.fail(key, f"{n} bytes is not a multiple of the {SECTOR}-byte sector")
        if high is not None and n > high:
            raise self.fail(key, f"at most {what}, found {n:,} bytes")
        return n

    def integer(self, key: str, value: Any, low: int = 0, high: int | None = None,
                why: str = "") -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected a whole number, found {value!r}")
        if value < low:
            raise self.fail(key, f"must be at least {low}, found {value}")
        if high is not None and value > high:
            raise self.fail(key, f"must be at most {high:,}{why}, found {value:,}")
        return value

    def number(self, key: str, value: Any, low: float = 0.0) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"expected a number, found {value!r}")
        if value < low:
            raise self.fail(key, f"must be at least {low}, found {value}")
        return float(value)

    def keys(self, key: str, table: dict[str, Any], allowed: set[str]) -> None:
        for k in table:
            if k not in allowed:
                raise self.fail(f"{key}.{k}" if key else k,
                                f"unknown key (known: {', '.join(sorted(allowed))})")


def known_name(value: Any, names: Iterable[str]) -> TypeGuard[str]:
    """Whether a file's ``value`` is one of ``names``. Only a string is: a list or a table
    where a name belongs (``layout = ["raid5"]``) is refused as an unknown name, where a
    lookup in a dict of names raised ``TypeError: unhashable type: 'list'``."""
    return isinstance(value, str) and value in names


def read_toml(path: Path, what: str = "file",
              error: type[BlocklabError] = BlocklabError) -> dict[str, Any]:
    """The tables of a TOML file; a missing file, bad TOML or bytes that are not UTF-8 raise
    ``error`` with one line naming the file (``what`` names the kind of file missing)."""
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise error(f"{path}: no such {what}") from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{path}: not valid TOML ({e})") from None
    except UnicodeDecodeError as e:
        raise error(f"{path}: byte {e.start}: not UTF-8 text") from None


def load_array(path: str | Path) -> ArrayConfig:
    """Parse and check an array configuration file."""
    p = Path(path)
    return parse_array(read_toml(p, error=ConfigError), p)


def parse_array(data: dict[str, Any], path: Path) -> ArrayConfig:
    c = _Ctx(path)
    c.keys("", data, {"group", "volume", "controller", "failure", "rebuild", "init", "replace"})
    raw_groups = data.get("group")
    if not raw_groups:
        raise c.fail("group", "at least one [[group]] is needed")
    if not isinstance(raw_groups, list):
        raise c.fail("group", "write groups as [[group]] tables")
    groups = []
    for i, g in enumerate(raw_groups):
        k = f"group[{i}]"
        if not isinstance(g, dict):
            raise c.fail(k, f"expected a [[group]] table, found {g!r}")
        c.keys(k, g, {"name", "layout", "width", "stripe_unit", "count", "hot_spares", "drive",
                      "scheduler", "queue_depth", "max_wait_ms", "preservation", "piece", "raid",
                      "group_width", "slice", "fill"})
        sched = g.get("scheduler", "fcfs")
        if not known_name(sched, ("fcfs", "sstf", "clook", "sptf")):
            raise c.fail(f"{k}.scheduler",
                         f"expected fcfs, sstf, clook or sptf, found {sched!r}")
        layout = g.get("layout")
        if not known_name(layout, LAYOUTS):
            raise c.fail(f"{k}.layout", f"unknown layout {layout!r} (known: {', '.join(LAYOUTS)})")
        if "width" not in g:
            raise c.fail(f"{k}.width", "missing: how many drives the group has")
        width = c.integer(f"{k}.width", g["width"], 1, MAX_DRIVES, _MAX_WHY)
        if width < MIN_WIDTH[layout]:
            raise c.fail(f"{k}.width",
                         f"{layout} needs at least {MIN_WIDTH[layout]} drives, found {width}")
        if layout == "raid10" and width % 2:
            raise c.fail(f"{k}.width", f"raid10 needs an even number of drives, found {width}")
        unit = c.size(f"{k}.stripe_unit", g.get("stripe_unit", "64KiB"))
        if "drive" not in g:
            raise c.fail(f"{k}.drive", "missing drive model (a catalog name or {disksim = ...})")
        extra = _pool_keys(c, k, g, layout, width, unit)
        drive = _sptf_drive(c, k, sched, _drive(c, f"{k}.drive", g["drive"]))
        if sched != "fcfs" and "queue_depth" not in g:
            # A scheduler orders the first queue_depth operations of a drive's queue, and the
            # default depth, 1, leaves it nothing to order: it would be fcfs without a word.
            # Asked for rather than defaulted (a tagged-queuing disk's depth is its own: 32
            # for SATA NCQ, often 64 or more for SAS); an explicit queue_depth = 1 is taken
            # as written (a sweep may vary it down to 1, which is fcfs).
            raise c.fail(f"{k}.queue_depth",
                         f"missing: scheduler {sched} orders the first queue_depth operations "
                         "waiting at a drive, and the default, 1, is fcfs; give how many it "
                         "looks at (a tagged-queuing or NCQ disk: its queue depth, such as 32)")
        groups.append(GroupConfig(
            name=str(g.get("name", f"g{i}")),
            layout=layout,
            width=width,
            stripe_unit_bytes=unit,
            count=c.integer(f"{k}.count", g.get("count", 1), 1, MAX_DRIVES, _MAX_WHY),
            hot_spares=c.integer(f"{k}.hot_spares", g.get("hot_spares", 0), 0),
            drive=drive,
            scheduler=sched,
            queue_depth=c.integer(f"{k}.queue_depth", g.get("queue_depth", 1), 1),
            max_wait_ms=c.number(f"{k}.max_wait_ms", g.get("max_wait_ms", 500.0)),
            **extra,
        ))
    names = [g.name for g in groups]
    if len(set(names)) != len(names):
        raise c.fail("group", f"group names must differ: {names}")
    if (drives := sum(g.drives for g in groups)) > MAX_DRIVES:
        raise c.fail("group", f"{drives:,} drives in all: an array may have at most "
                     f"{MAX_DRIVES:,}")
    ctl = _controller(c, data.get("controller", {}))
    volume = None
    if "volume" in data:
        v = data["volume"]
        if not isinstance(v, dict):
            raise c.fail("volume", f"expected a [volume] table, found {v!r}")
        c.keys("volume", v, {"stripe_unit", "luns"})
        all_luns = ArrayConfig(str(path), tuple(groups), ctl).luns()
        luns = v.get("luns", all_luns)
        if not isinstance(luns, list) or not luns:
            raise c.fail("volume.luns", "expected a list of LUN names")
        for name in luns:
            if name not in all_luns:
                raise c.fail("volume.luns", f"no LUN {name!r} (LUNs: {', '.join(all_luns)})")
        volume = VolumeConfig(c.size("volume.stripe_unit", v.get("stripe_unit", "1MiB")),
                              tuple(luns))
    drives = sum(g.drives for g in groups)
    failures = tuple(Failure(*_drive_at(c, f"failure[{i}]", f, drives))
                     for i, f in enumerate(_tables(c, data, "failure")))
    replacements = tuple(Replacement(*_drive_at(c, f"replace[{i}]", f, drives))
                         for i, f in enumerate(_tables(c, data, "replace")))
    inits = []
    for i, t in enumerate(_tables(c, data, "init")):
        c.keys(f"init[{i}]", t, {"group", "at_s"})
        if t.get("group") not in names:
            raise c.fail(f"init[{i}].group", f"no group {t.get('group')!r} (groups: "
                         f"{', '.join(names)})")
        inits.append(Init(str(t["group"]), c.number(f"init[{i}].at_s", t.get("at_s", 0))))
    return ArrayConfig(str(path), tuple(groups), ctl, volume, failures,
                       _rebuild(c, data.get("rebuild", {})), tuple(inits), replacements)


def _tables(c: _Ctx, data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    t = data.get(key, [])
    if not isinstance(t, list) or not all(isinstance(x, dict) for x in t):
        raise c.fail(key, f"write them as [[{key}]] tables")
    return t


def _drive_at(c: _Ctx, key: str, t: dict[str, Any], drives: int) -> tuple[int, float]:
    c.keys(key, t, {"drive", "at_s"})
    if "drive" not in t:
        raise c.fail(f"{key}.drive", "missing: the array drive number (see meta.json drives)")
    d = c.integer(f"{key}.drive", t["drive"], 0)
    if d >= drives:
        raise c.fail(f"{key}.drive", f"no drive {d}: the array has drives 0 to {drives - 1}")
    return d, c.number(f"{key}.at_s", t.get("at_s", 0.0))


def _rebuild(c: _Ctx, t: Any) -> RebuildPolicy:
    if not isinstance(t, dict):
        raise c.fail("rebuild", "expected a [rebuild] table")
    c.keys("rebuild", t, {"priority", "rate_mb_s", "start_delay_s", "unit", "depth"})
    d = RebuildPolicy()  # the defaults of the keys left out
    prio = t.get("priority", d.priority)
    if not known_name(prio, PRIORITIES):
        raise c.fail("rebuild.priority", f"expected one of {', '.join(PRIORITIES)}, "
                     f"found {prio!r}")
    depth = c.integer("rebuild.depth", t.get("depth", d.depth), 0)
    if depth > 32:
        raise c.fail("rebuild.depth", f"at most 32 units in flight per piece, found {depth}")
    # (at most MAX_UNIT_BYTES: a planning table of its operations is sized by it)
    unit = c.size("rebuild.unit", t.get("unit", d.unit_bytes), high=MAX_UNIT_BYTES,
                  what=f"{MAX_UNIT_BYTES >> 30} GiB per member a unit")
    return RebuildPolicy(priority=prio, rate_mb_s=c.number("rebuild.rate_mb_s",
                                                           t.get("rate_mb_s", d.rate_mb_s)),
                         start_delay_s=c.number("rebuild.start_delay_s",
                                                t.get("start_delay_s", d.start_delay_s)),
                         unit_bytes=unit, depth=depth)


def _pool_keys(c: _Ctx, k: str, g: dict[str, Any], layout: str, width: int,
               unit: int) -> dict[str, Any]:
    """The keys of the pool layouts (ddp, pool), checked."""
    extra: dict[str, Any] = {}
    own = {"ddp": {"preservation", "piece", "fill"}, "pool": {"raid", "group_width", "slice",
                                                             "fill"}}
    for key in ("preservation", "piece", "raid", "group_width", "slice", "fill"):
        if key in g and key not in own.get(layout, set()):
            raise c.fail(f"{k}.{key}", f"only for the "
                         f"{' and '.join(sorted(x for x in own if key in own[x]))} layout")
    if "fill" in g:
        fill = c.number(f"{k}.fill", g["fill"])
        if not 0 < fill <= 1:
            raise c.fail(f"{k}.fill", f"a share of the capacity, in (0, 1], found {fill}")
        extra["fill"] = fill
    if layout == "ddp":
        pres = c.integer(f"{k}.preservation", g.get("preservation", 2), 0)
        if width < DDP_WIDTH + pres:
            raise c.fail(f"{k}.width", f"a pool of {width} drives is smaller than its stripe "
                         f"width {DDP_WIDTH} plus its preservation capacity {pres}")
        piece = c.size(f"{k}.piece", g.get("piece", "512MiB"))
        if piece % unit:
            raise c.fail(f"{k}.piece", f"{piece} bytes is not a multiple of the stripe unit "
                         f"({unit} bytes)")
        extra.update(preservation=pres, piece_bytes=piece)
    elif layout == "pool":
        raid = g.get("raid", "raid5")
        if not known_name(raid, RAID_LAYOUTS):
            raise c.fail(f"{k}.raid", f"unknown layout {raid!r} for the private groups "
                         f"(known: {', '.join(RAID_LAYOUTS)})")
        gw = c.integer(f"{k}.group_width", g.get("group_width", 5), 1)
        if gw < MIN_WIDTH[raid]:
            raise c.fail(f"{k}.group_width", f"{raid} needs at least {MIN_WIDTH[raid]} drives, "
                         f"found {gw}")
        if width % gw and width % gw < MIN_WIDTH[raid]:
            raise c.fail(f"{k}.width", f"{width} drives in private {raid} groups of {gw} leave "
                         f"{width % gw}, too few for a last {raid} group")
        sl = c.size(f"{k}.slice", g.get("slice", "1GiB"))
        if sl % unit:
            raise c.fail(f"{k}.slice", f"{sl} bytes is not a multiple of the stripe unit "
                         f"({unit} bytes)")
        extra.update(raid=raid, group_width=gw, slice_bytes=sl)
    return extra


def _sptf_drive(c: _Ctx, key: str, sched: str, ref: DriveRef) -> DriveRef:
    """``ref``, refused under ``sptf`` unless it is a disk that orders its own queue: sptf is a
    drive's reordering by positioning time (the HDD model's), which needs its mechanism and
    command queuing (an SSD has no positioning time; a drive without queuing is offered one
    command at a time). A DiskSim parameter file's drive is a SCSI disk with tagged queuing."""
    if sched != "sptf" or ref.disksim is not None:
        return ref
    entries = CAT.catalog()[0]
    # (a reference without a catalog base is an inline drive, which has its kind)
    kind = ref.kind if ref.catalog is None else entries[ref.catalog].kind
    if kind == "ssd":
        raise c.fail(f"{key}.scheduler", "sptf orders a disk's queue by its positioning "
                     "time; this group's drives are SSDs (fcfs, sstf or clook)")
    queued = True  # the catalog's default (CAT.OPTIONAL_KEYS)
    if ref.catalog is not None:
        queued = bool(entries[ref.catalog].values().get("command_queueing", True))
    queued = bool(dict(ref.overrides).get("command_queueing", queued))
    if not queued:
        raise c.fail(f"{key}.scheduler", "sptf is the drive's own reordering, and this "
                     "group's drive has command_queueing = false: it sees one command at a time")
    return ref


def _drive(c: _Ctx, key: str, value: Any) -> DriveRef:
    entries = CAT.catalog()[0]
    if isinstance(value, str):
        if value.lower() not in entries:
            raise c.fail(key, f"unknown drive model {value!r} (catalog: {', '.join(entries)}; "
                         "see blocklab drives)")
        return DriveRef(catalog=value.lower())
    if not isinstance(value, dict):
        raise c.fail(key, f"expected a catalog name or a table, found {value!r}")
    if "disksim" in value:
        c.keys(key, value, {"disksim"})
        f = c.path.parent / str(value["disksim"])
        if not f.exists():
            raise c.fail(f"{key}.disksim", f"no such file {f}")
        return DriveRef(disksim=str(f))
    if "base" in value:
        base = str(value["base"]).lower()
        if base not in entries or entries[base].kind == "disksim":
            raise c.fail(f"{key}.base", f"unknown catalog drive {value['base']!r} (HDD and SSD "
                         "entries of blocklab drives)")
        kind = entries[base].kind
    else:
        kind = str(value.get("kind"))
        if kind not in ("hdd", "ssd"):
            raise c.fail(key, "an inline drive needs base = CATALOG NAME, kind = \"hdd\" or "
                         "\"ssd\", or disksim = \"FILE.parv\"")
        base = None
    allowed = set(CAT.HDD_KEYS if kind == "hdd" else CAT.SSD_KEYS)
    c.keys(key, value, allowed | set(CAT.OPTIONAL_KEYS[kind]) | {"base", "kind", "fresh"})
    if base is None:
        missing = sorted(allowed - set(value) - {"firmware"})
        if missing:
            raise c.fail(key, f"an inline {kind} needs {', '.join(missing)}")
    over = []
    for k, v in sorted(value.items()):
        if k in ("base", "kind"):
            continue
        if k in ("write_cache", "command_queueing", "fresh"):
            if not isinstance(v, bool):
                raise c.fail(f"{key}.{k}", f"expected true or false, found {v!r}")
        elif k == "firmware":
            if not known_name(v, CAT.catalog()[2]):
                raise c.fail(f"{key}.{k}", f"unknown firmware timing set {v!r} "
                             f"(known: {', '.join(CAT.catalog()[2])})")
        else:
            c.number(f"{key}.{k}", v, 0.0)
        over.append((k, v))
    return DriveRef(catalog=base, kind=kind if base is None else None, overrides=tuple(over))


#: The most controller cache lines a model keeps (kernels/cache.py: 72 bytes a line and a hash
#: table of two to four slots of 16 bytes): 4 Mi lines, 128 GiB of 32 KiB lines, about 0.4 GB
#: of tables. A size past it (`cache = "100PiB"`, which the one size grammar reads since
#: 2026-11-28) was a NumPy traceback when replay allocated the tables.
MAX_CACHE_LINES = 1 << 22
#: The largest rebuild unit and read-ahead (bytes): the engine sizes the planning table of one
#: event by them (door.py _plan_scratch), so `unit = "100PiB"` asked NumPy for 525 TiB. Real
#: ones are kilobytes to megabytes; 1 GiB is far past any.
MAX_UNIT_BYTES = 1 << 30

_CTRL = ControllerConfig()  # the defaults of the keys a [controller] table leaves out


def _controller(c: _Ctx, t: Any) -> ControllerConfig:
    if not isinstance(t, dict):
        raise c.fail("controller", "expected a [controller] table")
    c.keys("controller", t, {"command_overhead_us", "cache", "cache_block", "write_policy",
                             "read_ahead", "read_ahead_size", "flush_start", "flush_stop",
                             "flush_age_s", "destage_depth", "bandwidth_mb_s", "host_links"})
    policy = t.get("write_policy", "write-back")
    if not known_name(policy, ("write-back", "write-through")):
        raise c.fail("controller.write_policy",
                     f"expected write-back or write-through, found {policy!r}")
    links = t.get("host_links", {})
    if not isinstance(links, dict):
        raise c.fail("controller.host_links", "expected a table {count, gbit_per_s, efficiency}")
    c.keys("controller.host_links", links, {"count", "gbit_per_s", "efficiency", "protocol",
                                            "mtu", "frame_us"})
    eff = c.number("controller.host_links.efficiency", links.get("efficiency", 1.0))
    if eff > 1:
        raise c.fail("controller.host_links.efficiency", f"must be at most 1, found {eff}")
    proto = links.get("protocol", "bytes")
    if not known_name(proto, LINK_PROTOCOLS):
        raise c.fail("controller.host_links.protocol",
                     f"expected one of {', '.join(LINK_PROTOCOLS)}, found {proto!r}")
    if proto != "bytes" and "efficiency" in links:
        raise c.fail("controller.host_links.efficiency", f"a {proto} link's efficiency follows "
                     f"from its MTU; give mtu instead")
    mtu = c.integer("controller.host_links.mtu", links.get("mtu", 1500), 576)
    if mtu > 9216:  # the largest jumbo frame Ethernet switches carry
        raise c.fail("controller.host_links.mtu", f"at most 9216 bytes, found {mtu}")
    ra = t.get("read_ahead", False)
    if not isinstance(ra, bool):
        raise c.fail("controller.read_ahead", f"expected true or false, found {ra!r}")
    block = c.size("controller.cache_block", t.get("cache_block", _CTRL.cache_block_bytes))
    if block not in (4 << 10, 8 << 10, 16 << 10, 32 << 10):
        raise c.fail("controller.cache_block", f"expected 4, 8, 16 or 32 KiB, found {block} bytes")
    cache = c.size("controller.cache", t["cache"], False) if "cache" in t else 0
    if cache // block > MAX_CACHE_LINES:
        raise c.fail("controller.cache", f"at most {MAX_CACHE_LINES:,} lines of cache_block "
                     f"({MAX_CACHE_LINES * block >> 30:,} GiB of {block >> 10} KiB lines: the "
                     f"model keeps about 100 bytes a line), found {cache:,} bytes")
    flush = {}
    for k in ("flush_start", "flush_stop"):
        flush[k] = c.number(f"controller.{k}", t.get(k, getattr(_CTRL, k)))
        if flush[k] > 1:
            raise c.fail(f"controller.{k}", f"a fraction of the cache, at most 1, found {flush[k]}")
    if flush["flush_stop"] > flush["flush_start"]:
        raise c.fail("controller.flush_stop", f"must not exceed flush_start "
                     f"({flush['flush_start']}), found {flush['flush_stop']}")
    return ControllerConfig(
        command_overhead_ns=int(c.number("controller.command_overhead_us",
                                         t.get("command_overhead_us", 0)) * 1000),
        cache_bytes=cache,
        cache_block_bytes=block,
        write_back=policy == "write-back",
        read_ahead=ra,
        read_ahead_bytes=c.size("controller.read_ahead_size",
                                t.get("read_ahead_size", _CTRL.read_ahead_bytes),
                                high=MAX_UNIT_BYTES, what=f"{MAX_UNIT_BYTES >> 30} GiB"),
        flush_start=flush["flush_start"],
        flush_stop=flush["flush_stop"],
        flush_age_s=c.number("controller.flush_age_s", t.get("flush_age_s", _CTRL.flush_age_s)),
        destage_depth=c.integer("controller.destage_depth",
                                t.get("destage_depth", _CTRL.destage_depth)),
        bandwidth_bytes_per_s=c.number("controller.bandwidth_mb_s",
                                       t.get("bandwidth_mb_s", 0)) * 1e6,
        host_links=c.integer("controller.host_links.count", links.get("count", 1), 1),
        link_gbit_per_s=c.number("controller.host_links.gbit_per_s",
                                 links.get("gbit_per_s", 0)),
        link_efficiency=eff,
        link_protocol=proto,
        link_mtu=mtu,
        link_frame_ns=int(c.number("controller.host_links.frame_us",
                                   links.get("frame_us", 0)) * 1000),
    )
