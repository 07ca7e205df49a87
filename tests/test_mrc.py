"""``blocklab cache mrc``: the exact curve against an LRU cache simulated at each size (random
traces, the real traces in ../shared), the sampled estimates against SHARDS run on a plain
list (fixed rate and fixed size) and against the exact curve, bounded memory at a fixed size,
a replay through the controller cache of the same size, the chart, and bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from blocklab.kernels import mrc as K
from blocklab.pipeline.cli import app
from blocklab.pipeline.ingest import ingest
from blocklab.pipeline.mrc import default_sizes, mrc, parse_size
from blocklab.traces import store
from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import OPK_HOST

from .reference import mrc as ref

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

runner = CliRunner()
CURVES = ("miss_ratio", "read_miss_ratio", "write_miss_ratio")


def write(path: Path, reqs: list[tuple[int, int, int, int]], gap_ns: int = 1000) -> Path:
    """A trace of (device, sector, size_bytes, op) rows, ``gap_ns`` apart."""
    n = len(reqs)
    cols = store.empty_columns(n)
    a = np.array(reqs, dtype=np.int64).reshape(n, 4)
    cols.update(time_ns=np.arange(n, dtype=np.int64) * gap_ns, device=a[:, 0].astype(np.uint32),
                sector=a[:, 1], size_bytes=a[:, 2], op=a[:, 3].astype(np.uint8),
                flags=np.zeros(n, np.uint16))
    with store.TraceWriter(path, store.TraceMeta(source_format="test")) as w:
        w.write(store.columns_to_batch(cols))
    return path


def trace_reqs(path: Path) -> list[tuple[int, int, int, int]]:
    t = pq.read_table(path, columns=["device", "sector", "size_bytes", "op"])
    return list(zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True))


def check_exact(path: Path, block: int, blocks: list[int], batch_rows: int = 1 << 20) -> None:
    blocks = sorted(set(blocks))  # the curve's sizes come sorted, each once
    r = mrc(path, block, [b * block for b in blocks], batch_rows=batch_rows)
    acc = ref.accesses(trace_reqs(path), block)
    assert r.accesses == len(acc)
    assert r.distinct_blocks == len({k for k, _o in acc})
    for k, b in enumerate(blocks):
        want = ref.lru_miss_ratios(acc, b)
        for name, w in zip(CURVES, want, strict=True):
            got = getattr(r.curve, name)[k]
            if math.isnan(w):
                assert got is None, (name, b)
            else:
                assert got == pytest.approx(w, rel=1e-12, abs=1e-12), (name, b, got, w)


reqs_st = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 300), st.sampled_from(
    [0, 512, 1024, 4096, 8192, 12288, 65536]), st.integers(0, 4)), min_size=1, max_size=150)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reqs_st, st.sampled_from([512, 4096, 8192]),
       st.lists(st.integers(1, 400), min_size=1, max_size=6), st.sampled_from([3, 1 << 20]))
def test_exact_equals_a_simulated_lru_cache(tmp_path_factory, reqs, block, blocks, batch):
    """Any trace (several devices, requests over several blocks, discards and flushes left
    out), any block size and cache size, batches of any length (the tables grow between)."""
    path = write(tmp_path_factory.mktemp("m") / "t.parquet", reqs)
    check_exact(path, block, blocks, batch)


def test_exact_on_a_larger_trace_with_growth_and_compaction(tmp_path):
    rng = np.random.default_rng(7)
    n = 30_000
    hot = rng.zipf(1.3, n) % 5000
    sector = np.where(rng.random(n) < 0.2, rng.integers(0, 40_000, n), hot) * 8
    reqs = [(0, int(s), int(z), int(o)) for s, z, o in zip(
        sector, rng.choice([4096, 8192, 32768], n), rng.random(n) < 0.3, strict=True)]
    path = write(tmp_path / "t.parquet", reqs)
    check_exact(path, 4096, [1, 10, 100, 1000, 5000, 20_000, 60_000], batch_rows=4096)
    r = mrc(path, 4096)
    assert r.curve.size_bytes == default_sizes(4096, r.distinct_blocks)
    # past the working set only first accesses miss
    cold = r.distinct_blocks / r.accesses
    assert r.curve.miss_ratio[-1] == pytest.approx(cold)


def test_compactions_in_place_keep_the_curve_exact(tmp_path):
    """A small working set accessed many times: positions run out again and again with the
    tables the same size, and each compaction renumbers the marks by rank (walking the hash
    table); the curve stays the simulated LRU cache's."""
    from blocklab.pipeline.mrc import Sampling, run_stack

    rng = np.random.default_rng(3)
    n = 40_000
    blocks = rng.zipf(1.1, n) % 300
    reqs = [(0, int(b) * 8, 4096, int(o)) for b, o in zip(blocks, rng.random(n) < 0.3,
                                                           strict=True)]
    path = write(tmp_path / "c.parquet", reqs)
    check_exact(path, 4096, [1, 2, 5, 20, 100, 300])
    st, _secs = run_stack(path, 4096, Sampling())
    assert st.ST[K.S_COMPACT] >= 8 and len(st.BM) * 64 <= 4096


