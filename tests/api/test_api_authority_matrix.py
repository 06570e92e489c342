"""Who may do what, where: every operation of API v1 (read from the served OpenAPI document, so a new route
fails here until its row is written) × every kind of caller × the caller's own data or another client's.

Callers: no key, a revoked key, a patient-bound key, a pharmacy key and a pharmacist-scoped pharmacy key,
all of the client North. Targets: North's own patient, decision, correction and site, or South's. Every
answer must have the status of its cell (a refusal a problem, or an OperationOutcome under /fhir/); a
refusal writes nothing; and no 2xx answer carries anything of South's. The MCP tools call the same
services: each is tried in the cells of the operation it stands for and must succeed exactly where that
does. Real recalls (tests/conftest.py `drafts`: D-0315-2019 escalated to Class I and swept) and the real
recalled lot of D-0502-2019 in SYNTHETIC EPCIS shipments; patients synthetic."""

import asyncio
import itertools
import json

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from api import mcp_server
from api.views import API_PREFIX, openapi_document
from ask.keys import grant_site, issue_key, revoke_keys
from ask.models import ApiClient, ApiKey, ClientPatient
from corrections.review import approve
from memory.models import Decision
from outbox import dispatch
from patients.models import DispensingRecord
from shelf.models import ReceivedEvent, Unit
from tests import epcis_docs as d
from tests.factories import LOT, RECALL

CHECKED_NDC = "0378-5807-93"  # RECALL names it; its lot LOT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("dispatch_not_enqueued")]

ROLES = ("patient", "pharmacy", "pharmacist")
UNAUTHENTICATED = ("no key", "revoked key")
SAME_FOR_EVERY_KEY = {role: (200, 404) for role in ROLES}

# (own, other) per caller; a refusal may name its problem type: (status, "type").
MATRIX = {
    ("POST", "/ask"): {"patient": (200, 403), "pharmacy": (200, 404), "pharmacist": (200, 404)},
    ("GET", "/decisions/{decision_id}"): SAME_FOR_EVERY_KEY,
    ("POST", "/check"): SAME_FOR_EVERY_KEY,
    ("GET", "/decisions/{decision_id}/replay"): SAME_FOR_EVERY_KEY,
    ("POST", "/dispensing"): {"patient": (403, 403), "pharmacy": (201, 404), "pharmacist": (201, 404)},
    ("POST", "/fhir/MedicationDispense"): {"patient": (403, 403), "pharmacy": (201, 404), "pharmacist": (201, 404)},
    # Exposure names no patient: the answer lists the client's own patients only (the 2xx check below).
    ("GET", "/recalls/{recall_number}/exposure"): {"patient": (403, 403), "pharmacy": (403, 403),
                                                   "pharmacist": (200, 200)},
    ("POST", "/epcis"): {"patient": ((403, "forbidden"), (403, "forbidden")),
                         "pharmacy": (200, (403, "site-not-held")), "pharmacist": (200, (403, "site-not-held"))},
    # A search for another client's patient is an empty Bundle, not a refusal (it says nothing of them).
    ("GET", "/fhir/CommunicationRequest"): {role: (200, 200) for role in ROLES},
    ("GET", "/fhir/CommunicationRequest/{correction_id}"): SAME_FOR_EVERY_KEY,
    ("GET", "/fhir/Communication"): {role: (200, 200) for role in ROLES},
    ("GET", "/fhir/Communication/{correction_id}"): SAME_FOR_EVERY_KEY,
    # Check my pack needs no key and reads none (ADR 0014): FDA's public recalls, nothing of any client.
    ("GET", "/check"): {role: (200, 200) for role in ROLES},
}
# Operations that read no key: every caller, with no key or a revoked one too, gets the answer of its row.
PUBLIC = {("GET", "/check")}


# The operation each MCP tool stands for (api/mcp_server.py calls the same service).
MCP_TOOLS = {"ask": ("POST", "/ask"), "check": ("POST", "/check"), "get_decision": ("GET", "/decisions/{decision_id}"),
             "replay": ("GET", "/decisions/{decision_id}/replay")}


def operations() -> set[tuple[str, str]]:
    return {(method.upper(), path.removeprefix(API_PREFIX.rstrip("/")))
            for path, methods in openapi_document()["paths"].items() for method in methods}


def test_the_matrix_covers_every_operation_of_the_api():
    missing, stale = operations() - set(MATRIX), set(MATRIX) - operations()
    assert not missing, f"add a row to MATRIX for each new operation: {sorted(missing)}"
    assert not stale, f"MATRIX names operations the API no longer has: {sorted(stale)}"
    assert all(set(row) == set(ROLES) for row in MATRIX.values())


