"""Compile every family of blocklab's kernels into Numba's on-disk cache (or load them from it)
by running each on a tiny input: ``python -m blocklab.tools.warm`` (issue 21, deliverable 4).

``make setup`` runs it, so ``make demo`` and ``make test`` never compile in the middle of a
command, and ``make test`` also starts it in the background as the suite starts (the files
that replay run last: tests/conftest.py). The kernels compiled are the very ones the commands
use (Numba compiles a kernel per argument types, and these are the commands' own calls).

When every family has compiled, a stamp file is left in the cache folder, which is named after
a hash of every kernel source (kernels/_jit.py): an edited kernel makes a new folder without
the stamp. The stamp holds a hash of this file: an edited warm set compiles again.
``is_warm`` reads it; the CLI calls ``warm`` with a progress line before a command that would
otherwise sit silent for minutes while the kernels compile (on a terminal; a script is told
of each kernel as it compiles).

On two cores or more the replay engine (about two fifths of the work) and the families that
replay through it compile in this process, while a second process compiles the others into
the same cache (``warm``; ``-j 1`` for one process): each process has about half. The second
process starts with the HDD model: the engine's compile reaches the HDD model's
``service_queued`` late (Numba types a kernel's callees depth first, and the drives come late
in the event loop), after the second process has left it in the cache, and the engine links
the cached one instead of compiling it again (measured with Numba's compile events: the
engine's compile 62-64 -> 46-50 s of work; on 2026-11-29, a busy machine, the engine reached
it 55-60 s in, the second process had saved it at 29-32 s). Before, the second process began
with the generators and failures family, whose replays compiled the whole engine a second
time, side by side with this process's: two processes took 59-68 s here against 70 s for
one.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

STAMP = "blocklab-warm.ok"


def _stamp() -> Path:
    return Path(cache_folder()) / STAMP


def _warm_set() -> str:
    """What the stamp is good for: a hash of this file, which says what the warm compiles.
    The cache folder is keyed on the kernel sources only, so a kernel added to the warm (or a
    call of a kernel with new argument types) would otherwise find the old stamp and never
    compile ahead."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def is_warm() -> bool:
    """Whether every kernel family, as this file names them, has been compiled into this
    install's cache."""
    try:
        return _stamp().read_text().split()[0] == _warm_set()
    except (OSError, IndexError):
        return False


def _small_raid5() -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    """A 4-drive RAID-5 of Atlas 10K drives and 8 requests (LBA, sectors, write flag)."""
    from blocklab.pipeline.model.config import parse_array
    from blocklab.pipeline.replay import build_array

    cfg = parse_array({"group": [{"name": "g", "layout": "raid5", "width": 4,
                                  "drive": "atlas10k"}]}, Path("warm.toml"))
    n = 8
    return (build_array(cfg), np.arange(n, dtype=np.int64) * 64, np.full(n, 8, np.int64),
            np.arange(n, dtype=np.int64) % 2)


def _hdd_model(tmp: Path) -> None:
    """The HDD model alone (its closed-loop replay): compiles ``hdd.service_queued``, the very
    kernel, for the very argument types, the engine calls, so the engine links it from the
    cache."""
    from blocklab.kernels.drive import hdd as H
    from blocklab.pipeline.model.array import hdd_tables

    arr, lba, nsec, w = _small_raid5()
    tables = hdd_tables(arr.models)
    H.replay_closed(*tables, H.new_state(), lba, nsec, w, np.zeros(len(lba)),
                    np.zeros(len(lba)))
    t = np.arange(len(lba), dtype=np.int64) * 10_000_000  # (ns: one at a time)
    H.replay_ops(*tables, H.new_state(), np.zeros(len(lba), np.int64), t, t, lba, nsec, w,
                 np.zeros(len(lba), np.int64))


def _replay_engine(tmp: Path) -> None:
    """The replay engine, open and closed loop (one kernel: the event loop)."""
    from blocklab.pipeline.replay import run_engine

    arr, lba, nsec, w = _small_raid5()
    n = len(lba)
    run_engine(arr, np.arange(n, dtype=np.int64) * 1000, lba, nsec, w)
    run_engine(arr, np.zeros(n, np.int64), lba, nsec, w, closed=True, outstanding=2)


