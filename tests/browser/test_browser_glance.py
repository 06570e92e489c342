"""The recall at a glance and the shelf page in real headless Chromium, opened as their users open them: the charts
carry the seeded recall's numbers, the filters and the CSV links are reached and used with the keyboard alone, and
axe-core finds no serious violation. Recall: REAL D-0315-2019 escalated to Class I (tests/conftest.py drafts) and
REAL D-0502-2019 on the shelf; patients, letters, replies, sites and shipments: SYNTHETIC.
Screenshots go to the test's tmp dir, or to docs/screenshots/ with UNSAY_UPDATE_SCREENSHOTS=1."""

import csv
import io
import re

import pytest
from django.core import mail

from corrections.review import approve
from outbox import dispatch
from shelf.models import StaffSite
from shelf.receiving import receive
from tests import epcis_docs as d
from tests.browser.accessibility import serious_violations
from tests.browser.test_browser_worklist import CHROMIUM, _login, _wait, shots  # noqa: F401 (a fixture)
from tests.factories import RECALL
from tests.shelf.test_shelf_worklist import RECALL as SHELF_RECALL
from tests.shelf.test_shelf_worklist import (
    SITE,
    shelf_world,  # noqa: F401 (a fixture)
)

pytestmark = [
    pytest.mark.usefixtures("dispatch_not_enqueued"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="needs /usr/bin/chromium (apt-get install chromium chromium-driver)"),
]

LINK = re.compile(r"/r/([A-Za-z0-9_-]{22})")


def _tab_to(browser, element_id, limit=80):
    """Press Tab until the element has the focus, as a keyboard user would; fail if it is never reached."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    browser.execute_script("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0);")
    for _ in range(limit):
        ActionChains(browser).send_keys(Keys.TAB).perform()
        if browser.execute_script("return document.activeElement && document.activeElement.id") == element_id:
            return browser.switch_to.active_element
    raise AssertionError(f"#{element_id} is not reachable with the Tab key")


def _fetch(browser, url):
    status, _, body = browser.execute_script(
        "const r = await fetch(arguments[0]); return r.status + '\\n' + await r.text();", url).partition("\n")
    return int(status), list(csv.reader(io.StringIO(body)))


def _svg_texts(browser, chart_id):
    from selenium.webdriver.common.by import By

    return [t.get_attribute("textContent") for t in browser.find_elements(By.CSS_SELECTOR, f"#{chart_id} text")]


def _shot_of(browser, element, name, folder):
    """A screenshot of one element, the window made tall enough for all of it."""
    folder.mkdir(parents=True, exist_ok=True)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, min(max(height + 200, 700), 4000))
    element.screenshot(str(folder / name))
    browser.set_window_size(1280, 1100)


@pytest.fixture
def answered(client, drafts, people, settings):
    """Letters approved and dispatched (SYN-A and SYN-B by email; SYN-D's SMS fails: SMS is not configured in
    tests); SYN-A answers "returned" through the letter's link."""
    settings.UNSAY_SMS_TO_FILE = False
    for correction in drafts.values():
        approve(correction.pk, user=people["pharmacist"])
    dispatch.dispatch_ready()
    email = next(m for m in mail.outbox if drafts["SYN-A"].message.recipient in m.to)
    assert client.post(f"/r/{LINK.search(email.body).group(1)}", {"answer": "returned"}).status_code == 200
    client.logout()
    return drafts


