"""traces/thrift_compact.py and traces/parquet_join.py: Parquet parts joined without decoding
their pages, checked against pyarrow's and DuckDB's reading of the joined file, the parts'
own row groups and statistics, and the Thrift specification's example (issue 21,
deliverable 2: the parallel replay's parts)."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blocklab.traces import parquet_join as PJ
from blocklab.traces import store
from blocklab.traces import thrift_compact as TC
from blocklab.traces.errors import BlocklabError
from blocklab.traces.schema import RUN_SCHEMAS

# ---------------------------------------------------------------------------------------------
# the compact protocol


def test_the_specifications_varint_example():
    """thrift-compact-protocol.md: 50399 is the var int DF 89 03; zigzag maps 0, -1, 1, -2, 2
    to 0, 1, 2, 3, 4."""
    w = TC.Writer()
    w.varint(50399)
    assert bytes(w.out) == b"\xdf\x89\x03"
    assert TC.Reader(b"\xdf\x89\x03").varint() == 50399
    for n, z in ((0, 0), (-1, 1), (1, 2), (-2, 3), (2, 4)):
        w = TC.Writer()
        w.zigzag(TC.I32, n)
        assert bytes(w.out) == bytes([z])
    # a field of id 1, type i32, value 3, then the stop byte: short form header 0x15
    assert TC.encode([(1, TC.I32, 3)]) == b"\x15\x06\x00"
    # an id jump of more than 15: the long form (type byte, zigzag id)
    assert TC.encode([(1, TC.TRUE, True), (20, TC.FALSE, False)]) == b"\x11\x02\x28\x00"


_SCALARS = {
    TC.I8: st.integers(-128, 127),
    TC.I16: st.integers(-(1 << 15), (1 << 15) - 1),
    TC.I32: st.integers(-(1 << 31), (1 << 31) - 1),
    TC.I64: st.integers(-(1 << 63), (1 << 63) - 1),
    TC.DOUBLE: st.binary(min_size=8, max_size=8),
    TC.BINARY: st.binary(max_size=40),
    TC.UUID: st.binary(min_size=16, max_size=16),
}


def _element(t: int, depth: int) -> st.SearchStrategy:
    if t in (TC.TRUE, TC.FALSE):
        return st.sampled_from([0, 1, 2])
    if t in _SCALARS:
        return _SCALARS[t]
    if t in (TC.LIST, TC.SET):
        return _list(depth + 1)
    if t == TC.MAP:
        return _map(depth + 1)
    return _struct(depth + 1)


def _types(depth: int) -> st.SearchStrategy[int]:
    leaf = [TC.TRUE, TC.I8, TC.I16, TC.I32, TC.I64, TC.DOUBLE, TC.BINARY, TC.UUID]
    return st.sampled_from(leaf + ([TC.LIST, TC.SET, TC.MAP, TC.STRUCT] if depth < 3 else []))


def _list(depth: int) -> st.SearchStrategy:
    return _types(depth).flatmap(lambda et: st.tuples(
        st.just(et), st.lists(_element(et, depth), max_size=20)))


def _map(depth: int) -> st.SearchStrategy:
    def pairs(kt: int, vt: int) -> st.SearchStrategy:
        return st.lists(st.tuples(_element(kt, depth), _element(vt, depth)), min_size=1,
                        max_size=5).map(lambda p: (kt, vt, p))
    return st.one_of(st.just((0, 0, [])), st.tuples(_types(depth), _types(depth)).flatmap(
        lambda kv: pairs(*kv)))


def _struct(depth: int = 0) -> st.SearchStrategy:
    def field(fid: int) -> st.SearchStrategy:
        return st.sampled_from([TC.TRUE, TC.FALSE, TC.I8, TC.I16, TC.I32, TC.I64, TC.DOUBLE,
                                TC.BINARY, TC.UUID] + ([TC.LIST, TC.SET, TC.MAP, TC.STRUCT]
                                                       if depth < 3 else [])).flatmap(
            lambda t: st.just((fid, t, t == TC.TRUE)) if t in (TC.TRUE, TC.FALSE) else
            _element(t, depth).map(lambda v: (fid, t, v)))
    # ids in any order, with gaps of more than 15 and negative ones (both header forms)
    return st.lists(st.integers(-40, 400), max_size=8).flatmap(
        lambda ids: st.tuples(*[field(i) for i in ids]).map(list))


@settings(max_examples=300, deadline=None)
@given(_struct())
def test_structs_round_trip(s):
    """Encoding then decoding gives the tree back, and encoding that the same bytes."""
    b = TC.encode(s)
    got, end = TC.decode(b)
    assert end == len(b)
    assert got == s
    assert TC.encode(got) == b


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_decode_or_say_where_they_stop(b):
    """Bytes that are not a struct raise ThriftError with an offset inside them, never
    anything else; what decodes can be encoded again."""
    try:
        s, end = TC.decode(b)
    except TC.ThriftError as e:
        assert 0 <= e.offset <= len(b)
        return
    assert 0 < end <= len(b)
    TC.encode(s)  # whatever decoded can be written


# ---------------------------------------------------------------------------------------------
# Parquet parts

_WORDS = ["", "a", "raid5", "g0", "spare", "data_loss", "rebuild_end", "ünï", "x" * 70]


def _column(field: pa.Field, n: int, rng: np.random.Generator, nulls: float) -> pa.Array:
    t = field.type
    if pa.types.is_dictionary(t) or pa.types.is_string(t):
        # few distinct values (dictionary pages) and some unique ones
        pool = _WORDS + [f"w{i}" for i in range(int(rng.integers(1, 50)))]
        v = pa.array([pool[i] for i in rng.integers(0, len(pool), n)], pa.string())
    elif pa.types.is_boolean(t):
        v = pa.array(rng.random(n) < rng.random())
    elif pa.types.is_floating(t):
        x = rng.normal(0, 1e3, n)
        special = rng.random(n)
        x[special < 0.05] = np.nan
        x[(special >= 0.05) & (special < 0.07)] = -0.0
        x[(special >= 0.07) & (special < 0.08)] = np.inf
        v = pa.array(x, t)
    else:
        info = np.iinfo(t.to_pandas_dtype())
        mode = rng.integers(0, 3)
        if mode == 0:  # the whole range
            x = rng.integers(info.min, info.max, n, endpoint=True, dtype=t.to_pandas_dtype())
        elif mode == 1:  # few values (dictionary encoding)
            x = rng.integers(0, min(5, info.max), n, endpoint=True).astype(t.to_pandas_dtype())
        else:  # ascending, as the run's times are
            x = np.cumsum(rng.integers(0, 100, n)).clip(0, info.max).astype(t.to_pandas_dtype())
        v = pa.array(x, t)
    if field.nullable and nulls and n:
        mask = rng.random(n) < nulls
        v = pa.array(v.to_pylist(), v.type, mask=mask)
    if pa.types.is_dictionary(t):
        v = v.dictionary_encode()
        v = v.cast(t)
    return v


def _table(schema: pa.Schema, n: int, seed: int, nulls: float) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table([_column(f, n, rng, nulls) for f in schema], schema=schema)


def _write(path: Path, t: pa.Table, groups: list[int], run: str | None = None,
           **options) -> Path:
    """``t`` as Parquet, in write calls (row groups) of ``groups`` rows and one of the rest:
    with the run folder's writer of ``run`` (traces/store.py run_parquet_writer), else zstd
    and ``options``."""
    writer = store.run_parquet_writer(path, run) if run else pq.ParquetWriter(
        path, t.schema, compression="zstd", **options)
    with writer as w:
        a = 0
        for g in groups:
            if a < t.num_rows:
                w.write_table(t.slice(a, g))
            a += g
        if a < t.num_rows:
            w.write_table(t.slice(a))
    return path


def _plain(rows: list) -> list:
    """Rows comparable with ==: NaN as a marker, -0.0 apart from 0.0."""
    def v(x):
        if isinstance(x, float):
            if math.isnan(x):
                return "NaN"
            return (x, math.copysign(1, x))
        return x
    return [tuple(v(x) for x in r) for r in rows]


def _rows(t: pa.Table) -> list:
    t = t.cast(pa.schema([pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type)
                                    else f.type) for f in t.schema]))
    return _plain(list(zip(*[c.to_pylist() for c in t.columns], strict=True)))


def _duck(path: Path) -> list:
    con = duckdb.connect()
    rows = con.execute(f"SELECT * EXCLUDE (file_row_number) FROM read_parquet('{path}', "
                       "file_row_number = true) ORDER BY file_row_number").fetchall()
    return _plain(rows)


def _stats(path: Path) -> list:
    """Per row group and column: rows, values and statistics as pyarrow reads them."""
    md = pq.ParquetFile(path).metadata
    out = []
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        for j in range(rg.num_columns):
            c = rg.column(j)
            s = c.statistics
            out.append((rg.num_rows, c.num_values, c.total_compressed_size,
                        c.total_uncompressed_size, c.encodings, c.compression,
                        str(s.to_dict()) if s is not None else None))
    return out


def _duck_stats(path: Path) -> list:
    con = duckdb.connect()
    return con.execute(
        "SELECT row_group_num_rows, column_id, num_values, stats_min, stats_max, "
        "stats_null_count, stats_min_value, stats_max_value, total_compressed_size, "
        f"min_is_exact, max_is_exact FROM parquet_metadata('{path}') "
        "ORDER BY row_group_id, column_id").fetchall()


@st.composite
def _parts(draw):
    name = draw(st.sampled_from(sorted(RUN_SCHEMAS)))
    k = draw(st.integers(1, 4))
    parts = []
    for _ in range(k):
        n = draw(st.integers(0, 300))
        cuts = draw(st.lists(st.integers(1, 120), max_size=5))
        parts.append((n, cuts, draw(st.integers(0, 1 << 30)),
                      draw(st.sampled_from([0.0, 0.3, 1.0]))))
    options = draw(st.sampled_from([
        {"run": name} if name in ("ios", "drive_ops") else {},  # a run folder's writer
        {},  # pyarrow's defaults: a dictionary for every column
        {"data_page_size": 64},  # many pages a column chunk
        {"use_dictionary": False, "data_page_version": "2.0"},
        {"write_page_checksum": True},
    ]))
    return name, parts, options


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(_parts())
def test_joined_file_reads_as_the_parts_concatenated(tmp_path_factory, case):
    """Every run schema, parts of any row counts (0 too), row groups and null patterns: pyarrow
    and DuckDB read the joined file as pa.concat_tables(parts); each row group keeps its
    rows, statistics, sizes and encodings (pyarrow's and DuckDB's view of the footer); the
    pages' checksums still hold where the parts have them."""
    name, specs, options = case
    d = tmp_path_factory.mktemp("join")
    schema = RUN_SCHEMAS[name]
    tables, paths = [], []
    for i, (n, cuts, seed, nulls) in enumerate(specs):
        t = _table(schema, n, seed, nulls)
        tables.append(t)
        paths.append(_write(d / f"p{i}.parquet", t, cuts, **options))
    out = d / "joined.parquet"
    assert PJ.join(paths, out) == sum(t.num_rows for t in tables)
    want = pa.concat_tables(tables)
    got = pq.read_table(out, page_checksum_verification=True)
    assert got.schema == schema
    assert got.schema.metadata == pq.read_schema(paths[0]).metadata
    assert _rows(got) == _rows(want)
    assert _duck(out) == _rows(want)
    assert _stats(out) == [s for p in paths for s in _stats(p)]
    joined_duck = _duck_stats(out)
    assert joined_duck == [s for p in paths for s in _duck_stats(p)]
    # each row group on its own, as a reader that skips the others sees it
    f = pq.ParquetFile(out)
    g = 0
    for p in paths:
        pf = pq.ParquetFile(p)
        for i in range(pf.metadata.num_row_groups):
            assert _rows(f.read_row_group(g)) == _rows(pf.read_row_group(i))
            g += 1
    assert g == f.metadata.num_row_groups


