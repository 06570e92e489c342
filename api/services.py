"""What an API key may do, for the HTTP API and the MCP tools alike. Every function takes the
verified ApiKey (identity from the bearer token only) and raises problems.Problem on refusal.

    authenticate(secret) -> ApiKey                         401 unless an active key (an erased patient's: audited)
    take_request(key)                                      429 past UNSAY_API_RATE_PER_MINUTE (database-counted)
    ask(key, question, *, subject, patient_ref) -> Decision   model calls count against ask.services's caps
    visible_decision(key, public_id) -> Decision           404 for another client's (or patient's) decision
    decision_detail(decision) -> dict                      verdict, status, reads, premises, inputs, corrections
    check(key, public_ids) -> list[dict]                   still standing? if not, what changed
    replay(key, public_id, at) -> dict                     what we believed at `at` (bitemporal route)
    record_dispensing(key, fields, *, actor) -> (DispensingRecord, warning)
    require_site(key, site)                                403 unless a pharmacy key whose client holds the site
    recall_exposure(key, recall_number) -> list[dict]      pharmacist-scoped keys only
"""

import logging
import uuid
from datetime import datetime

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from api import problems
from ask import keys, rate_limits
from ask import services as ask_module
from ask.models import ApiKey, ClientPatient
from core.retry import run_in_transaction
from corrections.models import Correction
from corrections.sweep.staleness import DISPENSING_CHANGED, RETRACTED_READ, stale_reasons
from memory.models import Decision, Fact
from memory.replay import bitemporal_route
from patients.dispensing import save_dispensing
from patients.erasure import is_erased
from patients.forms import DispensingRecordForm
from patients.models import DispensingRecord, Patient
from patients.selectors import attach_patients
from patients.services import exposed_patients_for_recall, recall_warning
from privacy.keys import refuse_erased_key

log = logging.getLogger(__name__)

MAX_CHECK_IDS = 100


# --- identity and limits ------------------------------------------------------------------------

def authenticate(secret: str | None) -> ApiKey:
    key = keys.verify_key(secret)
    if refuse_erased_key(secret, key) or key is None:
        raise problems.unauthenticated()
    return key


def take_request(key: ApiKey, *, now=None) -> None:
    """Count one request for this key in the current minute, across every process (ask.rate_limits); refuse
    past the limit."""
    now = now or timezone.now()
    limit = settings.UNSAY_API_RATE_PER_MINUTE
    if not rate_limits.take(f"apikey:{key.pk}", "minute", limit, now=now):
        raise problems.rate_limited(rate_limits.seconds_left("minute", now), limit)


# --- patients and decisions a key may see -------------------------------------------------------

def _patient_by_ref(ref: str) -> Patient | None:
    ref = str(ref).strip()
    query = Q(external_ref=ref)
    try:
        query |= Q(public_id=uuid.UUID(ref))
    except ValueError:
        pass
    return Patient.objects.filter(query).first()


def _belongs(key: ApiKey, patient_id) -> bool:
    return ClientPatient.objects.filter(client_id=key.client_id, patient_id=patient_id).exists()


def patient_for(key: ApiKey, requested: str | None) -> Patient:
    """The patient a request is about. A patient-bound key answers for its own patient only and
    never takes the patient from the request; a pharmacy key names one of its client's patients."""
    if key.kind == ApiKey.Kind.PATIENT:
        if requested not in (None, "") and _patient_by_ref(requested) != key.patient:
            raise problems.forbidden("This key answers only for its own patient; don't name another.")
        if not _belongs(key, key.patient_id):
            raise problems.forbidden("This key's patient is no longer a patient of its client.")
        return key.patient
    if requested in (None, ""):
        raise problems.invalid('A pharmacy key must name the patient ("patient": "<reference>").')
    patient = _patient_by_ref(requested)
    # An erased patient is no patient of anyone's: asked about by the reference erasure left, they are
    # refused as unknown, and nothing asked is stored.
    if patient is None or not _belongs(key, patient.pk) or is_erased(patient):
        raise problems.not_found("No such patient for this key.")
    return patient


