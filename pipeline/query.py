"""``blocklab query``: DuckDB views over run folders and traces, and the named queries.

Inputs are run folders (``blocklab replay -o``), folders that contain run folders at any depth
(found by their ``meta.json``; a sweep's output), and trace files (``blocklab ingest``). Every
input becomes rows of views that carry a ``run`` column naming it: a run folder given on the
command line is named as given, one found inside a given folder by its path relative to that
folder, a trace by its path as given.

Views (columns of the run-folder files in ``traces/schema.py`` RUN_COLUMNS, of the trace in
COLUMNS, each with ``run`` first):

- ``ios``, ``drive_ops``, ``drive_busy``, ``events``: the run folders' Parquet files; a run
  without the optional ``drive_ops.parquet`` or ``events.parquet`` adds no rows (and with none
  the view is an empty table of its schema);
- ``runs``: one row per run folder from meta.json (path, blocklab_version,
  run_schema_version, trace_path, array_path, interval_ns, requests, elapsed_s, options and
  the whole meta.json as JSON text);
- ``drives``: the drives of each run (drive, group, role, model) from meta.json;
- ``trace``: the traces' rows, plus ``request`` (the row number in the file, as ios.request);
- ``traces``: one row per trace (path, source format, linux_devices, start_utc);
- ``requests``: host requests of both kinds, ``run, time_ns, device, sector, size_bytes, op,
  latency_ns``: the traces' rows and the runs' ios (arrival time as ``time_ns``, device 0);
- ``device_ios``: requests completed at a device, ``run, device, devno, op, arrival_ns,
  issue_ns, complete_ns, size_bytes, merges``: the traces' rows (device ``major,minor`` for
  Linux traces; completion from ``complete_ns``, else ``time_ns + latency_ns``; rows with
  neither have a null ``complete_ns``), the runs' host requests (device ``host``) and drive
  operations (device ``drive N``, arrival when queued at the drive, issue when started).

The named queries are ``queries/*.sql`` (their headers: ``pipeline/query_catalog.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from blocklab import queries
from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import COLUMNS, RUN_COLUMNS, RUN_SCHEMA_VERSION, SECTOR_BYTES
from blocklab.traces.store import open_trace

from . import runmeta as RM
from .damage import failure_line
from .query_catalog import QueryInfo, catalog, literal_value, parse_header, placeholders
from .spill import spill_folder

#: Run-folder files a run must have, and those it may lack (an empty table then).
REQUIRED_FILES = ("ios",)
OPTIONAL_FILES = ("drive_ops", "drive_busy", "events")
#: Views each kind of input provides (``requests`` comes from both).
RUN_VIEWS = ("ios", "drive_ops", "drive_busy", "events", "runs", "drives")
TRACE_VIEWS = ("trace", "traces")
BOTH_VIEWS = ("requests", "device_ios")


# ---------------------------------------------------------------------------------------------
# inputs


@dataclasses.dataclass(frozen=True)
class Source:
    """One input: a run folder or a trace file, and the name its rows carry in ``run``."""

    kind: str  # "run" or "trace"
    name: str
    path: Path
    #: the object of the run's meta.json as written, or the trace's file metadata
    meta: Mapping[str, Any] = dataclasses.field(default_factory=dict, compare=False)
    #: a run's meta.json as a record (None for a trace)
    run: RM.RunMeta | None = dataclasses.field(default=None, compare=False)


def _label(p: str) -> str:
    s = p.rstrip("/") or p
    return s or "."


def _find_runs(root: Path) -> list[Path]:
    """Run folders at or under ``root`` (a folder with meta.json is a run; not descended),
    skipping hidden folders (temporary outputs are ``.NAME.tmp-PID``)."""
    found: list[Path] = []
    for here, dirs, files in os.walk(root):
        if "meta.json" in files:
            found.append(Path(here))
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    return sorted(found)


def _run_source(name: str, folder: Path) -> Source:
    """The run folder as a source: its meta.json read and checked (pipeline/runmeta.py), and
    its Parquet files present with the columns of this run schema version."""
    run, meta = RM.read_json(folder, name)
    for stem in REQUIRED_FILES:
        if not (folder / f"{stem}.parquet").is_file():
            raise BlocklabError(f"run {name}: {stem}.parquet: no such file")
    for stem in (*REQUIRED_FILES, *OPTIONAL_FILES):
        f = folder / f"{stem}.parquet"
        if not f.is_file():
            continue
        try:
            names = pq.read_schema(f).names
        except (pa.ArrowException, OSError) as e:  # (ArrowNotImplementedError too: a
            # flipped footer byte can name a type pyarrow does not implement; make fuzz)
            raise BlocklabError(f"run {name}: {stem}.parquet: not a Parquet file ({e})"
                                ) from None
        missing = [c for c in RUN_COLUMNS[stem] if c not in names]
        if missing:
            raise BlocklabError(f"run {name}: {stem}.parquet: lacks columns "
                                f"{', '.join(missing)} of run schema version "
                                f"{RUN_SCHEMA_VERSION}")
    return Source("run", name, folder, meta, run)


def find_sources(paths: Iterable[str | os.PathLike[str]]) -> list[Source]:
    """The run folders and traces that ``paths`` name (see the module docstring)."""
    out: list[Source] = []
    for raw in paths:
        given = os.fspath(raw)
        p = Path(given)
        if p.is_dir():
            if (p / "meta.json").is_file():
                name = _label(given)
                out.append(_run_source(name, p))
                continue
            runs = _find_runs(p)
            if not runs:
                raise BlocklabError(f"{given}: no run folder in it (a run folder has "
                                    "meta.json)")
            for r in runs:
                name = r.relative_to(p).as_posix()
                out.append(_run_source(name, r))
        elif p.is_file():
            try:
                _pf, meta = open_trace(p)
            except BlocklabError as e:
                if p.name == "meta.json":
                    raise BlocklabError(f"{given}: give the run folder, not its meta.json"
                                        ) from None
                raise BlocklabError(f"trace {e}") from None
            out.append(Source("trace", _label(given), p, dataclasses.asdict(meta)))
        else:
            raise BlocklabError(f"{given}: no such file or folder")
    seen: dict[str, Path] = {}
    for s in out:
        if s.name in seen and seen[s.name] != s.path:
            raise BlocklabError(f"two inputs are both named {s.name!r} ({seen[s.name]} and "
                                f"{s.path}): give them apart")
        seen[s.name] = s.path
    uniq: dict[tuple[str, str], Source] = {}
    for s in out:
        uniq.setdefault((s.kind, s.name), s)
    return list(uniq.values())


# ---------------------------------------------------------------------------------------------
# views


def _duck_type(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t) or pa.types.is_string(t):
        return "VARCHAR"
    return {pa.int64(): "BIGINT", pa.int32(): "INTEGER", pa.int16(): "SMALLINT",
            pa.int8(): "TINYINT", pa.uint64(): "UBIGINT", pa.uint32(): "UINTEGER",
            pa.uint16(): "USMALLINT", pa.uint8(): "UTINYINT", pa.bool_(): "BOOLEAN",
            pa.float64(): "DOUBLE", pa.float32(): "FLOAT"}[t]


def _q(text: str) -> str:
    """An SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def _cols_select(cols: Mapping[str, tuple[pa.DataType, bool, str, str]]) -> str:
    # dictionary strings are read as VARCHAR; cast so every run unions to one type
    return ", ".join(f'CAST("{c}" AS {_duck_type(t)}) AS "{c}"' for c, (t, *_r) in cols.items())


