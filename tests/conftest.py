"""Test session setup: the test profile (hashing embeddings allowed, fast hasher) is set before
Django loads; the embedded PostgreSQL starts on the session's first database connection
(unsay_site.embedded_backend)."""

import os

os.environ.setdefault("UNSAY_PROFILE", "test")

import pytest  # noqa: E402

# --- Transactional tests' teardown ------------------------------------------------------------------
# Django ends every transaction=True test with `flush`: a TRUNCATE of every table, then post_migrate,
# which rebuilds content types, permissions and our groups (unsay_site.apps) -- about 0.4 s a test,
# half of it post_migrate. Here the teardown empties only the tables that hold rows and keeps the
# rows post_migrate would only write again, so long as they are as the migrated database had them;
# when a test changed them, the teardown is Django's own flush, post_migrate included.

POST_MIGRATE_TABLES = ("django_content_type", "auth_permission", "auth_group", "auth_group_permissions")
POST_MIGRATE_FINGERPRINT = """
    SELECT md5(coalesce(string_agg(row, '|' ORDER BY row), '')) FROM (
        SELECT concat_ws(':', 'ct', id, app_label, model) FROM django_content_type
        UNION ALL SELECT concat_ws(':', 'p', id, content_type_id, codename, name) FROM auth_permission
        UNION ALL SELECT concat_ws(':', 'g', id, name) FROM auth_group
        UNION ALL SELECT concat_ws(':', 'gp', group_id, permission_id) FROM auth_group_permissions) AS rows (row)"""
_migrated_state = {}


def _post_migrate_fingerprint(connection):
    with connection.cursor() as cursor:
        cursor.execute(POST_MIGRATE_FINGERPRINT)
        return cursor.fetchone()[0]


def _empty_tables_holding_rows(connection) -> bool:
    """Empty the tables that hold rows, as flush would (no sequence reset, no row trigger), keeping
    the post_migrate tables. False, having emptied nothing, when those differ from the migrated state."""
    from django.db import transaction

    if _post_migrate_fingerprint(connection) != _migrated_state.get(connection.alias):
        return False
    quote = connection.ops.quote_name
    tables = [name for name in connection.introspection.django_table_names(only_existing=True, include_views=False)
              if name not in POST_MIGRATE_TABLES]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(f"(SELECT %s FROM {quote(name)} LIMIT 1)" for name in tables), tables)
        holding = [row[0] for row in cursor.fetchall()]
    if not holding:
        return True
    if _may_skip_triggers(connection):
        # DELETE with the session a replica's: no trigger fires (neither the never-deleted guards nor the
        # foreign-key checks), and every table holding a row is emptied, so no reference is left dangling.
        # A TRUNCATE ... CASCADE made a new file for each of these tables, every table referencing them
        # and all their indexes: about 0.2 s a test.
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = replica")
            for name in holding:
                cursor.execute(f"DELETE FROM {quote(name)}")
        return True
    with connection.cursor() as cursor:
        # CASCADE reaches only tables that reference these (empty ones); no post_migrate table
        # references a table emptied here.
        cursor.execute(f"TRUNCATE {', '.join(quote(name) for name in holding)} CASCADE")
    return True


_skips_triggers = {}


