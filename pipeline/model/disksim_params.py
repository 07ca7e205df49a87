"""Read DiskSim 4.0 parameter files (``.parv``, ``.diskspecs``, ``.model``, ``.seek``) so that
DiskSim's validated drives become blocklab drives (issue 3, deliverable 3).

DiskSim's parameter language (its ``libparam``) is a list of blocks ``TYPE NAME { key = value,
... }``; a value is a number, a word (identifier or file name), a nested block ``TYPE { ... }``,
a list ``[ v, v, ... ]`` or ``source FILE`` (the block that FILE defines). Keys are free text up
to the ``=`` ("Rotation speed (in rpms)"). ``#`` starts a comment. Top-level ``source FILE``,
``instantiate [ names ] as TYPE`` and ``topology`` items wire a simulated system together.

``read_drive`` follows a ``.parv`` (or a ``.diskspecs``) to the disk it instantiates and returns
its parameters as a :class:`DiskSimDrive`, including the transfer time per block of the bus
next to the disk (for the HP C2247A it is part of the measured service time).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path
from typing import Any

from blocklab.traces.errors import BlocklabError


class ParamError(BlocklabError):
    pass


@dataclasses.dataclass
class Block:
    type: str
    name: str | None
    params: dict[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        """A parameter by name, compared case- and blank-insensitively."""
        want = _norm(key)
        for k, v in self.params.items():
            if _norm(k) == want:
                return v
        return default

    def need(self, key: str, where: str) -> Any:
        v = self.get(key)
        if v is None:
            raise ParamError(f"{where}: {self.type} block has no '{key}'")
        return v


def _norm(key: str) -> str:
    return re.sub(r"\s+", " ", key.strip().lower())


class _Parser:
    def __init__(self, path: Path, opened: list[tuple[Path, str]] | None = None):
        self.path = path
        self.opened = opened if opened is not None else []
        self.text = _read_text(path, self.opened)
        self.i = 0

    def _line(self) -> int:
        return self.text.count("\n", 0, self.i) + 1

    def error(self, msg: str) -> ParamError:
        return ParamError(f"{self.path}:{self._line()}: {msg}")

    def ws(self) -> None:
        t = self.text
        while self.i < len(t):
            c = t[self.i]
            if c == "#":
                nl = t.find("\n", self.i)
                self.i = len(t) if nl < 0 else nl + 1
            elif c.isspace():
                self.i += 1
            else:
                return

    def peek(self) -> str:
        self.ws()
        return self.text[self.i] if self.i < len(self.text) else ""

    def word(self) -> str:
        self.ws()
        m = re.compile(r"[^\s,{}\[\]=#]+").match(self.text, self.i)
        if not m:
            raise self.error(f"expected a word, found {self.text[self.i:self.i + 20]!r}")
        self.i = m.end()
        return m.group(0)

    def expect(self, c: str) -> None:
        if self.peek() != c:
            raise self.error(f"expected {c!r}, found {self.text[self.i:self.i + 20]!r}")
        self.i += 1

    def body(self) -> dict[str, Any]:
        """``{ key = value, ... }`` (the opening brace already consumed)."""
        params: dict[str, Any] = {}
        while True:
            if self.peek() == "}":
                self.i += 1
                return params
            eq = self.text.find("=", self.i)
            if eq < 0:
                raise self.error("expected 'key = value'")
            key = self.text[self.i : eq]
            key = re.sub(r"#[^\n]*", "", key).strip()
            self.i = eq + 1
            params[key] = self.value()
            if self.peek() == ",":
                self.i += 1

    def value(self) -> Any:
        c = self.peek()
        if c == "[":
            self.i += 1
            items = []
            while self.peek() != "]":
                if not self.peek():
                    raise self.error("unterminated list")
                items.append(self.value())
                if self.peek() == ",":
                    self.i += 1
            self.i += 1
            return items
        w = self.word()
        if w == "source":
            return self.source(self.word())
        if self.peek() == "{":
            self.i += 1
            return Block(w, None, self.body())
        return _number(w)

    def source(self, name: str) -> Block:
        path = self.path.parent / name
        if not path.exists():
            raise self.error(f"sourced file {name} not found")
        blocks = _Parser(path, self.opened).top()
        if not blocks:
            raise ParamError(f"{path}: defines no block")
        return blocks[0]

    def top(self) -> list[Block]:
        out: list[Block] = []
        while self.peek():
            w = self.word()
            if w == "source":
                out.extend(_Parser(self.path.parent / self.word(), self.opened).top())
            elif w == "instantiate":
                self.expect("[")
                names = []
                while self.peek() != "]":
                    names.append(self.word())
                    if self.peek() == ",":
                        self.i += 1
                self.i += 1
                if self.word() != "as":
                    raise self.error("expected 'as' after instantiate [...]")
                out.append(Block("instantiate", self.word(), {"names": names}))
            elif w == "topology":
                out.append(Block("topology", None, {"tree": self.topology()}))
            else:
                name = None if self.peek() == "{" else self.word()
                self.expect("{")
                out.append(Block(w, name, self.body()))
        return out

    def topology(self) -> list[Any]:
        kind, name = self.word(), self.word()
        self.expect("[")
        children = []
        while self.peek() != "]":
            children.append(self.topology())
            if self.peek() == ",":
                self.i += 1
        self.i += 1
        return [kind, name, children]


def _number(w: str) -> Any:
    try:
        return int(w)
    except ValueError:
        pass
    try:
        return float(w)
    except ValueError:
        return w


def parse(path: str | Path, opened: list[tuple[Path, str]] | None = None) -> list[Block]:
    """All top-level blocks of a DiskSim parameter file (sourced files included); each file
    read is appended to ``opened`` with its text."""
    p = Path(path)
    if not p.exists():
        raise ParamError(f"{p}: no such file")
    return _Parser(p, opened).top()


def _read_text(path: Path, opened: list[tuple[Path, str]] | None = None) -> str:
    """A parameter file's text, as the parser reads it (bytes that are not UTF-8 become
    U+FFFD, which no parameter accepts: the parse names the line); appended to ``opened``
    with the file's absolute path (read_drive's cache)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if opened is not None:
        opened.append((path.absolute(), text))
    return text


