"""manage.py demo_shelf: the shelf half of the demo recall (after ingest_recalls --demo and seed_demo).

A SYNTHETIC DSCSA shipment (EPCIS 2.0 JSON) reaches the demo pharmacy: 12 bottles of the demo recall's real
product and lot (D-0326-2019, Mylan valsartan 160 mg, NDC 0378-5814-77, lot 3069020) and 6 of an unrecalled
lot. Three of the demo patients' fills are then recorded as scanned (the pack's DataMatrix GTIN and serial on
their dispensing rows), which takes those units off the shelf and ties them to the patients. The recall page,
/worklist/recall/D-0326-2019, shows both halves: units on the shelf to quarantine, and the units that left with
patients beside the patients to reach. Running it again receives nothing twice and scans nothing twice.
"""

import json
import uuid

from django.core.management.base import CommandError

from core.commands import MigratedCommand
from demo.patients import DEMO_EXPOSED_REFS, DEMO_LOT, DEMO_RECALL_NUMBER, DEMO_SITE
from drugs.gs1 import gtin_for_ndc, sgtin_uri
from patients.dispensing import save_dispensing
from patients.models import DispensingRecord
from shelf.receiving import receive
from worklist.recall_pages import recall_known

PRINTED_NDC = "0378-5814-77"  # as on the bottle (4-4-2); the 5-4-2 form is 00378-5814-77
OTHER_LOT = "3095511"         # a lot of the same product that the recall does not name
SCANNED = 3


def _serial(lot: str, n: int) -> str:
    return f"SYN{lot[-4:]}{n:05d}"


def shipment() -> bytes:
    gtin = gtin_for_ndc(PRINTED_NDC)
    company, item = gtin[1:8], gtin[0] + gtin[8:13]
    events = []
    for lot, count in ((DEMO_LOT, 12), (OTHER_LOT, 6)):
        epcs = [sgtin_uri(gtin, _serial(lot, n)) for n in range(1, count + 1)]
        events.append({
            "type": "ObjectEvent", "eventID": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'unsay-demo-{lot}')}",
            "eventTime": "2018-09-20T14:00:00.000Z", "eventTimeZoneOffset": "+00:00", "epcList": epcs,
            "action": "OBSERVE", "bizStep": "receiving", "disposition": "in_progress",
            "ilmd": {"cbvmda:lotNumber": lot}})
    return json.dumps({
        "@context": ["https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld"],
        "type": "EPCISDocument", "schemaVersion": "2.0", "creationDate": "2018-09-20T14:00:00.000Z",
        "epcisHeader": {"epcisMasterData": {"vocabularyList": [{
            "type": "urn:epcglobal:epcis:vtype:EPCClass", "vocabularyElementList": [{
                "id": f"urn:epc:idpat:sgtin:{company}.{item}.*", "attributes": [
                    {"id": "urn:epcglobal:cbv:mda#additionalTradeItemIdentification", "attribute": PRINTED_NDC},
                    {"id": "urn:epcglobal:cbv:mda#regulatedProductName",
                     "attribute": "Valsartan Tablets USP 160 mg, 90-count (synthetic shipment)"}]}]}]}},
        "epcisBody": {"eventList": events}}).encode()


class Command(MigratedCommand):
    help = "Demo: a synthetic EPCIS shipment of the demo recall's lot is received and three fills are scanned."

    def handle(self, *args, **options):
        if not recall_known(DEMO_RECALL_NUMBER):
            raise CommandError(f"{DEMO_RECALL_NUMBER} is not on file: run `manage.py ingest_recalls --demo` first.")
        receipt = receive(shipment(), site=DEMO_SITE, source="demo_shelf", actor="demo_shelf")
        self.stdout.write(f"Shipment at {DEMO_SITE}: {receipt.applied} event(s) applied, {receipt.skipped} already "
                          f"received; {receipt.units_new} new unit(s).")
        gtin = gtin_for_ndc(PRINTED_NDC)
        rows = (DispensingRecord.objects.filter(patient__external_ref__in=DEMO_EXPOSED_REFS[:SCANNED], lot=DEMO_LOT)
                .order_by("patient__external_ref"))
        scanned = 0
        for n, row in enumerate(rows, start=1):
            if row.serial:
                continue
            row.gtin, row.serial = gtin, _serial(DEMO_LOT, n)
            save_dispensing(row, actor="demo_shelf")  # after commit, the shelf links the unit to this fill
            scanned += 1
        if not rows:
            raise CommandError("No demo dispensing of the recalled lot: run `manage.py seed_demo` first.")
        self.stdout.write(f"{scanned} fill(s) recorded as scanned. Open /worklist/recall/{DEMO_RECALL_NUMBER}: "
                          "units on the shelf beside the patients.")
