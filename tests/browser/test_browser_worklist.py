"""A Class I recall walked end to end in real headless Chromium (Debian's chromium + chromedriver)
against pytest-django's live_server: worklist -> recall page (deadline) -> review queue (approve)
-> dispatch (the SMS fails: SMS is not configured in tests) -> phone call logged for the patient not
reached -> steps -> close -> report + CSV. And the 409 / 400 paths show an explaining card.
Screenshots go to the test's tmp dir, or to docs/screenshots/ with UNSAY_UPDATE_SCREENSHOTS=1 (so a test run
leaves the work tree clean). Skipped without /usr/bin/chromium."""

import csv
import io
import os
import time
from pathlib import Path

import pytest

from corrections import review
from corrections.models import Correction
from outbox import dispatch
from tests.factories import RECALL
from tests.paths import PROJECT_DIR
from worklist import recall_pages

CHROMIUM = Path("/usr/bin/chromium")
DOC_SHOTS = PROJECT_DIR / "docs" / "screenshots"
# dispatch_not_enqueued (tests/conftest.py) for every test here, as when it was imported from test_sweep.
pytestmark = [
    pytest.mark.usefixtures("dispatch_not_enqueued"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="needs /usr/bin/chromium (apt-get install chromium chromium-driver)"),
]



def _wait(condition, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except Exception:  # element replaced mid-swap: try again
            value = None
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def _login(browser, live_server, client, user):
    client.force_login(user)
    browser.get(live_server.url + "/health")
    browser.add_cookie({"name": "sessionid", "value": client.cookies["sessionid"].value, "path": "/"})


@pytest.fixture
def shots(tmp_path):
    return DOC_SHOTS if os.environ.get("UNSAY_UPDATE_SCREENSHOTS") == "1" else tmp_path


def _shot(browser, name, shots):
    shots.mkdir(parents=True, exist_ok=True)
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1280, min(max(height + 40, 700), 2400))
    browser.save_screenshot(str(shots / name))
    browser.set_window_size(1280, 1100)


def _record_step(browser, By, step, note=""):
    item = browser.find_element(By.CSS_SELECTOR, f'li[data-step="{step}"]')
    if note:
        item.find_element(By.NAME, "note").send_keys(note)
    item.find_element(By.NAME, f"do-{step}").click()
    _wait(lambda: "✓" in browser.find_element(By.CSS_SELECTOR, f'li[data-step="{step}"]').text)


