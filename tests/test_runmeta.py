"""meta.json through its one record (pipeline/runmeta.py): written with the keys and order the
replays have always written, read back equal, and a bad key is one line naming run and key."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blocklab.pipeline import runmeta as RM
from blocklab.pipeline.model.config import Failure, load_array
from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import RUN_SCHEMA_VERSION

from .conftest import ROOT

#: The keys of a serial replay's meta.json, in the order written (docs/query.md).
KEYS = ["blocklab_version", "run_schema_version", "trace", "array", "options", "counts",
        "cache_at_end", "failures", "tasks", "interval_ns", "drives", "elapsed_s",
        "requests_per_s"]

names = st.text("abcdefgh-_0123456789", min_size=1, max_size=8)
nat = st.integers(0, 1 << 40)


@st.composite
def records(draw) -> RM.RunMeta:
    nd = draw(st.integers(1, 5))
    elapsed = draw(st.floats(0, 1e4, allow_nan=False))
    requests = draw(nat)
    return RM.RunMeta(
        blocklab_version=draw(names), run_schema_version=RUN_SCHEMA_VERSION,
        trace=RM.TraceRef(draw(names), "ab" * 32),
        array=RM.ArrayRef(draw(names), "cd" * 32, {"groups": [], "source": draw(names)}),
        options=RM.RunOptions(draw(st.floats(0.1, 10)), draw(st.integers(0, 8)),
                              draw(st.floats(0, 100)), draw(st.booleans()),
                              draw(st.booleans())),
        counts=RM.Counts(requests, draw(nat), nd, draw(nat), draw(st.none() | nat)),
        cache_at_end=RM.CacheAtEnd(draw(nat), draw(nat), 32768),
        failures=tuple(Failure(d, draw(st.floats(0, 100)))
                       for d in draw(st.lists(st.integers(0, nd - 1), max_size=2))),
        tasks=tuple(RM.TaskRef(i, draw(st.sampled_from(["rebuild", "init", "rebalance"])),
                               draw(names), draw(st.integers(0, nd - 1)), draw(nat), draw(nat),
                               65536) for i in range(draw(st.integers(0, 2)))),
        interval_ns=draw(st.integers(1, 1 << 40)),
        drives=tuple(RM.DriveRef(i, draw(names), draw(st.sampled_from(["member", "spare"])),
                                 draw(names)) for i in range(nd)),
        elapsed_s=elapsed, requests_per_s=requests / elapsed if elapsed > 0 else None,
        parallel=draw(st.none() | st.just({"segments": 2, "agreed": True})),
        repeat=draw(st.none() | st.builds(RM.Repeat, st.just("until-tasks-end"), nat, nat,
                                           nat, st.booleans())))


@settings(max_examples=50, deadline=None)
@given(records())
def test_a_record_round_trips_with_the_keys_in_order(tmp_path_factory, meta):
    d = tmp_path_factory.mktemp("run")
    RM.write(d, meta)
    raw = json.loads((d / "meta.json").read_text())
    assert list(raw) == KEYS + (["parallel"] if meta.parallel is not None else []) + (
        ["repeat"] if meta.repeat is not None else [])
    assert list(raw["counts"]) == ["requests", "skipped_not_read_write", "drives", "drive_ops",
                                   "passes"]
    if meta.repeat is not None:
        assert list(raw["repeat"]) == ["until", "max_passes", "passes", "rows_per_pass",
                                       "limit_reached"]
    assert list(raw["drives"][0]) == ["drive", "group", "role", "model"]
    assert RM.read(d) == meta
    back, as_written = RM.read_json(d)
    assert back == meta and as_written == raw


def test_a_folder_written_by_hand_needs_only_the_version(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({"run_schema_version": RUN_SCHEMA_VERSION,
                                                    "counts": {"requests": 3}}))
    m = RM.read(tmp_path, "r")
    assert m.counts == RM.Counts(3) and m.drives == () and m.trace is None


@pytest.mark.parametrize("change, says", [
    ({"interval_ns": "1s"}, 'interval_ns: expected an integer, found "1s"'),
    ({"interval_ns": True}, "interval_ns: expected an integer, found true"),
    ({"drives": [{"drive": 0, "group": "g", "role": "member"}]}, "drives[0].model: missing"),
    ({"counts": {"requests": 1.5}}, "counts.requests: expected an integer, found 1.5"),
    ({"trace": "t.parquet"}, 'trace: expected an object, found "t.parquet"'),
    ({"failures": {"drive": 0}}, "failures: expected a list"),
    ({"repeat": {"until": "until-tasks-end", "max_passes": 9, "passes": 2,
                 "rows_per_pass": 5}}, "repeat.limit_reached: missing"),
    ({"repeat": {"until": "until-tasks-end", "max_passes": 9, "passes": 2,
                 "rows_per_pass": 5, "limit_reached": 0}},
     "repeat.limit_reached: expected true or false, found 0"),
    ({"run_schema_version": RUN_SCHEMA_VERSION + 1}, "run schema version"),
])
def test_a_bad_key_is_one_line_naming_the_run_and_the_key(tmp_path, change, says):
    (tmp_path / "meta.json").write_text(json.dumps(
        {"run_schema_version": RUN_SCHEMA_VERSION, "interval_ns": 1000, **change}))
    with pytest.raises(BlocklabError) as e:
        RM.read(tmp_path, "myrun")
    text = str(e.value)
    assert text.startswith("run myrun: meta.json: ") and says in text and "\n" not in text


def test_a_missing_or_broken_file(tmp_path):
    with pytest.raises(BlocklabError, match="run r: meta.json: no such file"):
        RM.read(tmp_path, "r")
    (tmp_path / "meta.json").write_text("[1, 2]")
    with pytest.raises(BlocklabError, match="meta.json: expected an object"):
        RM.read(tmp_path, "r")
    (tmp_path / "meta.json").write_text("{\n oops")
    with pytest.raises(BlocklabError, match="meta.json: line 2: not JSON"):
        RM.read(tmp_path, "r")
    # a damaged byte (make fuzz found it ending in a traceback)
    (tmp_path / "meta.json").write_bytes(b'{"run_schema_version": "\x80"}')
    with pytest.raises(BlocklabError, match="run r: meta.json: byte 24: not UTF-8 text"):
        RM.read(tmp_path, "r")


@pytest.mark.parametrize("toml", sorted((ROOT / "examples" / "arrays").glob("*.toml"))
                         + sorted((ROOT / "tests" / "arrays").glob("*.toml")),
                         ids=lambda p: p.name)
def test_the_array_configuration_comes_back_as_it_was_parsed(tmp_path, toml):
    """``array_config`` turns the ``array.config`` a replay wrote (``dataclasses.asdict``)
    back into the ArrayConfig that ``load_array`` parsed, through the file."""
    cfg = load_array(toml)
    _round_trip(tmp_path, toml, cfg)


def test_every_table_of_an_array_configuration_comes_back(tmp_path):
    """The same with a volume, a controller, a pool, a rebuild policy, failures, a replacement
    and an initialization (docs/arrays.md's tables)."""
    toml = tmp_path / "all.toml"
    toml.write_text("""
[volume]
stripe_unit = "128KiB"
[[group]]
name = "a"
layout = "raid6"
width = 6
hot_spares = 1
drive = { base = "constellation_es3_4tb", write_cache = true }
[[group]]
name = "p"
layout = "pool"
width = 12
group_width = 6
raid = "raid6"
drive = "atlas10k"
[controller]
cache = "64MiB"
host_links = { count = 2, gbit_per_s = 8, efficiency = 0.8 }
[rebuild]
priority = "low"
unit = "2MiB"
[[failure]]
drive = 1
at_s = 5
[[replace]]
drive = 1
at_s = 50
[[init]]
group = "a"
at_s = 0.5
""")
    cfg = load_array(toml)
    assert cfg.failures and cfg.replacements and cfg.inits and cfg.volume
    assert cfg.groups[0].drive.overrides
    _round_trip(tmp_path / "run", toml, cfg)


def _round_trip(folder, toml, cfg):
    folder.mkdir(exist_ok=True)
    RM.write(folder, RM.RunMeta(RUN_SCHEMA_VERSION,
                                array=RM.ArrayRef(str(toml), config=dataclasses.asdict(cfg))))
    assert RM.array_config(RM.read(folder), "r") == cfg


@pytest.mark.parametrize("config", [None, {"groups": [{"name": "g"}]}, {"groups": 3}])
def test_an_array_configuration_not_read_is_one_line_naming_the_run(tmp_path, config):
    RM.write(tmp_path, RM.RunMeta(RUN_SCHEMA_VERSION, array=RM.ArrayRef("a.toml",
                                                                         config=config)))
    with pytest.raises(BlocklabError, match=r"^run r1: meta\.json: array\.config is not a "
                                            r"configuration this blocklab reads \("):
        RM.array_config(RM.read(tmp_path), "r1")
