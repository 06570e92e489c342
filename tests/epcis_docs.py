"""SYNTHETIC EPCIS documents for the shelf tests and bench: shipments a supplier could send a pharmacy,
built around REAL recalled NDCs and lots from the openFDA fixtures (D-0502-2019: losartan 50 mg, 30-count,
NDC 13668-409-30, lot 4L67C035). The serials, SSCCs, event times and locations are invented.
"""

import json

from drugs.gs1 import gtin_for_ndc, sgtin_uri

LOSARTAN_NDC, LOSARTAN_LOT, LOSARTAN_EXPIRY = "13668-409-30", "4L67C035", "2019-10-31"
LOSARTAN_GTIN = gtin_for_ndc(LOSARTAN_NDC)  # 00313668409307
OTHER_LOT = "4L67C099"  # a lot the recall does not name (synthetic)
SUPPLIER = "urn:epc:id:sgln:0313668.00001.0"
PHARMACY = "urn:epc:id:sgln:0614141.00001.0"


def serials(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i:06d}" for i in range(1, n + 1)]


def units(gtin: str, serial_list) -> list[str]:
    return [sgtin_uri(gtin, s) for s in serial_list]


def sscc(n: int) -> str:
    return f"urn:epc:id:sscc:0313668.{n:010d}"


def _xml_epcs(tag, epcs):
    return f"<{tag}>" + "".join(f"<epc>{e}</epc>" for e in epcs) + f"</{tag}>"


def xml_object_event(epcs, step, *, action="ADD", lot="", expiry="", time="2019-01-10T09:00:00Z", event_id=""):
    ilmd = (f"<extension><ilmd><cbvmda:lotNumber>{lot}</cbvmda:lotNumber>"
            f"<cbvmda:itemExpirationDate>{expiry}</cbvmda:itemExpirationDate></ilmd></extension>") if lot else ""
    eid = f"<baseExtension><eventID>{event_id}</eventID></baseExtension>" if event_id else ""
    return (f"<ObjectEvent><eventTime>{time}</eventTime><eventTimeZoneOffset>+00:00</eventTimeZoneOffset>{eid}"
            f"{_xml_epcs('epcList', epcs)}<action>{action}</action>"
            f"<bizStep>urn:epcglobal:cbv:bizstep:{step}</bizStep>"
            f"<disposition>urn:epcglobal:cbv:disp:in_progress</disposition>"
            f"<readPoint><id>{SUPPLIER}</id></readPoint><bizLocation><id>{SUPPLIER}</id></bizLocation>{ilmd}"
            f"</ObjectEvent>")


def xml_aggregation_event(parent, children, step="packing", *, time="2019-01-10T09:05:00Z"):
    return (f"<AggregationEvent><eventTime>{time}</eventTime><eventTimeZoneOffset>+00:00</eventTimeZoneOffset>"
            f"<parentID>{parent}</parentID>{_xml_epcs('childEPCs', children)}<action>ADD</action>"
            f"<bizStep>urn:epcglobal:cbv:bizstep:{step}</bizStep></AggregationEvent>")


def xml_transaction_event(epcs, step, *, time="2019-01-10T09:10:00Z"):
    return (f"<TransactionEvent><eventTime>{time}</eventTime><eventTimeZoneOffset>+00:00</eventTimeZoneOffset>"
            f"<bizTransactionList><bizTransaction type=\"urn:epcglobal:cbv:btt:po\">"
            f"urn:epcglobal:cbv:bt:0614141000012:PO-1001</bizTransaction></bizTransactionList>"
            f"{_xml_epcs('epcList', epcs)}<action>ADD</action>"
            f"<bizStep>urn:epcglobal:cbv:bizstep:{step}</bizStep></TransactionEvent>")


