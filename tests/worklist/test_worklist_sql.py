"""The recall page's and report's SQL path (per-patient state as one GROUP BY, only the page read)
against the Python definition (patient_lines / report over every patient, exposure through
patients.services.exposed_patients_for_recall) on the real D-0315-2019 valsartan recall, with
synthetic patients in every match class and every contact state."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from corrections.models import Correction, OutboxMessage
from drugs import recall_terms
from drugs.ndc import ndc_product
from memory.fact_writes import assert_claim
from memory.models import Fact
from patients.models import Patient
from tests.factories import LOT, OTHER_LOT, OTHER_RECALL, RECALL, make_patient, recall_claim
from worklist import exposure, patient_state, recall_list, recall_pages, recall_report
from worklist.models import ContactAttempt

pytestmark = pytest.mark.django_db(transaction=True)
DRUG = "Valsartan Tablets USP 40 mg"
AT = datetime(2019, 1, 5, tzinfo=UTC)


def _patient(ref, name, dispensed=(), channel="email"):
    return make_patient(ref, dispensed, name=f"Synthetic {name}", channel=channel, dispensed_at=AT)


def _draft(patient, fact, *, status="draft", message=None, match="lot", match_class="", recall=RECALL):
    c = Correction.objects.create(kind="notice", status=status, patient=patient, region=patient.region, match=match,
                                  match_class=match_class, recall_number=recall, classification="Class II",
                                  severity=2, new_verdict="caution", new_answer="synthetic", trigger_fact=fact,
                                  drafted_text="Synthetic letter.", dedupe_key=f"{patient.external_ref}-{status}")
    if message:
        OutboxMessage.objects.create(correction=c, region=c.region, channel="email", recipient=patient.email,
                                     subject="s", body="b", dedupe_key=c.dedupe_key, status=message)
    return c


@pytest.fixture
def recall_data(hashing_embeddings, django_user_model):
    assert_claim(recall_claim(RECALL, LOT))
    assert_claim(recall_claim(OTHER_RECALL, OTHER_LOT))
    fact = Fact.objects.believed().get(fact_key__startswith=recall_terms.key_prefix(RECALL))
    products = recall_terms.products(fact)
    ndc = next(n for n in fact.attributes["ndcs"] if ndc_product(n) in products)  # the recall's own NDC
    user = django_user_model.objects.create(username="sql-phil")
    on_lot = {"drug": DRUG, "lot": LOT}
    p = {
        # display names out of ref order, some equal, so the page order is really tested
        "confirmed": _patient("SYN-01", "Zed", [{"drug": DRUG, "lot": LOT, "ndc": ndc}]),
        "probable_draft": _patient("SYN-02", "Amy", [on_lot]),
        "candidate": _patient("SYN-03", "Amy", [{"drug": DRUG, "lot": "", "lot_unknown": True}]),
        "sent": _patient("SYN-04", "Bob", [on_lot]),
        "approved": _patient("SYN-05", "bob", [on_lot], channel="sms"),
        "failed": _patient("SYN-06", "Émile", [on_lot]),
        "unknown": _patient("SYN-07", "Cat", [on_lot]),
        "rejected": _patient("SYN-08", "Dan", [on_lot]),
        "stale_only": _patient("SYN-09", "Eve", [on_lot]),
        "reached": _patient("SYN-10", "Fay", [on_lot]),
        "posted": _patient("SYN-11", "Gus", [on_lot]),
        "not_needed": _patient("SYN-12", "Hal", [on_lot]),
        "wrong_number": _patient("SYN-13", "Ivy", [on_lot]),
        "reached_after_fail": _patient("SYN-14", "Jo", [on_lot]),
        "other_lot": _patient("SYN-15", "Kim", [{"drug": DRUG, "lot": "3095511"}]),
        "drafted_only": _patient("SYN-16", "Lee"),  # a draft, no dispensing of this recall any more
        "drafted_classed": _patient("SYN-19", "Lee"),  # the same, the draft carrying its match class
        "contacted_only": _patient("SYN-17", "Max"),
        "other_recall": _patient("SYN-18", "Ned", [{"drug": DRUG, "lot": OTHER_LOT}]),
    }
    _draft(p["probable_draft"], fact, message="held")
    _draft(p["sent"], fact, status="sent", message="sent")
    _draft(p["approved"], fact, status="approved", message="ready")
    _draft(p["failed"], fact, status="approved", message="failed")
    _draft(p["unknown"], fact, status="approved", message="unknown")
    _draft(p["rejected"], fact, status="rejected", message="cancelled")
    _draft(p["stale_only"], fact, status="stale", message="cancelled")
    _draft(p["reached_after_fail"], fact, status="approved", message="failed")
    _draft(p["drafted_only"], fact, match="drug", match_class="")
    _draft(p["drafted_classed"], fact, match="drug", match_class="product_all_lots")
    _draft(p["other_recall"], fact, recall=OTHER_RECALL)
    for key, method, outcome in [("reached", "phone", "reached"), ("posted", "letter", "posted"),
                                 ("not_needed", "phone", "not_needed"), ("wrong_number", "phone", "wrong_number"),
                                 ("reached_after_fail", "phone", "not_reached"),
                                 ("reached_after_fail", "in_person", "reached"),
                                 ("contacted_only", "phone", "not_reached")]:
        ContactAttempt.objects.create(recall_number=RECALL, patient=p[key], method=method, outcome=outcome,
                                      note="synthetic", by=user, at=AT)
    return p


def test_exposure_grouped_in_sql_equals_the_per_row_definition(recall_data):
    grouped = exposure.exposure_classes(RECALL)
    assert grouped == exposure._exposed_patient_ids(RECALL)
    # the data really covers the classes, and leaves out what does not match
    assert {"confirmed", "probable", "candidate"} <= set(grouped.values())
    assert recall_data["other_lot"].id not in grouped and recall_data["drafted_only"].id not in grouped
    assert grouped[recall_data["candidate"].id] == "candidate"


def test_per_patient_state_in_sql_equals_the_python_definition(recall_data):
    definition = patient_state.patient_lines(RECALL, exposure=exposure._exposed_patient_ids(RECALL))
    classes = exposure.exposure_classes(RECALL)
    expected = [(ln.patient.id, ln.match_class, ln.state) for ln in definition]
    assert [tuple(r) for r in patient_state.patient_states(RECALL, classes)] == expected
    # every state of _state() occurs, so each CASE branch is compared
    assert {s for _, _, s in expected} == set(patient_state.PatientLine.STATES)
    # pages of 4, in order, materialised one at a time, are the same lines
    pages = patient_state.LinePages(RECALL, classes, len(expected))
    paged = [ln for start in range(0, len(pages), 4) for ln in pages[start:start + 4]]
    assert [(ln.patient.id, ln.match_class, ln.state) for ln in paged] == expected
    assert [len(ln.attempts()) for ln in paged] == [len(ln.attempts()) for ln in definition]
    [row] = [r for r in recall_list.worklist() if r.recall_number == RECALL]
    assert row.not_reached == sum(1 for ln in definition if ln.state == "not_reached") == 4
    klass = {pid: k for pid, k, _ in expected}
    assert klass[recall_data["drafted_only"].id] == "candidate"
    assert klass[recall_data["drafted_classed"].id] == "product_all_lots"
    assert klass[recall_data["contacted_only"].id] == "candidate"


def test_report_counts_from_the_group_by_equal_the_rows(recall_data):
    python = recall_report.report(RECALL)
    sql = recall_report.report_page(RECALL, page=2, per_page=5)
    assert sql["summary"] == python["summary"]
    assert list(sql["rows"]) == python["rows"]
    rows = python["rows"]
    summary = sql["summary"]
    assert summary["exposed"] == len(rows) == Patient.objects.filter(
        external_ref__in=[f"SYN-{i:02d}" for i in range(1, 20) if i not in (15, 18)]).count()
    assert summary["not_reached"] == sum(r["state"] not in ("reached", "notified", "not_needed") for r in rows)
    assert summary["contacted"] == sum(r["state"] not in ("none", "awaiting_review", "rejected") for r in rows)
    assert sum(summary["by_class"].values()) == len(rows)
    f = sql["file"]
    assert f.pending == Correction.objects.filter(recall_number=RECALL, status="draft").count() == 3
    assert f.unaccounted_count == summary["not_reached"]


def test_the_recall_page_reads_only_its_page(client, people, recall_data):
    client.force_login(people["pharmacist"])
    definition = patient_state.patient_lines(RECALL)
    page = client.get(f"/worklist/recall/{RECALL}").content.decode()
    assert f"{len(definition)} patients on file" in page
    assert f"{sum(1 for ln in definition if not ln.accounted)} not yet accounted for" in page
    shown = [ln for ln in definition if f'data-patient="{ln.patient.external_ref}"' in page]
    assert shown == definition[:len(shown)] and len(shown) == min(50, len(definition))
    first = definition[0].patient.public_id
    assert f'href="{reverse("worklist:patient_trail", args=[first])}"' in page
    assert f'action="{reverse("worklist:log_contact", args=[first])}"' in page
    assert page.count('<select name="outcome"') == len(shown)
    report = client.get(f"/worklist/report/{RECALL}").content.decode()
    assert f'<td id="n-not-reached">{sum(1 for ln in definition if not ln.accounted)}</td>' in report


@pytest.mark.parametrize("days_later", [0, 365 * 20])
def test_the_follow_up_page_from_sql_equals_the_python_queue(recall_data, days_later):
    from datetime import timedelta

    from django.utils import timezone

    now = timezone.now() + timedelta(days=days_later)  # 20 years on: every first attempt is old
    expected = [(number, ln.patient.id, ln.state, ln.first_attempt_at) for number, ln in
                recall_pages.follow_up_queue(now=now)]
    got = [(g["recall_number"], ln.patient.id, ln.state, ln.first_attempt_at)
           for g in recall_pages.follow_up_page(now=now) for ln in g["lines"]]
    assert got == expected and expected
    if days_later:  # attempted long ago, not yet accounted for: in the queue without being "not reached"
        assert {s for _, _, s, _ in expected} > {"not_reached"}
    capped = recall_pages.follow_up_page(now=now, per_recall=2)
    assert all(len(g["lines"]) <= 2 for g in capped)
    assert sum(g["total"] for g in capped) == len(expected)


def test_later_pages_and_out_of_range_pages_show_the_definitions_rows(client, people, recall_data,
                                                                       monkeypatch):
    from worklist import views

    monkeypatch.setattr(views, "PATIENTS_PER_PAGE", 5)
    client.force_login(people["pharmacist"])
    definition = [ln.patient.external_ref for ln in patient_state.patient_lines(RECALL)]

    def shown(query):
        page = client.get(f"/worklist/recall/{RECALL}{query}").content.decode()
        return [ref for ref in definition if f'data-patient="{ref}"' in page], page

    refs, _ = shown("?page=2")
    assert refs == definition[5:10]
    last = (len(definition) - 1) // 5
    refs, page = shown("?page=999")  # out of range: the last page, as Paginator.get_page gives
    assert refs == definition[last * 5:] and f"of {len(definition)}" in page
    report = client.get(f"/worklist/report/{RECALL}?all=1").content.decode()
    assert all(f"<td>{ref}</td>" in report for ref in definition)