def _may_skip_triggers(connection) -> bool:
    """PostgreSQL (not CockroachDB) as a superuser, who may set session_replication_role."""
    if connection.alias not in _skips_triggers:
        allowed = connection.vendor == "postgresql" and "cockroach" not in connection.settings_dict["ENGINE"]
        if allowed:
            with connection.cursor() as cursor:
                cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
                allowed = bool(cursor.fetchone()[0])
        _skips_triggers[connection.alias] = allowed
    return _skips_triggers[connection.alias]


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, and the faster teardown for its transactional tests."""
    from django.db import connections
    from django.test import TransactionTestCase

    flush = TransactionTestCase._fixture_teardown

    def remember(alias):
        _migrated_state[alias] = _post_migrate_fingerprint(connections[alias])

    def fixture_teardown(self):
        aliases = list(self._databases_names(include_mirrors=False))
        if all(_empty_tables_holding_rows(connections[alias]) for alias in aliases):
            return
        flush(self)
        for alias in aliases:
            remember(alias)

    with django_db_blocker.unblock():
        for alias in connections:
            remember(alias)
    TransactionTestCase._fixture_teardown = fixture_teardown
    yield
    TransactionTestCase._fixture_teardown = flush


@pytest.fixture
def hashing_embeddings():
    """A fresh hashing provider whose call counter starts at zero."""
    from django.conf import settings

    from memory.embeddings import HashingEmbedding, reset_provider

    provider = HashingEmbedding(settings.UNSAY_EMBEDDING_DIM)
    reset_provider(provider)
    yield provider
    reset_provider(None)


# `slow` modules whose real processes touch nothing but their own xdist worker's test database (no
# broker, no port, no demo, no second server): their group runs beside the other `slow` tests.
OWN_DATABASE_ONLY = {
    "tests/ask/test_ask_caps.py", "tests/corrections/test_bench_recall_to_queue.py",
    "tests/corrections/test_new_recall_e2e.py", "tests/corrections/test_sweep_crash.py",
    "tests/corrections/test_sweep_invariant.py", "tests/corrections/test_sweep_progress.py",
    "tests/corrections/test_sweep_workers.py", "tests/memory/test_memory_embeddings.py",
    "tests/memory/test_memory_write_batches.py", "tests/memory/test_memory_writes.py",
    "tests/reliability/test_dispatch_kills.py", "tests/reliability/test_ingest_fuzz.py",
    "tests/shelf/test_shelf_unit_races.py",
}


def pytest_collection_modifyitems(config, items):
    """Tests marked `slow` (real processes, timings) run one after another on one xdist worker
    (`--dist loadgroup`, Makefile) in two groups: those that share the machine's services (the Redis
    broker, ports, the demo's processes) in one, those that touch only their worker's own test database
    (OWN_DATABASE_ONLY) in the other; everything else is spread over the workers. Tests marked
    `cockroach` need a real CockroachDB; without UNSAY_COCKROACH_URL they are skipped, saying so."""
    if config.pluginmanager.hasplugin("xdist"):
        for item in items:
            if "slow" in item.keywords:
                own = item.nodeid.split("::")[0] in OWN_DATABASE_ONLY
                item.add_marker(pytest.mark.xdist_group("real_processes_own_db" if own else "real_processes"))
    if os.environ.get("UNSAY_COCKROACH_URL"):
        return
    skip = pytest.mark.skip(reason="UNSAY_COCKROACH_URL is not set (e.g. cockroachdb://root@localhost:26257/defaultdb"
                                   "?sslmode=disable with `docker compose up`)")
    for item in items:
        if "cockroach" in item.keywords:
            item.add_marker(skip)


def pytest_sessionfinish(session, exitstatus):
    """Tasks the tests queued on their own Redis database (db 15, see settings) have no worker:
    drop them so they do not pile up across runs. Under xdist only the controller does it, once every
    worker is done: a worker finishing first must not empty the queues the other's tests still read."""
    if hasattr(session.config, "workerinput"):
        return
    from django.conf import settings

    url = getattr(settings, "REDIS_URL", None) or ""
    if settings.PROFILE != "test" or not url.endswith("/15"):
        return
    try:
        import redis

        redis.Redis.from_url(url, socket_timeout=1).flushdb()
    except Exception:  # Redis gone: nothing to clean
        pass


@pytest.fixture
def browser():
    """Headless Debian Chromium through chromedriver (tests/browser/test_browser_*.py; they skip without it)."""
    import shutil

    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1100"):
        options.add_argument(arg)
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver_path))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


# --- The sweep's world and the review fixtures (shared by the sweep, review, outbox, worklist and
# browser tests; the recall facts and patients come from tests/factories.py) ----------------------