def _toml(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _generators_and_failures(tmp: Path) -> None:
    """The synthetic generators, and full replays (run folder, cache, a failure and its
    rebuild) on a RAID-6 of catalog HDDs with a hot spare and a pool of SSDs."""
    from blocklab.pipeline.replay import replay
    from blocklab.pipeline.synth import synth_iometer, synth_ior, synth_orion, synth_spc1

    hdd = _toml(tmp / "hdd.toml", '[[group]]\nname = "g"\nlayout = "raid6"\nwidth = 6\n'
                'hot_spares = 1\nstripe_unit = "64KiB"\ndrive = "savvio_15k3_300g"\n'
                'scheduler = "clook"\nqueue_depth = 8\n[controller]\ncache = "64MiB"\n'
                'read_ahead = true\n')
    # the pool's SSDs hold 2 GiB each (the same kernels as 800 GB: the capacity is data), so
    # that their rebuild takes milliseconds, not the 8 s of an 800 GB drive's
    ssd = _toml(tmp / "ssd.toml", '[[group]]\nname = "p"\nlayout = "ddp"\nwidth = 11\n'
                'preservation = 1\npiece = "64MiB"\n'
                'drive = { base = "intel_s3700_800g", blocks = 4194304 }\n')
    synth_spc1(tmp / "spc1.parquet", bsu=1, duration_s=0.5, array=hdd)
    synth_ior(tmp / "ior.parquet", tasks=2, transfer_size="64KiB", block_size="1MiB",
              segments=1, array=hdd)
    # IOR -z: random offsets are drawn by a kernel of their own (kernels/synth.py)
    synth_ior(tmp / "ior-z.parquet", tasks=2, transfer_size="64KiB", block_size="1MiB",
              segments=1, random=True, array=hdd)
    synth_iometer(tmp / "iom.parquet", requests=64, array=hdd)
    synth_orion(tmp / "orion.parquet", matrix="point", num_small=2, num_large=1,
                requests_per_slot=4, array=hdd)
    replay(tmp / "spc1.parquet", hdd, tmp / "run-hdd", failures=[(0, 0.1)], drive_ops=True)
    replay(tmp / "iom.parquet", ssd, tmp / "run-ssd", failures=[(0, 0.0)])


def _many_in_flight(n: int = 1100) -> str:
    """blkparse text of ``n`` reads all queued before the first completes: more requests in
    flight than the pairing table's first 1,024 entries, so that it grows (kernels/pairing.py
    ``rehash``), as it does on a real trace of a deep queue."""
    queued = "".join(f"  8,16   0 {i:8d}     0.{i:09d}  4242  Q   R {8 * i} + 8 [fio]\n"
                     for i in range(n))
    done = "".join(f"  8,16   0 {n + i:8d}     1.{i:09d}     0  C   R {8 * i} + 8 [0]\n"
                   for i in range(n))
    return queued + done


#: One request of each text format a kernel parses (blkparse; the field formats share one
#: kernel: DiskSim ASCII stands for MQSim, fio and DiskSim validate), as ``ingest`` reads them,
#: and a blkparse text with more requests in flight than the pairing table first holds.
_TEXT_SAMPLES = {
    "warm.blkparse.txt": (
        "  8,16   0        0     0.000000000  4242  Q   R 789442856 + 8 [fio]\n"
        "  8,16   0        1     0.000000300  4242  G   R 789442856 + 8 [fio]\n"
        "  8,16   0        2     0.000000800  4242  I   R 789442856 + 8 [fio]\n"
        "  8,16   0        3     0.000001500  4242  D   R 789442856 + 8 [fio]\n"
        "  8,16   0        4     0.000091500     0  C   R 789442856 + 8 [0]\n"),
    "warm.disksim.txt": "0.000000 0 8 8 1\n1.500000 0 64 8 0\n",
    "warm.inflight.blkparse.txt": _many_in_flight(),
}


def _ingest(tmp: Path) -> None:
    """Every trace parser with a kernel, on a tiny input of its format: the blktrace binary
    decoder, the blkparse and tracefs text parsers (the shipped tracefs sample), the field
    parser of the ASCII formats, and, where tracefs is readable, capture's ring-buffer page
    decoder (with this kernel's own event formats). A format left out compiled silently, a
    second or so, the first time a person ingested it (measured: a 1,000-request blktrace
    file 1.45 s, then 0.65 s; a blkparse text 1.68 s, then 0.68 s)."""
    from importlib import resources

    from blocklab.pipeline.ingest import ingest
    from blocklab.tools.bench import synth_blktrace

    sample = Path(str(resources.files("blocklab.traces"))) / "samples" / \
        "tracefs-fio-loop0-vda.txt.xz"
    inputs = [str(sample)] if sample.exists() else []
    synth_blktrace(tmp / "warm.blktrace.0", 16)
    inputs.append(str(tmp / "warm.blktrace.0"))
    for name, text in _TEXT_SAMPLES.items():
        (tmp / name).write_text(text)
        inputs.append(str(tmp / name))
    for i, src in enumerate(inputs):
        ingest([src], str(tmp / f"ingest{i}.parquet"))
    # a blktrace file with junk between two records, read with --skip-bad: the decoder looks
    # for the next record's magic (kernels/blktrace_decode.py find_magic)
    raw = (tmp / "warm.blktrace.0").read_bytes()
    (tmp / "warm-bad.blktrace.0").write_bytes(raw[:_BLK_RECORD] + b"junk!!!" + raw[_BLK_RECORD:])
    ingest([str(tmp / "warm-bad.blktrace.0")], str(tmp / "ingest-bad.parquet"), skip_bad=1)
    _capture_decoder()


#: The length of synth_blktrace's first record (a queue event: the 48-byte header, no payload).
_BLK_RECORD = 48


def _capture_decoder() -> None:
    """capture's page decoder (kernels/tracefs_raw.py) on no pages: the kernel compiles for
    its argument types, which depend neither on the pages nor on the events' formats. Where
    tracefs cannot be read (not mounted yet: make setup runs before anything mounts it), a
    64-bit kernel's page header and no event format give the same types, so a capture run once
    tracefs is mounted finds the decoder compiled."""
    from blocklab.pipeline.capture import RQ_EVENTS
    from blocklab.pipeline.tracefs import find_tracefs
    from blocklab.traces.errors import BlocklabError
    from blocklab.traces.formats.paired import ProcessNames
    from blocklab.traces.formats.tracefs_raw import (
        PageDecoder,
        PageHeader,
        parse_header_page,
        read_formats,
    )

    try:
        events = find_tracefs() / "events"
        header = parse_header_page((events / "header_page").read_text())
        formats = read_formats(events, list(RQ_EVENTS))
    except (BlocklabError, OSError):
        header, formats = PageHeader(commit_size=8, data_off=16), []
    page = 4096
    PageDecoder(header, formats, page, ProcessNames()).decode(
        np.zeros(page, dtype=np.uint8), 0, "warm")


def _mrc(tmp: Path) -> None:
    """The miss-ratio-curve kernels (kernels/mrc.py, kernels/mrc_stack.py), through the
    command's own call: exact, then sampled at a fixed size with the error against exact, on
    more distinct blocks than the first tables hold, so that they grow (renumbering,
    rehashing)."""
    from blocklab.pipeline.mrc import mrc
    from blocklab.traces import store

    n = 6000
    cols = store.empty_columns(n)
    cols.update(time_ns=np.arange(n, dtype=np.int64) * 1000, device=np.zeros(n, np.uint32),
                sector=(np.arange(n, dtype=np.int64) * 7919 % 5000) * 8,
                size_bytes=np.full(n, 4096, np.int64), op=(np.arange(n) % 2).astype(np.uint8),
                flags=np.zeros(n, np.uint16))
    path = tmp / "mrc.parquet"
    with store.TraceWriter(path, store.TraceMeta(source_format="warm")) as w:
        w.write(store.columns_to_batch(cols))
    mrc(path)
    mrc(path, sample_size=256, error=True)


def _risk(tmp: Path) -> None:
    """The data-loss kernels (kernels/risk.py) through ``blocklab risk``'s own call: RAID-6
    groups and a pool from their TOML with a stated window, with and without latent sector
    errors and scrubbing."""
    from blocklab.pipeline.risk import risk

    arr = _toml(tmp / "risk.toml", '[[group]]\nname = "g"\nlayout = "raid6"\nwidth = 6\n'
                'count = 2\ndrive = "savvio_15k3_300g"\n[[group]]\nname = "p"\n'
                'layout = "ddp"\nwidth = 11\npreservation = 1\npiece = "64MiB"\n'
                'drive = "intel_s3700_800g"\n')
    risk([str(arr)], window_s=3600.0, trials=64)
    risk([str(arr)], window_s=3600.0, trials=64, ure="1e-15", scrub_interval="168h")


#: The kernel families, in the order one process compiles them, with what a person is told.
FAMILIES: list[tuple[str, Callable[[Path], None]]] = [
    ("HDD model", _hdd_model),
    ("replay engine", _replay_engine),
    ("generators, SSDs, pools, failures and rebuilds", _generators_and_failures),
    ("trace parsers", _ingest),
    ("miss-ratio curves", _mrc),
    ("data-loss risk", _risk),
]

#: With two jobs, the families a second process compiles (in this order) while this one
#: compiles the rest: the HDD model first, ready before the engine's compile needs it; the
#: replays of the generators family need the whole engine, so they stay with it here.
SIDE = ("HDD model", "trace parsers", "miss-ratio curves", "data-loss risk")


def _start_lane(names: list[str]) -> subprocess.Popen[bytes]:
    """A second process compiling the families ``names`` into this process's kernel cache."""
    args = [sys.executable, "-m", "blocklab.tools.warm", "-q", "--cache-folder", cache_folder()]
    for name in names:
        args += ["--family", name]
    return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def cache_folder() -> str:
    from blocklab.kernels._jit import cache_folder as folder

    return folder()


def warm(progress: Callable[[str, int, int], None] | None = None, jobs: int | None = None,
         only: list[str] | None = None) -> float:
    """Compile (or load) every kernel family (or those named in ``only``); returns the seconds
    it took. ``progress`` is told (family, index, count) before each. The stamp is written
    only when every family has run (``only`` not given).

    With ``jobs`` of 2 or more (the default on a machine of two cores or more), the families
    in ``SIDE`` compile in a second process into the same cache while the others (the replay
    engine: about two thirds of the compile) compile here. Then this process runs the side's
    families too: it loads them from the cache in a second or so, and compiles whatever the
    second process did not leave there (it failed, or two processes wrote one cache index at
    once and one entry was lost), so the stamp is only written when every kernel is in the
    cache.
    """
    t0 = time.perf_counter()
    jobs = min(2, os.cpu_count() or 1) if jobs is None else jobs
    families = [(n, f) for n, f in FAMILIES if only is None or n in only]
    side = None
    here = [(n, f) for n, f in families if n not in SIDE]
    there = [(n, f) for n, f in families if n in SIDE]
    if jobs > 1 and here and there:
        side = _start_lane([n for n, _f in there])
        families = here + there  # this process's share first, then the side's, from the cache
    try:
        with tempfile.TemporaryDirectory(prefix="blocklab-warm-") as tmp:
            for i, (name, run) in enumerate(families):
                if side is not None and name in SIDE:
                    side.wait()
                if progress is not None:
                    progress(name, i, len(families))
                run(Path(tmp))
    finally:
        if side is not None and side.poll() is None:
            side.kill()
            side.wait()
    if only is None:
        path = _stamp()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{_warm_set()} compiled in {time.perf_counter() - t0:.1f} s\n")
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m blocklab.tools.warm",
                                 description="compile every family of blocklab's kernels")
    ap.add_argument("-q", "--quiet", action="store_true")
    ap.add_argument("-j", "--jobs", type=int, default=None,
                    help="processes compiling at once (default: 2 on two cores or more)")
    ap.add_argument("--family", action="append", choices=[n for n, _f in FAMILIES],
                    help=argparse.SUPPRESS)  # a second process's share (``warm``)
    ap.add_argument("--cache-folder", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cache_folder:  # before any kernel is defined: Numba reads it then
        from blocklab.kernels._jit import use_cache_folder

        use_cache_folder(args.cache_folder)

    def say(name: str, i: int, n: int) -> None:
        if not args.quiet:
            print(f"blocklab: compiling kernels {i + 1}/{n}: {name}", file=sys.stderr,
                  flush=True)

    secs = warm(say, jobs=1 if args.family else args.jobs, only=args.family)
    if not args.quiet:
        print(f"blocklab: kernels ready ({secs:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
