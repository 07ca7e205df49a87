"""Write docs/schema.md from traces/schema.py (``make docs``; ``python -m tests.schema_doc``).

The page is generated so that it cannot drift from the one definition of the columns:
``tests/test_docs.py`` fails when docs/schema.md differs from what :func:`render` gives.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pyarrow as pa

from blocklab.traces import schema as S

DOC = Path(__file__).resolve().parent.parent / "docs" / "schema.md"


def arrow_type(t: pa.DataType, nullable: bool) -> str:
    """The Arrow type as the page shows it: ``int64``, ``dictionary string null``."""
    name = f"dictionary {t.value_type}" if pa.types.is_dictionary(t) else str(t)
    return f"{name} null" if nullable else name


def cell(text: str) -> str:
    """A table cell: reStructuredText literals as Markdown code, ``|`` escaped."""
    return text.replace("``", "`").replace("|", "\\|")


def docstring_meanings() -> dict[str, str]:
    """Column -> meaning, from the reStructuredText table of traces/schema.py's docstring.

    The table's rows continue on lines whose first field is blank; the ``===`` rule lines give
    the field offsets.
    """
    lines = (S.__doc__ or "").splitlines()
    rules = [i for i, line in enumerate(lines) if re.fullmatch(r"=+( +=+)+", line.strip())]
    if len(rules) != 3:
        raise SystemExit("traces/schema.py: its docstring no longer has the column table")
    starts = [m.start() for m in re.finditer(r"=+", lines[rules[0]])]
    out: dict[str, str] = {}
    name = ""
    for line in lines[rules[1] + 1:rules[2]]:
        first = line[:starts[1]].strip()
        meaning = line[starts[3]:].strip()
        if first:
            name = first
            out[name] = meaning
        else:
            out[name] += " " + meaning
    return out


def table(columns: dict[str, tuple[pa.DataType, bool, str, str]],
          meanings: dict[str, str] | None = None) -> list[str]:
    rows = ["| column | type | unit | meaning |", "|---|---|---|---|"]
    for name, (typ, nullable, unit, desc) in columns.items():
        text = (meanings or {}).get(name, desc)
        rows.append(f"| `{name}` | {arrow_type(typ, nullable)} | {cell(unit)} | {cell(text)} |")
    return rows


def render() -> str:
    meanings = docstring_meanings()
    missing = set(S.COLUMNS) ^ set(meanings)
    if missing:
        raise SystemExit(f"traces/schema.py: the docstring's table and COLUMNS differ in "
                         f"{sorted(missing)}")
    flags = ", ".join(f"{n} {1 << b}" for b, n in enumerate(S.FLAG_NAMES))
    ops = ", ".join(f"{i} {n}" for i, n in enumerate(S.OP_NAMES))
    kinds = ", ".join(f"{i} {n}" for i, n in enumerate(S.OPK_NAMES))
    out = [
        "# The schemas",
        "",
        "<!-- Generated from traces/schema.py by `make docs` (python -m tests.schema_doc). "
        "Do not edit: tests/test_docs.py fails when this page is not current. -->",
        "",
        f"## The trace (schema version {S.SCHEMA_VERSION})",
        "",
        "One row per block request, written by `blocklab ingest`, `capture` and `synth`. Times "
        "are integer nanoseconds since the trace start (the earliest request); positions in "
        "512-byte sectors; sizes in bytes. Columns a source does not have are null.",
        "",
        *table(S.COLUMNS, meanings),
        "",
        f"`op` codes: {ops}. `flags` bits: {flags}.",
        "",
        "btt's intervals follow: Q2G = `getrq_ns - time_ns`, G2I = `insert_ns - getrq_ns`, "
        "I2D = `issue_ns - insert_ns`, D2C = `complete_ns - issue_ns`, "
        "Q2C = `complete_ns - time_ns`.",
        "",
        f"File-level metadata (Parquet key `{S.META_KEY.decode()}`, JSON): `source_format`, "
        "`sources` (file name, sha256, bytes), `host`, `kernel`, `start_utc` (wall-clock time "
        "of `time_ns` 0 when the source has a clock), `blocklab_version`, `schema_version`, "
        "`linux_devices`, `counts` (skipped, incomplete, lost_events). Parquet is "
        "zstd-compressed, time columns delta-encoded.",
        "",
        f"## The run folder (run schema version {S.RUN_SCHEMA_VERSION})",
        "",
        "What `blocklab replay -o RUN/` writes, one Parquet file per table below, beside "
        "`meta.json` ([query.md](query.md) says what each file holds and how to query it).",
        "",
    ]
    for stem, cols in S.RUN_COLUMNS.items():
        out += [f"### `{stem}.parquet`", "", *table(cols), ""]
    out += [
        f"`drive_ops.kind` codes: {kinds}. `events.event` names: "
        f"{', '.join(f'`{e}`' for e in S.EVENT_NAMES)}.",
        "",
        "## A sweep's summary",
        "",
        "`blocklab sweep run -o OUT/` writes one row per point under "
        "`OUT/summary/<axis>=<value>/.../<point>.parquet` (the axes are folder names, not "
        "columns; [sweeps-and-scenarios.md](sweeps-and-scenarios.md)).",
        "",
        *table(S.POINT_COLUMNS),
    ]
    return "\n".join(out) + "\n"


def main() -> None:
    DOC.write_text(render())
    print(f"wrote {DOC}", file=sys.stderr)


if __name__ == "__main__":
    main()
