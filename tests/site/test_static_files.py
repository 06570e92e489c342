"""Static files are served from the app itself (whitenoise, through the staticfiles finders outside
production), and the finders are read once per process, not once per handler: the test client builds a
new handler for every client (unsay_site.middleware)."""

from unittest import mock

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from unsay_site.middleware import StaticFilesMiddleware

pytestmark = pytest.mark.django_db


@pytest.fixture
def fresh_process_memory():
    saved = dict(StaticFilesMiddleware._found_by_finders)
    StaticFilesMiddleware._found_by_finders.clear()
    yield
    StaticFilesMiddleware._found_by_finders.clear()
    StaticFilesMiddleware._found_by_finders.update(saved)


def test_every_client_is_served_the_static_files_and_the_finders_are_read_once(fresh_process_memory):
    with mock.patch.object(finders, "get_finders", wraps=finders.get_finders) as listing:
        bodies = []
        for _ in range(3):
            response = Client().get("/static/check/check.js")
            assert response.status_code == 200
            bodies.append(b"".join(response.streaming_content))
            assert Client().get("/static/check/no-such-file.js").status_code == 404
    assert listing.call_count == 1
    assert bodies[0] == bodies[1] == bodies[2] and b"function" in bodies[0]


def test_a_change_of_the_static_settings_is_read_again(fresh_process_memory, settings):
    with mock.patch.object(finders, "get_finders", wraps=finders.get_finders) as listing:
        assert Client().get("/static/check/check.js").status_code == 200
        settings.STATIC_URL = "/assets/"
        assert Client().get("/assets/check/check.js").status_code == 200
        assert Client().get("/static/check/check.js").status_code == 404
    assert listing.call_count == 2