def test_every_mcp_tool_stands_for_an_operation_of_the_matrix():
    tools = {tool.name for tool in asyncio.run(mcp_server.server.list_tools())}
    assert tools == set(MCP_TOOLS), "map each MCP tool to the operation whose service it calls"
    assert set(MCP_TOOLS.values()) <= set(MATRIX)


class Data:
    """North's and South's patient, decision, correction (approved and sent) and site."""

    SITES = {"own": "Main St", "other": "Clinic pharmacy"}
    PATIENTS = {"own": "SYN-A", "other": "SYN-B"}

    def __init__(self, world, drafts, people):
        north, south = ApiClient.objects.create(name="North"), ApiClient.objects.create(name="South")
        for ref, client in (("SYN-A", north), ("SYN-D", north), ("SYN-B", south), ("SYN-C", south)):
            patient = drafts[ref].patient if ref in drafts else world["decisions"]["c"].patient
            ClientPatient.objects.create(client=client, patient=patient)
        grant_site(north, self.SITES["own"])
        grant_site(south, self.SITES["other"])
        for ref in ("SYN-A", "SYN-B"):  # both by email, so both are sent
            approve(drafts[ref].pk, user=people["pharmacist"])
        assert dispatch.dispatch_ready().sent == 2
        self.decisions = {"own": world["decisions"]["a"].public_id, "other": world["decisions"]["c"].public_id}
        self.corrections = {"own": drafts["SYN-A"].public_id, "other": drafts["SYN-B"].public_id}
        patient_a = drafts["SYN-A"].patient
        revoked, revoked_secret = issue_key(north)
        revoke_keys([revoked])
        self.secrets = {
            "no key": None, "revoked key": revoked_secret,
            "patient": issue_key(north, kind=ApiKey.Kind.PATIENT, patient=patient_a)[1],
            "pharmacy": issue_key(north)[1],
            "pharmacist": issue_key(north, pharmacist=True)[1],
        }
        # What South holds: none of it may appear in an answer to North (site names are echoed in refusals only).
        self.south_marks = ["SYN-B", "SYN-C", self.SITES["other"], str(self.decisions["other"]),
                            str(self.corrections["other"])]
        self.calls = itertools.count(1)

    def request(self, operation, target):
        """(method, url, body, content type) for the operation against own or other data."""
        n = next(self.calls)
        ref, decision, correction = self.PATIENTS[target], self.decisions[target], self.corrections[target]
        dispensed_at = f"2019-03-01T10:{n // 60:02d}:{n % 60:02d}Z"  # never a duplicate of an earlier call
        dispensing = {"patient": ref, "drug": "valsartan", "lot": LOT, "quantity": 30, "dispensed_at": dispensed_at,
                      "site": self.SITES[target]}
        fhir = {"resourceType": "MedicationDispense", "status": "completed",
                "contained": [{"resourceType": "Medication", "id": "med1", "code": {"text": "valsartan"},
                               "batch": {"lotNumber": LOT}}],
                "medicationReference": {"reference": "#med1"}, "subject": {"reference": f"Patient/{ref}"},
                "quantity": {"value": 30}, "whenHandedOver": dispensed_at}
        shipment = d.shipment_xml(d.serials(f"M{n:03d}", 2), case=n)
        return {
            ("POST", "/ask"): ("post", "/ask", {"question": "Is my valsartan safe?", "patient": ref}, None),
            ("GET", "/decisions/{decision_id}"): ("get", f"/decisions/{decision}", None, None),
            ("POST", "/check"): ("post", "/check", {"decision_id": str(decision)}, None),
            ("GET", "/decisions/{decision_id}/replay"): ("get", f"/decisions/{decision}/replay", None, None),
            ("POST", "/dispensing"): ("post", "/dispensing", dispensing, None),
            ("POST", "/fhir/MedicationDispense"): ("post", "/fhir/MedicationDispense", fhir, "application/fhir+json"),
            ("GET", "/recalls/{recall_number}/exposure"): ("get", f"/recalls/{RECALL}/exposure", None, None),
            ("POST", "/epcis"): ("post", f"/epcis?site={self.SITES[target].replace(' ', '%20')}", shipment,
                                 "application/xml"),
            ("GET", "/fhir/CommunicationRequest"): ("get", f"/fhir/CommunicationRequest?patient={ref}", None, None),
            ("GET", "/fhir/CommunicationRequest/{correction_id}"): (
                "get", f"/fhir/CommunicationRequest/{correction}", None, None),
            ("GET", "/fhir/Communication"): ("get", f"/fhir/Communication?patient={ref}", None, None),
            ("GET", "/fhir/Communication/{correction_id}"): ("get", f"/fhir/Communication/{correction}", None, None),
            ("GET", "/check"): ("get", f"/check?ndc={CHECKED_NDC}&lot={LOT}", None, None),
        }[operation]


