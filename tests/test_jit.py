"""The house ``@njit`` (kernels/_jit.py): a kernel called from another kernel with constant
arguments compiles once per plain signature, not once per constant, and computes what
Numba's own dispatcher computes. Compiled here without the disk cache: a kernel loaded from
the cache would not compile the one it calls, and there would be nothing to count."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from blocklab.kernels._jit import njit


def scale_or_shift(x, k, flag):
    return x * k if flag else x - k


def calls_mine(x):
    # the same callee with four different constants, and once with variables
    return (_mine(x, 0, True) + _mine(x, 1, False) + _mine(x, 2, True) + _mine(x, 3, True)
            + _mine(x, x, x > 0))


def calls_numba(x):
    return (_theirs(x, 0, True) + _theirs(x, 1, False) + _theirs(x, 2, True)
            + _theirs(x, 3, True) + _theirs(x, x, x > 0))


_mine = njit(cache=False)(scale_or_shift)
_caller = njit(cache=False)(calls_mine)
_theirs = numba.njit(scale_or_shift)
_caller_numba = numba.njit(calls_numba)


def test_constants_compile_once():
    for x in (5, -3):
        want = (scale_or_shift(x, 0, True) + scale_or_shift(x, 1, False) + scale_or_shift(x, 2, True)
                + scale_or_shift(x, 3, True) + scale_or_shift(x, x, x > 0))  # plain Python
        assert _caller(np.int64(x)) == _caller_numba(np.int64(x)) == want
    # Numba's own dispatcher compiled the callee once per constant (the waste this avoids) ...
    assert len(_theirs.signatures) >= 4
    # ... ours once: every constant typed as the plain int64 / bool it is
    assert [tuple(map(str, s)) for s in _mine.signatures] == [("int64", "int64", "bool")]


def test_inline_and_arrays_unchanged():
    """Inlined kernels and array arguments work as with Numba's dispatcher."""

    @njit(forceinline=True, cache=False)
    def add(a, i, v):
        a[i] += v

    @njit(cache=False)
    def fill(a):
        for i in range(a.shape[0]):
            add(a, i, 2)
        return a.sum()

    a = np.arange(5, dtype=np.int64)
    assert fill(a) == 20 and a.tolist() == [2, 3, 4, 5, 6]


def test_forceinline_is_inlined_by_llvm_and_not_inherited():
    """A ``forceinline=True`` kernel carries LLVM's alwaysinline attribute (LLVM inlines it
    where it is called); a kernel it calls, compiled first from inside it, does not inherit
    the flag (Numba's default would: kernels/_jit.py)."""

    @njit(cache=False)
    def heavy(a):
        s = 0
        for i in range(a.shape[0]):
            s += a[i] * i
        return s

    @njit(forceinline=True, cache=False)
    def small(a):
        return heavy(a) + 1

    @njit(cache=False)
    def top(a):
        return small(a) * 2

    a = np.arange(6, dtype=np.int64)
    assert top(a) == 2 * (sum(i * i for i in range(6)) + 1)

    def attrs(disp):
        (ir,) = disp.inspect_llvm().values()
        return [ln for ln in ir.splitlines() if ln.startswith("attributes #")]

    assert any("alwaysinline" in ln for ln in attrs(small))
    assert not any("alwaysinline" in ln for ln in attrs(heavy))
    assert not any("alwaysinline" in ln for ln in attrs(top))


@njit(cache=False)
def _twice(a, i):
    return 2 * a[i]


@njit(cache=False)
def total(a):
    s = 0
    for i in range(a.shape[0]):
        s += _twice(a, i)
    return s


def test_a_private_kernel_has_no_python_entry_and_refuses_a_call_from_python():
    """A kernel whose name starts with ``_`` is compiled without Python's wrappers (only
    kernels call it): kernels call it as before, and a call from Python is a TypeError, not
    a jump through a missing entry point."""
    a = np.arange(5, dtype=np.int64)
    assert total(a) == 2 * sum(range(5))
    with pytest.raises(TypeError, match="private kernel"):
        _twice(a, 1)
    (ir,) = _twice.inspect_llvm().values()
    assert "cpython" not in ir  # Numba names the wrapper's symbol after it ...
    (ir,) = total.inspect_llvm().values()
    assert "cpython" in ir  # ... which a public kernel has