def _unchanged(opened: tuple[tuple[Path, str], ...]) -> bool:
    """Whether every file holds the text it held when it was read (its content, not its
    time stamp, which a coarse file clock leaves equal across a quick rewrite)."""
    try:
        return all(_read_text(f) == text for f, text in opened)
    except OSError:
        return False


@dataclasses.dataclass
class Zone:
    first_cylinder: int
    last_cylinder: int
    blocks_per_track: int
    offset_of_first_block: float  # sectors
    track_skew: float  # sectors
    cylinder_skew: float  # sectors
    spares: int  # per sparing range (sectors; tracks with track sparing)
    slips: list[int]  # zone-relative physical sectors (tracks with track sparing)
    defects: list[int]  # pairs: defective sector, spare it is remapped to
    empty_front: int = 0  # sectors at the zone's front that hold no data


@dataclasses.dataclass
class DiskSimDrive:
    """A DiskSim drive's parameters, in DiskSim's units (ms, sectors, rpm)."""

    name: str
    source: str
    block_count: int
    surfaces: int
    cylinders: int
    rpm: float
    head_switch_ms: float
    single_cylinder_seek_ms: float
    full_strobe_seek_ms: float
    write_settle_ms: float
    seek_curve: list[tuple[int, float]]  # (cylinders, ms), measured ("extracted" seek type)
    seek_type: str  # "extracted" (curve file) or "hpl"/"hplplus10" (equation)
    hpl_seek: list[float]  # Ruemmler-Wilkes equation: boundary x, a, b (sqrt), c, d (linear), e
    first_ten_seeks_ms: list[float]  # hplplus10: measured seeks of 1..10 cylinders
    access_time_type: str
    mapping_scheme: int
    sparing_scheme: int
    range_size_for_sparing: int
    zones: list[Zone]
    overheads_ms: dict[str, float]  # "read hit after read", ... "write miss after write"
    bulk_sector_transfer_ms: float
    per_request_overhead_ms: float
    cache: dict[str, float]  # segments, segment size, read-ahead, write caching, ...
    bus_read_block_ms: float = 0.0
    bus_write_block_ms: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_OVERHEADS = {
    "read hit after read": "Read hit over. after read",
    "read hit after write": "Read hit over. after write",
    "read miss after read": "Read miss over. after read",
    "read miss after write": "Read miss over. after write",
    "write hit after read": "Write hit over. after read",
    "write hit after write": "Write hit over. after write",
    "write miss after read": "Write miss over. after read",
    "write miss after write": "Write miss over. after write",
    "read completion": "Read completion overhead",
    "write completion": "Write completion overhead",
    "data preparation": "Data preparation overhead",
    "first reselect": "First reselect overhead",
    "other reselect": "Other reselect overhead",
    "read disconnect after read": "Read disconnect afterread",
    "read disconnect after write": "Read disconnect afterwrite",
    "write disconnect": "Write disconnect overhead",
    "extra disconnect command": "Extradisc command overhead",
    "extra disconnect 1": "Extradisc disconnect overhead",
    "extra disconnect interval": "Extradisc inter-disconnect delay",
    "extra disconnect 2": "Extradisc 2nd disconnect overhead",
    "extra disconnect seek delta": "Extradisc seek delta",
    "minimum seek delay": "Minimum seek delay",
}
_CACHE = {
    "segments": "Number of buffer segments",
    "segment_blocks": "Segment size (in blks)",
    "max_write_segments": "Maximum number of write segments",
    "enable_caching": "Enable caching in buffer",
    "buffer_continuous_read": "Buffer continuous read",
    "min_read_ahead_blocks": "Minimum read-ahead (blks)",
    "max_read_ahead_blocks": "Maximum read-ahead (blks)",
    "read_ahead_over_requested": "Read-ahead over requested",
    "fast_write_level": "Fast write level",
    "read_any_free_blocks": "Read any free blocks",
    "combine_seq_writes": "Combine seq writes",
    "allow_read_hits_on_write_data": "Allow read hits on write data",
    "allow_almost_read_hits": "Allow almost read hits",
    "immediate_buffer_read": "Immediate buffer read",
    "immediate_buffer_write": "Immediate buffer write",
    "max_queue_length": "Max queue length",
    "high_water_mark": "High (read) water mark",
    "low_water_mark": "Low (write) water mark",
    "first_reselect_ms": "First reselect overhead",
    "separate_write_segment": "Use separate write segment",
    "watermark_by_request_size": "Set watermark by reqsize",
    "read_ahead_on_idle_hit": "Read-ahead on idle hit",
    "extra_write_disconnect": "Extra write disconnect",
}


