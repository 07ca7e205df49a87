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


def read_rows(path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def needs(tool: str):
    return pytest.mark.skipif(
        shutil.which(tool) is None,
        reason=f"{tool} is not installed (make test installs it from Debian when run as root)",
    )
