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
  case's ``links`` (``[count, mtu]``: 1 GbE links whose payload efficiency the MTU sets);
- ``oio``: IOPS and latency at each outstanding count of the case's ``oio``;
- ``spc1``: the highest SPC-1 BSU count within a response-time limit (``blocklab spc1
  search``), with its IOPS and response time.

The figures are blocklab's: the studies' own tables could not be read from the copies at hand
(``README``, "Scenarios"), so a scenario reproduces a setup, not a published number.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import shutil
import time
import tomllib
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from blocklab.traces.errors import BlocklabError
from blocklab.traces.safety import output_lock
from blocklab.traces.store import atomic_output

from .config import parse_array
from .query import run_query
from .replay import replay
from .sweep import toml_text
from .synth import spc1_search, synth_iometer, synth_ior, synth_orion, synth_spc1

MEASURES = ("rebuild", "phases", "init", "links", "oio", "spc1")
#: Payload efficiency of a 1 GbE iSCSI link: about 112 MB/s of the 125 MB/s line rate with a
#: 1500-byte MTU and 118 MB/s with jumbo frames, after Ethernet, IP, TCP and iSCSI headers
#: (Microsoft iSCSI Target 3.3 white paper, 2010: 0.973 and 0.996 of line rate on the wire,
#: less TCP/iSCSI; Network Computing measured about 5 % more with jumbo frames).
MTU_EFFICIENCY = {1500: 112 / 125, 9000: 118 / 125}
GENERATORS = ("ior", "iometer", "orion", "spc1")


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


@dataclasses.dataclass
class Scenario:
    name: str
    title: str
    study: str
    setup: str
    assumptions: str
    cases: list[Case]
    path: str


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
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise BlocklabError(f"{path}: {e}") from None
    except UnicodeDecodeError as e:
        raise BlocklabError(f"{path}: byte {e.start}: not UTF-8 text") from None
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
    cases = []
    for i, c in enumerate(data.get("case", [])):
        where = f"{path}: case[{i}]"
        w = {**base_w, **c.get("workload", {})}
        if w.get("generator") not in GENERATORS:
            raise BlocklabError(f"{where}.workload.generator: expected one of "
                                f"{', '.join(GENERATORS)}")
        if "span" in w and (w["generator"] != "iometer" or not 0 < float(w["span"]) <= 1):
            raise BlocklabError(f"{where}.workload.span: a fraction in (0, 1] of the volume, "
                                f"for the iometer generator")
        measure = c.get("measure", data.get("measure", ["phases"]))
        bad = [m for m in measure if m not in MEASURES]
        if bad:
            raise BlocklabError(f"{where}.measure: unknown {bad} (known: {', '.join(MEASURES)})")
        if "name" not in c or "array" not in c:
            raise BlocklabError(f"{where}: a case needs a name and an [case.array] table")
        try:  # a bad array config fails here, naming its key
            parse_array(c["array"], path)
        except BlocklabError as e:
            raise BlocklabError(f"{where}.array: {str(e).removeprefix(f'{path}: ')}") from None
        for link in c.get("links", data.get("links", [])):
            if (not isinstance(link, list) or len(link) != 2 or link[1] not in MTU_EFFICIENCY
                    or not isinstance(link[0], int) or link[0] < 1):
                raise BlocklabError(f"{where}.links: expected [count, mtu] pairs with an MTU "
                                    f"of {' or '.join(map(str, MTU_EFFICIENCY))}, found {link}")
        if measure_needs := [m for m in ("links", "oio") if m in measure and not (
                c.get(m, data.get(m)))]:
            raise BlocklabError(f"{where}.{measure_needs[0]}: the {measure_needs[0]} measure "
                                f"needs a list of {measure_needs[0]} values")
        cases.append(Case(name=c["name"], label=c.get("label", c["name"]), array=c["array"],
                          workload=w, measure=list(measure),
                          failures=[(int(f["drive"]), float(f["at_s"]))
                                    for f in c.get("failure", [])],
                          replay={**data.get("replay", {}), **c.get("replay", {})},
                          links=c.get("links", data.get("links", [])),
                          oio=c.get("oio", data.get("oio", []))))
    if not cases:
        raise BlocklabError(f"{path}: a scenario needs at least one [[case]]")
    return Scenario(name=data["name"], title=data["title"], study=data["study"],
                    setup=data["setup"].strip(), assumptions=data["assumptions"].strip(),
                    cases=cases, path=str(path))


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
    folder.mkdir(parents=True, exist_ok=True)
    trace = folder / "trace.parquet"
    _generate(workload, trace, array)
    return replay(trace, array, folder / "run", failures=case.failures or None,
                  speed=float(case.replay.get("speed", 1.0)))


def run_case(case: Case, out: Path) -> dict[str, Any]:
    """Generate, replay and measure one case into ``out`` (its run folder is ``out/run``;
    ``links`` and ``oio`` variants go to ``out/<variant>/run``)."""
    out.mkdir(parents=True, exist_ok=True)
    array = out / "array.toml"
    array.write_text(toml_text(case.array))
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
            arr.setdefault("controller", {})["host_links"] = {
                "count": count, "gbit_per_s": 1, "efficiency": MTU_EFFICIENCY[mtu]}
            variant = out / f"links-{count}x{mtu}"
            variant.mkdir(parents=True, exist_ok=True)
            (variant / "array.toml").write_text(toml_text(arr))
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
                               "mean_latency_ms": r.mean_latency_ms,
                               "p99_latency_ms": r.p99_latency_ms})
        return fig
    r = _replay(case, array, case.workload, out)
    fig.update(requests=r.requests, mean_latency_ms=r.mean_latency_ms,
               p99_latency_ms=r.p99_latency_ms, replay_s=r.elapsed_s)
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
    if "init" in case.measure:
        start = [e["time_ns"] for e in ev if e["event"] == "init_start"]
        end = [e for e in ev if e["event"] == "init_end"]
        if start and end:
            secs = (end[0]["time_ns"] - start[0]) / 1e9
            fig["init"] = {"seconds": secs,
                           "mb_per_s": end[0]["bytes"] / 1e6 / secs if secs > 0 else None,
                           "first_tenth_mb_per_s": _first_tenth(ev, "init_start",
                                                                "init_progress")}
    return fig


def _events(run: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    p = run / "events.parquet"
    return pq.read_table(p).to_pylist() if p.exists() else []


@dataclasses.dataclass
class ScenarioResult:
    scenario: str
    title: str
    study: str
    output: str
    cases: list[dict[str, Any]]
    elapsed_s: float

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
        for i, case in enumerate(cases):
            if progress is not None:
                progress(case.name, i, len(cases))
            folder = out / case.name
            if folder.exists():
                shutil.rmtree(folder)
            try:
                figs.append(run_case(copy.deepcopy(case), folder))
            except BaseException:  # stopped or failed: no half case is left
                shutil.rmtree(folder, ignore_errors=True)
                with contextlib.suppress(OSError):
                    out.rmdir()  # only if no finished case is in it
                raise
        res = ScenarioResult(scenario=sc.name, title=sc.title, study=sc.study, output=str(out),
                             cases=figs, elapsed_s=time.perf_counter() - t0)
        _write_json(out / "scenario.json", res.as_dict())
    return res


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """``path`` written whole or not at all (a temporary name, then a rename)."""
    with atomic_output(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