# DiskSim's value of a controller overhead or cache key that a parameter file leaves out (its
# libparam leaves such a field zero); a catalog HDD (catalog.py) starts from the same
ABSENT = 0.0


def disk_defaults() -> tuple[dict[str, float], dict[str, float]]:
    """(overheads, cache) of a disk that sets none of them, by the names of
    ``DiskSimDrive.overheads_ms`` and ``DiskSimDrive.cache``."""
    return dict.fromkeys(_OVERHEADS, ABSENT), dict.fromkeys(_CACHE, ABSENT)


# What the model does with every other key of DiskSim's disk and mechanical blocks that the
# drives of DiskSim 4.0's valid/ folder set (tests/data/disksim/valid/README.md lists them).
#
# Read, but implemented only at the value all eleven drives give them: another value is refused
# (``check_supported``) rather than silently replayed as if it were that one.
SUPPORTED_ONLY: dict[str, tuple[Any, str]] = {
    "Percent error in rpms": (0.0, "DiskSim draws a random speed per drive from it"),
    "Time scale for overheads": (1.0, "DiskSim scales some of the controller's delays by it "
                                 "and not others (disksim_diskctlr.c)"),
    "Minimum read-ahead (blks)": (0, "a read-ahead floor the model does not have"),
    "Allow sneaky full read hits": (0, "sneaky read hits are not modelled"),
    "Allow sneaky partial read hits": (0, "sneaky read hits are not modelled"),
    "Allow sneaky intermediate read hits": (0, "sneaky read hits are not modelled"),
    "Allow write prebuffering": (0, "write prebuffering is not modelled"),
    "Preseeking level": (0, "preseeking is not modelled"),
    "Disconnect write if seek": (0, "disconnecting in a seek is not modelled"),
    "Combine seq writes": (1, "the model always joins a write to the destage it appends to"),
    "Write hit stop prefetch": (1, "a write always stops the read-ahead in the model"),
    "Read directly to buffer": (1, "the model always reads into the buffer"),
    "Immed transfer partial hit": (1, "the model always sends a partial hit's blocks at once"),
}
SUPPORTED_MECH: dict[str, tuple[str, ...]] = {
    "Access time type": ("trackSwitchPlusRotation",),  # seeks and rotation both modelled
    # the measured curve or the Ruemmler-Wilkes equation; DiskSim's "linear", "curve" and
    # "constant" types (from the single-cylinder, average and full-strobe seek times, which is
    # all those two keys are for) are not modelled
    "Seek type": ("extracted", "hpl", "hplplus10"),
}
# Not read, because they do not change a request's service time in the model's one-request-at-
# a-time drive:
# - "Print stats": DiskSim's statistics output.
# - "Calc sector by sector": DiskSim 4.0 reads it (``sectbysect``) and never uses it.
# - "Avg sectors per cylinder", "Max queue length" and the "Scheduler" block: how requests
#   waiting at the drive are ordered; a request's service time starts when the drive takes it,
#   and blocklab's engine keeps the queue.
# - "Block count": DiskSim counts the blocks its zones hold and uses that (layout_g1_load.c,
#   ``checknumblocks``), and so does the model.
# - "Full strobe seek time", "Average seek time": only DiskSim's linear, curve and constant
#   seek types use them (refused above).
# - "Enable caching in buffer" above 1: DiskSim only tests it for zero (the HP C2490A's 2).
# Not modelled, though they could change a service time; on the drives that set them the model
# still gives DiskSim's service time for >= 99.87% of requests (tests/test_disksim_valid.py):
# - "Read-ahead over requested" (0, 1 or -1: whether a segment keeps the request's blocks).
# - "Stop prefetch in sector" (either way DiskSim stops a read-ahead at the end of the sector
#   under the head, as the model does; it decides only which event does it).
# - "Never disconnect", "Hold bus entire read xfer", "Hold bus entire write xfer" (the DEC
#   RZ26 and the HP drives: the bus is held, the drive has it alone in a validation).
# - "Allow read hits on write data" (0 on the IBM 18ES only).
# - "Immediate buffer write" (the Atlas 10K's zero-latency writes).
# - "Low (write) water mark" (HP C2247A and C3323A: when a write's data is fetched again).


