"""The small kernels of the text readers against plain Python: counting a chunk's lines
(kernels/bytescan.count_lines, for io.text_blocks), the last named row of each process in a
chunk (kernels/pairing.last_named, for the names blkparse and tracefs lines carry), and the
release of paired requests in arrival order (kernels/pairing_release.release_keys and release_take,
for every event format's Pairer)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from blocklab.kernels import pairing as K
from blocklab.kernels import pairing_release as KR
from blocklab.kernels.bytescan import count_lines, parse_fixed
from blocklab.traces.formats.paired import named_rows, release_order


@given(st.binary(max_size=5000))
def test_count_lines_is_bytes_count(data):
    assert count_lines(np.frombuffer(data, dtype=np.uint8)) == data.count(b"\n")


def _fixed_reference(text: str, digits: int) -> int | None:
    """``[sign]whole[.frac]`` scaled by 10**digits, extra digits truncated; None when there is
    no digit, the number is over 40 characters, or its magnitude passes int64."""
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    whole, _, frac = body.partition(".")
    if not (whole + frac) or len(body) > 40:
        return None
    mag = int(whole or "0") * 10**digits + int((frac + "0" * digits)[:digits] or "0")
    return None if mag > 2**63 - 1 else sign * mag


@settings(deadline=None)  # (the first example compiles the kernel for a call from Python)
@given(st.from_regex(r"\A[+-]?[0-9]{0,22}(\.[0-9]{0,12})?\Z"), st.sampled_from([3, 6, 9]))
def test_parse_fixed_is_the_decimal_or_refuses_it(text, digits):
    """A time or size as text, scaled to an integer, or refused (-1) when it does not fit
    int64: 18446744073.709551615 s wrapped to -1 ns, and 9223372036.854775808 s to -2**63,
    the parse's "no time yet"."""
    buf = np.frombuffer(text.encode() + b" ", dtype=np.uint8)
    v, pos = parse_fixed(buf, 0, len(buf), digits)
    want = _fixed_reference(text, digits)
    if want is None:
        assert pos == -1, (text, v)
    else:
        assert (v, pos) == (want, len(text)), text


def test_parse_fixed_at_the_edge_of_int64():
    for text, want in [("9223372036.854775807", 2**63 - 1), ("9223372036.854775808", None),
                       ("-9223372036.854775807", -(2**63 - 1)), ("18446744073.709551615", None)]:
        assert _fixed_reference(text, 9) == want
        buf = np.frombuffer(text.encode(), dtype=np.uint8)
        v, pos = parse_fixed(buf, 0, len(buf), 9)
        assert (v if pos > 0 else None) == want, text


def _reference(pids: np.ndarray, named: np.ndarray) -> dict[int, int]:
    """Each pid's last row among the named rows with a pid above 0."""
    last: dict[int, int] = {}
    for k, (pid, has) in enumerate(zip(pids.tolist(), named.tolist(), strict=True)):
        if has and pid > 0:
            last[pid] = k
    return last


@given(st.lists(st.tuples(st.integers(-3, 40), st.booleans()), max_size=300),
       st.sampled_from([0, 1 << 20, 1 << 40]))
def test_last_named_is_each_pids_last_named_row(rows, offset):
    n = len(rows)
    events = np.zeros((n, K.TE_NCOLS), dtype=np.int64)
    comms = np.full((n, 2), -1, dtype=np.int64)
    pids = np.array([p + (offset if p > 0 else 0) for p, _ in rows], dtype=np.int64)
    named = np.array([h for _, h in rows], dtype=bool)
    events[:, K.TE_PID] = pids
    comms[named, 0] = 0
    comms[named, 1] = 1
    table = np.empty(1 << max(4, (2 * n - 1).bit_length()), dtype=np.int64)
    out_pid = np.empty(n, dtype=np.int64)
    out_idx = np.empty(n, dtype=np.int64)
    m = K.last_named(events, comms, table, out_pid, out_idx)
    got = dict(zip(out_pid[:m].tolist(), out_idx[:m].tolist(), strict=True))
    assert len(got) == m  # each pid once
    assert got == _reference(pids, named)
    rows_pids, rows_idx = named_rows(events, comms)  # (its set starts small and grows)
    assert dict(zip(rows_pids.tolist(), rows_idx.tolist(), strict=True)) == got


