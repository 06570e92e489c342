"""Synthetic patients and dispensing for demos and benchmarks (real dispensing is PHI).

Recalled lots are drawn from the believed lot-level recall facts already ingested, so exposure has
something real to find; the rest are lots that no believed recall names.
"""

import random
import uuid
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction

from drugs.identity import resolve
from drugs.ndc import ndc_product, normalize_ndc
from memory.models import Fact
from patients.dispensing import create_dispensings
from patients.models import DispensingRecord, Patient

# Common generics for unaffected dispensing when no recall names the drug.
EVERYDAY_DRUGS = ["atorvastatin", "metformin", "lisinopril", "amlodipine", "levothyroxine", "omeprazole",
                  "losartan potassium", "valsartan", "sertraline", "montelukast"]
SITES = ["Main Street Pharmacy (synthetic)", "Harbour Clinic Pharmacy (synthetic)", "Hillside Pharmacy (synthetic)"]


def recalled_lots(limit: int = 5000) -> list[tuple[str, str, str]]:
    """(drug, lot, ndc or '') of believed lot-level recall facts."""
    rows = (Fact.objects.believed().filter(kind=Fact.Kind.RECALL, lot__isnull=False).exclude(lot="")
            .order_by("id").values_list("subject", "lot", "attributes")[:limit])
    picked = []
    for subject, lot, attributes in rows:
        ndc = ""
        for raw in (attributes or {}).get("ndcs") or []:
            try:
                ndc = normalize_ndc(str(raw))
                break
            except ValueError:
                continue
        picked.append((subject, lot, ndc))  # the subject is already an identity key ("" when unresolved)
    return [p for p in picked if p[0]]


def seed_patients(count: int, *, per_patient: int = 3, recalled_share: float = 0.2, seed: int | None = None) -> dict:
    """Create `count` synthetic patients across the configured regions, each with 1..per_patient
    dispensings; about `recalled_share` of dispensings get a lot a believed recall names."""
    if count < 1:
        raise ValueError("count must be at least 1.")
    regions = list(settings.UNSAY_REGIONS)
    if not regions:
        raise ValueError("UNSAY_REGIONS is empty: patients need a home region.")
    rng = random.Random(seed)
    recalled = recalled_lots()
    recalled_keys = {(drug, lot) for drug, lot, _ in recalled}
    drugs = sorted({drug for drug, _, _ in recalled} | set(EVERYDAY_DRUGS))
    batch = uuid.uuid4().hex[:8].upper()
    now = datetime.now(UTC)
    with transaction.atomic():
        patients = Patient.objects.bulk_create([
            Patient(
                external_ref=f"SYN-{batch}-{i:06d}", display_name=f"Synthetic patient {batch}-{i:06d} (synthetic)",
                region=regions[i % len(regions)], preferred_channel=Patient.Channel.EMAIL,
                email=f"syn-{batch.lower()}-{i:06d}@example.com", synthetic=True,
            )
            for i in range(count)
        ], batch_size=2000)
        rows, exposed = [], 0
        for patient in patients:
            for _ in range(rng.randint(1, per_patient)):
                if recalled and rng.random() < recalled_share:
                    drug, lot, ndc = rng.choice(recalled)
                    exposed += 1
                else:
                    drug, ndc = rng.choice(drugs), ""
                    lot = f"SYN{rng.randrange(10**6):06d}"
                    while (drug, lot) in recalled_keys:  # unaffected by construction
                        lot = f"SYN{rng.randrange(10**6):06d}"
                identity = resolve(drug)  # bulk_create skips save(): resolve as save() would
                rows.append(DispensingRecord(
                    patient=patient, region=patient.region, drug=identity.key, drug_text=drug,
                    drug_source=identity.source, lot=lot, ndc=ndc, ndc_product=ndc_product(ndc),
                    product_description=f"{drug.title()} (synthetic)", quantity=rng.choice([30, 60, 90]),
                    dispensed_at=now - timedelta(days=rng.randint(1, 720), minutes=rng.randint(0, 1440)),
                    site=rng.choice(SITES), synthetic=True,
                ))
        # Through the dispensing service like every other path (row + audit + one announcement after
        # commit). Benchmarks that need a million rows load them with COPY (bench/exposure.py).
        for row in rows:
            row.full_clean(validate_unique=False, validate_constraints=False)  # the model's normalisation
        create_dispensings(rows, actor="seed_patients")
    return {"patients": len(patients), "dispensings": len(rows), "recalled_dispensings": exposed,
            "recalled_lots_available": len(recalled), "batch": batch}
