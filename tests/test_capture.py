"""``blocklab capture`` for real: a loop device over a file, fio (Debian package) issuing a
known number of reads and writes of mixed sizes, and the captured file holds exactly fio's
counts and bytes with zero lost events; afterwards no instance is left and the global tracing
state is as before. Ctrl-C and SIGTERM end a capture with a valid file; a killed capture's
instance is removed by --cleanup and by the next capture; not root, no tracefs, no such
device: one line, exit status 2. The page decoder agrees with the kernel's own text of the
same events.

These tests need root (tracefs instances and loop devices are root-only); they skip, saying
why, only when tracefs is not writable here."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest

from blocklab.kernels import pairing as K
from blocklab.kernels import textparse as T
from blocklab.pipeline.capture import (
    CaptureOptions,
    Instance,
    anonymized,
    capture,
    find_tracefs,
    load_key,
    remove_instance,
)
from blocklab.traces import schema as S
from blocklab.traces.errors import BlocklabError
from blocklab.traces.formats.paired import ProcessNames
from blocklab.traces.formats.tracefs_raw import (
    ACTIONS,
    PageDecoder,
    parse_header_page,
    read_formats,
)
from blocklab.traces.store import open_trace

from .conftest import needs
from .reference import tracefs_raw as ref

BLOCKLAB = str(Path(sys.executable).parent / "blocklab")
# alone: beside another test process the capture's reader lost the race with fio (a
# clean-clone run under pytest-xdist: fio ended between two polls, before the capture had seen
# its size limit); make test runs these after the others, in one process
pytestmark = [needs("fio"), needs("losetup"), pytest.mark.alone]


@pytest.fixture(scope="module")
def tracefs() -> Path:
    if os.geteuid() != 0:
        pytest.skip(f"tracefs is not writable: these tests run as uid {os.geteuid()}, capture "
                    "needs root (tracefs instances, loop devices)")
    try:
        path = find_tracefs()
    except BlocklabError:
        # root, and tracefs not mounted: mount it where the kernel documents it
        r = subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"],
                           capture_output=True, text=True)
        if r.returncode:
            pytest.skip(f"tracefs is not writable: not mounted, and mounting it failed: "
                        f"{r.stderr.strip()}")
        path = find_tracefs()
    probe = path / "instances" / f"blocklab-probe-{os.getpid()}"
    try:
        os.mkdir(probe)
    except OSError as e:
        pytest.skip(f"tracefs is not writable: cannot create an instance in {path} ({e})")
    os.rmdir(probe)
    return path


@pytest.fixture
def loopdev(tmp_path):
    """A loop device of our own over a file: no request merging (so each fio I/O is one
    request), mq-deadline where available (so block_rq_insert fires too); its queue settings
    are restored and it is detached afterwards."""
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    dev = subprocess.run(["losetup", "-f", "--show", str(img)], check=True,
                         capture_output=True, text=True).stdout.strip()
    q = Path("/sys/block") / Path(dev).name / "queue"
    saved = {n: (q / n).read_text() for n in ("nomerges", "scheduler")}
    try:
        (q / "nomerges").write_text("2")
        if "mq-deadline" in saved["scheduler"]:
            (q / "scheduler").write_text("mq-deadline")
        yield dev
    finally:
        (q / "nomerges").write_text(saved["nomerges"].strip())
        sched = saved["scheduler"].split("[")[1].split("]")[0] if "[" in saved["scheduler"] \
            else "none"
        with contextlib.suppress(OSError):
            (q / "scheduler").write_text(sched)
        subprocess.run(["losetup", "-d", dev], check=False)


def dev_t(dev: str) -> int:
    st = os.stat(dev)
    return S.make_dev(os.major(st.st_rdev), os.minor(st.st_rdev))


def run_fio(dev: str, n: int = 600, engine: str = "psync") -> dict:
    """fio: ``n`` random reads and writes (60 % reads) of 4, 16, 64 and 256 KiB, direct, over
    the device's first 60 MiB."""
    # --size alone also caps the bytes moved (60 MiB, about 1,400 of these I/Os) and wins over a
    # larger --number_ios; --io_size lifts that cap, so n is the count fio does
    r = subprocess.run(
        ["fio", "--name=capture-test", f"--filename={dev}", "--direct=1",
         f"--ioengine={engine}", "--rw=randrw", "--rwmixread=60",
         "--bssplit=4k/40:16k/30:64k/20:256k/10", f"--number_ios={n}", "--size=60M",
         f"--io_size={n * 256}k",
         "--randrepeat=1", "--norandommap", "--output-format=json"],
        check=True, capture_output=True, text=True)
    job = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]
    return {"reads": job["read"]["total_ios"], "writes": job["write"]["total_ios"],
            "read_bytes": job["read"]["io_bytes"], "write_bytes": job["write"]["io_bytes"]}