def test_named_rows_grows_its_set_for_thousands_of_processes():
    """More processes in a chunk than the first set holds (512 of 1,024 slots): the kernel
    says so (-1) rather than filling the set, and ``named_rows`` tries again, larger."""
    rng = np.random.default_rng(5)
    n = 20_000
    events = np.zeros((n, K.TE_NCOLS), dtype=np.int64)
    events[:, K.TE_PID] = rng.integers(-2, 6_000, n)
    comms = np.full((n, 2), -1, dtype=np.int64)
    named = rng.random(n) < 0.7
    comms[named, 0] = 0
    small = np.empty(1 << 10, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    assert K.last_named(events, comms, small, out, out.copy()) == -1
    pids, idx = named_rows(events, comms)
    want = _reference(events[:, K.TE_PID], named)
    assert len(want) > 3_000
    assert dict(zip(pids.tolist(), idx.tolist(), strict=True)) == want


@st.composite
def _held_rows(draw):
    """Rows a Pairer holds: unique sequence numbers, arrival times mostly rising with them
    (as requests are first seen), some stepping back (merges, remaps, splits) or tied, at
    spans from a few ns to beyond what one 63-bit key can hold with the sequence numbers."""
    n = draw(st.integers(0, 120))
    seqs = draw(st.lists(st.integers(0, 1 << 20), min_size=n, max_size=n, unique=True))
    if draw(st.booleans()):
        seqs = [s + (1 << 40) for s in seqs]  # a span beyond the slots: ORDER_BY_KEY
    scale = draw(st.sampled_from([1, 1000, 1 << 45]))  # (1 << 45: the two parts do not fit)
    back = draw(st.sampled_from([0.0, 0.05, 0.5]))
    rank = {s: r for r, s in enumerate(sorted(seqs))}
    times = []
    for s in seqs:
        t = (rank[s] + 60) * scale
        if draw(st.floats(0, 1)) < back:
            t -= draw(st.integers(0, 50)) * scale
        times.append(t)
    if n and draw(st.booleans()):
        times[draw(st.integers(0, n - 1))] = np.iinfo(np.int64).max  # a corrupt arrival
    order = draw(st.permutations(range(n)))  # held in completion order, not arrival order
    rows = np.zeros((n, K.R_NCOLS), dtype=np.int64)
    for k, j in enumerate(order):
        rows[k] = np.arange(K.R_NCOLS) * 7 + j  # every column tells the row apart
        rows[k, K.R_TIME] = times[j]
        rows[k, K.R_SEQ] = seqs[j]
    cut = draw(st.sampled_from(sorted(set(times)) + [np.iinfo(np.int64).max])) if n else 0
    return rows, cut


@given(_held_rows(), st.sampled_from([4, 1 << 12]), st.booleans())
def test_released_rows_are_in_arrival_order_and_the_rest_are_kept(held, slot_rows, everything):
    """The rows that arrived before the cut (all of them with ``everything``, an arrival at
    the largest time too) come out as columns, sorted by (arrival, sequence number) as
    Python's sort puts them; the others stay, first, in their order."""
    rows, cut = held
    n = len(rows)
    flat = rows.reshape(-1).copy()
    idx, key, tcol, scol = (np.empty(max(n, 1), dtype=np.int64) for _ in range(4))
    slots = np.empty(slot_rows, dtype=np.int64)
    m, how = KR.release_keys(flat, n, cut, everything, idx, key, tcol, scol, slots)
    order = release_order(how, m, key, tcol, scol)
    cols = np.empty(K.R_NCOLS * m, dtype=np.int64)
    kept = KR.release_take(flat, n, cut, everything, idx, order, m, cols)
    want = sorted((r for r in rows.tolist() if everything or r[K.R_TIME] < cut),
                  key=lambda r: (r[K.R_TIME], r[K.R_SEQ]))
    assert cols.reshape(K.R_NCOLS, m).T.tolist() == want
    rest = [r for r in rows.tolist() if not everything and r[K.R_TIME] >= cut]
    assert kept == len(rest)
    assert flat[: kept * K.R_NCOLS].reshape(kept, K.R_NCOLS).tolist() == rest
