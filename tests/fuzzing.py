"""What the fuzz tests share: valid samples of every input, Hypothesis strategies that damage
them the way files get damaged (cut short, bits flipped, junk lines, fields shuffled, lines
swapped, random bytes, empty), and the property every command must keep.

The property (issue 22): a command given such an input exits 0 and leaves a valid output, or
exits 2 with one line naming the file (and the line or byte offset where it has one); never a
traceback, and never an output or temporary file left behind when it fails.

``make test`` runs a few hundred examples in all; ``make fuzz`` loads the Hypothesis profile
``fuzz`` (HYPOTHESIS_PROFILE=fuzz) and runs many thousands.
"""

from __future__ import annotations

import gzip
import lzma
import os
import re
import subprocess
import tempfile
from pathlib import Path

import zstandard
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from . import request_writers as W
from .blktrace_writer import Request, write_merged
from .conftest import SHARED

ROOT = Path(__file__).resolve().parent.parent

settings.register_profile("fuzz", max_examples=3000, deadline=None,
                          suppress_health_check=list(HealthCheck))
FUZZING = os.environ.get("HYPOTHESIS_PROFILE") == "fuzz"


def fuzz_settings(examples: int) -> settings:
    """``examples`` under ``make test``; the fuzz profile's count (thousands) under make fuzz."""
    return settings(max_examples=settings.get_profile("fuzz").max_examples if FUZZING
                    else examples, deadline=None, derandomize=not FUZZING,
                    suppress_health_check=list(HealthCheck))


# ---------------------------------------------------------------------------------------------
# valid samples of every ingest format


def _requests(n: int = 24) -> list[dict]:
    # sizes, offsets and response times of the kind the MSR hm_0 trace holds
    return [{"t": k * 1_731_000 + (k % 5) * 97_000, "dev": k % 3,
             "op": "read" if k % 3 else "write", "sector": 6_160_453 + 40 * k,
             "size": 4096 * (1 + k % 8), "host": "hm", "latency": 198_500 + 1000 * k,
             "hit": k % 4 == 0} for k in range(n)]


def _head(path: Path, lines: int) -> bytes:
    data = lzma.decompress(path.read_bytes()) if path.suffix == ".xz" else path.read_bytes()
    return b"".join(data.splitlines(keepends=True)[:lines])


def _blktrace(tmp: Path) -> bytes:
    reqs = [Request(dev=(8 << 20) | 16 * (k % 2), sector=4096 * k + 64, nbytes=4096 * (1 + k % 3),
                    op="read" if k % 2 else "write", pid=100 + k % 2, cpu=0, q=1000 * k + 1,
                    g=1000 * k + 20, i=1000 * k + 40, d=1000 * k + 90, c=1000 * k + 600)
            for k in range(12)]
    return write_merged(tmp / "s.blktrace.0", reqs, {100: "fio", 101: "kworker/0:1H"}).read_bytes()


_BLKPARSE_FALLBACK = b"".join(
    f"  8,16   0   {k + 1:6d}   {k * 0.000731:.9f}  {697 + k % 2}  {a}  {rw} {1234 + 8 * k} + 8 "
    f"[{'kworker/0:1H' if k % 2 else 'fio'}]\n".encode()
    for k in range(20) for a, rw in (("Q", "WS"), ("G", "WS"), ("D", "WS"), ("C", "WS")))


def _blkparse(tmp: Path, blob: bytes) -> bytes:
    """blkparse's own text of the blktrace sample (the real tool), when it is installed."""
    (tmp / "b.blktrace.0").write_bytes(blob)
    try:
        out = subprocess.run(["blkparse", "-i", str(tmp / "b")], capture_output=True,
                             check=True, timeout=60, cwd=tmp).stdout
    except (OSError, subprocess.SubprocessError):
        return _BLKPARSE_FALLBACK
    return out or _BLKPARSE_FALLBACK


