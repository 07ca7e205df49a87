"""``blocklab sweep``: one replay per point of a grid of configurations, on Dask distributed.

A sweep file (TOML: a base array configuration, a base trace, replay options and axes; its
format and an example are in pipeline/sweepfile.py, which reads it) gives the grid of points.
Each point is one Dask task: it writes its array configuration to ``OUT/<point>.toml``, replays
into the run folder ``OUT/<point>/`` (``replay`` writes it under a temporary name and renames
it when complete), then writes its headline figures (the ``compare`` query, plus the rebuild
window of ``rebuild-windows`` when the run has failures) as one row of Parquet at
``OUT/summary/<axis>=<value>/.../<point>.parquet`` (hive partitioning; written under a
temporary name and renamed). A point is finished when both exist; a rerun skips finished
points, writes a missing summary from an existing run folder, and retries failed points. A
failed point leaves ``OUT/<point>.error.json`` and the sweep goes on.

Point ids are the first 10 hex digits of the SHA-256 of the point's axis values (keys sorted),
so they do not depend on the axes' order or on the other points.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from blocklab.traces.errors import BlocklabError
from blocklab.traces.safety import OutputBusy, clean_temporaries, hold_lock, make_folders
from blocklab.traces.schema import POINT_SCHEMA
from blocklab.traces.store import atomic_output

from . import runmeta

# the cluster helpers lived here first; names kept for the callers that import them from here
from .cluster import (  # noqa: F401
    connect,
    dask_setup,
    first_line,
    numba_cache_base,
    warm_cluster,
    warm_kernels,
    warm_on_worker,
)
from .sweepfile import Point, Sweep, load_sweep, toml_text, value_text

SWEEP_VERSION = 1


# ---------------------------------------------------------------------------------------------
# one point (runs on a Dask worker)


@dataclasses.dataclass(frozen=True)
class Task:
    """What a worker needs for one point (plain data: it travels to the worker)."""

    point: str
    out: str  # the sweep's output folder (absolute)
    config_toml: str
    trace: str
    options: dict[str, Any]
    summary: str  # path of the summary file, relative to OUT/summary
    name: str
    values_json: str
    replay: bool = True  # False: the run folder exists; write the summary only
    topic: str = ""  # Dask event topic for "started" messages


def _summary_row(task: Task, run: Path) -> pa.Table:
    from .query import run_query

    meta = runmeta.read(run)
    cmp = run_query([str(run)], "compare").table
    col = [c for c in cmp.column_names if c != "metric"][0]
    metrics = dict(zip(cmp.column("metric").to_pylist(), cmp.column(col).to_pylist(),
                       strict=True))
    window = done = None
    if (run / "events.parquet").is_file():
        rw = run_query([str(run)], "rebuild-windows").table
        if rw.num_rows:
            ws = [w for w in rw.column("window_s").to_pylist() if w is not None]
            window = max(ws) if ws else None
            done = all(bool(d) for d in rw.column("rebuild_done").to_pylist())
    row: dict[str, Any] = {"run": task.point, "point_name": task.name,
                           "axis_values": task.values_json}
    for f in POINT_SCHEMA:
        if f.name in metrics:
            v = metrics[f.name]
            row[f.name] = None if v is None or (isinstance(v, float) and not math.isfinite(v)) \
                else (int(round(v)) if pa.types.is_integer(f.type) else float(v))
    row.update(rebuild_window_s=window, rebuild_done=done,
               replay_s=float(meta.elapsed_s or 0.0), host=socket.gethostname())
    return pa.Table.from_pylist([row], schema=POINT_SCHEMA)


def run_point(task: Task) -> dict[str, Any]:
    """Replay one point and write its summary; never raises for the point's own failure (the
    result says what went wrong), so one bad point cannot stop the sweep."""
    if task.topic:
        with contextlib.suppress(ValueError, ImportError):
            from distributed import get_worker

            get_worker().log_event(task.topic, {"point": task.point})
    t0 = time.perf_counter()
    out = Path(task.out)
    try:
        run = out / task.point
        if task.replay:
            from .replay import replay

            cfg = out / f"{task.point}.toml"
            with atomic_output(cfg, record=False) as tmp:  # (the point's working file)
                tmp.write_text(task.config_toml)
            replay(task.trace, cfg, run, **task.options)
        dest = out / "summary" / task.summary
        make_folders(dest.parent)  # (owner only, as the runs)
        table = _summary_row(task, run)
        with atomic_output(dest) as tmp:
            pq.write_table(table, tmp)
        return {"point": task.point, "ok": True, "seconds": time.perf_counter() - t0}
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0] or type(e).__name__
        return {"point": task.point, "ok": False, "error": first, "type": type(e).__name__,
                "traceback": traceback.format_exc(), "host": socket.gethostname(),
                "seconds": time.perf_counter() - t0}


# ---------------------------------------------------------------------------------------------
# the output folder


def _error_path(out: Path, point: str) -> Path:
    return out / f"{point}.error.json"


@dataclasses.dataclass
class PointState:
    point: Point
    state: str  # "finished", "summarize", "run"
    retraced: bool = False  # its run folder replayed another trace than the one there now


def survey(sweep: Sweep, out: Path, hashes: dict[str, str] | None = None) -> list[PointState]:
    """Which points are finished, need only their summary, or need a replay.

    A point's run folder counts only if it replayed the bytes its trace has now (meta.json's
    trace sha256): a trace rewritten at the same path between two runs of a sweep was not
    noticed, and the summary then mixed runs of both traces. Such a point is replayed again
    (``retraced``). Each trace is hashed once (``hashes``, path -> sha256, kept by the
    caller): a read of the whole file, about a second a GB here."""
    from .replay import file_sha256

    hashes = {} if hashes is None else hashes
    states = []
    for p in sweep.points:
        run_done = (out / p.id / "meta.json").is_file()
        retraced = False
        if run_done:
            try:
                recorded = runmeta.read(out / p.id).trace
            except BlocklabError:
                # unreadable: not finished; the replay will not replace a folder that is
                # not a run folder, so the point fails naming it (tests/test_sweep.py)
                recorded = None
            if recorded is None:
                run_done = False
            else:
                if p.trace not in hashes:
                    hashes[p.trace] = file_sha256(Path(p.trace))
                retraced = recorded.sha256 != hashes[p.trace]
                run_done = not retraced
        summ = (out / "summary" / p.partition(sweep.axes)).is_file()
        states.append(PointState(p, "finished" if run_done and summ else
                                 "summarize" if run_done else "run", retraced))
    return states


def _check_out(sweep: Sweep, out: Path) -> None:
    """An existing output folder must hold this sweep (the same base and axes)."""
    if out.exists() and not out.is_dir():
        raise BlocklabError(f"-o {out}: exists and is not a folder")
    f = out / "sweep.json"
    if not f.is_file():
        if out.is_dir() and any(out.iterdir()):
            raise BlocklabError(f"-o {out}: the folder is not empty and holds no sweep "
                                "(sweep.json); give a new or empty folder")
        return
    try:
        old = runmeta.json_object(f, str(f))
    except json.JSONDecodeError as e:
        raise BlocklabError(f"{f}: line {e.lineno}: not JSON ({e.msg})") from None
    if old.get("fingerprint") != sweep.fingerprint():
        raise BlocklabError(f"-o {out}: holds a sweep of another base configuration, trace, "
                            "options or axes (sweep.json); give a new folder (adding values "
                            "to an axis is fine)")


def _lock(out: Path) -> contextlib.AbstractContextManager[None]:
    """The output folder's lock (``.sweep.lock`` inside it), held for the whole run and
    removed at its end, as every other output's lock is (docs/bad-input.md: no lock file left;
    a second sweep that opened it meanwhile locks the file that is there then: safety.py
    ``_acquire``)."""
    return hold_lock(out / ".sweep.lock", f"-o {out}: another blocklab sweep is writing into "
                     "it")


def _clean_temporaries(out: Path) -> list[str]:
    """Remove what an interrupted run left: replay's and the summaries' temporary names
    (``.NAME.tmp-PID``). Only called while holding the folder's lock."""
    return clean_temporaries(out)


