"""The demo scenario: twelve synthetic patients dispensed one real recalled lot, plus unaffected neighbours.

Why D-0326-2019, lot 3069020 (openFDA 2021-04-28 bulk file, tests/fixtures/openfda/):
- a blood-pressure drug (valsartan, an angiotensin II receptor blocker; the 2018-19 nitrosamine
  recalls), recalled by Mylan Laboratories Limited, "Valsartan Tablets, USP 160 mg, 90-count
  bottles", NDC 0378-5814-77;
- Class II and Ongoing, so a staged escalation to Class I visibly moves verdicts from caution to stop;
- still Ongoing in the 2023-08-05 snapshot too, so ingesting either file tells the same story;
- lot-level: code_info lists 19 lots ("Lot Numbers: 3069019,  3069020, 3069021, ..."); 3069020 sits
  between commas, so it survives any reasonable lot splitter, and it appears in no other recall.
The neighbours' lots (3095511, 3095512, 3101147, ES2207A, RV31548) appear in no record of any
fixture, so they are unaffected by construction. Caveat for the reasoner: the 2021 file also has
Ongoing *drug-level* valsartan recalls from other makers (e.g. D-0968-2018, Solco, "All lots within
expiry"); they list their own NDCs, and patients.services narrows drug-level exposure by NDC product,
which is why every demo dispensing carries the real NDC of what was dispensed.
"""

from datetime import UTC, datetime

from django.conf import settings
from django.db import transaction

from patients.dispensing import save_dispensing
from patients.models import DispensingRecord, Patient

DEMO_RECALL_NUMBER = "D-0326-2019"
DEMO_LOT = "3069020"
DEMO_DRUG = "valsartan"
DEMO_PRODUCT = "Valsartan Tablets, USP 160 mg, 90-count bottles (Mylan)"
DEMO_NDC = "00378-5814-77"
DEMO_SITE = "Unsay Demo Pharmacy (synthetic)"

DEMO_EXPOSED_REFS = [f"DEMO-EXPOSED-{i:02d}" for i in range(1, 13)]
# Same drug, same product, other (unrecalled) lots: must not be matched.
DEMO_SAME_DRUG_OTHER_LOT = {"DEMO-OTHERLOT-01": "3095511", "DEMO-OTHERLOT-02": "3095512", "DEMO-OTHERLOT-03": "3101147"}
# Other drugs entirely.
DEMO_OTHER_DRUG = {
    "DEMO-OTHERDRUG-01": ("escitalopram", "Escitalopram Tablets USP 10 mg, 30-count", "ES2207A"),
    "DEMO-OTHERDRUG-02": ("rosuvastatin", "Rosuvastatin Tablets USP 10 mg, 90-count", "RV31548"),
}
DEMO_NEIGHBOUR_REFS = list(DEMO_SAME_DRUG_OTHER_LOT) + list(DEMO_OTHER_DRUG)
DEMO_PATIENT_REFS = DEMO_EXPOSED_REFS + DEMO_NEIGHBOUR_REFS


def demo_regions() -> list[str]:
    """The first three configured regions (fewer if fewer are configured)."""
    return list(settings.UNSAY_REGIONS[:3])


def _patient(ref: str, index: int, regions: list[str]) -> Patient:
    by_email = index % 2 == 0
    patient, _ = Patient.objects.update_or_create(
        external_ref=ref,
        defaults={
            "display_name": f"Demo patient {ref.split('-', 1)[1].title()} (synthetic)",
            "region": regions[index % len(regions)],
            "preferred_channel": Patient.Channel.EMAIL if by_email else Patient.Channel.SMS,
            "email": f"{ref.lower()}@example.com",
            "phone": f"+1555010{index:04d}",  # 555-01xx: reserved for fiction
            "synthetic": True,
        },
    )
    return patient


def _dispense(patient, *, drug, product, ndc, lot, day) -> bool:
    record = DispensingRecord(patient=patient, drug=drug, lot=lot, product_description=product, ndc=ndc,
                              dispensed_at=datetime(2018, 10, day, 15, 0, tzinfo=UTC), quantity=90, site=DEMO_SITE,
                              region=patient.region, synthetic=True)
    record.full_clean(validate_unique=False)  # the model's own normalisation, as for staff's rows
    if DispensingRecord.objects.filter(patient=patient, drug=record.drug, lot=record.lot,
                                       dispensed_at=record.dispensed_at).exists():
        return False
    save_dispensing(record, actor="seed_demo")
    return True


@transaction.atomic
def seed_demo() -> dict:
    """Create (or bring back to) the demo scenario. Idempotent; needs no recall to be ingested."""
    regions = demo_regions()
    if not regions:
        raise ValueError("UNSAY_REGIONS is empty: the demo needs at least one region.")
    created = 0
    for i, ref in enumerate(DEMO_EXPOSED_REFS):
        patient = _patient(ref, i, regions)
        created += _dispense(patient, drug=DEMO_DRUG, product=DEMO_PRODUCT, ndc=DEMO_NDC, lot=DEMO_LOT, day=1 + i)
    for j, (ref, lot) in enumerate(DEMO_SAME_DRUG_OTHER_LOT.items()):
        patient = _patient(ref, j, regions)
        created += _dispense(patient, drug=DEMO_DRUG, product=DEMO_PRODUCT, ndc=DEMO_NDC, lot=lot, day=15 + j)
    for k, (ref, (drug, product, lot)) in enumerate(DEMO_OTHER_DRUG.items()):
        patient = _patient(ref, k, regions)
        created += _dispense(patient, drug=drug, product=product, ndc="", lot=lot, day=20 + k)
    return {"patients": len(DEMO_PATIENT_REFS), "dispensings_created": created, "regions": regions}
