"""The named queries' catalog: ``queries/*.sql``, each read for its header (``blocklab query
--list``; ``pipeline/query.py`` runs them).

One query per file, each opening with a header comment:

    -- NAME: what it returns (continued on more comment lines)
    -- View: ios.                                   (or Views: a, b)
    -- Param: interval_s = 1.0  what it means       (one line per parameter)
    -- Threads: 1  why                             (optional: DuckDB threads it runs on)

Parameters reach DuckDB as named placeholders (``$interval_s``) with the header's default
unless ``--param K=V`` gives another value (converted to the default's type).
"""

from __future__ import annotations

import dataclasses
import math
import re

from blocklab import queries
from blocklab.traces.errors import BlocklabError


@dataclasses.dataclass(frozen=True)
class Param:
    """A named parameter of a query: ``$name`` in its SQL."""

    name: str
    default: int | float | str
    doc: str

    def convert(self, text: str, query: str) -> int | float | str:
        """``text`` as the default's type (a one-line error naming the query otherwise)."""
        try:
            if isinstance(self.default, bool):
                raise ValueError
            if isinstance(self.default, int):
                return int(text)
            if isinstance(self.default, float):
                v = float(text)
                if not math.isfinite(v):
                    raise ValueError
                return v
        except ValueError:
            kind = "an integer" if isinstance(self.default, int) else "a number"
            raise BlocklabError(f"query {query}: --param {self.name}={text}: expected "
                                f"{kind}") from None
        return text


@dataclasses.dataclass(frozen=True)
class QueryInfo:
    """A named query: its description, the views it reads, its parameters and its SQL."""

    name: str
    description: str
    views: tuple[str, ...]
    params: tuple[Param, ...]
    sql: str
    threads: int | None = None  # "-- Threads: N": DuckDB threads it runs on (None: all)


_HEAD = re.compile(r"^--\s*([\w.-]+):\s*(.*)$")
_VIEW = re.compile(r"^--\s*Views?:\s*(.*)$", re.IGNORECASE)
_PARAM = re.compile(r"^--\s*Param:\s*(\w+)\s*=\s*(\S+)\s*(.*)$", re.IGNORECASE)
_THREADS = re.compile(r"^--\s*Threads:\s*(\d+)\b", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"\$([A-Za-z_]\w*)")


def literal_value(text: str) -> int | float | str:
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == "'" else text


def parse_header(name: str, sql: str) -> QueryInfo:
    """Read a query file's header comment (see the module docstring for its form)."""
    lines = []
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line.rstrip())
    if not lines or not (m := _HEAD.match(lines[0])) or m.group(1) != name:
        raise BlocklabError(f"queries/{name}.sql: the first line must be '-- {name}: "
                            "description'")
    desc = [m.group(2)]
    views: list[str] = []
    params: list[Param] = []
    section = "desc"
    threads = None
    for line in lines[1:]:
        if tm := _THREADS.match(line):
            threads = max(1, int(tm.group(1)))
            section = "threads"
        elif vm := _VIEW.match(line):
            views += [v.strip() for v in re.split(r"[,\s]+", vm.group(1).split("(")[0])
                      if v.strip(" .")]
            views = [v.strip(" .") for v in views]
            section = "view"
        elif pm := _PARAM.match(line):
            params.append(Param(pm.group(1), literal_value(pm.group(2)), pm.group(3).strip()))
            section = "param"
        else:
            text = line[2:].strip()
            if section == "desc":
                head, _sep, inline = text.partition("View: ")
                desc.append(head.strip() if _sep else text)
                if _sep:  # "... View: trace." at the end of a description line
                    views.append(inline.split("(")[0].strip(" ."))
            elif section == "param" and text:
                p = params[-1]
                params[-1] = dataclasses.replace(p, doc=f"{p.doc} {text}".strip())
    return QueryInfo(name, " ".join(d for d in desc if d), tuple(views), tuple(params), sql,
                     threads)


def catalog() -> dict[str, QueryInfo]:
    """Every named query, by name."""
    return {n: parse_header(n, queries.load(n)) for n in queries.names()}


def placeholders(sql: str) -> set[str]:
    """The ``$name`` placeholders of an SQL text (outside comments and string literals)."""
    body = re.sub(r"--[^\n]*", "", sql)
    body = re.sub(r"'(?:[^']|'')*'", "''", body)
    return set(_PLACEHOLDER.findall(body))
