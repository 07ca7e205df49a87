"""Bad input in the binary and event-text formats: one line naming the file and the byte
offset or line, exit status 2, no output (nor temporary) file left; ``--skip-bad N``."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blocklab.pipeline.cli import app

from .blktrace_writer import Event, pack
from .damage import flip_page_bytes

DEV = 8 << 20
runner = CliRunner()


def _events(n: int) -> list[Event]:
    out = []
    for j in range(n):
        out += [Event(100 * j, "Q", DEV, 8 * j, 4096, "read", 7, 0),
                Event(100 * j + 50, "C", DEV, 8 * j, 4096, "read", 7, 0)]
    return out


def _blob(events: list[Event]) -> bytes:
    return b"".join(pack(e, k) for k, e in enumerate(events))


def run_ingest(tmp_path: Path, src: Path, *extra: str):
    out = tmp_path / "out" / "t.parquet"
    out.parent.mkdir(exist_ok=True)
    res = runner.invoke(app, ["ingest", str(src), "-o", str(out), *extra])
    return res, out


def assert_clean_failure(res, out: Path, *needles: str) -> str:
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("blocklab: error: ")
    for n in needles:
        assert n in lines[0], lines[0]
    assert list(out.parent.iterdir()) == [], "an output or temporary file was left behind"
    return lines[0]


def test_truncated_record(tmp_path):
    blob = _blob(_events(10))
    src = tmp_path / "cut.blktrace.0"
    src.write_bytes(blob[: 48 * 7 + 20])  # the 8th record is cut 20 bytes in
    res, out = run_ingest(tmp_path, src)
    assert_clean_failure(res, out, str(src), "byte 336", "truncated record")


def test_wrong_magic_first_record(tmp_path):
    blob = bytearray(_blob(_events(3)))
    blob[0:4] = b"\x00\x00\x00\x00"
    src = tmp_path / "bad.blktrace.0"
    src.write_bytes(bytes(blob))
    res, out = run_ingest(tmp_path, src, "--format", "blktrace")
    assert_clean_failure(res, out, str(src), "byte 0", "bad magic")


def test_wrong_magic_mid_file_and_skip_bad(tmp_path):
    blob = bytearray(_blob(_events(10)))
    blob[48 * 5 : 48 * 5 + 4] = b"JUNK"
    src = tmp_path / "mid.blktrace.0"
    src.write_bytes(bytes(blob))
    res, out = run_ingest(tmp_path, src)
    assert_clean_failure(res, out, str(src), "byte 240", "bad magic")
    # skipping resynchronises on the next record's magic: one record (a C) is lost
    res, out = run_ingest(tmp_path, src, "--skip-bad", "1")
    assert res.exit_code == 0, res.output
    assert "skipped 1 bad record" in res.stderr
    assert out.exists()


def test_unknown_action(tmp_path):
    evs = _events(4)
    blob = bytearray(_blob(evs))
    struct.pack_into("<I", blob, 48 * 3 + 28, 99 | (1 << 16))
    src = tmp_path / "act.blktrace.0"
    src.write_bytes(bytes(blob))
    res, out = run_ingest(tmp_path, src)
    assert_clean_failure(res, out, "byte 144", "unknown blktrace action")


def test_time_backwards_binary(tmp_path):
    evs = _events(4)
    evs[5].time = 1  # the third request's completion goes back in time
    src = tmp_path / "back.blktrace.0"
    src.write_bytes(_blob(evs))
    res, out = run_ingest(tmp_path, src)
    assert_clean_failure(res, out, "byte 240", "backwards")


def test_absurd_size_text(tmp_path):
    src = tmp_path / "b.txt"
    good = "  8,0    0        1     0.000000000   697  Q  WS 1234 + 8 [kworker]\n"
    src.write_text(good + "  8,0    0        2     0.000000100   697  Q  WS 5000 + 99999999999 [x]\n")
    res, out = run_ingest(tmp_path, src)
    assert_clean_failure(res, out, f"{src}:2", "absurd request size")


TRACEFS_OK = (
    "fio-1 [000] ..... 10.000001: block_rq_issue: 8,0 R 4096 () 100 + 8 be,0,4 [fio]\n"
    "<idle>-0 [001] ..s.. 10.000101: block_rq_complete: 8,0 R () 100 + 8 be,0,4 [0]\n"
)


def test_tracefs_malformed_line(tmp_path):
    src = tmp_path / "t.txt"
    src.write_text(TRACEFS_OK + "fio-1 [000] ..... 10.000201: block_rq_issue: 8,0 R 4096 () xx\n")
    res, out = run_ingest(tmp_path, src)
    assert_clean_failure(res, out, f"{src}:3", "not a tracefs block event line")


def test_tracefs_time_backwards(tmp_path):
    src = tmp_path / "t.txt"
    src.write_text(TRACEFS_OK + TRACEFS_OK.replace("10.0000", "9.0000"))
    res, out = run_ingest(tmp_path, src)
    assert_clean_failure(res, out, f"{src}:3", "time runs backwards")


def test_blkparse_unknown_action(tmp_path):
    src = tmp_path / "b.txt"
    good = "  8,0    0        1     0.000000000   697  Q  WS 1234 + 8 [kworker]\n"
    src.write_text(good * 3 + "  8,0    0        4     0.000000100   697  Z  WS 1234 + 8 [x]\n")
    res, out = run_ingest(tmp_path, src, "--format", "blkparse")
    assert_clean_failure(res, out, f"{src}:4", "unknown action")


def test_unknown_format(tmp_path):
    src = tmp_path / "mystery.bin"
    src.write_bytes(bytes(range(256)) * 4)
    res, out = run_ingest(tmp_path, src)
    assert_clean_failure(res, out, str(src), "unknown format")


def test_unknown_format_name(tmp_path):
    src = tmp_path / "t.txt"
    src.write_text(TRACEFS_OK)
    res, out = run_ingest(tmp_path, src, "--format", "nope")
    assert_clean_failure(res, out, "unknown format 'nope'")


def test_missing_file(tmp_path):
    res, out = run_ingest(tmp_path, tmp_path / "absent.txt")
    assert_clean_failure(res, out, "absent.txt", "no such file")


def test_corrupt_compressed_input(tmp_path):
    import gzip

    src = tmp_path / "t.txt.gz"
    src.write_bytes(gzip.compress(TRACEFS_OK.encode() * 100)[:60])
    res, out = run_ingest(tmp_path, src)
    assert_clean_failure(res, out, str(src), "gzip")


@pytest.mark.parametrize("n_bad,allowed,ok", [(2, 2, True), (3, 2, False)])
def test_skip_bad_budget_text(tmp_path, n_bad, allowed, ok):
    src = tmp_path / "t.txt"
    bad = "garbage line\n"
    src.write_text(TRACEFS_OK + bad * n_bad + TRACEFS_OK.replace("10.", "11."))
    res, out = run_ingest(tmp_path, src, "--skip-bad", str(allowed))
    if ok:
        assert res.exit_code == 0, res.output
        assert f"skipped {n_bad} bad record" in res.stderr
        from blocklab.traces.store import open_trace

        pf, meta = open_trace(out)
        assert pf.metadata.num_rows == 2 and meta.counts["skipped"] == n_bad
    else:
        assert_clean_failure(res, out, f"{src}:{3 + allowed}")


def test_output_is_owner_only(tmp_path):
    src = tmp_path / "t.txt"
    src.write_text(TRACEFS_OK)
    res, out = run_ingest(tmp_path, src)
    assert res.exit_code == 0
    assert out.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("fields", ["abc + 8 [fio]", "-64 + 8 [fio]", "fio"])
def test_a_blkparse_line_with_a_field_that_is_not_blkparses(tmp_path, fields):
    """What follows the RWBS field is a sector, "[comm]" or "(...)" in blkparse's output
    (blkparse_fmt.c); a sector that is not a number was taken for none (an event at sector 0),
    and the error came a line later, as time running backwards."""
    src = tmp_path / "t.blkparse"
    lines = [f"  8,0    0  {k + 1:7d}     0.00000{k}000   100  {act}   W 64 + 8 [{end}]"
             for k, (act, end) in enumerate([("Q", "fio"), ("D", "fio"), ("C", "0"), ("Q", ""),
                                             ("D", "fio"), ("C", "0")])]
    lines[3] = lines[3][: lines[3].index(" W ") + 3] + fields
    src.write_text("\n".join(lines) + "\n")
    res, out = run_ingest(tmp_path, src, "--format", "blkparse")
    assert_clean_failure(res, out, f"{src}:4: ", "not a blkparse line", fields)


@pytest.mark.parametrize("line", [100, 1234])
def test_a_line_number_is_printed_as_a_number(tmp_path, line):
    """Line 100 printed as ``:100:`` (rich reads ``:100:`` and ``:1234:`` as emoji codes, and
    printed 💯 and 🔢 where the line number belonged)."""
    src = tmp_path / "t.disksim.txt"
    rows = [f"{k}.000000 0 {8 * k} 8 1" for k in range(line + 5)]
    rows[line - 1] = "1.0 0 abc 8 1"
    src.write_text("\n".join(rows) + "\n")
    res, out = run_ingest(tmp_path, src, "--format", "disksim")
    assert_clean_failure(res, out, f"{src}:{line}: ")


@pytest.mark.replays
def test_replay_refuses_a_folder_that_is_not_a_run(tmp_path):
    """``replay -o`` into an existing folder that is not a run folder (no meta.json) and holds
    anything: one line naming it, exit 2, its files untouched, no temporary left. The rename
    that puts a run in place once deleted whatever the folder held. An empty folder, or an
    older run folder, is still replaced."""
    from .conftest import ROOT

    array = ROOT / "examples" / "arrays" / "raid5-entry.toml"
    trace = tmp_path / "t.parquet"
    res = runner.invoke(app, ["synth", "spc1", "--bsu", "1", "--duration", "2", "--array",
                              str(array), "-o", str(trace)])
    assert res.exit_code == 0, res.output
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("important\n")
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o", str(mine)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"blocklab: error: {mine}: "), res.stderr
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert (mine / "notes.txt").read_text() == "important\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "t.parquet"]
    other = tmp_path / "other"  # another tool's meta.json is not a run's
    other.mkdir()
    (other / "meta.json").write_text('{"tool": "not blocklab"}')
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o", str(other)])
    assert res.exit_code == 2 and f"{other}: exists and is not a run folder" in res.stderr
    assert (other / "meta.json").read_text() == '{"tool": "not blocklab"}'
    link = tmp_path / "link"  # a symbolic link: refused before the work (the rename failed)
    link.symlink_to(mine)
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o", str(link)])
    assert res.exit_code == 2 and f"{link}: a symbolic link" in res.stderr, res.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    for _ in range(2):  # into an empty folder, then over the run folder it became
        res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o", str(empty)])
        assert res.exit_code == 0, res.output
        assert (empty / "meta.json").exists()


@pytest.mark.parametrize("kind", ["blktrace", "disksim"])
def test_a_device_the_input_does_not_have(tmp_path, kind):
    """``ingest --device`` of a device no request has: one line naming the input and the
    devices it has, exit 2, nothing written (it wrote an empty trace and exited 0), for a
    format whose reader keeps the device early (blktrace) and one filtered after it."""
    if kind == "blktrace":
        src = tmp_path / "t.blktrace.0"
        src.write_bytes(_blob(_events(5)))
        have = "devices: 8,0)"
    else:
        src = tmp_path / "t.disksim.txt"
        src.write_text("0.0 3 8 8 1\n1.0 5 64 8 0\n")
        have = "devices: 3, 5)"
    res, out = run_ingest(tmp_path, src, "--device", "9:9")
    assert_clean_failure(res, out, f"--device 9:9: no such device in {src}", have)
    res, out = run_ingest(tmp_path, src, "--device", "8:0" if kind == "blktrace" else "5")
    assert res.exit_code == 0, res.output


def test_a_device_with_events_but_no_request_gives_an_empty_trace(tmp_path):
    """--device of a device the input has, with plug and unplug events but no request: that
    device is there, so an empty trace (exit 0), not "no such device" naming it."""
    ev = [Event(10, "P", 8 << 20, 0, 0, "read", 7, 0), Event(20, "U", 8 << 20, 0, 0, "read", 7, 0)]
    for j in range(3):
        ev += [Event(100 * j, "Q", 8 << 20 | 16, 8 * j, 4096, "read", 7, 0),
               Event(100 * j + 50, "C", 8 << 20 | 16, 8 * j, 4096, "read", 7, 0)]
    ev.sort(key=lambda e: e.time)
    src = tmp_path / "p.blktrace.0"
    src.write_bytes(_blob(ev))
    res, out = run_ingest(tmp_path, src, "--device", "8:0")
    assert res.exit_code == 0, res.output


@pytest.mark.replays
@pytest.mark.parametrize("env", ["BLOCKLAB_DUCKDB_MEMORY", "BLOCKLAB_DUCKDB_TEMP_MAX"])
def test_a_duckdb_setting_it_refuses(tmp_path, monkeypatch, env):
    """A DuckDB memory limit or temporary-disk cap that DuckDB cannot read: one line naming
    the variable, exit 2, before any work (it was a traceback; replay's came after its run
    folder was written, at the summary). Given as DuckDB writes sizes, it is taken."""
    from .conftest import ROOT

    array = ROOT / "examples" / "arrays" / "raid5-entry.toml"
    trace = tmp_path / "t.parquet"
    res = runner.invoke(app, ["synth", "spc1", "--bsu", "1", "--duration", "2", "--array",
                              str(array), "-o", str(trace)])
    assert res.exit_code == 0, res.output
    monkeypatch.setenv(env, "lots")
    for args in (["replay", str(trace), "--array", str(array), "-o", str(tmp_path / "run")],
                 ["trace", "stats", str(trace)], ["query", str(trace), "trace-summary"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert lines == [f"blocklab: error: {env}='lots': Parser Error: Memory must have a "
                         "number (e.g. 1GB) (DuckDB's syntax: 4GB, 500MB)"], res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]
    monkeypatch.setenv(env, "512MB")
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o",
                              str(tmp_path / "run")])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("device", ["banana", "8:0:1", "8:x", "4096:0", "8:1048576", "-1"])
def test_a_device_that_is_not_one(tmp_path, device):
    """``--device`` that is not MAJ:MIN, MAJ,MIN or a dev_t (a ValueError's traceback, or a
    major past the 12 bits a dev_t has, which named another device)."""
    src = tmp_path / "t.txt"
    src.write_text(TRACEFS_OK)
    res, out = run_ingest(tmp_path, src, "--device", device)
    assert_clean_failure(res, out, f"--device {device}: expected MAJ:MIN")


@pytest.mark.parametrize("command", [["cache", "mrc", "{t}"],
                                     ["replay", "{t}", "--array", "{a}", "-o", "{o}"]])
def test_a_trace_damaged_after_it_was_written(tmp_path, command):
    """A trace whose bytes changed after it was written (a bad copy, a failing disk) was read
    as other numbers without a word: a review changed 2,000 bytes of a trace, its sector
    column came out different, and replay and mrc answered from it. Every page carries a CRC
    now, checked on reading: one line naming the file and the damaged column, exit 2, no
    output."""

    from blocklab.pipeline.synth import synth_iometer

    array = tmp_path / "a.toml"
    array.write_text('[[group]]\nname = "g"\nlayout = "raid0"\nwidth = 2\ndrive = "atlas10k"\n')
    trace = tmp_path / "t.parquet"
    synth_iometer(trace, requests=50_000, array=str(array))
    offset = flip_page_bytes(trace, "sector")
    out = tmp_path / "out"
    args = [x.format(t=trace, a=array, o=out) for x in command]
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert res.stderr == (f"blocklab: error: {trace}: damaged in row group 0's column sector (its "
                          f"data start at byte {offset:,}): could not verify page "
                          "integrity, CRC checksum verification failed for page_ordinal "
                          f"{res.stderr.split('page_ordinal ')[1].split(';')[0]}; the file "
                          "changed after it was written (write it again)\n")
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.toml", "t.parquet"]


def test_run_files_carry_page_crcs(tmp_path):
    """A run folder's Parquet files carry a CRC-32 per page too: damage to ios.parquet's
    pages is found by a reader that checks them (pyarrow's page_checksum_verification), where
    without the CRCs it reads other numbers."""
    import pyarrow.parquet as pq

    from blocklab.pipeline.synth import synth_iometer

    array = tmp_path / "a.toml"
    array.write_text('[[group]]\nname = "g"\nlayout = "raid0"\nwidth = 2\ndrive = "atlas10k"\n')
    trace = tmp_path / "t.parquet"
    synth_iometer(trace, requests=20_000, array=str(array))
    run = tmp_path / "run"
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o", str(run)])
    assert res.exit_code == 0, res.output
    ios = run / "ios.parquet"
    pq.read_table(ios, page_checksum_verification=True)  # whole: it reads
    flip_page_bytes(ios, "latency_ns", count=32)
    with pytest.raises(OSError, match="CRC checksum verification failed"):
        pq.read_table(ios, page_checksum_verification=True)


def _flip_column(f: Path, column: str) -> None:
    """Change every 97th byte of ``column``'s chunk in ``f`` (past its first page header), as a
    failing disk would: the compressed pages no longer decompress."""
    import pyarrow.parquet as pq

    md = pq.ParquetFile(f).metadata.row_group(0)
    col = next(md.column(i) for i in range(md.num_columns)
               if md.column(i).path_in_schema == column)
    data = bytearray(f.read_bytes())
    for at in range(col.data_page_offset + 64,
                    col.data_page_offset + col.total_compressed_size, 97):
        data[at] ^= 0x5A
    f.write_bytes(bytes(data))


@pytest.mark.parametrize("command", [["trace", "stats"], ["trace", "head"],
                                     ["trace", "iostat"], ["trace", "iostat", "run"]])
def test_a_page_damaged_read_through_duckdb(tmp_path, command):
    """A trace (or a run's ios.parquet) whose pages changed after they were written, read by
    the commands that ask DuckDB, which reads the pages only when the query runs (after the
    views were made): trace stats and trace head gave DuckDB's traceback (exit 1), and so did
    trace iostat when the damage was in a column its own checks read (complete_ns). Now one
    line naming the query and the input, as blocklab query gives, exit 2, and the damaged file
    when DuckDB's words name none (a run's ios.parquet: "don't know what type:")."""
    array = tmp_path / "a.toml"
    array.write_text('[[group]]\nname = "g"\nlayout = "raid0"\nwidth = 2\ndrive = "atlas10k"\n')
    trace = tmp_path / "t.parquet"
    sample = Path(__file__).parents[1] / "traces/samples/tracefs-fio-loop0-vda.txt.xz"
    res = runner.invoke(app, ["ingest", str(sample), "-o", str(trace)])  # with completions
    assert res.exit_code == 0, res.output
    given = trace
    if command[-1] == "run":
        command = command[:-1]
        given = tmp_path / "run"
        res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o", str(given),
                                  "--wrap"])
        assert res.exit_code == 0, res.output
        _flip_column(given / "ios.parquet", "complete_ns")
    else:
        _flip_column(trace, "complete_ns")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    res = runner.invoke(app, [*command, str(given)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("blocklab: error: query "), lines[0]
    assert f" over {given}: " in lines[0], lines[0]
    if given.name == "run":  # the file too: DuckDB's "don't know what type:" names none
        assert "ios.parquet" in lines[0], lines[0]
    assert lines[0].isprintable(), lines[0]  # (not the damaged bytes DuckDB's words carry)
    assert "Traceback" not in res.output
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_an_error_shows_control_bytes_escaped(tmp_path):
    """A control byte in an error's words (an escape in a file's name; a damaged footer's type
    byte in pyarrow's "don't know what type: ...") is shown as \\xNN, not sent raw to the
    terminal, and the error stays one line."""
    name = str(tmp_path / "a\x1b[31mred.parquet")
    res = CliRunner().invoke(app, ["trace", "stats", name])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, res.output
    assert lines[0].endswith("a\\x1b[31mred.parquet: no such file"), lines[0]
    assert "\x1b" not in res.output


def test_a_failure_line_shows_the_bytes_of_a_damaged_page_escaped():
    """DuckDB's words for a damaged page may carry the page's raw bytes ("don't know what
    type: " and a byte 0x0f): the line shows them escaped, one printable line, and says the
    page was damaged only when a file of the inputs does not read through (none here)."""
    import duckdb

    from blocklab.pipeline.damage import failure_line

    line = failure_line("iostat", [], duckdb.Error("x"), "don't know what type: \x0f\x1b[2J")
    assert line == "query iostat over : don't know what type: \\x0f\\x1b[2J"
