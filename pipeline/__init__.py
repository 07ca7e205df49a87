"""blocklab.pipeline: orchestration jobs (ingest, stats, bench) and the `blocklab` CLI."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("blocklab")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"
