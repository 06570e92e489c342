"""core.gc_pause: the cyclic collector is off inside the block and back as it was after it, across
nesting, overlapping threads and exceptions; and a sweep page runs inside it."""

import gc
import threading

import pytest

from core.gc_pause import collection_paused


@pytest.fixture(autouse=True)
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_off_inside_back_on_after_even_when_the_block_raises():
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block still holds it
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collection_paused():
        raise RuntimeError("the page failed")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    with collection_paused():
        pass
    assert not gc.isenabled()


def test_overlapping_threads_resume_collection_only_when_the_last_leaves():
    entered, release_first, first_done = threading.Event(), threading.Event(), threading.Event()
    seen = []

    def first():
        with collection_paused():
            entered.set()
            release_first.wait(5)
        first_done.set()

    thread = threading.Thread(target=first)
    thread.start()
    assert entered.wait(5)
    with collection_paused():
        release_first.set()
        assert first_done.wait(5)
        seen.append(gc.isenabled())  # the first thread left; this block still holds it
    thread.join(5)
    assert seen == [False] and gc.isenabled()


def test_an_unreachable_cycle_made_inside_is_collected_after():
    import weakref

    class Node:
        pass

    with collection_paused():
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        assert gone() is not None  # a cycle: reference counting alone does not free it
    gc.collect()
    assert gone() is None
