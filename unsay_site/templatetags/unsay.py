from django import template
from django.urls import NoReverseMatch, reverse

register = template.Library()


@register.simple_tag
def url_or(name, fallback):
    """{% url_or "ask:ask" "/memory/ask/" %}: the named URL once it exists, the plain path until then.

    Lets the shared layout link to pages that other apps add later without breaking every page now.
    """
    try:
        return reverse(name)
    except NoReverseMatch:
        return fallback
