"""The recall at a glance: the funnel and the timelines add up to the figures of the selectors that own them, the
charts draw those numbers (labels, not colour alone) with the Class I deadline, and the CSV carries the same.
Recall: REAL D-0315-2019 escalated to Class I (tests/conftest.py drafts) and REAL D-0502-2019 on the shelf;
patients, letters, replies and the shipment: SYNTHETIC."""

import csv
import io
import re

import pytest
from django.core import mail
from django.utils import timezone

from corrections.review import approve
from outbox import dispatch
from replies.models import ReplyLink
from shelf import quarantine
from shelf.selectors import recall_shelf_by_day, recall_shelf_summary
from tests.factories import RECALL
from tests.shelf.test_shelf_worklist import RECALL as SHELF_RECALL
from tests.shelf.test_shelf_worklist import shelf_world  # noqa: F401 (a fixture)
from worklist import charts, glance, recall_pages, recall_report

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]

LINK = re.compile(r"/r/([A-Za-z0-9_-]{22})")


def _glance(number):
    page = recall_pages.recall_page(number)
    return glance.recall_glance(number, exposed=page.exposed, deadline=page.deadline)


@pytest.fixture
def letters_out(client, drafts, people, settings):
    """All three drafts approved; SYN-A's and SYN-B's emails go, SYN-D's SMS fails (SMS not configured);
    SYN-A answers "returned" through the letter's link."""
    settings.UNSAY_SMS_TO_FILE = False
    for correction in drafts.values():
        approve(correction.pk, user=people["pharmacist"])
    dispatch.dispatch_ready()
    email = next(m for m in mail.outbox if drafts["SYN-A"].message.recipient in m.to)
    assert client.post(f"/r/{LINK.search(email.body).group(1)}", {"answer": "returned"}).status_code == 200
    assert ReplyLink.objects.count() == 2
    return drafts


def test_the_funnel_is_the_pages_exposed_and_the_reply_counts(letters_out):
    g = _glance(RECALL)
    funnel = {s.key: s.count for s in g.funnel}
    assert funnel == {"exposed": 3, "notified": 3, "delivered": 2, "replied": 1, "replied_stopped": 0,
                      "replied_still_have": 0, "replied_question": 0, "replied_returned": 1}
    assert funnel["exposed"] == recall_pages.recall_page(RECALL).exposed
    counts = recall_report.reply_effectiveness(RECALL)
    assert all(funnel[key] == counts[key] for key in funnel if key != "exposed")


def test_the_patient_timeline_adds_up_to_the_funnel_on_the_days_things_happened(letters_out):
    g = _glance(RECALL)
    today = timezone.localdate()
    assert [day for day, _ in g.patients.days] == [today]
    assert g.patients.totals == {"notified": 3, "delivered": 2, "replied": 1, "returned": 1}
    assert g.deadline.state == "due" and g.deadline_day >= today


def test_running_totals_add_up_day_by_day():
    from datetime import date

    timeline = glance.running_totals(glance.SHELF_SERIES, {date(2026, 12, 7): {"received": 2, "dispensed": 1},
                                                           date(2026, 12, 5): {"received": 4}})
    assert timeline.rows() == [(date(2026, 12, 5), [4, 0, 0, 0]), (date(2026, 12, 7), [6, 0, 0, 1])]
    assert glance.running_totals(glance.SHELF_SERIES, {}).totals == {k: 0 for k, _ in glance.SHELF_SERIES}


def test_the_shelf_timeline_ends_at_the_shelf_summary(shelf_world, people):  # noqa: F811
    before = dict(recall_shelf_by_day(SHELF_RECALL))
    assert sum(d["received"] for d in before.values()) == recall_shelf_summary(SHELF_RECALL)["received"] == 4
    assert sum(d["dispensed"] for d in before.values()) == recall_shelf_summary(SHELF_RECALL)["dispensed"] == 1
    quarantine.confirm_quarantine(shelf_world, counted=3, user=people["pharmacist"])
    quarantine.confirm_return(shelf_world, counted=3, user=people["pharmacist"])
    totals = glance.shelf_timeline(SHELF_RECALL).totals
    summary = recall_shelf_summary(SHELF_RECALL)
    assert totals == {"received": 4, "quarantined": 3, "returned": 3, "dispensed": 1}
    assert (totals["received"], totals["returned"], totals["dispensed"]) == (
        summary["received"], summary["returned"], summary["dispensed"])