def _empty(cols: Mapping[str, tuple[pa.DataType, bool, str, str]]) -> str:
    body = ", ".join(f'CAST(NULL AS {_duck_type(t)}) AS "{c}"' for c, (t, *_r) in cols.items())
    return f"SELECT CAST(NULL AS VARCHAR) AS run, {body} WHERE false"


def _union(parts: list[str], empty: str) -> str:
    return "\nUNION ALL\n".join(parts) if parts else empty


#: DuckDB's memory limit unless BLOCKLAB_DUCKDB_MEMORY gives one (see connect).
DUCKDB_MEMORY = "1GB"


def _setting(con: duckdb.DuckDBPyConnection, name: str, value: str, env: str) -> None:
    """``SET name = value`` from the environment variable ``env``: a value DuckDB refuses is one
    line naming the variable (it was a traceback)."""
    try:
        con.execute(f"SET {name} = {_q(value)}")
    except duckdb.Error as e:
        raise BlocklabError(f"{env}={value!r}: {_first_line(e)} (DuckDB's syntax: 4GB, "
                            "500MB)") from None


def check_settings() -> None:
    """The DuckDB settings from the environment (BLOCKLAB_DUCKDB_MEMORY, _TEMP_MAX), refused
    as ``duck`` refuses them, before a command does work whose answer DuckDB then gives (a
    replay's summary comes after its run folder is written). Nothing to check, and no
    connection opened (40 ms), when neither is set."""
    if os.environ.get("BLOCKLAB_DUCKDB_MEMORY") or os.environ.get("BLOCKLAB_DUCKDB_TEMP_MAX"):
        duck(threads=1).close()