def test_bloom_filters_move_with_their_row_groups(tmp_path):
    """Parts with Bloom filters (they sit after the pages and hold no positions): DuckDB's
    probes of the joined file's row groups answer as the parts' do."""
    schema = RUN_SCHEMAS["ios"]
    paths = []
    for i, n in enumerate((500, 300, 700)):
        t = _table(schema, n, 10 + i, 0.0)
        paths.append(_write(tmp_path / f"p{i}.parquet", t, [200, 150],
                            bloom_filter_options={"sector": True, "request": True}))
    out = tmp_path / "j.parquet"
    PJ.join(paths, out)
    con = duckdb.connect()
    offsets = con.execute(f"SELECT count(*) FROM parquet_metadata('{out}') "
                          "WHERE bloom_filter_offset IS NOT NULL").fetchone()
    assert offsets is not None and offsets[0] > 0
    probes = [int(x) for x in pq.read_table(paths[1]).column("sector").to_numpy()[:20]] + [
        -1, 12345678901]
    for v in probes:
        got = con.execute(f"SELECT bloom_filter_excludes FROM parquet_bloom_probe('{out}', "
                          f"'sector', {v}) ORDER BY row_group_id").fetchall()
        want = [r for p in paths for r in con.execute(
            f"SELECT bloom_filter_excludes FROM parquet_bloom_probe('{p}', 'sector', {v}) "
            "ORDER BY row_group_id").fetchall()]
        assert got == want
    assert _rows(pq.read_table(out)) == _rows(pa.concat_tables(
        [pq.read_table(p) for p in paths]))


