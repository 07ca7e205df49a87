"""The documentation says only what exists: every ``blocklab ...`` command line in README.md and
docs/*.md names a real command with real options, every ``make`` target named exists, every
array configuration key of the arrays reference is one pipeline/model/config.py accepts (asked of the
parser itself), every array TOML shown parses, and docs/schema.md is what traces/schema.py
generates. A failure names the file and line."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer

from blocklab.pipeline.cli import app
from blocklab.pipeline.model.config import ConfigError, parse_array

from . import schema_doc
from .conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _code_blocks(text: str):
    """(language, first line number, body) of every fenced block."""
    for m in FENCE.finditer(text):
        yield m.group(1), _line_of(text, m.start(2)), m.group(2)


def _shell_lines(body: str, first: int):
    """(line number, command) of a shell block: comments dropped, continuations and quoted
    strings that run over several lines joined."""
    buf, start = "", first
    for n, line in enumerate(body.splitlines(), first):
        if not buf:
            start = n
        buf = f"{buf} {line}" if buf else line
        if buf.rstrip().endswith("\\"):
            buf = buf.rstrip()[:-1]
            continue
        try:
            shlex.split(buf, comments=True)
        except ValueError:  # an open quote: the string goes on on the next line
            continue
        yield start, buf
        buf = ""
    if buf:
        yield start, buf


def command_lines() -> list[tuple[str, int, str]]:
    """(file, line, text) of every ``blocklab ...`` command shown in code blocks and in
    inline code spans."""
    out = []
    for path in DOCS:
        text = path.read_text()
        for lang, first, body in _code_blocks(text):
            if lang not in ("", "sh", "bash", "console"):
                continue
            for n, line in _shell_lines(body, first):
                out.append((_rel(path), n, line))
        # inline spans, outside fenced blocks (blanked, keeping the line numbers)
        prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for m in re.finditer(r"`([^`]+)`", prose):
            if m.group(1).startswith(("blocklab ", "sudo blocklab ")):
                out.append((_rel(path), _line_of(prose, m.start()), m.group(1)))
    return out


def _tokens(line: str) -> list[str]:
    try:
        toks = shlex.split(line, comments=True)
    except ValueError:
        toks = line.split()
    while toks and (toks[0] == "sudo" or re.fullmatch(r"[A-Z_]+=\S*", toks[0])):
        toks = toks[1:]
    for i, t in enumerate(toks):  # the rest of a pipeline is another program's
        if t in ("|", "||", "&&", ";", ">", "<", "2>&1"):
            return toks[:i]
    return toks


def _options(cmd: Any) -> set[str]:
    opts = {"--help"}
    for p in cmd.params:
        opts.update(p.opts)
        opts.update(getattr(p, "secondary_opts", ()))
    return opts


def check_command(root: Any, line: str) -> str | None:
    """What is wrong with one documented command line, or None."""
    toks = _tokens(line)
    if not toks or toks[0] != "blocklab":
        return None
    cmd = root
    path = ["blocklab"]
    rest = toks[1:]
    while hasattr(cmd, "commands") and rest:  # a group (Typer may ship its own click)
        word = rest[0].strip("[]")
        if word.startswith("-"):
            break
        if word not in cmd.commands:
            return f"`{' '.join(path)}` has no command {word!r} (it has: {', '.join(cmd.commands)})"
        cmd = cmd.commands[word]
        path.append(word)
        rest = rest[1:]
    known = _options(cmd)
    for tok in rest:
        m = re.match(r"[\[(]*(--?[A-Za-z][A-Za-z0-9-]*)", tok)
        if m and m.group(1) not in known:
            return f"`{' '.join(path)}` has no option {m.group(1)}"
    return None


def test_documented_commands_and_options_exist():
    root = typer.main.get_command(app)
    assert hasattr(root, "commands")
    lines = command_lines()
    assert len(lines) > 50, "the command lines of the docs were not found"
    bad = [f"{f}:{n}: {problem}\n    {text.strip()}" for f, n, text in lines
           if (problem := check_command(root, text))]
    assert not bad, "documented commands that do not exist:\n" + "\n".join(bad)


def test_the_checker_catches_what_does_not_exist():
    """The checker itself: it must refuse a wrong command, subcommand or option."""
    root = typer.main.get_command(app)
    assert hasattr(root, "commands")
    assert check_command(root, "blocklab replay t.parquet --array A.toml -o run/") is None
    assert check_command(root, "sudo blocklab capture -d 8:0 [--duration S]") is None
    assert "no command 'replya'" in check_command(root, "blocklab replya t.parquet")
    assert "no command 'stat'" in check_command(root, "blocklab trace stat t.parquet")
    assert "no option --speeed" in check_command(root, "blocklab replay t --speeed 2")
    assert "no option --list" in check_command(root, "blocklab scenario run x [--list]")


def test_documented_make_targets_exist():
    targets = set(re.findall(r"^([a-z]+):", (ROOT / "Makefile").read_text(), re.M))
    bad = []
    for path in DOCS:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for t in re.findall(r"(?:^|`)make ([a-z]+)\b", line):
                if t not in targets:
                    bad.append(f"{_rel(path)}:{n}: no make target {t!r}")
    assert not bad, "\n".join(bad)


# --- the arrays reference against the configuration parser --------------------------------

#: Where the probe key goes in a minimal valid configuration, by the reference's table name.
_MINIMAL = {"group": [{"layout": "raid5", "width": 4, "drive": "savvio_15k3_300g"}]}
_PROBE = "zz_not_a_key"
_TABLES = {
    "": lambda d: d,
    "group": lambda d: d["group"][0],
    "volume": lambda d: d.setdefault("volume", {}),
    "controller": lambda d: d.setdefault("controller", {}),
    "controller.host_links": lambda d: d.setdefault("controller", {}).setdefault(
        "host_links", {}),
    "failure": lambda d: d.setdefault("failure", [{}])[0],
    "replace": lambda d: d.setdefault("replace", [{}])[0],
    "init": lambda d: d.setdefault("init", [{}])[0],
    "rebuild": lambda d: d.setdefault("rebuild", {}),
}


def accepted_keys(table: str) -> set[str]:
    """The keys pipeline/model/config.py accepts in one table, as its own error message lists them
    for a key it does not know."""
    data = tomllib.loads("")  # a fresh dict
    data["group"] = [dict(_MINIMAL["group"][0])]
    _TABLES[table](data)[_PROBE] = 1
    with pytest.raises(ConfigError) as e:
        parse_array(data, Path("probe.toml"))
    m = re.search(rf"{re.escape(_PROBE)}: unknown key \(known: ([^)]*)\)", str(e.value))
    assert m, f"config.py did not refuse an unknown key in {table or 'the top level'}: {e.value}"
    return set(m.group(1).split(", "))


def documented_keys() -> list[tuple[int, str, str]]:
    """(line, table, key) of every key in docs/arrays.md's key table."""
    out = []
    table = ""
    lines = (ROOT / "docs" / "arrays.md").read_text().splitlines()
    start = lines.index("## Every key")
    for n, line in enumerate(lines[start:], start + 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3 or cells[0] in ("table", "---"):
            continue
        if cells[0]:
            table = cells[0].strip("[]`")
            out.append((n, "", table))
        keys = re.sub(r"\([^)]*\)", "", cells[1])
        m = re.match(r"`(\w+) = \{ ([^}]*) \}`", keys)
        if m:
            out.append((n, table, m.group(1)))
            out += [(n, f"{table}.{m.group(1)}", k.strip()) for k in m.group(2).split(",")]
        else:
            out += [(n, table, k) for k in re.findall(r"`(\w+)`", keys)]
    return out


def test_documented_array_keys_exist():
    keys = documented_keys()
    assert len(keys) > 40, "docs/arrays.md's key table was not found"
    accepted = {t: accepted_keys(t) for t in _TABLES}
    bad = [f"docs/arrays.md:{n}: {t + '.' if t else ''}{k} is not a key pipeline/model/config.py "
           f"accepts (it accepts: {', '.join(sorted(accepted.get(t, ())))})"
           for n, t, k in keys if k not in accepted.get(t, set())]
    assert not bad, "\n".join(bad)
    # and the other way: the reference lists every key the parser accepts
    have = {(t, k) for _n, t, k in keys}
    missing = [f"{t + '.' if t else ''}{k}" for t, ks in accepted.items() for k in sorted(ks)
               if (t, k) not in have]
    assert not missing, f"docs/arrays.md does not document: {', '.join(missing)}"


def test_array_examples_in_the_docs_parse():
    seen = 0
    for path in DOCS:
        for lang, first, body in _code_blocks(path.read_text()):
            if lang != "toml" or "[[group]]" not in body:
                continue
            seen += 1
            try:
                parse_array(tomllib.loads(body), path)
            except (ConfigError, tomllib.TOMLDecodeError) as e:
                pytest.fail(f"{_rel(path)}:{first}: the array example does not parse: {e}")
    assert seen >= 2  # the README's and docs/arrays.md's


def test_schema_page_is_current():
    have = (ROOT / "docs" / "schema.md").read_text()
    assert have == schema_doc.render(), (
        "docs/schema.md is not what traces/schema.py gives: run `make docs`")