def _clear_after_workers(out: Path) -> None:
    """After a stop, once a local cluster's workers are gone: what the points in flight left
    (their run folders' temporaries and locks, ``.POINT.tmp-PID``, ``.POINT.lock``) is no
    one's, and goes. A remote cluster's workers may still be writing: a later run cleans."""
    with contextlib.suppress(BlocklabError, OSError), _lock(out):
        _clean_temporaries(out)
        for f in out.glob(".*.lock"):
            if f.name != ".sweep.lock":
                with contextlib.suppress(OutputBusy), hold_lock(f, "", remove=True):
                    pass


def _write_json(path: Path, obj: Any) -> None:
    with atomic_output(path) as tmp:  # (owner only, as the runs beside it)
        tmp.write_text(json.dumps(obj, indent=2, default=str) + "\n")


def _record_sweep(sweep: Sweep, out: Path) -> None:
    """sweep.json: the base, the axes and every point this folder has been asked for."""
    f = out / "sweep.json"
    old = json.loads(f.read_text()) if f.is_file() else {}
    points = dict(old.get("points") or {})
    for p in sweep.points:
        points[p.id] = {"name": p.name, "values": p.values}
    _write_json(f, {
        "sweep_version": SWEEP_VERSION, "fingerprint": sweep.fingerprint(),
        "sweep_file": str(sweep.path.resolve()), "mode": sweep.mode,
        "axes": [{"key": a.key, "name": a.name, "values": list(a.values)} for a in sweep.axes],
        "base": {"config": sweep.base_config, "trace": sweep.base_trace,
                 "options": sweep.base_options},
        "points": points,
    })