def test_the_funnel_chart_labels_every_bar_with_its_stage_and_count(letters_out):
    g = _glance(RECALL)
    svg = charts.funnel_svg(g.funnel, title="Funnel", chart_id="f")
    assert svg.startswith("<svg") and 'role="img"' in svg and 'aria-labelledby="f-title"' in svg
    for text in ("Exposed: 3", "Letter approved: 3", "Delivered: 2", "Replied: 1", "Replied: returned: 1"):
        assert f">{text}</text>" in svg
    # A hatch per stage after the first: colour is not the only cue.
    assert len(re.findall(r'<pattern id="f-p\d"', svg)) == len(g.funnel) and svg.count("<path d=") >= 7


def test_the_timeline_chart_marks_the_class_i_deadline_and_only_for_class_i(letters_out, shelf_world):  # noqa: F811
    g = _glance(RECALL)
    svg = charts.timeline_svg(g.patients, title="Patients", chart_id="t", deadline_day=g.deadline_day)
    assert f"Class I deadline {g.deadline_day:%m-%d}" in svg and "Letter approved (3)" in svg and "Delivered (2)" in svg
    assert 'stroke-dasharray="8 4"' in svg  # the second series is dashed, in the legend too
    shelf = _glance(SHELF_RECALL)  # Class II: no deadline
    assert shelf.deadline_day is None
    assert "deadline" not in charts.timeline_svg(shelf.shelf, title="Shelf", chart_id="s", deadline_day=None)


def test_the_pages_show_the_charts_and_the_numbers_beside_them(client, people, letters_out):
    client.force_login(people["pharmacist"])
    for url in (f"/worklist/recall/{RECALL}", f"/worklist/report/{RECALL}"):
        page = client.get(url).content.decode()
        assert page.count('<svg xmlns="http://www.w3.org/2000/svg"') == 2  # funnel and patients; no shelf here
        assert re.search(r'data-stage="delivered"><th scope="row">Delivered</th><td class="num">2<', page)
        assert 'id="glance-csv-link"' in page and "Class I deadline" in page
    report = client.get(f"/worklist/report/{RECALL}").content.decode()
    assert '<td id="n-delivered">2</td>' in report  # the letters table reads the same counts


def test_the_glance_csv_has_the_charts_figures(client, people, letters_out):
    client.force_login(people["pharmacist"])
    response = client.get(f"/worklist/glance.csv/{RECALL}")
    assert response.status_code == 200 and "recall-D-0315-2019-glance.csv" in response["Content-Disposition"]
    header, *rows = csv.reader(io.StringIO(response.content.decode()))
    assert header == glance.GLANCE_COLUMNS
    funnel = {r[3]: int(r[4]) for r in rows if r[1] == "funnel"}
    assert funnel == {s.key: s.count for s in _glance(RECALL).funnel}
    today = timezone.localdate().isoformat()
    by_day = {(r[2], r[3]): int(r[4]) for r in rows if r[1] == "patients_by_day"}
    assert by_day[(today, "delivered")] == 2 and by_day[(today, "returned")] == 1
    assert [r[3] for r in rows if r[1] == "deadline"] == ["class1_deadline"]


def test_staff_cannot_read_the_glance_csv(client, people, drafts):
    client.force_login(people["staff"])
    assert client.get(f"/worklist/glance.csv/{RECALL}").status_code == 403


def test_a_line_runs_on_flat_to_today():
    from datetime import date

    def last_tick(**kwargs):
        svg = charts.timeline_svg(timeline, title="Shelf", chart_id="s", **kwargs)
        return max(re.findall(r">(\d{2}-\d{2})</text>", svg))

    timeline = glance.running_totals(glance.SHELF_SERIES, {date(2026, 11, 20): {"received": 4}})
    assert last_tick() < "11-25" <= "12-05" <= last_tick(today=date(2026, 12, 5))
    assert last_tick(today=date(2026, 11, 20)) == last_tick()  # today is the last day: nothing to run on
    assert charts.timeline_svg(glance.running_totals(glance.SHELF_SERIES, {}), title="x", chart_id="e") == ""
