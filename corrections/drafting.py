"""Readable text for drafts: the fact diff a pharmacist reviews and the message a patient reads.

Letters are Django templates (templates/letters/): email text, email HTML and SMS. Their words come
from here: one headline and one instruction per verdict (never contradicting each other), what to do
with the pack, a plain-language glossary for FDA reasons (the FDA's own words kept as a quoted
detail), and the pharmacy's name, phone, address and sender from settings (UNSAY_PHARMACY_*).
"""

import functools
import re
from types import SimpleNamespace

from django.conf import settings
from django.template.loader import render_to_string
from django.utils.translation import get_language, gettext_noop, override
from django.utils.translation import gettext as _

from ask.answers import must_not_stop_abruptly
from drugs import recall_terms
from drugs.dates import spoken_date
from drugs.identity import is_product_key
from drugs.matching import RECALLED_PACK, UNIDENTIFIED_PACK
from drugs.recall_terms import CLASS_SEVERITY
from memory.models import Fact
from recalls.selectors import recall_attributes


# What we ask of the patient, per verdict: a headline and the one instruction under it. Never "stop
# taking it": some drugs must not be stopped abruptly, so even the most serious verdict says "call
# us before your next dose", and the headline says the same thing. Never "keep taking it" about a
# Class I recall (`serious`): a pack that may be from one is checked today, before the next dose.
def verdict_headline(verdict: str) -> str:
    return {
        "safe": _("No action needed"),
        "caution": _("Please contact us about your medicine"),
        "stop": _("Call us before your next dose"),
        "unknown": _("Please contact us so we can check your medicine"),
    }.get(verdict, _("Please contact us about your medicine"))


def verdict_instruction(verdict: str, drug: str, phone: str, *, serious: bool = False,
                        hold: bool = False, certainty: str = "") -> str:
    """The instruction under the headline. `serious`: a Class I recall is involved (no "keep taking");
    `hold`: a medicine that must not be stopped abruptly (ask.answers.must_not_stop_abruptly); `certainty`:
    the match, so a pack known to be recalled is not said to need checking."""
    if serious and verdict in ("caution", "unknown"):
        text = _("Please call us on %(phone)s today, before your next dose of %(drug)s, so we can check your "
                 "pack.") % {"drug": drug, "phone": phone}
        return f"{text} {do_not_stop(drug)}" if hold else text
    if verdict == "caution" and certainty in RECALLED_PACK:
        return _("Keep taking your %(drug)s as prescribed, and call us on %(phone)s in the next few days so we can "
                 "replace your pack.") % {"drug": drug, "phone": phone}
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


def do_not_stop(drug: str) -> str:
    return _("Do not stop %(drug)s on your own: stopping it suddenly can be dangerous.") % {"drug": drug}


def pack_instruction(verdict: str, *, certainty: str = "") -> str:
    """What to do with the pack; a pack only probably (or possibly) from a recalled batch is brought in to
    be checked, not called recalled."""
    if verdict == "safe":
        return _("You can keep using the pack you have.")
    if verdict == "stop" and certainty in ("probable", "candidate"):
        return _("Please bring the pack to the pharmacy, even if it is opened or empty, so we can check it. "
                 "If it is from the recalled batch, we will replace it free of charge.")
    if verdict == "stop":
        return _("Please bring the pack back to the pharmacy, even if it is opened or empty. "
                 "We will replace it free of charge.")
    if certainty in RECALLED_PACK:  # the pack is the recalled one: no "if it is affected"
        return _("Keep the pack for now and bring it with you when you come in. We will replace it free of charge.")
    return _("Keep the pack for now and bring it with you when you come in. If it is affected, "
             "we will replace it free of charge.")


def sms_instruction(verdict: str, *, serious: bool = False) -> str:
    if serious and verdict in ("caution", "unknown"):
        return _("Please call us today, before your next dose.")
    return {
        "safe": _("You can keep using the pack you have."),  # the headline already says "No action needed"
        "caution": _("Keep taking it; please call us this week."),
        "stop": _("Do not change how you take it until we have spoken."),
        "unknown": _("Keep taking it; please call us so we can check your pack."),
    }.get(verdict, _("Please call us."))


