"""The sentences of a rules answer, each written from what was found (ask.rules decides, this writes).

A sentence says only what the finding behind it shows (docs/reasoning.md, "What an answer says"):

- a pack is "from a recalled lot" only for a confirmed match (its NDC product and lot are the recall's),
  "a recalled product" only for a confirmed product of an all-lots recall, and "may be" for a probable
  match, with why it is not sure read from the row and the recall (a near-miss lot, no NDC on record,
  another labeler's NDC, an NDC only openFDA lists), never from the wording of the matching rule;
- "every lot" only for a recall of every lot (within its window, said with the window); no replacement
  "from an unaffected lot" when every lot of the product is recalled;
- a recall that does not reach the pack is named for its true reason: another lot, products of other
  labelers ("other makers" only then), other products of the same labeler, a pack outside the recall's
  expiry or dispensing window, a recall closed before the pack was dispensed;
- only recalls of the patient's own medicine are mentioned (a recall that merely shares a lot number's
  scope with it is not);
- what is unknown (the lot, or which product it is) is said as unknown, with what to do;
- products are named by their label (drugs.display), never by an internal key; the FDA's reason is
  quoted as the FDA wrote it.

Lots of the patient's are shown only from AskContext.patient_lots (a sweep page marks inert lots there,
corrections.sweep.groups.PageDecider) or from a row that a recall matched (never inert).
"""

from drugs import recall_terms
from drugs.identity import is_product_key
from drugs.lots import canonical_lot, near_miss_rule
from drugs.matching import RECALLED_PACK, MatchClass, dispensing_product, stated_class, window_date_on_record
from recalls.selectors import with_texts

# Medicines that must not be stopped abruptly (rebound hypertension, clotting, seizures, withdrawal,
# adrenal crisis, ...). For these the answer always says not to stop on one's own. Matched per word
# of the normalised drug name, so "amlodipine valsartan" matches.
DO_NOT_STOP_ABRUPTLY = {
    # blood pressure / heart
    "valsartan", "losartan", "irbesartan", "candesartan", "olmesartan", "telmisartan", "azilsartan",
    "lisinopril", "enalapril", "ramipril", "benazepril", "quinapril", "perindopril", "captopril",
    "amlodipine", "nifedipine", "diltiazem", "verapamil", "felodipine",
    "metoprolol", "atenolol", "propranolol", "carvedilol", "bisoprolol", "nebivolol", "labetalol",
    "clonidine", "hydrochlorothiazide", "chlorthalidone", "furosemide", "spironolactone", "digoxin",
    "amiodarone", "isosorbide", "nitroglycerin",
    # anticoagulants / antiplatelets
    "warfarin", "apixaban", "rivaroxaban", "dabigatran", "edoxaban", "enoxaparin", "heparin",
    "clopidogrel", "ticagrelor", "prasugrel",
    # antiepileptics
    "levetiracetam", "lamotrigine", "phenytoin", "carbamazepine", "oxcarbazepine", "valproate",
    "valproic", "divalproex", "topiramate", "lacosamide", "zonisamide", "phenobarbital", "gabapentin",
    "pregabalin", "clonazepam", "clobazam",
    # others where abrupt stopping is dangerous
    "levothyroxine", "prednisone", "prednisolone", "hydrocortisone", "dexamethasone", "insulin",
    "sertraline", "paroxetine", "venlafaxine", "duloxetine", "fluoxetine", "citalopram", "escitalopram",
    "alprazolam", "lorazepam", "diazepam", "baclofen", "aripiprazole", "quetiapine", "olanzapine",
    "risperidone", "lithium", "methadone", "buprenorphine", "oxycodone", "morphine", "tramadol",
}

FROM_AN_UNAFFECTED_LOT = "a replacement from an unaffected lot"
NOT_RECALLED = "a replacement that is not recalled"  # every lot of the product is recalled
READ_THE_LOT = "Read the lot number printed on your pack and tell your pharmacist, or ask your pharmacist to check it."
READ_THE_NDC = ("Read the product code (NDC) printed on your pack's label and tell your pharmacist, or ask your "
                "pharmacist to check it.")


