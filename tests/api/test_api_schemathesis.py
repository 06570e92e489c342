"""Property-based tests of API v1 against its own served OpenAPI document, on the live app
(pytest-django's live_server): no server errors, and every response (problems included) matches
the documented status codes, content types, headers and schemas. Bounded examples per operation, for
every key kind; path ids are often a real decision and a real recall so the checks reach past a 404.

Also: docs/openapi.json is what `manage.py export_openapi` writes now (CI fails when it is stale)."""

import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api import services
from ask.keys import issue_key
from ask.models import ApiClient, ApiKey
from memory.fact_writes import assert_claim
from tests.factories import make_patient, recall_claim

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
RECALL = "D-0326-2019"


@pytest.fixture
def api_world(transactional_db, hashing_embeddings, settings):
    settings.UNSAY_API_RATE_PER_MINUTE = 100_000  # the property run is one caller making many requests
    settings.UNSAY_CHECK_RATE_PER_MINUTE = 100_000  # and of them many checks of a pack from one address
    assert_claim(recall_claim(RECALL, "3069020"))
    north = ApiClient.objects.create(name="North")
    patient = make_patient("SYN-ST-1", [{"drug": "valsartan", "lot": "3069020", "quantity": 30}], name="Synthetic ST",
                           email="", phone="", client=north, dispensed_at=datetime(2019, 1, 5, 12, tzinfo=UTC),
                           through_service=True)
    key, patient_key = issue_key(north, kind=ApiKey.Kind.PATIENT, patient=patient)
    _, pharmacy_key = issue_key(north)
    _, pharmacist_key = issue_key(north, pharmacist=True)
    decision = services.ask(key, "Is my valsartan safe?")
    return {"keys": {"patient": patient_key, "pharmacy": pharmacy_key, "pharmacist": pharmacist_key},
            "path": {"decision_id": str(decision.public_id), "recall_number": RECALL}}


# Bounded and derandomized for the suite; UNSAY_SCHEMATHESIS_EXAMPLES=500 explores further by hand.
EXAMPLES = int(os.environ.get("UNSAY_SCHEMATHESIS_EXAMPLES", "12"))
BOUNDED = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                   database=None)


def test_every_key_kind_is_exercised(api_world):
    kinds = {ApiKey.objects.get(prefix=secret[:12]).kind for secret in api_world["keys"].values()}
    assert kinds == set(ApiKey.Kind.values)


@pytest.mark.parametrize("who", ["patient", "pharmacy", "pharmacist"])
def test_the_live_api_matches_its_openapi_document(api_world, live_server, who):
    # Driven through schemathesis' Python API (the pytest plugin does not run on pytest 9).
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/v1/openapi.json")
    headers = {"Authorization": f"Bearer {api_world['keys'][who]}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 13

    for operation in operations:
        @given(case=operation.as_strategy(), real=st.booleans())
        @BOUNDED
        def run(case, real):
            if real and case.path_parameters:
                case.path_parameters.update({name: value for name, value in api_world["path"].items()
                                             if name in case.path_parameters})
            case.call_and_validate(base_url=live_server.url, headers=headers, checks=CHECKS)

        run()


@pytest.mark.parametrize("who", ["patient", "pharmacy", "pharmacist"])
def test_the_boundaries_of_every_documented_input_get_a_2xx_or_a_4xx_problem(api_world, live_server, who, tmp_path):
    # Schemathesis' coverage phase (CLI only): deterministic edge values of every documented constraint
    # (formats, lengths, patterns, enums, one-of), where a date-time out of range once was a server error.
    checks = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"
    config = tmp_path / "schemathesis.toml"  # a real decision and recall, so `at` and the rest are read
    config.write_text("[parameters]\n" + "".join(f'"path.{name}" = "{value}"\n'
                                                  for name, value in api_world["path"].items()))
    run = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
         f"{live_server.url}/api/v1/openapi.json", "-H", f"Authorization: Bearer {api_world['keys'][who]}",
         "--phases", "examples,coverage", "--mode", "positive", "--checks", checks, "--generation-deterministic",
         "--seed", "1", "--continue-on-failure", "--workers", "1", "--no-color"],
        capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "Tested: 13" in run.stdout, run.stdout[-2000:]


def test_docs_openapi_json_is_up_to_date():
    from django.conf import settings as django_settings

    from api.management.commands.export_openapi import rendered

    checked_in = (django_settings.BASE_DIR / "docs" / "openapi.json").read_text()
    assert checked_in == rendered(), "docs/openapi.json is stale: run `manage.py export_openapi`"
