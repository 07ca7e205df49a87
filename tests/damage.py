"""A Parquet page changed after it was written, as a bad copy or a failing disk changes one:
the tests of the CRC every page blocklab writes carries (test_bad_input, test_parallel_replay)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq


def flip_page_bytes(path: Path, column: str, row_group: int = 0, count: int = 64) -> int:
    """XOR ``count`` bytes in the middle of ``column``'s chunk of ``row_group`` (inside a
    page's data, past its header) with 0x5A; returns the chunk's data_page_offset."""
    md = pq.ParquetFile(path).metadata
    names = [md.row_group(row_group).column(i).path_in_schema for i in range(md.num_columns)]
    col = md.row_group(row_group).column(names.index(column))
    at = col.data_page_offset + col.total_compressed_size // 2
    data = bytearray(path.read_bytes())
    data[at:at + count] = bytes(b ^ 0x5A for b in data[at:at + count])
    path.write_bytes(bytes(data))
    return col.data_page_offset
