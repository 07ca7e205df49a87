"""blocklab.queries: one DuckDB query per .sql file, loaded with importlib.resources."""

from __future__ import annotations

from importlib import resources


def load(name: str) -> str:
    """Return the text of ``queries/<name>.sql``."""
    return resources.files(__package__).joinpath(f"{name}.sql").read_text(encoding="utf-8")


def names() -> list[str]:
    """The named queries (files starting with ``_`` hold macros, not queries)."""
    return sorted(
        p.name[:-4] for p in resources.files(__package__).iterdir()
        if p.name.endswith(".sql") and not p.name.startswith("_")
    )