def xml_master(gtin=LOSARTAN_GTIN, ndc=LOSARTAN_NDC, company_digits=7):
    company, item = gtin[1:1 + company_digits], gtin[0] + gtin[1 + company_digits:13]
    return ("<EPCISHeader><extension><EPCISMasterData><VocabularyList>"
            "<Vocabulary type=\"urn:epcglobal:epcis:vtype:EPCClass\"><VocabularyElementList>"
            f"<VocabularyElement id=\"urn:epc:idpat:sgtin:{company}.{item}.*\">"
            "<attribute id=\"urn:epcglobal:cbv:mda#additionalTradeItemIdentification\">"
            f"{ndc}</attribute>"
            "<attribute id=\"urn:epcglobal:cbv:mda#additionalTradeItemIdentificationTypeCode\">FDA_NDC_11</attribute>"
            "<attribute id=\"urn:epcglobal:cbv:mda#regulatedProductName\">Losartan Potassium Tablets USP 50 mg"
            "</attribute></VocabularyElement></VocabularyElementList></Vocabulary></VocabularyList>"
            "</EPCISMasterData></extension></EPCISHeader>")


def xml_document(events, *, master=True) -> bytes:
    return ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
            "<epcis:EPCISDocument xmlns:epcis=\"urn:epcglobal:epcis:xsd:1\" "
            "xmlns:cbvmda=\"urn:epcglobal:cbv:mda\" schemaVersion=\"1.2\" creationDate=\"2019-01-10T10:00:00Z\">"
            f"{xml_master() if master else ''}<EPCISBody><EventList>{''.join(events)}</EventList></EPCISBody>"
            "</epcis:EPCISDocument>").encode()


def shipment_xml(serial_list, *, lot=LOSARTAN_LOT, expiry=LOSARTAN_EXPIRY, case=1, gtin=LOSARTAN_GTIN) -> bytes:
    """A supplier's DSCSA shipment: commissioning with lot/expiry, packing into a case, shipping the case."""
    epcs = units(gtin, serial_list)
    return xml_document([
        xml_object_event(epcs, "commissioning", lot=lot, expiry=expiry, time="2019-01-09T08:00:00Z"),
        xml_aggregation_event(sscc(case), epcs),
        xml_object_event([sscc(case)], "shipping", action="OBSERVE", time="2019-01-10T09:00:00Z"),
    ])


def json_event(kind, *, epcs=(), step, action="ADD", lot="", expiry="", parent="", children=(),
               time="2019-01-12T09:00:00.000Z", event_id=""):
    event = {"type": kind, "eventTime": time, "eventTimeZoneOffset": "+00:00", "action": action,
             "bizStep": step, "readPoint": {"id": PHARMACY}, "bizLocation": {"id": PHARMACY}}
    if event_id:
        event["eventID"] = event_id
    if epcs:
        event["epcList"] = list(epcs)
    if parent:
        event["parentID"] = parent
    if children:
        event["childEPCs"] = list(children)
    if lot:
        event["ilmd"] = {"cbvmda:lotNumber": lot, "cbvmda:itemExpirationDate": expiry}
    return event


def json_document(events, *, master=True) -> bytes:
    doc = {"@context": ["https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld",
                        {"cbvmda": "urn:epcglobal:cbv:mda#"}],
           "type": "EPCISDocument", "schemaVersion": "2.0", "creationDate": "2019-01-12T10:00:00.000Z",
           "epcisBody": {"eventList": list(events)}}
    if master:
        company, item = LOSARTAN_GTIN[1:8], LOSARTAN_GTIN[0] + LOSARTAN_GTIN[8:13]
        doc["epcisHeader"] = {"epcisMasterData": {"vocabularyList": [{
            "type": "urn:epcglobal:epcis:vtype:EPCClass",
            "vocabularyElementList": [{"id": f"urn:epc:idpat:sgtin:{company}.{item}.*", "attributes": [
                {"id": "urn:epcglobal:cbv:mda#additionalTradeItemIdentification", "attribute": LOSARTAN_NDC},
                {"id": "urn:epcglobal:cbv:mda#additionalTradeItemIdentificationTypeCode",
                 "attribute": "FDA_NDC_11"}]}]}]}}
    return json.dumps(doc).encode()