# ---------------------------------------------------------------------------------------------
# running a sweep


@dataclasses.dataclass
class Status:
    """Progress of a sweep run (for the progress bar)."""

    total: int  # points to run this time
    done: int = 0
    failed: int = 0
    running: int = 0
    skipped: int = 0  # finished earlier


@dataclasses.dataclass
class SweepResult:
    out: str
    points: int
    skipped: int
    done: int
    failed: list[dict[str, Any]]
    workers: int
    scheduler: str
    warm_s: float
    elapsed_s: float  # the whole run: checks, cluster start, warm-up, points
    points_s: float  # from the first point submitted to the last one done
    removed_temporaries: list[str]
    retraced: int = 0  # points replayed again: their trace's bytes changed since they ran

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class SweepInterrupted(BlocklabError):
    """Ctrl-C: the points finished so far are kept; rerunning finishes the rest."""


def run_sweep(path: str | os.PathLike[str], output: str | os.PathLike[str],
              scheduler: str | None = None, workers: int | None = None,
              timeout: float = 10.0, progress: Callable[[Status], None] | None = None,
              ) -> SweepResult:
    """Run every unfinished point of the sweep file ``path`` into the folder ``output``."""
    t0 = time.perf_counter()
    if workers is not None and workers < 1:
        raise BlocklabError(f"--workers must be at least 1, found {workers}")
    sweep = load_sweep(path)
    out = Path(output).resolve()
    _check_out(sweep, out)
    hashes: dict[str, str] = {}
    states = survey(sweep, out, hashes) if out.is_dir() else [PointState(p, "run") for p in
                                                                sweep.points]
    todo = [s for s in states if s.state != "finished"]
    retraced = sum(s.retraced for s in states)
    status = Status(total=len(todo), skipped=len(states) - len(todo))
    if not todo:
        return SweepResult(str(out), len(states), status.skipped, 0, [], 0, scheduler or "",
                           0.0, time.perf_counter() - t0, 0.0, [])

    client, cluster = connect(scheduler, workers, timeout)
    interrupted = False
    try:
        # Compile (or load) the kernels here first: the workers then load them from the cache.
        warm_s = warm_kernels()
        make_folders(out)
        with _lock(out):
            removed = _clean_temporaries(out)
            # summaries whose run folder is gone would show a point that is not there
            for s in states:
                if s.state == "run":
                    (out / "summary" / s.point.partition(sweep.axes)).unlink(missing_ok=True)
            _record_sweep(sweep, out)
            nworkers = warm_cluster(client, local=cluster is not None)
            t_points = time.perf_counter()
            failed = _submit(client, sweep, out, todo, status, progress)
            points_s = time.perf_counter() - t_points
            # every task has ended: what is left under a temporary name is a dead worker's
            removed += _clean_temporaries(out)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    if interrupted:
        if cluster is not None:
            _clear_after_workers(out)
        # counted on disk: a point may have finished while the workers were stopping
        left = sum(s.state != "finished" for s in survey(sweep, out, hashes))
        raise SweepInterrupted(
            f"interrupted: {len(states) - left} of {len(states)} points finished in {out}; "
            "run the same command again to finish the rest")
    return SweepResult(str(out), len(states), status.skipped, status.done, failed, nworkers,
                       scheduler or "local", warm_s, time.perf_counter() - t0, points_s, removed,
                       retraced)


