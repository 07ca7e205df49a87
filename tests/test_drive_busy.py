"""drive_busy.parquet against the run's own drive operations (drive_ops.parquet), interval by
interval: busy time is the operations' service [start, done) cut at the intervals; the queue
integral holds at least every recorded operation's [queued, done) (more only for operations
still queued when the run ended); the intervals tile [0, the run's end), the last one short.
A review found the last interval's queue integral below its busy time (an operation in service
at the end was never settled) and the last interval a whole one past the end."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.synth import synth_spc1

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)

ARRAYS = {
    # a pool with SPTF queues of 16 and a write-back cache: destages in service at the end
    "pool": '[[group]]\nname = "p"\nlayout = "pool"\nwidth = 10\nraid = "raid5"\n'
            'group_width = 5\ndrive = "savvio_10k4_600g"\nscheduler = "sptf"\nqueue_depth = 16\n'
            '[controller]\ncache = "1GiB"\n',
    "raid5": '[[group]]\nname = "g"\nlayout = "raid5"\nwidth = 5\ndrive = "atlas10k"\n',
}


def _overlap(t0: np.ndarray, t1: np.ndarray, nb: int, iv: int) -> np.ndarray:
    """Per interval of ``iv`` ns, the summed overlap of the spans [t0, t1)."""
    out = np.zeros(nb, np.int64)
    for a, z in zip(t0.tolist(), t1.tolist(), strict=True):
        while a < z:
            b = a // iv
            e = min(z, (b + 1) * iv)
            out[b] += e - a
            a = e
    return out


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_drive_busy_is_its_operations_interval_by_interval(tmp_path, name):
    toml = tmp_path / "a.toml"
    toml.write_text(ARRAYS[name])
    trace = tmp_path / "t.parquet"
    synth_spc1(trace, bsu=15 if name == "pool" else 2, duration_s=3.3, array=str(toml))
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["replay", str(trace), "--array", str(toml), "-o", str(run),
                                   "--drive-ops"])
    assert res.exit_code == 0, res.output
    busy = pq.read_table(run / "drive_busy.parquet").to_pydict()
    ops = {k: np.array(v) for k, v in pq.read_table(run / "drive_ops.parquet").to_pydict().items()
           if k in ("drive", "queued_ns", "start_ns", "complete_ns")}
    ios = pq.read_table(run / "ios.parquet", columns=["complete_ns"]).column(0).to_numpy()
    end = max(int(ios.max()), int(ops["complete_ns"].max()))
    starts = sorted(set(busy["time_ns"]))
    iv = starts[1] - starts[0]
    nb = len(starts)
    assert starts == [k * iv for k in range(nb)] and (nb - 1) * iv < end <= nb * iv
    lengths = dict(zip(busy["time_ns"], busy["interval_ns"], strict=True))
    assert [lengths[t] for t in starts] == [iv] * (nb - 1) + [end - (nb - 1) * iv]
    for d in sorted(set(busy["drive"])):
        rows = [i for i, x in enumerate(busy["drive"]) if x == d]
        b = np.array([busy["busy_ns"][i] for i in rows])
        q = np.array([busy["queue_op_ns"][i] for i in rows])
        m = ops["drive"] == d
        assert np.array_equal(b, _overlap(ops["start_ns"][m], ops["complete_ns"][m], nb, iv))
        held = _overlap(ops["queued_ns"][m], ops["complete_ns"][m], nb, iv)
        assert (q >= held).all() and (q >= b).all(), (d, q - held)
