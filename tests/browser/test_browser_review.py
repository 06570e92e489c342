"""The approve/reject flow in a real headless Chromium against pytest-django's live_server (a threaded
server in this process, on this session's test database; hence transaction=True). Skipped without
/usr/bin/chromium; CI must `apt-get install -y chromium chromium-driver` for it to run."""

import time
from pathlib import Path

import pytest

from corrections.models import AuditEvent, Correction

CHROMIUM = Path("/usr/bin/chromium")
# dispatch_not_enqueued (tests/conftest.py) for every test here, as when it was imported from test_sweep.
pytestmark = [
    pytest.mark.usefixtures("dispatch_not_enqueued"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="needs /usr/bin/chromium (apt-get install chromium chromium-driver)"),
]


def _wait(condition, timeout=30):
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except StaleElementReferenceException:  # htmx swapped the card between finding and reading it
            value = None
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_a_pharmacist_approves_one_and_rejects_another_in_a_real_browser(
    live_server, browser, client, people, drafts, dispatch_not_enqueued
):
    from selenium.webdriver.common.by import By

    client.force_login(people["pharmacist"])  # a database session the server thread can read
    browser.get(live_server.url + "/health")
    browser.add_cookie({"name": "sessionid", "value": client.cookies["sessionid"].value, "path": "/"})
    browser.get(live_server.url + "/corrections/review/")
    assert "Corrections awaiting review" in browser.page_source
    assert browser.execute_script("return typeof htmx") == "object"  # served locally, not from a CDN

    approve_card, reject_card = drafts["SYN-A"], drafts["SYN-B"]
    card = browser.find_element(By.ID, f"card-{approve_card.public_id}")
    card.find_element(By.NAME, "approve").click()
    # dispatch_not_enqueued records approval's dispatch instead of running it (the server is a thread of
    # this process and sees the patch), so the card stays "approved" and nothing is sent.
    _wait(lambda: browser.find_element(By.ID, f"card-{approve_card.public_id}").get_attribute("data-status")
          == "approved")

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
    assert approve_card.status == Correction.Status.APPROVED and len(dispatch_not_enqueued) == 1
    assert reject_card.status == Correction.Status.REJECTED
    assert reject_card.rejection_reason == "Patient already collected a replacement"
    assert AuditEvent.objects.filter(actor=people["pharmacist"]).count() == 2


def test_the_review_page_has_no_serious_accessibility_violation(live_server, browser, client, people, drafts):
    from tests.browser.accessibility import serious_violations

    client.force_login(people["pharmacist"])
    browser.get(live_server.url + "/health")
    browser.add_cookie({"name": "sessionid", "value": client.cookies["sessionid"].value, "path": "/"})
    browser.get(live_server.url + "/corrections/review/")
    assert "Corrections awaiting review" in browser.page_source
    assert serious_violations(browser) == []
