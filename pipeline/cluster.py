"""Dask distributed for the commands that spread replays over workers (``sweep``, and
``replay --workers``): connect to a cluster or start a local one, compile the kernels once
before the workers load them, and the workers' preload."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from blocklab.traces import safety
from blocklab.traces.errors import BlocklabError

# ---------------------------------------------------------------------------------------------
# the Numba cache: compile once, before the workers start


def numba_cache_base() -> str:
    """The folder every process's kernel cache lives under (kernels/_jit.py adds a hash of the
    kernel sources): what NUMBA_CACHE_DIR should be on the workers."""
    from blocklab.kernels import _jit

    return os.path.dirname(_jit._cache_dir())


def warm_kernels() -> float:
    """Replay a tiny trace in this process so that the engine's kernels are compiled and in the
    on-disk cache before workers load them; returns the seconds it took."""
    from blocklab.traces.store import TraceMeta, TraceWriter, columns_to_batch, empty_columns

    from .replay import replay

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="blocklab-warm-") as tmp:
        d = Path(tmp)
        n = 32
        cols = empty_columns(n)
        cols["time_ns"] = np.arange(n, dtype=np.int64) * 1_000_000
        cols["sector"] = (np.arange(n, dtype=np.int64) * 997 % 4096) * 8
        cols["size_bytes"] = np.full(n, 4096, np.int64)
        cols["op"] = (np.arange(n) % 3 == 0).astype(np.uint8)
        with TraceWriter(d / "t.parquet", TraceMeta(source_format="warm-up")) as w:
            w.write(columns_to_batch(cols))
        (d / "a.toml").write_text('group = [{name = "g", layout = "raid5", width = 3, '
                                  'drive = "atlas10k"}]\ncontroller = {cache = "1MiB"}\n')
        replay(d / "t.parquet", d / "a.toml", d / "run")
        replay(d / "t.parquet", d / "a.toml", d / "run2", closed_loop=2, drive_ops=True)
    return time.perf_counter() - t0


def warm_on_worker() -> dict[str, Any]:
    return {"host": socket.gethostname(), "seconds": warm_kernels(),
            "cache": numba_cache_base()}




#: Dask runs a task again elsewhere when its worker dies, this many times: a parallel replay's
#: segments' ``retries`` (for a task that raises: none does, run_segment returns its errors)
#: and the local cluster's ``distributed.scheduler.allowed-failures``, which counts the workers
#: that died running it (a user's scheduler keeps its own; Dask's default is also 3).
RETRIES = 3

#: Worker processes of a local cluster, at most, per core: 100,000 sat silent for 10 minutes
#: growing to 3.2 GB, --timeout no help (the cluster starts its workers before it answers).
LOCAL_PER_CORE = 4


def check_address(scheduler: str, timeout: float) -> None:
    """One line, at once, for an address no Dask scheduler can be at: a malformed one (Dask's
    own words, "missing port number", came as "no Dask scheduler answered within 2 s"), and a
    TCP address where nothing listens (Dask retried for the whole --timeout and said "Timed
    out"), and an empty one (it ran a local cluster; a review, 2026-11-30). Anything else is
    left to Dask's connection."""
    if not scheduler.strip():
        raise BlocklabError("--scheduler: an empty address (give the scheduler's, as "
                            "tcp://HOST:PORT, or leave --scheduler out for a local cluster)")
    from distributed.comm import registry
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, loc = parse_address(scheduler)  # (tcp:// when none is given, as Dask does)
        if scheme not in registry.backends:
            raise ValueError(f"Dask speaks {', '.join(sorted(registry.backends))}, not {scheme}")
        if scheme != "tcp":
            return  # (tls, ws, ucx: Dask's to say)
        host, port = parse_host_port(loc)
    except (ValueError, TypeError) as e:
        raise BlocklabError(f"--scheduler {scheduler}: not a Dask scheduler's address "
                            f"({first_line(e)}); give it as tcp://HOST:PORT") from None
    try:
        with socket.create_connection((host, port), timeout=min(timeout, 5.0)):
            pass
    except ConnectionRefusedError:
        raise BlocklabError(f"--scheduler {scheduler}: connection refused (nothing listens "
                            "there: start the scheduler, or check the address)") from None
    except OSError:
        return  # (unreachable, slow, a name to resolve: Dask tries within --timeout)


def _client(Client: Any, scheduler: str, timeout: float) -> Any:
    """A client of the scheduler at ``scheduler``, within ``timeout`` (and a few seconds),
    or one line. Dask's own timeout covers the connection, not its handshake: a port that
    accepts and then says nothing (an HTTP server) hung for ten minutes, and one that speaks
    first (an SSH banner) made Dask read its bytes as a frame length of 2.8 EiB and die with
    a traceback. So the client is made in a thread the command stops waiting for."""
    box: dict[str, Any] = {}

    def attempt() -> None:
        try:
            box["client"] = Client(scheduler, timeout=f"{timeout}s", set_as_default=False)
        except BaseException as e:  # (a MemoryError from a frame length that is not one)
            box["error"] = e

    t = threading.Thread(target=attempt, name="dask-connect", daemon=True)
    t.start()
    deadline = time.monotonic() + timeout + 5
    while t.is_alive() and time.monotonic() < deadline:
        t.join(0.05)
    if t.is_alive():
        raise BlocklabError(f"--scheduler {scheduler}: no Dask scheduler answered within "
                            f"{timeout:g} s (the address took the connection but did not "
                            "speak Dask's protocol)")
    if "error" in box:
        e = box["error"]
        if isinstance(e, MemoryError):
            raise BlocklabError(f"--scheduler {scheduler}: what answered is not a Dask "
                                "scheduler (its first bytes are not Dask's protocol)")
        raise BlocklabError(f"--scheduler {scheduler}: no Dask scheduler answered within "
                            f"{timeout:g} s ({first_line(e)})")
    return box["client"]


def connect(scheduler: str | None, workers: int | None, timeout: float) -> tuple[Any, Any]:
    """A Dask client: to ``scheduler`` (the user's cluster) or to a new LocalCluster on
    loopback with ``workers`` single-threaded worker processes (default: one per core)."""
    import logging

    from distributed import Client, LocalCluster

    # a scheduler that goes away mid-command: the client logs each reconnect attempt's
    # traceback at ERROR (40 lines on standard error) while the command's futures fail with
    # scheduler-connection-lost, which the command reports in one line (parallel.py, sweep.py)
    logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
    if scheduler is not None:
        check_address(scheduler, timeout)
    if scheduler:
        # the address must answer within ``timeout``; Dask logs each retry otherwise
        logging.getLogger("distributed").setLevel(logging.CRITICAL)
        try:
            client = _client(Client, scheduler, timeout)
        finally:
            logging.getLogger("distributed").setLevel(logging.WARNING)
        if workers:
            try:
                client.wait_for_workers(workers, timeout=timeout)
            except (OSError, TimeoutError) as e:
                have = len(client.scheduler_info().get("workers", {}))
                client.close()
                raise BlocklabError(f"--workers {workers}: the cluster at {scheduler} has "
                                    f"{have} worker(s) after {timeout:g} s ({first_line(e)})"
                                    ) from None
        return client, None
    cores = os.cpu_count() or 1
    if workers and workers > LOCAL_PER_CORE * cores:
        raise BlocklabError(f"--workers {workers}: a local cluster here runs at most "
                            f"{LOCAL_PER_CORE * cores} worker processes ({LOCAL_PER_CORE} a core: "
                            "more only share the cores, each with its own memory); for more, "
                            "give --scheduler of a cluster that has them")
    n = workers or cores
    # the workers' scratch folder (what they spill, their locks): owner-only and removed with
    # the command, where Dask left an empty 0755 $TMPDIR/dask-scratch-space after every run
    import dask

    scratch = tempfile.mkdtemp(prefix="blocklab-dask-")
    atexit.register(shutil.rmtree, scratch, True)
    safety.on_stop(lambda: shutil.rmtree(scratch, ignore_errors=True))
    with dask.config.set({"temporary-directory": scratch,  # (the scheduler's, here)
                          "distributed.nanny.pre-spawn-environ": _worker_environ(),
                          # a task whose worker died is run again RETRIES times (Dask's
                          # default is 3 too: set, so that RETRIES says what happens)
                          "distributed.scheduler.allowed-failures": RETRIES}):
        cluster = _start_local(lambda: LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None, worker_dashboard_address=None,
            # the scheduler's HTTP routes (health, metrics) otherwise take port 8787, warning
            # when it is taken: any free loopback port instead
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            # one cache for every worker: the client compiled into it already
            env={"NUMBA_CACHE_DIR": numba_cache_base()},
            # Ctrl-C on a terminal reaches the workers too; the client stops them (dask_setup)
            preload=["blocklab.pipeline.cluster"],
            local_directory=scratch,
            # logging.CRITICAL: a segment's or a point's error comes back to the client, which
            # stops on one line; the workers' own ERROR logs printed its traceback first
            silence_logs=50))
    close = cluster.close

    def close_and_clear(*args: Any, **kwargs: Any) -> Any:
        try:
            return close(*args, **kwargs)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    cluster.close = close_and_clear  # type: ignore[method-assign]  # (the scratch goes too)
    client = Client(cluster, set_as_default=False)
    return client, cluster