def must_not_stop_abruptly(drug: str) -> bool:
    words = (drug or "").replace("+", " ").replace(":", " ").split()
    return any(word in DO_NOT_STOP_ABRUPTLY for word in words)


def describe(fact) -> str:
    """drugs.recall_terms.describe of the fact as believed, its reason and product read through
    recalls.selectors (inline, or once per record version by reference; cached by digest)."""
    return recall_terms.describe(with_texts([fact])[0])


def listing(numbers: list[str], most: int = 5) -> str:
    """'A, B, C' or, for long lists, 'A, B, C, D, E and 37 more'."""
    if len(numbers) <= most:
        return ", ".join(numbers)
    return f"{', '.join(numbers[:most])} and {len(numbers) - most} more"


def numbers_of(facts, most: int = 3) -> str:
    """The recall numbers of these facts, listed (never an internal fact key)."""
    return listing(sorted({recall_terms.recall_number(f) or "without a number" for f in facts}), most=most)


def lots_words(lots: list[str]) -> str:
    """'lot A', 'lots A, B', or 'no lot on record'."""
    if not lots:
        return "no lot on record"
    return f"lot {lots[0]}" if len(lots) == 1 else f"lots {listing(lots)}"


def there_are(facts, what: str) -> str:
    return f"There is a recall of {what}" if len({recall_terms.recall_number(f) for f in facts}) == 1 else \
        f"There are recalls of {what}"


def subject_name(subject: str, named_by=()) -> str:
    """The medicine as the patient reads it: its ingredients in words; a product the vocabulary does not
    know by the label of a recall that names its NDC product (named_by), else by its own recorded words."""
    if is_product_key(subject) and named_by:
        return recall_terms.product_name(with_texts([named_by[0]])[0])
    return recall_terms.readable_product(subject) or "medicine"


def advice(subject: str, name: str, *, urgent: bool, replacement: str) -> str:
    """What to do about taking it: medicines that must not be stopped abruptly say so (and to contact us
    today when it is urgent); never "keep taking"."""
    if must_not_stop_abruptly(subject):
        who = "Contact us today: your pharmacist" if urgent else "Your pharmacist"
        return (f"Do not stop {name} on your own: stopping it suddenly can be dangerous. {who} or doctor will "
                f"arrange {replacement}.")
    return f"Ask your pharmacist before changing how you take it; they can arrange {replacement}."


def _labelers(products) -> set[str]:
    return {p[:5] for p in products if p}


def _product(row) -> str:
    """The row's NDC product, read from the values matching reads (ask.beliefs.DispensedRow.matched):
    drugs.matching calls no code of ask's."""
    return dispensing_product(getattr(row, "matched", row)) if row is not None else ""


# --- a pack the recall reaches ------------------------------------------------------------------

def why_probable(fact, row, rule: str = "") -> str:
    """Why a lot match is probable, not sure, read from the row and the recall. The matching rule is shown
    as it is written, never read: rules are added (a lot read inside a field as it was typed, ...)."""
    product = _product(row)
    products = recall_terms.products(fact)
    exact = canonical_lot(getattr(row, "lot", "")) == canonical_lot(fact.lot)
    if not exact and near_miss_rule(fact.lot, getattr(row, "lot", "")):
        return f"the lot number on record ({row.lot}) is very close to recalled lot {fact.lot}, but not the same"
    if not exact:
        return (f"the lot on record for your pack matches recalled lot {fact.lot} only in part"
                + (f" ({rule})" if rule else ""))
    if not product:
        return (f"the lot number matches recalled lot {fact.lot}, but no product code (NDC) is on record for your "
                "pack to confirm the product")
    if not products:
        return (f"the lot number matches recalled lot {fact.lot}, but the recall lists no product codes (NDCs) to "
                "confirm the product")
    if product in products:
        return (f"the lot number matches recalled lot {fact.lot}, and your pack's product code (NDC {product}) is "
                "listed with the recall, but the recall's own text does not name it")
    if product[:5] not in _labelers(products):
        return (f"the lot number matches recalled lot {fact.lot}, in another company's package of the same "
                "medicine (it may have been repackaged)")
    return f"the lot number matches recalled lot {fact.lot}, but our records do not confirm the exact product"