def ingest_samples() -> dict[str, tuple[bytes, str]]:
    """name -> (file content, ingest format name) for every format ``ingest`` reads."""
    reqs = _requests()
    files = ["/dev/sdb", "/mnt/data.bin", "/dev/nvme0n1"]
    out = {
        "msr": (W.msr(reqs).encode(), "msr"),
        "spc": (W.spc(reqs).encode(), "spc"),
        "alibaba": (W.alibaba(reqs).encode(), "alibaba"),
        "tencent": (W.tencent(reqs).encode(), "tencent"),
        "fio3": (W.fio_v3(reqs, files).encode(), "fio"),
        "fio2": (W.fio_v2(reqs, files).encode(), "fio"),
        "disksim": (W.disksim(reqs).encode(), "disksim"),
        "mqsim": (W.mqsim(reqs).encode(), "mqsim"),
        "validate": (W.validate(reqs).encode(), "disksim-validate"),
    }
    traces = SHARED / "traces"
    if (traces / "tracefs-fio-loop0-vda.txt").is_file():  # real captures
        out["tracefs"] = (_head(traces / "tracefs-fio-loop0-vda.txt", 40), "tracefs")
        out["mqsim-tpcc"] = (_head(traces / "disksim-ascii-tpcc-small.trace", 30), "mqsim")
    else:
        out["tracefs"] = (_head(ROOT / "traces/samples/tracefs-fio-loop0-vda.txt.xz", 40),
                          "tracefs")
    with tempfile.TemporaryDirectory(prefix="blocklab-fuzz-") as t:
        blob = _blktrace(Path(t))
        out["blktrace"] = (blob, "blktrace")
        out["blkparse"] = (_blkparse(Path(t), blob), "blkparse")
    return out


# ---------------------------------------------------------------------------------------------
# damage


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


@st.composite
def damaged(draw, data: bytes) -> tuple[bytes, str]:
    """``data`` damaged by one to three of the usual mishaps; returns (bytes, what was done)."""
    done = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "flip", "junk", "shuffle", "swap", "cut-line",
                                     "random", "empty", "duplicate"]))
        done.append(kind)
        if kind == "truncate":
            data = data[: draw(st.integers(0, len(data)))]
        elif kind == "flip" and data:
            buf = bytearray(data)
            for _ in range(draw(st.integers(1, 4))):
                i = draw(st.integers(0, len(buf) - 1))
                buf[i] ^= 1 << draw(st.integers(0, 7))
            data = bytes(buf)
        elif kind == "junk":
            lines = _lines(data)
            i = draw(st.integers(0, len(lines)))
            junk = draw(st.one_of(st.binary(max_size=40),
                                  st.text(max_size=40).map(lambda s: s.encode()),
                                  st.sampled_from([b'"', b"#", b"\r", b"\x00", b",,,,,,,",
                                                   b"nan,inf,-1,x", b"9" * 30])))
            lines.insert(i, junk)
            data = b"\n".join(lines)
        elif kind in ("shuffle", "cut-line") and data:
            lines = _lines(data)
            i = draw(st.integers(0, len(lines) - 1))
            if kind == "cut-line":
                lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
            else:
                sep = b"," if b"," in lines[i] else b" "
                fields = lines[i].split(sep)
                lines[i] = sep.join(draw(st.permutations(fields)))
            data = b"\n".join(lines)
        elif kind == "swap" and data:
            lines = _lines(data)
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
            data = b"\n".join(lines)
        elif kind == "duplicate" and data:
            i = draw(st.integers(0, len(data)))
            j = draw(st.integers(i, min(len(data), i + 200)))
            data = data[:j] + data[i:j] + data[j:]
        elif kind == "random":
            data = draw(st.binary(max_size=300))
        elif kind == "empty":
            data = b""
    return data, "+".join(done)


def wrap(data: bytes, how: str) -> bytes:
    if how == "gzip":
        return gzip.compress(data, mtime=0)
    if how == "zstd":
        return zstandard.ZstdCompressor().compress(data)
    if how == "xz":
        return lzma.compress(data)
    return data


WRAPPERS = ["none", "none", "gzip", "zstd", "xz"]


# ---------------------------------------------------------------------------------------------
# the property


def check_outcome(res, src: Path | str, out_dir: Path, ok: callable | None = None,
                  where: bool = True) -> str:
    """Exit 0 with ``ok()`` true, or exit 2 with one line naming ``src``; nothing left in
    ``out_dir`` on failure. Returns "ok" or "error" (for statistics)."""
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        import traceback

        raise AssertionError("a traceback:\n" + "".join(
            traceback.format_exception(res.exception)))
    assert res.exit_code in (0, 2), (res.exit_code, res.output)
    if res.exit_code == 0:
        if ok is not None:
            ok()
        return "ok"
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("blocklab: error: "), lines[0]
    assert "Traceback" not in res.output
    if where:
        assert str(src) in lines[0], (str(src), lines[0])
    left = sorted(p.name for p in out_dir.iterdir()) if out_dir.exists() else []
    assert left == [], f"left behind: {left}"
    return "error"


PLACE = r"(:\d+:|: byte \d+:|: )"


def names_place(line: str, src: Path | str) -> bool:
    """The message names ``src`` followed by a line number, a byte offset, or (for faults of
    the whole file: unknown format, corrupt compression) nothing."""
    return re.search(re.escape(str(src)) + PLACE, line) is not None
