"""The array fidelity table: every published figure the built-in scenarios carry, beside
blocklab's, written into docs/array-fidelity.md between the ``<!-- fidelity -->`` markers.

``make fidelity`` (``python -m tests.fidelity_doc``) runs the scenarios that carry published
figures and rewrites the table; tests/test_fidelity_doc.py reruns a sample of their cases and
checks the table still says what blocklab computes (so the docs cannot drift from the code).
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from blocklab.pipeline import scenario

DOC = Path(__file__).resolve().parent.parent / "docs" / "array-fidelity.md"
BEGIN, END = "<!-- fidelity -->", "<!-- /fidelity -->"


def fmt(v: float | None) -> str:
    """A figure as the table prints it: four significant digits."""
    return "-" if v is None else f"{v:.4g}"


def rows(res: scenario.ScenarioResult) -> list[str]:
    """Markdown table rows of one scenario's published figures."""
    out = []
    for p in res.published:
        ratio = "-" if p["ratio"] is None else f"{p['ratio']:.2f}"
        ok = "" if p["ratio"] is None else ("yes" if 0.75 <= p["ratio"] <= 1.25 else "no")
        out.append(f"| {res.scenario} | {p['case']} | {p['quantity']} | {p['unit']} | "
                   f"{fmt(p['study'])} | {fmt(p['blocklab'])} | {ratio} | {ok} |")
    return out


def table(results: list[scenario.ScenarioResult]) -> str:
    lines = ["| scenario | case | quantity | unit | study | blocklab | ratio | within 25 % |",
             "|---|---|---|---|---|---|---|---|"]
    summary = []
    for r in results:
        lines += rows(r)
        n = len(r.published)
        ok = sum(1 for p in r.published if p["ratio"] is not None and 0.75 <= p["ratio"] <= 1.25)
        kept = sum(1 for o in r.orderings if o["kept"])
        summary.append(f"- `{r.scenario}`: {ok} of {n} figures within 25 %, {kept} of "
                       f"{len(r.orderings)} orderings kept.")
    return "\n".join(summary) + "\n\n" + "\n".join(lines)


def published_scenarios() -> list[str]:
    return [n for n in scenario.names() if scenario.load(n).published]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        results = [scenario.run(n, Path(tmp) / n) for n in published_scenarios()]
    text = DOC.read_text()
    if BEGIN not in text or END not in text:
        sys.exit(f"{DOC}: no {BEGIN} ... {END} markers")
    new = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END),
                 lambda _m: f"{BEGIN}\n{table(results)}\n{END}", text, flags=re.S)
    DOC.write_text(new)
    print(f"{DOC}: {sum(len(r.published) for r in results)} figures")


if __name__ == "__main__":
    main()