def check_supported(disk: Block, mech: Block, where: str) -> None:
    """Refuse a disk whose keys ask for what the model does not do (``SUPPORTED_ONLY``,
    ``SUPPORTED_MECH``), naming the key, its value and what the model supports."""
    for key, (want, why) in SUPPORTED_ONLY.items():
        v = disk.get(key)
        if v is not None and v != want:
            raise ParamError(f"{where}: '{key} = {v}' is not modelled (only {want}: {why})")
    for key, ok in SUPPORTED_MECH.items():
        v = mech.get(key)
        if v is not None and str(v) not in ok:
            raise ParamError(f"{where}: '{key} = {v}' is not modelled (only "
                             f"{', '.join(ok)})")


def _seek_curve(path: Path, opened: list[tuple[Path, str]]) -> list[tuple[int, float]]:
    lines = _read_text(path, opened).splitlines()
    curve = []
    for n, line in enumerate(lines[1:], start=2):  # the first line counts the points
        line = line.strip()
        if not line:
            continue
        try:
            d, t = (x.strip() for x in line.split(","))
            curve.append((int(d), float(t)))
        except ValueError:
            raise ParamError(f"{path}:{n}: expected 'distance, time_ms'") from None
    return curve


#: read_drive's answers by absolute path (symbolic links not followed: sourced files are
#: looked up beside the path as given): (every file read with its text, the drive).
_READ: dict[str, tuple[tuple[tuple[Path, str], ...], DiskSimDrive]] = {}


def read_drive(path: str | Path) -> DiskSimDrive:
    """The disk a ``.parv`` instantiates (or the first disk a ``.diskspecs`` defines).

    Parsed once per process while the files it read hold the same text: every replay builds
    its array, and a parallel replay's every segment does, where parsing the Atlas 10K's
    parameter files took 12 ms of a one-request segment's 23 (measured; more than the
    replay); reading them again to compare costs a fraction of a millisecond. A changed
    file is parsed again; each caller gets its own copy, named by the path it gave."""
    p = Path(path)
    key = str(p.absolute())
    hit = _READ.get(key)
    if hit is not None and _unchanged(hit[0]):
        return dataclasses.replace(copy.deepcopy(hit[1]), source=str(p))
    opened: list[tuple[Path, str]] = []
    d = _read_drive(p, opened)
    _READ[key] = (tuple(opened), d)
    return copy.deepcopy(d)


