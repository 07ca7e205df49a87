"""The binary per-CPU ring-buffer pages of tracefs (``per_cpu/cpuN/trace_pipe_raw``) of the
block tracepoints: event layouts read from the tracepoints' ``format`` files, pages decoded by
``kernels.tracefs_raw`` into the pairing event matrix, process names learned on the way.

Unlike the text of ``trace_pipe``, which the kernel formats with printf for every event (3.9 us
of CPU per request measured on this project's 2-core machine, against 0.06 us to read the
pages), the pages are copied out as they are, and carry nanosecond time stamps (the text
prints microseconds).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np

from blocklab.kernels import pairing as K
from blocklab.kernels import tracefs_raw as R
from blocklab.traces.errors import BadInput, BlocklabError

from .paired import ProcessNames

#: Tracepoint name -> pairing action (the kernel's __BLK_TA_* numbers, as kernels.pairing).
ACTIONS = {
    "block_bio_queue": K.A_QUEUE,
    "block_bio_backmerge": K.A_BACKMERGE,
    "block_bio_frontmerge": K.A_FRONTMERGE,
    "block_getrq": K.A_GETRQ,
    "block_rq_requeue": K.A_REQUEUE,
    "block_rq_issue": K.A_ISSUE,
    "block_rq_complete": K.A_COMPLETE,
    "block_rq_insert": K.A_INSERT,
    "block_split": K.A_SPLIT,
}

_FIELD = re.compile(
    r"field:(?P<decl>[^;]+);\s*offset:(?P<off>\d+);\s*size:(?P<size>\d+);\s*signed:(?P<sg>\d+);"
)
_ID = re.compile(r"^ID:\s*(\d+)", re.M)
_NAME = re.compile(r"^name:\s*(\S+)", re.M)


@dataclasses.dataclass(frozen=True)
class Field:
    name: str
    offset: int
    size: int
    signed: bool
    array: int | None  # element count of a ``char x[N]`` field


@dataclasses.dataclass(frozen=True)
class EventFormat:
    """One tracepoint's binary layout, from its ``format`` file."""

    name: str
    id: int
    fields: dict[str, Field]

    @property
    def size(self) -> int:
        return max(f.offset + f.size for f in self.fields.values())


def parse_format(text: str, where: str = "format") -> EventFormat:
    """Parse a tracepoint ``format`` file (name, ID, fields with offsets and sizes)."""
    name = _NAME.search(text)
    ident = _ID.search(text)
    if not name or not ident:
        raise BlocklabError(f"{where}: not a tracepoint format file (no name or ID line)")
    fields: dict[str, Field] = {}
    for m in _FIELD.finditer(text):
        decl = m["decl"].strip()
        arr = None
        am = re.search(r"\[(\d*)\]\s*$", decl)
        if am:
            arr = int(am[1]) if am[1] else 0
            decl = decl[: am.start()].strip()
        fname = decl.split()[-1]
        fields[fname] = Field(fname, int(m["off"]), int(m["size"]), m["sg"] == "1", arr)
    return EventFormat(name[1], int(ident[1]), fields)


@dataclasses.dataclass(frozen=True)
class PageHeader:
    """``events/header_page``: where the commit word is and where the data starts."""

    commit_size: int
    data_off: int


def parse_header_page(text: str) -> PageHeader:
    """Parse ``events/header_page`` (``commit`` field size, ``data`` offset)."""
    commit = re.search(r"field:\s*local_t\s+commit;\s*offset:8;\s*size:(\d+);", text)
    data = re.search(r"field:\s*char\s+data;\s*offset:(\d+);", text)
    if not commit or not data:
        raise BlocklabError("events/header_page: unexpected layout (no commit or data field)")
    return PageHeader(int(commit[1]), int(data[1]))


def _need(fmt: EventFormat, name: str, sizes: tuple[int, ...]) -> Field:
    f = fmt.fields.get(name)
    if f is None or f.size not in sizes:
        raise BlocklabError(f"tracepoint {fmt.name}: field {name} missing or of an unexpected "
                            f"size (format file)")
    return f


