"""What "check my pack" says, in the reader's language (the catalogue in locale/, docs/languages.md).

    headline(check) -> str       one line: recalled, may be, lot needed, not on a recall we know of, unknown
    what_to_do(check) -> str     what to do next, by outcome and the recall's class
    lots_recalled(recall) -> str what a recall shown covers: its lots, every lot, every lot in its window
    class_words(recall) -> str   its class ("Class II", "Clase II")

The words follow the answers' rules (ask.answers, ADR 0010): "safe" is never said; a pack that may be
from a recalled lot is never told it is not; a Class I recall never says "keep taking", and a medicine
that must not be stopped abruptly is told not to stop it on one's own.
"""

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from ask.pack_check import Outcome, PackCheck, RecallShown
from drugs.dates import spoken_date


def headline(check: PackCheck) -> str:
    if check.outcome == Outcome.RECALLED:
        return _("This pack is recalled.")
    if check.outcome == Outcome.MAY_BE_RECALLED:
        return _("This pack may be from a recalled lot.")
    if check.outcome == Outcome.LOT_NEEDED:
        return _("We need the lot number to tell whether this pack is recalled.")
    if check.outcome == Outcome.NOT_LISTED:
        return _("This lot is not on any FDA recall we know of for this product.")
    return _("We could not identify this product.")


def what_to_do(check: PackCheck) -> str:
    urgent = check.classification == "Class I"
    if check.outcome == Outcome.RECALLED:
        if check.do_not_stop and not urgent:
            return _("Do not stop taking it on your own: stopping it suddenly can be dangerous. Call your "
                     "pharmacist: they will arrange a replacement that is not recalled.")
        if check.do_not_stop:
            return _("Do not stop taking it on your own: stopping it suddenly can be dangerous. Call your "
                     "pharmacist or doctor today; they will arrange a replacement that is not recalled.")
        if urgent:
            return _("This is a Class I recall, the most serious kind. Stop using this pack and call your pharmacist "
                     "or doctor today, before your next dose.")
        return _("Call your pharmacist: they will tell you what to do and can arrange a replacement that is not "
                 "recalled. Ask them before you stop or change how you take it.")
    if check.outcome == Outcome.MAY_BE_RECALLED and check.date_needed == "expiry date":
        return _("The recall covers this product only with an expiry date in its window, and we do not have this "
                 "pack's expiry date. Type the lot with the expiry date printed beside it (for example “3061169 EXP "
                 "11/2018”), or show the pack to your pharmacist. Until then, treat it as recalled.")
    if check.outcome == Outcome.MAY_BE_RECALLED and check.date_needed:
        return _("The recall covers this product only if it was distributed or dispensed in its window. Ask your "
                 "pharmacist, who has the date it was dispensed. Until then, treat it as recalled.")
    if check.outcome == Outcome.MAY_BE_RECALLED:
        return _("Show the pack to your pharmacist so they can check it: it is close to a recalled pack, but not "
                 "certainly the same (its lot or its product code may differ, or its lot may be read more than one "
                 "way). Until they have checked, treat it as recalled.")
    if check.outcome == Outcome.LOT_NEEDED:
        return _("Type the lot number printed on the pack (often after “LOT”, near the expiry date), or ask "
                 "your pharmacist to check it.")
    if check.outcome == Outcome.NOT_LISTED:
        return _("We checked only the FDA recalls we know of, so this does not mean the medicine is safe for "
                 "you to take. If you are unsure, ask your pharmacist.")
    if check.ambiguous:
        return _("The code you gave can be more than one product. Type the NDC printed on the pack with its "
                 "hyphens, or ask your pharmacist.")
    return _("No FDA recall we know of names this product code, so we cannot tell you what it is or whether it "
             "is recalled. This does not mean it is safe. Check the NDC on the pack, or ask your pharmacist.")


def lots_recalled(recall: RecallShown) -> str:
    if recall.lots:
        return ", ".join(recall.lots)
    if recall.window:
        kind, start, end = recall.window
        dates = {"start": spoken_date(start), "end": spoken_date(end)}
        if kind == "expiry_window" and start and end:
            return _("every lot with an expiry date from %(start)s to %(end)s") % dates
        if kind == "expiry_window" and start:
            return _("every lot with an expiry date on or after %(start)s") % dates
        if kind == "expiry_window" and end:
            return _("every lot with an expiry date up to %(end)s") % dates
        if start and end:
            return _("every lot distributed or dispensed from %(start)s to %(end)s") % dates
        if start:
            return _("every lot distributed or dispensed on or after %(start)s") % dates
    if recall.covers == "every lot":
        return _("every lot")
    if recall.covers.startswith("every lot (no lot number"):
        return _("every lot (no lot number could be read from the recall, so every lot is treated as affected)")
    return recall.covers


_CLASS_WORDS = {gettext_noop("Class I"), gettext_noop("Class II"), gettext_noop("Class III")}


def class_words(recall: RecallShown) -> str:
    return _(recall.classification) if recall.classification in _CLASS_WORDS else recall.classification