def counts(path: Path, dev: int) -> dict:
    q = f"""SELECT count(*) FILTER (WHERE op = 0), count(*) FILTER (WHERE op = 1),
                   coalesce(sum(size_bytes) FILTER (WHERE op = 0), 0),
                   coalesce(sum(size_bytes) FILTER (WHERE op = 1), 0),
                   count(*) FILTER (WHERE device <> {dev} OR op > 1)
            FROM '{path}'"""
    r, w, rb, wb, other = duckdb.sql(q).fetchall()[0]
    assert other == 0, "requests of another device or kind in the capture"
    return {"reads": r, "writes": w, "read_bytes": rb, "write_bytes": wb}


def global_state(tracefs: Path) -> dict[str, str]:
    """The top-level instance's settings a capture must not change."""
    names = ["tracing_on", "current_tracer", "set_event", "buffer_size_kb", "trace_clock",
             "options/overwrite", "tracing_cpumask", "events/enable", "events/block/enable"]
    state = {n: (tracefs / n).read_text() for n in names if (tracefs / n).exists()}
    for ev in sorted((tracefs / "events" / "block").iterdir()):
        if ev.is_dir():
            for f in ("enable", "filter"):
                state[f"{ev.name}/{f}"] = (ev / f).read_text()
    return state


@contextlib.contextmanager
def traced(tracefs: Path, name: str, dev: str, events, buffer_kb: int | None = None):
    """A tracefs instance of the test's own recording ``events`` of ``dev`` (mono clock),
    tracing on inside the block; removed at the end."""
    inst = Instance(tracefs / "instances", name)
    inst.create()
    try:
        inst.write("tracing_on", "0")
        inst.write("trace_clock", "mono")
        if buffer_kb:
            inst.write("buffer_size_kb", str(buffer_kb))
        for ev in events:
            inst.write(f"events/block/{ev}/filter", f"dev == {dev_t(dev)}")
            inst.write(f"events/block/{ev}/enable", "1")
        inst.write("tracing_on", "1")
        yield inst
    finally:
        remove_instance(inst.path)


def capture_while(opts: CaptureOptions, action, *, until_it_ends: bool = False) -> object:
    """Run a capture in a thread, ``action`` once tracing is on, then stop it. With
    ``until_it_ends``, ``action`` is repeated until the capture stops by itself (for at most
    two minutes), so a test of what stops it does not race the action's end."""
    stop = threading.Event()
    on = threading.Event()
    box: dict = {}

    def run():
        try:
            box["result"] = capture(opts, lambda s: on.set(), stop)
        except BaseException as e:  # handed to the test thread
            box["error"] = e
            on.set()

    th = threading.Thread(target=run)
    th.start()
    try:
        assert on.wait(120), "the capture never started"
        deadline = time.monotonic() + 120
        if "error" not in box:
            action()
        while until_it_ends and th.is_alive() and time.monotonic() < deadline:
            action()
    finally:
        stop.set()
        th.join(120)
    if "error" in box:
        raise box["error"]
    return box["result"]


