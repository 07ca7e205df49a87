"""blocklab.pipeline: the orchestration jobs (ingest, replay, query, report, sweep...) and the
`blocklab` CLI."""

from __future__ import annotations

import functools


def __getattr__(name: str) -> str:
    # ``__version__`` is looked up when first used: importlib.metadata costs a tenth of a
    # second of start-up, which ``blocklab --help`` and commands that write no metadata skip
    if name == "__version__":
        return _version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("blocklab")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0.0.0+unknown"