def _memory_limit() -> str:
    """DuckDB's memory limit: BLOCKLAB_DUCKDB_MEMORY, else DUCKDB_MEMORY."""
    return os.environ.get("BLOCKLAB_DUCKDB_MEMORY") or DUCKDB_MEMORY


def duck(threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with blocklab's settings: no progress bar, a memory limit it spills
    past, a spill folder of this process, and the macros of queries/_macros.sql."""
    con = duckdb.connect()
    # DuckDB draws a progress bar on stdout for long queries: it would land in --format csv
    con.execute("SET enable_progress_bar = false")
    # Sorts, joins, aggregates and windows past DuckDB's memory limit spill to a temporary
    # folder, so a limit bounds a query's memory whatever the rows (issue 21: a billion
    # requests under 2 GB). DuckDB's own default is 80 % of RAM, which a big run folder would
    # fill; 1 GB leaves room for Python, Arrow and the kernels. Every named query is written
    # to spill (exact quantiles through exact_quantiles, queries/_macros.sql, never
    # quantile_cont, which holds a group's values in memory); BLOCKLAB_DUCKDB_MEMORY sets
    # another limit (DuckDB's syntax: 4GB, 500MB).
    _setting(con, "memory_limit", _memory_limit(), "BLOCKLAB_DUCKDB_MEMORY")
    con.execute(f"SET temp_directory = {_q(spill_folder())}")
    # the most temporary disk a query may fill (DuckDB's default: 90 % of the free space of
    # the folder's disk); past it DuckDB stops the query (_disk_full words what it says)
    if cap := os.environ.get("BLOCKLAB_DUCKDB_TEMP_MAX"):
        _setting(con, "max_temp_directory_size", cap, "BLOCKLAB_DUCKDB_TEMP_MAX")
    if threads:
        con.execute(f"SET threads TO {int(threads)}")
    # a Parquet file's footer parsed once per connection, not once per scan: a query reads
    # ios.parquet several times (compare five), and each scan held its own parse outside the
    # memory limit, about 150 MB for a 1,000 M-request run's footer of 15,261 row groups
    # (measured: compare over two such runs, 2.1 GB peak; with the cache 1.2 GB for one run
    # or two). DuckDB checks the file's modification time before using what it cached.
    con.execute("SET parquet_metadata_cache = true")
    con.execute(queries.load("_macros"))
    return con


def connect(sources: list[Source], threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the views of ``sources``."""
    con = duck(threads)
    runs = [s for s in sources if s.kind == "run"]
    traces = [s for s in sources if s.kind == "trace"]
    for stem, cols in RUN_COLUMNS.items():
        parts = []
        files = []
        for s in runs:
            f = s.path / f"{stem}.parquet"
            if f.is_file():
                files.append((s.name, f))
                parts.append(f"SELECT {_q(s.name)} AS run, {_cols_select(cols)} "
                             f"FROM read_parquet({_q(str(f))})")
        try:
            con.execute(f"CREATE VIEW {stem} AS {_union(parts, _empty(cols))}")
        except duckdb.Error as e:  # DuckDB reads each file's footer here
            raise _unreadable(con, files, e) from None

    run_rows = []
    drive_rows = []
    for s in runs:
        r = s.run
        assert r is not None  # every run source has its record (_run_source)
        m = s.meta  # the options and the whole object are kept as the file holds them
        run_rows.append((
            s.name, str(s.path), r.blocklab_version or "", r.run_schema_version,
            r.trace.path if r.trace else "", r.array.path if r.array else "",
            r.interval_ns or 0, (r.counts.requests if r.counts else 0) or 0,
            float(r.elapsed_s or 0.0),
            json.dumps(m.get("options") or {}, sort_keys=True), json.dumps(m, sort_keys=True)))
        for d in r.drives:
            drive_rows.append((s.name, d.drive, d.group, d.role, d.model))
    con.execute("CREATE TABLE runs (run VARCHAR, path VARCHAR, blocklab_version VARCHAR, "
                "run_schema_version INTEGER, trace_path VARCHAR, array_path VARCHAR, "
                "interval_ns BIGINT, requests BIGINT, elapsed_s DOUBLE, options VARCHAR, "
                "meta VARCHAR)")
    if run_rows:
        con.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", run_rows)
    con.execute('CREATE TABLE drives (run VARCHAR, drive INTEGER, "group" VARCHAR, '
                "role VARCHAR, model VARCHAR)")
    if drive_rows:
        con.executemany("INSERT INTO drives VALUES (?, ?, ?, ?, ?)", drive_rows)

    tparts = [f"SELECT {_q(s.name)} AS run, {_cols_select(COLUMNS)}, "
              f"CAST(file_row_number AS BIGINT) AS request "
              f"FROM read_parquet({_q(str(s.path))}, file_row_number = true)" for s in traces]
    tempty = _empty({**COLUMNS, "request": (pa.int64(), False, "", "")})
    con.execute(f"CREATE VIEW trace AS {_union(tparts, tempty)}")
    con.execute("CREATE TABLE traces (run VARCHAR, path VARCHAR, source_format VARCHAR, "
                "linux_devices BOOLEAN, start_utc VARCHAR)")
    if traces:
        con.executemany("INSERT INTO traces VALUES (?, ?, ?, ?, ?)", [
            (s.name, str(s.path), str(s.meta.get("source_format", "")),
             bool(s.meta.get("linux_devices")), s.meta.get("start_utc")) for s in traces])
    # One row per request completed at a device, for iostat's per-device figures: a trace's
    # rows (device as major,minor for Linux traces; completion from complete_ns, else from
    # time_ns + latency_ns), a run's host requests (device ``host``, the volume) and its
    # drive operations (device ``drive N``). arrival_ns is when the request was given to the
    # device's queue, issue_ns when the device started it (null when unknown).
    con.execute(
        "CREATE VIEW device_ios AS "
        "SELECT t.run, CASE WHEN coalesce(tr.linux_devices, false) "
        "THEN CAST(t.device >> 20 AS VARCHAR) || ',' || CAST(t.device & 1048575 AS VARCHAR) "
        "ELSE CAST(t.device AS VARCHAR) END AS device, CAST(t.device AS BIGINT) AS devno, "
        "t.op, t.time_ns AS arrival_ns, t.issue_ns, "
        "coalesce(t.complete_ns, t.time_ns + t.latency_ns) AS complete_ns, t.size_bytes, "
        "CAST(coalesce(t.merges, 0) AS BIGINT) AS merges "
        "FROM trace t LEFT JOIN traces tr ON tr.run = t.run "
        "UNION ALL "
        "SELECT run, 'host', -1, op, arrival_ns, start_ns, complete_ns, size_bytes, 0 "
        "FROM ios "
        "UNION ALL "
        "SELECT run, 'drive ' || CAST(drive AS VARCHAR), drive, "
        "CAST(CASE WHEN write THEN 1 ELSE 0 END AS UTINYINT), queued_ns, start_ns, "
        f"complete_ns, sectors * {SECTOR_BYTES}, 0 FROM drive_ops")
    con.execute(
        "CREATE VIEW requests AS "
        "SELECT run, time_ns, device, sector, size_bytes, op, latency_ns FROM trace "
        "UNION ALL "
        "SELECT run, arrival_ns AS time_ns, CAST(0 AS UINTEGER) AS device, sector, size_bytes, "
        "op, latency_ns FROM ios")
    return con


# ---------------------------------------------------------------------------------------------
# running a query


@dataclasses.dataclass
class QueryResult:
    """The answer of a query: an Arrow table (columns in the query's order)."""

    query: str
    table: pa.Table
    sources: list[Source]

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    def rows(self) -> list[dict[str, Any]]:
        return clean_rows(self.table)


def clean_rows(table: pa.Table | pa.RecordBatch) -> list[dict[str, Any]]:
    """The rows of ``table`` as dicts, NaN and infinities as None (JSON has neither)."""
    return [{k: _clean(v) for k, v in r.items()} for r in table.to_pylist()]


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def _arrow(rel: duckdb.DuckDBPyRelation) -> pa.Table:
    return (getattr(rel, "to_arrow_table", None) or rel.fetch_arrow_table)()  # DuckDB >= 1.4 / 1.x


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _needs(info: QueryInfo, sources: list[Source]) -> None:
    kinds = {s.kind for s in sources}
    want = set(info.views)
    if not want or want & set(BOTH_VIEWS):
        return
    if want & set(RUN_VIEWS) and "run" not in kinds:
        raise BlocklabError(f"query {info.name} reads run folders (views "
                            f"{', '.join(sorted(want & set(RUN_VIEWS)))}); the inputs are "
                            "traces")
    if want & set(TRACE_VIEWS) and "trace" not in kinds:
        raise BlocklabError(f"query {info.name} reads traces (view trace); the inputs are "
                            "run folders")


#: What writes each optional run file, for an answer with no rows.
_WRITTEN_BY = {
    "drive_ops": "blocklab replay --drive-ops records it",
    "drive_busy": "blocklab replay writes it",
    "events": "a replay with failures, rebuilds or initializations writes it",
}


def missing_views(paths: Iterable[str | os.PathLike[str]], name: str) -> list[str]:
    """Why named query ``name`` may have answered with no rows: for each optional run file
    its views read, the runs among ``paths`` without it (``run X: no drive_ops.parquet
    (blocklab replay --drive-ops records it)``)."""
    info = catalog().get(name)
    if info is None:
        return []
    every = find_sources(paths)
    sources = [s for s in every if s.kind == "run"]
    out = _without_completions(every) if "device_ios" in info.views else []
    for stem in OPTIONAL_FILES:
        if stem not in info.views:
            continue
        lacking = [s.name for s in sources if not (s.path / f"{stem}.parquet").is_file()]
        if lacking:
            runs = ", ".join(lacking[:3]) + (f" and {len(lacking) - 3} more"
                                             if len(lacking) > 3 else "")
            out.append(f"{'runs' if len(lacking) > 1 else 'run'} {runs}: no {stem}.parquet "
                       f"({_WRITTEN_BY[stem]})")
    return out


def _without_completions(sources: list[Source]) -> list[str]:
    """The traces among ``sources`` whose requests have no completion times: a trace's rows
    reach ``device_ios`` (iostat, idle-times) only with one, as ``blocklab trace iostat``
    says of such a trace in its error."""
    traces = [s for s in sources if s.kind == "trace"]
    if not traces:
        return []
    con = connect(traces)
    try:
        done = dict(con.execute("SELECT run, count(*) FILTER (WHERE complete_ns IS NOT NULL OR "
                                "latency_ns IS NOT NULL) FROM trace GROUP BY run").fetchall())
        return [f"trace {s.name}: no completion times (neither complete_ns nor latency_ns), "
                "which iostat and idle-times need" for s in traces if not done.get(s.name)]
    finally:
        con.close()


def resolve_params(info: QueryInfo | None, given: Mapping[str, str] | None,
                   sql: str) -> dict[str, Any]:
    """The values of the query's parameters: defaults, then ``given`` (text) converted."""
    given = dict(given or {})
    if info is not None:
        known = {p.name: p for p in info.params}
        unknown = sorted(set(given) - set(known))
        if unknown:
            have = ", ".join(known) or "none"
            raise BlocklabError(f"query {info.name}: unknown parameter {unknown[0]} "
                                f"(its parameters: {have})")
        return {n: (p.convert(given[n], info.name) if n in given else p.default)
                for n, p in known.items()}
    used = placeholders(sql)
    unknown = sorted(set(given) - used)
    if unknown:
        raise BlocklabError(f"query --sql: parameter {unknown[0]} is not used ($"
                            f"{unknown[0]} does not appear)")
    missing = sorted(used - set(given))
    if missing:
        raise BlocklabError(f"query --sql: ${missing[0]} has no value (--param "
                            f"{missing[0]}=VALUE)")
    return {k: literal_value(v) for k, v in given.items()}


def _unreadable(con: duckdb.DuckDBPyConnection, files: list[tuple[str, Path]], e: Exception
                ) -> BlocklabError:
    """A run's Parquet file that pyarrow read the schema of (``_run_source``) but DuckDB
    cannot open (a damaged footer: make fuzz found a column type DuckDB does not know, which
    ended in a traceback), as one line naming the run and the file: the first of ``files``
    (run name, path) that fails alone."""
    for name, f in files:
        try:
            con.execute(f"DESCRIBE SELECT * FROM read_parquet({_q(str(f))})")
        except duckdb.Error as one:
            return BlocklabError(f"run {name}: {f.name}: not a readable Parquet file "
                                 f"({_first_line(one)})")
    names = ", ".join(f"run {name}: {f.name}" for name, f in files[:3])
    return BlocklabError(f"{names}: not readable together ({_first_line(e)})")


def _disk_full(line: str) -> str:
    """DuckDB's words when its temporary folder is full, said as what they mean: it reports a
    spill that no longer fits (past BLOCKLAB_DUCKDB_TEMP_MAX, or 90 % of the disk's free space)
    as "Out of Memory Error: failed to offload data block ...", which reads as too little RAM
    (measured: a 10 M-request workload query, TMPDIR on a 60 MB tmpfs); and, when the disk
    fills before that cap (another writer on it), as "IO Error: Could not write file
    ...tmp: No space left on device". Other lines as they are."""
    if "failed to offload" not in line and not (
            "No space left on device" in line and ".tmp" in line):
        return line
    used = line[line.rfind("(") + 1:].rstrip(").") if "failed to offload" in line and \
        line.endswith(").") else ""
    limit = _memory_limit()
    cap = os.environ.get("BLOCKLAB_DUCKDB_TEMP_MAX")
    room = (f"up to BLOCKLAB_DUCKDB_TEMP_MAX={cap}" if cap else
            "up to 90 % of its disk's free space")
    used = f" ({used})" if used else ""
    return (f"temporary disk full: DuckDB spills what passes its {limit} memory limit into "
            f"{tempfile.gettempdir()}, {room}, and that is full{used}; "
            + ("raise it, or " if cap else "") +
            "set TMPDIR to a folder on a disk with more room (docs/query.md: how much a "
            "query needs)")


def _failed(label: str, sources: list[Source], e: Exception) -> BlocklabError:
    """A query's failure as one line naming the query, the runs and a damaged file."""
    return BlocklabError(failure_line(label, sources, e, _disk_full(_first_line(e))))


def fetch(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None, label: str,
          sources: list[Source]) -> tuple[list[str], list[tuple[Any, ...]]]:
    """(names, rows) of a small answer; a failure (a damaged page) is one line, as execute's."""
    try:
        cur = con.execute(sql, params)
        return [d[0] for d in cur.description or ()], cur.fetchall()
    except (duckdb.Error, pa.ArrowException) as e:
        raise _failed(label, sources, e) from None


def _set_threads(con: duckdb.DuckDBPyConnection, label: str) -> int | None:
    """Set the threads the named query ``label`` asks for ("-- Threads: N"); returns the
    setting to restore, or None when it asks for none (or ``label`` is --sql)."""
    n = parse_header(label, queries.load(label)).threads if label in queries.names() else None
    if n is None:
        return None
    ((old,),) = con.execute("SELECT current_setting('threads')").fetchall()
    con.execute(f"SET threads TO {int(n)}")
    return int(old)


def _restore_threads(con: duckdb.DuckDBPyConnection, old: int | None) -> None:
    if old is not None:
        with contextlib.suppress(duckdb.Error):  # (a connection already closed)
            con.execute(f"SET threads TO {old}")


def execute(con: duckdb.DuckDBPyConnection, sql: str, values: Mapping[str, Any],
            label: str, sources: list[Source]) -> pa.Table:
    """Run ``sql`` with ``values`` on ``con``; a failure becomes one line naming the query and
    the runs."""
    old = _set_threads(con, label)
    try:
        rel = con.sql(sql, params=dict(values) or None)
        return _arrow(rel) if rel is not None else pa.table({})
    except (duckdb.Error, pa.ArrowException) as e:
        raise _failed(label, sources, e) from None
    finally:
        _restore_threads(con, old)


#: Rows per batch of a streamed answer (``stream_query``).
STREAM_ROWS = 65_536


def _batches(con: duckdb.DuckDBPyConnection, sql: str, values: Mapping[str, Any], label: str,
             sources: list[Source]) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """``execute``, but the answer in batches of STREAM_ROWS rows as DuckDB produces them. The
    first batch is fetched here, so that a query that fails at once (a bad parameter, SQL
    that does not bind, an error() in the query) fails before anything is written."""
    old = _set_threads(con, label)  # restored when the answer has been read
    try:
        rel = con.sql(sql, params=dict(values) or None)
        if rel is None:
            _restore_threads(con, old)
            return pa.schema([]), iter(())
        read = getattr(rel, "to_arrow_reader", None) or rel.fetch_record_batch  # DuckDB 2 / 1
        reader = read(STREAM_ROWS)
        first = reader.read_next_batch()
    except StopIteration:  # no rows
        _restore_threads(con, old)
        return reader.schema, iter(())
    except (duckdb.Error, pa.ArrowException) as e:
        _restore_threads(con, old)
        raise _failed(label, sources, e) from None

    def rest() -> Iterator[pa.RecordBatch]:
        try:
            yield first
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
                except (duckdb.Error, pa.ArrowException) as e:
                    raise _failed(label, sources, e) from None
                yield batch
        finally:
            _restore_threads(con, old)

    return reader.schema, rest()


def _info(name: str) -> QueryInfo:
    """The named query ``name`` (its header and SQL), or one line saying there is none."""
    cat = catalog()
    if name not in cat:
        raise BlocklabError(f"query {name}: no such query (blocklab query --list names "
                            f"them: {', '.join(cat)})")
    return cat[name]


def _named_sql(info: QueryInfo, sources: list[Source], params: Mapping[str, str] | None
               ) -> tuple[str, dict[str, Any]]:
    """The SQL text and parameter values of the named query ``info`` over ``sources``."""
    _needs(info, sources)
    return info.sql, dict(resolve_params(info, params, info.sql))


def named(con: duckdb.DuckDBPyConnection, name: str, sources: list[Source],
          params: Mapping[str, str] | None = None) -> pa.Table:
    """Run the named query ``name`` on a connection from ``connect(sources)``."""
    text, values = _named_sql(_info(name), sources, params)
    return execute(con, text, values, name, sources)


def named_batches(con: duckdb.DuckDBPyConnection, name: str, sources: list[Source],
                  params: Mapping[str, str] | None = None
                  ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """``named``'s answer as (schema, batches), read while ``con`` is open (``_batches``)."""
    text, values = _named_sql(_info(name), sources, params)
    return _batches(con, text, values, name, sources)


def _prepare(paths: Iterable[str | os.PathLike[str]], name: str | None, sql: str | None,
             params: Mapping[str, str] | None, sources: list[Source] | None
             ) -> tuple[str, list[Source], str, dict[str, Any]]:
    """The label, sources, SQL text and parameter values of a query (``run_query``)."""
    if (name is None) == (sql is None):
        raise BlocklabError("query: give a query NAME or --sql SQL (blocklab query --list)")
    label = name if name is not None else "--sql"
    info = _info(name) if name is not None else None  # before the inputs are looked for
    try:
        srcs = sources if sources is not None else find_sources(paths)
    except BlocklabError as e:
        raise BlocklabError(f"query {label}: {e}") from None
    if not srcs:
        raise BlocklabError(f"query {label}: no run folder or trace given")
    if info is not None:
        return (label, srcs, *_named_sql(info, srcs, params))
    assert sql is not None
    return label, srcs, sql, dict(resolve_params(None, params, sql))


def run_query(paths: Iterable[str | os.PathLike[str]], name: str | None = None,
              sql: str | None = None, params: Mapping[str, str] | None = None,
              sources: list[Source] | None = None) -> QueryResult:
    """Run the named query ``name`` (or the SQL text ``sql``) over the views of ``paths``.

    Raises BlocklabError (one line, naming the query and the run) for a bad input, an unknown
    query or parameter, or SQL that fails.
    """
    label, srcs, text, values = _prepare(paths, name, sql, params, sources)
    con = connect(srcs)
    try:
        table = execute(con, text, values, label, srcs)
    finally:
        con.close()
    return QueryResult(label, table, srcs)


@contextlib.contextmanager
def stream_query(paths: Iterable[str | os.PathLike[str]], name: str | None = None,
                 sql: str | None = None, params: Mapping[str, str] | None = None
                 ) -> Iterator[tuple[pa.Schema, Iterator[pa.RecordBatch]]]:
    """``run_query``'s answer as (schema, batches), read while the context is open: what
    ``blocklab query --format csv/json`` writes, in memory that does not grow with the
    answer's rows (a query can answer with every request of a run: ``SELECT * FROM ios``)."""
    label, srcs, text, values = _prepare(paths, name, sql, params, None)
    con = connect(srcs)
    try:
        yield _batches(con, text, values, label, srcs)
    finally:
        con.close()