def _submit(client: Any, sweep: Sweep, out: Path, todo: list[PointState], status: Status,
            progress: Callable[[Status], None] | None) -> list[dict[str, Any]]:
    from distributed import as_completed

    topic = f"blocklab-sweep-{uuid.uuid4().hex[:12]}"
    lock = threading.Lock()
    started: set[str] = set()
    finished: set[str] = set()

    def report() -> None:
        if progress is not None:
            progress(dataclasses.replace(status))

    def on_start(event: tuple[float, dict[str, Any]]) -> None:
        pid = str(event[1].get("point"))
        with lock:
            if pid in finished or pid in started:
                return
            started.add(pid)
            status.running = len(started)
        report()

    client.subscribe_topic(topic, on_start)
    futures = {}
    for s in todo:
        p = s.point
        task = Task(point=p.id, out=str(out), config_toml=toml_text(p.config), trace=p.trace,
                    options=p.options, summary=p.partition(sweep.axes), name=p.name,
                    values_json=json.dumps(p.values, sort_keys=True),
                    replay=s.state == "run", topic=topic)
        fut = client.submit(run_point, task, key=f"blocklab-point-{p.id}-{topic[-12:]}",
                            pure=False)
        futures[fut] = p
    report()
    failed: list[dict[str, Any]] = []
    try:
        for fut in as_completed(list(futures), loop=client.loop):
            p = futures[fut]
            try:
                r = fut.result()
            except Exception as e:  # the worker died (KilledWorker) or the task was lost
                r = {"point": p.id, "ok": False, "error": first_line(e),
                     "type": type(e).__name__, "traceback": "", "host": ""}
            with lock:
                finished.add(p.id)
                started.discard(p.id)
                status.running = len(started)
                if r["ok"]:
                    status.done += 1
                else:
                    status.failed += 1
            if r["ok"]:
                _error_path(out, p.id).unlink(missing_ok=True)
            else:
                rec = {"point": p.id, "name": p.name, "values": p.values,
                       "error": f"point {p.id} ({p.name}): {r['error']}", "type": r["type"],
                       "host": r.get("host", ""), "traceback": r.get("traceback", ""),
                       "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
                _write_json(_error_path(out, p.id), rec)
                failed.append({k: rec[k] for k in ("point", "name", "error")})
            report()
    except BaseException:
        client.cancel(list(futures))
        raise
    finally:
        with contextlib.suppress(Exception):
            client.unsubscribe_topic(topic)
    return failed


# ---------------------------------------------------------------------------------------------
# reading a sweep's output back (report, query)


def is_sweep(folder: str | os.PathLike[str]) -> bool:
    return (Path(folder) / "sweep.json").is_file()


def read_points(folder: str | os.PathLike[str]) -> tuple[dict[str, Any], pa.Table]:
    """sweep.json and the summary rows of a sweep output folder (axes typed as in the sweep
    file: numbers stay numbers), read with DuckDB's hive partitioning."""
    import duckdb

    root = Path(folder)
    try:
        info = runmeta.json_object(root / "sweep.json", f"{root}/sweep.json")
    except (OSError, json.JSONDecodeError) as e:
        raise BlocklabError(f"{root}/sweep.json: {first_line(e)}") from None
    files = sorted((root / "summary").rglob("*.parquet")) if (root / "summary").is_dir() else []
    if not files:
        return info, POINT_SCHEMA.empty_table()
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        glob = str(root / "summary" / "**" / "*.parquet").replace("'", "''")
        rel = con.sql(f"SELECT * FROM read_parquet('{glob}', hive_partitioning = true, "
                      "union_by_name = true) ORDER BY run")
        fetch = getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table
        table = fetch()
    finally:
        con.close()
    # hive partition values are text; the exact values are in axis_values
    vals = [json.loads(v) for v in table.column("axis_values").to_pylist()]
    for a in info.get("axes", []):
        name = a["name"]
        if name in table.column_names:
            col = [v.get(name) for v in vals]
            i = table.column_names.index(name)
            kinds = {type(x) for x in col if x is not None}
            if kinds == {int, float}:
                arr = pa.array([None if x is None else float(x) for x in col], pa.float64())
            elif len(kinds) == 1 and kinds <= {int, float, str, bool}:
                arr = pa.array(col)
            else:
                arr = pa.array([None if x is None else value_text(x) for x in col])
            table = table.set_column(i, name, arr)
    return info, table
