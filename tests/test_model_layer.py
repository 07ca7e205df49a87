"""The model layer (pipeline/model/) sits below the jobs: none of its modules imports a job
module of pipeline/ (replay, query, validate, the CLI...), so it can be read, and imported, on
its own (docs/architecture.md, layer rules)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

MODEL = Path(__file__).resolve().parent.parent / "pipeline" / "model"
MODULES = sorted(p for p in MODEL.glob("*.py"))


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (at the top or inside a function), as absolute names."""
    pkg = "blocklab.pipeline.model"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = pkg.rsplit(".", node.level - 1)[0] if node.level else ""
            mod = ".".join(x for x in (base, node.module or "") if x)
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)  # from . import catalog
    return out


def test_the_model_layer_has_its_modules():
    names = {p.stem for p in MODULES}
    assert {"config", "catalog", "disksim_params", "drive_params", "placement",
            "array"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_a_model_module_imports_no_job(path):
    jobs = {f"blocklab.pipeline.{p.stem}" for p in MODEL.parent.glob("*.py")
            if p.stem != "__init__"}
    bad = sorted(m for m in _imports(path) if m in jobs or m == "blocklab.tools"
                 or m.startswith("blocklab.tools."))
    assert not bad, f"{path.name} imports {bad}"
    importlib.import_module(f"blocklab.pipeline.model.{path.stem}".removesuffix(".__init__"))


def test_the_check_sees_an_import_of_a_job(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("from ..validate import drive_params\ndef f():\n    from .. import replay\n")
    assert {"blocklab.pipeline.validate", "blocklab.pipeline.replay"} <= _imports(f)
