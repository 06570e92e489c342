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
from django.utils.translation import gettext_noop, override

from drugs.recall_terms import CLASS_SEVERITY
from memory.models import Fact
from recalls.selectors import recall_attributes


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
     gettext_noop("an impurity was found that may raise the risk of cancer if taken for a long time")),
    (r"c?GMP|current good manufacturing", gettext_noop("it was not made to the required quality standards")),
    (r"sub-?potent", gettext_noop("it may contain less medicine than it should")),
    (r"super-?potent", gettext_noop("it may contain more medicine than it should")),
    (r"steril", gettext_noop("it may not be sterile")),
    (r"microbial|bacteria|contaminat|mold|fung", gettext_noop("it may be contaminated")),
    (r"dissolution", gettext_noop("it may not dissolve in the body as it should")),
    (r"impurit|degradation", gettext_noop("it may contain an impurity above the allowed limit")),
    (r"foreign|particulate", gettext_noop("something that should not be there was found in it")),
    (r"label|mislabel|packag", gettext_noop("there is a mistake on the label or packaging")),
    (r"stability", gettext_noop("it may not stay effective until its expiry date")),
]
JARGON = ["CGMP", "GMP", "NDEA", "NDMA", "NMBA", "subpotent", "superpotent", "dissolution", "Class I",
          "Class II", "Class III"]
