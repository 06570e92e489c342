"""Logins and sessions: repeated wrong passwords lock the login, even for the right password
(40 in 11.8 s were once all answered and then the right one worked); weak passwords are refused;
sessions last a shift; /recalls/ops/ needs the permission, not just the staff flag."""

import pytest
from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError

pytestmark = pytest.mark.django_db


def _login(client, password):
    return client.post("/admin/login/?next=/admin/", {"username": "pat", "password": password},
                       REMOTE_ADDR="203.0.113.9")


def test_repeated_wrong_passwords_lock_the_login_even_for_the_right_password(client, django_user_model):
    django_user_model.objects.create_user("pat", password="correct horse battery staple", is_staff=True)
    answers = [_login(client, f"wrong-{i}").status_code for i in range(settings.AXES_FAILURE_LIMIT + 3)]
    assert answers[:settings.AXES_FAILURE_LIMIT - 1] == [200] * (settings.AXES_FAILURE_LIMIT - 1)  # form again
    assert answers[-1] == 429
    locked = _login(client, "correct horse battery staple")
    assert locked.status_code == 429 and "_auth_user_id" not in client.session


def test_the_right_password_before_the_limit_logs_in_and_resets_the_count(client, django_user_model):
    django_user_model.objects.create_user("pat", password="correct horse battery staple", is_staff=True)
    for i in range(settings.AXES_FAILURE_LIMIT - 1):
        _login(client, f"wrong-{i}")
    assert _login(client, "correct horse battery staple").status_code == 302
    client.logout()
    assert _login(client, "wrong-again").status_code == 200  # counting starts again


@pytest.mark.parametrize("weak", ["password123", "12345678901234", "pat-pat-pat", "short"])
def test_weak_passwords_are_refused(django_user_model, weak):
    user = django_user_model(username="pat-pat-pat")
    with pytest.raises(ValidationError):
        validate_password(weak, user)


def test_sessions_last_a_shift_not_two_weeks():
    assert settings.SESSION_COOKIE_AGE <= 12 * 3600 and settings.SESSION_EXPIRE_AT_BROWSER_CLOSE


def test_the_ops_page_needs_the_permission_not_just_the_staff_flag(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("flag-only", is_staff=True))
    assert client.get("/recalls/ops/").status_code == 403