# FDA recall reasons in plain words. The FDA's own text is kept as a quoted detail; these lines are
# what the letter says. A reason opens with FDA's category ("Temperature Abuse: ...", "Failed
# Impurities/Degradation Specifications: ... at the stability station"): the category is read first, so a
# word in the detail does not decide ("stability" in an impurity failure, "label" in a temperature
# excursion's "storage range listed on the product labeling"), except the general cGMP category, whose
# detail says what the deviation was, and except the three hazards said wherever the text names them (a drug
# the label does not declare, a cancer-causing impurity, a sterile product that may not be: "Labeling: Product
# Contains Undeclared API" is about the drug, not the label, "Defective Container: ... lack of sterility
# assurance" about sterility). Then the whole text, where order matters: the first match wins, so
# the specific hazard comes before the general one: a "CGMP Deviations: NDEA ..." reason is about the
# impurity, a product tainted with an undeclared drug about that drug, "Microbial Contamination of
# Non-Sterile Products" about contamination (the product was never meant to be sterile), a stability
# failure is not a label mistake, and "cGMP deviations" alone is the quality standard.
_GENERAL = r"c?GMP|current good manufacturing"
GLOSSARY = [
    (r"undeclared|tainted", gettext_noop("it contains an ingredient its label does not list")),
    (r"\bN-?nitroso|\bNDEA\b|\bNDMA\b|\bNMBA\b|nitrosamine|carcinogen",
     gettext_noop("an impurity was found that may raise the risk of cancer if taken for a long time")),
    (r"lack of (?:assurance of )?sterility|sterility assurance|\bnot sterile",
     gettext_noop("it may not be sterile")),
    (r"sub-?potent", gettext_noop("it may contain less medicine than it should")),
    (r"super-?potent", gettext_noop("it may contain more medicine than it should")),
    (r"temperature abuse|temperature excursion"
     r"|outside (?:of )?(?:the )?(?:acceptable |labeled )?(?:storage|temperature)",
     gettext_noop("it may have been stored at a temperature that could harm it")),
    (r"incorrect (?:product )?formulation|wrong (?:ingredient|diluent)",
     gettext_noop("it may not have been made with the right ingredients")),
    (r"content uniformity|uniformity of dos", gettext_noop("the amount of medicine may vary from dose to dose")),
    (r"under-?fill|short[- ]fill|low fill|over-?fill|fill (?:volume|weight)",
     gettext_noop("it may not hold the amount of medicine its label says")),
    (r"defective container|container (?:closure|defect)|\bleak",
     gettext_noop("its container may be faulty")),
    (r"delivery system|defective (?:pump|device|applicator|inhaler|syringe|actuator)",
     gettext_noop("the device that gives the dose may not work as it should")),
    (r"microbial|bacteria|contaminat|mold|fung", gettext_noop("it may be contaminated")),
    (r"steril", gettext_noop("it may not be sterile")),
    (r"dissolution", gettext_noop("it may not dissolve in the body as it should")),
    (r"stabilit", gettext_noop("it may not stay effective until its expiry date")),
    (r"impurit|degradation", gettext_noop("it may contain an impurity above the allowed limit")),
    (r"foreign|particulate", gettext_noop("something that should not be there was found in it")),
    (r"\blabel|mislabel|\bpackag", gettext_noop("there is a mistake on the label or packaging")),
    (_GENERAL, gettext_noop("it was not made to the required quality standards")),
]
_OVERRIDING = GLOSSARY[:3]  # the three hazards said wherever the text names them
_FOR_CATEGORY = [entry for entry in GLOSSARY if entry[0] != _GENERAL]
JARGON = ["CGMP", "GMP", "NDEA", "NDMA", "NMBA", "subpotent", "superpotent", "dissolution", "Class I",
          "Class II", "Class III"]
CLASS_PLAIN = {
    "Class I": gettext_noop("the most serious kind of recall: the product could cause serious health problems"),
    "Class II": gettext_noop("a recall because the product could cause temporary health problems"),
    "Class III": gettext_noop("a recall of a product unlikely to cause health problems"),
}


# "Non-sterile products" names a kind of product (tablets, creams), not a hazard of this one.
_PRODUCT_KIND = re.compile(r"\bnon-?\s?sterile\s+(?:drug\s+)?products?\b", re.IGNORECASE)


def plain_reason(reason: str) -> str:
    reason = _PRODUCT_KIND.sub(" ", reason or "")
    category = re.split(r"[:;]", reason, maxsplit=1)[0] if re.search(r"[:;]", reason) else ""
    passes = ((reason, _OVERRIDING), (category, _FOR_CATEGORY), (reason, GLOSSARY))
    for text, patterns in passes:
        for pattern, plain in patterns:
            if text and re.search(pattern, text, re.IGNORECASE):
                return _(plain)
    return _("a problem was found with it")  # by the maker or by the FDA: the reason says which