def _can_see(key: ApiKey, decision: Decision) -> bool:
    if decision.patient_id is None:
        return False
    if key.kind == ApiKey.Kind.PATIENT and decision.patient_id != key.patient_id:
        return False
    return _belongs(key, decision.patient_id)


def visible_decision(key: ApiKey, public_id) -> Decision:
    """The decision, if this key may see it; otherwise 404, exactly as if it did not exist."""
    decision = Decision.objects.filter(public_id=public_id).first()
    if decision is None or not _can_see(key, decision):
        raise problems.not_found("No such decision for this key.")
    return attach_patients([decision])[0]  # a decision holds its patient by id (patients.selectors)


# --- ask ----------------------------------------------------------------------------------------

def ask(key: ApiKey, question: str, *, subject: str | None = None, patient_ref: str | None = None) -> Decision:
    patient = patient_for(key, patient_ref)
    return ask_module.ask(patient, question, subject=subject or None, client=key.client)


def ask_each(key: ApiKey, question: str, *, subject: str | None = None, patient_ref: str | None = None) -> dict:
    """AskOut: one decision per medicine the question names (ask.services.ask_each), the first in full
    at the top level as a single-medicine answer has always been."""
    patient = patient_for(key, patient_ref)
    details = [decision_detail(d) for d in ask_module.ask_each(patient, question, subject=subject or None,
                                                                client=key.client)]
    return dict(details[0], decisions=details)


# --- a decision in full ---------------------------------------------------------------------------

def current_of(decision: Decision) -> Decision:
    """Follow replaced_by to the decision that stands now (the chain is short: one per re-decision)."""
    current, hops = decision, 0
    while hops < 1000:
        following = Decision.objects.filter(replaces=current).first()
        if following is None:
            return current
        current, hops = following, hops + 1
    return current


def _fact_ref(fact: Fact | None) -> dict | None:
    if fact is None:
        return None
    return {"fact_key": fact.fact_key, "version": fact.version, "statement": fact.statement,
            "asserted_at": fact.asserted_at, "retracted_at": fact.retracted_at}


def _latest(fact: Fact) -> Fact | None:
    """The version of fact's key believed now (None if the key was retracted without a successor)."""
    return Fact.objects.believed().defer("embedding").filter(fact_key=fact.fact_key).first()


def decision_summary(decision: Decision) -> dict:
    return {"id": decision.public_id, "verdict": decision.verdict, "status": decision.status,
            "decided_at": decision.decided_at}


def _corrections_of(decision: Decision) -> list[dict]:
    rows = (Correction.objects.filter(old_decision=decision).select_related("trigger_fact", "previous_fact",
                                                                             "new_decision")
            .defer("trigger_fact__embedding", "previous_fact__embedding").order_by("created"))
    return [{
        "id": c.public_id, "kind": c.kind, "status": c.status, "old_verdict": c.old_verdict,
        "new_verdict": c.new_verdict, "recall_number": c.recall_number, "classification": c.classification,
        "changed_fact": _fact_ref(c.trigger_fact), "previous_fact": _fact_ref(c.previous_fact),
        "diff": c.diff if isinstance(c.diff, list) else [],
        "new_decision": c.new_decision.public_id if c.new_decision_id else None,
        # Only what a pharmacist approved is the patient's to read; a draft may still be edited or rejected.
        "text": c.text if c.status in (Correction.Status.APPROVED, Correction.Status.SENT) else None,
        "created": c.created,
    } for c in rows]


