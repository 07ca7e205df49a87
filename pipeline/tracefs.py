"""tracefs for a capture: where it is mounted and who may use it, the devices to trace, the
private instance a capture creates (and the stale ones of captures that were killed), and the
reader of its per-CPU ``trace_pipe_raw`` buffers. pipeline/capture.py runs the capture on it and
writes the trace."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
import stat
import time
from pathlib import Path
from typing import Any

import numpy as np

from blocklab.kernels import pairing as K
from blocklab.traces.errors import BlocklabError
from blocklab.traces.formats.base import ReadContext
from blocklab.traces.formats.paired import Pairer
from blocklab.traces.formats.tracefs_raw import PageDecoder
from blocklab.traces.safety import pid_alive, stale_temporaries
from blocklab.traces.schema import format_dev, make_dev

INSTANCE_PREFIX = "blocklab-"
#: Pages read from one CPU per poll (1 MiB of 4 KiB pages): bounds the memory of one poll.
MAX_PAGES = 256
#: An instance younger than this whose process is alive but holds none of its files is taken
#: as a capture still setting up, not as stale.
SETUP_GRACE_S = 60.0


@dataclasses.dataclass(frozen=True)
class Device:
    """A device to capture: its dev_t, and for a partition its disk and sector range."""

    spec: str
    name: str
    dev: int  # dev_t of the device traced (the disk, for a partition)
    first_sector: int | None = None  # a partition: its range on the disk
    sectors: int | None = None

    def filter(self) -> str:
        if self.first_sector is None:
            return f"dev == {self.dev}"
        end = self.first_sector + (self.sectors or 0)
        return f"(dev == {self.dev} && sector >= {self.first_sector} && sector < {end})"

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"spec": self.spec, "name": self.name, "dev": format_dev(self.dev)}
        if self.first_sector is not None:
            d.update(first_sector=self.first_sector, sectors=self.sectors)
        return d


# ------------------------------------------------------------------------------------------
# tracefs: where it is, who may use it


def mounts() -> list[tuple[str, str]]:
    """(mount point, file system type) of this process's mounts."""
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:
                # octal escapes: \040 is a blank in a mount point
                point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), parts[1])
                out.append((point, parts[2]))
    return out


def find_tracefs() -> Path:
    """The tracefs mount point (``/sys/kernel/tracing`` preferred).

    Capture does not mount tracefs itself: mounting is a change to the host beyond the
    instance it owns; the error says how to mount it.
    """
    points = [Path(p) for p, fs in mounts() if fs == "tracefs"]
    if not points:
        with open("/proc/filesystems") as f:
            known = any(line.split()[-1] == "tracefs" for line in f if line.strip())
        if not known:
            raise BlocklabError("this kernel has no tracefs (built without CONFIG_TRACING)")
        raise BlocklabError("tracefs is not mounted (as root: mount -t tracefs nodev "
                            "/sys/kernel/tracing)")
    preferred = Path("/sys/kernel/tracing")
    return preferred if preferred in points else points[0]


def check_access(tracefs: Path) -> Path:
    instances = tracefs / "instances"
    if not os.access(tracefs, os.R_OK | os.X_OK) or (
        instances.is_dir() and not os.access(instances, os.W_OK | os.X_OK)
    ):
        raise BlocklabError(f"{tracefs}: permission denied for uid {os.geteuid()}: capture "
                            "needs root (it creates a tracefs instance)")
    if not instances.is_dir():
        raise BlocklabError(f"{tracefs}: no instances/ folder (tracefs instances need Linux "
                            "3.10 or later)")
    return instances


# ------------------------------------------------------------------------------------------
# devices


_MAJMIN = re.compile(r"^(\d+)[:,](\d+)$")


def resolve_device(spec: str) -> Device:
    """``MAJ:MIN``, ``/dev/NAME`` or ``NAME`` -> the Device to filter on."""
    m = _MAJMIN.match(spec)
    if m:
        major, minor = int(m[1]), int(m[2])
    else:
        path = Path(spec) if "/" in spec else Path("/dev") / spec
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise BlocklabError(f"--device {spec}: no such device") from None
        except OSError as e:
            raise BlocklabError(f"--device {spec}: {e.strerror}") from None
        if not stat.S_ISBLK(st.st_mode):
            raise BlocklabError(f"--device {spec}: not a block device")
        major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
    sysfs = Path(f"/sys/dev/block/{major}:{minor}")
    if not sysfs.exists():
        raise BlocklabError(f"--device {spec}: no block device {major}:{minor} on this host")
    real = sysfs.resolve()
    if (real / "partition").exists():
        # block_rq_* events name the disk and its sectors: a partition is a sector range
        dmaj, dmin = (real.parent / "dev").read_text().split(":")
        return Device(spec, real.name, make_dev(int(dmaj), int(dmin)),
                      int((real / "start").read_text()), int((real / "size").read_text()))
    return Device(spec, real.name, make_dev(major, minor))


# ------------------------------------------------------------------------------------------
# the instance and stale ones


