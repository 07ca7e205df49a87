"""IOR (github.com/hpc/ior): N tasks write, then read, a shared file or one file each, closed loop,
``repetitions`` times (IOR ``-i``).

IOR's vocabulary: each task moves ``segments`` segments; in each segment it moves one block of
``block_size`` bytes in transfers of ``transfer_size`` bytes. Offsets within a file are IOR's
own (src/ior.c ``WriteOrRead``; ``GetOffsetArrayRandom`` for ``-z``), for task t, segment i,
transfer j of the segment:

- shared file, sequential:        j*T + i*N*B + t*B
- file per process, sequential:   j*T + i*B
- shared file, random (-z):       offs_t[j] + i*N*B, where the segment's N*B/T transfer
  positions are dealt to tasks by ``rand() % N`` (one seed for all tasks) and each task
  shuffles its own list; the same pattern repeats in every segment
- file per process, random (-z):  offs_t[j] + i*B, offs_t = 0, T, 2T, ... < B shuffled with
  seed + t

Random numbers are blocklab's (SplitMix64 seeded with ``--seed``), not the C library's, so the
offsets are IOR's arithmetic over a different random sequence; the read phase repeats the write
phase's offsets, as IOR does with a fixed ``randomSeed``.

Files are laid out on the volume by a simple allocator: from sector 0, one after the other in
task order (the shared file is one file), each starting at the next multiple of ``align`` bytes
(default 1 MiB). Each task is a stream (``stream`` = task) keeping ``outstanding`` requests in
flight (1 by default: IOR's POSIX I/O is synchronous); the write phase is phase 0 and the read
phase phase 1 (or 0 alone); ``stream_seq`` counts on across the phases. With ``repetitions``
N (IOR ``-i N``: src/ior.c ``TestIoSys`` loops over repetitions, each writing then reading
the same files, with barriers between) the phases follow on: repetition r's write phase is
phase 2r, its read phase 2r + 1 (r alone when it only writes or only reads), each with the
same offsets (IOR's fixed ``randomSeed`` gives every repetition the same shuffle).

Options IOR itself rejects get IOR's message (src/ior.c ``ValidateTests``), in IOR's order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from blocklab.kernels import synth as K
from blocklab.traces.errors import BlocklabError

from . import CHUNK_ROWS, SECTOR, Fill, chunks

IOR_ACCESS_SIZE = 8  # sizeof(IOR_size_t): IOR's unit of block and transfer sizes
DEFAULT_BLOCK = 1048576  # IOR's defaults (src/ior.c init_IOR_Param_t)
DEFAULT_TRANSFER = 262144
DEFAULT_ALIGN = 1 << 20
RANDOM_SAME_SIZE = ("IOR will randomize access within a block and repeats the same pattern for "
                    "all segments, therefore choose blocksize > transferSize")


class IorRejected(BlocklabError):
    """An option combination IOR itself refuses; the message is IOR's."""


def ior_check(tasks: int, transfer: int, block: int, segments: int, random: bool,
              write: bool, read: bool, repetitions: int = 1) -> None:
    """IOR's own checks of these options, in its order, with its messages."""
    def no(msg: str) -> IorRejected:
        return IorRejected(f"IOR rejects these options: {msg} (tasks {tasks}, block size "
                           f"{block}, transfer size {transfer}, segments {segments}"
                           f"{', random offsets' if random else ''})")
    if repetitions <= 0:
        # IOR warns and runs once (WARN_RESET to its default, 1); a trace says what it holds
        raise BlocklabError(f"--repetitions: must be at least 1, found {repetitions} (IOR "
                            "warns 'too few test repetitions' and runs once)")
    if tasks <= 0:
        raise no("too few tasks for testing")
    if not write and not read:
        raise no("test must write, read, or check read/write file")
    if segments < 0:
        raise no("segment count must be positive value")
    if block % IOR_ACCESS_SIZE != 0:
        raise no("block size must be a multiple of access size")
    if block < 0:
        raise no("block size must be non-negative integer")
    if transfer % IOR_ACCESS_SIZE != 0:
        raise no("transfer size must be a multiple of access size")
    if transfer < 0:
        raise no("transfer size must be non-negative integer")
    if transfer == 0:
        raise no("test will not complete with zero transfer size")
    if block % transfer != 0:
        raise no("block size must be a multiple of transfer size")
    if block < transfer:
        raise no("block size must not be smaller than transfer size")
    if random and block == transfer:
        raise no(RANDOM_SAME_SIZE)


