"""The input formats, by name, in the order ``--format auto`` tries them."""

from __future__ import annotations

from blocklab.traces.errors import BlocklabError

from .base import Chunk, Format, ReadContext, without_cut_line

_MODULES = ["blktrace", "blkparse", "tracefs", "fio", "disksim", "csvs"]


def registry() -> dict[str, Format]:
    """Every format by name; the order is the sniffing order (most specific first)."""
    import importlib

    out: dict[str, Format] = {}
    for mod in _MODULES:
        m = importlib.import_module(f"{__name__}.{mod}")
        for fmt in getattr(m, "FORMATS", None) or [m.FORMAT]:
            out[fmt.name] = fmt
    return out


def get(name: str) -> Format:
    reg = registry()
    if name not in reg:
        raise BlocklabError(f"unknown format {name!r}; known: {', '.join(reg)} (or auto)")
    return reg[name]


def detect(head: bytes, path: str) -> Format:
    """The format of an input, by its first (decompressed) bytes. When no format recognises a
    short input whose last line has no newline, they judge it again without that line (it may
    be cut short): the reader then reports the line by its number, as with ``--format``. A
    format recognising the whole input always wins (the second look never changes what the
    first decides)."""
    for attempt in (head, without_cut_line(head)):
        if attempt is None:
            continue
        for fmt in registry().values():
            try:
                if fmt.sniff(attempt):
                    return fmt
            except Exception:  # a sniffer must never decide on an exception
                continue
    raise BlocklabError(f"{path}: unknown format (no reader recognises its content; use --format)")


__all__ = ["Chunk", "Format", "ReadContext", "registry", "get", "detect"]
