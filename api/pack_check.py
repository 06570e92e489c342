"""GET /api/v1/check (api.views.check_my_pack): check my pack for other apps, the same answer as the /check
page (ask.pack_check).

No API key (ADR 0014): the answer holds only FDA's public recalls and nothing of any patient, as the page
does. The page's limit applies, per client address, counted in the database (ask.pack_check_counts), and
nothing asked is stored: the query string never reaches a log line (unsay_site/logs.py drops it)."""

from dataclasses import asdict

from django.conf import settings
from django.utils import timezone, translation

from api import guard, problems
from ask import pack_check_counts, pack_words
from ask.check_views import chosen_language
from ask.pack_check import MAX_LOT_LENGTH, MAX_NDC_LENGTH, PackInputError, check_pack, read_pack
from core.client_address import client_address
from drugs.gs1 import MAX_SCAN_LENGTH

NDC_HELP = "The NDC as printed on the pack: 10 or 11 digits, any hyphenation (0378-5807-93, 00378580793)."
LOT_HELP = "The lot as printed (a lot word or the expiry beside it are read off: 'LOT 3061169 EXP 11/2018')."
GS1_HELP = ("A scanned GS1 DataMatrix's text instead of (or beside) ndc and lot: raw with GS or | separators, the "
            "printed '(01)...(10)...' line, or a GS1 Digital Link.")


# Query values longer than these are refused by the schema (422) before anything is read; read_pack gives
# its own, plainer message for anything between its limits and these.
NDC_QUERY_MAX, LOT_QUERY_MAX, GS1_QUERY_MAX = MAX_NDC_LENGTH * 4, MAX_LOT_LENGTH * 4, MAX_SCAN_LENGTH * 4


def answer(request, *, ndc: str, lot: str, gs1: str) -> dict:
    """The route's body (api.views.check_my_pack): limit, read, check, count."""
    guard.check_url(request)
    with translation.override(chosen_language(request)):
        try:
            result, refused = check_pack(read_pack(ndc=ndc, lot=lot, gs1=gs1)), None
        except PackInputError as error:
            result, refused = None, error
        now = timezone.now()
        if not pack_check_counts.take_check(client_address(request), result.outcome if result else "", now=now):
            retry = max(1, 60 - now.second)
            raise problems.Problem(429, "rate-limited", "Too many checks from this address",
                                   f"At most {settings.UNSAY_CHECK_RATE_PER_MINUTE} checks per minute per address; "
                                   f"retry in {retry} s.", headers={"Retry-After": str(retry)})
        if refused is not None:
            raise problems.invalid("The pack could not be read.", errors=[
                {"field": name, "message": message} for name, message in refused.errors.items()])
        return {"outcome": str(result.outcome), "headline": pack_words.headline(result),
                "what_to_do": pack_words.what_to_do(result), "ndc": result.ndc, "lot": result.lot,
                "lot_reading": result.lot_reading, "classification": result.classification,
                "recalls": [asdict(shown) for shown in result.recalls],
                "ambiguous": list(result.ambiguous)}