def how_it_reaches(fact, row, found) -> str:
    """What made a confirmed match, in one sentence."""
    if found.klass == MatchClass.CONFIRMED:
        return (f"Its product code (NDC) and lot number on record are the ones recall "
                f"{recall_terms.recall_number(fact)} names.")
    tail = ""
    if recall_terms.window_words(fact):
        # A pack with no date on record to compare stays in (fail safe), but is not said to be inside.
        date = "expiry date" if recall_terms.window_kind(fact) == "expiry_window" else "dispensing date"
        tail = (", which includes your pack as far as our records show" if window_date_on_record(fact, row) else
                f", and we have no {date} on record for your pack, so it may be one of them")
    return (f"Its product code (NDC {_product(row)}) is one recall {recall_terms.recall_number(fact)} "
            f"names, and the recall covers {recall_terms.covered_lots(fact)}{tail}.")


def pack_answer(ctx, hits, *, name: str, medicine: str, classes: set[str], active: bool) -> str:
    """The answer for a pack a recall reaches (confirmed or probable): hits are (fact, row, Found);
    `medicine`: the identities it is known by (the row's and the recalls'), for advice."""
    sure = [(f, r, found) for f, r, found in hits if found.klass in RECALLED_PACK]
    lot_level = any(found.klass == MatchClass.CONFIRMED for _f, _r, found in sure)
    every_lot = any(recall_terms.every_lot_recalled(f) for f, _r, _found in hits)
    # A recall of every lot in a window, and no date on record to read the pack against: decided as recalled
    # (fail safe), said as may be.
    certain = any(stated_class(found.klass, f, [r]) in RECALLED_PACK for f, r, found in sure)
    if sure:
        recalled = "from a recalled lot" if lot_level else "a recalled product"
        opening = f"The {name} dispensed to you {'is ' + recalled if certain else 'may be a recalled product'}."
        how = " ".join(dict.fromkeys(how_it_reaches(f, r, found) for f, r, found in sure))
    else:
        fact, row, found = hits[0]
        why = why_probable(fact, row, found.rule)
        opening = f"The {name} dispensed to you may be from a recalled lot: {why}. Your pharmacist will check the pack."
        how = ""
    facts = list(dict.fromkeys(f for f, _r, _found in hits))
    facts_text = " ".join(describe(f) + "." for f in facts)
    closed = "" if active else (
        " FDA has closed this recall because the recalled stock has been removed, but the pack dispensed to you "
        f"{'came' if sure and certain else 'may have come'} from the recalled stock. If you still have any of it, do "
        "not use it up.")
    replacement = NOT_RECALLED if every_lot else FROM_AN_UNAFFECTED_LOT
    window = next((words for f, _r, _found in hits if recall_terms.every_lot_recalled(f)
                   and (words := recall_terms.window_words(f))), "")
    if every_lot and window:
        closed += (f" Every lot of this product {window} is recalled, so a replacement will be a product or a lot "
                   "outside the recall.")
    elif every_lot:
        closed += " Every lot of this product is recalled, so a replacement will be a product that is not recalled."
    if "Class I" in classes:
        return (f"{opening} {how} {facts_text}{closed} Contact your pharmacy now, today, before your next dose. "
                f"{advice(medicine, name, urgent=True, replacement=replacement)}").replace("  ", " ")
    if classes - {"Class III"}:  # Class II, or not yet classified: treated as Class II
        return (f"{opening} {how} {facts_text}{closed} This kind of recall means a temporary or reversible health "
                f"risk is possible. Contact your pharmacy to arrange a replacement. "
                f"{advice(medicine, name, urgent=True, replacement=replacement)}").replace("  ", " ")
    return (f"For your information: {opening[0].lower()}{opening[1:]} {how} {facts_text}{closed} A Class III recall "
            f"is unlikely to cause health problems. Mention it to your pharmacist at your next visit. "
            f"{advice(medicine, name, urgent=False, replacement=replacement)}").replace("  ", " ")


