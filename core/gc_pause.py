"""Python's cyclic garbage collector, paused while one batch builds many short-lived objects.

Why: a sweep page builds hundreds of thousands of objects (rows, outcomes, fact versions). Each
burst of allocations sets off collections, and the older generations' ones walk every long-lived
object of the process (Django's, the sweep's fact cache) although the page's own objects are freed
by reference counting anyway. That walk was a sixth to a quarter of the sweep's Python CPU
(bench/sweep.py). Inside `collection_paused()` no automatic collection runs; cycles made there wait until
the block ends, so memory held back is at most one block's cyclic garbage.
"""

import contextlib
import gc
import threading

_lock = threading.Lock()
_holders = 0
_resume = False  # whether collection was on when the first holder paused it


@contextlib.contextmanager
def collection_paused():
    """No automatic cyclic collection inside the block. Blocks may nest and overlap across threads
    (two sweeps in one process): collection resumes when the last one ends, and only if it was on."""
    global _holders, _resume
    with _lock:
        if _holders == 0:
            _resume = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _resume:
                gc.enable()