def test_a_pharmacist_runs_a_class_i_recall_from_the_worklist_to_the_report(
    live_server, browser, client, people, drafts, dispatch_not_enqueued, settings, shots
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    settings.UNSAY_SMS_TO_FILE = False  # the SMS patient's message fails: not reached
    _login(browser, live_server, client, people["pharmacist"])

    # The worklist: the recall, its class, counts and a Class I deadline that is due.
    browser.get(live_server.url + "/worklist/")
    row = browser.find_element(By.CSS_SELECTOR, f'tr[data-recall="{RECALL}"]')
    assert "Class I" in row.text and row.find_element(By.CSS_SELECTOR, "td[data-deadline]").get_attribute(
        "data-deadline") == "due"
    assert "Class I recall due" in browser.find_element(By.ID, "status-line").text
    _shot(browser, "worklist.png", shots)

    # Open it: the deadline is stated; acknowledge and record the stock check.
    row.find_element(By.LINK_TEXT, RECALL).click()
    _wait(lambda: browser.find_element(By.ID, "deadline"))
    assert browser.find_element(By.ID, "deadline").get_attribute("data-deadline") == "due"
    assert "notify every exposed patient by" in browser.find_element(By.ID, "deadline").text
    _record_step(browser, By, "acknowledge")
    _record_step(browser, By, "check_stock", "2 packs of lot 3061169 quarantined")

    # Review and approve the drafts (htmx swaps each card in place).
    browser.find_element(By.PARTIAL_LINK_TEXT, "awaiting review").click()
    _wait(lambda: "Corrections awaiting review" in browser.page_source)
    for c in drafts.values():
        card = browser.find_element(By.ID, f"card-{c.public_id}")
        assert c.message.recipient in card.find_element(By.CLASS_NAME, "recipient").text
        card.find_element(By.NAME, "approve").click()
        _wait(lambda c=c: browser.find_element(By.ID, f"card-{c.public_id}").get_attribute("data-status")
              == "approved")
    dispatch.dispatch_ready()  # what the worker does after approval: email goes, the SMS fails
    sms_patient = drafts["SYN-D"].patient

    # Back on the recall page: notify, then log a phone call for the patient not reached.
    browser.get(live_server.url + f"/worklist/recall/{RECALL}")
    line = browser.find_element(By.CSS_SELECTOR, 'tr[data-patient="SYN-D"]')
    assert line.get_attribute("data-state") == "not_reached"
    _record_step(browser, By, "notify")
    line = browser.find_element(By.CSS_SELECTOR, 'tr[data-patient="SYN-D"]')
    Select(line.find_element(By.NAME, "method")).select_by_value("phone")
    Select(line.find_element(By.NAME, "outcome")).select_by_value("reached")
    line.find_element(By.NAME, "note").send_keys("will bring the pack in today")
    line.find_element(By.NAME, "log-contact").click()
    _wait(lambda: browser.find_element(By.CSS_SELECTOR, 'tr[data-patient="SYN-D"]').get_attribute("data-state")
          == "reached")
    _record_step(browser, By, "follow_up", "SYN-D reached by phone")
    _shot(browser, "recall.png", shots)
    _record_step(browser, By, "close")
    assert "Closed" in browser.find_element(By.TAG_NAME, "h1").text

    # The report: counts, the deadline met, and the CSV the browser downloads.
    browser.find_element(By.LINK_TEXT, "Effectiveness report").click()
    _wait(lambda: browser.find_element(By.ID, "summary"))
    assert browser.find_element(By.ID, "n-reached").text == "1"
    assert browser.find_element(By.ID, "n-notified").text == "2"
    assert browser.find_element(By.ID, "n-not-reached").text == "0"
    assert browser.find_element(By.ID, "report-deadline").text.startswith("Met")
    _shot(browser, "report.png", shots)
    csv_text = browser.execute_script(
        "const r = await fetch(arguments[0]); return r.status + '\\n' + await r.text();",
        browser.find_element(By.ID, "csv-link").get_attribute("href"))
    status, _, body = csv_text.partition("\n")
    header, *rows = csv.reader(io.StringIO(body))
    assert status == "200" and header[:2] == ["recall_number", "patient_ref"] and len(rows) == 3
    assert any("SYN-D" in r and "reached" in r for r in rows)
    f = recall_pages.recall_file(RECALL)
    assert f.closed and f.deadline.state == "met" and not f.unaccounted
    assert sms_patient.contact_attempts.get().by == people["pharmacist"]


def test_409_and_400_show_an_explaining_card_in_the_browser(
    live_server, browser, client, people, drafts, dispatch_not_enqueued, django_user_model, shots
):
    from selenium.webdriver.common.by import By

    _login(browser, live_server, client, people["pharmacist"])
    browser.get(live_server.url + "/corrections/review/")
    taken, empty_reason = drafts["SYN-A"], drafts["SYN-B"]

    # A colleague rejects SYN-A while this page is open; approving it here answers 409.
    colleague = django_user_model.objects.create_user("pat", password="pw")
    colleague.groups.set(people["pharmacist"].groups.all())
    review.reject(taken.pk, user=colleague, reason="Patient already collected a replacement")
    browser.find_element(By.ID, f"card-{taken.public_id}").find_element(By.NAME, "approve").click()
    alert = _wait(lambda: browser.find_element(By.CSS_SELECTOR, f"#card-{taken.public_id} .error-card"))
    assert "already rejected" in alert.text
    assert browser.find_element(By.ID, f"card-{taken.public_id}").get_attribute("data-status") == "rejected"

    # Rejecting with a blank reason answers 400 with the form kept open and the reason explained.
    browser.find_element(By.ID, f"card-{empty_reason.public_id}").find_element(By.CLASS_NAME, "reject").click()
    box = _wait(lambda: browser.find_elements(By.CSS_SELECTOR, f"#card-{empty_reason.public_id} textarea"))[0]
    box.send_keys("   ")
    browser.find_element(By.ID, f"card-{empty_reason.public_id}").find_element(By.NAME, "confirm-reject").click()
    alert = _wait(lambda: browser.find_element(By.CSS_SELECTOR, f"#card-{empty_reason.public_id} .error-card"))
    assert "needs a reason" in alert.text
    _shot(browser, "review-error-cards.png", shots)
    assert Correction.objects.get(pk=empty_reason.pk).status == "draft"
    assert browser.current_url.endswith("/corrections/review/")
