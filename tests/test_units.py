"""Sizes: one grammar (traces/units.py) for every option and key that takes one, checked against
the IEC and SI definitions written out here, and the same text giving the same bytes wherever
it is written (the array file read "4G" as 4e9 bytes where `cache mrc` read 4 GiB)."""

from __future__ import annotations

import tomllib
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blocklab.pipeline.capture import parse_size as capture_size
from blocklab.pipeline.model.config import MAX_CACHE_LINES, ConfigError, parse_array
from blocklab.pipeline.mrc import parse_size as mrc_size
from blocklab.traces.errors import BlocklabError
from blocklab.traces.synth import parse_size as synth_size
from blocklab.traces.units import parse_bytes

# IEC 80000-13 binary prefixes, SI decimal ones; one letter is binary, as fio and IOR read it
KIBI = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
KILO = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15}
REFERENCE = {"": 1, "B": 1, "s": 512}
for _p in KIBI:
    for spelled in (_p, _p.upper()):
        REFERENCE[spelled] = REFERENCE[spelled + "iB"] = REFERENCE[spelled + "ib"] = KIBI[_p]
        REFERENCE[spelled + "B"] = REFERENCE[spelled + "b"] = KILO[_p]


@given(st.integers(0, 10**6), st.sampled_from(sorted(REFERENCE)), st.booleans())
def test_a_whole_number_with_any_unit(n, unit, space):
    assert parse_bytes(f"{n}{' ' if space else ''}{unit}") == n * REFERENCE[unit]


@given(st.integers(0, 10**6), st.integers(1, 4), st.sampled_from(sorted(REFERENCE)))
def test_a_fraction_is_taken_when_the_bytes_are_whole(whole, places, unit):
    text = f"{whole / 10**places:.{places}f}"
    exact = Fraction(text) * REFERENCE[unit]
    if exact.denominator == 1:
        assert parse_bytes(text + unit) == exact
    else:
        with pytest.raises(ValueError, match="not a whole number of bytes"):
            parse_bytes(text + unit)


def test_what_is_not_a_size():
    for bad in ("", "k", "1e9", "0x10", "4 k B", "--4k", "4.k.B", "4k4"):
        with pytest.raises(ValueError, match="expected a size"):
            parse_bytes(bad)
    for bad, unit in (("100EiB", "EiB"), ("4XB", "XB"), ("4KIBB", "KIBB"), ("4 parsecs", "parsecs")):
        with pytest.raises(ValueError, match=f"unknown size unit '{unit}' .*P or PiB, PB"):
            parse_bytes(bad)
    assert parse_bytes("-4k") == -4096  # the sign is the caller's to refuse, in its words


def _array_size(key: str, text: str) -> int:
    toml = ('[[group]]\nname = "a"\nlayout = "raid5"\nwidth = 5\nstripe_unit = "64KiB"\n'
            'drive = "atlas10k"\n')
    if key == "stripe_unit":
        toml = toml.replace('"64KiB"', f'"{text}"')
        return parse_array(tomllib.loads(toml), Path("array.toml")).groups[0].stripe_unit_bytes
    toml += f'[controller]\ncache = "{text}"\n'
    return parse_array(tomllib.loads(toml), Path("array.toml")).controller.cache_bytes


@pytest.mark.parametrize("text", ["64k", "64K", "1M", "2G", "512KiB", "1.5GiB", "4096", "2048s",
                                  "1GB", "100GiB", "0.5PB"])
def test_the_same_text_is_the_same_bytes_everywhere(text):
    want = parse_bytes(text)
    got = {"synth": synth_size(text, "--transfer-size"), "cache mrc": mrc_size(text, "--sizes"),
           "capture": capture_size(text)}
    if want // (32 << 10) <= MAX_CACHE_LINES:  # (a larger cache is refused: test_config)
        got["array cache"] = _array_size("cache", text)
    else:
        with pytest.raises(ConfigError, match="controller.cache: at most"):
            _array_size("cache", text)
    if want % 512 == 0:
        got["array stripe_unit"] = _array_size("stripe_unit", text)
    assert set(got.values()) == {want}, got


def test_each_caller_names_its_option_or_key():
    with pytest.raises(BlocklabError, match=r"^--transfer-size: unknown size unit 'parsecs'"):
        synth_size("4 parsecs", "--transfer-size")
    with pytest.raises(BlocklabError, match=r"^--sizes 4 parsecs: unknown size unit"):
        mrc_size("4 parsecs", "--sizes")
    with pytest.raises(BlocklabError, match=r"^--max-size '4 parsecs': unknown size unit"):
        capture_size("4 parsecs")
    with pytest.raises(ConfigError, match=r"controller\.cache: .*not a whole number of bytes"):
        _array_size("cache", "1.3KiB")  # (was truncated to 1331 bytes)
    for call in (lambda: mrc_size("-4k", "--sizes"), lambda: capture_size("0k")):
        with pytest.raises(BlocklabError, match="above 0"):
            call()
