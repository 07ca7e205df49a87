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

from blocklab.traces.io import Input, text_chunks
from blocklab.traces.schema import MAX_REQUEST_BYTES, OP_READ, OP_WRITE

from .base import Chunk, Format, ReadContext, mostly
from .fields import check_monotonic

if TYPE_CHECKING:
    import polars as pl

FILETIME_UNIX_EPOCH = 116_444_736_000_000_000  # 100 ns ticks from 1601-01-01 to 1970-01-01


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
    return {
        "time_ns": (df["Timestamp"].to_numpy() - FILETIME_UNIX_EPOCH) * 100,
        "device": df["DiskNumber"].to_numpy(),
        "sector": off // 512,
        "size_bytes": df["Size"].to_numpy(),
        "latency_ns": df["ResponseTime"].to_numpy() * 100,
        "stream": stream,
    }


def _spc(df: pl.DataFrame, ctx: ReadContext) -> dict[str, np.ndarray]:
    asu = df["ASU"].to_numpy()
    return {
        "time_ns": np.round(df["Timestamp"].to_numpy() * 1e9).astype(np.int64),
        "device": asu,
        "sector": df["LBA"].to_numpy(),
        "size_bytes": df["Size"].to_numpy(),
        "stream": asu,
    }


def _alibaba(df: pl.DataFrame, ctx: ReadContext) -> dict[str, np.ndarray]:
    return {
        "time_ns": df["timestamp"].to_numpy() * 1000,
        "device": df["device_id"].to_numpy(),
        "sector": df["offset"].to_numpy() // 512,
        "size_bytes": df["length"].to_numpy(),
    }


def _tencent(df: pl.DataFrame, ctx: ReadContext) -> dict[str, np.ndarray]:
    vol = df["VolumeID"].to_numpy()
    return {
        "time_ns": df["Timestamp"].to_numpy() * 1_000_000_000,
        "device": vol,
        "sector": df["Offset"].to_numpy(),
        "size_bytes": df["Size"].to_numpy() * 512,
        "stream": vol,
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
    if len(head) >= 1 << 16:
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
            df = pl.read_csv(
                io.BytesIO(raw), has_header=False, new_columns=names, infer_schema=False,
                truncate_ragged_lines=True, columns=list(range(len(names))),
            )
            lines = first_line + np.arange(df.height)
            blank = df.select(pl.all_horizontal(pl.all().is_null())).to_series().to_numpy()
            typed = df.select(
                [pl.col(c).str.strip_chars().cast(types[t], strict=False) for c, t in spec.columns]
            )
            keep = ~blank
            missing = df.select(pl.any_horizontal(pl.all().is_null())).to_series().to_numpy()
            unparsed = typed.select(pl.any_horizontal(pl.all().is_null())).to_series().to_numpy()
            for k in np.nonzero(keep & (missing | unparsed))[0].tolist():
                what = "missing fields" if missing[k] else "a field that is not a number"
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
            size = cols["size_bytes"]
            bad = (size < 0) | (size > MAX_REQUEST_BYTES) | (cols["sector"] < 0)
            for k in np.nonzero(bad)[0].tolist():
                ctx.bad(inp.name, "negative or absurd size or offset", line=int(lines[k]))
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


FORMATS = [
    Format(name=s.name, description=s.description, sniff=_sniffer(s), read=_reader(s))
    for s in SPECS
]
