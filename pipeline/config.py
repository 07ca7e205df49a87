"""Array configuration: TOML -> frozen dataclasses (issue 3, deliverable 1; first part).

An array is an optional host volume striped over LUNs, one or more RAID groups (each a LUN,
or ``count`` identical LUNs) of drives, and a controller. A group also says how its drives
schedule their queues (``scheduler`` fcfs, sstf or clook; ``queue_depth``: how many queued
operations the drive chooses among). Every size takes a unit (``512``
is bytes; ``"128KiB"``, ``"1MiB"``, ``"2048s"`` for sectors). Worked examples are in
``examples/arrays/``. Errors name the file and the key: ``array.toml: group[1].width: raid6
needs at least 4 drives, found 3``.

Drive models come from the built-in catalog (``pipeline/drives/catalog.toml``, listed by
``blocklab drives``: modern HDDs and SSDs described by their datasheets, and the four drives
DiskSim 4.0 validated against measurements), from a DiskSim parameter file
(``drive = { disksim = "path/to/drive.parv" }``, relative to the config file), or inline:
``drive = { base = "savvio_15k3_300g", cache_mb = 16 }`` changes figures of a catalog drive, and
``drive = { kind = "ssd", channels = 8, ... }`` gives every figure of a new one (the keys are
those of the catalog's entries of that kind).
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any

from blocklab.kernels.layout import raid as R
from blocklab.traces.errors import BlocklabError

from . import catalog as CAT

SECTOR = 512
LAYOUTS = {name: kind for kind, name in enumerate(R.KIND_NAMES)}
MIN_WIDTH = {"jbod": 1, "raid0": 1, "raid1": 2, "raid10": 2, "raid5": 3, "raid6": 4}


class ConfigError(BlocklabError):
    pass


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
    scheduler: str = "fcfs"  # the drives' queue scheduling: fcfs, sstf, clook
    queue_depth: int = 1  # how many queued operations a drive's scheduler looks at

    @property
    def kind(self) -> int:
        return LAYOUTS[self.layout]


@dataclasses.dataclass(frozen=True)
class VolumeConfig:
    """A host volume (LVM, md, XVM) striping over the LUNs in order."""

    stripe_unit_bytes: int
    luns: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class ControllerConfig:
    """The array controller (see kernels/engine.py for what each setting does)."""

    command_overhead_ns: int = 0
    cache_bytes: int = 0  # 0: no cache
    cache_block_bytes: int = 32 << 10  # cache line: 4, 8, 16 or 32 KiB
    write_back: bool = True
    read_ahead: bool = False
    read_ahead_bytes: int = 1 << 20  # prefetched at a time ahead of a sequential reader
    flush_start: float = 0.8  # dirty fraction of the cache that starts destaging
    flush_stop: float = 0.8  # dirty fraction at which it stops
    flush_age_s: float = 10.0  # dirty data older than this is destaged
    destage_depth: int = 0  # destage jobs at once (0: two per drive)
    bandwidth_bytes_per_s: float = 0.0  # internal cap (backplane/bus); 0 = none
    host_links: int = 1
    link_gbit_per_s: float = 0.0  # 0 = unlimited
    link_efficiency: float = 1.0


@dataclasses.dataclass(frozen=True)
class ArrayConfig:
    source: str
    groups: tuple[GroupConfig, ...]
    controller: ControllerConfig
    volume: VolumeConfig | None = None

    def luns(self) -> list[str]:
        """LUN names in order: a group with count > 1 gives NAME.0, NAME.1, ..."""
        out = []
        for g in self.groups:
            out += [g.name] if g.count == 1 else [f"{g.name}.{i}" for i in range(g.count)]
        return out


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
_UNITS = {"": 1, "b": 1, "s": SECTOR, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 10**6,
          "mb": 10**6, "mib": 1 << 20, "g": 10**9, "gb": 10**9, "gib": 1 << 30, "t": 10**12,
          "tb": 10**12, "tib": 1 << 40}


class _Ctx:
    def __init__(self, path: Path):
        self.path = path

    def fail(self, key: str, msg: str) -> ConfigError:
        return ConfigError(f"{self.path}: {key}: {msg}")

    def size(self, key: str, value: Any, sector_multiple: bool = True) -> int:
        if isinstance(value, bool):
            raise self.fail(key, f"expected a size, found {value!r}")
        if isinstance(value, int):
            n = value
        elif isinstance(value, str) and (m := _SIZE.match(value)):
            unit = m.group(2).lower()
            if unit not in _UNITS:
                raise self.fail(key, f"unknown size unit {m.group(2)!r} (use B, s, KiB, MiB, ...)")
            n = int(float(m.group(1)) * _UNITS[unit])
        else:
            raise self.fail(key, f"expected a size such as 4096 or \"128KiB\", found {value!r}")
        if n <= 0:
            raise self.fail(key, f"must be positive, found {n}")
        if sector_multiple and n % SECTOR:
            raise self.fail(key, f"{n} bytes is not a multiple of the {SECTOR}-byte sector")
        return n

    def integer(self, key: str, value: Any, low: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected a whole number, found {value!r}")
        if value < low:
            raise self.fail(key, f"must be at least {low}, found {value}")
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


def load_array(path: str | Path) -> ArrayConfig:
    """Parse and check an array configuration file."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML ({e})") from None
    return parse_array(data, p)


