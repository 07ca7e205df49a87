"""The closed-loop columns of every closed-loop generator (IOR, Iometer, Orion), as replay reads
them (Hypothesis over the generators' options): ``outstanding`` on every row, constant within a
stream; ``time_ns`` and ``think_ns`` 0; rows in issue order (phase, then stream_seq, streams
interleaved in id order); each stream's ``stream_seq`` 0, 1, 2, ... in row order."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blocklab.pipeline.synth import synth_iometer, synth_ior, synth_orion

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

ior_opts = st.builds(
    lambda n, t, m, s, f, z, o: dict(tasks=n, transfer_size=f"{t}s", block_size=f"{t * m}s",
                                     segments=s, file_per_proc=f, random=z, outstanding=o),
    st.integers(1, 4), st.integers(1, 4), st.integers(2, 5), st.integers(1, 3), st.booleans(),
    st.booleans(), st.integers(1, 4))
iometer_opts = st.builds(
    lambda w, r, q, p: dict(workers=w, requests=r, outstanding=q, random_pct=p,
                            capacity="64m"),
    st.integers(1, 4), st.integers(1, 30), st.integers(1, 8), st.integers(0, 100))
orion_opts = st.builds(
    lambda m, k, s, n, q: dict(matrix=m, large_type=k, num_small=s, num_large=n,
                               num_streamio=q, requests_per_slot=2, capacity="64m"),
    st.sampled_from(["basic", "detailed", "row", "col", "point", "max"]),
    st.sampled_from(["rand", "seq"]), st.integers(1, 3), st.integers(0, 3), st.integers(1, 3))


def _check(path):
    t = pq.read_table(path).to_pydict()
    n = len(t["op"])
    assert n > 0
    assert None not in t["outstanding"] and None not in t["stream_seq"]
    assert set(t["time_ns"]) == {0} and set(t["think_ns"]) == {0}
    phase, seq, stream = (np.array(t[k], dtype=np.int64) for k in ("phase", "stream_seq",
                                                                     "stream"))
    outst = np.array(t["outstanding"])
    order = np.lexsort((stream, seq, phase))
    assert (order == np.arange(n)).all()
    for sid in np.unique(stream):
        mine = stream == sid
        assert (seq[mine] == np.arange(int(mine.sum()))).all()
        assert len(set(outst[mine].tolist())) == 1
        assert (np.diff(phase[mine]) >= 0).all()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["ior", "iometer", "orion"]), data=st.data())
def test_closed_loop_columns(tmp_path, kind, data):
    out = tmp_path / f"{kind}.parquet"
    if kind == "ior":
        synth_ior(out, **data.draw(ior_opts))
    elif kind == "iometer":
        synth_iometer(out, **data.draw(iometer_opts))
    else:
        synth_orion(out, **data.draw(orion_opts))
    _check(out)


def _most_in_flight(arrive: np.ndarray, done: np.ndarray) -> int:
    """The most requests in flight at once: a sweep over arrivals (+1) and completions (-1),
    a completion first at a tie (the next request is issued at its predecessor's completion)."""
    ev = np.concatenate([np.stack([done, np.zeros_like(done)], 1),
                         np.stack([arrive, np.ones_like(arrive)], 1)])
    ev = ev[np.lexsort((ev[:, 1], ev[:, 0]))]
    return int(np.max(np.cumsum(np.where(ev[:, 1] == 1, 1, -1))))


@pytest.mark.parametrize("flag", [None, 2, 3])
def test_closed_loop_n_keeps_the_traces_streams_and_phases(tmp_path, flag):
    """An IOR trace (4 tasks, one outstanding each, writes then reads) replayed as written and
    with --closed-loop N: each task keeps at most N (or the trace's 1) in flight, and no task
    reads before every write has completed (IOR's barrier between the phases). With the flag
    the phases were dropped: reads began at 121 ms, the last write ended at 190."""
    from typer.testing import CliRunner

    from blocklab.pipeline.cli import app

    toml = tmp_path / "a.toml"
    toml.write_text('[[group]]\nname = "g"\nlayout = "raid10"\nwidth = 8\nhot_spares = 1\n'
                    'drive = "atlas10k"\n')
    trace = tmp_path / "ior.parquet"
    synth_ior(trace, tasks=4, transfer_size="256k", block_size="4m", segments=2,
              array=str(toml))
    run = tmp_path / "run"
    args = ["replay", str(trace), "--array", str(toml), "-o", str(run)]
    res = CliRunner().invoke(app, args + (["--closed-loop", str(flag)] if flag else []))
    assert res.exit_code == 0, res.output
    ios = pq.read_table(run / "ios.parquet").to_pydict()
    a, c, op, stream = (np.array(ios[k], dtype=np.int64) for k in
                        ("arrival_ns", "complete_ns", "op", "stream"))
    assert len(a) == 4 * 2 * 16 * 2  # tasks x segments x transfers per block x phases
    for s in np.unique(stream):
        m = stream == s
        assert _most_in_flight(a[m], c[m]) == (flag or 1), s
    assert a[op == 0].min() >= c[op == 1].max()
