"""{% shelf_half recall_number %} on the recall page, {% shelf_report recall_number %} in the report and
{% shelf_open %} on the worklist home:
the shelf half beside the patient half, without the page views having to know about the shelf."""

from django import template

from shelf.selectors import open_tasks, recall_shelf_summary
from worklist import recall_list
from worklist.shelf import shelf_half as read_shelf_half

register = template.Library()


@register.inclusion_tag("worklist/_shelf.html", takes_context=True)
def shelf_half(context, recall_number):
    return {"shelf": read_shelf_half(recall_number), "recall_number": recall_number,
            "messages": [], "csrf_token": context.get("csrf_token")}


@register.inclusion_tag("worklist/_shelf_report.html")
def shelf_report(recall_number):
    return {"s": recall_shelf_summary(recall_number)}


@register.inclusion_tag("worklist/_shelf_open.html")
def shelf_open():
    tasks = open_tasks()
    facts = recall_list.recall_facts([t["recall_number"] for t in tasks])
    for t in tasks:
        f = facts.get(t["recall_number"]) or recall_list.RecallFacts(t["recall_number"])
        t["classification"] = f.classification
        t["deadline"] = recall_list.deadline_for(f.first_class1, None)
    return {"tasks": tasks}