def pharmacy() -> dict:
    return {"name": settings.UNSAY_PHARMACY_NAME, "phone": settings.UNSAY_PHARMACY_PHONE,
            "address": settings.UNSAY_PHARMACY_ADDRESS, "sender": sender(), "email": settings.UNSAY_PHARMACY_EMAIL}


def sender() -> str:
    """Who signs a letter, in the letter's language: UNSAY_PHARMACY_SENDER is written in English (the
    operator's words), so a letter in another language is signed in the catalogue's words."""
    if (get_language() or "en").split("-")[0] == "en":
        return settings.UNSAY_PHARMACY_SENDER
    return _("The pharmacists at %(pharmacy)s") % {"pharmacy": settings.UNSAY_PHARMACY_NAME}


def sms_limit() -> int:
    return settings.UNSAY_SMS_LIMIT


def drug_words(subject: str) -> str:
    """'amlodipine+valsartan' (an identity key) -> 'amlodipine and valsartan'; a product key
    ('product:hcg 10000u 1ml inj') by its own words, never as the key."""
    if is_product_key(subject):
        return recall_terms.readable_product(subject) or _("medicine")
    parts = [p for p in (subject or "").split("+") if p]
    if not parts:
        return _("medicine")
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " " + _("and") + " " + parts[-1]


def letter_drug(subject: str, fact: Fact | None, certainty: str) -> str:
    """The medicine a letter is about, as the patient knows it: the dispensed drug (the decision's
    subject), else the recall's. A product the vocabulary does not know is named by the recall's label
    when the match confirms the pack is that product, else by its own recorded words."""
    key = subject or (fact.subject if fact is not None else "")
    confirmed = certainty in ("confirmed", "product_all_lots") or (fact is not None and fact.subject == key)
    if is_product_key(key) and fact is not None and confirmed and getattr(fact, "kind", "recall") == "recall":
        return recall_terms.product_name(SimpleNamespace(subject=fact.subject, attributes=recall_attributes(fact)))
    return drug_words(key)


def serious_recall(fact: Fact | None) -> bool:
    """The letter's own fact is a Class I recall (as believed now); serious_answer also reads the recalls
    the answer rests on."""
    return fact is not None and fact.retracted_at is None and recall_terms.severity(fact) == 3


def serious_answer(outcome, fact: Fact | None) -> bool:
    """A Class I recall is involved in what the letter tells: its own fact, or any recall the answer it
    carries rests on (a correction about a Class II change whose new answer also leans on a Class I
    candidate must not say "keep taking"). The sweep keys its shared letters by this too."""
    if serious_recall(fact):
        return True
    bearing = set(getattr(outcome, "load_bearing_ids", None) or ())
    return any(serious_recall(r.fact) for r in getattr(outcome, "retrieved", None) or () if r.fact.id in bearing)


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
        if fact.lot:
            return _("the recall no longer includes lot %(lot)s") % {"lot": fact.lot}
        # A claim of every lot retracted while the recall stands: FDA's record now names its lots (a recall
        # first read with no lot number, amended), which is not a withdrawal.
        standing = Fact.objects.believed().filter(
            kind=Fact.Kind.RECALL, fact_key__startswith=recall_terms.key_prefix(recall_terms.recall_number(fact)))
        if standing.filter(lot__gt="").exists():
            return _("the recall now names the batches it covers")
        return _("the recall information has changed") if standing.exists() else _("the recall has been withdrawn")
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


def batches_covered(fact: Fact | None) -> str:
    """What a recall of every lot covers, as a clause true of its record: every batch, every batch in its
    window, or every batch treated as affected when no batch number could be read."""
    scope = recall_terms.lot_scope(fact) or {}
    expiry, dispensed = scope.get("expiry_window") or [None, None], scope.get("dispensed_window") or [None, None]
    start, end = (list(expiry) + [None, None])[:2]
    if scope.get("kind") == "all_lots_window" and (start or end):
        dates = {"start": spoken_date(start), "end": spoken_date(end)}
        if start and end:
            return _("it covers every batch with an expiry date from %(start)s to %(end)s") % dates
        return (_("it covers every batch with an expiry date on or after %(start)s") if start else
                _("it covers every batch with an expiry date up to %(end)s")) % dates
    if scope.get("kind") == "all_lots_window" and dispensed[0]:
        return _("it covers every batch dispensed on or after %(start)s") % {"start": spoken_date(dispensed[0])}
    if recall_terms.covers_every_lot(fact):
        return _("it covers every batch")
    return _("it lists no batch number we could read, so every batch is treated as affected")


