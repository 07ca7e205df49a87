"""The CSV family of public block traces, read with Polars a chunk of lines at a time.

================  ==============================================  ===============================
format            columns (in order)                              units
================  ==============================================  ===============================
msr               Timestamp, Hostname, DiskNumber, Type,          Windows FILETIME (100 ns ticks
                  Offset, Size, ResponseTime                      since 1601), bytes, bytes,
                                                                  100 ns ticks; Type Read/Write
spc               ASU, LBA, Size, Opcode, Timestamp [, ...]       512 B blocks, bytes, r/w,
                                                                  seconds since trace start
alibaba           device_id, opcode, offset, length, timestamp    bytes, bytes, R/W,
                                                                  microseconds since 1970
tencent           Timestamp, Offset, Size, IOType, VolumeID       seconds since 1970, 512 B
                                                                  sectors, sectors, 0 read 1 write
================  ==============================================  ===============================

Sources: MSR Cambridge traces (SNIA IOTTA, Narayanan et al., FAST 2008), UMass Trace
Repository SPC format description, alibaba/block-traces README, Tencent CBS traces (SNIA
IOTTA, Zhang et al., USENIX ATC 2020). A header line, if present, is skipped.
"""

from __future__ import annotations

# Polars is imported where a CSV is read: it is not needed to sniff or to read other formats,
# and importing it costs start-up time on every ingest.
import dataclasses
import io
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from blocklab.traces.io import PEEK_BYTES, Input, compression_of, text_chunks
from blocklab.traces.schema import MAX_REQUEST_BYTES, OP_READ, OP_WRITE, SECTOR_BYTES

from .base import Chunk, Format, ReadContext, mostly
from .fields import check_monotonic

if TYPE_CHECKING:
    import polars as pl

FILETIME_UNIX_EPOCH = 116_444_736_000_000_000  # 100 ns ticks from 1601-01-01 to 1970-01-01
#: Key of the mask a converter returns of rows whose numbers overflow once scaled to ns/bytes.
RANGE = "_out_of_range"


@dataclasses.dataclass(frozen=True)
class CsvSpec:
    name: str
    description: str
    columns: tuple[tuple[str, str], ...]  # (name, "i64" | "f64" | "str")
    line: re.Pattern[bytes]  # what a data line looks like (for sniffing)
    convert: Callable[[pl.DataFrame, ReadContext], dict[str, np.ndarray]]
    clock: str  # "unix" or "relative"
    ops: dict[str, int]  # op column values (lower-cased) -> op code
    op_column: str


def _op(df: pl.DataFrame, spec: CsvSpec) -> np.ndarray:
    import polars as pl

    raw = df[spec.op_column].str.strip_chars().str.to_lowercase()
    return raw.replace_strict(spec.ops, default=255, return_dtype=pl.UInt8).to_numpy()


