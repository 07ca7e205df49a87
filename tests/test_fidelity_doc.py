"""docs/array-fidelity.md says what blocklab computes: a sample of the published comparisons
is run again (small cases, seconds each) and each figure's row in the table must match."""

from __future__ import annotations

import pytest

from blocklab.pipeline import scenario

from .fidelity_doc import BEGIN, DOC, END, rows

SAMPLE = {
    "coraid-sr-aoe": ["sr1521-raid5-14-rebuild", "sr1520-raid5-14-init",
                      "sr1521-raid1-2-rebuild", "sr1521-raid1-2", "sr1520-raid10-4"],
    "md3000-raid5-vs-raid10": ["raid10-seq-read", "raid5-seq-write", "raid10-seeker"],
}


def _table_rows() -> set[str]:
    text = DOC.read_text()
    body = text[text.index(BEGIN):text.index(END)]
    return {line for line in body.splitlines() if line.startswith("| ")}


@pytest.mark.parametrize("name", sorted(SAMPLE))
def test_fidelity_table_is_current(tmp_path, name):
    res = scenario.run(name, tmp_path / name, SAMPLE[name])
    assert res.published, name
    have = _table_rows()
    for row in rows(res):
        assert row in have, f"docs/array-fidelity.md is stale (make fidelity): {row}"


def test_every_published_figure_is_in_the_table():
    have = _table_rows()
    for name in scenario.names():
        for p in scenario.load(name).published:
            assert any(f"| {name} | {p.label} | {p.quantity} |" in r for r in have), (name, p)
