"""Readable text for drafts: the fact diff a pharmacist reviews and the message a patient reads."""

from memory.models import Fact

VERDICT_WORDS = {
    "safe": "no action is needed",
    "caution": "please take care and contact the pharmacy",
    # Never "stop taking it": some drugs must not be stopped abruptly (the reasoner says so per drug).
    "stop": "contact the pharmacy now, before your next dose",
    "unknown": "we could not confirm it is safe; please contact the pharmacy",
}
# Attributes a pharmacist cares about, in the order shown.
DIFF_FIELDS = ["classification", "status", "reason", "lot", "scope", "termination_date", "distribution",
               "product_description", "firm"]


def fact_diff(before: Fact | None, after: Fact | None) -> list[dict]:
    """[{field, before, after}] for what changed between two versions of a claim."""
    if before is None and after is None:
        return []
    b_attrs = (before.attributes or {}) if before else {}
    a_attrs = (after.attributes or {}) if after else {}
    rows = []
    if after is None:
        rows.append({"field": "believed", "before": "yes", "after": f"retracted: {before.retraction_reason}"})
    for name in DIFF_FIELDS:
        b = before.lot if (name == "lot" and before) else b_attrs.get(name)
        a = after.lot if (name == "lot" and after) else a_attrs.get(name)
        if after is not None and b != a:
            rows.append({"field": name, "before": b, "after": a})
    if before is not None and after is not None and before.statement != after.statement and not rows:
        rows.append({"field": "statement", "before": before.statement, "after": after.statement})
    return rows


def _recall_phrase(fact: Fact | None) -> str:
    if fact is None:
        return "a recall record"
    attrs = fact.attributes or {}
    bits = [attrs.get("classification", ""), "recall", attrs.get("recall_number", "")]
    return " ".join(b for b in bits if b) or fact.fact_key


def _change_phrase(previous: Fact | None, fact: Fact | None) -> str:
    """What happened, in words: 'recall D-0326-2019 was raised from Class II to Class I'."""
    if fact is None or previous is None or fact.pk == previous.pk:
        subject = fact or previous
        if subject is not None and subject.retracted_at is not None:
            return f"{_recall_phrase(subject)} no longer covers lot {subject.lot}" if subject.lot else \
                f"{_recall_phrase(subject)} was withdrawn"
        return f"{_recall_phrase(subject)} has changed"
    before, after = previous.attributes or {}, fact.attributes or {}
    number = after.get("recall_number") or before.get("recall_number") or fact.fact_key
    changes = []
    if before.get("classification") != after.get("classification"):
        rank = {"Class I": 3, "Class II": 2, "Class III": 1}
        moved = "raised" if rank.get(after.get("classification"), 0) > rank.get(before.get("classification"), 0) \
            else "changed"
        changes.append(f"was {moved} from {before.get('classification')} to {after.get('classification')}")
    if before.get("status") != after.get("status"):
        changes.append(f"is now {after.get('status')}")
    if not changes:
        return f"{_recall_phrase(fact)} has changed"
    return f"recall {number} " + " and ".join(changes)


SMS_LIMIT = 320  # two SMS segments; the full letter goes by email


def _is_sms(patient) -> bool:
    return getattr(patient, "preferred_channel", "") == "sms"


def correction_text(patient, old_verdict: str, outcome, fact: Fact | None, previous: Fact | None = None) -> str:
    drug = (fact.subject if fact else "") or outcome.subject or "your medicine"
    if _is_sms(patient):
        return _fit_sms(
            f"Your pharmacy: a correction about your {drug}. {_sentence(_change_phrase(previous, fact))}. "
            f"Our advice is now: {VERDICT_WORDS.get(outcome.verdict, outcome.verdict)}. "
            "Please call us; do not change how you take any medicine before speaking to us.")
    return (
        f"Dear {patient.display_name},\n\n"
        f"We are writing to correct an answer we gave you about {drug}. "
        f"We previously told you: {VERDICT_WORDS.get(old_verdict, old_verdict)}. "
        f"Because {_change_phrase(previous, fact)}, our answer is now: "
        f"{VERDICT_WORDS.get(outcome.verdict, outcome.verdict)}.\n\n{outcome.answer}\n\n"
        "Your pharmacy team"
    )


def notice_text(patient, match: str, outcome, fact: Fact) -> str:
    how = (f"lot {fact.lot} that was dispensed to you" if match == "lot"
           else f"{fact.subject}, which was dispensed to you (the recall names no specific lot)")
    if _is_sms(patient):
        return _fit_sms(
            f"Your pharmacy: {_recall_phrase(fact)} now affects {how}. "
            f"Our advice: {VERDICT_WORDS.get(outcome.verdict, outcome.verdict)}. "
            "Please call us; do not change how you take any medicine before speaking to us.")
    return (
        f"Dear {patient.display_name},\n\n"
        f"{_recall_phrase(fact)} now affects {how}. Our advice: "
        f"{VERDICT_WORDS.get(outcome.verdict, outcome.verdict)}.\n\n{outcome.answer}\n\n"
        "Your pharmacy team"
    )


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _fit_sms(text: str) -> str:
    return text if len(text) <= SMS_LIMIT else text[: SMS_LIMIT - 1].rstrip() + "…"
