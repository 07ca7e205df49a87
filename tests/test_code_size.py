"""Rooms a newcomer can read (issue 20, deliverable 3): no source file over 800 lines and no
function over 120 (from its ``def`` to its last line), in the project's code and its tests.
A file or function that grows past them is split along a seam it has."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("pipeline", "kernels", "traces", "queries", "tools", "tests")
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 120


def _sources() -> list[Path]:
    return sorted(p for d in FOLDERS for p in (ROOT / d).rglob("*.py"))


def test_no_file_is_over_800_lines():
    big = {str(p.relative_to(ROOT)): n for p in _sources()
           if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert not big, big


def test_no_function_is_over_120_lines():
    long = {}
    for p in _sources():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{p.relative_to(ROOT)}:{node.lineno} {node.name}"] = n
    assert not long, long


def test_the_check_sees_the_code():  # the globs find the sources (an empty list passes all)
    names = {p.name for p in _sources()}
    assert {"replay.py", "mrc.py", "safety.py", "test_code_size.py"} <= names
    assert len(names) > 100
