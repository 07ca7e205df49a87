"""Golden end-to-end answers: the seeded golden workload through replay and every named query,
compared with tests/golden/*.csv (regenerated only by ``make golden``).

The engine is still changing, so a legitimate model change moves these answers: regenerate
with ``make golden`` and look at the diff. The independent checks of each query are in
tests/test_query.py.
"""

from __future__ import annotations

import pytest

from blocklab.pipeline.query import catalog

from . import golden

pytestmark = pytest.mark.replays  # replays: runs after the quick files (conftest.py)


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> dict:
    work = golden.build(tmp_path_factory.mktemp("golden"))
    return golden.answers(work)


def test_every_named_query_has_a_golden_answer():
    assert set(golden.CASES) == set(catalog())
    assert {p.stem for p in golden.GOLDEN.glob("*.csv")} == set(catalog())


@pytest.mark.parametrize("name", sorted(golden.CASES))
def test_golden(answers, name: str):
    want = golden.read_csv(golden.GOLDEN / f"{name}.csv")
    got = golden.to_rows(answers[name])
    hint = f"{name}: differs from tests/golden/{name}.csv (make golden regenerates it)"
    assert got[0] == want[0], hint
    assert len(got) == len(want), hint
    for k, (g, w) in enumerate(zip(got[1:], want[1:], strict=True), start=2):
        bad = [(c, a, b) for c, a, b in zip(want[0], g, w, strict=True)
               if not golden.same(a, b)]
        assert not bad, f"{hint}: line {k}: {bad}"
    assert answers[name].num_rows > 0, f"{name}: the golden workload gives it no rows"


def test_same_tolerates_only_rounding():
    assert golden.same("1.0000000000000002", "1.0")
    assert not golden.same("1.001", "1.0")
    assert not golden.same("read", "write")
    assert golden.same("", "")
    assert not golden.same("", "0")