def parse_array(data: dict[str, Any], path: Path) -> ArrayConfig:
    c = _Ctx(path)
    c.keys("", data, {"group", "volume", "controller"})
    raw_groups = data.get("group")
    if not raw_groups:
        raise c.fail("group", "at least one [[group]] is needed")
    if not isinstance(raw_groups, list):
        raise c.fail("group", "write groups as [[group]] tables")
    groups = []
    for i, g in enumerate(raw_groups):
        k = f"group[{i}]"
        c.keys(k, g, {"name", "layout", "width", "stripe_unit", "count", "hot_spares", "drive",
                      "scheduler", "queue_depth"})
        sched = g.get("scheduler", "fcfs")
        if sched not in ("fcfs", "sstf", "clook"):
            raise c.fail(f"{k}.scheduler", f"expected fcfs, sstf or clook, found {sched!r}")
        layout = g.get("layout")
        if layout not in LAYOUTS:
            raise c.fail(f"{k}.layout", f"unknown layout {layout!r} (known: {', '.join(LAYOUTS)})")
        if "width" not in g:
            raise c.fail(f"{k}.width", "missing: how many drives the group has")
        width = c.integer(f"{k}.width", g["width"], 1)
        if width < MIN_WIDTH[layout]:
            raise c.fail(f"{k}.width",
                         f"{layout} needs at least {MIN_WIDTH[layout]} drives, found {width}")
        if layout == "raid10" and width % 2:
            raise c.fail(f"{k}.width", f"raid10 needs an even number of drives, found {width}")
        unit = c.size(f"{k}.stripe_unit", g.get("stripe_unit", "64KiB"))
        if "drive" not in g:
            raise c.fail(f"{k}.drive", "missing drive model (a catalog name or {disksim = ...})")
        groups.append(GroupConfig(
            name=str(g.get("name", f"g{i}")),
            layout=layout,
            width=width,
            stripe_unit_bytes=unit,
            count=c.integer(f"{k}.count", g.get("count", 1), 1),
            hot_spares=c.integer(f"{k}.hot_spares", g.get("hot_spares", 0), 0),
            drive=_drive(c, f"{k}.drive", g["drive"]),
            scheduler=sched,
            queue_depth=c.integer(f"{k}.queue_depth", g.get("queue_depth", 1), 1),
        ))
    names = [g.name for g in groups]
    if len(set(names)) != len(names):
        raise c.fail("group", f"group names must differ: {names}")
    ctl = _controller(c, data.get("controller", {}))
    volume = None
    if "volume" in data:
        v = data["volume"]
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
    return ArrayConfig(str(path), tuple(groups), ctl, volume)


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
    c.keys(key, value, allowed | {"base", "kind", "fresh"})
    if base is None:
        missing = sorted(allowed - set(value) - {"firmware"})
        if missing:
            raise c.fail(key, f"an inline {kind} needs {', '.join(missing)}")
    over = []
    for k, v in sorted(value.items()):
        if k in ("base", "kind"):
            continue
        if k in ("write_cache", "fresh"):
            if not isinstance(v, bool):
                raise c.fail(f"{key}.{k}", f"expected true or false, found {v!r}")
        elif k == "firmware":
            if v not in CAT.catalog()[2]:
                raise c.fail(f"{key}.{k}", f"unknown firmware timing set {v!r} "
                             f"(known: {', '.join(CAT.catalog()[2])})")
        else:
            c.number(f"{key}.{k}", v, 0.0)
        over.append((k, v))
    return DriveRef(catalog=base, kind=kind if base is None else None, overrides=tuple(over))


