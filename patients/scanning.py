"""A package scan applied to a dispensing being entered (admin form, inline rows, CSV `scan` column).

    apply_scan(scan, entered) -> (ScanFill, errors)

The barcode (drugs.gs1) gives GTIN, expiry, lot and serial. What staff typed as well must agree
with it; what they left empty is filled from it. The GTIN's NDC is ambiguous in its hyphenation
(0093-7367-56, 00937-367-56 or 00937-3675-6 are one GTIN): it is resolved by what we were told about
this GTIN — the NDC EPCIS receiving recorded for units of it (the supplier's master data) — else against
the NDC products we know of — the NDCs already on dispensing rows and the products believed recall
facts name (attributes `ndc_products` / `ndcs`) — and when that leaves none or several, staff are asked
to type the NDC printed on the pack. The NDC is never guessed.

What the shelf received sits in a layer above patients, so it is not imported: the shelf registers a
reader in GTIN_NDC_SOURCES, and in FILL_REFUSALS why a pack it holds may not be dispensed (a quarantined
unit: the scan is refused with the recall's number and what to do) (shelf.apps; docs/adr/0006).
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from django.db.models import Q

from drugs.gs1 import NdcCandidate, Scan
from drugs.lot_field import read_lot_field
from drugs.lots import canonical_lot
from drugs.ndc import normalize_ndc
from drugs.scopes import DRUG_LEVEL
from memory.models import Fact
from patients.models import DispensingRecord

# Functions GTIN-14 -> the NDC-11s (5-4-2) a layer above was told the GTIN stands for, registered in their
# AppConfig.ready: shelf.selectors.ndcs_received, the NDCs of units received by EPCIS.
GTIN_NDC_SOURCES: list[Callable[[str], set[str]]] = []
# Functions (GTIN-14, serial, site) -> why a layer above refuses to see this very pack dispensed ('' when it
# does not), registered in their AppConfig.ready: shelf.scans.refusal_at_fill (a quarantined unit, say).
FILL_REFUSALS: list[Callable[[str, str, str], str]] = []


@dataclass
class Entered:
    """What staff typed next to the scan (empty = not typed)."""
    ndc: str = ""
    lot: str = ""
    expiry: date | None = None
    serial: str = ""
    lot_unknown: bool = False
    site: str = ""  # where the fill is made: the shelf's unit of that site is the pack scanned


@dataclass
class ScanFill:
    ndc: str            # NDC-11 5-4-2, or "" when the scan has no GTIN (typed NDC kept)
    lot: str
    expiry: date | None
    serial: str
    gtin: str


def known_products(candidates: list[NdcCandidate], lot: str = "", gtin: str = "") -> set[str]:
    """Which of the candidates' NDC products ('00093-7367') are known: the GTIN's own NDC as received, on
    a dispensing row already, or named by a believed recall fact. The first step that knows any answers:
    0. the GTIN's NDC as EPCIS receiving recorded it (GTIN_NDC_SOURCES): what the supplier said of this
       very GTIN, so it settles the hyphenation even when another candidate is known as a product;
    1. dispensing rows: one range per product on the dispensing_ndc index (rows store 5-4-2);
    2. believed facts whose scopes name the product for this lot or all lots (GIN index on scopes):
       the case that matters most, a recalled pack, is settled by an index;
    3. believed recall facts naming the product anywhere in attributes `ndc_products` / `ndcs`: no
       index, one scan (~0.1 s at 2,000 facts here, bench/scan_resolution.py), only when 1-2 found nothing."""
    products = {c.product: c for c in candidates}
    if not products:
        return set()
    if gtin:
        told = set().union(*(source(gtin) for source in GTIN_NDC_SOURCES))
        if received := {c.product for c in candidates if c.ndc11 in told}:
            return received
    in_range = Q()
    for product in products:
        in_range |= Q(ndc__range=(f"{product}-00", f"{product}-99"))
    known = {ndc[:10] for ndc in DispensingRecord.objects.filter(in_range).values_list("ndc", flat=True)
             .distinct()[:20]} & set(products)
    if known:
        return known
    believed = Fact.objects.believed()
    lot_part = canonical_lot(lot) or DRUG_LEVEL
    tags = sorted({f"ndc:{p}|{part}" for p in products for part in (lot_part, DRUG_LEVEL)})
    for scopes in believed.filter(scopes__overlap=tags).values_list("scopes", flat=True)[:50]:
        known |= {p for p in products if any(s in scopes for s in (f"ndc:{p}|{lot_part}", f"ndc:{p}|{DRUG_LEVEL}"))}
    if known:
        return known
    named = Q()
    for product, candidate in products.items():
        named |= (Q(attributes__ndc_products__contains=[product]) | Q(attributes__ndcs__contains=[candidate.ndc11])
                  | Q(attributes__ndcs__contains=[product]))
    rows = (believed.filter(kind=Fact.Kind.RECALL).filter(named)
            .values_list("attributes__ndc_products", "attributes__ndcs")[:50])
    for listed_products, listed_ndcs in rows:
        named_here = {str(v) for v in (listed_products or [])} | {str(v)[:10] for v in (listed_ndcs or [])}
        known |= named_here & set(products)
    return known


def _ndc_question(scan: Scan, why: str) -> str:
    options = ", ".join(f"{c.printed} ({c.layout})" for c in scan.candidates)
    return (f"The scanned GTIN {scan.gtin} is one of the NDCs {options}, and {why}. Type the NDC printed on the "
            "pack in the NDC field (with its hyphens) and save again.")


def resolve_ndc(scan: Scan, typed_ndc: str = "") -> tuple[str, str]:
    """(NDC-11, error). A typed NDC must be one the GTIN can stand for; otherwise the known products
    must single one out."""
    if typed_ndc:
        try:
            typed = normalize_ndc(typed_ndc)
        except ValueError:
            return "", ""  # the NDC field reports its own error
        if typed in {c.ndc11 for c in scan.candidates}:
            return typed, ""
        return "", (f"The typed NDC {typed_ndc} is not the scanned package (GTIN {scan.gtin} is "
                    f"{' or '.join(c.printed for c in scan.candidates)}): check which pack was dispensed.")
    known = known_products(list(scan.candidates), scan.lot, scan.gtin)
    matching = [c for c in scan.candidates if c.product in known]
    if len(matching) == 1:
        return matching[0].ndc11, ""
    if not matching:
        return "", _ndc_question(scan, "none of them is a product we know yet")
    return "", _ndc_question(scan, f"{len(matching)} of them are products we know")


def apply_scan(scan: Scan, entered: Entered) -> tuple[ScanFill, dict[str, str]]:
    """Fill what staff left empty from the scan; report (per field) what disagrees with it."""
    errors: dict[str, str] = {}
    ndc = entered.ndc
    if scan.gtin:
        if not scan.is_us_drug:
            errors["scan"] = (f"The scanned GTIN {scan.gtin} is not a US drug code (it is not built from an NDC): "
                              "is this the right pack?")
        else:
            ndc, problem = resolve_ndc(scan, entered.ndc)
            if problem:
                errors["ndc"] = problem
            elif not ndc:
                ndc = entered.ndc  # unreadable typed NDC: the model's own NDC error explains it
    lot = entered.lot
    if scan.lot:
        if entered.lot_unknown:
            errors["lot_unknown"] = f"The scan reads lot {scan.lot}: untick 'lot unknown'."
        elif not entered.lot:
            lot = scan.lot
        else:
            # "3069020 EXP 05/26" typed is lot 3069020; a field read with doubt ("3069020 - 0526") agrees
            # when the scanned lot is one of its readings, and the barcode then settles which.
            typed = read_lot_field(entered.lot)
            if canonical_lot(scan.lot) in typed.alternatives:
                lot = scan.lot
            elif typed.lot != canonical_lot(scan.lot):
                errors["lot"] = f"The scan reads lot {scan.lot} but {entered.lot} was typed: which is on the pack?"
    expiry = entered.expiry
    if scan.expiry:
        if entered.expiry is None:
            expiry = scan.expiry
        elif entered.expiry != scan.expiry:
            errors["expiry"] = (f"The scan reads expiry {scan.expiry:%Y-%m-%d} but {entered.expiry:%Y-%m-%d} was "
                                "typed: which is on the pack?")
    serial = entered.serial
    if scan.serial:
        if not entered.serial:
            serial = scan.serial
        elif entered.serial != scan.serial:
            errors["serial"] = f"The scan reads serial {scan.serial} but {entered.serial} was typed."
    if scan.gtin and serial and not errors:
        for refusal in FILL_REFUSALS:
            if reason := refusal(scan.gtin, serial, entered.site):
                errors["scan"] = reason
                break
    return ScanFill(ndc=ndc, lot=lot, expiry=expiry, serial=serial, gtin=scan.gtin), errors
