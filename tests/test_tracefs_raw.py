"""The ring-buffer page decoder: pages written the way the kernel lays them out (time extends,
absolute stamps, discarded events, long events, missed-event flags) decode to exactly the
events written, and the kernel agrees with the plain-Python reference; format files of a new
and an old kernel; bad pages are reported with their byte offset. (tests/test_capture.py checks
the decoder against the kernel's own text on a real capture.)"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blocklab.kernels import pairing as K
from blocklab.traces.errors import BadInput
from blocklab.traces.formats.paired import ProcessNames
from blocklab.traces.formats.tracefs_raw import (
    ACTIONS,
    PageDecoder,
    PageHeader,
    parse_format,
    parse_header_page,
)

from .reference import tracefs_raw as ref
from .tracefs_pages import FORMATS_6_18, FORMATS_OLD, pack_pages, payload

HEADER_PAGE = """\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;
"""
RWBS = {"R": (0, 0), "W": (1, 0), "WS": (1, 1), "RA": (0, 8), "FWFS": (1, 1 | 2 | 16),
        "WM": (1, 4), "D": (2, 0), "WFS": (1, 2 | 1), "N": (4, 0), "ZA": (1, 0)}
COMMS = ["fio", "kworker/1:1H", "postgres: wal", "a" * 15]


def _formats(texts):
    return [parse_format(t) for t in texts.values()]


def _ref_formats(fmts):
    out = {}
    for f in fmts:
        fields = {n: (x.offset, x.size) for n, x in f.fields.items()}
        if "errors" in fields:
            fields["error"] = fields.pop("errors")
        out[f.id] = (ACTIONS[f.name], fields)
    return out


@st.composite
def event_lists(draw, fmts):
    n = draw(st.integers(0, 120))
    t = draw(st.integers(0, 1 << 40))
    out = []
    for _ in range(n):
        f = draw(st.sampled_from(fmts))
        # mostly short gaps, sometimes beyond the 27-bit delta (a time extend is needed)
        t += draw(st.one_of(st.integers(0, 5000), st.integers(1 << 26, 1 << 29)))
        rw = draw(st.sampled_from(sorted(RWBS)))
        v = {
            "common_pid": draw(st.integers(0, 1 << 22)),
            "dev": draw(st.sampled_from([(7 << 20) | 3, (8 << 20) | 16, (259 << 20) | 1])),
            "sector": draw(st.integers(0, (1 << 40))),
            "nr_sector": draw(st.sampled_from([0, 1, 8, 128, 2048])),
            "bytes": 0,
            "rwbs": rw,
            "comm": draw(st.sampled_from(COMMS)),
            "error": draw(st.sampled_from([0, 0, -5, -121])),
            "new_sector": draw(st.integers(0, 1 << 40)),
        }
        v["errors"] = v["error"]
        out.append((t, f, v))
    return out


def _truth(events):
    rows = []
    for t, f, v in events:
        act = ACTIONS[f.name]
        nsec = v["nr_sector"] if "nr_sector" in f.fields else 0
        op, flags = ref.empty_flush(*RWBS[v["rwbs"]], nsec, act)
        has_err = "error" in f.fields or "errors" in f.fields
        rows.append((t, v["dev"], act, op, flags, v["sector"], nsec * 512, v["common_pid"],
                     v["error"] if has_err else 0,
                     v["new_sector"] if "new_sector" in f.fields else -1,
                     v["comm"] if "comm" in f.fields else None))
    return rows


def _decode(data: bytes, fmts, commit_size=8, data_off=16, page_size=4096):
    names = ProcessNames()
    dec = PageDecoder(PageHeader(commit_size, data_off), fmts, page_size, names)
    buf = np.frombuffer(data, dtype=np.uint8)
    ev = dec.decode(buf, len(data) // page_size, "pages")
    return ev, dec, names


def _rows(ev):
    cols = [K.TE_TIME, K.TE_DEV, K.TE_ACT, K.TE_OP, K.TE_FLAGS, K.TE_SECTOR, K.TE_BYTES,
            K.TE_PID, K.TE_ERR, K.TE_AUX]
    return [tuple(int(x) for x in r[cols]) for r in ev]


SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("texts", [FORMATS_6_18, FORMATS_OLD], ids=["linux-6.18", "linux-4"])
@SETTINGS
@given(data=st.data(), seed=st.integers(0, 1 << 30), commit_size=st.sampled_from([8, 4]))
def test_pages_decode_to_the_events_written(texts, data, seed, commit_size):
    fmts = _formats(texts)
    events = data.draw(event_lists(fmts))
    data_off = 16 if commit_size == 8 else 12
    rng = random.Random(seed)
    raw = pack_pages([(t, payload(f, v)) for t, f, v in events], commit_size=commit_size,
                     data_off=data_off, rng=rng)
    truth = _truth(events)
    ev, dec, names = _decode(raw, fmts, commit_size, data_off)
    assert _rows(ev) == [r[:10] for r in truth]
    got_ref, lost_stored, lost_pages = ref.decode(raw, 4096, commit_size, data_off,
                                                  _ref_formats(fmts))
    assert got_ref == truth
    assert (lost_stored, lost_pages) == (0, 0) == tuple(dec.lost)
    # names: the last comm seen for each pid among events that carry one
    want = {}
    for r in truth:
        if r[10] is not None and r[7] > 0:
            want[r[7]] = r[10]
    assert names.names == want


def test_missed_event_flags_are_counted():
    fmts = _formats(FORMATS_6_18)
    issue = next(f for f in fmts if f.name == "block_rq_issue")
    recs = [(1000 + 10 * k, payload(issue, {"rwbs": "R", "dev": 1, "nr_sector": 8,
                                            "sector": k})) for k in range(200)]
    raw = pack_pages(recs, missed={1: 17, 2: None})
    assert len(raw) // 4096 >= 3
    ev, dec, _ = _decode(raw, fmts)
    assert len(ev) == 200
    assert tuple(dec.lost) == (17, 1)
    ref_out = ref.decode(raw, 4096, 8, 16, _ref_formats(fmts))
    assert ref_out[1:] == (17, 1)


def test_bad_page_names_its_byte_offset():
    fmts = _formats(FORMATS_6_18)
    issue = next(f for f in fmts if f.name == "block_rq_issue")
    raw = bytearray(pack_pages([(5, payload(issue, {"rwbs": "W", "nr_sector": 8}))] * 3))
    raw += bytearray(4096)
    raw[4096 + 8 : 4096 + 16] = (5000).to_bytes(8, "little")  # commit beyond the page
    with pytest.raises(BadInput, match=r"pages: byte 4104: page data length"):
        _decode(bytes(raw), fmts)
    bad = bytearray(pack_pages([(5, payload(issue, {"rwbs": "Q", "nr_sector": 8}))]))
    with pytest.raises(BadInput, match="not an rwbs"):
        _decode(bytes(bad), fmts)


def test_format_files_and_header_page():
    f = parse_format(FORMATS_6_18["block_rq_complete"])
    assert (f.name, f.id) == ("block_rq_complete", 2107)
    assert f.fields["rwbs"].offset == 34 and f.fields["rwbs"].array == 10
    assert f.fields["error"].signed and f.fields["sector"].size == 8
    assert parse_header_page(HEADER_PAGE) == PageHeader(8, 16)
