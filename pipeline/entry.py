"""The ``blocklab`` console script's entry point: a stop while Python imports the command.

Importing the CLI (Typer, NumPy, pyarrow, the command modules) takes a few tenths of a second
before ``blocklab.pipeline.cli.main`` installs its signal handlers. A Ctrl-C there printed a
``KeyboardInterrupt`` traceback from whichever import it cut, and a SIGTERM or SIGHUP killed
the process without a word. This module is imported first (``blocklab.pipeline`` itself
imports nothing), so its handlers cover that window: nothing has been opened or written yet,
and the process says so in one line and exits at once with 128 + the signal, as a stopped
command does. ``main`` replaces them with the command's own handlers as it starts. A signal
the parent ignores (``nohup``'s SIGHUP) stays ignored.
"""

from __future__ import annotations

import os
import signal

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _stopped_while_starting(signum: int, _frame: object) -> None:
    os.write(2, f"blocklab: stopped by {signal.Signals(signum).name} while starting; "
                "nothing was written\n".encode())
    os._exit(128 + signum)  # no clean-up to run: no command has started


def main() -> None:
    for s in _SIGNALS:
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, _stopped_while_starting)
    from blocklab.pipeline.cli import main as command

    command()
