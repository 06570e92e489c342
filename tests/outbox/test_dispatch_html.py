"""The dispatcher sends email as text + HTML, the HTML part built from exactly the reviewed text
(an edit shows in both parts). Real sweep drafts of the real D-0315-2019 recall; patients synthetic."""

import pytest
from django.core import mail

from corrections.review import approve
from outbox import dispatch

# dispatch_not_enqueued (tests/conftest.py) for every test here, as when it was imported from test_sweep.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]


def test_the_email_carries_the_reviewed_text_as_its_html_part(people, drafts, settings):
    settings.UNSAY_PHARMACY_NAME = "Synthetic Corner Pharmacy"
    a = drafts["SYN-A"]
    edited = a.drafted_text.strip() + "\n\nEdited by the pharmacist: bring the pack <and> the box."
    approve(a.pk, user=people["pharmacist"], final_text=edited)
    assert dispatch.dispatch_ready().sent == 1
    [email] = mail.outbox
    # The reviewed text, then the reply link added at send time (replies.links.footer).
    assert email.body.startswith(edited + "\n\n") and "/r/" in email.body[len(edited):]
    [(html, mimetype)] = email.alternatives
    assert mimetype == "text/html"
    assert "Edited by the pharmacist: bring the pack &lt;and&gt; the box." in html  # escaped, not raw
    assert "Synthetic Corner Pharmacy" in html
    first_paragraph = edited.split("\n\n")[0].strip()
    assert first_paragraph.splitlines()[0] in html
