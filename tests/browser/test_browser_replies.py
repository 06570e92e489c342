"""The patient's reply page in a real headless Chromium (live_server, this session's test database), driven
by the keyboard alone: every control labelled, text contrast at WCAG AA, no script on the page. Skipped
without /usr/bin/chromium, like tests/browser/test_browser_review.py."""

import re
from pathlib import Path

import pytest
from django.core import mail

from corrections.review import approve
from outbox import dispatch
from worklist.models import PatientAnswer

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.usefixtures("dispatch_not_enqueued"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="needs /usr/bin/chromium (apt-get install chromium chromium-driver)"),
]


def _luminance(rgb: str) -> float:
    channels = [int(c) / 255 for c in re.findall(r"\d+", rgb)[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(fg: str, bg: str) -> float:
    a, b = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)


def test_a_patient_answers_with_the_keyboard_alone_in_a_real_browser(live_server, browser, people, drafts,
                                                                     settings):
    from django.core.cache import cache
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    cache.clear()
    settings.UNSAY_SITE_URL = live_server.url
    approve(drafts["SYN-A"].pk, user=people["pharmacist"])
    assert dispatch.dispatch_ready().sent == 1
    url = re.search(r"https?://\S+/r/[A-Za-z0-9_-]{22}", mail.outbox[0].body).group(0)

    browser.get(url)
    assert browser.find_element(By.TAG_NAME, "h1").text == "Tell us about your medicine"
    assert browser.execute_script("return document.scripts.length") == 0  # works without JavaScript
    for control in browser.find_elements(By.CSS_SELECTOR, "input[type=radio], textarea"):
        labels = browser.find_elements(By.CSS_SELECTOR, f"label[for='{control.get_attribute('id')}']")
        assert len(labels) == 1 and labels[0].text.strip(), control.get_attribute("outerHTML")
    assert browser.find_element(By.TAG_NAME, "legend").text == "What have you done with this medicine?"
    style = "const s = getComputedStyle(arguments[0]); return [s.color, s.backgroundColor];"
    body_fg, body_bg = browser.execute_script(style, browser.find_element(By.TAG_NAME, "body"))
    button_fg, button_bg = browser.execute_script(style, browser.find_element(By.TAG_NAME, "button"))
    assert _contrast(body_fg, body_bg) >= 7 and _contrast(button_fg, button_bg) >= 4.5

    # Keyboard only: Tab to the answers, Space picks the first, an arrow moves to the second, Tab to the
    # question box and the button, Enter sends.
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.TAB)
    active = browser.switch_to.active_element
    assert active.get_attribute("value") == "stopped"
    active.send_keys(Keys.SPACE)
    active.send_keys(Keys.ARROW_DOWN)
    assert browser.switch_to.active_element.get_attribute("value") == "returned"
    browser.switch_to.active_element.send_keys(Keys.TAB)
    assert browser.switch_to.active_element.tag_name == "textarea"
    browser.switch_to.active_element.send_keys(Keys.TAB)
    assert browser.switch_to.active_element.tag_name == "button"
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    for _ in range(100):
        if "Thank you" in browser.page_source:
            break
        browser.implicitly_wait(0.1)
    assert "Thank you, we have your answer" in browser.page_source
    [answer] = PatientAnswer.objects.all()
    assert answer.answer == "returned" and answer.patient_id == drafts["SYN-A"].patient_id

    browser.get(url)  # used: the same refusal as any unknown link
    assert "This link cannot be used" in browser.page_source
