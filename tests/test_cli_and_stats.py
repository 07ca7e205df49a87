"""The CLI documents every command and option; `trace stats` agrees with an independent
computation (NumPy over the same Parquet); the demo sample; multi-file merges; chunking."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.ingest import ingest
from blocklab.traces import schema as S

from .blktrace_writer import Request, write_percpu
from .conftest import ROOT, read_rows

runner = CliRunner()
BLOCKLAB = str(Path(sys.executable).parent / "blocklab")
SAMPLE = ROOT / "traces" / "samples" / "tracefs-fio-loop0-vda.txt.xz"


def _commands(group, prefix=()):
    for name, cmd in group.commands.items():
        yield (*prefix, name), cmd
        if hasattr(cmd, "commands"):  # a group (Typer may ship its own click classes)
            yield from _commands(cmd, (*prefix, name))


def _listed(help_text: str) -> list[str]:
    """The command names in the Commands panel of a group's rendered ``--help``."""
    names, inside = [], False
    for line in help_text.splitlines():
        if "Commands" in line and line.lstrip().startswith("╭"):
            inside = True
        elif inside and line.lstrip().startswith("╰"):
            break
        elif inside and (m := re.match(r"│ (\S+)\s", line)):
            names.append(m.group(1))
    return names


def test_every_command_and_option_has_help():
    """Every command and subcommand, found by walking the app, has help text, and so has each
    of its options; its ``--help`` runs; and each group's rendered help lists exactly the
    commands the walk finds under it (what a user sees is what exists)."""
    root = typer.main.get_command(app)
    assert hasattr(root, "commands")
    walked = list(_commands(root))
    for path, cmd in [((), root), *walked]:
        if path:
            assert (cmd.help or "").strip(), f"`blocklab {' '.join(path)}` has no help text"
        for p in cmd.params:
            if getattr(p, "param_type_name", "") == "option":
                assert (p.help or "").strip(), f"option {p.opts} of {' '.join(path)} has no help"
        res = runner.invoke(app, [*path, "--help"], terminal_width=200)
        assert res.exit_code == 0 and "Usage" in res.output, f"blocklab {' '.join(path)} --help"
        if hasattr(cmd, "commands"):
            assert sorted(_listed(res.output)) == sorted(cmd.commands), (
                f"`blocklab {' '.join(path)} --help` lists {_listed(res.output)}, "
                f"the app has {sorted(cmd.commands)}")
    leaves = [path for path, cmd in walked if not hasattr(cmd, "commands")]
    # the 21 commands of issue 20's review, and trace iostat and cache mrc since
    assert len(leaves) >= 21, leaves
    for must in (("ingest",), ("replay",), ("trace", "head"), ("scenario", "run"),
                 ("cache", "mrc"), ("validate", "disksim")):
        assert must in leaves


def test_help_shows_a_value_name_for_each_option_and_none_for_a_flag():
    """Typer 0.29 wrote `<bool>` beside every flag (--json, --help), `<list[str]>` beside a
    repeatable option (replay --fail, query -p, scenario run --case, capture -d) and a list
    argument, and `{sources}...` in the usage line: each option and argument now says what
    it takes (DRIVE@SECONDS, NAME=VALUE, SOURCES...), a flag nothing."""
    root = typer.main.get_command(app)
    for path, _cmd in [((), root), *_commands(root)]:
        res = runner.invoke(app, [*path, "--help"], terminal_width=200)
        assert res.exit_code == 0, path
        for bad in ("<bool>", "<list["):
            assert bad not in res.output, (path, bad, res.output)
        usage = next(ln for ln in res.output.splitlines() if "Usage:" in ln)
        assert "{" not in usage, (path, usage)
    for path, shown in ((["replay"], "DRIVE@SECONDS"), (["query"], "NAME=VALUE"),
                        (["scenario", "run"], "CASE"), (["capture"], "DEVICE"),
                        (["ingest"], "Usage: blocklab ingest [OPTIONS] SOURCES...")):
        assert shown in runner.invoke(app, [*path, "--help"], terminal_width=200).output


