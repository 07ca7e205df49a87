"""Shared fixtures: where ../shared is, a CLI runner, and a reader of ingested traces."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("BLOCKLAB_SHARED", ROOT.parent / "shared")).resolve()


@pytest.fixture
def shared() -> Path:
    if not (SHARED / "traces").is_dir():
        pytest.skip(f"the shared data folder is not at {SHARED} (set BLOCKLAB_SHARED)")
    return SHARED


#: Test files that replay (the engine, the HDD and SSD models). They run last: ``make setup``
#: compiles the kernels first (pipeline/warm.py), but a bare ``pytest`` on an empty cache
#: compiles them in the first replaying test, and the quick files report first.
REPLAYING = {"test_catalog.py", "test_disksim_valid.py", "test_engine.py", "test_failures.py",
             "test_golden.py", "test_hdd.py", "test_mrc.py", "test_query.py", "test_report.py",
             "test_risk.py",
             "test_scenario.py", "test_sweep.py", "test_synth_closed_loop.py",
             "test_synth_search.py", "test_synth_spc1.py"}


def pytest_collection_modifyitems(session, config, items) -> None:
    """Files that replay after the others (stable: each file keeps its order)."""
    items.sort(key=lambda item: item.path.name in REPLAYING)


def read_rows(path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def needs(tool: str):
    return pytest.mark.skipif(
        shutil.which(tool) is None,
        reason=f"{tool} is not installed (make test installs it from Debian when run as root)",
    )
