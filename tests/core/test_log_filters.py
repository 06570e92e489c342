"""core.log_filters: what a credential looks like in a log line, masked in a message, its arguments, a
structlog event dict and a traceback, with the line otherwise kept. The keys and tokens are made up in
the shapes the product issues (ask.keys, replies.links) and openFDA's (40 characters)."""

import logging

from core.log_filters import MaskSecrets, mask_event_dict, mask_secrets

TOKEN = "Q2hhbmdlZCBsaW5rIDEyMw"  # 22 characters of base64url, as replies.links makes them
OPENFDA_KEY = "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0f"
API_SECRET = "usk_mrN7dfAR-SdmceOmhGaKK8mbwOGe4VSCPTxEPv_EPxc"


def record(msg, args=(), exc_info=None, name="tests"):
    return logging.LogRecord(name, logging.WARNING, __file__, 1, msg, args, exc_info)


def test_each_kind_of_credential_is_masked_and_the_line_keeps_its_shape():
    lines = {
        # gunicorn's access log (gunicorn.conf.py's format)
        f'"GET /r/{TOKEN} HTTP/1.1" 200 1834 12ms': '"GET /r/*** HTTP/1.1" 200 1834 12ms',
        # Django's request warning, with the full reply URL
        f"Not Found: /r/{TOKEN}": "Not Found: /r/***",
        f"see https://pharmacy.example/r/{TOKEN}.": "see https://pharmacy.example/r/***.",
        # urllib3's retry warning
        (f"Retrying (Retry(total=3)) after connection broken by 'NewConnectionError()': "
         f"/drug/enforcement.json?limit=1&api_key={OPENFDA_KEY}&skip=0"):
        ("Retrying (Retry(total=3)) after connection broken by 'NewConnectionError()': "
         "/drug/enforcement.json?limit=1&api_key=***&skip=0"),
        f"next=/drug/label.json%3Fapi_key%3D{OPENFDA_KEY}": "next=/drug/label.json%3Fapi_key%3D***",
        f"Authorization: Bearer {API_SECRET}": "Authorization: ***",
        f"{{'Authorization': 'Bearer {API_SECRET}', 'Accept': 'application/json'}}":
        "{'Authorization': '***', 'Accept': 'application/json'}",
        f"token was bearer {API_SECRET}": "token was bearer ***",
        f"key {API_SECRET} revoked": "key usk_*** revoked",
    }
    for line, masked in lines.items():
        assert mask_secrets(line) == masked


def test_lines_without_a_credential_are_left_as_they_are():
    for line in ["GET /worklist/recall/D-0315-2019 200", "sweep page 3: 500 decisions", "/rx/42 /r/", "api_key",
                 "Unauthorized: /api/v1/decisions/1"]:
        assert mask_secrets(line) == line


def test_the_filter_masks_a_message_built_from_its_arguments():
    """gunicorn's access log passes its format and a dict of atoms; Django passes the path as an argument."""
    access = record('"%(m)s %(U)s %(H)s" %(s)s', ({"m": "GET", "U": f"/r/{TOKEN}", "H": "HTTP/1.1", "s": "200"},))
    warning = record("Not Found: %s", (f"/r/{TOKEN}",))
    plain = record("sweep page %d", (3,))
    for each in (access, warning, plain):
        assert MaskSecrets().filter(each) is True  # masks, never drops
    assert access.getMessage() == '"GET /r/*** HTTP/1.1" 200'
    assert warning.getMessage() == "Not Found: /r/***"
    assert plain.getMessage() == "sweep page 3" and plain.args == (3,)  # untouched


def test_the_filter_masks_a_structlog_event_dict_and_a_traceback():
    event = record({"event": "request_finished", "request": f"POST /r/{TOKEN}", "code": 200,
                    "headers": [("Authorization", f"Bearer {API_SECRET}")]})
    MaskSecrets().filter(event)
    assert event.msg == {"event": "request_finished", "request": "POST /r/***", "code": 200,
                         "headers": [("Authorization", "Bearer ***")]}

    try:
        raise ConnectionError(f"Max retries exceeded with url: /drug/enforcement.json?api_key={OPENFDA_KEY}")
    except ConnectionError as exc:
        failed = record("ingest failed", exc_info=(type(exc), exc, exc.__traceback__))
    MaskSecrets().filter(failed)
    shown = logging.Formatter().format(failed)
    assert "api_key=***" in shown and OPENFDA_KEY not in shown


def test_the_structlog_processor_masks_every_rendered_field():
    class Carrier:
        def __repr__(self):
            return f"<Request GET /r/{TOKEN}>"

    masked = mask_event_dict(None, "info", {"event": f"GET /r/{TOKEN}", "exception": f"...api_key={OPENFDA_KEY}",
                                            "request_id": "abc", "n": 3, "carrier": Carrier()})
    assert masked == {"event": "GET /r/***", "exception": "...api_key=***", "request_id": "abc", "n": 3,
                      "carrier": "<Request GET /r/***>"}
