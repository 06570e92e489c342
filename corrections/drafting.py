"""Readable text for drafts: the fact diff a pharmacist reviews and the message a patient reads.

Letters are Django templates (templates/letters/): email text, email HTML and SMS. Their words come
from here: one headline and one instruction per verdict (never contradicting each other), what to do
with the pack, a plain-language glossary for FDA reasons (the FDA's own words kept as a quoted
detail), and the pharmacy's name, phone, address and sender from settings (UNSAY_PHARMACY_*).
"""

import re

from django.conf import settings
from django.template.loader import render_to_string
from django.utils.translation import gettext as _

from memory.models import Fact


# What we ask of the patient, per verdict: a headline and the one instruction under it. Never "stop
# taking it": some drugs must not be stopped abruptly, so even the most serious verdict says "call
# us before your next dose", and the headline says the same thing.
def verdict_headline(verdict: str) -> str:
    return {
        "safe": _("No action needed"),
        "caution": _("Please contact us about your medicine"),
        "stop": _("Call us before your next dose"),
        "unknown": _("Please contact us so we can check your medicine"),
    }.get(verdict, _("Please contact us about your medicine"))


def verdict_instruction(verdict: str, drug: str, phone: str) -> str:
    return {
        "safe": _("You can keep taking your %(drug)s as prescribed. You do not need to do anything.")
        % {"drug": drug},
        "caution": _("Keep taking your %(drug)s as prescribed, and call us on %(phone)s in the next few days "
                     "so we can check your pack.") % {"drug": drug, "phone": phone},
        "stop": _("Please call us on %(phone)s before you take your next dose of %(drug)s. Do not change how "
                  "you take it until we have spoken: we will tell you what to do.")
        % {"drug": drug, "phone": phone},
        "unknown": _("Keep taking your %(drug)s as prescribed, and call us on %(phone)s so we can check which "
                     "pack you have.") % {"drug": drug, "phone": phone},
    }.get(verdict, _("Please call us on %(phone)s.") % {"phone": phone})


def pack_instruction(verdict: str) -> str:
    if verdict == "safe":
        return _("You can keep using the pack you have.")
    if verdict == "stop":
        return _("Please bring the pack back to the pharmacy, even if it is opened or empty. "
                 "We will replace it free of charge.")
    return _("Keep the pack for now and bring it with you when you come in. If it is affected, "
             "we will replace it free of charge.")


def sms_instruction(verdict: str) -> str:
    return {
        "safe": _("No action needed."),
        "caution": _("Keep taking it; please call us this week."),
        "stop": _("Do not change how you take it until we have spoken."),
        "unknown": _("Keep taking it; please call us so we can check your pack."),
    }.get(verdict, _("Please call us."))


# FDA recall reasons in plain words. The FDA's own text is kept as a quoted detail; these lines are
# what the letter says. Order matters: the first match wins.
GLOSSARY = [
    (r"\bN-?nitroso|\bNDEA\b|\bNDMA\b|\bNMBA\b|nitrosamine",
     "an impurity was found that may raise the risk of cancer if taken for a long time"),
    (r"c?GMP|current good manufacturing", "it was not made to the required quality standards"),
    (r"sub-?potent", "it may contain less medicine than it should"),
    (r"super-?potent", "it may contain more medicine than it should"),
    (r"steril", "it may not be sterile"),
    (r"microbial|bacteria|contaminat|mold|fung", "it may be contaminated"),
    (r"dissolution", "it may not dissolve in the body as it should"),
    (r"impurit|degradation", "it may contain an impurity above the allowed limit"),
    (r"foreign|particulate", "something that should not be there was found in it"),
    (r"label|mislabel|packag", "there is a mistake on the label or packaging"),
    (r"stability", "it may not stay effective until its expiry date"),
]
JARGON = ["CGMP", "GMP", "NDEA", "NDMA", "NMBA", "subpotent", "superpotent", "dissolution", "Class I",
          "Class II", "Class III"]
CLASS_PLAIN = {
    "Class I": "the most serious kind of recall: the product could cause serious health problems",
    "Class II": "a recall because the product could cause temporary health problems",
    "Class III": "a recall of a product unlikely to cause health problems",
}


def plain_reason(reason: str) -> str:
    for pattern, plain in GLOSSARY:
        if re.search(pattern, reason or "", re.IGNORECASE):
            return _(plain)
    return _("the maker found a problem with it")


def pharmacy() -> dict:
    return {"name": settings.UNSAY_PHARMACY_NAME, "phone": settings.UNSAY_PHARMACY_PHONE,
            "address": settings.UNSAY_PHARMACY_ADDRESS, "sender": settings.UNSAY_PHARMACY_SENDER,
            "email": settings.UNSAY_PHARMACY_EMAIL}