def _start_local(make: Callable[[], Any]) -> Any:
    """``make()``, the local cluster, run in a thread that blocks SIGINT, so that the worker
    processes it starts (from it, or from the event loop's thread it creates) start with SIGINT
    blocked: a thread's signal mask passes to the threads it creates and to a forked child,
    and exec keeps it. A terminal's Ctrl-C goes to the whole process group; during the
    cluster's start it reached the workers while Python imported Dask in them, before their
    preload (``dask_setup``) ignores it, and 17 to 86 lines of KeyboardInterrupt tracebacks
    came with the command's one line (a review, 2026-11-30). The main thread keeps SIGINT: a
    stop there ends the command as before, and the workers, whose parent is gone, end too.

    Failures of the start (a worker killed while it starts: "Nanny failed to start") are one
    line, a fault of the machine (exit 1), not a traceback."""
    _start_resource_tracker()
    box: dict[str, Any] = {}

    def start() -> None:
        try:
            box["cluster"] = make()
        except BaseException as e:  # (given to the main thread, which reports it)
            box["error"] = e

    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        t = threading.Thread(target=start, name="blocklab-cluster-start", daemon=True)
        t.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    while t.is_alive():
        t.join(0.05)  # (short waits: a signal stops the command within one)
    if "error" in box:
        e = box["error"]
        raise safety.SystemFault(f"the local Dask cluster did not start: {type(e).__name__}: "
                                 f"{first_line(e)}") from None
    return box["cluster"]


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (the process that removes the semaphores a
    dead process leaves) now, in the main thread, with its standard error on /dev/null:

    - CPython's ``resource_tracker.ensure_running``, when it starts the tracker, blocks
      SIGINT and SIGTERM in the calling thread around the spawn and then unblocks them,
      whatever they were before. Called by the cluster's event loop thread for its first
      worker, it undid ``_start_local``'s mask there, and every worker started with SIGINT
      open (seen with strace). Running already, the tracker is not started again.
    - When the command stops while the workers start, the tracker removes what they left
      and printed two lines about it ("There appear to be 12 leaked semaphore objects to
      clean up at shutdown") after the command's one line.

    Standard error is pointed elsewhere only for the instant of the spawn; a line another
    thread writes then is lost (none does: the cluster has not started)."""
    from multiprocessing import resource_tracker

    saved = os.dup(2)
    quiet = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(quiet, 2)
        resource_tracker.ensure_running()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(quiet)


def _worker_environ() -> dict[str, Any]:
    """Dask's environment for a new worker process less its ``MALLOC_TRIM_THRESHOLD_``
    (65,536): any value set there also turns off glibc's sliding mmap threshold, so every
    allocation of 128 KiB or more (a chunk's arrays, every replay step) became a fresh mmap
    whose pages the kernel zeroes on first touch and unmaps on free. Measured on a worker, a
    2 M-request replay took 5x the page faults (about 100,000 against 20,000) and twice the
    system time; a segment's own memory is bounded, so returning it at once saves nothing.
    The thread limits (OMP, MKL, OpenBLAS: one a worker) stay."""
    import dask
    import distributed  # noqa: F401  (its defaults in dask.config)

    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", {}))
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    return env


def dask_setup(worker: Any) -> None:
    """Preload of the local cluster's workers: ignore SIGINT (a terminal's Ctrl-C goes to the
    whole process group); the client cancels the tasks and closes the workers itself."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


#: Who hears what the cluster's set-up is doing (the CLI registers standard error): a user's
#: workers compile the kernels where their cache lacks them, which a review found silent for
#: 90 s ("no silent compile")
NOTICES: list[Callable[[str], None]] = []


def notice(text: str) -> None:
    for say in NOTICES:
        say(text)


def warm_cluster(client: Any, local: bool) -> int:
    """Compile (or load) the kernels on the cluster's machines before tasks run: on a local
    cluster the workers share this process's cache (warm it first with ``warm_kernels``); on a
    user's cluster each machine compiles once, on one of its workers, and ``notice`` says so
    before and after. Returns the workers."""
    info = client.scheduler_info()
    workers = info.get("workers", {})
    if not local:
        hosts: dict[str, str] = {}
        for addr, w in workers.items():
            hosts.setdefault(str(w.get("host", addr)), addr)
        if hosts:
            notice(f"loading the kernels on the cluster's {len(hosts)} machine(s): a machine "
                   "whose kernel cache lacks them compiles them first (about a minute)")
            done = client.run(warm_on_worker, workers=list(hosts.values()))
            slow = max((float(r["seconds"]) for r in done.values()), default=0.0)
            notice(f"kernels ready on the cluster in {slow:.1f} s")
    return len(workers)


def first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
