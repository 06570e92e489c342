"""Graceful stop: SIGTERM asks a long run (a sweep, an ingest) to finish the page in flight and hand
the rest back, instead of dying mid-page.

    with stop_on_sigterm():          # manage.py sweep / ingest_recalls; Celery pool processes get
        ...                          # the same handler at start (unsay_site/celery.py)
    if requested(): raise HandedBack(...)   # checked by the run loops between pages

A second SIGTERM (or SIGINT) is not softened: the default behaviour comes back after the first.
"""

import contextlib
import logging
import signal
import threading

log = logging.getLogger(__name__)

_stop = threading.Event()


class HandedBack(Exception):  # noqa: N818 - what happened, not an error
    """A run stopped on request between pages; what it did is committed, the rest is left for the next run."""


def requested() -> bool:
    return _stop.is_set()


def request_stop(reason: str = "requested") -> None:
    if not _stop.is_set():
        log.warning("stop %s: finishing the page in flight, then handing the rest back", reason)
    _stop.set()


def clear() -> None:
    _stop.clear()


def _on_sigterm(signum, frame):
    request_stop(f"on {signal.Signals(signum).name}")
    # A second SIGTERM stops at once (default action), as an operator who insists expects.
    signal.signal(signum, signal.SIG_DFL)


def install_sigterm_handler() -> None:
    """For a process whose SIGTERM should mean "finish the page and stop" (Celery pool processes)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


@contextlib.contextmanager
def stop_on_sigterm():
    """Within the block SIGTERM requests a stop between pages instead of killing the process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        clear()
