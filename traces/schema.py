"""The one trace schema of blocklab: column names, Arrow types, units and integer codes.

Every reader writes, and every later stage reads, exactly these columns. One row is one block
request as the device saw it (for Linux traces: one request from its first bio queued to its
completion, with the bios merged into it counted in ``merges``).

Times are integer nanoseconds since the trace start, the time of the first event in the input
(for several inputs: the earliest of them). Space is in 512-byte sectors for positions and in
bytes for sizes. Columns a source does not have are null.

=================  ===========  ============  ====================================================
column             Arrow type   unit          meaning
=================  ===========  ============  ====================================================
time_ns            int64        ns            arrival: bio queued (blktrace Q, tracefs
                                              block_bio_queue) or else the first of insert /
                                              issue seen; the source's timestamp for other formats
device             uint32       -             Linux dev_t as ``major << 20 | minor`` for Linux
                                              traces; the source's disk, volume or ASU number
                                              otherwise
sector             int64        512 B sector  first sector addressed
size_bytes         int64        bytes         length (0 for a flush)
op                 uint8        code          OP_READ, OP_WRITE, OP_DISCARD, OP_FLUSH, OP_OTHER
flags              uint16       bit mask      FLAG_* below
getrq_ns           int64 null   ns            request allocated (blktrace G)
insert_ns          int64 null   ns            inserted into the scheduler (blktrace I,
                                              block_rq_insert)
issue_ns           int64 null   ns            issued to the driver (blktrace D, block_rq_issue);
                                              after a requeue, the last issue
complete_ns        int64 null   ns            completed (blktrace C, block_rq_complete)
latency_ns         int64 null   ns            complete_ns - time_ns, or the source's own response
                                              time (MSR, DiskSim validate)
merges             uint16 null  count         bios merged into this request (blktrace M/F)
pid                int32 null   -             process that queued it
comm               dict string  -             that process's name
stream             uint32 null  -             stream id: SPC ASU, fio job, volume, host index,
                                              generator task or worker
error              int16 null   errno         completion status (0 = success, negative errno)
stream_seq         int64 null   count         closed loop: the request's place in its stream
                                              (0, 1, 2, ...); the stream issues in this order
outstanding        uint16 null  count         closed loop: requests the stream keeps in flight
                                              while it issues this one; null = open loop
think_ns           int64 null   ns            closed loop: idle time between the completion
                                              that frees a slot and the issue of this request
phase              uint16 null  -             closed loop: barrier phase; no request of phase
                                              k+1 is issued before every request of phases <= k
                                              has completed (IOR's write-then-read, Orion's
                                              matrix points)
=================  ===========  ============  ====================================================

A closed-loop trace (synthetic workloads: IOR, Iometer, Orion) has ``outstanding`` set on every
row; its rows are in issue order (phase, then stream_seq) and ``time_ns`` is the earliest issue
time (0 unless the generator delays a request). ``blocklab replay`` drives such a trace closed
loop without extra flags.

btt's intervals follow from the columns: Q2G = getrq_ns - time_ns, G2I = insert_ns - getrq_ns,
I2D = issue_ns - insert_ns, D2C = complete_ns - issue_ns, Q2C = complete_ns - time_ns.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 2  # 2: closed-loop columns stream_seq, outstanding, think_ns, phase
#: Bytes in a sector: every ``sector`` column and every size in sectors counts these (Linux's
#: block layer addresses 512-byte sectors whatever the device's logical block size). The one
#: definition; kernels/ keep their own literal so their compiled caches do not depend on it.
SECTOR_BYTES = 512
#: Parquet key-value metadata key under which the file-level metadata JSON is stored.
META_KEY = b"blocklab"

# Operation codes (column ``op``).
OP_READ = 0
OP_WRITE = 1
OP_DISCARD = 2
OP_FLUSH = 3
OP_OTHER = 4  # zone management, passthrough and other commands with no data direction
OP_NAMES = ("read", "write", "discard", "flush", "other")

# Flag bits (column ``flags``).
FLAG_SYNC = 1 << 0  # REQ_SYNC (rwbs 'S')
FLAG_FUA = 1 << 1  # forced unit access (rwbs 'F' after the op letter)
FLAG_META = 1 << 2  # filesystem metadata (rwbs 'M')
FLAG_RAHEAD = 1 << 3  # readahead (rwbs 'A')
FLAG_PREFLUSH = 1 << 4  # cache flush before the data (rwbs 'F' before the op letter)
FLAG_CACHE_HIT = 1 << 5  # the source says the device served it from its cache
FLAG_REMAPPED = 1 << 6  # remapped from another device (blktrace A: partition, dm, md)
FLAG_REQUEUED = 1 << 7  # requeued at least once (blktrace R, block_rq_requeue)
FLAG_SPLIT = 1 << 8  # produced by a bio split (blktrace X)
FLAG_PARTIAL = 1 << 9  # began before the trace: arrival is the first event seen, not the queue
FLAG_INCOMPLETE = 1 << 10  # never completed within the trace (complete_ns is null)
FLAG_NAMES = (
    "sync",
    "fua",
    "meta",
    "rahead",
    "preflush",
    "cache_hit",
    "remapped",
    "requeued",
    "split",
    "partial",
    "incomplete",
)

#: Column name -> (Arrow type, nullable, unit, description). The single source of truth.
COLUMNS: dict[str, tuple[pa.DataType, bool, str, str]] = {
    "time_ns": (pa.int64(), False, "ns", "arrival time since trace start"),
    "device": (pa.uint32(), False, "-", "dev_t (major<<20|minor) or source device number"),
    "sector": (pa.int64(), False, "512 B", "first sector"),
    "size_bytes": (pa.int64(), False, "bytes", "request length"),
    "op": (pa.uint8(), False, "code", "0 read, 1 write, 2 discard, 3 flush, 4 other"),
    "flags": (pa.uint16(), False, "bits", "sync, fua, meta, rahead, preflush, cache_hit, ..."),
    "getrq_ns": (pa.int64(), True, "ns", "request allocated (G)"),
    "insert_ns": (pa.int64(), True, "ns", "inserted into the scheduler (I)"),
    "issue_ns": (pa.int64(), True, "ns", "issued to the driver (D)"),
    "complete_ns": (pa.int64(), True, "ns", "completed (C)"),
    "latency_ns": (pa.int64(), True, "ns", "response time"),
    "merges": (pa.uint16(), True, "count", "bios merged into the request"),
    "pid": (pa.int32(), True, "-", "process id"),
    "comm": (pa.dictionary(pa.int32(), pa.string()), True, "-", "process name"),
    "stream": (pa.uint32(), True, "-", "stream id (ASU, job, volume, host)"),
    "error": (pa.int16(), True, "errno", "completion status"),
    "stream_seq": (pa.int64(), True, "count", "closed loop: order within the stream"),
    "outstanding": (pa.uint16(), True, "count", "closed loop: the stream's requests in flight"),
    "think_ns": (pa.int64(), True, "ns", "closed loop: idle time before this issue"),
    "phase": (pa.uint16(), True, "-", "closed loop: barrier phase"),
}

TIME_COLUMNS = ("time_ns", "getrq_ns", "insert_ns", "issue_ns", "complete_ns", "latency_ns")

TRACE_SCHEMA = pa.schema(
    [pa.field(name, typ, nullable=nullable) for name, (typ, nullable, _u, _d) in COLUMNS.items()]
)

#: Integer columns that the readers fill as NumPy arrays, with -1 meaning null where nullable.
NUMPY_DTYPES = {
    "time_ns": "int64",
    "device": "uint32",
    "sector": "int64",
    "size_bytes": "int64",
    "op": "uint8",
    "flags": "uint16",
    "getrq_ns": "int64",
    "insert_ns": "int64",
    "issue_ns": "int64",
    "complete_ns": "int64",
    "latency_ns": "int64",
    "merges": "int32",
    "pid": "int32",
    "stream": "int64",
    "error": "int32",
    "stream_seq": "int64",
    "outstanding": "int32",
    "think_ns": "int64",
    "phase": "int32",
}
#: The sentinel that readers put in nullable NumPy columns for "not known".
NULL = -1

#: Sizes above this are rejected as absurd (1 TiB in one request).
MAX_REQUEST_BYTES = 1 << 40


def make_dev(major: int, minor: int) -> int:
    """Linux kernel-internal dev_t: ``major << 20 | minor`` (what blktrace and tracefs store)."""
    return (major << 20) | minor


def dev_major(dev: int) -> int:
    return dev >> 20


def dev_minor(dev: int) -> int:
    return dev & ((1 << 20) - 1)


def format_dev(dev: int, linux: bool = True) -> str:
    """``8,0`` for Linux dev_t values, the plain number otherwise."""
    return f"{dev >> 20},{dev & 0xFFFFF}" if linux else str(dev)


def parse_dev(text: str) -> int:
    """Parse ``MAJ:MIN``, ``MAJ,MIN`` or a plain device number (a dev_t as the kernel keeps it:
    12 bits of major, 20 of minor); a ValueError saying what is expected otherwise."""
    want = ("expected MAJ:MIN, MAJ,MIN or a device number (a major below 4096, a minor below "
            "1048576)")
    parts = text.strip().replace(",", ":").split(":")
    if len(parts) > 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(want)
    if len(parts) == 1:
        dev = int(parts[0])
        if dev >= 1 << 32:
            raise ValueError(want)
        return dev
    major, minor = int(parts[0]), int(parts[1])
    if major >= 1 << 12 or minor >= 1 << 20:
        raise ValueError(want)
    return make_dev(major, minor)


def flag_names(flags: int) -> list[str]:
    return [name for bit, name in enumerate(FLAG_NAMES) if flags & (1 << bit)]


# --------------------------------------------------------------------------------------------
# The run folder that ``blocklab replay`` writes (read by ``blocklab query`` and reports).
#
# RUN_SCHEMA_VERSION changes whenever a column below changes; meta.json records it, and readers
# refuse a run folder of another version with a one-line error.
RUN_SCHEMA_VERSION = 2  # 2: ios.lost (2026-11-29)

# Drive operation kinds (drive_ops column ``kind``): why the operation was issued.
OPK_HOST = 0  # part of a host request (data, parity, mirror, degraded reconstruction)
OPK_DESTAGE = 1  # controller write-back cache flushing dirty data
OPK_PREFETCH = 2  # controller read-ahead
OPK_REBUILD_READ = 3  # rebuild: reading survivors
OPK_REBUILD_WRITE = 4  # rebuild: writing the spare (or reserved space in a pool)
OPK_INIT = 5  # parity initialization
OPK_REBALANCE = 6  # pool: moving data onto a replacement drive
OPK_NAMES = ("host", "destage", "prefetch", "rebuild_read", "rebuild_write", "init", "rebalance")

# Event names (events column ``event``).
EVENT_NAMES = ("failure", "rebuild_start", "rebuild_progress", "rebuild_end", "data_loss",
               "replace", "rebalance_start", "rebalance_end", "init_start", "init_end",
               "rebalance_progress", "init_progress", "rebuild_stopped")

_DICT_STR = pa.dictionary(pa.int32(), pa.string())

#: File stem -> column name -> (Arrow type, nullable, unit, description).
RUN_COLUMNS: dict[str, dict[str, tuple[pa.DataType, bool, str, str]]] = {
    # one row per replayed host request, in trace order
    "ios": {
        "request": (pa.int64(), False, "-", "row of the request in the trace file"),
        "arrival_ns": (pa.int64(), False, "ns", "issued by the host (open loop: trace time "
                       "/ speed; closed loop: when its stream issued it)"),
        "start_ns": (pa.int64(), False, "ns", "first drive operation started (or the "
                     "controller served it from its cache)"),
        "complete_ns": (pa.int64(), False, "ns", "completed to the host"),
        "latency_ns": (pa.int64(), True, "ns", "complete_ns - arrival_ns; null for a lost "
                       "request (a real array fails it: no latency figure counts it)"),
        "op": (pa.uint8(), False, "code", "0 read, 1 write"),
        "sector": (pa.int64(), False, "512 B", "first sector on the host volume"),
        "size_bytes": (pa.int64(), False, "bytes", "length"),
        "stream": (pa.uint32(), False, "-", "stream id (0 when the trace has none)"),
        "cache_hit": (pa.bool_(), False, "-", "served without waiting for a drive's media "
                      "(controller cache, or every drive operation a drive-cache hit); false "
                      "when lost"),
        "lost": (pa.bool_(), False, "-", "part of its data was on no surviving member (failures "
                 "past the layout's tolerance): no drive operation served that part, and a "
                 "real array fails the request"),
    },
    # one row per drive operation (only with --drive-ops), in the order they started
    "drive_ops": {
        "drive": (pa.int32(), False, "-", "drive number (meta.json drives)"),
        "request": (pa.int64(), False, "-", "ios.request it serves; -1 for background work"),
        "kind": (pa.uint8(), False, "code", "OPK_*: host, destage, prefetch, rebuild_read, "
                 "rebuild_write, init, rebalance"),
        "queued_ns": (pa.int64(), False, "ns", "entered the drive's queue"),
        "start_ns": (pa.int64(), False, "ns", "the drive started it"),
        "complete_ns": (pa.int64(), False, "ns", "the drive finished it"),
        "sector": (pa.int64(), False, "512 B", "first sector on the drive"),
        "sectors": (pa.int64(), False, "512 B", "length"),
        "write": (pa.bool_(), False, "-", "a write"),
        "cache_hit": (pa.bool_(), False, "-", "served from the drive's own cache"),
    },
    # one row per drive per interval (meta.json interval_ns)
    "drive_busy": {
        "drive": (pa.int32(), False, "-", "drive number"),
        "group": (_DICT_STR, False, "-", "group (or pool) the drive belongs to"),
        "time_ns": (pa.int64(), False, "ns", "interval start"),
        "interval_ns": (pa.int64(), False, "ns", "interval length; the intervals run from 0 to "
                        "the run's end (the last completion of a request, or of a drive "
                        "operation in service then), so the last one is short"),
        "busy_ns": (pa.int64(), False, "ns", "time the drive was serving an operation"),
        "ops": (pa.int64(), False, "count", "operations started in the interval"),
        "bytes": (pa.int64(), False, "bytes", "bytes of the operations started"),
        "queue_op_ns": (pa.int64(), False, "op x ns", "integral of the operations at the drive "
                        "(queued or in service; those in service at the run's end to their "
                        "completion, those still queued to the end): mean queue depth = "
                        "queue_op_ns / interval_ns"),
    },
    # failures, rebuilds and their progress, data loss (replays with failures)
    "events": {
        "time_ns": (pa.int64(), False, "ns", "when"),
        "event": (_DICT_STR, False, "-", "one of EVENT_NAMES"),
        "drive": (pa.int32(), False, "-", "the drive concerned (-1: none)"),
        "group": (_DICT_STR, False, "-", "its group or pool"),
        "fraction": (pa.float64(), True, "-", "rebuild progress, 0 to 1"),
        "bytes": (pa.int64(), True, "bytes", "bytes rebuilt so far"),
        "stripes_lost": (pa.int64(), True, "count", "data loss: stripes that lost data"),
        "detail": (pa.string(), True, "-", "free text"),
    },
}

RUN_SCHEMAS: dict[str, pa.Schema] = {
    stem: pa.schema([pa.field(n, t, nullable=nl) for n, (t, nl, _u, _d) in cols.items()])
    for stem, cols in RUN_COLUMNS.items()
}


# --------------------------------------------------------------------------------------------
# A sweep's summary (``blocklab sweep run -o OUT``): one Parquet file per point under
# OUT/summary/<axis>=<value>/.../<point>.parquet (hive partitioning: the axes are the folder
# names, not columns of the files). The figures are the ``compare`` query's over the point's
# run folder OUT/<point>/, plus the longest rebuild window of ``rebuild-windows``.
POINT_COLUMNS: dict[str, tuple[pa.DataType, bool, str, str]] = {
    "run": (pa.string(), False, "-", "the point's id: its run folder under OUT, and the run "
            "name blocklab query OUT/ gives it"),
    "point_name": (pa.string(), False, "-", "readable: axis=value ..."),
    "axis_values": (pa.string(), False, "-", "JSON object: axis name -> value as in the "
                    "sweep file (the exact values; the folder names are text)"),
    "requests": (pa.int64(), True, "count", "host requests replayed"),
    "duration_s": (pa.float64(), True, "s", "first arrival to last completion"),
    "iops": (pa.float64(), True, "1/s", "requests / duration"),
    "mb_per_s": (pa.float64(), True, "10^6 B/s", "bytes / duration"),
    "read_mb_per_s": (pa.float64(), True, "10^6 B/s", "read bytes / duration"),
    "write_mb_per_s": (pa.float64(), True, "10^6 B/s", "written bytes / duration"),
    "mean_ms": (pa.float64(), True, "ms", "mean latency"),
    "p50_ms": (pa.float64(), True, "ms", "median latency"),
    "p99_ms": (pa.float64(), True, "ms", "99th percentile latency"),
    "p999_ms": (pa.float64(), True, "ms", "99.9th percentile latency"),
    "max_ms": (pa.float64(), True, "ms", "longest latency"),
    "read_p99_ms": (pa.float64(), True, "ms", "reads' 99th percentile latency"),
    "write_p99_ms": (pa.float64(), True, "ms", "writes' 99th percentile latency"),
    "drive_busy_mean": (pa.float64(), True, "-", "drives' mean busy fraction"),
    "drive_busy_max": (pa.float64(), True, "-", "busiest drive's busy fraction"),
    "failures": (pa.int64(), True, "count", "drive failures"),
    "data_loss": (pa.int64(), True, "count", "data-loss events"),
    "lost_requests": (pa.int64(), True, "count", "requests with data on no surviving member "
                      "(ios.lost; left out of the latencies)"),
    "rebuild_window_s": (pa.float64(), True, "s", "longest failure-to-rebuild-end window "
                         "(null without failures)"),
    "rebuild_done": (pa.bool_(), True, "-", "every rebuild ended within the run"),
    "replay_s": (pa.float64(), False, "s", "wall-clock time of the replay"),
    "host": (pa.string(), False, "-", "machine that ran the point"),
}
POINT_SCHEMA = pa.schema([pa.field(n, t, nullable=nl)
                          for n, (t, nl, _u, _d) in POINT_COLUMNS.items()])
