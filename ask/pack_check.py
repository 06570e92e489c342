"""Check my pack: is the pack someone holds recalled? For anyone holding one, without a patient record.

    read_pack(ndc=, lot=, gs1=) -> Pack          what was typed or scanned, read; raises PackInputError
    check_pack(pack) -> PackCheck                the answer: outcome, the recalls behind it

The pack is read by the readers every other path uses: the NDC by drugs.ndc (any hyphenation printed on a
pack; ten bare digits stand for the three NDCs they can be, as a barcode's GTIN does, drugs.gs1), the lot
field by drugs.lot_field (a lot with its expiry, a LOT word, a GS1 text), a scan by drugs.gs1. It is then
held against every believed recall fact naming its NDC product, with drugs.matching.explain, as an answer
to a patient is (ADR 0001, 0009, 0010):

- **recalled**: the recall's own product and lot (confirmed), or its product on a recall of every lot;
- **may be recalled**: a lot that may be the recalled one (one read with doubt, a near miss: leading
  zeros, O for 0, a suffix left off) or a product only openFDA's listing names: never "not recalled",
  the pharmacist checks the pack;
- **lot needed**: the product has recalls of some lots and no lot was given;
- **not listed**: the product is named by recalls we know of, none covers this lot. Said as exactly
  that: only FDA recalls we know of were checked, never "safe to take";
- **unidentified**: no recall we know of names the product (or its code can be several products we
  know): we cannot say what it is, so nothing is said of its safety.

A lot never matches on its own: only facts naming the pack's NDC product are read. Nothing here stores
what was asked (ask.pack_check_counts counts outcomes only).
"""

import re
from dataclasses import dataclass, field, replace
from datetime import date
from enum import StrEnum

from django.utils.translation import gettext as _

from ask.answers import must_not_stop_abruptly
from core.lru import LruCache
from drugs import recall_terms
from drugs.gs1 import NdcCandidate, ScanError, gtin_for_ndc, ndc_candidates, parse_scan
from drugs.lot_field import is_placeholder_lot, read_lot_field
from drugs.lots import printed_lot
from drugs.matching import CERTAINTY_RANK, RECALLED_PACK, Found, MatchClass, dispensed, explain, stated_class
from drugs.ndc import normalize_ndc
from drugs.scopes import ANY_LOT, DRUG_LEVEL, dispensing_scopes
from memory.models import Fact
from recalls.selectors import with_texts

MAX_NDC_LENGTH = 40
MAX_LOT_LENGTH = 100
# "NDC 0378-5807-93", "NDC#: 0378 5807 93": the word and the spaces a label prints around the digits.
_NDC_WORD = re.compile(r"^\s*(?:N\.?D\.?C\.?|UPC)\s*(?:#|No\.?|number)?\s*:?\s*", re.IGNORECASE)


class Outcome(StrEnum):
    RECALLED = "recalled"
    MAY_BE_RECALLED = "may_be_recalled"
    LOT_NEEDED = "lot_needed"
    NOT_LISTED = "not_listed"
    UNIDENTIFIED = "unidentified"


