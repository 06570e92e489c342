"""BedrockReasoner ("bedrock:<model>"): Claude through the Bedrock Converse API, answering through a
forced tool call. Citations are grounded against the retrieved set; anything wrong (malformed output,
throttling, timeouts, caps) fails closed to the rules result (ask.rules.RulesReasoner), marked in
its identity."""

import json
import logging
from typing import Literal

import pydantic
from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings

from ask.rules import VERDICTS, AskContext, ReasonerResult, RulesReasoner
from core import aws

log = logging.getLogger(__name__)

TOOL_NAME = "give_verdict"
# The give_verdict tool's input. Its JSON schema is what Bedrock is told, and the reply is validated
# by the same model, so the two can't drift apart.
class VerdictReply(pydantic.BaseModel):
    """The verdict for the patient's question and the ids of the facts it rests on."""

    model_config = pydantic.ConfigDict(extra="ignore", strict=True, title=TOOL_NAME)

    verdict: Literal[VERDICTS] = pydantic.Field(
        description="safe, caution, stop (contact the pharmacy now) or unknown.")
    answer: str = pydantic.Field(min_length=1, pattern=r"\S",
                                 description="Plain-language answer for the patient, from the cited facts.")
    cited_fact_ids: list[int] = pydantic.Field(
        description="ids of the facts the verdict rests on; only ids from the list given.")


TOOL_SCHEMA = VerdictReply.model_json_schema()


SYSTEM_PROMPT = (
    "You are a pharmacy medication-safety assistant. Decide whether the patient's medicine is affected by a "
    "recall, using ONLY the facts provided (each has an id). A recall on a lot the patient received that is not "
    "Terminated/Completed decides: Class I -> stop (contact the pharmacy now), Class II or III -> caution. A recall "
    "naming no lots for the patient's drug -> caution. Never tell the patient to stop taking a medicine that must "
    "not be stopped abruptly (blood pressure, anticoagulant, antiepileptic, ...): tell them to contact their "
    "pharmacist or doctor. Answer through the give_verdict tool, citing the ids you relied on."
)


class ReasonerFailed(Exception):
    """The model's answer could not be used; the caller falls back to the rules."""


class BedrockReasoner:
    uses_model = True
    client = aws.ClientOf("bedrock-runtime")

    def __init__(self, client=None, model_id: str | None = None):
        self.model_id = model_id or settings.UNSAY_BEDROCK_MODEL_ID
        self.identity = f"bedrock:{self.model_id}"[:100]
        self._client = client

    def request(self, ctx: AskContext) -> dict:
        facts = [
            {"id": r.fact.id, "fact_key": r.fact.fact_key, "version": r.fact.version, "kind": r.fact.kind,
             "subject": r.fact.subject, "lot": r.fact.lot, "statement": r.fact.statement,
             "classification": (r.fact.attributes or {}).get("classification"),
             "status": (r.fact.attributes or {}).get("status"),
             "scope": (r.fact.attributes or {}).get("scope"), "ndcs": (r.fact.attributes or {}).get("ndcs")}
            for r in ctx.retrieved
        ]
        prompt = json.dumps({"question": ctx.question, "medicine": ctx.subject,
                             "lots_dispensed_to_patient": ctx.patient_lots,
                             "ndcs_dispensed_to_patient": [n for n in ctx.patient_ndcs if n], "facts": facts}, indent=1)
        return {
            "modelId": self.model_id,
            "system": [{"text": SYSTEM_PROMPT}],
            "messages": [{"role": "user", "content": [{"text": prompt}]}],
            "toolConfig": {
                "tools": [{"toolSpec": {"name": TOOL_NAME, "description": "Record the verdict and cited fact ids.",
                                        "inputSchema": {"json": TOOL_SCHEMA}}}],
                "toolChoice": {"tool": {"name": TOOL_NAME}},
            },
            "inferenceConfig": {"maxTokens": 1024, "temperature": 0},
        }

    def parse(self, response: dict, ctx: AskContext) -> ReasonerResult:
        blocks = ((response.get("output") or {}).get("message") or {}).get("content") or []
        uses = [b["toolUse"] for b in blocks if isinstance(b, dict) and "toolUse" in b]
        use = next((u for u in uses if u.get("name") == TOOL_NAME), None)
        if use is None:
            raise ReasonerFailed("no give_verdict tool call")
        payload = use.get("input")
        if isinstance(payload, str):
            try:
                payload = json.loads(payload)
            except ValueError as exc:
                raise ReasonerFailed("tool input is not valid JSON") from exc
        try:
            reply = VerdictReply.model_validate(payload)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "tool input"
            raise ReasonerFailed(f"{where}: {first['msg']}"[:120]) from exc
        verdict, answer, cited = reply.verdict, reply.answer, reply.cited_fact_ids
        seen = {r.fact.id for r in ctx.retrieved}
        unseen = [i for i in cited if i not in seen]
        if unseen:
            log.warning("bedrock cited fact ids it was not shown, dropped: %s", unseen)
        grounded = {i for i in cited if i in seen}
        if cited and not grounded:
            raise ReasonerFailed("every cited fact id was unseen")
        if verdict in ("stop", "caution") and not grounded:
            raise ReasonerFailed(f"{verdict} verdict cites no fact")
        return ReasonerResult(verdict, answer.strip(), self.identity, grounded)

    def decide(self, ctx: AskContext) -> ReasonerResult:
        try:
            response = self.client.converse(**self.request(ctx))
            return self.parse(response, ctx)
        except ClientError as exc:
            why = exc.response.get("Error", {}).get("Code", "ClientError")
        except BotoCoreError as exc:  # timeouts, connection errors, missing credentials
            why = type(exc).__name__
        except ReasonerFailed as exc:
            why = str(exc)
        log.warning("bedrock reasoner failed closed: %s", why)
        return RulesReasoner(note=f"bedrock failed closed: {why}"[:80]).decide(ctx)


