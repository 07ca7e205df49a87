"""Errors meant for people: what was wrong, in which file, at which line or byte offset."""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with every control byte shown as ``\\xNN``: a damaged file's raw bytes in a
    library's words ("don't know what type: \\x0f"), an escape in a file's name, are not sent
    to the terminal."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


class BlocklabError(Exception):
    """A failure the CLI reports as one line and exit status 2 (bad input, bad options)."""


class BadInput(BlocklabError):
    """Bad input data at a known place.

    Parameters
    ----------
    path : the input file's name.
    message : what was expected and what was found.
    line : 1-based line number, for text inputs.
    offset : byte offset from the start of the (decompressed) input, for binary inputs.
    """

    def __init__(
        self, path: str, message: str, *, line: int | None = None, offset: int | None = None
    ):
        self.path = path
        self.line = line
        self.offset = offset
        self.message = message
        where = path
        if line is not None:
            where += f":{line}"
        elif offset is not None:
            where += f": byte {offset}"
        super().__init__(f"{where}: {message}")