def decision_detail(decision: Decision) -> dict:
    replaced_by = Decision.objects.filter(replaces=decision).first()
    current = current_of(decision) if replaced_by else decision
    reads = decision.reads.select_related("fact").defer("fact__embedding").order_by("rank")
    fingerprints = dict(DispensingRecord.objects.filter(
        pk__in=decision.inputs.values_list("dispensing_id", flat=True)).values_list("pk", "fingerprint"))
    return {
        "id": decision.public_id,
        "patient": decision.patient.external_ref if decision.patient_id else None,
        "question": decision.question, "subject": decision.subject, "verdict": decision.verdict,
        "answer": decision.answer, "reasoner": decision.reasoner,
        "guardrail_override": decision.guardrail_override, "status": decision.status,
        "decided_at": decision.decided_at, "superseded_at": decision.superseded_at,
        "replaces": decision.replaces.public_id if decision.replaces_id else None,
        "superseded_by": decision_summary(replaced_by) if replaced_by else None,
        "current": decision_summary(current),
        "reads": [{
            "rank": r.rank, "fact_key": r.fact_key, "version": r.fact_version, "load_bearing": r.load_bearing,
            "score": r.score, "kind": r.fact.kind, "statement": r.fact.statement,
            "believed_now": r.fact.retracted_at is None, "retracted_at": r.fact.retracted_at,
        } for r in reads],
        "premises": sorted(decision.premises.values_list("scope", flat=True)),
        "inputs": [{"dispensing_id": i.dispensing_id, "fingerprint": i.fingerprint,
                    "unchanged": fingerprints.get(i.dispensing_id) == i.fingerprint}
                   for i in decision.inputs.order_by("dispensing_id")],
        "corrections": _corrections_of(decision),
    }


# --- check: still standing? ---------------------------------------------------------------------

def stale_changes(decision: Decision) -> list[dict]:
    """What changed under a decision since it was made, from the sweep's own stale-set query
    (corrections.sweep.staleness.stale_reasons), so "still valid?" and the sweep never disagree."""
    order = {RETRACTED_READ: 0, "new_fact": 1, DISPENSING_CHANGED: 2}
    reasons = sorted(stale_reasons([decision.id], standing_only=False)[decision.id],
                     key=lambda r: order.get(r.kind, 9))
    facts = Fact.objects.defer("embedding").in_bulk([r.fact_id for r in reasons if r.fact_id])
    changes = []
    for reason in reasons:
        if reason.kind == RETRACTED_READ:
            fact = facts[reason.fact_id]
            changes.append({"kind": reason.kind, "read": _fact_ref(fact), "now": _fact_ref(_latest(fact)),
                            "reason": fact.retraction_reason})
        elif reason.kind == DISPENSING_CHANGED:
            changes.append({"kind": reason.kind, "read": None, "now": None, "reason": "dispensing changed",
                            "dispensing_id": reason.dispensing_id})
        else:
            changes.append({"kind": reason.kind, "read": None, "now": _fact_ref(facts[reason.fact_id]), "reason": ""})
    return changes


def check_one(decision: Decision) -> dict:
    replaced_by = Decision.objects.filter(replaces=decision).first()
    current = current_of(decision) if replaced_by else decision
    changes = stale_changes(decision)
    if decision.status == Decision.Status.SUPERSEDED:
        state = "superseded"
    elif changes:
        state = "stale"  # standing, but what it rests on changed; the sweep will re-decide it
    else:
        state = "standing"
    return {"id": decision.public_id, "standing": state == "standing", "state": state,
            "verdict": decision.verdict, "changes": changes,
            "current": decision_summary(current) if current.pk != decision.pk else None,
            "current_verdict": current.verdict, "corrections": _corrections_of(decision)}


def check(key: ApiKey, public_ids) -> list[dict]:
    ids = list(dict.fromkeys(public_ids))
    if not ids or len(ids) > MAX_CHECK_IDS:
        raise problems.invalid(f"Send between 1 and {MAX_CHECK_IDS} decision ids.")
    return [check_one(visible_decision(key, public_id)) for public_id in ids]


# --- replay ---------------------------------------------------------------------------------------