def test_query_help_names_every_view():
    """query --help's --sql listed the views but left out device_ios."""
    from blocklab.pipeline.query import BOTH_VIEWS, RUN_VIEWS, TRACE_VIEWS

    text = " ".join(runner.invoke(app, ["query", "--help"], terminal_width=200).output.split())
    text = text[text.index("--sql"):text.index("--param")].replace("│", "")
    for view in (*RUN_VIEWS, *TRACE_VIEWS, *BOTH_VIEWS):
        assert re.search(rf"\b{view}\b", text), view


def test_help_into_a_pipe_shows_every_option_name_whole():
    """`blocklab CMD --help | less`: Rich rendered 80 columns into a pipe, and cut the longest
    option names (`--repeat-until-task…`). The commands with an option name of 20 characters
    or more, run as a user runs them, COLUMNS unset, output into a pipe."""
    walked = list(_commands(typer.main.get_command(app)))
    longest = {path: [o for p in cmd.params for o in getattr(p, "opts", []) if len(o) >= 20]
               for path, cmd in walked if not hasattr(cmd, "commands")}
    longest = {path: names for path, names in longest.items() if names}
    assert ("replay",) in longest, longest
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    for path, names in longest.items():
        res = subprocess.run([BLOCKLAB, *path, "--help"], capture_output=True, text=True,
                             env=env, timeout=120)
        assert res.returncode == 0, res.stderr
        for name in names:
            assert re.search(rf"{re.escape(name)}(\s|,|$)", res.stdout, re.M), (path, name)


def test_stats_table_is_figures_without_a_header_row(tmp_path):
    """trace stats prints a list of figures, one a row (name, value): no header row above them
    (the table's head, drawn in heavy lines, would read 'figure | value')."""
    from . import golden

    trace = golden.write_trace(tmp_path / "t.parquet", golden.workload_columns(50))
    res = runner.invoke(app, ["trace", "stats", str(trace)])
    assert res.exit_code == 0, res.output
    assert "\u2503" not in res.stdout and "\u2502 requests" in res.stdout, res.stdout