class Instance:
    """A tracefs instance owned by this capture."""

    def __init__(self, instances: Path, name: str):
        self.name = name
        self.path = instances / name

    def create(self) -> None:
        try:
            os.mkdir(self.path)
        except FileExistsError:
            # ours by name, yet not created by us: left by a killed capture whose pid we reuse
            remove_instance(self.path)
            os.mkdir(self.path)
        except PermissionError:
            raise BlocklabError(f"{self.path}: permission denied: capture needs root") from None

    def write(self, rel: str, value: str) -> None:
        p = self.path / rel
        try:
            with open(p, "w") as f:
                f.write(value)
        except OSError as e:
            raise BlocklabError(f"{p}: cannot write {value!r}: {e.strerror}") from None

    def read(self, rel: str) -> str:
        return (self.path / rel).read_text()


def remove_instance(path: Path) -> None:
    """Stop an instance's tracing, disable its events and remove it."""
    for rel, value in (("tracing_on", "0"), ("events/enable", "0")):
        with contextlib.suppress(OSError), open(path / rel, "w") as f:
            f.write(value)
    for _ in range(100):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise BlocklabError(f"{path}: cannot remove: {e.strerror}") from None
            time.sleep(0.02)  # a reader's file is still closing
    raise BlocklabError(f"{path}: cannot remove: still busy (a process has its files open)")


def _holds_files_in(pid: int, path: Path) -> bool:
    prefix = str(path) + "/"
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefix):
                return True
    return False


def stale_instances(instances: Path) -> list[Path]:
    """blocklab instances whose capture is gone: the process named in the instance is dead, or
    alive (a reused pid) without any of the instance's files open and past its setup time."""
    out: list[Path] = []
    try:
        entries = list(instances.iterdir())
    except OSError:
        return out
    for p in entries:
        m = re.fullmatch(re.escape(INSTANCE_PREFIX) + r"(\d+)", p.name)
        if not m:
            continue
        pid = int(m[1])
        if pid == os.getpid():
            continue
        if pid_alive(pid):
            if _holds_files_in(pid, p):
                continue
            with contextlib.suppress(OSError):
                if time.time() - p.stat().st_mtime < SETUP_GRACE_S:
                    continue
        out.append(p)
    return out


def cleanup(output: Path | None = None) -> list[str]:
    """Remove stale capture instances (and, given ``output``, stale temporary outputs beside
    it). Returns what was removed."""
    instances = check_access(find_tracefs())
    removed = []
    for p in stale_instances(instances):
        remove_instance(p)
        removed.append(str(p))
    if output is not None:
        for p in stale_temporaries(output):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
            removed.append(str(p))
    return removed


# ------------------------------------------------------------------------------------------
# reading


class CpuReader:
    """One CPU's ``trace_pipe_raw``, read without blocking into a reused page buffer."""

    def __init__(self, cpu: int, path: Path, page_size: int):
        self.cpu = cpu
        self.path = path
        self.page_size = page_size
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.buf = np.empty(MAX_PAGES * page_size, dtype=np.uint8)
        whole = memoryview(self.buf.data)
        self._views = [whole[k * page_size : (k + 1) * page_size] for k in range(MAX_PAGES)]
        self.last_ts = -1
        self.pages = 0

    def read(self) -> tuple[int, bool]:
        """Read up to MAX_PAGES pages; returns (pages, read to empty)."""
        for n in range(MAX_PAGES):
            try:
                got = os.readv(self.fd, [self._views[n]])
            except BlockingIOError:
                return n, True
            if got == 0:
                return n, True
            if got != self.page_size:
                raise BlocklabError(f"{self.path}: read {got} bytes, expected whole pages of "
                                    f"{self.page_size}")
            self.pages += 1
        return MAX_PAGES, False

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def warm_decoder(decoder: PageDecoder, page_size: int) -> None:
    """Load (or compile) the decoder and pairing kernels before tracing starts, so the first
    poll does not leave the ring buffers unread while Numba loads them."""
    decoder.decode(np.zeros(page_size, dtype=np.uint8), 0, "warm-up")
    pairer = Pairer(expect_queue=False, ctx=ReadContext())
    ev = np.zeros((1, K.TE_NCOLS), dtype=np.int64)
    ev[0, K.TE_ACT] = K.A_COMPLETE
    pairer.feed(ev)
    pairer.sweep(final=True)


def cpu_stats(instance: Instance, cpus: list[int]) -> dict[str, dict[str, int]]:
    keys = {"overrun": "overrun", "commit overrun": "commit_overrun",
            "dropped events": "dropped", "read events": "read"}
    out = {}
    for c in cpus:
        d = {}
        for line in instance.read(f"per_cpu/cpu{c}/stats").splitlines():
            name, _, val = line.partition(":")
            if name.strip() in keys:
                d[keys[name.strip()]] = int(val.split()[0])
        out[str(c)] = d
    return out


def lost_events(stats: dict[str, dict[str, int]]) -> int:
    return sum(d.get("overrun", 0) + d.get("commit_overrun", 0) + d.get("dropped", 0)
               for d in stats.values())