def replay(key: ApiKey, public_id, at: datetime | None = None) -> dict:
    decision = visible_decision(key, public_id)
    at = at or decision.decided_at
    if timezone.is_naive(at):
        raise problems.invalid("`at` needs a time zone (e.g. 2026-12-01T10:00:00Z).")
    if at > timezone.now():
        raise problems.invalid(f"{at.isoformat()} is in the future; replay answers for past instants only.")
    read_keys = sorted(set(decision.reads.values_list("fact_key", flat=True)))
    route = bitemporal_route(at, fact_keys=read_keys)
    return {"decision": decision.public_id, "at": at, "decided_at": decision.decided_at, "route": route.route,
            "read_set": [{"fact_key": r.fact_key, "version": r.fact_version, "load_bearing": r.load_bearing}
                         for r in decision.reads.order_by("rank")],
            "believed": [{k: row[k] for k in ("fact_key", "version", "statement", "asserted_at", "retracted_at")}
                         for row in route.rows]}


# --- dispensing -----------------------------------------------------------------------------------

def record_dispensing(key: ApiKey, fields: dict, *, actor: str):
    """Validate with the admin's DispensingRecordForm (the same model clean() the CSV import runs),
    refuse a duplicate as the CSV import does, then write through patients.dispensing.save_dispensing
    so the sweep is triggered exactly as for the admin. Returns (record, recall warning or '')."""
    patient = patient_for(key, fields.get("patient"))
    if key.kind != ApiKey.Kind.PHARMACY:
        raise problems.forbidden("Only a pharmacy key records dispensing.")
    data = {name: ("" if fields.get(name) is None else fields[name])
            for name in ("drug", "product_description", "ndc", "lot", "expiry", "quantity", "dispensed_at", "site")}
    form = DispensingRecordForm(data={**data, "patient": patient.pk})
    if not form.is_valid():
        errors = [{"field": name, "message": str(message)}
                  for name, messages in form.errors.get_json_data().items() for message in
                  [m["message"] for m in messages]]
        raise problems.invalid("The dispensing record is not valid.", errors=errors)
    record = form.save(commit=False)
    if DispensingRecord.objects.filter(patient=patient, drug=record.drug, lot=record.lot,
                                       dispensed_at=record.dispensed_at).exists():
        raise already_recorded(record)
    run_in_transaction(lambda: save_dispensing(record, actor=actor))
    return record, recall_warning([record])


def already_recorded(record) -> problems.Problem:
    return problems.Problem(409, "already-recorded", "This dispensing is already recorded",
                            f"Lot {record.lot} of {record.drug} dispensed at {record.dispensed_at:%Y-%m-%d %H:%M} UTC "
                            "is already on file for this patient.")


# --- stock at a site -----------------------------------------------------------------------------

def require_site(key: ApiKey, site: str) -> None:
    """Stock is changed only at a site the key's client holds (ask.models.ClientSite), whatever the
    document says about the units: a key of one branch never moves another branch's units."""
    if key.kind != ApiKey.Kind.PHARMACY:
        raise problems.forbidden("Receiving EPCIS needs a pharmacy key.")
    if not keys.holds_site(key, site):
        raise problems.site_not_held(site)


# --- exposure -------------------------------------------------------------------------------------

def recall_exposure(key: ApiKey, recall_number: str) -> dict:
    if key.kind != ApiKey.Kind.PHARMACY or not key.pharmacist_scope:
        raise problems.forbidden("Recall exposure needs a pharmacist-scoped pharmacy key.")
    if not Fact.objects.filter(kind=Fact.Kind.RECALL, attributes__recall_number=recall_number).exists():
        raise problems.not_found(f"No recall {recall_number} on file.")
    mine = set(ClientPatient.objects.filter(client_id=key.client_id).values_list("patient_id", flat=True))
    exposures = [e for e in exposed_patients_for_recall(recall_number) if e.patient.pk in mine]
    return {"recall_number": recall_number, "patients": [{
        "patient": e.patient.external_ref, "match": e.match, "why": e.why, "fact_key": e.fact.fact_key,
        "fact_version": e.fact.version,
        "dispensings": [{"id": d.pk, "drug": d.drug, "lot": d.lot, "ndc": d.ndc, "dispensed_at": d.dispensed_at}
                        for d in e.dispensings],
    } for e in exposures]}
