from django import template

from corrections.drafting import verdict_headline

register = template.Library()


@register.filter
def headline(verdict: str) -> str:
    """The patient-facing headline of a verdict, exactly as the letter states it."""
    return verdict_headline(verdict) if verdict else ""