def _read_drive(p: Path, opened: list[tuple[Path, str]]) -> DiskSimDrive:
    blocks = parse(p, opened)
    disks = [b for b in blocks if b.type == "disksim_disk"]
    if not disks:
        raise ParamError(f"{p}: defines no disksim_disk")
    disk = disks[0]
    bus_read = bus_write = 0.0
    topo = next((b for b in blocks if b.type == "topology"), None)
    if topo is not None:
        insts = {n: b.name for b in blocks if b.type == "instantiate" for n in b.params["names"]}
        disk_inst, parent = _disk_in_tree(topo.params["tree"], None)
        if disk_inst is not None:
            spec_name = insts.get(disk_inst)
            disk = next((b for b in disks if b.name == spec_name), disk)
            if parent is not None and parent[0] == "disksim_bus":
                bus = next((b for b in blocks if b.type == "disksim_bus"
                            and b.name == insts.get(parent[1])), None)
                if bus is not None:
                    bus_read = float(bus.get("Read block transfer time", 0.0))
                    bus_write = float(bus.get("Write block transfer time", 0.0))
    where = f"{p} ({disk.name})"
    model = disk.need("Model", where)
    if not isinstance(model, Block):
        raise ParamError(f"{where}: Model is not a dm_disk block")
    mech = model.need("Mechanical Model", where)
    layout = model.need("Layout Model", where)
    if not isinstance(mech, Block) or not isinstance(layout, Block):
        raise ParamError(f"{where}: Mechanical Model and Layout Model must be blocks")
    check_supported(disk, mech, where)
    seek_file = mech.get("Full seek curve")
    curve: list[tuple[int, float]] = []
    if isinstance(seek_file, str):
        sp = p.parent / seek_file
        if not sp.exists():
            raise ParamError(f"{where}: seek curve file {seek_file} not found")
        curve = _seek_curve(sp, opened)
    zones = []
    for z in layout.need("Zones", where):
        zones.append(Zone(
            first_cylinder=int(z.need("First cylinder number", where)),
            last_cylinder=int(z.need("Last cylinder number", where)),
            blocks_per_track=int(z.need("Blocks per track", where)),
            offset_of_first_block=float(z.get("Offset of first block", 0.0)),
            track_skew=float(z.get("Skew for track switch", 0.0)),
            cylinder_skew=float(z.get("Skew for cylinder switch", 0.0)),
            spares=int(z.get("Number of spares", 0)),
            slips=[int(x) for x in z.get("slips", []) or []],
            defects=[int(x) for x in z.get("defects", []) or []],
            empty_front=int(z.get("Empty space at zone front", 0)),
        ))
        units = str(z.get("Skew units", layout.get("Skew units", "sectors")))
        if units == "revolutions":  # DiskSim accepts skews and offsets in turns too
            zz = zones[-1]
            bpt = zz.blocks_per_track
            zz.track_skew *= bpt
            zz.cylinder_skew *= bpt
            zz.offset_of_first_block *= bpt
        elif units != "sectors":
            raise ParamError(f"{where}: Skew units must be sectors or revolutions, not {units}")
    return DiskSimDrive(
        name=str(disk.name),
        source=str(p),
        block_count=int(model.need("Block count", where)),
        surfaces=int(model.need("Number of data surfaces", where)),
        cylinders=int(model.need("Number of cylinders", where)),
        rpm=float(mech.need("Rotation speed (in rpms)", where)),
        head_switch_ms=float(mech.get("Head switch time", 0.0)),
        single_cylinder_seek_ms=float(mech.get("Single cylinder seek time", 0.0)),
        full_strobe_seek_ms=float(mech.get("Full strobe seek time", 0.0)),
        write_settle_ms=float(mech.get("Add. write settling delay", 0.0)),
        seek_curve=curve,
        seek_type=str(mech.get("Seek type", "")),
        hpl_seek=[float(x) for x in mech.get("HPL seek equation values", []) or []],
        first_ten_seeks_ms=[float(x) for x in mech.get("First ten seek times", []) or []],
        access_time_type=str(mech.get("Access time type", "")),
        mapping_scheme=int(layout.get("LBN-to-PBN mapping scheme", 0)),
        sparing_scheme=int(layout.get("Sparing scheme used", 0)),
        range_size_for_sparing=int(layout.get("Rangesize for sparing", 1)),
        zones=zones,
        overheads_ms={k: float(disk.get(v, ABSENT)) for k, v in _OVERHEADS.items()},
        bulk_sector_transfer_ms=float(disk.get("Bulk sector transfer time", 0.0)),
        per_request_overhead_ms=float(disk.get("Per-request overhead time", 0.0)),
        cache={k: float(disk.get(v, ABSENT)) for k, v in _CACHE.items()},
        bus_read_block_ms=bus_read,
        bus_write_block_ms=bus_write,
    )


def _disk_in_tree(node: list[Any], parent: list[Any] | None) -> tuple[str | None, Any]:
    kind, name, children = node
    if kind == "disksim_disk":
        return name, parent
    for child in children:
        found, par = _disk_in_tree(child, node)
        if found is not None:
            return found, par
    return None, None
