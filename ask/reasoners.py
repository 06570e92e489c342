"""Reasoners: turn a question, a patient's lots and the retrieved facts into a verdict.

Every reasoner implements `decide(context: AskContext) -> ReasonerResult` (ask.rules) and is chosen by
UNSAY_REASONER:

- RulesReasoner ("rules/1", ask.rules): deterministic and offline. The verdict follows from structured
  recall facts (docs/facts.md); the answer is written from the facts it relied on.
- BedrockReasoner ("bedrock:<model>", ask.bedrock): Claude through the Bedrock Converse API, failing
  closed to the rules result.

This module sits above both, so neither reasoner imports the choice of it. Importing ask.bedrock
makes no model client: core.aws makes one on the first call.
"""

from django.conf import settings

from ask.bedrock import BedrockReasoner
from ask.rules import RulesReasoner


def get_reasoner(name=None):
    """The reasoner named by `name` (or UNSAY_REASONER); a reasoner object is returned unchanged."""
    if name is not None and not isinstance(name, str):
        return name
    name = name or settings.UNSAY_REASONER
    if name == "rules":
        return RulesReasoner()
    if name == "bedrock":
        return BedrockReasoner()
    raise ValueError(f"Unknown reasoner {name!r}; use 'rules' or 'bedrock'.")