def _written():
    return (Decision.objects.count(), DispensingRecord.objects.count(), ReceivedEvent.objects.count(),
            sorted(Unit.objects.values_list("site", "gtin", "serial", "state")))


def _refusal_type(response) -> str:
    body = response.json()
    if body.get("resourceType") == "OperationOutcome":
        return body["issue"][0]["details"]["coding"][0]["code"]
    assert response["Content-Type"] == "application/problem+json", response.content
    return body["type"].removeprefix("/api/v1/problems/")


def _cells():
    for operation, row in sorted(MATRIX.items()):
        for role in UNAUTHENTICATED:
            for target in ("own", "other"):
                yield operation, role, target, 200 if operation in PUBLIC else (401, "unauthenticated")
        for role, (own, other) in row.items():
            yield operation, role, "own", own
            yield operation, role, "other", other


def test_every_caller_gets_the_answer_of_its_cell_and_nothing_of_another_client(client, world, drafts, people,
                                                                                  settings):
    settings.UNSAY_API_RATE_PER_MINUTE = 100_000  # one caller making every request of the matrix
    data = Data(world, drafts, people)
    wrong = []
    for operation, role, target, expected in _cells():
        status, problem_type = expected if isinstance(expected, tuple) else (expected, None)
        method, path, body, content_type = data.request(operation, target)
        secret = data.secrets[role]
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        before = _written()
        if method == "get":
            response = client.get(f"/api/v1{path}", headers=headers)
        else:
            payload = body if isinstance(body, bytes) else json.dumps(body)
            response = client.post(f"/api/v1{path}", payload, content_type=content_type or "application/json",
                                   headers=headers)
        cell = f"{operation[0]} {operation[1]} as {role} on {target} data"
        if response.status_code != status:
            wrong.append(f"{cell}: {response.status_code}, expected {status}: {response.content[:200]!r}")
        elif status >= 400:
            if problem_type and _refusal_type(response) != problem_type:
                wrong.append(f"{cell}: {_refusal_type(response)}, expected {problem_type}")
            if _written() != before:
                wrong.append(f"{cell}: refused, yet wrote something")
        else:
            leaked = [mark for mark in data.south_marks if mark in response.content.decode()]
            if target == "other" and operation == ("POST", "/epcis"):
                leaked = []  # unreachable: South's site is refused above
            if leaked:
                wrong.append(f"{cell}: the answer carries South's {leaked}")
    assert not wrong, "\n".join(wrong)


class _McpContext:
    """What a tool reads of its context: the request's headers (None would mean stdio and its configured key)."""

    def __init__(self, secret):
        self.headers = {"authorization": f"Bearer {secret}"} if secret else {}


def _call_tool(tool: str, ctx, data: Data, target: str):
    decision = data.decisions[target]
    return {
        "ask": lambda: mcp_server.ask(ctx, "Is my valsartan safe?", patient=data.PATIENTS[target]),
        "check": lambda: mcp_server.check(ctx, [decision]),
        "get_decision": lambda: mcp_server.get_decision(ctx, decision),
        "replay": lambda: mcp_server.replay(ctx, decision),
    }[tool]()


def test_every_mcp_tool_succeeds_exactly_where_its_operation_does(world, drafts, people, settings):
    settings.UNSAY_API_RATE_PER_MINUTE = 100_000
    data = Data(world, drafts, people)
    wrong = []
    for tool, operation in sorted(MCP_TOOLS.items()):
        for role, target in itertools.product((*UNAUTHENTICATED, *ROLES), ("own", "other")):
            expected = 401 if role in UNAUTHENTICATED else MATRIX[operation][role][target == "other"]
            allowed = (expected[0] if isinstance(expected, tuple) else expected) < 400
            before = _written()
            try:
                answer = _call_tool(tool, _McpContext(data.secrets[role]), data, target).model_dump_json()
            except ToolError:
                answer = None
            cell = f"MCP {tool} as {role} on {target} data"
            if allowed != (answer is not None):
                wrong.append(f"{cell}: {'refused' if answer is None else 'answered'}, expected the opposite")
            elif answer is None and _written() != before:
                wrong.append(f"{cell}: refused, yet wrote something")
            elif answer is not None and any(mark in answer for mark in data.south_marks):
                wrong.append(f"{cell}: the answer carries South's data")
    assert not wrong, "\n".join(wrong)
