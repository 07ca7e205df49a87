"""Fuzzing ``blocklab ingest``: damaged samples of every format, plain or in gzip, zstd or xz,
with or without --format and --skip-bad, give a valid trace (exit 0) or one line naming the
file and place (exit 2), never a traceback, and leave nothing behind when they fail.

Also the classes the fuzzer found, as plain regression tests (issue 22: all in the Polars CSV
path): a truncated MSR file, bytes that are not UTF-8, a stray quote, numbers that overflow
once scaled to nanoseconds or bytes.
"""

from __future__ import annotations

import collections
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.traces.store import open_trace

from .fuzzing import WRAPPERS, check_outcome, damaged, fuzz_settings, ingest_samples, names_place
from .fuzzing import wrap as wrap_bytes

pytestmark = pytest.mark.fuzz
runner = CliRunner()
SAMPLES = ingest_samples()
SEEN: collections.Counter[str] = collections.Counter()


def _ingest(data: bytes, fmt: str | None, skip_bad: int, name: str = "in.dat"):
    with tempfile.TemporaryDirectory(prefix="blocklab-fuzz-") as t:
        d = Path(t)
        src = d / "src" / name
        src.parent.mkdir()
        src.write_bytes(data)
        out_dir = d / "out"
        out_dir.mkdir()
        out = out_dir / "t.parquet"
        args = ["ingest", str(src), "-o", str(out)]
        if fmt:
            args += ["--format", fmt]
        if skip_bad:
            args += ["--skip-bad", str(skip_bad)]
        res = runner.invoke(app, args)

        def ok() -> None:
            assert sorted(p.name for p in out_dir.iterdir()) == ["t.parquet"]
            pf, _meta = open_trace(out)
            assert pf.metadata.num_rows >= 0
            assert out.stat().st_mode & 0o777 == 0o600

        outcome = check_outcome(res, src, out_dir, ok)
        if outcome == "error":
            line = res.stderr.strip()
            assert names_place(line, src), line
        assert sorted(p.name for p in src.parent.iterdir()) == [name], "a file beside the input"
        return outcome, res


@fuzz_settings(160)
@given(data=st.data(), sample=st.sampled_from(sorted(SAMPLES)),
       how=st.sampled_from(WRAPPERS), explicit=st.booleans(),
       skip_bad=st.sampled_from([0, 0, 0, 1, 5]))
def test_damaged_inputs_never_trace_back(data, sample, how, explicit, skip_bad):
    raw, fmt = SAMPLES[sample]
    bad, what = data.draw(damaged(raw), label="damage")
    blob = wrap_bytes(bad, how)
    if how != "none" and data.draw(st.booleans(), label="damage the compressed bytes"):
        blob, _ = data.draw(damaged(blob), label="compressed damage")
    outcome, _res = _ingest(blob, fmt if explicit else None, skip_bad)
    SEEN[f"{sample}:{outcome}"] += 1


@pytest.mark.parametrize("sample", sorted(SAMPLES))
def test_every_sample_is_valid(sample):
    """The undamaged samples ingest (so the fuzzer starts from inputs that work)."""
    raw, fmt = SAMPLES[sample]
    for how in ("none", "gzip", "zstd", "xz"):
        outcome, res = _ingest(wrap_bytes(raw, how), None, 0)
        assert outcome == "ok", res.output
        assert fmt in res.stdout


# --- the classes found, one test each


MSR = SAMPLES["msr"][0]


def test_truncated_msr_file():
    # polars: SchemaError "provided new_columns does not match number of columns"
    cut = MSR[: MSR.index(b"\n") + 30]  # the file ends 29 bytes into its second line
    outcome, res = _ingest(cut, "msr", 0)
    assert outcome == "error" and ":2: malformed msr CSV line: missing fields" in res.stderr


def test_msr_file_of_one_field_per_line():
    outcome, res = _ingest(b"128166372003061629\n" * 3, "msr", 0)
    assert outcome == "error" and ":1: malformed msr CSV line: missing fields" in res.stderr


def test_bytes_that_are_not_utf8():
    # polars: ComputeError "invalid utf-8 sequence"
    lines = MSR.splitlines(keepends=True)
    lines[3] = lines[3].replace(b"hm", b"h\xff")
    outcome, res = _ingest(b"".join(lines), None, 0)
    assert outcome == "error" and ":4: malformed msr CSV line: bytes that are not UTF-8" \
        in res.stderr
    outcome, res = _ingest(b"".join(lines), None, 1)
    assert outcome == "ok" and "skipped 1 bad record" in res.stderr


def test_stray_quote_does_not_join_lines():
    # polars: a '"' opened a quoted field that swallowed the following lines
    lines = MSR.splitlines(keepends=True)
    lines[2] = lines[2].replace(b",hm,", b',"hm,')
    lines[5] = lines[5].replace(b",Read,", b',"Read,')
    outcome, res = _ingest(b"".join(lines), "msr", 1)
    # the quote is part of a host name (kept) and makes an unknown operation (skipped), and
    # every other line is read as its own record
    assert outcome == "ok" and "skipped 1 bad record" in res.stderr
    assert f"{len(lines) - 1} requests" in res.stdout


@pytest.mark.parametrize("fmt,line,msg", [
    ("msr", b"928166372003061630,hm,1,Read,3154152960,32768,1985\n", "too large"),
    ("msr", b"128166372003061630,hm,1,Read,3154152960,32768,99999999999999999\n", "too large"),
    ("spc", b"0,20941264,8192,W,nan\n", "too large"),
    ("spc", b"0,20941264,8192,W,1e300\n", "too large"),
    ("tencent", b"99999999999,8,8,1,1063\n", "too large"),
    ("tencent", b"1538352000,8,99999999999999999,1,1063\n", "too large"),
    ("alibaba", b"3,R,4096,4096,99999999999999999\n", "too large"),
])
def test_numbers_that_overflow_once_scaled(fmt, line, msg):
    raw = SAMPLES[fmt][0]
    lines = raw.splitlines(keepends=True)
    outcome, res = _ingest(b"".join(lines[:2]) + line, fmt, 0)
    assert outcome == "error" and ":3: " in res.stderr and msg in res.stderr, res.stderr


@fuzz_settings(40)
@given(rows=st.lists(st.lists(st.text(alphabet=st.characters(
    blacklist_characters="\n,\r", blacklist_categories=["Cs"]), max_size=6), max_size=8),
    min_size=1, max_size=20), ncols=st.integers(1, 7))
def test_csv_frame_matches_a_plain_split(rows, ncols):
    """The Polars frame of a chunk has one row per line, the first ``ncols`` comma-separated
    fields as written, null where a line has fewer: as Python's str.split says."""
    from blocklab.traces.formats.csvs import _frame

    raw = "".join(",".join(r) + "\n" for r in rows).encode()
    names = [f"c{i}" for i in range(ncols)]
    got = _frame(raw, names).rows()
    want = []
    for r in rows:
        fields = r if r else []
        want.append(tuple(fields[i] if i < len(fields) else None for i in range(ncols)))
    # Polars reads an empty line as all null and an empty field as null too
    norm = [tuple(None if v in ("", None) else v for v in row) for row in got]
    assert norm == [tuple(None if v in ("", None) else v for v in row) for row in want]