def test_truncate_takes_parts_back(tmp_path):
    """Append A, B, C; take B and C back; append C, B: the file is A, C, B."""
    schema = RUN_SCHEMAS["drive_ops"]
    ts = [_table(schema, n, s, 0.0) for n, s in ((100, 1), (50, 2), (80, 3))]
    ps = [_write(tmp_path / f"p{i}.parquet", t, [33], run="drive_ops") for i, t in enumerate(ts)]
    j = PJ.ParquetJoin(tmp_path / "j.parquet")
    for p in ps:
        j.append(p)
    j.truncate(1)
    assert j.parts == 1 and j.rows == 100
    j.append(ps[2])
    j.append(ps[1])
    assert j.close() == 230
    got = pq.read_table(tmp_path / "j.parquet")
    assert _rows(got) == _rows(pa.concat_tables([ts[0], ts[2], ts[1]]))
    assert _duck(tmp_path / "j.parquet") == _rows(got)


def _footer(path: Path) -> tuple[bytes, bytes]:
    b = path.read_bytes()
    n = struct.unpack("<I", b[-8:-4])[0]
    return b[:-8 - n], b[-8 - n:-8]


def _with_footer(path: Path, body: bytes, meta: TC.Struct) -> Path:
    f = TC.encode(meta)
    path.write_bytes(body + f + struct.pack("<I", len(f)) + b"PAR1")
    return path