@dataclasses.dataclass(frozen=True)
class IorPlan:
    tasks: int
    transfer: int
    block: int
    segments: int
    file_per_proc: bool
    random: bool
    write: bool
    read: bool
    outstanding: int
    seed: int
    align: int
    capacity_sectors: int | None
    file_sectors: tuple[int, ...]  # first sector of each task's file (all equal when shared)
    repetitions: int = 1  # IOR -i: the write and read phases, this many times over

    @property
    def requests(self) -> int:
        per_phase = self.segments * self.block // self.transfer * self.tasks
        return per_phase * (int(self.write) + int(self.read)) * self.repetitions

    @property
    def phase_names(self) -> list[str]:
        """Each phase's op, in phase order."""
        return ((["write"] if self.write else []) + (["read"] if self.read else [])) * \
            self.repetitions

    def extra(self) -> dict[str, Any]:
        return {
            "generator": "ior",
            "options": {"tasks": self.tasks, "transfer_size": self.transfer,
                        "block_size": self.block, "segments": self.segments,
                        "file_per_proc": self.file_per_proc, "random": self.random,
                        "write": self.write, "read": self.read,
                        "outstanding": self.outstanding, "align": self.align,
                        "capacity_sectors": self.capacity_sectors, "seed": self.seed,
                        "repetitions": self.repetitions},
            "seed": self.seed,
            "phases": self.phase_names,
            "files": [{"first_sector": s, "bytes": self.file_bytes}
                      for s in (self.file_sectors if self.file_per_proc
                                else self.file_sectors[:1])],
        }

    @property
    def file_bytes(self) -> int:
        per_task = self.segments * self.block
        return per_task if self.file_per_proc else per_task * self.tasks

    def batches(self, chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.RecordBatch]:
        return chunks(self.kernel(), True, chunk_rows)

    def kernel(self) -> Fill:
        """The generator's state and a ``fill(columns, cap) -> (rows, done)`` over it."""
        n = self.tasks
        start = np.zeros(n + 1, dtype=np.int64)
        counts = np.full(n, self.block // self.transfer, dtype=np.int64)
        if self.random:
            offs = np.zeros(n * self.block // self.transfer, dtype=np.int64)
            K.ior_random_offsets(self.seed, n, self.transfer, self.block, self.file_per_proc,
                                 offs, start, counts)
        else:
            offs = np.zeros(1, dtype=np.int64)
        phase_ops = np.array([int(op == "write") for op in self.phase_names], dtype=np.int64)
        base = np.array(self.file_sectors, dtype=np.int64)
        state = np.zeros(3, dtype=np.int64)

        def fill(c: dict[str, np.ndarray], cap: int) -> tuple[int, int]:
            return K.ior_fill(state, n, self.transfer, self.block, self.segments,
                              self.file_per_proc, self.random, phase_ops, base, offs, start,
                              counts, self.outstanding, c["t_ns"], c["dev"], c["sector"],
                              c["nbytes"], c["op"], c["stream"], c["seq"], c["phase"],
                              c["outst"], cap)

        return fill


def layout(tasks: int, file_bytes: int, file_per_proc: bool,
           align: int) -> tuple[list[int], int]:
    """First sector of each task's file (files one after the other from sector 0, each at the
    next multiple of ``align`` bytes), and the byte just past the last file."""
    out: list[int] = []
    pos = 0
    for _t in range(tasks if file_per_proc else 1):
        pos = -(-pos // align) * align
        out.append(pos // SECTOR)
        pos += file_bytes
    return out * (1 if file_per_proc else tasks), pos


def plan(tasks: int, transfer: int, block: int, segments: int, file_per_proc: bool,
         random: bool, write: bool = True, read: bool = True, outstanding: int = 1,
         seed: int = 0, align: int = DEFAULT_ALIGN,
         capacity_sectors: int | None = None, repetitions: int = 1) -> IorPlan:
    """IOR's checks, then blocklab's (sector-sized transfers, files within the volume)."""
    ior_check(tasks, transfer, block, segments, random, write, read, repetitions)
    if transfer % SECTOR:
        raise BlocklabError(f"--transfer-size: {transfer} bytes is not a multiple of the "
                            f"{SECTOR}-byte sector (blocklab replays block requests)")
    if align <= 0 or align % SECTOR:
        raise BlocklabError(f"--align: must be a positive multiple of {SECTOR} bytes, "
                            f"found {align}")
    if outstanding < 1:
        raise BlocklabError(f"--outstanding: must be at least 1, found {outstanding}")
    if seed < 0:
        raise BlocklabError(f"--seed: must be a whole number >= 0, found {seed}")
    per_task = segments * block
    file_bytes = per_task if file_per_proc else per_task * tasks
    firsts, end = layout(tasks, file_bytes, file_per_proc, align)
    if capacity_sectors is not None and end > capacity_sectors * SECTOR:
        raise BlocklabError(
            f"--capacity: the IOR files need {end} bytes ({-(-end // SECTOR)} sectors, "
            f"{'one file per task' if file_per_proc else 'one shared file'} of {file_bytes} "
            f"bytes, aligned to {align}), the volume has {capacity_sectors} sectors")
    return IorPlan(tasks, transfer, block, segments, file_per_proc, random, write, read,
                   outstanding, seed, align, capacity_sectors, tuple(firsts), repetitions)