def test_a_pharmacist_reads_a_class_i_recall_at_a_glance_on_its_page_and_in_the_report(
    live_server, browser, client, people, answered, shots  # noqa: F811
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _login(browser, live_server, client, people["pharmacist"])
    browser.get(live_server.url + f"/worklist/recall/{RECALL}")
    _wait(lambda: browser.find_element(By.ID, "glance"))
    bars = _svg_texts(browser, "glance-funnel-chart")
    for label in ("Exposed: 3", "Letter approved: 3", "Delivered: 2", "Replied: 1", "Replied: returned: 1",
                  "Replied: stopped: 0"):
        assert label in bars
    funnel = {row.get_attribute("data-stage"): row.find_element(By.TAG_NAME, "td").text
              for row in browser.find_elements(By.CSS_SELECTOR, "#glance-funnel tbody tr")}
    assert (funnel["exposed"], funnel["notified"], funnel["delivered"], funnel["replied_returned"]) == (
        "3", "3", "2", "1")
    line = _svg_texts(browser, "glance-patients-chart")
    assert "Letter approved (3)" in line and "Delivered (2)" in line and "Returned (1)" in line
    assert any(t.startswith("Class I deadline") for t in line)
    assert browser.find_element(By.ID, "glance-patients-chart").get_attribute("role") == "img"
    assert not browser.find_elements(By.ID, "glance-shelf-chart")  # nothing on the shelf for this recall
    assert serious_violations(browser) == []
    _shot_of(browser, browser.find_element(By.ID, "glance"), "recall-glance.png", shots)

    # Keyboard only: Tab to the CSV link, read what it downloads, then Tab to the report link and press Enter.
    link = _tab_to(browser, "glance-csv-link")
    status, (header, *rows) = _fetch(browser, link.get_attribute("href"))
    assert status == 200 and header == ["recall_number", "chart", "day", "figure", "value"]
    assert {r[3]: r[4] for r in rows if r[1] == "funnel"}["delivered"] == "2"
    assert [r[3] for r in rows if r[1] == "deadline"] == ["class1_deadline"]
    report = browser.find_element(By.LINK_TEXT, "Effectiveness report")
    browser.execute_script("arguments[0].id = 'report-link'", report)
    _tab_to(browser, "report-link").send_keys(Keys.ENTER)
    _wait(lambda: browser.find_elements(By.ID, "summary"))
    assert "Delivered: 2" in _svg_texts(browser, "glance-funnel-chart")
    assert browser.find_element(By.ID, "n-delivered").text == "2"  # the letters table: the same count
    assert serious_violations(browser) == []
    _shot_of(browser, browser.find_element(By.TAG_NAME, "body"), "report-glance.png", shots)


def test_staff_and_pharmacists_read_their_own_sites_shelf_with_the_keyboard(
    live_server, browser, client, people, shelf_world, shots  # noqa: F811
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    other_site = "Elm St"
    assert receive(d.shipment_xml(d.serials("E", 2), case=2), site=other_site).applied >= 1
    StaffSite.objects.create(user=people["pharmacist"], site=SITE)
    StaffSite.objects.create(user=people["pharmacist"], site=other_site)
    StaffSite.objects.create(user=people["staff"], site=other_site)

    # Pharmacy staff of Elm St: their site only, nothing of Main St's units or patient.
    _login(browser, live_server, client, people["staff"])
    browser.get(live_server.url + "/shelf/")
    _wait(lambda: browser.find_element(By.ID, "shelf-stock"))
    assert browser.find_element(By.TAG_NAME, "h1").text == f"Shelf: {other_site}"
    assert not browser.find_elements(By.CSS_SELECTOR, f'#shelf-stock tr[data-site="{SITE}"]')
    assert "SYN-SHELF" not in browser.page_source
    assert serious_violations(browser) == []

    # A pharmacist holding both sites narrows the page to Main St and the recall with the keyboard alone.
    browser.delete_all_cookies()
    _login(browser, live_server, client, people["pharmacist"])
    browser.get(live_server.url + "/shelf/")
    _wait(lambda: browser.find_element(By.ID, "shelf-stock"))
    assert {r.get_attribute("data-site") for r in browser.find_elements(By.CSS_SELECTOR, "#shelf-stock tbody tr")} \
        == {SITE, other_site}
    site = _tab_to(browser, "id_site")
    while site.get_attribute("value") != SITE:
        site.send_keys(Keys.ARROW_DOWN)
    _tab_to(browser, "id_recall")
    recall = browser.switch_to.active_element
    while recall.get_attribute("value") != SHELF_RECALL:
        recall.send_keys(Keys.ARROW_DOWN)
    _tab_to(browser, "apply-filters").send_keys(Keys.ENTER)
    _wait(lambda: "site=Main" in browser.current_url)
    rows = browser.find_elements(By.CSS_SELECTOR, "#shelf-stock tbody tr")
    assert [(r.get_attribute("data-site"), r.find_element(By.CSS_SELECTOR, '[data-n="on_hand"]').text)
            for r in rows] == [(SITE, "3")]
    assert browser.find_element(By.CSS_SELECTOR, f'#shelf-open-tasks tr[data-recall="{SHELF_RECALL}"]')
    assert "Synthetic Shelf Patient (SYN-SHELF)" in browser.find_element(By.ID, "shelf-left").text
    assert serious_violations(browser) == []
    _shot_of(browser, browser.find_element(By.TAG_NAME, "body"), "shelf.png", shots)
    link = _tab_to(browser, "shelf-csv-link")
    status, (header, *csv_rows) = _fetch(browser, link.get_attribute("href"))
    assert status == 200 and header[:2] == ["site", "product"]
    assert [(r[0], r[4], r[7]) for r in csv_rows] == [(SITE, d.LOSARTAN_LOT, "3")]

    # The shelf recall's own page charts the shelf by day, organisation-wide like the rest of the recall's page:
    # 4 units received at Main St and 2 at Elm St, 1 dispensed.
    browser.get(live_server.url + f"/worklist/recall/{SHELF_RECALL}")
    shelf_chart = _wait(lambda: _svg_texts(browser, "glance-shelf-chart"))
    assert "Received (6)" in shelf_chart and "Dispensed (1)" in shelf_chart
    assert not any(t.startswith("Class I deadline") for t in shelf_chart)  # Class II
    assert serious_violations(browser) == []
