"""The one house @njit decorator: every kernel in blocklab is compiled with these options.

- cache=True: compiled code is kept on disk, so CI and every later run skip the compile, which
  costs more than most test inputs take to process. The folder is NUMBA_CACHE_DIR (or the
  virtual environment's ``numba-cache``, or ~/.cache/blocklab/numba outside one) / a hash of
  all kernel sources: see ``_cache_dir`` and ``_default_base``.
- nogil=True: kernels release the GIL, so ingest can decompress/write in other threads.
- error_model="numpy": division by zero gives inf/nan instead of a Python-style check on every
  division in hot loops; kernels validate their inputs explicitly instead.
- boundscheck stays off (the default); the tests run the kernels against plain-Python references.

``@njit(nrt=False)`` compiles a kernel without Numba's reference counting. Use it for kernels
that never allocate (they fill arrays the caller allocated, as STYLE asks): with reference
counting on, every call of a helper that takes arrays inside a loop increments and decrements
the arrays' reference counts through out-of-line atomic calls, which the refcount pruning pass
cannot remove across loops. Measured on the pairing kernel: 190 ns per event with it, a few tens
without. A kernel compiled this way must not create arrays (np.empty, argsort, ...).

A kernel that another kernel calls is compiled once per argument types, and Numba types a
constant argument as its own literal type (``Literal[int](0)``), not ``int64``: a call
``_job_ops(W, j, 0, now, ncand)`` and a call ``_job_ops(W, j, 1, now, ncand)`` compiled the
function (and every function it calls) twice more than needed. Our dispatcher types a call's
constants as their plain types, so each kernel compiles once per real signature. Measured on
the replay kernels from an empty cache (``python -m blocklab.tools.warm``): 39 compiles, 18
of them such duplicates (``_job_ops`` four times, the HDD ``service`` and ``_ra_bus`` twice, a
RAID-6 planner six times), 466 s; without them 297 s (same machine, same day).

A small helper is marked ``@njit(forceinline=True)``: LLVM inlines it at every call site (its
``alwaysinline`` attribute), after Numba has typed and lowered it once, for its one signature.
Numba's own ``inline="always"``, which this codebase used before, inlines at the level of
Numba's IR instead: every call site gets a copy of the callee's IR (and of everything it
inlines) that is typed and lowered again, so compile time grew much faster than the code. On
the replay kernels from an empty cache (``python -m blocklab.tools.warm``, same machine, same
hour): 157 s with ``inline="always"``, 53 s with ``forceinline=True``, and the kernels run as
fast (replay throughput within 2-5 %, the same results to the last bit); without either
(plain calls, LLVM left to decide) 43 s but replay 2.4 times slower, because LLVM's inliner
declines most of these helpers (each array argument is passed as seven scalars). The house
options set ``forceinline=False`` explicitly: Numba lets a kernel that does not say inherit the
flag from the kernel that called it first, which would inline a heavy helper (``_to_drives``)
into the small one that calls it. ``kernels/engine/loop.py``'s event loop still calls its
heavy helpers from one place each (``_to_drives``, ``_finish``): every inlined copy is code
LLVM optimizes again.

A private kernel (its name starts with ``_``) is compiled without the two wrappers Numba adds
so that Python can call a kernel (the CPython and the C-callable entry points): only kernels
call it, and the wrappers were a sixth of the replay kernels' compile (53 s -> 44 s, the same
code run). Called from Python, Numba would jump to a missing wrapper and crash the process, so
such a kernel's dispatcher (``_Private``) refuses the call with a TypeError instead. A kernel
the pipeline or a test calls has a public name.

Nor is a private kernel turned into machine code: Numba generates machine code for every
kernel it compiles, but a private kernel's only ever runs inlined into its callers (which
link its optimized LLVM IR and generate their own), so its library (``_LinkOnlyLibrary``)
gives the execution engine a stub holding its environment globals and keeps the IR for its
callers; the disk cache holds both, in Numba's own format. The machine code of the 130-odd
private replay kernels, each with its callees inlined, was a quarter of their compile: the
replay engine from an empty cache 42 -> 31-33 s, every family (``python -m
blocklab.tools.warm -j 1``) 61 -> 51 s, the same machine code for the public kernels (the
bench cases' results the same to the last bit, the same speed).

Nor is a private kernel's code optimized on its own: only its functions are (LLVM's function
passes, as Numba runs them on every function it lowers), and the module passes, which inline
and optimize across functions, run once, in the public kernel that links it. Before, every
private kernel ran them over itself and everything it had linked, and its caller ran them
again over the same code inlined: the engine's code was optimized once per level of its call
tree (the event loop is ten deep), and module passes were half of every LLVM second. LLVM's
module pipeline works bottom up over the call graph, simplifying a callee before it decides
whether to inline it, so the public kernel's machine code is that of the code optimized as
one module (the bench cases' results the same to the last bit). Measured in CPU seconds, one
process from an empty cache, the HDD model first (as the warm's second process leaves it),
alternated on a busy machine: the replay engine's family 65-68 -> 43-45 s. One
helper then needs telling: ``@njit(noinline=True)`` keeps a rarely called kernel out of line
(LLVM's ``noinline``). LLVM's inliner weighs a callee before the loop vectorizer has grown
it: the drive statistics' ``_fit``, whose loops were vectorized when it was optimized alone
(then too big to inline), was copied into the seven places the engine calls it (through the
inlined ``_count``), each copy vectorized again (the event loop's code 48 k -> 63 k LLVM
instructions, its machine code 3.6 -> 6.2 s to generate).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import numba
from llvmlite import binding as llvm
from numba.core import caching, codegen, compiler, registry, types
from numba.core.runtime import rtsys


def _cache_dir() -> str:
    """A cache folder named after a hash of every kernel source file.

    Numba keys a cached kernel on its own file only: a kernel that calls (and so compiles in)
    a helper from another module would keep running the helper's old code after that module
    changed. Keying the whole folder on all kernel sources makes any change start afresh.
    """
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(here.rglob("*.py")):
        h.update(f.relative_to(here).as_posix().encode())
        h.update(f.read_bytes())
    base = os.environ.get("NUMBA_CACHE_DIR") or _default_base()
    return os.path.join(base, h.hexdigest()[:16])


def _own(folder: str) -> bool:
    """Whether this user owns ``folder`` and may write it: root (``sudo blocklab capture``)
    may write a user's environment, but the kernels it compiled there would be root's, and
    the user's next compile into that folder would fail; root keeps its own cache."""
    try:
        return os.stat(folder).st_uid == os.geteuid() and os.access(folder, os.W_OK)
    except OSError:
        return False


