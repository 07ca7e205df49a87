"""What every input format provides, and the context a reader reports to.

A format turns one input (or, for blktrace per-CPU sets, a group of inputs) into chunks of
requests: NumPy columns named as in ``traces.schema`` with times in the source's own clock
(integer ns), plus the process names. The ingest job merges sources by time and rebases the
clock so that the first event is time 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from blocklab.traces.errors import BadInput
from blocklab.traces.io import PEEK_BYTES, Input


@dataclasses.dataclass
class Chunk:
    """Requests in arrival order: schema columns as NumPy arrays (-1 = null), process names."""

    cols: dict[str, np.ndarray]
    comm: pa.Array | None = None

    def __len__(self) -> int:
        return len(self.cols["time_ns"])

    def take(self, idx: np.ndarray) -> Chunk:
        return Chunk(
            {k: v[idx] for k, v in self.cols.items()},
            None if self.comm is None else self.comm.take(pa.array(idx)),
        )


@dataclasses.dataclass
class ReadContext:
    """Options for readers, and what they learn about the inputs on the way."""

    skip_bad: int = 0  # bad records that may still be skipped
    device: int | None = None  # keep only this device
    # with ``device``, the devices met until a request of it was kept (by the readers that
    # keep a device early, or by ingest after them): what ingest names when none is
    devices: set[int] = dataclasses.field(default_factory=set)
    skipped: int = 0
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    clock: str = "relative"  # "unix" when times are ns since 1970, so the start is wall-clock
    linux_devices: bool = False
    host: str | None = None
    kernel: str | None = None
    start_unix_ns: int | None = None  # wall-clock time of the source's time 0, when known
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    on_progress: Callable[[], None] | None = None

    def bad(self, path: str, message: str, *, line: int | None = None, offset: int | None = None):
        """Report a bad record: raises BadInput unless ``--skip-bad`` still allows skipping it."""
        if self.skipped < self.skip_bad:
            self.skipped += 1
            return
        raise BadInput(path, message, line=line, offset=offset)

    def count(self, key: str, n: int = 1) -> None:
        if n:
            self.counts[key] = self.counts.get(key, 0) + int(n)


def without_cut_line(head: bytes) -> bytes | None:
    """The head of a short input (all of it) without its last line when that line has no
    newline and other lines come before it: the line may have been cut short (a capture
    interrupted, ``head -c``). None when there is no such line."""
    if len(head) >= PEEK_BYTES or head.endswith(b"\n"):
        return None
    cut = head.rfind(b"\n")
    return head[:cut + 1] if cut >= 0 and head[:cut].strip() else None


def mostly(lines: list[bytes], match) -> bool:
    """Sniffing rule: at least one line, and at least 80 % of the lines look right (a few bad
    records must not hide the format: they are reported by line instead)."""
    if not lines:
        return False
    hits = sum(1 for ln in lines if match(ln))
    return hits >= max(1, (len(lines) * 4 + 4) // 5)


@dataclasses.dataclass(frozen=True)
class Format:
    """An input format: its name, a content sniffer and a reader."""

    name: str
    description: str
    sniff: Callable[[bytes], bool]
    read: Callable[[list[Input], ReadContext], Iterator[Chunk]]
    binary: bool = False
    groups_files: bool = False  # reads a set of files together (blktrace per-CPU files)
    extensions: tuple[str, ...] = ()