# --- a pack the recall may reach: what is not known ----------------------------------------------

def why_unconfirmed(fact, row) -> str:
    """Why a recall of every lot of some products may or may not cover this pack."""
    product = _product(row)
    products = recall_terms.products(fact)
    if not product:
        return "no product code (NDC) is on record for your pack"
    if not products:
        return "the recall lists no product codes (NDCs) to compare with yours"
    if product in products:
        return (f"your pack's product code (NDC {product}) is listed with the recall, but the recall's own text "
                "does not name it")
    return "our records do not confirm that your pack is one of them"


def candidate_answer(ctx, *, name: str, medicine: str, lot_unknown: list, drug_level: list, serious: bool,
                     unidentified=()) -> str:
    """Caution for a pack that may be recalled: lot_unknown are recalls of some lots of the drug (the
    pack's lot not recorded); drug_level are (fact, row) of recalls of every lot of products the pack may
    or may not be; unidentified are recalls naming the lot of a pack whose product we cannot identify."""
    parts = []
    if unidentified:
        one = len({recall_terms.recall_number(f) for f in unidentified}) <= 1
        parts.append(f"{'A recall names' if one else 'Recalls name'} the lot number of the {name} dispensed to you "
                     f"({numbers_of(unidentified)}), but lot numbers repeat between makers, and we cannot tell whether "
                     f"your pack is the product {'that recall is' if one else 'those recalls are'} about: its product "
                     f"code (NDC) is not one {'it lists' if one else 'they list'}, and its name is not one we can "
                     f"match to a medicine's ingredients. Your pharmacist needs to look at the pack. {READ_THE_NDC}")
    if lot_unknown:
        parts.append(f"{there_are(lot_unknown, f'some {name} lots')} ({numbers_of(lot_unknown)}), and the lot number "
                     f"of the {name} dispensed to you was not recorded, so we cannot tell whether your pack is from "
                     f"one of them. {READ_THE_LOT}")
    ndc_wanted = False
    for fact, row in drug_level:
        covered = recall_terms.covered_lots(fact)
        if covered == "lots it does not list":
            lots = ", ".join(ctx.patient_lots) or "none on file"
            parts.append(f"{describe(fact)}. This recall does not list lot numbers, so we cannot tell from your "
                         f"lot{'s' if len(ctx.patient_lots) != 1 else ''} ({lots}) whether your {name} is affected. "
                         "Ask your pharmacist to check your pack.")
            continue
        why = why_unconfirmed(fact, row)
        parts.append(f"{describe(fact)}. {why[0].upper()}{why[1:]}, so we cannot tell whether yours is one of the "
                     "products it recalls.")
        ndc_wanted = True
    if ndc_wanted:
        parts.append(READ_THE_NDC)
    if serious:
        named = {recall_terms.recall_number(f)
                 for f in [*lot_unknown, *unidentified, *(fact for fact, _row in drug_level)]}
        parts.append(f"{'One of these is' if len(named) > 1 else 'This is'} a Class I recall, the most serious kind: "
                     "contact your pharmacy today, before your next dose.")
    parts.append(advice(medicine, name, urgent=serious, replacement="a replacement if your pack is affected"))
    return " ".join(parts)


# --- no recall reaches the pack ------------------------------------------------------------------

def why_not(fact, rows, *, within, before_closure) -> str:
    """The true reason a recall of the patient's medicine does not reach their pack: 'other lot',
    'window', 'closed', 'other maker' or 'other product'. `within` / `before_closure`: per row, what
    drugs.matching.within_lot_scope and ask.rules.dispensed_before_closure say of it."""
    if not recall_terms.is_drug_level(fact):
        return "other lot"
    if rows and not any(within):
        return "window"
    if rows and not any(before_closure):
        return "closed"
    mine = {_product(r) for r in rows} - {""}
    theirs = _labelers(recall_terms.products(fact))
    if mine and theirs and not _labelers(mine) & theirs:
        return "other maker"
    return "other product"