def test_stats_json_matches_numpy(tmp_path):
    out = tmp_path / "t.parquet"
    ingest([str(SAMPLE)], str(out))
    res = runner.invoke(app, ["trace", "stats", str(out), "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    t = pq.read_table(out).to_pydict()
    op = np.array(t["op"])
    size = np.array(t["size_bytes"])
    time_ns = np.array(t["time_ns"])
    lat = np.array([x for x in t["latency_ns"] if x is not None], dtype=float)
    # 1522 on 7,0 and 839 completions on 254,0 (the shared README), one of which ends an
    # empty preflush's flush sequence: no request (docs/formats.md)
    assert s["requests"] == len(op) == 1522 + 839 - 1
    assert s["reads"] == int((op == 0).sum()) and s["writes"] == int((op == 1).sum())
    assert s["read_bytes"] == int(size[op == 0].sum())
    assert s["write_bytes"] == int(size[op == 1].sum())
    end = max(time_ns.max(), max(c for c in t["complete_ns"] if c is not None))
    dur = (end - time_ns.min()) / 1e9
    assert s["duration_s"] == pytest.approx(dur)
    assert s["iops"] == pytest.approx(len(op) / dur)
    assert s["mb_per_s"] == pytest.approx(size[op <= 1].sum() / 1e6 / dur)
    assert s["read_ratio"] == pytest.approx((op == 0).sum() / (op <= 1).sum())
    assert s["latency"]["mean_ms"] == pytest.approx(lat.mean() / 1e6)
    assert s["latency"]["p50_ms"] == pytest.approx(np.quantile(lat, 0.5) / 1e6)
    assert s["latency"]["p99_ms"] == pytest.approx(np.quantile(lat, 0.99) / 1e6)
    hist = {}
    for v in size:
        b = 0 if v <= 0 else 1 << int(np.ceil(np.log2(v)))
        hist[str(b)] = hist.get(str(b), 0) + 1
    assert s["size_histogram"] == hist
    assert s["devices"]["7,0"]["requests"] == 1522
    # every device's figures: a group-by of the Parquet in NumPy
    dev_all = np.array(t["device"])
    want = {S.format_dev(int(d), True): {
        "requests": int((dev_all == d).sum()),
        "reads": int(((dev_all == d) & (op == 0)).sum()),
        "writes": int(((dev_all == d) & (op == 1)).sum()),
        "read_bytes": int(size[(dev_all == d) & (op == 0)].sum()),
        "write_bytes": int(size[(dev_all == d) & (op == 1)].sum())} for d in np.unique(dev_all)}
    assert s["devices"] == want and s["device_count"] == len(want) == 2
    assert all(w["reads"] != w["writes"] for w in want.values())  # (the two can't be swapped)
    # sequential: a data request that starts where the previous one (same device, same
    # direction, arrival order) ended
    dev = np.array(t["device"])
    sector = np.array(t["sector"])
    seq = total = 0
    for d in np.unique(dev):
        for o in (0, 1):
            idx = np.nonzero((dev == d) & (op == o))[0]
            idx = idx[np.lexsort((sector[idx], time_ns[idx]))]
            ends = sector[idx] + (size[idx] + 511) // 512
            seq += int((sector[idx][1:] == ends[:-1]).sum())
            total += len(idx)
    assert s["sequential_fraction"] == pytest.approx(seq / total)


def test_trace_head_and_formats(tmp_path):
    """`formats --json` lists every reader; `trace head` shows the first rows of an ingested
    trace (exit 0) and refuses a missing file and a bad row count with exit status 2."""
    res = runner.invoke(app, ["formats", "--json"])
    assert res.exit_code == 0, res.output
    names = json.loads(res.stdout)
    assert {"blktrace", "blkparse", "tracefs", "msr", "spc", "alibaba", "tencent", "fio",
            "disksim", "mqsim", "disksim-validate"} <= set(names)
    out = tmp_path / "t.parquet"
    ingest([str(SAMPLE)], str(out))
    first = read_rows(out)[:3]
    res = runner.invoke(app, ["trace", "head", str(out), "-n", "3"], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "fio" in res.stdout and "7,0" in res.stdout
    # each of the first three rows' sectors is shown
    pos = [res.stdout.find(str(r["sector"])) for r in first]
    assert all(p >= 0 for p in pos), (first, res.stdout)
    res = runner.invoke(app, ["trace", "head", str(tmp_path / "missing.parquet")])
    assert res.exit_code == 2 and "missing.parquet" in res.stderr
    res = runner.invoke(app, ["trace", "head", str(out), "-n", "0"])
    assert res.exit_code == 2


def test_stats_rejects_non_trace(tmp_path):
    bogus = tmp_path / "x.parquet"
    import pyarrow as pa

    pq.write_table(pa.table({"a": [1]}), bogus)
    res = runner.invoke(app, ["trace", "stats", str(bogus)])
    assert res.exit_code == 2 and "not a blocklab trace" in res.stderr


def test_several_sources_merge_by_time(tmp_path):
    a, b = tmp_path / "a.trace", tmp_path / "b.trace"
    a.write_text("".join(f"{t} 0 {t} 8 1\n" for t in range(0, 1000, 100)))
    b.write_text("".join(f"{t} 1 {t} 8 0\n" for t in range(50, 1000, 100)))
    ingest([str(a), str(b)], str(tmp_path / "m.parquet"))
    rows = read_rows(tmp_path / "m.parquet")
    assert [r["time_ns"] for r in rows] == list(range(0, 1000, 50))
    assert [r["device"] for r in rows] == [0, 1] * 10


def test_binary_chunk_boundaries(tmp_path, monkeypatch):
    """Records cut across read chunks (a prime chunk size) give the same requests."""
    reqs = [Request(S.make_dev(8, 0), 64 + 4096 * k, 4096, "read", 1, k % 3, q=100 * k + 1,
                    g=100 * k + 2, i=100 * k + 3, d=100 * k + 4, c=100 * k + 90)
            for k in range(300)]
    write_percpu(tmp_path / "d", reqs, {1: "p"}, 3)
    ingest([str(tmp_path / "d")], str(tmp_path / "one.parquet"))
    import blocklab.traces.formats.blktrace as B

    monkeypatch.setattr(B, "CHUNK_BYTES", 997)
    ingest([str(tmp_path / "d")], str(tmp_path / "many.parquet"))
    assert read_rows(tmp_path / "many.parquet") == read_rows(tmp_path / "one.parquet")
    assert len(read_rows(tmp_path / "one.parquet")) == 300


@pytest.mark.parametrize("comp", ["gzip", "xz", "zstd"])
def test_compressed_binary_detected_by_content(tmp_path, comp):
    import gzip
    import lzma

    import zstandard

    reqs = [Request(S.make_dev(8, 0), 64 + 4096 * k, 4096, "write", 1, 0, q=10 * k + 1,
                    g=10 * k + 2, i=10 * k + 3, d=10 * k + 4, c=10 * k + 9) for k in range(50)]
    (p,) = write_percpu(tmp_path / "d", reqs, {1: "p"}, 1)
    raw = p.read_bytes()
    packed = {"gzip": gzip.compress, "xz": lzma.compress,
              "zstd": zstandard.ZstdCompressor().compress}[comp](raw)
    q = tmp_path / "capture.dat"  # the name says nothing
    q.write_bytes(packed)
    res = ingest([str(q)], str(tmp_path / "c.parquet"))
    ingest([str(p)], str(tmp_path / "p.parquet"))
    assert res.format == "blktrace"
    assert read_rows(tmp_path / "c.parquet") == read_rows(tmp_path / "p.parquet")


@pytest.mark.parametrize("argv, says", [
    (["trace", "head", "t.parquet", "-n", "0"], "blocklab trace head: Invalid value for '-n'"),
    (["query", "run", "latency-summary", "--max-rows", "-1"], "'--max-rows'"),
    (["replay", "t.parquet", "--bogus"], "blocklab replay: No such option: --bogus"),
    (["replay"], "blocklab replay: Missing argument 'TRACE'"),
    (["nosuch"], "blocklab: No such command 'nosuch'"),
    (["--bogus"], "blocklab: No such option: --bogus"),
    (["replay", "t.parquet", "--array", "a.toml", "--fail"],  # the parser's: no context
     "blocklab replay: Option '--fail' requires an argument"),
    (["trace", "head", "t.parquet", "-n"], "blocklab trace head: Option '-n' requires"),
])
def test_a_bad_option_is_one_line(argv, says):
    """A bad option value, an unknown option or command, a missing argument: one line naming
    the command, exit 2, as any other bad input (Click drew a box of six lines)."""
    res = runner.invoke(app, argv)
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("blocklab: error: ") and says in lines[0], lines[0]
    assert lines[0].endswith("--help)"), lines[0]


def test_no_arguments_shows_the_help():
    res = runner.invoke(app, ["trace"])
    assert res.exit_code == 2 and "Usage" in res.output and "error" not in res.output


def test_the_drive_table_shows_every_name_whole():
    """`blocklab drives` into a pipe: every catalog name in full, the name a user types (at 80
    columns `constellation_es3_4tb` was cut to `constellation_es…`)."""
    from blocklab.pipeline.model.catalog import describe

    res = runner.invoke(app, ["drives"])
    assert res.exit_code == 0, res.output
    names = [r["name"] for r in describe()]
    assert len(names) == 13
    cells = {c.strip() for ln in res.output.splitlines() for c in ln.split("│")[1:2]}
    assert set(names) <= cells, sorted(set(names) - cells)


@pytest.mark.replays
def test_replay_tells_a_trace_of_several_devices(tmp_path):
    """A trace of two devices (a capture of a loop device and its backing disk): replay puts
    every request on one volume, and says so, once, naming the lowest and highest device; a
    trace of one device is replayed without a word."""
    from .blktrace_writer import Event, pack

    def blk(path, devs):
        ev = []
        for j in range(40):
            d = devs[j % len(devs)]
            ev += [Event(1000 * j, "Q", d, 8 * j, 4096, "read", 7, 0),
                   Event(1000 * j + 500, "C", d, 8 * j, 4096, "read", 7, 0)]
        path.write_bytes(b"".join(pack(e, k) for k, e in enumerate(ev)))
        return path

    array = str(ROOT / "examples" / "arrays" / "raid6-4p2-x8.toml")
    # SPC-1's ASUs (devices 1 to 3) are parts of one host volume: not told
    res = runner.invoke(app, ["synth", "spc1", "--bsu", "1", "--duration", "2", "--array",
                              array, "-o", str(tmp_path / "spc1.parquet")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["replay", str(tmp_path / "spc1.parquet"), "--array", array, "-o",
                              str(tmp_path / "spc1-run")])
    assert res.exit_code == 0 and "several devices" not in res.stderr, res.stderr
    for devs, told in (([7 << 20, 254 << 20], True), ([8 << 20], False)):
        src = blk(tmp_path / f"t{len(devs)}.blktrace.0", devs)
        trace = tmp_path / f"t{len(devs)}.parquet"
        assert runner.invoke(app, ["ingest", str(src), "-o", str(trace)]).exit_code == 0
        res = runner.invoke(app, ["replay", str(trace), "--array", array, "-o",
                                  str(tmp_path / f"run{len(devs)}")])
        assert res.exit_code == 0, res.output
        notes = [ln for ln in res.stderr.splitlines() if "several devices" in ln]
        assert notes == ([f"blocklab: note: {trace} holds requests of several devices (7,0 "
                          "to 254,0): the replay puts them all on one volume, in one address "
                          "space; `blocklab ingest --device` keeps one"] if told else [])


@pytest.mark.replays
def test_replay_of_a_trace_without_requests_gives_no_latency(tmp_path):
    """An empty trace replays (exit 0) and says it had no request, not "latency mean 0.000 ms",
    which reads as a measured figure."""
    src = tmp_path / "t.disksim.txt"
    src.write_text("")
    trace = tmp_path / "t.parquet"
    res = runner.invoke(app, ["ingest", str(src), "--format", "disksim", "-o", str(trace)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["replay", str(trace), "--array",
                              str(ROOT / "examples" / "arrays" / "raid5-entry.toml"), "-o",
                              str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())  # (the console folds lines at 80 columns)
    assert "0 requests, no latency (the trace has no read or write request)" in said, said
    assert "0.000 ms" not in said


def test_replay_says_how_many_requests_it_skipped(tmp_path):
    """Discards and flushes are not served (the drive models have no TRIM): the replay says
    how many it skipped, the number meta.json records, counted here from the trace itself."""
    from . import golden

    cols = golden.workload_columns(400)
    rng = np.random.default_rng(7)
    cols["op"][rng.random(400) < 0.2] = S.OP_DISCARD
    cols["op"][rng.random(400) < 0.05] = S.OP_FLUSH
    trace = golden.write_trace(tmp_path / "t.parquet", cols)
    array = tmp_path / "a.toml"
    array.write_text('[[group]]\nname = "g"\nlayout = "raid0"\nwidth = 2\ndrive = "atlas10k"\n')
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o",
                              str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    skipped = int((cols["op"] > S.OP_WRITE).sum())
    assert 0 < skipped < 400
    assert f"  {skipped:,} requests neither read nor write" in res.stdout
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["counts"]["skipped_not_read_write"] == skipped
    assert f"{400 - skipped} requests" in res.stdout


@pytest.mark.replays
def test_replay_counts_skipped_requests_in_thousands_and_only_when_there_are_some(tmp_path):
    """The skipped line gives its count with the thousands grouped (1,234: counted here from
    the trace), and a trace of reads and writes only gets no such line: nothing was skipped,
    so there is nothing to say."""
    from . import golden

    cols = golden.workload_columns(2600)
    array = tmp_path / "a.toml"
    array.write_text('[[group]]\nname = "g"\nlayout = "raid0"\nwidth = 2\ndrive = "atlas10k"\n')
    res = runner.invoke(app, ["replay", str(golden.write_trace(tmp_path / "rw.parquet", cols)),
                              "--array", str(array), "-o", str(tmp_path / "rw")])
    assert res.exit_code == 0, res.output
    assert "2600 requests" in res.stdout and "neither read nor write" not in res.stdout
    cols["op"][np.random.default_rng(3).random(2600) < 0.5] = S.OP_DISCARD
    skipped = int((cols["op"] > S.OP_WRITE).sum())
    assert skipped >= 1000
    trace = golden.write_trace(tmp_path / "t.parquet", cols)
    res = runner.invoke(app, ["replay", str(trace), "--array", str(array), "-o",
                              str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    assert f"  {skipped:,} requests neither read nor write" in res.stdout, res.stdout
