"""``blocklab scenario``: published array studies as runnable comparisons (issue 5,
deliverable 7).

A scenario (``scenarios/NAME.toml``, or any file) names its study, says what the
study's setup is and what blocklab assumes where the study is silent, and lists *cases*: each
an array configuration (inline), a workload (one of the synthetic generators, ``blocklab
synth``, with its options), failures, and what to measure. ``run`` generates each case's
workload on its array, replays it into ``OUT/<case>/``, and gathers the figures the study
reports:

- ``rebuild``: each failure's rebuild window (seconds from the failure to the end of its
  rebuild) and rebuild rate (MB/s rebuilt per second of window, and over the first tenth of
  the rebuild, which is the start of the disk), in MB/s per rebuilt drive;
- ``phases``: per op, MB/s, IOPS and latency before the failure, while rebuilding, after
  (the ``phases`` query);
- ``init``: a parity initialization's time and rate (overall, and over the first tenth);
- ``links``: sequential read and write MB/s through each host link configuration of the
  case's ``links`` (``[count, mtu]``: the case's host links, AoE or iSCSI, that many at that
  MTU; the payload per frame and the controller's time per frame follow from it);
- ``oio``: IOPS and latency at each outstanding count of the case's ``oio``;
- ``spc1``: the highest SPC-1 BSU count within a response-time limit (``blocklab spc1
  search``), with its IOPS and response time;
- ``task_rates``: the data a rebuild or parity initialization reads and writes per second
  over its first ``sample_s`` seconds (the ``task-rates`` query over the run's drive
  operations; the run ends with the case's workload rather than with the task);
- ``orion``: per data point of an Orion matrix (the ``orion`` generator), its small and large
  outstanding I/Os, IOPS and MB/s (the ``orion-points`` query over the run and its trace).

**Published figures** (issue 19). A scenario may carry the study's own numbers as
``[[published]]`` entries: ``quantity`` (one of ``QUANTITIES``), ``case``, ``value``, ``unit``
(``UNITS`` of the quantity's dimension), ``where`` (the table or sentence of the study), and
for a link-variant figure ``links`` and ``mtu``. ``run`` resolves each against the case's
figures and returns study | blocklab | ratio, and checks *orderings*: any two figures of one
quantity whose study values differ by more than ``ORDER_MARGIN`` must come out in the same
order in blocklab.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import json
import re
import shutil
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from blocklab.traces.errors import BlocklabError
from blocklab.traces.safety import critical, make_folders, output_lock, remove_stale, temporary_name
from blocklab.traces.store import atomic_output

from . import scenario_values as SV
from .model.config import known_name, parse_array, read_toml
from .query import run_query
from .replay import DEFAULT_MAX_PASSES, REPEAT_MODES, replay
from .sweepfile import toml_text
from .synth import spc1_search, synth_iometer, synth_ior, synth_orion, synth_spc1

MEASURES = ("rebuild", "phases", "init", "links", "oio", "spc1", "task_rates", "orion")
#: Ethernet MTUs a links variant may name (the smallest IPv4 datagram every host takes, to the
#: largest jumbo frame switches carry).
MTU_RANGE = (576, 9216)
GENERATORS = ("ior", "iometer", "orion", "spc1")
_GENERATOR_FNS: dict[str, Callable[..., Any]] = {"ior": synth_ior, "iometer": synth_iometer,
                                                 "orion": synth_orion, "spc1": synth_spc1}
#: A case's name, which is its folder's in the output.
CASE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
#: The keys a [[case]] may have.
CASE_KEYS = {"name", "label", "array", "workload", "measure", "failure", "replay", "links", "oio"}

#: What a ``[[published]]`` figure may be: its dimension and how blocklab measures it.
QUANTITIES = {
    "rebuild_rate_start": ("rate", "data the rebuild read and wrote per second over the case's "
                           "sample_s at its start (task_rates measure)"),
    "init_rate_start": ("rate", "data the parity initialization read and wrote per second over "
                        "the case's sample_s at its start (task_rates measure)"),
    "rebuild_rate": ("rate", "bytes rebuilt per second of the rebuild window, per rebuilt drive "
                     "(rebuild measure)"),
    "rebuild_window": ("time", "failure to the end of its rebuild (rebuild measure)"),
    "init_time": ("time", "start to end of the parity initialization (init measure)"),
    "seq_read": ("rate", "read throughput of the case's sequential run: through the links "
                 "variant [links, mtu] when the figure names one (links measure), else the "
                 "case's reads (phases measure)"),
    "seq_write": ("rate", "write throughput, as seq_read"),
    "throughput": ("rate", "reads and writes together, bytes per second (phases measure; with "
                   "oio, the highest over the outstanding counts)"),
    "iops": ("iops", "host requests per second (phases measure; with oio, the highest over the "
             "outstanding counts)"),
    "orion_small_iops": ("iops", "Orion's sustained maximum of small I/Os alone: the mean IOPS "
                         "of the small-only points in the top quarter of small levels (orion "
                         "measure)"),
    "orion_large_mb_s": ("rate", "Orion's plateau of large I/Os alone: the mean MB/s of the "
                         "large-only points in the top half of large levels (orion measure)"),
}
#: Units of each dimension, as the factor to blocklab's (bytes/s, s, requests/s).
UNITS = {
    "rate": {"B/s": 1.0, "KB/s": 1e3, "KiB/s": 1024.0, "MB/s": 1e6, "MiB/s": float(1 << 20),
             "GB/s": 1e9},
    "time": {"s": 1.0, "min": 60.0, "h": 3600.0},
    "iops": {"IOPS": 1.0},
}
#: Two figures of one quantity whose study values differ by more than this fraction make an
#: ordering blocklab must keep (closer ones are within the study's own run-to-run spread:
#: Coraid's tables average three runs; a 25 % figure tolerance could otherwise flip them).
ORDER_MARGIN = 0.10
PUBLISHED_KEYS = ("quantity", "case", "value", "unit", "where", "links", "mtu")


@dataclasses.dataclass
class Published:
    """One figure of the study: what, of which case, its value in its unit, where it is."""

    quantity: str
    case: str
    value: float
    unit: str
    where: str
    links: int | None = None
    mtu: int | None = None

    @property
    def study(self) -> float:
        """The study's value in blocklab's unit of its dimension."""
        return self.value * UNITS[QUANTITIES[self.quantity][0]][self.unit]

    @property
    def label(self) -> str:
        return self.case + (f" {self.links}x{self.mtu}" if self.links else "")


@dataclasses.dataclass
class Case:
    name: str
    label: str
    array: dict[str, Any]
    workload: dict[str, Any]
    failures: list[tuple[int, float]]
    measure: list[str]
    replay: dict[str, Any]
    links: list[list[int]]
    oio: list[int]
    where: str = ""  # "FILE: case[i]", for errors found when the case runs
    #: the workload keys the case has from the scenario's [workload], not its own
    top_keys: frozenset[str] = frozenset()


@dataclasses.dataclass
class Scenario:
    name: str
    title: str
    study: str
    setup: str
    assumptions: str
    cases: list[Case]
    path: str
    published: list[Published] = dataclasses.field(default_factory=list)


def _folder() -> Path:
    return Path(str(resources.files("blocklab.scenarios")))


def names() -> list[str]:
    return sorted(p.stem for p in _folder().glob("*.toml"))


def load(name: str | Path) -> Scenario:
    """Parse and check scenario ``name``, a built-in one or a file ending in ``.toml`` (every
    case's array must be a valid configuration)."""
    if str(name).endswith(".toml"):
        path = Path(name)
        if not path.is_file():
            raise BlocklabError(f"{path}: no such scenario file")
    else:
        path = _folder() / f"{name}.toml"
        if not path.exists():
            raise BlocklabError(f"no scenario {name!r} (blocklab scenario list: "
                                f"{', '.join(names())})")
    data = read_toml(path, "scenario file")
    missing = [k for k in ("name", "title", "study", "setup", "assumptions") if k not in data]
    if missing:
        raise BlocklabError(f"{path}: missing {', '.join(missing)} (a scenario names its "
                            f"study, setup and assumptions)")
    try:
        return _parse(data, path)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        # a value of the wrong type (a string where a table belongs, ...) found by the fuzzer
        raise BlocklabError(f"{path}: a key is missing or a value has the wrong type "
                            f"({type(e).__name__}: {e})") from None


def _parse(data: dict[str, Any], path: Path) -> Scenario:
    base_w = data.get("workload", {})
    cases: list[Case] = []
    for i, c in enumerate(data.get("case", [])):
        where = f"{path}: case[{i}]"
        if isinstance(c, dict) and (odd := sorted(set(c) - CASE_KEYS)):
            # an [[init]] or [[failure]] of the array written before [case.array] lands here
            raise BlocklabError(f"{where}.{odd[0]}: not a case key (known: "
                                f"{', '.join(sorted(CASE_KEYS))}; array keys such as init "
                                "belong in [case.array])")
        own = c.get("workload", {})
        # a case that names another generator than the scenario's starts from its own options
        # alone: the scenario's (IOR's tasks, block size...) mean nothing to another generator
        other = "generator" in own and own["generator"] != base_w.get("generator")
        w = dict(own) if other else {**base_w, **own}
        wkey = functools.partial(_key, path, where, "workload", own)
        if not known_name(w.get("generator"), GENERATORS):
            raise BlocklabError(f"{wkey('generator')}: expected one of "
                                f"{', '.join(GENERATORS)}")
        measure = c.get("measure", data.get("measure", ["phases"]))
        known = _generator_options(w["generator"])
        if w["generator"] == "spc1" and "spc1" in measure:  # spc1 search's own period
            known = known | {"ramp_s"}
        unknown = sorted(set(w) - known - {"generator", "span"})
        if unknown:
            raise BlocklabError(f"{wkey(unknown[0])}: not an option of the "
                                f"{w['generator']} generator (its options: "
                                f"{', '.join(sorted(known))})")
        fns = [_GENERATOR_FNS[w["generator"]], spc1_search]
        for k, v in w.items():
            if k != "generator":
                SV.check(wkey(k), k, v, SV.option_kinds(fns, k))
        if "span" in w and (w["generator"] != "iometer" or not 0 < float(w["span"]) <= 1):
            raise BlocklabError(f"{wkey('span')}: a fraction in (0, 1] of the volume, "
                                f"for the iometer generator")
        bad = [m for m in measure if not known_name(m, MEASURES)]
        if bad:
            raise BlocklabError(f"{where}.measure: unknown {bad} (known: {', '.join(MEASURES)})")
        if "name" not in c or "array" not in c:
            raise BlocklabError(f"{where}: a case needs a name and an [case.array] table")
        # the name is the case's folder in the output: ["a"] or 1 was a TypeError when the
        # case ran, "../x" wrote beside the output and "" into the output folder itself
        if not isinstance(c["name"], str) or not CASE_NAME.fullmatch(c["name"]):
            raise BlocklabError(f"{where}.name: expected a name of letters, digits, '.', '_', "
                                f"'+' or '-' (the case's folder), found {c['name']!r}")
        if any(x.name == c["name"] for x in cases):
            raise BlocklabError(f"{where}.name: {c['name']} is already a case's name")
        try:  # a bad array config fails here, naming its key
            parse_array(c["array"], path)
        except BlocklabError as e:
            raise BlocklabError(f"{where}.array: {str(e).removeprefix(f'{path}: ')}") from None
        for link in c.get("links", data.get("links", [])):
            if (not isinstance(link, list) or len(link) != 2 or not isinstance(link[1], int)
                    or not MTU_RANGE[0] <= link[1] <= MTU_RANGE[1]
                    or not isinstance(link[0], int) or link[0] < 1):
                raise BlocklabError(f"{where}.links: expected [count, mtu] pairs with an MTU "
                                    f"of {MTU_RANGE[0]} to {MTU_RANGE[1]} bytes, found {link}")
        if measure_needs := [m for m in ("links", "oio") if m in measure and not (
                c.get(m, data.get(m)))]:
            raise BlocklabError(f"{where}.{measure_needs[0]}: the {measure_needs[0]} measure "
                                f"needs a list of {measure_needs[0]} values")
        rp = {**data.get("replay", {}), **c.get("replay", {})}
        rkey = functools.partial(_key, path, where, "replay", c.get("replay", {}))
        _check_repeat(rp, w["generator"], rkey)
        SV.check_replay(rp, rkey)
        cases.append(Case(name=c["name"], label=c.get("label", c["name"]), array=c["array"],
                          workload=w, measure=list(measure),
                          failures=[(int(f["drive"]), float(f["at_s"]))
                                    for f in c.get("failure", [])],
                          replay=rp,
                          links=c.get("links", data.get("links", [])),
                          oio=c.get("oio", data.get("oio", [])), where=where,
                          top_keys=frozenset(set(w) - set(own))))
    if not cases:
        raise BlocklabError(f"{path}: a scenario needs at least one [[case]]")
    published = [_published(path, i, p, {c.name: c for c in cases})
                 for i, p in enumerate(data.get("published", []))]
    return Scenario(name=data["name"], title=data["title"], study=data["study"],
                    setup=data["setup"].strip(), assumptions=data["assumptions"].strip(),
                    cases=cases, path=str(path), published=published)


def _key(path: Path, where: str, table: str, own: dict[str, Any], k: str) -> str:
    """Key ``k`` of a case's ``table`` (workload, replay) as the file has it: the case's own
    (``FILE: case[0].workload.requests``) or the scenario's (``FILE: workload.requests``)."""
    return f"{where}.{table}.{k}" if k in own else f"{path}: {table}.{k}"


def _check_repeat(rp: dict[str, Any], generator: str, key: Callable[[str], str]) -> None:
    """A case's ``replay.repeat`` (``replay.REPEAT_MODES``) and ``replay.max_passes``: known
    values, a closed-loop generator, max_passes only with repeat; ``key(name)`` names one."""
    if "repeat" in rp and not known_name(rp["repeat"], REPEAT_MODES):
        raise BlocklabError(f"{key('repeat')}: expected "
                            f"{' or '.join(map(repr, REPEAT_MODES))}, found {rp['repeat']!r}")
    if "repeat" in rp and generator == "spc1" and not rp.get("closed_loop"):
        raise BlocklabError(f"{key('repeat')}: repeats a closed-loop workload (ior, iometer, "
                            "orion, or any with closed_loop = N); spc1 is open loop")
    if "max_passes" in rp:
        v = rp["max_passes"]
        if "repeat" not in rp:
            raise BlocklabError(f"{key('max_passes')}: only with repeat")
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise BlocklabError(f"{key('max_passes')}: expected a whole number of at least 1, "
                                f"found {v!r}")


def _published(path: Path, i: int, p: Any, cases: dict[str, Case]) -> Published:
    """A ``[[published]]`` entry, checked: every key known, the quantity, case and unit exist,
    a links variant the case runs."""
    where = f"{path}: published[{i}]"
    if not isinstance(p, dict):
        raise BlocklabError(f"{where}: expected a table")
    for k in p:
        if k not in PUBLISHED_KEYS:
            raise BlocklabError(f"{where}.{k}: unknown key (known: {', '.join(PUBLISHED_KEYS)})")
    for k in ("quantity", "case", "value", "unit", "where"):
        if k not in p:
            raise BlocklabError(f"{where}.{k}: missing (a published figure names its quantity, "
                                f"case, value, unit and where in the study it is)")
    q = p["quantity"]
    if not known_name(q, QUANTITIES):
        raise BlocklabError(f"{where}.quantity: unknown quantity {q!r} (known: "
                            f"{', '.join(QUANTITIES)})")
    if not known_name(p["case"], cases):
        raise BlocklabError(f"{where}.case: no case {p['case']!r} in the scenario (cases: "
                            f"{', '.join(cases)})")
    units = UNITS[QUANTITIES[q][0]]
    if not known_name(p["unit"], units):
        raise BlocklabError(f"{where}.unit: unknown unit {p['unit']!r} for {q} (known: "
                            f"{', '.join(units)})")
    v = p["value"]
    if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
        raise BlocklabError(f"{where}.value: expected a positive number, found {v!r}")
    case = cases[p["case"]]
    if ("links" in p) != ("mtu" in p):
        raise BlocklabError(f"{where}.{'mtu' if 'links' in p else 'links'}: a links variant "
                            f"names both links and mtu")
    if "links" in p and [p["links"], p["mtu"]] not in case.links:
        raise BlocklabError(f"{where}.links: case {case.name} runs no variant "
                            f"[{p['links']}, {p['mtu']}] (its links: {case.links})")
    return Published(quantity=q, case=p["case"], value=float(v), unit=p["unit"],
                     where=str(p["where"]), links=p.get("links"), mtu=p.get("mtu"))


def _generator_options(gen: str) -> set[str]:
    """The workload keys the generator ``gen`` takes (its synth function's options, less the
    ones the scenario sets itself)."""
    import inspect

    fn = _GENERATOR_FNS[gen]
    return set(inspect.signature(fn).parameters) - {"output", "array", "capacity", "progress"}


def _as_key(e: BlocklabError, case: Case) -> BlocklabError:
    """A generator's error about one of its options (``--requests: must be at least 1``) as
    the scenario file's key that gave it (``FILE: case[0].workload.requests: ...``, or
    ``FILE: workload.requests`` for the scenario's [workload]): the user wrote the key, not
    the flag."""
    text = str(e)
    m = re.match(r"--([a-z][a-z0-9-]*)[: ]\s*(.*)", text, re.S)
    if not m or not case.where:
        return e
    k = m.group(1).replace("-", "_")
    if k in case.top_keys:
        return BlocklabError(f"{case.where.rsplit(': ', 1)[0]}: workload.{k}: {m.group(2)}")
    return BlocklabError(f"{case.where}.workload.{k}: {m.group(2)}")


def _generate(w: dict[str, Any], trace: Path, array: Path) -> None:
    opts = {k: v for k, v in w.items() if k not in ("generator", "span")}
    gen = w["generator"]
    if "span" in w:  # Iometer's "maximum disk size" as a fraction of the volume
        from .synth import volume

        cap = volume(None, array).capacity_sectors or 0
        opts["disk_sectors"] = int(cap * float(w["span"])) // 8 * 8
    if gen == "ior":
        synth_ior(trace, array=array, **opts)
    elif gen == "iometer":
        synth_iometer(trace, array=array, **opts)
    elif gen == "orion":
        synth_orion(trace, array=array, **opts)
    else:
        synth_spc1(trace, array=array, **opts)


def _first_tenth(ev: list[dict[str, Any]], start: str, progress: str,
                 drive: int | None = None) -> float | None:
    """MB/s over the first tenth of a task: its first progress event (or its end)."""
    st = [e for e in ev if e["event"] == start and (drive is None or e["drive"] == drive)]
    if not st:
        return None
    t0 = st[0]["time_ns"]
    later = [e for e in ev if e["event"] == progress and e["time_ns"] >= t0 and
             (drive is None or e["drive"] == drive) and e["bytes"]]
    if not later or later[0]["time_ns"] <= t0:
        return None
    return later[0]["bytes"] / 1e6 / ((later[0]["time_ns"] - t0) / 1e9)


def _replay(case: Case, array: Path, workload: dict[str, Any], folder: Path):
    make_folders(folder)  # (owner only, as its run)
    trace = folder / "trace.parquet"
    try:
        _generate(workload, trace, array)
    except BlocklabError as e:
        raise _as_key(e, case) from None
    # task_rates samples a task's start: the run ends with the workload (no drain), and it
    # needs the drive operations the task-rates query reads
    sampling = "task_rates" in case.measure
    return replay(trace, array, folder / "run", failures=case.failures or None,
                  speed=float(case.replay.get("speed", 1.0)),
                  closed_loop=int(case.replay.get("closed_loop", 0)),
                  think_us=float(case.replay.get("think_us", 0.0)),
                  drive_ops=sampling, drain=not sampling, repeat=case.replay.get("repeat"),
                  max_passes=int(case.replay.get("max_passes", DEFAULT_MAX_PASSES)))


def run_case(case: Case, out: Path) -> dict[str, Any]:
    """Generate, replay and measure one case into ``out`` (its run folder is ``out/run``;
    ``links`` and ``oio`` variants go to ``out/<variant>/run``)."""
    make_folders(out)
    array = out / "array.toml"
    _write_private(array, toml_text(case.array))
    fig: dict[str, Any] = {"case": case.name, "label": case.label}
    if "spc1" in case.measure:
        opts = {k: v for k, v in case.workload.items() if k not in ("generator", "bsu")}
        s = spc1_search(array, limit_ms=float(case.replay.get("limit_ms", 30.0)), **opts)
        fig["spc1"] = s.as_dict()
        return fig
    if "links" in case.measure:
        fig["links"] = []
        for count, mtu in case.links:
            arr = copy.deepcopy(case.array)
            # the case's links (protocol, speed, frame cost) with the variant's count and MTU;
            # a case that names no framed protocol runs iSCSI over 1 GbE
            base = dict(arr.setdefault("controller", {}).get("host_links", {}))
            if base.get("protocol", "bytes") == "bytes":
                base = {"protocol": "iscsi", "gbit_per_s": 1}
            arr["controller"]["host_links"] = {**base, "count": count, "mtu": mtu}
            variant = out / f"links-{count}x{mtu}"
            make_folders(variant)
            _write_private(variant / "array.toml", toml_text(arr))
            row: dict[str, Any] = {"links": count, "mtu": mtu}
            for op, pct in (("read", 100), ("write", 0)):
                r = _replay(case, variant / "array.toml", {**case.workload, "read_pct": pct},
                            variant / op)
                ph = run_query([variant / op / "run"], "phases").rows()
                row[f"{op}_mb_per_s"] = ph[0]["mb_per_s"] if ph else None
                row[f"{op}_requests"] = r.requests
            fig["links"].append(row)
        return fig
    if "oio" in case.measure:
        fig["oio"] = []
        for n in case.oio:
            r = _replay(case, array, {**case.workload, "outstanding": n}, out / f"oio-{n}")
            ph = run_query([out / f"oio-{n}" / "run"], "phases").rows()
            fig["oio"].append({"outstanding": n, "iops": sum(x["iops"] or 0 for x in ph),
                               "mb_per_s": sum(x["mb_per_s"] or 0 for x in ph),
                               "mean_latency_ms": r.mean_latency_ms,
                               "p99_latency_ms": r.p99_latency_ms})
        return fig
    r = _replay(case, array, case.workload, out)
    fig.update(requests=r.requests, lost_requests=r.lost, mean_latency_ms=r.mean_latency_ms,
               p99_latency_ms=r.p99_latency_ms, replay_s=r.elapsed_s)
    if case.replay.get("repeat"):
        fig.update(passes=r.passes, repeat_limit_reached=r.repeat_limit_reached)
    ev = _events(out / "run")
    if "rebuild" in case.measure:
        fig["rebuilds"] = []
        for rb in r.rebuilds:
            done = [e for e in ev if e["event"] == "rebuild_end" and e["drive"] == rb["drive"]]
            rate = (done[0]["bytes"] / 1e6 / rb["window_s"]
                    if rb["window_s"] and done and done[0]["bytes"] else None)
            fig["rebuilds"].append({**rb, "rebuild_mb_per_s": rate,
                                    "first_tenth_mb_per_s": _first_tenth(
                                        ev, "rebuild_start", "rebuild_progress", rb["drive"])})
    if "phases" in case.measure:
        fig["phases"] = run_query([out / "run"], "phases").rows()
    if "orion" in case.measure:
        fig["orion"] = run_query([out / "run", out / "trace.parquet"], "orion-points").rows()
    if "task_rates" in case.measure:
        fig["task_rates"] = run_query(
            [out / "run"], "task-rates",
            params={"sample_s": str(case.replay.get("sample_s", 10.0))}).rows()
    if "init" in case.measure:
        start = [e["time_ns"] for e in ev if e["event"] == "init_start"]
        end = [e for e in ev if e["event"] == "init_end"]
        if start and len(end) == len(start):
            # one task per LUN, all at once (pipeline/model/array.py): from the first start to the
            # last end, with every task's bytes; the first tenth is one task's (the events do
            # not tell several tasks' progress apart)
            secs = (max(e["time_ns"] for e in end) - min(start)) / 1e9
            moved = sum(e["bytes"] or 0 for e in end)
            fig["init"] = {"seconds": secs, "tasks": len(start),
                           "mb_per_s": moved / 1e6 / secs if secs > 0 else None,
                           "first_tenth_mb_per_s": _first_tenth(ev, "init_start",
                                                                "init_progress")
                           if len(start) == 1 else None}
    return fig


def _events(run: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    p = run / "events.parquet"
    return pq.read_table(p).to_pylist() if p.exists() else []


def measured(pub: Published, fig: dict[str, Any]) -> float | None:
    """blocklab's value of published figure ``pub`` from its case's figures ``fig``, in the
    unit of its dimension (bytes/s, s, requests/s); None when the case did not measure it."""
    q = pub.quantity
    if q in ("rebuild_rate_start", "init_rate_start"):
        task = q.removesuffix("_rate_start")
        rows = [r for r in fig.get("task_rates", []) if r["task"] == task]
        return rows[0]["processed_mb_per_s"] * 1e6 if rows and rows[0][
            "processed_mb_per_s"] is not None else None
    if q in ("rebuild_rate", "rebuild_window"):
        rbs = fig.get("rebuilds", [])
        if not rbs:
            return None
        v = rbs[0]["rebuild_mb_per_s"] if q == "rebuild_rate" else rbs[0]["window_s"]
        return None if v is None else v * (1e6 if q == "rebuild_rate" else 1.0)
    if q == "init_time":
        return fig["init"]["seconds"] if "init" in fig else None
    if q in ("orion_small_iops", "orion_large_mb_s"):
        return _orion_top(fig.get("orion", []), small=q == "orion_small_iops")
    if q in ("seq_read", "seq_write"):
        op = q.removeprefix("seq_")
        if pub.links is not None:
            rows = [r for r in fig.get("links", [])
                    if r["links"] == pub.links and r["mtu"] == pub.mtu]
            v = rows[0][f"{op}_mb_per_s"] if rows else None
        else:
            v = _phase_sum(fig.get("phases", []), "mb_per_s", op)
        return None if v is None else v * 1e6
    key = "mb_per_s" if q == "throughput" else "iops"
    if fig.get("oio"):
        vals = [r[key] for r in fig["oio"] if r.get(key) is not None]
        v = max(vals) if vals else None
    else:
        v = _phase_sum(fig.get("phases", []), key, None)
    return None if v is None else v * (1e6 if q == "throughput" else 1.0)


def _orion_top(points: list[dict[str, Any]], small: bool) -> float | None:
    """The sustained top of an Orion matrix: the mean IOPS of the small-only points in the top
    quarter of small levels, or the mean bytes/s of the large-only points in the top half of
    large levels (Orion's curves flatten there; one point alone is noisy)."""
    own, other = ("small_outstanding", "large_outstanding") if small else (
        "large_outstanding", "small_outstanding")
    pts = [p for p in points if p[other] == 0 and p[own] > 0]
    if not pts:
        return None
    top = max(p[own] for p in pts)
    cut = top * (0.75 if small else 0.5)
    vals = [p["small_iops"] if small else p["large_mb_per_s"] * 1e6 for p in pts
            if p[own] > cut]
    return sum(vals) / len(vals)


def _phase_sum(rows: list[dict[str, Any]], key: str, op: str | None) -> float | None:
    """``key`` summed over the ops of the first phase (the whole run, or before a failure)."""
    if not rows:
        return None
    first = rows[0]["phase"]
    vals = [r[key] for r in rows if r["phase"] == first and (op is None or r["op"] == op)
            and r[key] is not None]
    return sum(vals) if vals else None


def compare(published: list[Published], figs: dict[str, dict[str, Any]]
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """study | blocklab | ratio per published figure of the cases in ``figs`` (case name ->
    figures), and the orderings: pairs of one quantity whose study values differ by more than
    ORDER_MARGIN, with whether blocklab keeps their order."""
    rows: list[dict[str, Any]] = []
    base: list[tuple[float, float | None]] = []  # (study, blocklab) in the dimension's unit
    for p in published:
        if p.case not in figs:
            continue
        f = UNITS[QUANTITIES[p.quantity][0]][p.unit]
        v = measured(p, figs[p.case])
        rows.append({"quantity": p.quantity, "case": p.label, "unit": p.unit,
                     "study": p.value, "blocklab": None if v is None else v / f,
                     "ratio": None if v is None else v / f / p.value, "where": p.where})
        base.append((p.study, v))
    orderings = []
    for i, a in enumerate(rows):
        for j in range(i + 1, len(rows)):
            b = rows[j]
            if a["quantity"] != b["quantity"]:
                continue
            (sa, va), (sb, vb) = base[i], base[j]
            if max(sa, sb) <= min(sa, sb) * (1 + ORDER_MARGIN):
                continue
            (hi, v_hi), (lo, v_lo) = ((a, va), (b, vb)) if sa > sb else ((b, vb), (a, va))
            orderings.append({"quantity": a["quantity"], "higher": hi["case"],
                              "lower": lo["case"], "study_ratio": max(sa, sb) / min(sa, sb),
                              "kept": None if v_hi is None or v_lo is None else v_hi > v_lo})
    return rows, orderings


@dataclasses.dataclass
class ScenarioResult:
    scenario: str
    title: str
    study: str
    output: str
    cases: list[dict[str, Any]]
    elapsed_s: float
    published: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    orderings: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def rebuild_windows_s(self) -> dict[str, list[float | None]]:
        return {c["case"]: [rb["window_s"] for rb in c.get("rebuilds", [])] for c in self.cases}

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["rebuild_windows_s"] = self.rebuild_windows_s()
        return d

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        """The figures as flat rows, one table per measure that any case took."""
        t: dict[str, list[dict[str, Any]]] = {}
        for c in self.cases:
            key = {"case": c["case"]}
            for rb in c.get("rebuilds", []):
                t.setdefault("rebuild", []).append({
                    **key, "drive": rb["drive"], "failed_s": rb["failed_s"],
                    "window_s": rb["window_s"], "mb_per_s": rb["rebuild_mb_per_s"],
                    "first_tenth_mb_per_s": rb["first_tenth_mb_per_s"],
                    "stripes_lost": rb["stripes_lost"]})
            for ph in c.get("phases", []):
                t.setdefault("phases", []).append({
                    **key, "phase": ph["phase"], "op": ph["op"], "requests": ph["requests"],
                    "mb_per_s": ph["mb_per_s"], "iops": ph["iops"], "mean_ms": ph["mean_ms"],
                    "p99_ms": ph["p99_ms"]})
            if "init" in c:
                t.setdefault("init", []).append({**key, **c["init"]})
            for row in c.get("links", []):
                t.setdefault("links", []).append({
                    **key, "links": row["links"], "mtu": row["mtu"],
                    "read_mb_per_s": row["read_mb_per_s"],
                    "write_mb_per_s": row["write_mb_per_s"]})
            for row in c.get("oio", []):
                t.setdefault("oio", []).append({**key, **row})
            for row in c.get("task_rates", []):
                t.setdefault("task_rates", []).append({**key, **row})
            for row in c.get("orion", []):
                t.setdefault("orion", []).append({**key, **row})
            if "spc1" in c:
                s = c["spc1"]
                t.setdefault("spc1", []).append({
                    **key, "bsu": s["bsu"], "iops": s["iops"],
                    "mean_latency_ms": s["mean_latency_ms"], "capped": s["capped"],
                    "replays": len(s["probes"])})
        return t


def run(name: str | Path, output: str | Path | None = None, only: list[str] | None = None,
        progress: Callable[[str, int, int], None] | None = None) -> ScenarioResult:
    """Run scenario ``name``'s cases (or the ``only`` ones) into ``output``."""
    sc = load(name)
    cases = [c for c in sc.cases if not only or c.name in only]
    if only and len(cases) != len(only):
        known = ", ".join(c.name for c in sc.cases)
        unknown = sorted(set(only) - {c.name for c in cases})
        raise BlocklabError(f"scenario {name}: no case {unknown} (cases: {known})")
    out = Path(output or f"scenario-{sc.name}")
    t0 = time.perf_counter()
    figs = []
    with output_lock(out, make_parent=True):  # one run per folder (traces/safety.py)
        if out.exists() and not out.is_dir():
            raise BlocklabError(f"{out}: exists and is not a folder")
        for case in cases:  # all refused before any case runs
            remove_stale(out / case.name)  # (what a killed run was removing: _discard)
            _put_back(out / case.name)  # (what a killed run kept aside)
            _replaceable(out / case.name)
        out.mkdir(exist_ok=True, mode=0o700)  # (owner only, as the runs in it)
        for i, case in enumerate(cases):
            if progress is not None:
                progress(case.name, i, len(cases))
            folder = out / case.name
            # an earlier run's case folder is kept aside (OUT/.CASE.kept) until the case is
            # done again, and put back if it fails or is stopped (it was removed first: a
            # failed run lost it while scenario.json still described it). The case is built
            # in its own place, not under a temporary name: its trace, run meta.json and
            # figures name their files by path, and a temporary's name would stay in them.
            with critical():
                if folder.exists():
                    folder.rename(_kept(folder))
            try:
                figs.append(run_case(copy.deepcopy(case), folder))
            except BaseException:  # stopped or failed: no half case is left
                with critical(raise_at_end=False):
                    shutil.rmtree(folder, ignore_errors=True)
                    _put_back(folder)
                    with contextlib.suppress(OSError):
                        out.rmdir()  # only if no case is in it
                raise
            _discard(folder)
        pub, orders = compare(sc.published, {f["case"]: f for f in figs})
        res = ScenarioResult(scenario=sc.name, title=sc.title, study=sc.study, output=str(out),
                             cases=figs, elapsed_s=time.perf_counter() - t0, published=pub,
                             orderings=orders)
        _write_json(out / "scenario.json", res.as_dict())
    return res


def _kept(folder: Path) -> Path:
    """Where a case's earlier folder waits while the case runs again (``.CASE.kept``; not a
    ``.NAME.tmp-PID``, which a later writer would remove as a killed run's)."""
    return folder.with_name(f".{folder.name}.kept")


def _discard(folder: Path) -> None:
    """Remove the earlier folder kept aside for a case now done again. It leaves its kept name
    first, at once (a temporary's name, which the next run removes if this one is killed): a
    stop or a kill in the middle of the removal left a half folder at ``.CASE.kept``, which the
    next run put back over the finished case."""
    kept, gone = _kept(folder), temporary_name(folder)
    with critical():
        if kept.is_dir() and not kept.is_symlink():
            shutil.rmtree(gone, ignore_errors=True)  # (this process's own, stopped before)
            kept.rename(gone)
    shutil.rmtree(gone, ignore_errors=True)


def _put_back(folder: Path) -> None:
    """The case's earlier folder back in place of ``folder`` (a half-built case of a failed,
    stopped or killed run), if one was kept aside; the caller holds the output's lock."""
    kept = _kept(folder)
    if kept.is_dir() and not kept.is_symlink():
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)
        kept.rename(folder)


def _replaceable(folder: Path) -> None:
    """A case's folder is replaced only when a scenario wrote it (its array.toml, the case's
    first file): ``scenario run -o DIR`` removed any DIR/<case> before, a user's own folder
    too."""
    if folder.exists() or folder.is_symlink():
        if folder.is_symlink() or not folder.is_dir() or not (folder / "array.toml").is_file():
            raise BlocklabError(f"{folder}: exists and is not a scenario case folder (no "
                                "array.toml); not replaced: remove it or write elsewhere")
    kept = _kept(folder)  # (_put_back took a folder kept aside: what is left is not one)
    if kept.exists() or kept.is_symlink():
        raise BlocklabError(f"{kept}: exists and is not a case folder a scenario run kept aside "
                            "(a link or a file); the case's earlier folder would go there: "
                            "remove it")


def _write_private(path: Path, text: str, record: bool = False) -> None:
    """``text`` into ``path``, readable by its owner only (a case's array file, beside runs
    whose files are), whole or not at all; ``record``: an output a stop names as complete (a
    case's array file is the scenario's working file, not one)."""
    with atomic_output(path, record=record) as tmp:
        tmp.write_text(text)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """``path`` written whole or not at all (a temporary name, then a rename)."""
    _write_private(path, json.dumps(data, indent=2, default=str) + "\n", record=True)