def sms_limit() -> int:
    return settings.UNSAY_SMS_LIMIT


def drug_words(subject: str) -> str:
    """'amlodipine+valsartan' (an identity key) -> 'amlodipine and valsartan'."""
    parts = [p for p in (subject or "").split("+") if p]
    if not parts:
        return _("medicine")
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " " + _("and") + " " + parts[-1]
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


# --- letters ------------------------------------------------------------------------------------


def _channel(patient, channel=None) -> str:
    return channel or getattr(patient, "preferred_channel", "") or "email"


def _plain_change(previous: Fact | None, fact: Fact | None) -> str:
    """What changed, for a patient: no recall numbers or class codes without their meaning."""
    after = (fact.attributes or {}) if fact else {}
    before = (previous.attributes or {}) if previous else {}
    if fact is not None and fact.retracted_at is not None and fact.lot:
        return _("the recall no longer covers the batch (lot %(lot)s) you received") % {"lot": fact.lot}
    if before.get("classification") != after.get("classification") and after.get("classification"):
        return _("the recall has been raised to %(plain)s") % {
            "plain": CLASS_PLAIN.get(after["classification"], after["classification"])}
    if before.get("status") != after.get("status") and after.get("status") in ("Terminated", "Completed"):
        return _("the recall has ended")
    return _("the recall information has changed")


def letter_context(patient, verdict: str, fact: Fact | None, *, kind: str, match: str = "",
                   old_verdict: str = "", previous: Fact | None = None, subject: str = "") -> dict:
    attrs = (fact.attributes or {}) if fact else {}
    drug = drug_words((fact.subject if fact else "") or subject)
    p = pharmacy()
    how = ""
    if kind == "notice":
        how = (_("the batch (lot %(lot)s) of %(drug)s we gave you") % {"lot": fact.lot, "drug": drug}
               if match == "lot" and fact is not None and fact.lot else
               _("%(drug)s, which we gave you (the recall covers every batch)") % {"drug": drug})
    return {
        "pharmacy": p, "patient_name": patient.display_name, "drug": drug, "kind": kind, "how": how,
        "headline": verdict_headline(verdict), "instruction": verdict_instruction(verdict, drug, p["phone"]),
        "pack": pack_instruction(verdict), "sms_instruction": sms_instruction(verdict), "verdict": verdict,
        "old_headline": verdict_headline(old_verdict) if old_verdict else "",
        "change": _plain_change(previous, fact) if kind == "correction" else "",
        "recall_plain": CLASS_PLAIN.get(attrs.get("classification", ""), _("a recall")),
        "reason_plain": plain_reason(attrs.get("reason", "")), "reason_quoted": (attrs.get("reason") or "").strip(),
        "recall_number": attrs.get("recall_number", ""), "firm": attrs.get("firm", ""),
    }


def _render(name: str, context: dict) -> str:
    text = render_to_string(name, context).strip()
    return re.sub(r"\n{3,}", "\n\n", re.sub(r"[ \t]+\n", "\n", text))


def render_letter(context: dict, channel: str) -> str:
    if channel == "sms":
        return fit_sms(context)
    return _render("letters/email.txt", context)


def letter_html(text: str, *, context: dict | None = None) -> str:
    """The HTML part of an email: exactly the reviewed text (paragraphs kept), with the pharmacy's
    name and contact details around it. Built from the text so an edit shows in both parts."""
    paragraphs = [p.strip() for p in (text or "").split("\n\n") if p.strip()]
    return render_to_string("letters/email.html", {"paragraphs": paragraphs, "pharmacy": pharmacy(),
                                                   **(context or {})})


def fit_sms(context: dict) -> str:
    """The SMS, within the hard limit: drop optional parts before ever cutting words."""
    limit = sms_limit()
    for variant in ("full", "short", "minimal"):
        text = _render("letters/sms.txt", {**context, "variant": variant})
        if len(text) <= limit:
            return text
    return text[: limit - 1].rstrip() + "…"


def correction_text(patient, old_verdict: str, outcome, fact: Fact | None, previous: Fact | None = None,
                    *, channel: str | None = None) -> str:
    context = letter_context(patient, outcome.verdict, fact, kind="correction", old_verdict=old_verdict,
                             previous=previous, subject=getattr(outcome, "subject", ""))
    return render_letter(context, _channel(patient, channel))


def notice_text(patient, match: str, outcome, fact: Fact, *, channel: str | None = None) -> str:
    context = letter_context(patient, outcome.verdict, fact, kind="notice", match=match,
                             subject=getattr(outcome, "subject", ""))
    return render_letter(context, _channel(patient, channel))