def test_real_traces(shared, tmp_path):
    """The tracefs capture and the MQSim TPC-C trace: the exact curve is the simulated one."""
    for name in ("tracefs-fio-loop0-vda.txt", "disksim-ascii-tpcc-small.trace"):
        out = tmp_path / (name + ".parquet")
        ingest([str(shared / "traces" / name)], str(out))
        check_exact(out, 4096, [1, 16, 256, 4096, 65536])
        check_exact(out, 512, [1, 100, 10_000])


def _bracket(r, recs, n, block, eps=1.0056):
    """A sampled curve from the kernel lies within SHARDS' miss ratio at the edges of the
    log bin around each size (the kernel keeps distances in bins 0.54 % wide)."""
    for k, size in enumerate(r.curve.size_bytes):
        c = size // block
        for name, op in zip(CURVES, (None, 0, 1), strict=True):
            got = getattr(r.curve, name)[k]
            if sum(n[o] for o in ((0, 1) if op is None else (op,))) == 0:
                assert got is None
                continue
            hi = ref.shards_miss_ratio(recs, n, op, (1 + c) / eps - 1)
            lo = ref.shards_miss_ratio(recs, n, op, (1 + c) * eps - 1)
            lo, hi = max(0.0, min(1.0, lo)), max(0.0, min(1.0, hi))
            assert lo - 1e-9 <= got <= hi + 1e-9, (name, c, lo, got, hi)