def _default_base() -> str:
    """Where kernels are cached when NUMBA_CACHE_DIR does not say: in the virtual environment
    blocklab runs from (``.venv/numba-cache``), when it has one that this user owns, else
    in the user's cache folder (``~/.cache/blocklab/numba``).

    The environment's own folder is what ``make setup`` fills: a ``blocklab`` started from
    that environment any other way (``.venv/bin/blocklab``, an activated environment, a
    script) then finds every kernel compiled. Before, only ``make`` pointed Numba at it, and a
    command started by hand compiled every kernel again into the user's folder (measured: a
    1 M-request replay with a failure, run from a script after ``make setup``, 45 s against
    2 s). Two installs of different sources never share a folder: it is keyed on them."""
    if sys.prefix != sys.base_prefix and _own(sys.prefix):
        return os.path.join(sys.prefix, "numba-cache")
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                        "blocklab", "numba")


numba.config.CACHE_DIR = _cache_dir()

_OPTIONS = dict(cache=True, nogil=True, error_model="numpy", forceinline=False)


class _Kernel(registry.CPUDispatcher):
    """Numba's CPU dispatcher, but a call from another kernel is typed with the plain types of
    its constant arguments (``int64``, ``bool``), not their literal types: one compile per
    signature, not one per constant (see the module docstring)."""

    def get_call_template(self, args, kws):
        return super().get_call_template(tuple(types.unliteral(a) for a in args),
                                         {k: types.unliteral(v) for k, v in kws.items()})


class _LinkOnlyLibrary(codegen.JITCodeLibrary):
    """The compiled code of a private kernel: its LLVM IR, kept (and cached) to be linked and
    inlined into the kernels that call it, and neither optimized as a module nor turned into
    machine code of its own (see the module docstring). Numba would generate machine code for
    every library it finalizes, though nothing can run a private kernel's: its callers carry
    an inlined copy.

    Finalizing gives the execution engine a stub module holding only the library's
    environment globals (``_ZN08NumbaEnv...``), which Numba writes the kernel's environment
    into after a compile and after a load from the cache; the full module is what a caller
    links (Numba's ``_get_module_for_linking``: its external functions become
    ``linkonce_odr``). The cache holds the stub's object code and the full module's bitcode,
    Numba's own format for a library, so a load from the cache is Numba's own code path."""

    noinline = False  # ``@njit(noinline=True)``: set by ``_LinkOnlyCompiler``

    def _finalize_final_module(self) -> None:
        full = self._final_module
        self._finalize_dynamic_globals()  # read on the full module: Numba's cache refuses
        self._verify_declare_only_symbols()  # a kernel with dynamic globals
        shared = full.clone()
        for fn in shared.functions:
            if not fn.is_declaration and fn.linkage == llvm.Linkage.external:
                fn.linkage = "linkonce_odr"
        self._shared_module = shared
        stub = str(self._codegen._create_empty_module(self.name))
        stub += "".join(f"\n{gv}" for gv in full.global_variables
                        if gv.name.startswith("_ZN08NumbaEnv"))
        self._final_module = llvm.parse_assembly(stub)
        self._final_module.name = full.name
        super()._finalize_final_module()

    def add_ir_module(self, ir_module) -> None:  # type: ignore[no-untyped-def]
        if self.noinline:  # the kernel's own functions (a private kernel has no wrappers)
            for fn in ir_module.functions:
                if not fn.is_declaration:
                    fn.attributes.add("noinline")
        super().add_ir_module(ir_module)

    def _optimize_final_module(self) -> None:
        """Nothing: the public kernels that link this library optimize it, inlined where it
        is called (see the module docstring); its functions were optimized as they were
        added (``add_ir_module``)."""

    def get_llvm_str(self) -> str:  # ``inspect_llvm()``: the kernel's code, not the stub
        return str(self._shared_module)

    def get_asm_str(self) -> str:  # ``inspect_asm()``: the same, had it been compiled alone
        return str(self._codegen._tm.emit_assembly(self._shared_module))