def layout_table(formats: list[EventFormat]) -> tuple[np.ndarray, np.ndarray]:
    """(kind_of, layout) for ``kernels.tracefs_raw.decode_pages``: event id -> row, and per row
    the action and field offsets."""
    kind_of = np.full(max([f.id for f in formats] + [0]) + 1, -1, dtype=np.int64)
    rows = []
    for k, fmt in enumerate(formats):
        if fmt.name not in ACTIONS:
            raise BlocklabError(f"tracepoint {fmt.name}: blocklab does not decode it")
        row = np.full(R.L_NCOLS, -1, dtype=np.int64)
        row[R.L_ACT] = ACTIONS[fmt.name]
        row[R.L_PID] = _need(fmt, "common_pid", (4,)).offset
        row[R.L_DEV] = _need(fmt, "dev", (4,)).offset
        row[R.L_SECTOR] = _need(fmt, "sector", (8,)).offset
        rw = _need(fmt, "rwbs", tuple(range(1, 65)))
        row[R.L_RWBS] = rw.offset
        row[R.L_RWBS_LEN] = rw.size
        if "nr_sector" in fmt.fields:
            row[R.L_NSEC] = _need(fmt, "nr_sector", (4,)).offset
        for err in ("error", "errors"):  # "errors" before Linux 4.x
            if err in fmt.fields:
                row[R.L_ERR] = _need(fmt, err, (4,)).offset
        if "comm" in fmt.fields:
            c = fmt.fields["comm"]
            row[R.L_COMM] = c.offset
            row[R.L_COMM_LEN] = c.size
        if fmt.name == "block_split":
            row[R.L_AUX] = _need(fmt, "new_sector", (8,)).offset
        # every field must lie inside the payload (the strings of __data_loc fields follow)
        row[R.L_MINLEN] = fmt.size
        kind_of[fmt.id] = k
        rows.append(row)
    layout = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    return kind_of, layout


MESSAGES = {
    R.BAD_PAGE: "page data length beyond the page",
    R.BAD_EVENT: "event runs past its page or is shorter than its format",
    R.BAD_RWBS: "not an rwbs string",
    R.BAD_SIZE: "absurd request size",
}


class PageDecoder:
    """Decodes pages of one tracefs instance; learns process names into ``names``."""

    def __init__(self, header: PageHeader, formats: list[EventFormat], page_size: int,
                 names: ProcessNames):
        self.header = header
        self.page_size = page_size
        self.kind_of, self.layout = layout_table(formats)
        self.min_event = 4 + min((int(self.layout[k * R.L_NCOLS + R.L_MINLEN])
                                  for k in range(len(formats))), default=8)
        self.names = names
        self.lost = np.zeros(2, dtype=np.int64)
        self.events = 0

    def decode(self, buf: np.ndarray, n_pages: int, where: str) -> np.ndarray:
        """Events (rows of K.TE_* columns, time order of the pages) of ``n_pages`` pages."""
        cap = n_pages * (self.page_size // self.min_event + 1)
        events = np.empty(cap * K.TE_NCOLS, dtype=np.int64)
        comms = np.empty(cap * 2, dtype=np.int64)
        n, status, off = R.decode_pages(
            buf, n_pages, self.page_size, self.header.commit_size, self.header.data_off,
            self.kind_of, self.layout, events, comms, cap, self.lost)
        if status != R.OK:
            raise BadInput(where, MESSAGES.get(status, f"decoder status {status}"), offset=off)
        ev = events[: n * K.TE_NCOLS].reshape(n, K.TE_NCOLS)
        self._learn_names(buf, ev, comms[: 2 * n].reshape(n, 2))
        self.events += n
        return ev

    def _learn_names(self, buf: np.ndarray, ev: np.ndarray, spans: np.ndarray) -> None:
        self.names.learn(ev, spans, lambda s, e: bytes(buf[s:e]).decode("utf-8", "replace"))


def read_formats(events_dir: Path, names: list[str]) -> list[EventFormat]:
    """The ``format`` files of the block tracepoints ``names`` under ``events_dir``."""
    out = []
    for n in names:
        p = events_dir / "block" / n / "format"
        try:
            out.append(parse_format(p.read_text(), str(p)))
        except FileNotFoundError:
            raise BlocklabError(f"{p}: this kernel has no tracepoint block:{n}") from None
    return out
