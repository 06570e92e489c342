"""{% shelf_half recall_number %} on the recall page and {% shelf_report recall_number %} in the report:
the shelf half beside the patient half, without the page views having to know about the shelf."""

from django import template

from shelf.selectors import recall_shelf_summary
from worklist.shelf import shelf_half as read_shelf_half

register = template.Library()


@register.inclusion_tag("worklist/_shelf.html", takes_context=True)
def shelf_half(context, recall_number):
    return {"shelf": read_shelf_half(recall_number), "recall_number": recall_number,
            "messages": [], "csrf_token": context.get("csrf_token")}


@register.inclusion_tag("worklist/_shelf_report.html")
def shelf_report(recall_number):
    return {"s": recall_shelf_summary(recall_number)}