def _groups(meta: TC.Struct) -> list:
    return next(v for fid, _t, v in meta if fid == 4)[1]


def test_ordinals_are_renumbered(tmp_path, monkeypatch):
    """Row groups that carry an ordinal (Arrow's writer gives none) are numbered in the
    joined file; past what an i16 holds the optional field is left out."""
    t = _table(RUN_SCHEMAS["ios"], 90, 5, 0.0)
    src = _write(tmp_path / "src.parquet", t, [30, 30])
    body, footer = _footer(src)
    meta, _ = TC.decode(footer)
    for i, rg in enumerate(_groups(meta)):
        rg.append((7, TC.I16, 100 + i))
    a = _with_footer(tmp_path / "a.parquet", body, meta)
    assert _rows(pq.read_table(a)) == _rows(t)
    out = tmp_path / "j.parquet"
    PJ.join([a, a], out)
    joined, _ = TC.decode(_footer(out)[1])
    assert [dict((f, v) for f, _t, v in rg).get(7) for rg in _groups(joined)] == list(range(6))
    monkeypatch.setattr(PJ, "_I16_MAX", 4)
    PJ.join([a, a], out)
    joined, _ = TC.decode(_footer(out)[1])
    assert [dict((f, v) for f, _t, v in rg).get(7) for rg in _groups(joined)] == \
        [0, 1, 2, 3, 4, None]
    assert _rows(pq.read_table(out)) == _rows(pa.concat_tables([t, t]))


# ---------------------------------------------------------------------------------------------
# parts the join refuses


def _one_line_naming(e: BlocklabError, part: Path) -> str:
    msg = str(e)
    assert "\n" not in msg and msg.startswith(f"{part}: "), msg
    return msg


def _refused(parts: list[Path], bad: Path, out: Path) -> str:
    with pytest.raises(BlocklabError) as e:
        PJ.join(parts, out)
    assert not out.exists()
    return _one_line_naming(e.value, bad)