def wait_capturing(proc: subprocess.Popen) -> tuple[bool, str]:
    """Whether a background ``blocklab capture`` said it is capturing (False: it ended
    first), and its standard error up to there."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + 120
    seen = ""
    while time.monotonic() < deadline:
        if sel.select(timeout=1):
            line = proc.stderr.readline()
            seen += line
            if "capturing" in line:
                return True, seen
            if not line and proc.poll() is not None:
                break
    return False, seen


def start_cli(args: list[str], **kw) -> subprocess.Popen:
    """``blocklab capture ARGS`` in the background, returned once it says it is capturing."""
    proc = subprocess.Popen([BLOCKLAB, "capture", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)
    started, seen = wait_capturing(proc)
    if started:
        return proc
    proc.kill()
    proc.communicate()
    raise AssertionError(f"the capture did not start: {seen}")


def one_line_error(r: subprocess.CompletedProcess, *words: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("blocklab: error: "), r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


# ------------------------------------------------------------------------------------------


def test_capture_has_exactly_fios_requests(tracefs, loopdev, tmp_path):
    before = global_state(tracefs)
    out = tmp_path / "cap.parquet"
    fio: dict = {}
    t_before = dt.datetime.now(dt.UTC)
    res = capture_while(CaptureOptions(output=out, devices=(loopdev,)),
                        lambda: fio.update(run_fio(loopdev)))
    assert res.lost_events == 0 and res.incomplete == 0
    assert counts(out, dev_t(loopdev)) == fio
    assert res.requests == fio["reads"] + fio["writes"]
    t = pq.read_table(out)
    assert t.column("complete_ns").null_count == 0
    assert not any(f & (S.FLAG_PARTIAL | S.FLAG_INCOMPLETE) for f in t.column("flags").to_pylist())
    sizes = set(t.column("size_bytes").to_pylist())
    assert len(sizes) > 1 and sizes <= {4096, 16384, 65536, 262144}
    assert min(t.column("time_ns").to_pylist()) == 0
    lat = np.array(t.column("latency_ns").to_pylist())
    assert (lat > 0).all()
    sched = (Path("/sys/block") / Path(loopdev).name / "queue" / "scheduler").read_text()
    per_request = 2
    if "[mq-deadline]" in sched:
        per_request = 3  # insert, issue, complete
        assert t.column("insert_ns").null_count == 0
    # every event the kernel handed to the reader was decoded, and there were no others
    assert res.events == per_request * res.requests
    assert res.events == sum(d["read"] for d in res.lost_per_cpu.values())
    assert "fio" in set(t.column("comm").to_pylist())
    _pf, meta = open_trace(out)
    assert meta.host == socket.gethostname() and meta.kernel == platform.release()
    start = dt.datetime.fromisoformat(meta.start_utc)
    assert t_before - dt.timedelta(seconds=1) <= start <= dt.datetime.now(dt.UTC)
    assert meta.counts["lost_events"] == 0 and meta.linux_devices
    assert meta.extra["capture"]["lost_per_cpu"] == res.lost_per_cpu
    assert (out.stat().st_mode & 0o777) == 0o600
    assert not (tracefs / "instances" / res.instance).exists()
    assert global_state(tracefs) == before


def test_decoder_agrees_with_the_kernels_text(tracefs, loopdev):
    """The same events read twice: as the kernel's own text (``trace``, microseconds) and as
    the binary pages; the kernel decoder and the Python reference give the kernel's fields."""
    events = ["block_rq_insert", "block_rq_issue", "block_rq_complete"]
    with traced(tracefs, f"blocklab-{os.getpid()}", loopdev, events) as inst:
        run_fio(loopdev, 150)
        inst.write("tracing_on", "0")
        text = (inst.path / "trace").read_bytes()
        header = parse_header_page((inst.path / "events" / "header_page").read_text())
        formats = read_formats(inst.path / "events", events)
        page = int((inst.path / "buffer_subbuf_size_kb").read_text()) * 1024 \
            if (inst.path / "buffer_subbuf_size_kb").exists() else os.sysconf("SC_PAGE_SIZE")
        names = ProcessNames()
        dec = PageDecoder(header, formats, page, names)
        raw_rows, ref_rows = [], []
        ref_formats = {f.id: (ACTIONS[f.name], {n: (x.offset, x.size)
                                                for n, x in f.fields.items()})
                       for f in formats}
        for cpu_dir in sorted((inst.path / "per_cpu").iterdir()):
            fd = os.open(cpu_dir / "trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
            data = b""
            try:
                while True:
                    try:
                        chunk = os.read(fd, page)
                    except BlockingIOError:
                        break
                    if not chunk:
                        break
                    data += chunk
            finally:
                os.close(fd)
            if not data:
                continue
            ev = dec.decode(np.frombuffer(data, dtype=np.uint8), len(data) // page, "raw")
            raw_rows += [tuple(int(x) for x in r[:9]) for r in ev]
            ref_rows += [r[:9] for r in ref.decode(data, page, header.commit_size,
                                                  header.data_off, ref_formats)[0]]
    assert sorted(raw_rows) == sorted(ref_rows)
    buf = np.frombuffer(text, dtype=np.uint8)
    n_lines = text.count(b"\n") + 1
    tev = np.zeros(n_lines * K.TE_NCOLS, dtype=np.int64)
    tcomm = np.zeros(n_lines * 2, dtype=np.int64)
    ne, _pos, status, _w, _l, _f, _c = T.parse_tracefs(buf, 0, tev, tcomm, np.iinfo(np.int64).min,
                                               np.zeros(1, dtype=np.int64))
    assert status == T.OK
    text_rows = sorted(tuple(int(x) for x in r[:9]) for r in tev[: ne * K.TE_NCOLS]
                       .reshape(ne, K.TE_NCOLS))
    # the text prints microseconds rounded to nearest (kernel/trace/trace.c ns2usecs)
    as_text = sorted(((r[0] + 500) // 1000 * 1000,) + r[1:] for r in raw_rows)
    assert len(as_text) >= 3 * 150 and as_text == text_rows
    assert "fio" in names.names.values()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_ends_capture_with_a_valid_file(tracefs, loopdev, tmp_path, sig):
    before = global_state(tracefs)
    out = tmp_path / "sig.parquet"
    proc = start_cli(["-d", loopdev, "-o", str(out), "--json"])
    fio = run_fio(loopdev, 300)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    res = json.loads(stdout)
    assert res["stopped_by"] == sig.name and res["lost_events"] == 0
    assert counts(out, dev_t(loopdev)) == fio
    open_trace(out)
    assert not (tracefs / "instances" / f"blocklab-{proc.pid}").exists()
    assert not list(tmp_path.glob(".sig.parquet.tmp-*"))
    assert global_state(tracefs) == before


def test_killed_capture_is_cleaned_up(tracefs, loopdev, tmp_path):
    before = global_state(tracefs)
    out = tmp_path / "k.parquet"
    proc = start_cli(["-d", loopdev, "-o", str(out)])
    inst = tracefs / "instances" / f"blocklab-{proc.pid}"
    tmp = tmp_path / f".k.parquet.tmp-{proc.pid}"
    assert inst.is_dir() and tmp.exists()
    proc.kill()
    proc.communicate()
    assert inst.is_dir(), "SIGKILL cannot be caught: the instance stays"
    r = subprocess.run([BLOCKLAB, "capture", "--cleanup", "-o", str(out), "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert set(json.loads(r.stdout)["removed"]) >= {str(inst), str(tmp)}
    assert not inst.exists() and not tmp.exists() and not out.exists()

    # the next capture finds one by itself
    proc = start_cli(["-d", loopdev, "-o", str(out)])
    inst = tracefs / "instances" / f"blocklab-{proc.pid}"
    proc.kill()
    proc.communicate()
    assert inst.is_dir()
    r = subprocess.run([BLOCKLAB, "capture", "-d", loopdev, "--duration", "0.2", "-o",
                        str(tmp_path / "next.parquet")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"removed the stale instance {inst}" in r.stderr
    assert not inst.exists()
    open_trace(tmp_path / "next.parquet")
    for p in tmp_path.glob(".k.parquet.tmp-*"):
        p.unlink()
    assert global_state(tracefs) == before


def test_errors_are_one_line_with_status_2(tracefs, loopdev, tmp_path):
    out = tmp_path / "e.parquet"
    before = set(os.listdir(tracefs / "instances"))
    r = subprocess.run([BLOCKLAB, "capture", "-d", "/dev/blocklab-no-such-disk", "-o",
                        str(out)], capture_output=True, text=True, timeout=120)
    one_line_error(r, "--device /dev/blocklab-no-such-disk", "no such device")
    r = subprocess.run([BLOCKLAB, "capture", "-d", "4095:1048575", "-o", str(out)],
                       capture_output=True, text=True, timeout=120)
    one_line_error(r, "--device 4095:1048575", "no block device")
    r = subprocess.run([BLOCKLAB, "capture", "-d", "/dev/null", "-o", str(out)],
                       capture_output=True, text=True, timeout=120)
    one_line_error(r, "not a block device")

    # not root: the same command as the unprivileged user nobody, where nobody can run this
    # checkout's Python (a clone under a private home cannot): else the same check in-process
    env = dict(os.environ, HOME="/tmp")
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = subprocess.run([*as_nobody, sys.executable, "-c", "import blocklab.pipeline.cli"],
                           capture_output=True, env=env) if shutil.which("setpriv") else None
    if probe is not None and probe.returncode == 0:
        r = subprocess.run([*as_nobody, BLOCKLAB, "capture", "-d", loopdev, "-o",
                            "/tmp/blocklab-nobody.parquet"],
                           capture_output=True, text=True, timeout=120, env=env)
        one_line_error(r, "needs root")
        assert not Path("/tmp/blocklab-nobody.parquet").exists()
    else:
        import blocklab.pipeline.capture as C

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(C.os, "geteuid", lambda: 65534)
            mp.setattr(C.os, "access", lambda *a, **k: False)
            with pytest.raises(BlocklabError, match="needs root"):
                capture(CaptureOptions(output=out, devices=(loopdev,)))

    # no tracefs: unmounted in a private mount namespace (the host's mount is untouched)
    if shutil.which("unshare"):
        script = f"umount {tracefs} && exec {BLOCKLAB} capture -d {loopdev} -o {out}"
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            script], capture_output=True, text=True, timeout=120)
        one_line_error(r, "tracefs is not mounted")
    assert not out.exists()
    assert set(os.listdir(tracefs / "instances")) <= before | {
        n for n in os.listdir(tracefs / "instances") if not n.startswith("blocklab-")}


def test_max_size_stops_before_the_limit(tracefs, loopdev, tmp_path):
    out = tmp_path / "small.parquet"
    limit = 48 << 10
    done: list[dict] = []
    # fio is run again until the capture stops by itself: one run of a fixed size could end
    # between two polls (every 50 ms) on a fast machine, and the capture then stop for the
    # test's stop ("stop") before it saw the limit, as it did in CI with a single short run
    res = capture_while(CaptureOptions(output=out, devices=(loopdev,), max_size=limit),
                        lambda: done.append(run_fio(loopdev, 2000, engine="libaio")),
                        until_it_ends=True)
    assert res.stopped_by == "max-size"
    assert out.stat().st_size <= limit
    total = sum(f["reads"] + f["writes"] for f in done)
    assert 0 < res.requests < total
    _pf, meta = open_trace(out)
    assert pq.read_table(out).num_rows == res.requests
    assert meta.extra["capture"]["stopped_by"] == "max-size"
    assert not (tracefs / "instances" / res.instance).exists()


def test_anonymize_hashes_names_and_drops_pids(tracefs, loopdev, tmp_path):
    out = tmp_path / "anon.parquet"
    fio: dict = {}
    res = capture_while(CaptureOptions(output=out, devices=(loopdev,), anonymize=True),
                        lambda: fio.update(run_fio(loopdev, 200)))
    assert res.requests == fio["reads"] + fio["writes"]
    t = pq.read_table(out)
    assert t.column("pid").null_count == t.num_rows
    comms = {c for c in t.column("comm").to_pylist() if c is not None}
    assert comms and all(c.startswith("anon-") for c in comms)
    assert anonymized("fio") in comms  # stable: the same name gives the same hash
    _pf, meta = open_trace(out)
    assert meta.host == anonymized(socket.gethostname())
    assert socket.gethostname() not in json.dumps(meta.extra)


def test_anonymize_key_hashes_with_the_key(tracefs, loopdev, tmp_path):
    key_file = tmp_path / "names.key"
    out = tmp_path / "keyed.parquet"
    fio: dict = {}
    res = capture_while(CaptureOptions(output=out, devices=(loopdev,), anonymize_key=key_file),
                        lambda: fio.update(run_fio(loopdev, 100)))
    assert res.requests == fio["reads"] + fio["writes"]
    key = load_key(key_file)
    t = pq.read_table(out)
    assert t.column("pid").null_count == t.num_rows
    comms = {c for c in t.column("comm").to_pylist() if c is not None}
    assert anonymized("fio", key) in comms and anonymized("fio") not in comms
    _pf, meta = open_trace(out)
    assert meta.host == anonymized(socket.gethostname(), key)
    assert meta.extra["capture"]["anonymized_with_key"] is True


def test_bio_queue_adds_queue_times(tracefs, loopdev, tmp_path):
    out = tmp_path / "q.parquet"
    fio: dict = {}
    res = capture_while(CaptureOptions(output=out, devices=(loopdev,), bio_queue=True),
                        lambda: fio.update(run_fio(loopdev, 300)))
    assert res.lost_events == 0
    assert counts(out, dev_t(loopdev)) == fio
    q = f"""SELECT count(*) FILTER (WHERE NOT (time_ns <= issue_ns AND issue_ns <= complete_ns
                                      AND time_ns < issue_ns)),
                   count(getrq_ns)
            FROM '{out}'"""
    bad, with_getrq = duckdb.sql(q).fetchall()[0]
    assert bad == 0 and with_getrq == res.requests
    _pf, meta = open_trace(out)
    assert "block_bio_queue" in meta.extra["capture"]["events_enabled"]


def test_blktrace_runs_or_says_why_not(tracefs, loopdev, tmp_path):
    """--blktrace in a private mount namespace with debugfs mounted (blktrace's relay files
    live there): a capture with fio's counts where the kernel allows blktrace, else one line."""
    if not shutil.which("blktrace") or not shutil.which("unshare"):
        pytest.skip("blktrace or unshare is not installed (make tools installs blktrace)")
    out = tmp_path / "bt.parquet"
    script = (f"mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug; "
              f"exec {BLOCKLAB} capture --blktrace -d {loopdev} -o {out} --json")
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                             script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    fio = None
    # fio once blktrace runs (the command says it is capturing when blktrace's per-CPU files
    # appear), where a fixed wait of 1.5 s could start it before blktrace on a slow machine
    started, early = wait_capturing(proc)
    if started:
        fio = run_fio(loopdev, 200)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    stderr = early + stderr
    if proc.returncode == 2:
        line = stderr.strip().splitlines()
        assert len(line) == 1 and line[0].startswith("blocklab: error: --blktrace"), stderr
        assert not out.exists()
        return
    assert proc.returncode == 0, stderr
    assert fio is not None and counts(out, dev_t(loopdev)) == fio
    assert json.loads(stdout)["method"] == "blktrace"


def test_partition_is_its_disks_sector_range(tracefs, tmp_path):
    """--device on a partition: the disk's requests within the partition's sectors only (the
    block_rq events name the disk). The partition is added with the BLKPG ioctl (addpart), so
    no partition-table parser is needed in the kernel."""
    if not shutil.which("addpart"):
        pytest.skip("addpart (util-linux) is not installed")
    img = tmp_path / "parted.img"
    first, nsec = 2048, 65536
    with open(img, "wb") as f:
        f.truncate((first + nsec + 2048) * 512)
    disk = subprocess.run(["losetup", "-f", "--show", str(img)], check=True,
                          capture_output=True, text=True).stdout.strip()
    part = disk + "p1"
    nomerges = Path("/sys/block") / Path(disk).name / "queue" / "nomerges"
    saved = nomerges.read_text().strip()
    try:
        subprocess.run(["addpart", disk, "1", str(first), str(nsec)], check=True,
                       capture_output=True)
        for _ in range(100):
            if Path(part).exists():
                break
            time.sleep(0.05)
        assert Path(part).exists(), f"{part} did not appear"
        nomerges.write_text("2")
        out = tmp_path / "part.parquet"
        fio: dict = {}

        def io():
            fio.update(run_fio(part, 200))
            # the same disk outside the partition: not captured
            subprocess.run(["dd", f"if={disk}", "of=/dev/null", "bs=4k", "count=8",
                            "iflag=direct"], check=True, capture_output=True)

        res = capture_while(CaptureOptions(output=out, devices=(part,)), io)
        assert res.devices[0]["first_sector"] == first and res.devices[0]["sectors"] == nsec
        assert counts(out, dev_t(disk)) == fio
        q = f"SELECT min(sector), max(sector + size_bytes // 512) FROM '{out}'"
        lo, hi = duckdb.sql(q).fetchall()[0]
        assert first <= lo and hi <= first + nsec
    finally:
        nomerges.write_text(saved)
        subprocess.run(["delpart", disk, "1"], check=False, capture_output=True)
        subprocess.run(["losetup", "-d", disk], check=False)


@contextlib.contextmanager
def kernel_count(tracefs: Path, dev: str, events: tuple[str, ...]):
    """Count the events of ``dev`` fired while the block runs, in a tracefs instance of the
    test's own with room for all of them (its per-CPU ``entries``, nothing lost); yields a
    dict filled in at the end: name -> count. (Not named blocklab-PID: a capture started
    inside the block leaves it alone.)"""
    got: dict[str, int] = {}
    with traced(tracefs, f"blocklab-count-{os.getpid()}", dev, events, 16384) as inst:
        yield got
        inst.write("tracing_on", "0")
        stats = [dict(x.split(": ") for x in inst.read(f"per_cpu/{c.name}/stats").splitlines()
                      if ": " in x) for c in (inst.path / "per_cpu").iterdir()]
        assert sum(int(s["overrun"]) + int(s["dropped events"]) for s in stats) == 0
        got["total"] = sum(int(s["entries"]) for s in stats)
        text = inst.read("trace")
        for ev in events:
            got[ev] = text.count(f" {ev}: ")


def test_lost_events_are_counted_and_reported(tracefs, loopdev, tmp_path):
    """A ring buffer of one page per CPU cannot hold a fast fio run between two polls: the
    kernel drops events, the capture says how many, and decoded + lost = every event fired,
    as an instance of the test's own with room for them all counts them."""
    out = tmp_path / "lossy.parquet"
    sched = (Path("/sys/block") / Path(loopdev).name / "queue" / "scheduler").read_text()
    per_request = 3 if "[mq-deadline]" in sched else 2
    fired = ("block_rq_insert", "block_rq_issue", "block_rq_complete", "block_rq_requeue")
    with kernel_count(tracefs, loopdev, fired) as n:
        proc = start_cli(["-d", loopdev, "-o", str(out), "--buffer-kb", "4", "--json"])
        fio = run_fio(loopdev, 3000, engine="libaio")
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    res = json.loads(stdout)
    assert res["lost_events"] > 0
    assert f"warning: the kernel lost {res['lost_events']:,} events" in stderr
    # what it decoded is what the kernel handed its reader (its "read events")
    assert res["events"] == sum(d["read"] for d in res["lost_per_cpu"].values()), res
    # the capture records all but block_rq_requeue; a request the driver put back is inserted
    # and issued again, so fio's requests give a floor, not the count (the count was 16 or 32
    # over it in 2 whole-file runs of about 30 here, where the test assumed 3 events a request;
    # not seen again since it counts them, nor a requeue)
    assert res["events"] + res["lost_events"] == n["total"] - n["block_rq_requeue"], (res, n)
    assert n["total"] - n["block_rq_requeue"] >= per_request * (fio["reads"] + fio["writes"])
    _pf, meta = open_trace(out)
    assert meta.counts["lost_events"] == res["lost_events"]
    assert not (tracefs / "instances" / f"blocklab-{proc.pid}").exists()


def test_an_exception_leaves_no_instance_and_no_file(tracefs, loopdev, tmp_path):
    out = tmp_path / "boom.parquet"
    calls = []

    def status(s):
        calls.append(s)
        if len(calls) == 2:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        capture(CaptureOptions(output=out, devices=(loopdev,)), status)
    assert not (tracefs / "instances" / calls[0].instance).exists()
    assert not out.exists() and not list(tmp_path.glob(".boom.parquet.tmp-*"))
