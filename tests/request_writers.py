"""Plain-Python writers of the one-request-per-line formats, written from each format's public
description (not from blocklab's readers), for round-trip tests.

Each writer takes requests as dicts with ``t`` (ns since the first request), ``dev``,
``sector`` (512 B), ``size`` (bytes), ``op`` ("read"/"write"/...), plus format extras, and
returns the file's text. fio's writers also take op "datasync" (fio's fdatasync action,
a flush like "sync").
"""

from __future__ import annotations

MSR_START_FILETIME = 128_166_372_000_000_000  # 2007-02-22, in 100 ns ticks since 1601
ALIBABA_START_US = 1_577_836_800_000_000  # 2020-01-01 in microseconds since 1970
TENCENT_START_S = 1_538_352_000  # 2018-10-01 in seconds since 1970


def msr(reqs: list[dict]) -> str:
    # Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime (100 ns ticks, bytes)
    return "".join(
        f"{MSR_START_FILETIME + r['t'] // 100},{r['host']},{r['dev']},"
        f"{'Read' if r['op'] == 'read' else 'Write'},{r['sector'] * 512},{r['size']},"
        f"{r['latency'] // 100}\n"
        for r in reqs
    )


def spc(reqs: list[dict]) -> str:
    # ASU,LBA,Size,Opcode,Timestamp (seconds, here with 6 decimals)
    return "".join(
        f"{r['dev']},{r['sector']},{r['size']},{'r' if r['op'] == 'read' else 'w'},"
        f"{r['t'] // 1_000_000_000}.{(r['t'] // 1000) % 1_000_000:06d}\n"
        for r in reqs
    )


def alibaba(reqs: list[dict]) -> str:
    # device_id,opcode,offset,length,timestamp (bytes, microseconds since 1970)
    return "".join(
        f"{r['dev']},{'R' if r['op'] == 'read' else 'W'},{r['sector'] * 512},{r['size']},"
        f"{ALIBABA_START_US + r['t'] // 1000}\n"
        for r in reqs
    )


def tencent(reqs: list[dict]) -> str:
    # Timestamp,Offset,Size,IOType,VolumeID (seconds since 1970, sectors, 0 read / 1 write)
    return "".join(
        f"{TENCENT_START_S + r['t'] // 1_000_000_000},{r['sector']},{r['size'] // 512},"
        f"{0 if r['op'] == 'read' else 1},{r['dev']}\n"
        for r in reqs
    )


def fio_v3(reqs: list[dict], files: list[str]) -> str:
    # "fio version 3 iolog", then "usec file action offset length"
    lines = ["fio version 3 iolog"]
    lines += [f"0 {f} add" for f in files] + [f"0 {f} open" for f in files]
    names = {"read": "read", "write": "write", "discard": "trim", "flush": "sync",
             "datasync": "datasync"}
    for r in reqs:
        lines.append(f"{r['t'] // 1000} {files[r['dev']]} {names[r['op']]} "
                     f"{r['sector'] * 512} {r['size']}")
    end = reqs[-1]["t"] // 1000 if reqs else 0
    lines += [f"{end} {f} close" for f in files]
    return "\n".join(lines) + "\n"


def fio_v2(reqs: list[dict], files: list[str]) -> str:
    # "fio version 2 iolog", then "file action offset length", waits in microseconds
    lines = ["fio version 2 iolog"]
    lines += [f"{f} add" for f in files] + [f"{f} open" for f in files]
    names = {"read": "read", "write": "write", "discard": "trim", "flush": "sync",
             "datasync": "datasync"}
    clock = 0
    for r in reqs:
        us = r["t"] // 1000
        if us > clock:
            lines.append(f"{files[r['dev']]} wait {us - clock} 0")
            clock = us
        lines.append(f"{files[r['dev']]} {names[r['op']]} {r['sector'] * 512} {r['size']}")
    lines += [f"{f} close" for f in files]
    return "\n".join(lines) + "\n"


def disksim(reqs: list[dict]) -> str:
    # arrival_ms devno blkno bcount flags (bit 0 = read); ms with 6 decimals (whole ns)
    return "".join(
        f"{r['t'] // 1_000_000}.{r['t'] % 1_000_000:06d} {r['dev']} {r['sector']} "
        f"{r['size'] // 512} {1 if r['op'] == 'read' else 0}\n"
        for r in reqs
    )


def mqsim(reqs: list[dict]) -> str:
    # arrival_ns device lba size_sectors type (1 read, 0 write)
    return "".join(
        f"{r['t']} {r['dev']} {r['sector']} {r['size'] // 512} {1 if r['op'] == 'read' else 0}\n"
        for r in reqs
    )


def validate(reqs: list[dict]) -> str:
    # R|W Hit|Miss blkno bcount servtime_us idle_us; arrival(k+1) = arrival(k) + serv + idle
    lines = []
    for k, r in enumerate(reqs):
        nxt = reqs[k + 1]["t"] if k + 1 < len(reqs) else r["t"] + r["latency"]
        idle = nxt - r["t"] - r["latency"]
        assert idle >= 0
        lines.append(
            f"{'R' if r['op'] == 'read' else 'W'} {'Hit' if r['hit'] else 'Miss'} "
            f"{r['sector']} {r['size'] // 512} {r['latency'] / 1000:.3f} {idle / 1000:.3f}"
        )
    return "\n".join(lines) + "\n"