def _controller(c: _Ctx, t: Any) -> ControllerConfig:
    if not isinstance(t, dict):
        raise c.fail("controller", "expected a [controller] table")
    c.keys("controller", t, {"command_overhead_us", "cache", "cache_block", "write_policy",
                             "read_ahead", "read_ahead_size", "flush_start", "flush_stop",
                             "flush_age_s", "destage_depth", "bandwidth_mb_s", "host_links"})
    policy = t.get("write_policy", "write-back")
    if policy not in ("write-back", "write-through"):
        raise c.fail("controller.write_policy",
                     f"expected write-back or write-through, found {policy!r}")
    links = t.get("host_links", {})
    if not isinstance(links, dict):
        raise c.fail("controller.host_links", "expected a table {count, gbit_per_s, efficiency}")
    c.keys("controller.host_links", links, {"count", "gbit_per_s", "efficiency"})
    eff = c.number("controller.host_links.efficiency", links.get("efficiency", 1.0))
    if eff > 1:
        raise c.fail("controller.host_links.efficiency", f"must be at most 1, found {eff}")
    ra = t.get("read_ahead", False)
    if not isinstance(ra, bool):
        raise c.fail("controller.read_ahead", f"expected true or false, found {ra!r}")
    block = c.size("controller.cache_block", t.get("cache_block", "32KiB"))
    if block not in (4 << 10, 8 << 10, 16 << 10, 32 << 10):
        raise c.fail("controller.cache_block", f"expected 4, 8, 16 or 32 KiB, found {block} bytes")
    flush = {}
    for k in ("flush_start", "flush_stop"):
        flush[k] = c.number(f"controller.{k}", t.get(k, 0.8))
        if flush[k] > 1:
            raise c.fail(f"controller.{k}", f"a fraction of the cache, at most 1, found {flush[k]}")
    if flush["flush_stop"] > flush["flush_start"]:
        raise c.fail("controller.flush_stop", f"must not exceed flush_start "
                     f"({flush['flush_start']}), found {flush['flush_stop']}")
    return ControllerConfig(
        command_overhead_ns=int(c.number("controller.command_overhead_us",
                                         t.get("command_overhead_us", 0)) * 1000),
        cache_bytes=c.size("controller.cache", t["cache"], False) if "cache" in t else 0,
        cache_block_bytes=block,
        write_back=policy == "write-back",
        read_ahead=ra,
        read_ahead_bytes=c.size("controller.read_ahead_size", t.get("read_ahead_size", "1MiB")),
        flush_start=flush["flush_start"],
        flush_stop=flush["flush_stop"],
        flush_age_s=c.number("controller.flush_age_s", t.get("flush_age_s", 10.0)),
        destage_depth=c.integer("controller.destage_depth", t.get("destage_depth", 0)),
        bandwidth_bytes_per_s=c.number("controller.bandwidth_mb_s",
                                       t.get("bandwidth_mb_s", 0)) * 1e6,
        host_links=c.integer("controller.host_links.count", links.get("count", 1), 1),
        link_gbit_per_s=c.number("controller.host_links.gbit_per_s",
                                 links.get("gbit_per_s", 0)),
        link_efficiency=eff,
    )