def test_bad_parts_are_named(tmp_path):
    """Not Parquet, cut short, a page index, another schema, encrypted, a field the join does
    not know: a one-line error naming the part and the byte offset, and no joined file."""
    t = _table(RUN_SCHEMAS["ios"], 100, 1, 0.0)
    good = _write(tmp_path / "good.parquet", t, [40])
    out = tmp_path / "out.parquet"
    text = tmp_path / "text.parquet"
    text.write_text("request,arrival_ns\n1,2\n")
    assert "not a Parquet file" in _refused([good, text], text, out)
    short = tmp_path / "short.parquet"
    short.write_bytes(good.read_bytes()[:-3])
    assert "byte" in _refused([good, short], short, out)
    paged = _write(tmp_path / "paged.parquet", t, [40], write_page_index=True)
    assert "page index" in _refused([good, paged], paged, out)
    other = _write(tmp_path / "other.parquet", _table(RUN_SCHEMAS["drive_ops"], 10, 1, 0.0),
                   [5])
    msg = _refused([good, other], other, out)
    assert "schema differs" in msg and str(good) in msg
    body, footer = _footer(good)
    meta, _ = TC.decode(footer)
    enc = _with_footer(tmp_path / "enc.parquet", body, meta + [(8, TC.STRUCT, [])])
    assert "encrypted" in _refused([good, enc], enc, out)
    meta, _ = TC.decode(footer)
    cmeta = next(v for f, _t, v in _groups(meta)[0][0][2][1][0] if f == 3)
    cmeta.append((40, TC.I64, 4))
    unknown = _with_footer(tmp_path / "unknown.parquet", body, meta)
    assert "ColumnMetaData field 40" in _refused([good, unknown], unknown, out)
    meta, _ = TC.decode(footer)
    cmeta = next(v for f, _t, v in _groups(meta)[0][0][2][1][0] if f == 3)
    k = next(i for i, (f, _t, _v) in enumerate(cmeta) if f == 9)
    cmeta[k] = (9, TC.I64, len(body) + 10)
    beyond = _with_footer(tmp_path / "beyond.parquet", body, meta)
    assert "data_page_offset" in _refused([good, beyond], beyond, out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_damaged_footer_is_refused_by_name_or_joined(tmp_path_factory, data):
    """Any byte of a part's footer or tail changed: the join either refuses it with a
    one-line error naming it (and leaves no file), or the change was to a value the footer
    may hold and the joined file still reads, with the part's rows."""
    d = tmp_path_factory.mktemp("damaged")
    t = _table(RUN_SCHEMAS["ios"], 60, 3, 0.0)
    good = _write(d / "good.parquet", t, [25])
    b = bytearray(good.read_bytes())
    n = struct.unpack("<I", bytes(b[-8:-4]))[0]
    at = data.draw(st.integers(len(b) - 8 - n, len(b) - 1))
    b[at] ^= data.draw(st.integers(1, 255))
    bad = d / "bad.parquet"
    bad.write_bytes(bytes(b))
    out = d / "out.parquet"
    try:
        PJ.join([good, bad], out)
    except BlocklabError as e:
        _one_line_naming(e, bad)
        assert not out.exists()
        return
    # accepted: what pyarrow makes of the part, it makes of the joined file's second half
    try:
        part = pq.read_table(bad)
    except Exception:
        return  # the change was to a value only a reader checks (a page size, a codec...)
    assert _rows(pq.read_table(out).slice(60)) == _rows(part)


@pytest.mark.parametrize("name", ["ios", "drive_ops"])
def test_the_run_writer_encodings(tmp_path, name):
    """A run folder's writer (traces/store.py): the times and request numbers delta encoded,
    a dictionary only on the columns whose values repeat, statistics, no page index; as
    DuckDB reads the footer."""
    t = _table(RUN_SCHEMAS[name], 5000, 4, 0.0)
    p = _write(tmp_path / "r.parquet", t, [2000], run=name)
    assert _rows(pq.read_table(p)) == _rows(t)
    con = duckdb.connect()
    enc = dict(con.execute(f"SELECT path_in_schema, string_agg(DISTINCT encodings, ',') FROM "
                           f"parquet_metadata('{p}') GROUP BY 1").fetchall())
    delta = {c for c, e in enc.items() if "DELTA_BINARY_PACKED" in e}
    dictionary = {c for c, e in enc.items() if "DICTIONARY" in e}
    assert delta == set(store._RUN_DELTA[name])
    assert dictionary == set(store._RUN_DICT[name]) - {"cache_hit", "lost", "write"}  # RLE
    assert con.execute(f"SELECT count(*) FROM parquet_metadata('{p}') WHERE stats_min_value IS NULL "
                       "OR column_index_offset IS NOT NULL").fetchone() == (0,)
