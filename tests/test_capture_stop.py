"""``blocklab capture``: what ends a capture (pipeline/capture.py ``_Stopper``). A capture once
hung on Ctrl-C for good, tracing on and dropping every event: the signal handler called
``Event.set`` while the main thread, inside that event's ``wait``, held its lock. Unlike
tests/test_capture.py these need no root, fio or loop device."""

from __future__ import annotations

import os
import signal
import threading
import time

from blocklab.pipeline.capture import _Stopper


def test_the_signal_handler_takes_no_lock_the_main_thread_may_hold():
    """The handler runs between two bytecodes of the main thread, which may be inside
    ``Event.wait`` with the event's lock held: the handler must return all the same (before
    the fix it waited for that lock forever)."""
    stopper = _Stopper(None)
    returned = threading.Event()

    def handle() -> None:
        stopper._handler(signal.SIGINT, None)
        returned.set()

    # the lock Event.wait holds around its waiter (threading.Condition's)
    with stopper.event._cond:  # type: ignore[attr-defined]
        threading.Thread(target=handle, daemon=True).start()
        assert returned.wait(5), "the signal handler blocked on the event's lock"
    assert stopper.stopping and stopper.reason == "SIGINT"


def test_a_signal_during_a_wait_stops_within_the_wait():
    """A real SIGINT while the capture's loop waits between two polls: the loop sees it at the
    end of that wait, the first reason is kept, and the caller's event (the API's ``stop``)
    is set, as when the handler set it itself."""
    waits = 0
    external = threading.Event()
    with _Stopper(external) as stopper:
        timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        t0 = time.monotonic()
        try:
            while not stopper.stopping and time.monotonic() - t0 < 10:
                stopper.wait(0.02)
                waits += 1
        finally:
            timer.cancel()
        assert external.is_set()  # (before stop() below, which sets it in any case)
        stopper.stop("max-size")  # a later reason does not replace the signal's
    assert stopper.stopping and stopper.reason == "SIGINT"
    assert waits >= 2
    assert signal.getsignal(signal.SIGINT) is not stopper._handler  # restored on exit


def test_the_callers_event_stops_it():
    """The API's stop event (set from another thread) ends the wait itself."""
    external = threading.Event()
    stopper = _Stopper(external)
    assert not stopper.stopping
    threading.Timer(0.02, external.set).start()
    stopper.wait(600)
    assert stopper.stopping and stopper.reason is None