class PackInputError(ValueError):
    """What was typed or scanned cannot be read; `errors` says why, per field (ndc, lot, gs1)."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(errors.values()))
        self.errors = errors


@dataclass(frozen=True)
class Pack:
    """A pack as read: the NDCs it may be (one when printed with its hyphens or as 11 digits), its lot."""

    candidates: tuple[NdcCandidate, ...]
    lot: str = ""                      # canonical lot ("" when none was given)
    printed_lot: str = ""
    lot_alternatives: tuple[str, ...] = ()
    lot_reading: str = ""              # how the lot field was read ("" for a lot alone)
    expiry: date | None = None


@dataclass(frozen=True)
class RecallShown:
    """One recall as the answer shows it (the FDA's reason as the FDA wrote it)."""

    number: str
    classification: str
    status: str
    product: str
    reason: str
    covers: str                        # what it covers, in words ("lot 3061169", "every lot")
    lots: tuple[str, ...] = ()         # the recalled lots, printed; () for a recall of every lot
    match: str = ""                    # drugs.matching class reaching this pack; "" when it does not
    rule: str = ""
    window: tuple[str, str, str] = ()  # a recall of every lot in a window: (kind, start, end), ISO dates or ""


@dataclass(frozen=True)
class PackCheck:
    outcome: Outcome
    ndc: str = ""                      # the NDC-11 the pack was identified as; "" when unidentified
    lot: str = ""                      # the lot as read, printed
    lot_reading: str = ""
    recalls: tuple[RecallShown, ...] = field(default=())
    classification: str = ""           # of the most serious recall reaching the pack
    ambiguous: tuple[str, ...] = ()    # NDCs the code may be when several are products we know
    do_not_stop: bool = False          # a medicine that must not be stopped abruptly (ask.answers)
    date_needed: str = ""              # "expiry date" or "dispensing date": a window recall's date, not given


# --- reading what was typed or scanned ----------------------------------------------------------

def _ndc_candidates(raw: str) -> tuple[NdcCandidate, ...]:
    text = _NDC_WORD.sub("", raw.strip())
    text = re.sub(r"(?<=\d)[\s.]+(?=\d)", "-", text.strip())  # "0378 5807 93" and "0378.5807.93" as printed
    digits = text.replace("-", "")
    if len(digits) == 10 and digits.isascii() and digits.isdigit() and "-" not in text:
        # Ten bare digits can be three NDCs (4-4-2, 5-3-2, 5-4-1), as a barcode's GTIN can.
        return tuple(ndc_candidates(gtin_for_ndc(f"{digits[:4]}-{digits[4:8]}-{digits[8:]}")))
    ndc11 = normalize_ndc(text)  # ValueError says what an NDC looks like
    return (NdcCandidate(printed=text, ndc11=ndc11, layout="5-4-2" if len(digits) == 11 else "as typed"),)


def read_pack(*, ndc: str = "", lot: str = "", gs1: str = "") -> Pack:
    """Read the typed NDC and lot, or a scanned barcode's text (raw, printed '(01)...' or a Digital Link).
    A lot typed beside a scan must be the scan's; an NDC typed beside it, one the scan can be."""
    ndc, lot, gs1 = (ndc or "").strip(), (lot or "").strip(), (gs1 or "").strip()
    errors: dict[str, str] = {}
    if len(ndc) > MAX_NDC_LENGTH:
        errors["ndc"] = _("The NDC is %(n)d characters long; an NDC has 10 or 11 digits.") % {"n": len(ndc)}
    if len(lot) > MAX_LOT_LENGTH:
        errors["lot"] = _("The lot is %(n)d characters long; type only the lot printed on the pack.") % {"n": len(lot)}
    if errors:
        raise PackInputError(errors)
    candidates: tuple[NdcCandidate, ...] = ()
    scan = None
    if gs1:
        try:
            scan = parse_scan(gs1)
        except ScanError as exc:
            raise PackInputError({"gs1": _("The barcode could not be read: %(why)s") % {"why": exc}}) from exc
        if not scan.gtin:
            raise PackInputError({"gs1": _("The barcode holds no product code (GTIN). Type the NDC printed on the "
                                            "pack instead.")})
        candidates = scan.candidates
        if not candidates:
            raise PackInputError({"gs1": _("The barcode's product code %(gtin)s is not a US medicine's NDC. Type "
                                            "the NDC printed on the pack instead.") % {"gtin": scan.gtin}})
    if ndc:
        try:
            typed = _ndc_candidates(ndc)
        except ValueError:
            errors["ndc"] = _("%(ndc)s is not an NDC. Type the 10 or 11 digits printed after “NDC” on the pack, "
                              "with or without its hyphens (for example 0378-5807-93).") % {"ndc": ndc}
        else:
            if candidates:
                typed_ndcs = {c.ndc11 for c in typed}
                candidates = tuple(c for c in candidates if c.ndc11 in typed_ndcs)
                if not candidates:
                    errors["ndc"] = _("The NDC typed is not the one in the barcode: check which pack you scanned.")
            else:
                candidates = typed
    field_read = read_lot_field(lot) if lot else None
    if field_read is not None and (not field_read.lot or is_placeholder_lot(lot)):
        errors["lot"] = _("No lot number could be read from “%(lot)s”. Type the lot printed on the pack (often "
                          "after “LOT”, near the expiry date).") % {"lot": lot}
    if not gs1 and not ndc:
        errors["ndc"] = _("Type the NDC printed on the pack, or scan its barcode.")
    if errors:
        raise PackInputError(errors)
    if scan is not None and scan.lot:
        scanned = read_lot_field(scan.lot)
        if field_read is not None and field_read.lot != scanned.lot and scanned.lot not in field_read.alternatives:
            raise PackInputError({"lot": _("The barcode reads lot %(scanned)s but %(typed)s was typed: which is on "
                                           "the pack?") % {"scanned": scanned.printed, "typed": lot}})
        field_read = scanned
    expiry = (scan.expiry if scan is not None else None) or (field_read.expiry if field_read else None)
    if field_read is None:
        return Pack(candidates=candidates, expiry=expiry)
    return Pack(candidates=candidates, lot=field_read.lot, printed_lot=field_read.printed,
                lot_alternatives=field_read.alternatives, lot_reading=field_read.reading, expiry=expiry)


# --- deciding ------------------------------------------------------------------------------------

def recall_index(products) -> list[tuple[int, str, str | None, list[str], tuple]]:
    """(id, fact key, lot, scopes, version identity) of every believed recall fact naming any of these NDC
    products, for every lot or for some (the scopes drugs.scopes.fact_scopes writes; GIN index on scopes).
    A light query: no attributes are read, yet it tells which product is known, which recalls name it and
    with which lots. Read on every check: it is where belief is decided."""
    scopes = sorted({f"ndc:{product}|{part}" for product in products for part in (DRUG_LEVEL, ANY_LOT)})
    if not scopes:
        return []
    rows = (Fact.objects.believed().filter(kind=Fact.Kind.RECALL, scopes__overlap=scopes).order_by("id")
            .values_list("id", "fact_key", "lot", "scopes", "version", "content_hash"))
    return [(fact_id, key, lot, scopes, (fact_id, key, version, content_hash))
            for fact_id, key, lot, scopes, version, content_hash in rows]


# The fact versions a check matches against, with their texts inline, kept per process. A version's
# content never changes once written (memory's content guard; only its retraction does), and which versions
# are believed is read on every check (recall_index), so a kept version is never out of date: it is only
# ever used when the index, read now, names it. Keyed by the version's whole identity (id, key, version,
# content hash) so a reused id (a test database reset) cannot return another fact.
FACT_CACHE_SIZE = 4096
_facts_read = LruCache(FACT_CACHE_SIZE)


def _read_facts(identities: list[tuple]) -> dict[int, Fact]:
    """{fact id: fact with texts inline} for these version identities: the cache, then one query."""
    found, missing = _facts_read.get_many(identities)
    if missing:
        read = {fact.id: fact for fact in with_texts(Fact.objects.filter(id__in=[i[0] for i in missing])
                                                      .defer("embedding"))}
        fresh = {identity: read[identity[0]] for identity in missing if identity[0] in read}
        _facts_read.put_many(fresh)
        found.update(fresh)
    return {identity[0]: fact for identity, fact in found.items()}


def _names(scopes, product: str) -> bool:
    return f"ndc:{product}|{DRUG_LEVEL}" in scopes or f"ndc:{product}|{ANY_LOT}" in scopes


def _shown(fact, found) -> RecallShown:
    attributes = fact.attributes or {}
    return RecallShown(
        number=recall_terms.recall_number(fact), classification=recall_terms.classification(fact),
        status=attributes.get("status") or "", product=recall_terms.product_name(fact),
        reason=" ".join((attributes.get("reason") or "").split()), covers=recall_terms.covered_lots(fact),
        lots=() if recall_terms.is_drug_level(fact) else (printed_lot(fact.lot),),
        match=str(found.klass) if found else "", rule=found.rule if found else "", window=_window(fact))


def _window(fact) -> tuple[str, str, str]:
    kind = recall_terms.window_kind(fact) if recall_terms.is_drug_level(fact) else ""
    if not kind:
        return ()
    start, end = (list((recall_terms.lot_scope(fact) or {}).get(kind) or []) + [None, None])[:2]
    return kind, str(start or ""), str(end or "")


def check_pack(pack: Pack) -> PackCheck:
    """The answer for one pack (reads only; two queries). Only the facts sharing a scope with the pack (what
    a decision about it would rest on: drugs.scopes.dispensing_scopes) are read in full and matched, and,
    when none reaches it, one fact per recall naming its product, to show them."""
    products = {c.product: c for c in pack.candidates}
    index = recall_index(products)
    known = [c for product, c in products.items() if any(_names(row[3], product) for row in index)]
    lot = pack.printed_lot or printed_lot(pack.lot)
    if len(known) != 1:
        return PackCheck(Outcome.UNIDENTIFIED, lot=lot, lot_reading=pack.lot_reading,
                         ambiguous=tuple(c.printed for c in known))
    candidate = known[0]
    naming = [row for row in index if _names(row[3], candidate.product)]
    premises = set(dispensing_scopes("", pack.lot, candidate.product, pack.lot_alternatives))
    sharing = {fact_id for fact_id, _key, _lot, scopes, _identity in naming if premises.intersection(scopes)}
    lots_by_recall: dict[str, set[str]] = {}
    first_of_recall: dict[str, int] = {}
    for fact_id, key, fact_lot, _scopes, _identity in naming:
        number = recall_terms.recall_number_of_key(key)
        first_of_recall.setdefault(number, fact_id)
        if fact_lot:
            lots_by_recall.setdefault(number, set()).add(printed_lot(fact_lot))
    wanted = sharing | set(first_of_recall.values())
    read = _read_facts([row[4] for row in naming if row[0] in wanted])
    held = dispensed(ndc=candidate.ndc11, lot=pack.lot, lot_unknown=not pack.lot, expiry=pack.expiry,
                     alternatives=pack.lot_alternatives)
    found = [(fact, hit) for fact in (read[i] for i in sorted(sharing)) if (hit := explain(fact, held))]
    # A recall of every lot in a window reaches a pack without the date it is read against, but cannot say it
    # is recalled: stated as a pack that may be (drugs.matching.stated_class), and the date is asked for.
    reaching = [(fact, Found(MatchClass(stated_class(hit.klass, fact, [held])), hit.rule)) for fact, hit in found]
    date_needed = next((_WINDOW_DATE[recall_terms.window_kind(fact)]
                        for (fact, hit), (_f, said) in zip(found, reaching, strict=True)
                        if hit.klass != said.klass), "")
    if reaching:
        best = min(CERTAINTY_RANK[hit.klass.value] for _fact, hit in reaching)
        lot_given = bool(pack.lot)
        outcome = _outcome_of(list(MatchClass)[best], lot_given=lot_given)
        shown = _by_recall([(fact, hit) for fact, hit in reaching
                            if _outcome_of(hit.klass, lot_given=lot_given) == outcome])
    else:
        outcome = Outcome.NOT_LISTED
        shown = _by_recall([(read[i], None) for i in first_of_recall.values()], lots_by_recall)
    serious = max((recall_terms.severity(fact) for fact, hit in reaching), default=0)
    classification = next((c for c, s in recall_terms.CLASS_SEVERITY.items() if s == serious), "")
    subjects = {fact.subject for fact, _hit in reaching}
    return PackCheck(outcome, ndc=candidate.ndc11, lot=lot, lot_reading=pack.lot_reading, recalls=shown,
                     classification=classification, do_not_stop=any(must_not_stop_abruptly(s) for s in subjects),
                     date_needed=date_needed if outcome == Outcome.MAY_BE_RECALLED else "")


_WINDOW_DATE = {"expiry_window": "expiry date", "dispensed_window": "dispensing date"}


def _outcome_of(klass: MatchClass, *, lot_given: bool) -> Outcome:
    """A candidate (the product is not certainly the recalled one, or the lot is unknown) asks for the lot
    only when none was given: with the lot typed, asking for it again would send the holder round in a loop."""
    if klass in RECALLED_PACK:
        return Outcome.RECALLED
    if klass == MatchClass.PROBABLE or lot_given:
        return Outcome.MAY_BE_RECALLED
    return Outcome.LOT_NEEDED


def _by_recall(found, lots_by_recall=None) -> tuple[RecallShown, ...]:
    """One line per recall number: its lots joined (those found, or `lots_by_recall`), the strongest match
    kept; most serious first."""
    by_number: dict[str, list] = {}
    for fact, hit in found:
        by_number.setdefault(recall_terms.recall_number(fact), []).append((fact, hit))
    shown = []
    for pairs in by_number.values():
        pairs.sort(key=lambda pair: CERTAINTY_RANK[pair[1].klass.value] if pair[1] else len(CERTAINTY_RANK))
        first = _shown(*pairs[0])
        lot_level = sorted((lots_by_recall or {}).get(first.number) or
                           {printed_lot(f.lot) for f, _hit in pairs if not recall_terms.is_drug_level(f)})
        if len(lot_level) > 1:
            first = replace(first, covers="lots " + ", ".join(lot_level), lots=tuple(lot_level))
        shown.append((recall_terms.CLASS_SEVERITY.get(first.classification, 0), first))
    shown.sort(key=lambda item: (-item[0], item[1].number))
    return tuple(item for _severity, item in shown)