def test_a_private_kernel_is_not_compiled_to_machine_code_and_its_callers_run_it():
    """A private kernel's library keeps its LLVM IR for its callers to inline, and gives the
    execution engine no machine code of its own (kernels/_jit.py ``_LinkOnlyLibrary``): its
    function is not among the engine's symbols, a public kernel's is."""
    a = np.arange(7, dtype=np.int64)
    assert total(a) == 2 * sum(range(7))
    (private,) = _twice.overloads.values()
    (public,) = total.overloads.values()
    engine = private.library.codegen._engine
    assert not engine.is_symbol_defined(private.fndesc.mangled_name)
    assert engine.is_symbol_defined(public.fndesc.mangled_name)
    assert private.fndesc.mangled_name in private.library.get_llvm_str()  # the code is kept


def test_noinline_keeps_a_private_kernel_out_of_line():
    """``@njit(noinline=True)`` keeps LLVM from inlining a private kernel (kernels/_jit.py:
    a rarely called helper, not copied into every caller): its caller calls it, where LLVM
    inlines the same small kernel without it. Public kernels have no use for it."""

    @njit(cache=False, noinline=True)
    def _cold(a, i):
        a[i] += 1

    @njit(cache=False)
    def _warm(a, i):
        a[i] += 1

    @njit(cache=False)
    def both(a):
        for i in range(a.shape[0]):
            _cold(a, i)
            _warm(a, i)

    a = np.zeros(4, dtype=np.int64)
    both(a)
    assert a.tolist() == [2, 2, 2, 2]
    (ir,) = both.inspect_llvm().values()
    calls = [ln for ln in ir.splitlines() if " call " in ln]
    (cold,) = _cold.overloads.values()
    (warm,) = _warm.overloads.values()
    assert any(cold.fndesc.mangled_name in ln for ln in calls)
    assert not any(warm.fndesc.mangled_name in ln for ln in calls)
    with pytest.raises(ValueError, match="private kernels"):
        njit(noinline=True)(both.py_func)


_CACHED = '''
import sys
import numpy as np
from blocklab.kernels._jit import njit

@njit
def _weigh(a, i):
    return a[i] * (i + 1)

@njit
def weighed(a):
    s = 0
    for i in range(a.shape[0]):
        s += _weigh(a, i)
    return s

@njit
def weighed_twice(a):
    s = 0
    for i in range(a.shape[0]):
        s += 2 * _weigh(a, i)
    return s

a = np.arange(9, dtype=np.int64)
want = sum(int(a[i]) * (i + 1) for i in range(9))
if sys.argv[1] == "first":
    assert weighed(a) == want
else:  # a new caller links the cached private kernel; the cached public one loads
    assert weighed_twice(a) == 2 * want and weighed(a) == want
    assert sum(_weigh.stats.cache_hits.values()) == 1, _weigh.stats
    assert sum(weighed.stats.cache_hits.values()) == 1, weighed.stats
    assert sum(weighed.stats.cache_misses.values()) == 0, weighed.stats
print("ok")
'''


