"""The MCP server (official `mcp` SDK, MCPServer): tools ask, check, get_decision and replay over
api/services.py, the same functions the HTTP API calls.

Identity comes only from the bearer token: the HTTP request's Authorization header (streamable
HTTP at /mcp, mounted beside Django in unsay_site/asgi.py), or, over stdio (`manage.py mcp`),
UNSAY_MCP_API_KEY, the one credential a local process can be started with. No tool takes a key,
a client or a patient list as an argument, and no tool lists patients.

A refused call (no key, another client's decision, ...) answers the problem's own sentence; any
other failure answers a neutral sentence and logs the detail here, because exception texts carry
database hosts, users and SQL.
"""

import logging
from uuid import UUID

from django.conf import settings
from django.db import close_old_connections, connection
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

from api import problems, services
from api.schemas import AskOut, CheckOut, DecisionOut, ReplayOut, parse_instant
from ask import keys

log = logging.getLogger(__name__)

NEUTRAL_FAILURE = "The request could not be completed. The failure has been logged; try again later."
MCP_PATH = "/mcp"

server = MCPServer(
    "unsay", version="1.0.0",
    instructions=("Medication-safety decisions with provenance. ask() records a decision for the patient of "
                  "your key (pharmacy keys name the patient); check() says whether decisions still stand and "
                  "what changed; get_decision() shows one in full; replay() shows what was believed then."),
)


def _secret(ctx: Context) -> str | None:
    headers = ctx.headers
    if headers is None:  # stdio: no request headers; the process was started with its key
        return settings.UNSAY_MCP_API_KEY
    return keys.bearer_secret(headers.get("authorization"))


def _call(ctx: Context, tool: str, fn, *args, **kwargs):
    """Authenticate from the bearer token, count the request, run one service; never leak internals."""
    close_old_connections()
    try:
        key = services.authenticate(_secret(ctx))
        services.take_request(key)
        return fn(key, *args, **kwargs)
    except problems.Problem as problem:
        log.info("MCP %s refused: %s %s", tool, problem.status, problem.detail or problem.title)
        raise ToolError(f"{problem.title}. {problem.detail}".strip()) from None
    except Exception:
        log.exception("MCP tool %s failed", tool)
        raise ToolError(NEUTRAL_FAILURE) from None
    finally:
        # Tools run in worker threads; close this thread's connection rather than leak one per thread.
        connection.close()


@server.tool(description="Ask whether a medicine is safe. Records a decision with the exact fact versions it read.")
def ask(ctx: Context, question: str, subject: str | None = None, patient: str | None = None) -> AskOut:
    """`patient`: pharmacy keys only (the patient's reference); a patient key always asks for its own patient."""
    def _ask(key):
        if len(question) > 1000 or not question.strip():
            raise problems.invalid("The question must be 1 to 1000 characters.")
        if any("\x00" in (value or "") for value in (question, subject, patient)):
            raise problems.malformed("NUL characters are not allowed.")
        if (subject and len(subject) > 200) or (patient and len(patient) > 64):
            raise problems.invalid("subject is at most 200 characters, patient at most 64.")
        return services.ask_each(key, question, subject=subject, patient_ref=patient)

    return AskOut.model_validate(_call(ctx, "ask", _ask))


@server.tool(description="Is each decision still standing? If not, what changed and which decision stands now.")
def check(ctx: Context, decision_ids: list[UUID]) -> CheckOut:
    return CheckOut.model_validate({"results": _call(ctx, "check", services.check, decision_ids)})


@server.tool(description="A decision in full: verdict, answer, status, read set, premises, inputs, corrections.")
def get_decision(ctx: Context, decision_id: UUID) -> DecisionOut:
    def _get(key):
        return services.decision_detail(services.visible_decision(key, decision_id))

    return DecisionOut.model_validate(_call(ctx, "get_decision", _get))


@server.tool(description="What we believed, about the facts a decision read, at an instant (default: when decided).")
def replay(ctx: Context, decision_id: UUID, at: str | None = None) -> ReplayOut:
    def _replay(key):
        instant = None
        if at:
            try:
                instant = parse_instant(at)
            except ValueError as exc:
                raise problems.invalid(f"`at`: {exc}") from None
        return services.replay(key, decision_id, instant)

    return ReplayOut.model_validate(_call(ctx, "replay", _replay))


def _transport_security() -> TransportSecuritySettings:
    """DNS-rebinding protection from the same host list Django serves."""
    hosts = [h for h in settings.ALLOWED_HOSTS if h and h != "*"]
    if "*" in settings.ALLOWED_HOSTS:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    allowed = [*hosts, *(f"{h}:*" for h in hosts), "testserver"]
    origins = [*settings.CSRF_TRUSTED_ORIGINS, *(f"http://{h}:*" for h in hosts), *(f"https://{h}" for h in hosts)]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=allowed,
                                     allowed_origins=origins)


def http_app():
    """The streamable HTTP app (stateless, JSON responses: any worker process can answer any request)."""
    return server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, json_response=True,
                                      max_request_body_size=settings.UNSAY_API_MAX_BODY_BYTES,
                                      transport_security=_transport_security())
