"""`make bench`'s sections run, small: no test asserts a time (benchmarks report), but a section
that cannot run at all is a bench that dies half an hour in, as the query section did when run
schema 2 added the ``lost`` column (stop 45). These run the sections on short traces and check
what they report against what the bench's printer reads and what the workload must give."""

from __future__ import annotations

import numpy as np

from blocklab.tools import bench
from blocklab.tools.bench_replay import replay_speeds
from blocklab.tools.bench_sections import query_speeds


def test_the_query_section_writes_a_run_the_queries_read():
    """The section writes ios.parquet in the run schema of today (a column the schema gained
    and the section lacks is an error there) and times each query over it."""
    out = query_speeds(rows=20_000)
    assert out["rows"] == 20_000
    for key in ("write_s", "bandwidth_s", "percentiles_s", "latency_summary_s",
                "percentiles_each_s"):
        assert out[key] > 0, key
    assert out["parquet_mb"] > 0.01
    assert out["threads"] >= 1


def test_the_replay_section_runs_small_and_prints_its_goals(capsys):
    """Every figure the replay lines print is there, and the operations per request are the
    RAID-5's: a 4 KiB read is one drive operation, a 4 KiB write a read-modify-write of four
    (read data and parity, write both), so 30 % writes give 0.7 + 0.3 x 4 = 1.9 a request; a
    1 MiB request over 64 KiB units touches 16 or 17 units of 7-unit stripes."""
    rp = replay_speeds(scale=0.002, reps=1)
    for k in ("random_4k_open", "sequential_1m_open", "random_4k_closed64",
              "fixed_random_4k_open", "fixed_sequential_1m_open", "fixed_random_4k_closed64",
              "random_4k_closed64_sptf"):
        assert rp[f"{k}_requests_per_s"] > 0, k
    for k in ("random_4k_open", "random_4k_closed64"):
        assert abs(rp[f"{k}_drive_ops_per_request"] - 1.9) < 0.15, k
        assert rp[f"{k}_model_ns_per_op"] > 0
    assert 8 < rp["sequential_1m_open_drive_ops_per_request"] < 20
    assert rp["kernel_vs_reference"] > 0
    bench._print_replay(rp)
    text = capsys.readouterr().out
    assert "(goal >= 2.5)" in text and "HDD model alone" in text and "SPTF" in text
    assert rp["machine_heap_ns_per_op"] > 0 and "machine reference" in text
    assert np.isfinite(rp["sequential_1m_open_model_ns_per_op"])