def exposure_sentence(fact: Fact | None, drug: str, *, match: str, certainty: str, lots=(),
                      unidentified: bool = False) -> str:
    """How the recall reaches this patient, never surer than the match: a candidate is never told the
    recall covers their batch, a probable match is told it may; "every batch" only for a recall of every
    lot, with its window. `lots`: every recalled lot of this recall the pack may be (one notice per pack
    and recall names them all). `unidentified`: the recalled lot on a pack whose product we cannot tell
    (drugs.matching.UNIDENTIFIED_PACK): the lot is known to match, the product is the doubt."""
    lot = getattr(fact, "lot", None) if fact is not None else None
    # A pack confirmed as one lot is that lot; only a pack that may be one of several hears them all.
    others = [other for other in dict.fromkeys(lots) if other and other != lot] if certainty != "confirmed" else []
    drug_level = fact is not None and (not lot or (fact.attributes or {}).get("scope") == "drug")
    if certainty == "candidate" and unidentified and fact is not None:
        return _("A recall of %(recalled)s names the lot number of the %(drug)s we gave you, but we cannot tell "
                 "whether your pack is the product it recalls.") % {"recalled": drug_words(fact.subject), "drug": drug}
    if certainty == "candidate":
        if drug_level:
            return _("There is a recall of some %(drug)s products (%(covered)s). It may affect the %(drug)s we gave "
                     "you: our records do not confirm that yours is one of those products.") % {
                "drug": drug, "covered": batches_covered(fact)}
        return _("There is a recall of some batches of %(drug)s. It may affect the %(drug)s we gave you: our "
                 "records do not show whether your pack is from one of them.") % {"drug": drug}
    verb = _("may affect") if certainty == "probable" else _("affects")
    if match == "lot" and lot and not drug_level and others:
        return _("There is a recall that may affect the batch of %(drug)s we gave you: it names lots %(lots)s, "
                 "and yours may be one of them.") % {"drug": drug, "lots": ", ".join([lot, *others])}
    if match == "lot" and lot and not drug_level and certainty == "probable":
        # The recalled lot is the recall's, not (surely) the one on record for the pack: not "your batch (lot X)".
        return _("There is a recall of lot %(lot)s of %(drug)s, and the pack we gave you may be from it.") % {
            "lot": lot, "drug": drug}
    if match == "lot" and lot and not drug_level:
        return _("There is a recall that %(verb)s the batch (lot %(lot)s) of %(drug)s we gave you.") % {
            "verb": verb, "lot": lot, "drug": drug}
    return _("There is a recall that %(verb)s the %(drug)s we gave you: %(covered)s.") % {
        "verb": verb, "drug": drug, "covered": batches_covered(fact)}


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
    if some and recall_terms.is_drug_level(fact):
        return (_("some products of the medicine were recalled because %(reason)s. The FDA has since closed the "
                  "recall; that does not make a recalled pack safe to use.") if attrs.get("status") in CLOSED else
                _("some products of the medicine are being recalled because %(reason)s.")) % {"reason": reason}
    probable = certainty == "probable"  # the recalled batch may be the pack's: said so, not asserted
    window = probable and recall_terms.is_drug_level(fact)  # every batch in a window; the pack's date not on record
    if window:
        return (_("some batches of the medicine were recalled because %(reason)s, and your pack may be one of them. "
                  "The FDA has since closed the recall; that does not make a recalled pack safe to use.")
                if attrs.get("status") in CLOSED else
                _("some batches of the medicine are being recalled because %(reason)s, and your pack may be one of "
                  "them.")) % {"reason": reason}
    if attrs.get("status") in CLOSED:
        if probable:
            return _("a batch of the medicine that may include your pack was recalled because %(reason)s. The FDA "
                     "has since closed the recall; that does not make a recalled pack safe to use.") % {
                "reason": reason}
        return (_("some batches were recalled because %(reason)s. The FDA has since closed the recall; that "
                  "does not make a recalled pack safe to use.") if some else
                _("the medicine was recalled because %(reason)s. The FDA has since closed the recall; that does "
                  "not make a recalled pack safe to use.")) % {"reason": reason}
    if probable:
        return _("a batch of the medicine that may include your pack is being recalled because %(reason)s.") % {
            "reason": reason}
    return (_("some batches of the medicine are being recalled because %(reason)s.") if some else
            _("the medicine is being recalled because %(reason)s.")) % {"reason": reason}


