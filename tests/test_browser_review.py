"""The approve/reject flow in a real headless Chromium against the running app (runserver in a
subprocess on 127.0.0.1, on this session's test database). Skipped without /usr/bin/chromium;
CI must `apt-get install -y chromium chromium-driver` for it to run."""

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corrections.models import AuditEvent, Correction
from tests.procs import PROJECT_DIR, subprocess_env
from tests.test_corrections_review import drafts, people  # noqa: F401 (fixtures)
from tests.test_sweep import dispatch_not_enqueued, no_auto_sweep, world  # noqa: F401 (fixtures)

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="needs /usr/bin/chromium (apt-get install chromium chromium-driver)"),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def live_server_url(tmp_path):
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", "--noreload", "--insecure", f"127.0.0.1:{port}"],
        cwd=PROJECT_DIR, env=subprocess_env(UNSAY_VAR_DIR=str(tmp_path), UNSAY_SWEEP_ON_SUPERSESSION="0"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if server.poll() is not None:
                pytest.fail(f"runserver exited: {server.stderr.read()[-2000:]}")
            time.sleep(0.2)
    else:
        server.kill()
        pytest.fail("runserver did not start within 30 s")
    yield f"http://127.0.0.1:{port}"
    server.terminate()
    server.wait(timeout=10)



def _wait(condition, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_a_pharmacist_approves_one_and_rejects_another_in_a_real_browser(
    live_server_url, browser, client, people, drafts  # noqa: F811
):
    from selenium.webdriver.common.by import By

    client.force_login(people["pharmacist"])  # a database session the server process can read
    browser.get(live_server_url + "/health")
    browser.add_cookie({"name": "sessionid", "value": client.cookies["sessionid"].value, "path": "/"})
    browser.get(live_server_url + "/corrections/review/")
    assert "Corrections awaiting review" in browser.page_source
    assert browser.execute_script("return typeof htmx") == "object"  # served locally, not from a CDN

    approve_card, reject_card = drafts["SYN-A"], drafts["SYN-B"]
    card = browser.find_element(By.ID, f"card-{approve_card.public_id}")
    card.find_element(By.NAME, "approve").click()
    # "sent" when Celery runs eagerly (no Redis): approval's dispatch then runs inside the request.
    _wait(lambda: browser.find_element(By.ID, f"card-{approve_card.public_id}").get_attribute("data-status")
          in ("approved", "sent"))

    browser.find_element(By.ID, f"card-{reject_card.public_id}").find_element(By.CLASS_NAME, "reject").click()
    reason = _wait(lambda: browser.find_elements(By.CSS_SELECTOR, f"#card-{reject_card.public_id} textarea"))
    reason[0].send_keys("Patient already collected a replacement")
    browser.find_element(By.ID, f"card-{reject_card.public_id}").find_element(By.NAME, "confirm-reject").click()
    _wait(lambda: browser.find_element(By.ID, f"card-{reject_card.public_id}").get_attribute("data-status")
          == "rejected")

    assert browser.current_url.endswith("/corrections/review/")  # htmx swapped cards; no page navigation
    assert browser.find_element(By.ID, f"card-{drafts['SYN-D'].public_id}").get_attribute("data-status") == "draft"
    approve_card.refresh_from_db()
    reject_card.refresh_from_db()
    assert approve_card.status in (Correction.Status.APPROVED, Correction.Status.SENT)
    assert reject_card.status == Correction.Status.REJECTED
    assert reject_card.rejection_reason == "Patient already collected a replacement"
    assert AuditEvent.objects.filter(actor=people["pharmacist"]).count() == 2
