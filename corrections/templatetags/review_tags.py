from django import template

from corrections.drafting import verdict_headline
from corrections.review import card_match_class
from drugs.matching import MatchClass

register = template.Library()


@register.filter
def headline(verdict: str) -> str:
    """The patient-facing headline of a verdict, exactly as the letter states it."""
    return verdict_headline(verdict) if verdict else ""


@register.simple_tag
def match_class(correction) -> dict:
    """How sure the match behind a card is: class, label, and whether it is a confirmed exposure."""
    klass = card_match_class(correction)
    if not klass:
        return {"klass": "", "label": "", "confirmed": False}
    return {"klass": klass, "label": MatchClass(klass).label, "confirmed": klass == MatchClass.CONFIRMED,
            "candidate": klass == MatchClass.CANDIDATE}


@register.simple_tag
def card_recipient_problem(correction) -> str:
    """The recipient warning the queue computed for this card (review.with_recipient_problems), or ""."""
    return getattr(correction, "recipient_problem", "")