def letter_context(patient, verdict: str, fact: Fact | None, *, kind: str, match: str = "",
                   old_verdict: str = "", previous: Fact | None = None, subject: str = "",
                   match_class: str = "", dispensing_changed: bool = False, lots=(),
                   serious: bool | None = None, unidentified: bool = False) -> dict:
    attrs = recall_attributes(fact)
    certainty = str(match_class or "")
    drug = letter_drug(subject, fact, certainty)
    p = pharmacy()
    how = exposure_sentence(fact, drug, match=match, certainty=certainty, lots=lots,
                            unidentified=unidentified) if kind == "notice" else ""
    safe = verdict == "safe" or (fact is not None and fact.retracted_at is not None)
    serious = serious_recall(fact) if serious is None else serious
    hold = must_not_stop_abruptly(" ".join(filter(None, [subject, getattr(fact, "subject", "")])))
    return {
        "pharmacy": p, "patient_name": patient.display_name, "drug": drug, "kind": kind, "how": how,
        "headline": verdict_headline(verdict),
        "instruction": verdict_instruction(verdict, drug, p["phone"], serious=serious, hold=hold, certainty=certainty),
        "pack": pack_instruction(verdict, certainty=certainty),
        "sms_instruction": sms_instruction(verdict, serious=serious),
        "verdict": verdict,
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


def subject_kind(*, recall_number: str, verdict: str, match_class: str) -> str:
    """What the email subject may say, no more than the letter does: "recalled" when the letter tells the
    patient their pack is recalled (stop or caution, the pack confirmed), "may" when a recall may affect it
    (a probable or candidate match, or a pack we cannot tell), "" otherwise (no recall covers it)."""
    if not recall_number or verdict == "safe":
        return ""
    return "recalled" if verdict in ("stop", "caution") and match_class in RECALLED_PACK else "may"


def letter_subject(patient, *, kind: str) -> str:
    """The email subject (subject_kind), in the patient's language."""
    return _subject_in(language_of(patient), kind)


@functools.lru_cache(maxsize=64)
def _subject_in(language: str, kind: str) -> str:
    # Three sentences per language, asked once per draft: a sweep drafting 100,000 letters would otherwise
    # switch the active translation 100,000 times for them.
    with override(language):
        if kind == "recalled":
            return _("Update about your recalled medicine")
        if kind == "may":
            return _("Update about a recall that may affect your medicine")
        return _("Update about your medicine")


def language_of(patient) -> str:
    """The language a patient's letters and reply page are in (Patient.preferred_language; English if
    none, or no patient). The one reading of it: drafting, sending and the reply page all ask here."""
    return getattr(patient, "preferred_language", "") or "en"


def correction_text(patient, old_verdict: str, outcome, fact: Fact | None, previous: Fact | None = None,
                    *, channel: str | None = None, match_class: str = "", dispensing_changed: bool = False) -> str:
    with override(language_of(patient)):
        context = letter_context(patient, outcome.verdict, fact, kind="correction", old_verdict=old_verdict,
                                 previous=previous, subject=getattr(outcome, "subject", ""),
                                 match_class=match_class, dispensing_changed=dispensing_changed,
                                 serious=serious_answer(outcome, fact))
        return render_letter(context, _channel(patient, channel))


def notice_text(patient, match: str, outcome, fact: Fact, *, channel: str | None = None,
                match_class: str = "", lots=(), rule: str = "") -> str:
    """A notice about `fact` (the strongest match); `lots`: every recalled lot of the recall the pack may
    be, named together in one notice; `rule`: the drugs.matching rule of that match."""
    with override(language_of(patient)):
        context = letter_context(patient, outcome.verdict, fact, kind="notice", match=match,
                                 subject=getattr(outcome, "subject", ""), match_class=match_class, lots=lots,
                                 serious=serious_answer(outcome, fact), unidentified=rule == UNIDENTIFIED_PACK)
        return render_letter(context, _channel(patient, channel))