CLASS_PLAIN = {
    "Class I": gettext_noop("the most serious kind of recall: the product could cause serious health problems"),
    "Class II": gettext_noop("a recall because the product could cause temporary health problems"),
    "Class III": gettext_noop("a recall of a product unlikely to cause health problems"),
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
    # The texts (reason, firm, ...) as believed in each version, whether inline or referred to.
    b_attrs, a_attrs = recall_attributes(before), recall_attributes(after)
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


# --- letters ------------------------------------------------------------------------------------


def _channel(patient, channel=None) -> str:
    # Patient.contact's channel; also for the stand-in patient a set-based page renders a letter for.
    return channel or getattr(patient, "preferred_channel", "") or "email"


CLOSED = ("Terminated", "Completed")


def what_changed(previous: Fact | None, fact: Fact | None, *, dispensing_changed: bool = False) -> str:
    """What changed, for a patient, in words that are true of this change only: no recall numbers or
    class codes without their meaning, "raised" only when the class went up, nothing about the recall
    when what changed was our record of their medicine."""
    if dispensing_changed:
        return _("we have updated our record of the medicine we gave you")
    if fact is not None and fact.retracted_at is not None:
        return (_("the recall no longer includes lot %(lot)s") % {"lot": fact.lot}
                if fact.lot else _("the recall has been withdrawn"))
    after = (fact.attributes or {}) if fact else {}
    if fact is not None and getattr(fact, "kind", "recall") == Fact.Kind.LABEL:
        return _("new safety information has been added to its label")
    if previous is None:
        return _("a recall has been announced") if after.get("status") not in CLOSED else \
            _("we have learned of a recall, since closed by the FDA")
    before = previous.attributes or {}
    changes = []
    old_class, new_class = before.get("classification", ""), after.get("classification", "")
    if old_class != new_class and new_class in CLASS_PLAIN:
        moved = CLASS_SEVERITY.get(new_class, 0) - CLASS_SEVERITY.get(old_class, 0)
        changes.append((_("the recall has been raised to %(plain)s") if moved > 0 else
                        _("the recall has been lowered to %(plain)s")) % {"plain": _(CLASS_PLAIN[new_class])})
    closed_before, closed_now = before.get("status") in CLOSED, after.get("status") in CLOSED
    if closed_now and not closed_before:
        changes.append(_("the FDA has closed the recall"))
    elif closed_before and not closed_now:
        changes.append(_("the FDA has reopened the recall"))
    return _(" and ").join(changes) if changes else _("the recall information has changed")


def exposure_sentence(fact: Fact | None, drug: str, *, match: str, certainty: str) -> str:
    """How the recall reaches this patient, never surer than the match: a candidate is never told the
    recall covers their batch, a probable match is told it may."""
    lot = getattr(fact, "lot", None) if fact is not None else None
    drug_level = fact is not None and (not lot or (fact.attributes or {}).get("scope") == "drug")
    if certainty == "candidate":
        if drug_level:
            return _("There is a recall of every batch of some %(drug)s products. It may affect the %(drug)s we "
                     "gave you: our records do not confirm that yours is one of those products.") % {"drug": drug}
        return _("There is a recall of some batches of %(drug)s. It may affect the %(drug)s we gave you: our "
                 "records do not show which batch you received.") % {"drug": drug}
    verb = _("may affect") if certainty == "probable" else _("affects")
    if match == "lot" and lot and not drug_level:
        return _("There is a recall that %(verb)s the batch (lot %(lot)s) of %(drug)s we gave you.") % {
            "verb": verb, "lot": lot, "drug": drug}
    return _("There is a recall that %(verb)s the %(drug)s we gave you: it covers every batch.") % {
        "verb": verb, "drug": drug}


def why_sentence(verdict: str, fact: Fact | None, *, certainty: str) -> str:
    """The reason, in the tense the recall is in, and only for a pack it may cover."""
    attrs = recall_attributes(fact)
    reason = plain_reason(attrs.get("reason", ""))
    if verdict == "safe":
        return _("as far as our records show, no recall covers the pack we gave you.")
    if fact is None or fact.retracted_at is not None:
        return (_("a recall may still cover the medicine we gave you.") if certainty == "candidate" else
                _("our records show that a recall still covers the medicine we gave you."))
    if getattr(fact, "kind", "recall") == Fact.Kind.LABEL:
        return _("the label now warns that %(reason)s.") % {"reason": reason}
    some = certainty == "candidate" or verdict == "unknown"
    if attrs.get("status") in CLOSED:
        return (_("some batches were recalled because %(reason)s. The FDA has since closed the recall; that "
                  "does not make a recalled pack safe to use.") if some else
                _("the medicine was recalled because %(reason)s. The FDA has since closed the recall; that does "
                  "not make a recalled pack safe to use.")) % {"reason": reason}
    return (_("some batches of the medicine are being recalled because %(reason)s.") if some else
            _("the medicine is being recalled because %(reason)s.")) % {"reason": reason}


def letter_context(patient, verdict: str, fact: Fact | None, *, kind: str, match: str = "",
                   old_verdict: str = "", previous: Fact | None = None, subject: str = "",
                   match_class: str = "", dispensing_changed: bool = False) -> dict:
    attrs = recall_attributes(fact)
    drug = drug_words((fact.subject if fact else "") or subject)
    p = pharmacy()
    certainty = str(match_class or "")
    how = exposure_sentence(fact, drug, match=match, certainty=certainty) if kind == "notice" else ""
    safe = verdict == "safe" or (fact is not None and fact.retracted_at is not None)
    return {
        "pharmacy": p, "patient_name": patient.display_name, "drug": drug, "kind": kind, "how": how,
        "headline": verdict_headline(verdict), "instruction": verdict_instruction(verdict, drug, p["phone"]),
        "pack": pack_instruction(verdict), "sms_instruction": sms_instruction(verdict), "verdict": verdict,
        "old_headline": verdict_headline(old_verdict) if old_verdict else "",
        "change": what_changed(previous, fact, dispensing_changed=dispensing_changed) if kind == "correction" else "",
        "recall_plain": _(CLASS_PLAIN[attrs["classification"]]) if attrs.get("classification") in CLASS_PLAIN
        else _("a recall"),
        "why": why_sentence(verdict, fact, certainty=certainty), "maybe": certainty in ("candidate", "probable"),
        "reason_quoted": "" if safe else (attrs.get("reason") or "").strip(),
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


def letter_subject(patient, *, recalled: bool) -> str:
    """The email subject, in the patient's language."""
    with override(language_of(patient)):
        return _("Update about your recalled medicine") if recalled else _("Update about your medicine")


def language_of(patient) -> str:
    """The language a patient's letters and reply page are in (Patient.preferred_language; English if
    none, or no patient). The one reading of it: drafting, sending and the reply page all ask here."""
    return getattr(patient, "preferred_language", "") or "en"


def correction_text(patient, old_verdict: str, outcome, fact: Fact | None, previous: Fact | None = None,
                    *, channel: str | None = None, match_class: str = "", dispensing_changed: bool = False) -> str:
    with override(language_of(patient)):
        context = letter_context(patient, outcome.verdict, fact, kind="correction", old_verdict=old_verdict,
                                 previous=previous, subject=getattr(outcome, "subject", ""),
                                 match_class=match_class, dispensing_changed=dispensing_changed)
        return render_letter(context, _channel(patient, channel))


def notice_text(patient, match: str, outcome, fact: Fact, *, channel: str | None = None,
                match_class: str = "") -> str:
    with override(language_of(patient)):
        context = letter_context(patient, outcome.verdict, fact, kind="notice", match=match,
                                 subject=getattr(outcome, "subject", ""), match_class=match_class)
        return render_letter(context, _channel(patient, channel))