def _scaled(col: np.ndarray, scale: int, offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(col - offset) * scale`` in int64, and a mask of the rows where that would overflow
    (a damaged digit can make a field 10x larger; NumPy wraps silently)."""
    limit = np.iinfo(np.int64).max // scale
    shifted = col - offset if offset else col
    over = (col < np.iinfo(np.int64).min + max(offset, 0)) | (np.abs(shifted) > limit)
    return np.where(over, 0, shifted) * scale, over


def _msr(df: pl.DataFrame, ctx: ReadContext) -> dict[str, np.ndarray]:
    hosts = df["Hostname"].to_list()
    known = ctx.extra.setdefault("hosts", [])
    for h in dict.fromkeys(hosts):
        if h not in known:
            known.append(h)
    if len(known) == 1:
        ctx.host = known[0]
    index = {h: i for i, h in enumerate(known)}
    stream = np.array([index[h] for h in hosts], dtype=np.int64)
    off = df["Offset"].to_numpy()
    t, t_over = _scaled(df["Timestamp"].to_numpy(), 100, FILETIME_UNIX_EPOCH)
    lat, lat_over = _scaled(df["ResponseTime"].to_numpy(), 100)
    return {
        "time_ns": t,
        "device": df["DiskNumber"].to_numpy(),
        "sector": off // SECTOR_BYTES,
        "size_bytes": df["Size"].to_numpy(),
        "latency_ns": lat,
        "stream": stream,
        RANGE: t_over | lat_over,
    }


def _spc(df: pl.DataFrame, ctx: ReadContext) -> dict[str, np.ndarray]:
    asu = df["ASU"].to_numpy()
    secs = df["Timestamp"].to_numpy()
    # "nan", "inf" and 1e300 parse as floats; none of them is a time
    over = ~np.isfinite(secs) | (np.abs(secs) > 9.2e9)
    return {
        "time_ns": np.round(np.where(over, 0.0, secs) * 1e9).astype(np.int64),
        "device": asu,
        "sector": df["LBA"].to_numpy(),
        "size_bytes": df["Size"].to_numpy(),
        "stream": asu,
        RANGE: over,
    }


def _alibaba(df: pl.DataFrame, ctx: ReadContext) -> dict[str, np.ndarray]:
    t, over = _scaled(df["timestamp"].to_numpy(), 1000)
    return {
        "time_ns": t,
        "device": df["device_id"].to_numpy(),
        "sector": df["offset"].to_numpy() // SECTOR_BYTES,
        "size_bytes": df["length"].to_numpy(),
        RANGE: over,
    }


def _tencent(df: pl.DataFrame, ctx: ReadContext) -> dict[str, np.ndarray]:
    vol = df["VolumeID"].to_numpy()
    t, t_over = _scaled(df["Timestamp"].to_numpy(), 1_000_000_000)
    size, s_over = _scaled(df["Size"].to_numpy(), SECTOR_BYTES)
    return {
        "time_ns": t,
        "device": vol,
        "sector": df["Offset"].to_numpy(),
        "size_bytes": size,
        "stream": vol,
        RANGE: t_over | s_over,
    }


I, F, S = "i64", "f64", "str"
SPECS = [
    CsvSpec(
        "msr", "MSR Cambridge CSV: FILETIME,host,disk,Read|Write,offset,size,response(100ns)",
        (("Timestamp", I), ("Hostname", S), ("DiskNumber", I), ("Type", S), ("Offset", I),
         ("Size", I), ("ResponseTime", I)),
        re.compile(rb"^\d{17,18},[^,]+,\d+,(Read|Write),\d+,\d+,\d+\s*$", re.I),
        _msr, "unix", {"read": OP_READ, "write": OP_WRITE}, "Type",
    ),
    CsvSpec(
        "spc", "UMass SPC CSV: ASU,LBA(512B),size_bytes,r|w,seconds[,...]",
        (("ASU", I), ("LBA", I), ("Size", I), ("Opcode", S), ("Timestamp", F)),
        re.compile(rb"^\d+,\d+,\d+,[rwRW],\d+(\.\d*)?(,.*)?\s*$"),
        _spc, "relative", {"r": OP_READ, "w": OP_WRITE}, "Opcode",
    ),
    CsvSpec(
        "alibaba", "Alibaba block traces 2020 CSV: device,R|W,offset_bytes,length_bytes,usec",
        (("device_id", I), ("opcode", S), ("offset", I), ("length", I), ("timestamp", I)),
        re.compile(rb"^\d+,[RWrw],\d+,\d+,\d{13,17}\s*$"),
        _alibaba, "unix", {"r": OP_READ, "w": OP_WRITE}, "opcode",
    ),
    CsvSpec(
        "tencent", "Tencent CBS CSV: unix_seconds,offset_sectors,size_sectors,0|1(0=read),volume",
        (("Timestamp", I), ("Offset", I), ("Size", I), ("IOType", S), ("VolumeID", I)),
        re.compile(rb"^\d{9,11},\d+,\d+,[01],\d+\s*$"),
        _tencent, "unix", {"0": OP_READ, "1": OP_WRITE}, "IOType",
    ),
]


def _data_lines(head: bytes) -> list[bytes]:
    lines = head.split(b"\n")
    if len(head) >= PEEK_BYTES:
        lines = lines[:-1]
    lines = [ln.rstrip(b"\r") for ln in lines[:50] if ln.strip()]
    if lines and not lines[0][:1].isdigit():
        lines = lines[1:]  # a header
    return lines


def _sniffer(spec: CsvSpec) -> Callable[[bytes], bool]:
    def sniff(head: bytes) -> bool:
        return mostly(_data_lines(head), spec.line.match)

    return sniff


def _reader(spec: CsvSpec) -> Callable[[list[Input], ReadContext], Iterator[Chunk]]:
    names = [c for c, _t in spec.columns]

    def read(inputs: list[Input], ctx: ReadContext) -> Iterator[Chunk]:
        import polars as pl

        types = {"i64": pl.Int64, "f64": pl.Float64, "str": pl.String}
        (inp,) = inputs
        ctx.clock = spec.clock
        last = np.iinfo(np.int64).min
        first = True
        for buf, first_line in text_chunks(inp):
            raw = buf.base if isinstance(buf.base, bytes) else buf.tobytes()
            if first:
                first = False
                if raw[:1] and not raw[:1].isdigit() and not raw[:1].isspace():
                    cut = raw.find(b"\n") + 1  # a header line
                    raw, first_line = raw[cut:], first_line + 1
            if not raw.strip():
                continue
            df = _frame(raw, names)
            lines = first_line + np.arange(df.height)
            # a line of nothing but blanks (or a lone carriage return) is no request
            blank = df.select(pl.all_horizontal(
                pl.all().is_null() | (pl.all().str.strip_chars() == ""))).to_series().to_numpy()
            typed = df.select(
                [pl.col(c).str.strip_chars().cast(types[t], strict=False) for c, t in spec.columns]
            )
            keep = ~blank
            missing = df.select(pl.any_horizontal(pl.all().is_null())).to_series().to_numpy()
            unparsed = typed.select(pl.any_horizontal(pl.all().is_null())).to_series().to_numpy()
            # bytes that are not UTF-8 were read as U+FFFD (Polars' lossy decoding)
            garbled = df.select(pl.any_horizontal(
                pl.all().str.contains("\ufffd", literal=True).fill_null(False))
            ).to_series().to_numpy()
            for k in np.nonzero(keep & (missing | unparsed | garbled))[0].tolist():
                what = ("bytes that are not UTF-8 text" if garbled[k] else
                        "missing fields" if missing[k] else "a field that is not a number")
                ctx.bad(inp.name, f"malformed {spec.name} CSV line: {what}", line=int(lines[k]))
                keep[k] = False
            op = _op(typed, spec)
            for k in np.nonzero(keep & (op == 255))[0].tolist():
                msg = f"unknown operation in a {spec.name} CSV line"
                ctx.bad(inp.name, msg, line=int(lines[k]))
                keep[k] = False
            typed = typed.filter(pl.Series(keep))
            lines, op = lines[keep], op[keep]
            if typed.height == 0:
                continue
            cols = spec.convert(typed, ctx)
            over = cols.pop(RANGE)
            size = cols["size_bytes"]
            bad = (size < 0) | (size > MAX_REQUEST_BYTES) | (cols["sector"] < 0)
            for k in np.nonzero(bad | over)[0].tolist():
                msg = ("a time or size too large to hold in nanoseconds or bytes" if over[k]
                       else "negative or absurd size or offset")
                ctx.bad(inp.name, msg, line=int(lines[k]))
            bad |= over
            ok = check_monotonic(ctx, inp.name, cols["time_ns"], lines, last)
            sel = ~bad if ok is None else (~bad & ok)
            if not sel.all():
                cols = {k: v[sel] for k, v in cols.items()}
                op = op[sel]
            if len(op) == 0:
                continue
            last = int(cols["time_ns"].max())
            cols["op"] = op
            cols["device"] = cols["device"].astype(np.uint32)
            cols["flags"] = np.zeros(len(op), dtype=np.uint16)
            yield Chunk(cols)
            if ctx.on_progress:
                ctx.on_progress()

    return read


def _frame(raw: bytes, names: list[str]) -> pl.DataFrame:
    """One row of string fields per line of ``raw`` (whole lines), whatever the bytes.

    Polars reads the chunk with no quoting (a stray ``"`` must not join lines), lossy UTF-8
    (bad bytes become U+FFFD, reported by line), missing fields as null and extra ones dropped.
    The line numbers of errors come from row positions, so a chunk Polars splits into another
    number of rows than it has lines (it treats a lone ``\\r`` as a line end in some versions)
    is split in Python instead.
    """
    import polars as pl

    schema = {n: pl.String for n in names}
    nlines = raw.count(b"\n") + (0 if raw.endswith(b"\n") else 1)
    # Polars decompresses bytes that look compressed (after leading blank lines): damaged
    # text can, and then it is no CSV to Polars, so Python splits it
    if compression_of(raw.lstrip()[:8]) is None:
        try:
            df = pl.read_csv(
                io.BytesIO(raw), has_header=False, schema=schema, infer_schema=False,
                truncate_ragged_lines=True, missing_columns="insert", quote_char=None,
                encoding="utf8-lossy", raise_if_empty=False,
            )
            if df.height == nlines:
                return df
        except (pl.exceptions.PolarsError, OSError):
            pass
    rows = raw.removesuffix(b"\n").split(b"\n")
    cols: list[list[str | None]] = [[] for _ in names]
    for row in rows:
        fields = row.removesuffix(b"\r").decode("utf-8", "replace").split(",") if row else []
        for i, col in enumerate(cols):
            col.append(fields[i] if i < len(fields) else None)
    return pl.DataFrame(dict(zip(names, cols, strict=True)), schema=schema)


FORMATS = [
    Format(name=s.name, description=s.description, sniff=_sniffer(s), read=_reader(s))
    for s in SPECS
]