def _zipf_trace(path: Path, n: int, blocks: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    b = (rng.zipf(1.2, n) % blocks) * 7919 % 1_000_003
    op = (rng.random(n) < 0.35).astype(int)
    return write(path, [(0, int(x) * 8, 4096, int(o)) for x, o in zip(b, op, strict=True)])


def test_sampled_fixed_rate_against_shards_on_a_list(tmp_path):
    path = _zipf_trace(tmp_path / "z.parquet", 6000, 3000, 1)
    acc = ref.accesses(trace_reqs(path), 4096)
    for rate in (0.5, 0.1):
        sizes = [c * 4096 for c in (1, 3, 10, 30, 100, 300, 1000, 3000)]
        r = mrc(path, 4096, sizes, sample_rate=rate, batch_rows=1000)
        recs, n = ref.shards(acc, rate=rate)
        assert r.rate == pytest.approx(rate, rel=1e-6)
        assert r.tracked_blocks == len({k for k, _o in acc
                                        if ref.mix(k) & (ref.P - 1) < round(rate * ref.P)})
        _bracket(r, recs, n, 4096)


def test_sampled_fixed_size_against_shards_on_a_list(tmp_path):
    path = _zipf_trace(tmp_path / "z.parquet", 6000, 3000, 2)
    acc = ref.accesses(trace_reqs(path), 4096)
    for smax in (50, 400):
        sizes = [c * 4096 for c in (1, 3, 10, 30, 100, 300, 1000, 3000)]
        r = mrc(path, 4096, sizes, sample_size=smax, batch_rows=777)
        recs, n = ref.shards(acc, smax=smax)
        assert r.tracked_blocks <= smax
        _bracket(r, recs, n, 4096)


def test_sampled_estimates_near_the_exact_curve(tmp_path):
    """Measured error of the estimates on a skewed trace of 100 000 blocks, at sizes from the
    sample's resolution up (deterministic: the sample is a hash of the block)."""
    path = _zipf_trace(tmp_path / "z.parquet", 300_000, 100_000, 3)
    exact = mrc(path, 4096)
    for kw, bound in (({"sample_rate": 0.1}, 0.03), ({"sample_rate": 0.01}, 0.05),
                      ({"sample_size": 4000}, 0.05)):
        r = mrc(path, 4096, exact.curve.size_bytes, error=True, **kw)
        assert r.error is not None and r.error["sizes_compared"] >= 8
        assert r.error["miss_ratio"]["exact"] == exact.curve.miss_ratio
        assert r.error["miss_ratio"]["mean_abs"] < bound, (kw, r.error["miss_ratio"])
        assert r.distinct_blocks == pytest.approx(exact.distinct_blocks, rel=0.2)


def test_fixed_size_memory_does_not_grow_with_the_trace(tmp_path):
    small = _zipf_trace(tmp_path / "s.parquet", 20_000, 10_000, 4)
    big = _zipf_trace(tmp_path / "b.parquet", 200_000, 1_000_000, 5)
    a = mrc(small, 4096, [4096], sample_size=2000)
    b = mrc(big, 4096, [4096], sample_size=2000)
    e = mrc(big, 4096, [4096])
    assert a.tracked_blocks <= 2000 and b.tracked_blocks <= 2000
    assert b.table_bytes <= a.table_bytes * 1.01 + (1 << 16)
    # the exact tables hold every distinct block (hash table and histogram, about 40 bytes
    # a block); the fixed size's, 2,000 blocks and its fixed log histogram
    assert e.table_bytes >= 32 * e.distinct_blocks
    assert e.table_bytes > 5 * b.table_bytes


def test_lru_hits_of_a_replay_through_the_controller_cache(tmp_path):
    """A read-only trace of 4 KiB reads replayed through a controller cache of C 4 KiB lines
    (no read-ahead; arrivals far apart so that no read waits for another's fill): the share
    of requests the controller served from its cache (those that sent no operation to a
    drive: ios.cache_hit also counts the drives' own cache hits) is the MRC's hit ratio at C
    blocks."""
    from blocklab.pipeline.replay import replay

    rng = np.random.default_rng(11)
    n = 3000
    blocks = rng.zipf(1.2, n) % 2000
    path = write(tmp_path / "r.parquet", [(0, int(b) * 8, 4096, 0) for b in blocks],
                 gap_ns=20_000_000)
    for lines in (64, 512):
        arr = tmp_path / f"a{lines}.toml"
        arr.write_text(
            '[[group]]\nname = "r0"\nlayout = "raid0"\nwidth = 2\nstripe_unit = "64KiB"\n'
            'drive = "atlas10k"\n\n[controller]\n'
            f'cache = "{lines * 4}KiB"\ncache_block = "4KiB"\nread_ahead = false\n')
        run = tmp_path / f"run{lines}"
        replay(path, arr, run, drive_ops=True)
        ops = pq.read_table(run / "drive_ops.parquet", columns=["request", "kind"])
        to_drives = np.unique(ops.column("request").to_numpy()[
            ops.column("kind").to_numpy() == OPK_HOST])
        r = mrc(path, 4096, [lines * 4096])
        assert r.curve.read_miss_ratio[0] == pytest.approx(len(to_drives) / n, abs=1e-12)


def test_cli_json_and_chart(tmp_path):
    path = _zipf_trace(tmp_path / "z.parquet", 3000, 1000, 6)
    res = runner.invoke(app, ["cache", "mrc", str(path), "--sizes", "64KiB,1MiB,4M", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["curve"]["size_bytes"] == [65536, 1 << 20, 4 << 20]
    assert doc["method"] == "exact" and doc["rate"] == 1
    page = tmp_path / "mrc.html"
    res = runner.invoke(app, ["cache", "mrc", str(path), "--sample", "0.5", "--error",
                              "--html", str(page)])
    assert res.exit_code == 0, res.output
    assert "error against the exact curve" in res.stdout
    text = page.read_text()
    assert "blocklab-specs" in text and "working set" in text
    assert page.stat().st_mode & 0o777 == 0o600


def test_parse_size():
    assert parse_size("4KiB", "--block") == 4096 and parse_size("4k", "--block") == 4096
    assert parse_size("1GiB", "--sizes") == 1 << 30 and parse_size("512", "--block") == 512
    for bad in ("4 parsecs", "", "-4k", "0"):
        with pytest.raises(BlocklabError, match="--block"):
            parse_size(bad, "--block")


def test_bad_input(tmp_path):
    path = _zipf_trace(tmp_path / "z.parquet", 100, 50, 8)
    for args, words in (
            (["--block", "1000"], "--block 1000: expected a multiple of 512"),
            (["--block", "4 parsecs"], "--block 4 parsecs"),
            (["--sample", "0"], "--sample 0: expected a rate in (0, 1]"),
            (["--sample", "1.5"], "--sample 1.5"),
            (["--sample-size", "0"], "--sample-size 0"),
            (["--sample", "0.1", "--sample-size", "10"], "give one of them"),
            (["--sizes", "1MiB,lots"], "--sizes lots")):
        res = runner.invoke(app, ["cache", "mrc", str(path), *args])
        assert res.exit_code == 2, (args, res.output)
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("blocklab: error:"), res.output
        assert words in lines[0], (words, lines[0])
    res = runner.invoke(app, ["cache", "mrc", str(tmp_path / "none.parquet")])
    assert res.exit_code == 2 and "no such file" in res.output


def test_state_layout_constants():
    # the scalars the pipeline reads are distinct slots of ST and SW
    slots = [K.S_POS, K.S_LIVE, K.S_T, K.S_HEAP, K.S_SMAX, K.S_EXACT, K.S_REQ, K.S_REQ + 1,
             K.S_ACC, K.S_ACC + 1, K.S_SMP, K.S_SMP + 1, K.S_COLD, K.S_COLD + 1, K.S_COMPACT,
             K.S_EVICT, K.S_MAXLIVE]
    assert sorted(slots) == list(range(K.ST_N))
    assert K.popcount(np.uint64(0xF0F0)) == 8


@settings(max_examples=40, deadline=None)
@given(reqs_st, st.sampled_from([512, 4096]), st.sampled_from([1, 2, 5, 64]),
       st.sampled_from([None, 0.5, 0.1, 3]))
def test_any_queue_length_gives_the_same_tables(reqs, block, queue, sample):
    """The kernel queues block accesses in runs (a request of more blocks than the queue
    holds goes alone, block by block; a run may stop for the tables to grow): any queue
    length, runs ending anywhere, gives the histograms and counts of a request-by-request
    LRU stack, and the exact histogram is the simulated LRU cache's."""
    from blocklab.pipeline.mrc import Sampling, Stack, exact_hits

    smp = (Sampling() if sample is None else Sampling(size=sample) if sample == 3
           else Sampling(rate=sample))
    a = np.array(reqs, np.int64).reshape(-1, 4)
    devs = {d: k for k, d in enumerate(dict.fromkeys(a[:, 0].tolist()))}
    cols = (np.array([devs[d] for d in a[:, 0].tolist()], np.int64), a[:, 1],
            (a[:, 2] + 511) // 512, a[:, 3].astype(np.uint8))
    one = Stack(smp, m=64, queue=1 << 16)
    short = Stack(smp, m=64, queue=queue)
    for s_ in (one, short):
        s_.bsec = block // 512
        s_.feed(*cols)
    assert short.ST.tolist() == one.ST.tolist()
    assert short.SW.tolist() == one.SW.tolist()
    assert np.array_equal(short.HL, one.HL)
    n = min(len(short.HE), len(one.HE))
    assert np.array_equal(short.HE[:n], one.HE[:n])
    if sample is None:
        acc = ref.accesses(list(map(tuple, a.tolist())), block)
        for c in (1, 4, 50):
            hits = exact_hits(short.HE)
            got = hits(0, np.array([c]))[0] + hits(1, np.array([c]))[0]
            miss = 1 - got / len(acc) if acc else math.nan
            want = ref.lru_miss_ratios(acc, c)[0]
            assert (math.isnan(want) and not acc) or miss == pytest.approx(want, abs=1e-12)


def test_a_page_that_is_its_input_trace_is_refused(tmp_path):
    """cache mrc T --html T replaced the trace with the HTML page, exit 0."""
    from typer.testing import CliRunner

    from blocklab.pipeline.cli import app

    runner = CliRunner()
    (tmp_path / "t.trace").write_text("".join(f"{1000 * k} 0 {8 * k} 8 {k % 2}\n"
                                              for k in range(200)))
    t = tmp_path / "t.parquet"
    assert runner.invoke(app, ["ingest", str(tmp_path / "t.trace"), "-o", str(t)]).exit_code == 0
    before = t.read_bytes()
    res = runner.invoke(app, ["cache", "mrc", str(t), "--html", str(t)])
    assert res.exit_code == 2, res.output
    assert res.stderr.strip() == (f"blocklab: error: {t}: is this command's input {t}; write "
                                  "the output elsewhere (it would replace the input)")
    assert t.read_bytes() == before