@pytest.fixture
def dispatch_not_enqueued(monkeypatch):
    """Approval enqueues dispatch on commit; with no Redis (CI) Celery would run it eagerly. Tests that
    call the dispatcher themselves record the enqueue instead of running it. Not autouse: the modules
    that want it for every test say so (`pytestmark = pytest.mark.usefixtures("dispatch_not_enqueued")`)."""
    from outbox import tasks

    calls = []
    monkeypatch.setattr(tasks.dispatch_outbox, "delay", lambda *a, **k: calls.append(a))
    return calls


@pytest.fixture
def shelf_match_runs_here(monkeypatch):
    """A fact change queues shelf matching as a Celery task (shelf.tasks); with a broker no worker runs it in
    tests. Tests that follow a recall onto the shelf run each queued match here, as a worker would
    (Task.apply), and get the fact ids each one was queued with."""
    from shelf import tasks

    queued = []

    def run(fact_ids):
        queued.append(fact_ids)
        return tasks.match_recall_facts.apply(args=(fact_ids,))

    monkeypatch.setattr(tasks.match_recall_facts, "delay", run)
    return queued


@pytest.fixture
def no_auto_sweep(monkeypatch):
    monkeypatch.setattr("django.conf.settings.UNSAY_SWEEP_ON_SUPERSESSION", False)


@pytest.fixture
def world(hashing_embeddings):
    """Two real Class II valsartan recalls (tests/factories.py RECALL, OTHER_RECALL); synthetic patients
    A and B on RECALL's lot and C on another lot have asked; D (SMS) holds the lot and never asked."""
    from ask.services import ask
    from memory.fact_writes import assert_claim
    from tests.factories import LOT, OTHER_LOT, OTHER_RECALL, RECALL, VALSARTAN, make_patient, recall_claim

    assert_claim(recall_claim(RECALL, LOT))
    assert_claim(recall_claim(OTHER_RECALL, OTHER_LOT))
    on_lot_a = make_patient("SYN-A", [(VALSARTAN, LOT)])
    on_lot_b = make_patient("SYN-B", [(VALSARTAN, LOT)])
    other_lot = make_patient("SYN-C", [(VALSARTAN, "3095511")])
    never_asked = make_patient("SYN-D", [(VALSARTAN, LOT)], channel="sms")
    decisions = {
        "a": ask(on_lot_a, "Is my valsartan safe?"),
        "b": ask(on_lot_b, "Is my valsartan safe?"),
        "c": ask(other_lot, "Is my valsartan safe?"),
    }
    assert decisions["a"].verdict == "caution" and decisions["c"].verdict == "safe"
    return {"decisions": decisions, "never_asked": never_asked}


@pytest.fixture
def people(django_user_model):
    """A pharmacist (phil) and a member of pharmacy staff (sam), both with password "pw"."""
    from django.apps import apps
    from django.contrib.auth.models import Group

    from core.roles import PHARMACIST, PHARMACY_STAFF, sync_group_permissions

    sync_group_permissions(apps)  # transaction=True flushes the groups the migration made
    pharmacist = django_user_model.objects.create_user("phil", password="pw")
    pharmacist.groups.add(Group.objects.get(name=PHARMACIST))
    staff = django_user_model.objects.create_user("sam", password="pw")
    staff.groups.add(Group.objects.get(name=PHARMACY_STAFF))
    return {"pharmacist": pharmacist, "staff": staff}


@pytest.fixture
def drafts(world, no_auto_sweep):
    """The world escalated to Class I and swept: drafts for SYN-A, SYN-B (corrections) and SYN-D (notice)."""
    from corrections.models import Correction
    from corrections.sweep.run import sweep
    from tests.factories import escalate

    escalate()
    sweep()
    return {d.patient.external_ref: d for d in Correction.objects.select_related("patient")}


@pytest.fixture
def patient(db):
    """Ada, a synthetic patient with no dispensing (P-1, email only): the patients app's form, scan and
    dispensing-path tests."""
    from tests.factories import make_patient

    return make_patient("P-1", name="Ada (synthetic)", email="ada@example.com", phone="")
