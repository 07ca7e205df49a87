"""IOR traces: offsets equal a plain-Python transcription of IOR's formulas for every option
combination (Hypothesis); the options IOR rejects get IOR's own reason in one line; the files
are laid out as documented; the closed-loop columns are set; same seed, same bytes."""

from __future__ import annotations

import os
import stat

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.synth import synth_ior
from blocklab.traces.errors import BlocklabError
from blocklab.traces.store import open_trace
from blocklab.traces.synth import ior as I

from .reference import ior as ref

runner = CliRunner()


def _rows(path):
    t = pq.read_table(path).to_pydict()
    return list(zip(t["stream"], t["stream_seq"], t["phase"], t["op"], t["sector"],
                    t["size_bytes"], strict=True))


options = st.fixed_dictionaries({
    "tasks": st.integers(1, 5),
    "transfer": st.integers(1, 4).map(lambda k: 512 * k),
    "mult": st.integers(1, 6),
    "segments": st.integers(0, 3),
    "fpp": st.booleans(),
    "random": st.booleans(),
    "write": st.booleans(),
    "read": st.booleans(),
    "seed": st.integers(0, 2**40),
    "align_sectors": st.sampled_from([1, 8, 2048]),
    "repetitions": st.sampled_from([1, 1, 2, 3]),
})


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(o=options)
def test_offsets_match_ior_formulas(tmp_path, o):
    block = o["transfer"] * o["mult"]
    align = 512 * o["align_sectors"]
    out = tmp_path / "ior.parquet"
    expected_error = ref.validate(o["tasks"], o["transfer"], block, o["segments"], o["random"],
                                  o["write"], o["read"])
    args = dict(tasks=o["tasks"], transfer_size=str(o["transfer"]), block_size=str(block),
                segments=o["segments"], file_per_proc=o["fpp"], random=o["random"],
                write=o["write"], read=o["read"], seed=o["seed"], align=str(align),
                repetitions=o["repetitions"])
    if expected_error:
        with pytest.raises(BlocklabError, match="IOR rejects") as e:
            synth_ior(out, **args)
        assert expected_error in str(e.value)
        return
    synth_ior(out, **args)
    want = ref.requests(o["tasks"], o["transfer"], block, o["segments"], o["fpp"], o["random"],
                        o["write"], o["read"], o["seed"], align, o["repetitions"])
    assert _rows(out) == want
    t = pq.read_table(out).to_pydict()
    assert set(t["outstanding"]) <= {1} and set(t["think_ns"]) <= {0}
    assert set(t["time_ns"]) <= {0}


@given(tasks=st.integers(-2, 4), transfer=st.integers(-1024, 4096),
       block=st.integers(-1024, 16384), segments=st.integers(-2, 3), random=st.booleans(),
       write=st.booleans(), read=st.booleans())
@settings(max_examples=300, deadline=None)
def test_rejections_are_iors(tasks, transfer, block, segments, random, write, read):
    want = ref.validate(tasks, transfer, block, segments, random, write, read)
    try:
        I.ior_check(tasks, transfer, block, segments, random, write, read)
    except I.IorRejected as e:
        assert want is not None and want in str(e)
        assert "\n" not in str(e)
    else:
        assert want is None


def _refusal(tmp_path, args) -> str:
    """``synth ior ARGS``'s one line of error (exit 2, nothing written)."""
    out = tmp_path / "out" / "ior.parquet"
    out.parent.mkdir()
    res = runner.invoke(app, ["synth", "ior", "-o", str(out), *args])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    assert list(out.parent.iterdir()) == []
    return lines[0]


@pytest.mark.parametrize("args, reason", [
    (["-t", "8k", "-b", "4k"], "block size must be a multiple of transfer size"),  # below
    (["-t", "8k", "-b", "0"], "block size must not be smaller than transfer size"),
    (["-t", "4k", "-b", "4k", "-z"], "therefore choose blocksize > transferSize"),
    (["-t", "4k", "-b", "10000"], "block size must be a multiple of transfer size"),
    (["-t", "1001", "-b", "4k"], "transfer size must be a multiple of access size"),
    (["-t", "0", "-b", "4k"], "test will not complete with zero transfer size"),
    (["-N", "0"], "too few tasks for testing"),
    (["-s", "-1"], "segment count must be positive value"),
    (["--no-write", "--no-read"], "test must write, read, or check read/write file"),
])
def test_cli_rejects_with_iors_reason(tmp_path, args, reason):
    line = _refusal(tmp_path, args)
    assert line.startswith("blocklab: error: IOR rejects") and reason in line


