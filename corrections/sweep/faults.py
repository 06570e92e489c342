"""Fault injection for crash-replay tests: UNSAY_SWEEP_CRASH_AT=<point>:<page> SIGKILLs the sweep there.

settings.UNSAY_SWEEP_CRASH_AT, set in the environment of the real sweep processes the tests start."""

import logging
import os
import signal
import time

from django.conf import settings

log = logging.getLogger(__name__)


def crash_point():
    """UNSAY_SWEEP_CRASH_AT=<point>:<page>, e.g. before_commit:3 — SIGKILL ourselves there."""
    raw = settings.UNSAY_SWEEP_CRASH_AT
    if not raw:
        return None
    point, _, page = raw.partition(":")
    if point not in {"mid_page", "before_commit", "after_commit", "mid_notices"}:
        raise ValueError(f"UNSAY_SWEEP_CRASH_AT={raw!r}: unknown point {point!r}.")
    return point, int(page or 1)


def maybe_crash(point: str, page: int):
    target = crash_point()
    if target and target == (point, page):
        log.warning("UNSAY_SWEEP_CRASH_AT reached (%s:%d): killing this process", point, page)
        os.kill(os.getpid(), signal.SIGKILL)


def maybe_pause(page: int):
    """UNSAY_SWEEP_PAGE_DELAY=<seconds>: wait after each committed page (tests stop or kill a sweep mid-run)."""
    if settings.UNSAY_SWEEP_PAGE_DELAY:
        time.sleep(settings.UNSAY_SWEEP_PAGE_DELAY)