def test_a_cached_private_kernel_loads_and_links_into_a_new_caller(tmp_path):
    """Through Numba's disk cache, in two fresh processes: the first compiles a public kernel
    and the private one it calls; the second loads both from the cache and compiles a new
    kernel that calls the private one (linked from its cached IR)."""
    import os
    import subprocess
    import sys

    (tmp_path / "cached_kernels.py").write_text(_CACHED)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    for step in ("first", "second"):
        r = subprocess.run([sys.executable, str(tmp_path / "cached_kernels.py"), step],
                           env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.strip() == "ok", (step, r.stdout, r.stderr)


# ---------------------------------------------------------------------------------------------
# a load from the cache without Numba's refresh (kernels/_jit.py ``_LoadAsIs``)

def _undefined_symbols(elf: bytes) -> set[str]:
    """The undefined symbols of an ELF64 little-endian object file (its .symtab): what the
    machine code calls and the loader must find. Read here, not with ``nm``, which a machine
    with only Python may lack."""
    import struct

    assert elf[:4] == b"\x7fELF" and elf[4] == 2 and elf[5] == 1, "ELF64 little-endian"
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize)
                for i in range(shnum)]
    out = set()
    for _name, typ, _fl, _addr, off, size, link, _info, _al, entsize in sections:
        if typ != 2:  # SHT_SYMTAB
            continue
        stroff = sections[link][4]
        for k in range(size // entsize):
            st_name, _info, _other, shndx = struct.unpack_from("<IBBH", elf, off + k * entsize)
            if shndx == 0 and st_name:
                end = elf.index(b"\0", stroff + st_name)
                out.add(elf[stroff + st_name:end].decode())
    return out


def _objects(obj: object, out: list[bytes]) -> None:
    if isinstance(obj, bytes | bytearray):
        if obj[:4] == b"\x7fELF":
            out.append(bytes(obj))
    elif isinstance(obj, tuple | list):
        for x in obj:
            _objects(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _objects(x, out)


RESOLVES = """
import json, sys
import blocklab.kernels._jit  # what a command imports before its first kernel
from llvmlite import binding as llvm
from numba.core.registry import cpu_target
from numba.core.runtime import rtsys
rtsys.initialize(cpu_target.target_context)  # all that _LoadAsIs.load_overload does first
missing = [s for s in json.loads(sys.stdin.read()) if not llvm.address_of_symbol(s)]
print(json.dumps({"missing": missing, "refreshed": "numba.np.arrayobj" in sys.modules}))
"""


def test_every_symbol_a_cached_kernel_calls_resolves_without_numbas_refresh():
    """Every undefined symbol in the object code of every kernel in the cache (``make setup``
    compiled them all) resolves in a process that has done only what a load from the cache
    does now: the runtime initialized, none of the registries the refresh would import. A
    kernel that needs one of the refresh's symbols (a string's ``hash()``: its secret is
    installed by ``numba.cpython.hashing``) fails here, not as a segmentation fault."""
    import io
    import json
    import pickle
    import subprocess
    import sys
    from pathlib import Path

    from blocklab.kernels._jit import cache_folder
    from blocklab.tools import warm

    if not warm.is_warm():
        pytest.skip("the kernel cache is not warm (make setup compiles it)")
    objects: list[bytes] = []
    for f in sorted(Path(cache_folder()).rglob("*.nbc")):
        stream = io.BytesIO(f.read_bytes())
        while stream.tell() < len(stream.getbuffer()):
            _objects(pickle.load(stream), objects)
    assert len(objects) > 100, len(objects)  # every family: hundreds of kernels
    symbols = set().union(*(_undefined_symbols(o) for o in objects))
    assert any(s.startswith("NRT_") for s in symbols)  # kernels that allocate: the runtime
    res = subprocess.run([sys.executable, "-c", RESOLVES], input=json.dumps(sorted(symbols)),
                         capture_output=True, text=True, check=True)
    got = json.loads(res.stdout)
    assert got == {"missing": [], "refreshed": False}, got


def test_a_kernel_loaded_from_the_cache_allocates_and_runs_in_a_fresh_process(tmp_path):
    """A cached kernel that allocates (Numba's runtime) runs in a new process that loads it
    without the refresh; the same kernel with Numba's own dispatcher gives the same array."""
    import subprocess
    import sys

    src = tmp_path / "alloc_kernel.py"
    src.write_text("import numpy as np\nfrom blocklab.kernels._jit import njit\n\n\n"
                   "@njit\ndef squares(n):\n    out = np.empty(n, np.int64)\n"
                   "    for i in range(n):\n        out[i] = i * i\n    return out\n")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import alloc_kernel as k; "
            "print(k.squares(5).tolist(), len(k.squares.stats.cache_hits))")
    env = {**__import__("os").environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    first = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env,
                           capture_output=True, text=True, check=True)
    again = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env,
                           capture_output=True, text=True, check=True)
    assert first.stdout.split() == ["[0,", "1,", "4,", "9,", "16]", "0"]  # compiled
    assert again.stdout.split() == ["[0,", "1,", "4,", "9,", "16]", "1"]  # loaded
