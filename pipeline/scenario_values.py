"""The types of a scenario file's ``[workload]`` and ``[replay]`` values, checked when the file
is read: each a line naming the key as the file has it (``workload.requests``, or
``case[0].workload.requests`` for a case's own), where a value of the wrong type was a
traceback from deep in a generator (``read_pct = "x"``: a TypeError comparing it) or, for
``random_pct = true``, taken as 1 (a bool is an int in Python).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from blocklab.traces.errors import BlocklabError

#: Generator options read as sizes (traces/synth parse_size): bytes as a number, or text with
#: a unit (``"4KiB"``), though their signatures say ``str``.
SIZE_OPTIONS = frozenset({"transfer_size", "block_size", "align", "size_small", "size_large"})
#: A case's or the scenario's ``[replay]`` numbers (``repeat`` and ``max_passes`` are checked
#: with each other: scenario._check_repeat) and the types they take.
REPLAY_KINDS = {"speed": {"float"}, "closed_loop": {"int"}, "think_us": {"float"},
                "limit_ms": {"float"}, "sample_s": {"float"}}
_WANT = {"bool": "true or false", "int": "a whole number", "float": "a number", "str": "text"}


def option_kinds(fns: list[Callable[..., Any]], name: str) -> set[str]:
    """The types (names in ``_WANT``) option ``name`` takes: its annotation in the first of
    ``fns`` (the generator, then spc1 search) that has it; ``span`` is a number."""
    if name == "span":
        return {"float"}
    for fn in fns:
        params = inspect.signature(fn).parameters
        if name in params:
            kinds = {t.strip() for t in str(params[name].annotation).split("|")} & set(_WANT)
            return kinds | ({"int"} if name in SIZE_OPTIONS else set())
    return set(_WANT)  # (not an option: the caller names it unknown)


def _fits(value: Any, kinds: set[str]) -> bool:
    if isinstance(value, bool):  # (before int: a bool is an int)
        return "bool" in kinds
    if isinstance(value, int):
        return bool(kinds & {"int", "float"})
    if isinstance(value, float):
        return "float" in kinds
    return isinstance(value, str) and "str" in kinds


def check(key: str, name: str, value: Any, kinds: set[str]) -> None:
    """Refuse ``value`` of option ``name`` unless it has one of ``kinds``; ``key`` is how the
    error names it (``FILE: workload.requests``)."""
    if _fits(value, kinds):
        return
    if name in SIZE_OPTIONS:
        want = "a size such as 4096 or \"128KiB\""
    elif kinds == {"int", "str"}:
        want = "a whole count such as 16 or \"4k\""
    else:
        want = " or ".join(_WANT[k] for k in _WANT if k in kinds)
    shown = str(value).lower() if isinstance(value, bool) else repr(value)  # (as TOML has it)
    raise BlocklabError(f"{key}: expected {want}, found {shown}")


def check_replay(rp: dict[str, Any], key: Callable[[str], str]) -> None:
    """The replay numbers of ``rp`` (a case's, over the scenario's), their types then their
    bounds (replay's own, ``pace_error``); ``key(name)`` names one as the file has it."""
    from .replay import pace_error

    for name, kinds in REPLAY_KINDS.items():
        if name in rp:
            check(key(name), name, rp[name], kinds)
    bad = pace_error(float(rp.get("speed", 1.0)), int(rp.get("closed_loop", 0)),
                     float(rp.get("think_us", 0.0)))
    if bad:
        name = bad[0].removeprefix("--").replace("-", "_")
        raise BlocklabError(f"{key(name)}: {bad[1]}")
