"""Shared fixtures: where ../shared is, a CLI runner, and a reader of ingested traces."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("BLOCKLAB_SHARED", ROOT.parent / "shared")).resolve()


# A shell that is not interactive starts a background job (`make test &`, as a CI runner or a
# script may) with SIGINT ignored, and every process it starts inherits that: the commands the
# tests interrupt with SIGINT, as a user's Ctrl-C would, then never saw it (measured: the
# interrupted sweep of tests/test_sweep.py finished its points and exited 0; the SIGINT cases
# of tests/test_signals.py skipped as "ended before SIGINT arrived"). A command started from a
# terminal has the default SIGINT: give the tests' children that.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _kernels_in_cache() -> frozenset[str]:
    """The kernels in this install's kernel cache (``module.function``, from Numba's index
    file names: ``pairing.rehash-229.py311.nbi``)."""
    from blocklab.kernels._jit import cache_folder

    return frozenset(p.name.split("-")[0] for p in Path(cache_folder()).rglob("*.nbi"))


#: The kernels cached as the suite starts, before any test compiles one: in a fresh clone (as
#: CI runs ``make test``), exactly what ``make setup``'s warm compiled (tools/warm.py).
_CACHED_AT_START = _kernels_in_cache()


@pytest.fixture(scope="session")
def kernels_cached_at_start() -> frozenset[str]:
    return _CACHED_AT_START


@pytest.fixture
def shared() -> Path:
    if not (SHARED / "traces").is_dir():
        pytest.skip(f"the shared data folder is not at {SHARED} (set BLOCKLAB_SHARED)")
    return SHARED


def pytest_collection_modifyitems(session, config, items) -> None:
    """Tests marked ``replays`` (the engine, the HDD and SSD models) run after the others.

    ``make setup`` compiles the kernels first (tools/warm.py), but a bare ``pytest`` on an
    empty cache compiles them in the first replaying test, and the quick files report first.
    The sort is stable: each file keeps its order.
    """
    items.sort(key=lambda item: item.get_closest_marker("replays") is not None)


@pytest.fixture(scope="session")
def golden_work(tmp_path_factory) -> Path:
    """The golden inputs and runs (tests/golden.py build), written once for the query tests."""
    from . import golden

    return golden.build(tmp_path_factory.mktemp("q"))


@pytest.fixture(scope="session")
def golden_runs(golden_work: Path) -> dict[str, Path]:
    """The plain replays of the golden build, by array (runs/raid0, runs/raid5)."""
    from . import golden

    return golden.runs_of(golden_work)


@pytest.fixture(scope="module")
def cluster():
    """A real Dask LocalCluster for the module, as ``replay --workers 2`` and ``sweep`` make
    one (pipeline/cluster.py connect: two single-threaded worker processes on loopback, the
    kernel cache shared with this process), which the commands reach by its address as they
    would a user's cluster."""
    from blocklab.pipeline.cluster import connect

    client, c = connect(None, 2, 10.0)
    client.close()  # the commands bring their own client
    yield c
    c.close()


def read_rows(path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def needs(tool: str):
    return pytest.mark.skipif(
        shutil.which(tool) is None,
        reason=f"{tool} is not installed (make test installs it from Debian when run as root)",
    )
