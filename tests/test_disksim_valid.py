"""Every drive of DiskSim 4.0's valid/ folder imports and replays its validation trace, and the
model's demerit is within the project's limit of twice DiskSim's own on that trace."""

from __future__ import annotations

import json
import lzma

import pytest
from typer.testing import CliRunner

from blocklab.pipeline.cli import app
from blocklab.pipeline.validate import disksim_demerit, validate_disksim

from .valid_drives import IN_SHARED, VALID, trace_path, valid_path

# DiskSim 4.0's demerits (ms): its valid/runvalid script ("rms should be about")
RUNVALID = {"atlas_III": 0.378, "barracuda": 0.349, "cheetah4LP": 0.318, "cheetah9LP": 0.107,
            "ibm18es": 0.135, "atlas10k": 0.268, "hp_c2247a": 0.090, "hp_c3323a": 0.306,
            "hp_c2490a": 0.254, "dec_rz26": 0.340}


@pytest.mark.parametrize("name", list(VALID))
def test_valid_drive_within_twice_disksims_demerit(name, request):
    if name in IN_SHARED:
        request.getfixturevalue("shared")  # skips without the shared folder
    r = validate_disksim(valid_path(name), trace_path(name))
    p = trace_path(name)
    lines = (lzma.open(p).read() if p.suffix == ".xz" else p.read_bytes()).count(b"\n")
    assert r.requests == lines > 7000  # every line of the trace is replayed
    assert r.disksim_demerit_ms == RUNVALID.get(name)
    assert r.mean_sim_ms == pytest.approx(r.mean_real_ms, rel=0.05)
    if name in RUNVALID:
        assert r.demerit_ms <= 2 * RUNVALID[name], r
    else:  # DiskSim's script gives no figure: the smallest it gives any drive, twice
        assert r.demerit_ms <= 2 * min(RUNVALID.values()), r


def test_disksims_figure_needs_its_trace():
    assert disksim_demerit("QUANTUM_QM39100TD-SW", "x/atlas_III.trace.xz") == 0.378
    assert disksim_demerit("QUANTUM_QM39100TD-SW", "x/other.trace") is None
    assert disksim_demerit("Seagate_ST41601N_validate", "st41601n.trace") is None


def test_validate_cli_prints_disksims_figure():
    args = ["validate", "disksim", str(valid_path("ibm18es")), str(trace_path("ibm18es"))]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("IBM_DNES-309170W_validate: 10000 requests, demerit 0.")
    assert "(DiskSim 0.135 ms)" in res.stdout
    out = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert out["disksim_demerit_ms"] == 0.135
    res = CliRunner().invoke(app, ["validate", "disksim", str(valid_path("st41601n")),
                                   str(trace_path("st41601n"))], env={"COLUMNS": "300"})
    assert res.exit_code == 0 and "DiskSim" not in res.stdout
