"""``blocklab query --format csv/json`` writes the answer as DuckDB produces it, a batch at a
time (pipeline/query.py stream_query), so its memory does not grow with the answer's rows: a
query may answer with every request of a run. Checked against the text the whole answer gives
through the standard library (json.dumps of the list, csv of the rows), and by the peak memory
of the command at two answer sizes ten times apart."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pytest

from blocklab.pipeline.cli import query as Q
from blocklab.tools.bench_sections import timed

from .golden import make_run


def _batches() -> list[pa.RecordBatch]:
    t = pa.table({"x": [1.5, float("nan"), None, 4.0, float("inf")],
                  "l": [[1, 2], [], None, [3], [4, 5, 6]],
                  "s": ["a", "b\n\"c\"", None, "", "é"]})
    return t.to_batches(max_chunksize=2)  # rows across batch (and slice) boundaries


@pytest.mark.parametrize("step", [1, 2, 4096])
def test_json_and_csv_written_row_by_row_equal_the_whole_answer(step, capsys, monkeypatch):
    whole = [{"x": 1.5, "l": [1, 2], "s": "a"}, {"x": None, "l": [], "s": "b\n\"c\""},
             {"x": None, "l": None, "s": None}, {"x": 4.0, "l": [3], "s": ""},
             {"x": None, "l": [4, 5, 6], "s": "é"}]  # NaN and infinities as null
    monkeypatch.setattr(Q, "_rows", lambda b, _real=Q._rows: _real(b, step))
    Q._write_json(["x", "l", "s"], _batches())
    assert capsys.readouterr().out == json.dumps(whole, indent=2) + "\n"
    Q._write_json(["x"], [])
    assert capsys.readouterr().out == json.dumps([], indent=2) + "\n"
    Q._write_csv(["x", "l", "s"], _batches())
    text = capsys.readouterr().out
    want = io.StringIO()
    w = csv.writer(want, lineterminator="\n")
    w.writerow(["x", "l", "s"])
    for r in whole:
        w.writerow(["" if r[k] is None else json.dumps(r[k]) if isinstance(r[k], list)
                    else r[k] for k in ("x", "l", "s")])
    assert text == want.getvalue()


def _peak_mb(args: list[str], out: Path) -> float:
    """Peak RSS of ``blocklab query ...`` in a process of its own, its output to ``out``
    (measured as make bench measures a command: tools/bench_sections.py timed)."""
    errors = out.with_suffix(".err")
    try:
        _secs, kib = timed([sys.executable, "-m", "blocklab.pipeline.cli", "query", *args],
                           stderr=errors, stdout=out)
    except subprocess.CalledProcessError:
        pytest.fail(errors.read_text())
    return kib / 1024


def test_memory_does_not_grow_with_the_rows_of_the_answer(tmp_path):
    peaks = {}
    for n in (200_000, 1_000_000):
        arr = np.arange(n, dtype=np.int64) * 1000
        run = make_run(tmp_path / f"r{n}", {"arrival_ns": arr, "latency_ns": arr % 977 + 1,
                                            "op": arr % 2, "size_bytes": np.full(n, 4096)})
        for fmt in ("csv", "json"):
            out = tmp_path / f"{n}.{fmt}"
            # (no ORDER BY: a sort holds the answer in DuckDB, within its memory limit)
            peaks[n, fmt] = _peak_mb([str(run), "--sql", "SELECT request, latency_ns FROM ios",
                                      "-f", fmt], out)
        got = pacsv.read_csv(tmp_path / f"{n}.csv")
        assert got.num_rows == n and got.column_names == ["request", "latency_ns"]
        assert pc.sum(got["request"]).as_py() == arr.sum() // 1000
        assert pc.sum(got["latency_ns"]).as_py() == (arr % 977 + 1).sum()
    # the whole answer as Python rows grew the old command by ~250 MB per million rows: 200 MB
    # between these two
    for fmt in ("csv", "json"):
        assert peaks[1_000_000, fmt] - peaks[200_000, fmt] < 60, peaks