def safe_answer(ctx, *, name: str, reasons: dict) -> str:
    """Safe: no recall reaches the pack, each recall of the medicine named with its reason
    (reasons: why_not kind -> facts)."""
    answer = f"No recall in our records covers the {name} dispensed to you ({lots_words(ctx.patient_lots)})."
    if reasons.get("other lot"):
        # What we know is that the lot on record is not theirs, not what was in the pack.
        answer += f" {there_are(reasons['other lot'], f'other {name} lots')} ({numbers_of(reasons['other lot'])}), " \
                  "which do not match the lot number on record for your pack."
    if reasons.get("other maker"):
        answer += (f" Recalls of {name} from other makers ({numbers_of(reasons['other maker'])}) name products "
                   "(NDCs) other than the one dispensed to you.")
    if reasons.get("other product"):
        answer += (f" Recalls of other {name} products ({numbers_of(reasons['other product'])}) name product codes "
                   "(NDCs) other than the one dispensed to you.")
    for fact in reasons.get("window", ()):
        kind = recall_terms.window_kind(fact)
        answer += (f" Recall {recall_terms.recall_number(fact)} covers every lot of {describe_product(fact)} "
                   f"{recall_terms.window_words(fact)}; "
                   + ("the expiry date on record for your pack is outside that window."
                      if kind == "expiry_window" else "your pack was dispensed before that window."))
    for fact in reasons.get("closed", ()):
        closed_on = recall_terms.date_words((fact.attributes or {}).get("termination_date"))
        answer += (f" Recall {recall_terms.recall_number(fact)} of {describe_product(fact)} was closed by the FDA "
                   f"on {closed_on}, before your pack was dispensed.")
    return answer


def describe_product(fact) -> str:
    return recall_terms.product_name(with_texts([fact])[0])


def unknown_answer(ctx, *, name: str, gap: str, own_recalls: list) -> str:
    """Unknown: nothing reaches the pack as far as we can tell, but the pack is not positively identified
    (gap "lot": a lot not recorded; "product": no NDC and no ingredient identity)."""
    if gap == "product":
        answer = (f"We cannot tell which product the {name} dispensed to you is: our record of it has no product "
                  "code (NDC), and its name is not one we can match to a medicine's ingredients, so we cannot check "
                  f"it against recalls. {READ_THE_NDC}")
    else:
        packs = "your pack" if len(ctx.dispensed) <= 1 else "one of your packs"
        known = (f" {there_are(own_recalls, f'some {name} lots or products')} ({numbers_of(own_recalls)})."
                 if own_recalls else f" No recall in our records is about {name}.")
        answer = (f"We cannot tell whether the {name} dispensed to you is affected by a recall: the lot number of "
                  f"{packs} was not recorded.{known} {READ_THE_LOT}")
    if must_not_stop_abruptly(ctx.subject):
        answer += f" Do not stop {name} on your own while this is checked: stopping it suddenly can be dangerous."
    return answer


def not_dispensed_answer(ctx, *, name: str, active: list) -> str:
    """Unknown: nothing of this medicine is on record for the patient. "No record" only when no row of
    theirs can be it: a medicine on record under a name we cannot match could be."""
    unmatched = [d for d in ctx.patient_drugs if not d or is_product_key(d)]
    if not ctx.patient_drugs:
        opening = "We have no record of any medicine dispensed to you, so we cannot check your pack."
    elif unmatched:
        names = listing([recall_terms.readable_product(d) or "a medicine with no recorded name" for d in unmatched],
                        most=3)
        opening = (f"We could not find {name} among the medicines on record for you: {names} "
                   f"{'is' if len(unmatched) == 1 else 'are'} recorded under a name we cannot match to a medicine's "
                   f"ingredients, so we cannot tell whether it is your {name}.")
    else:
        opening = f"We have no record of {name} dispensed to you, so we cannot check your pack."
    recalls = f" Some {name} lots are under active recall ({numbers_of(active)})." if active else ""
    return f"{opening}{recalls} Tell us the lot number printed on your pack, or ask your pharmacist to check it."