@given(n=st.integers(-3, 40), unit=st.sampled_from(["", "k", "K", "m", "g", "t", "P"]))
@settings(max_examples=40, deadline=None)
def test_segment_counts_read_as_iors_string_to_bytes(n, unit):
    """-s takes IOR's suffixes (src/option.c string_to_bytes: k = 2^10, m = 2^20 ...), so
    ``-s 2k`` plans 2,048 segments; before, only digits were taken."""
    from blocklab.traces.synth import parse_count

    shift = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50}[unit.lower()]
    assert parse_count(f"{n}{unit}", "--segments") == n * 2**shift
    assert parse_count(n, "--segments") == n


@pytest.mark.parametrize("text", ["1KiB", "1.5k", "x", "", "4 k b"])
def test_segment_counts_that_are_not_counts(tmp_path, text):
    assert _refusal(tmp_path, ["-s", text]) == (
        f"blocklab: error: --segments: expected a whole count such as 16 or 4k (k = 1024, as "
        f"IOR reads it), found {text!r}")


def test_a_suffixed_segment_count_plans_what_the_count_does(tmp_path):
    a = synth_ior(tmp_path / "a.parquet", 2, "4k", "8k", "1k")
    b = synth_ior(tmp_path / "b.parquet", 2, "4k", "8k", 1024)
    assert a.requests == b.requests == 2 * 1024 * 2 * 2
    assert _rows(tmp_path / "a.parquet") == _rows(tmp_path / "b.parquet")


@pytest.mark.parametrize("reps", ["0", "-2"])
def test_cli_rejects_too_few_repetitions(tmp_path, reps):
    """IOR warns and runs once; blocklab refuses, in one line, writing nothing."""
    assert _refusal(tmp_path, ["-i", reps]).startswith(
        f"blocklab: error: --repetitions: must be at least 1, found {reps}")


def test_repetitions_phases_in_the_metadata(tmp_path):
    out = tmp_path / "ior.parquet"
    res = runner.invoke(app, ["synth", "ior", "-o", str(out), "-N", "2", "-t", "4k", "-b", "8k",
                              "-i", "3", "--json"])
    assert res.exit_code == 0, res.output
    _pf, meta = open_trace(out)
    assert meta.extra["phases"] == ["write", "read"] * 3
    assert meta.extra["options"]["repetitions"] == 3
    t = pq.read_table(out).to_pydict()
    assert len(t["phase"]) == 2 * 2 * 2 * 3 and sorted(set(t["phase"])) == list(range(6))


def test_files_must_fit_the_volume(tmp_path):
    out = tmp_path / "ior.parquet"
    kw = dict(tasks=4, transfer_size="64k", block_size="1m", segments=4, file_per_proc=True)
    with pytest.raises(BlocklabError, match="--capacity: the IOR files need 16777216 bytes"):
        synth_ior(out, capacity="16383k", **kw)
    assert not out.exists()
    # 4 files of 4 MiB on 1 MiB boundaries: exactly 16 MiB
    synth_ior(out, capacity="16m", **kw)
    assert max(_rows(out), key=lambda row: row[4])[4] == (16 << 20) // 512 - 128


def test_allocator_and_metadata(tmp_path):
    out = tmp_path / "ior.parquet"
    synth_ior(out, tasks=3, transfer_size="4k", block_size="12k", segments=2, file_per_proc=True,
              align="64k", seed=7)
    _pf, meta = open_trace(out)
    assert meta.source_format == "synth-ior"
    assert meta.extra["seed"] == 7 and meta.extra["options"]["file_per_proc"] is True
    # 24 KiB per file, each on the next 64 KiB boundary
    assert [f["first_sector"] for f in meta.extra["files"]] == [0, 128, 256]
    rows = _rows(out)
    by_task = {t: sorted(r[4] for r in rows if r[0] == t and r[2] == 0) for t in range(3)}
    assert by_task[1] == [128 + 8 * k for k in range(6)]
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600


def test_same_seed_same_bytes(tmp_path):
    a, b, c = (tmp_path / f"{n}.parquet" for n in "abc")
    kw = dict(tasks=4, transfer_size="4k", block_size="64k", segments=3, random=True)
    synth_ior(a, seed=5, **kw)
    synth_ior(b, seed=5, **kw)
    synth_ior(c, seed=6, **kw)
    assert a.read_bytes() == b.read_bytes()
    assert _rows(a) != _rows(c)