class _LinkOnlyCompiler(compiler.Compiler):
    """Numba's compiler, lowering into a ``_LinkOnlyLibrary``: for private kernels."""

    def compile_extra(self, func):  # type: ignore[no-untyped-def]
        if self.state.library is None:
            library = _LinkOnlyLibrary(self.state.targetctx.codegen(), func.__qualname__)
            library.enable_object_caching()  # as Numba's lowering does for its own libraries
            library.noinline = getattr(func, _NOINLINE, False)
            self.state.library = library
        return super().compile_extra(func)


class _LoadAsIs(caching.FunctionCache):
    """Numba's cache of a kernel, but a load does not first refresh the target context.

    Numba's ``Cache.load_overload`` calls ``target_context.refresh()`` before every load: the
    first one in a process imports and installs every registry of lowering and typing
    implementations (``numba.np.arrayobj``, ``numba.cpython.unicode``, ... 255 of them), 0.27 s
    of a 0.66 s ingest of 1,000 requests (``cProfile``: ``base.py refresh``, under
    ``caching.py load_overload``). A cached kernel needs none of them to load: its machine
    code and environment are loaded as they were saved (``CompileResult._rebuild``). What its
    machine code needs is every symbol it calls: the CPython API and libc/libm (the process's
    own), Numba's C helpers (``numba_*``: installed when the target context is made) and
    Numba's runtime (``NRT_*``: installed by ``rtsys.initialize``, which the refresh is where
    Numba calls it; without it a kernel that allocates jumps to address 0). So the load
    initializes the runtime and nothing else. tests/test_jit.py reads every undefined symbol
    of every warmed kernel's object code and checks that each resolves in a process that has
    done only this: a kernel that needs another of the refresh's symbols (``hash()`` of a
    string installs its secret there) fails it. A kernel that is not in the cache is
    compiled, and the compiler refreshes the contexts itself (``compiler.compile_extra``), so
    typing and lowering see every registry as before."""

    def load_overload(self, sig, target_context):  # type: ignore[no-untyped-def]
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)
        return None  # the guard swallowed an I/O error: compile instead, as Numba does


def _load_as_is(disp):  # type: ignore[no-untyped-def]
    if type(disp._cache) is caching.FunctionCache:
        disp._cache.__class__ = _LoadAsIs
    return disp


class _Private(_Kernel):
    """A private kernel, compiled without the wrappers that let Python call it (Numba would
    call through a missing entry point): a call from Python is refused instead."""

    def __call__(self, *args, **kwargs):
        raise TypeError(f"{self.py_func.__module__}.{self.py_func.__name__} is a private "
                        "kernel, which only kernels can call (kernels/_jit.py)")


#: The attribute ``@njit(noinline=True)`` sets on a private kernel's Python function, which
#: its compiler (``_LinkOnlyCompiler``) reads.
_NOINLINE = "_blocklab_noinline"


def njit(*args, **kwargs):
    """``numba.njit`` with the house options; usable as ``@njit`` or ``@njit(forceinline=True)``.
    ``noinline=True`` (private kernels only) keeps LLVM from inlining the kernel."""
    opts = dict(_OPTIONS)
    if not kwargs.pop("nrt", True):
        opts["_nrt"] = False
    noinline = kwargs.pop("noinline", False)
    opts.update(kwargs)

    def make(func):
        if noinline:
            if not func.__name__.startswith("_"):
                raise ValueError(f"{func.__name__}: noinline=True is for private kernels")
            setattr(func, _NOINLINE, True)
        if func.__name__.startswith("_"):
            # only kernels call it: no wrappers for Python (see the module docstring)
            disp = numba.njit(**opts, no_cpython_wrapper=True, no_cfunc_wrapper=True,
                              pipeline_class=_LinkOnlyCompiler)(func)
            disp.__class__ = _Private
            return _load_as_is(disp)
        disp = numba.njit(**opts)(func)
        disp.__class__ = _Kernel  # (the same object layout: only the typing of calls changes)
        return _load_as_is(disp)

    if args and callable(args[0]):
        return make(args[0])
    if args:  # explicit signatures: Numba's own dispatcher
        return numba.njit(*args, **opts)
    return make


def cache_folder() -> str:
    """The folder compiled kernels are cached in (keyed on the kernel sources: ``_cache_dir``),
    for the pipeline's warm-up stamp (tools/warm.py); the pipeline does not import Numba."""
    return str(numba.config.CACHE_DIR)


def use_cache_folder(folder: str) -> None:
    """Cache kernels in ``folder`` exactly (a second compiling process of tools/warm.py, which
    must fill its parent's folder). Only kernels defined after this call use it."""
    numba.config.CACHE_DIR = folder
