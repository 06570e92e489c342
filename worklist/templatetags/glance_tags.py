"""{% funnel_chart glance %} and {% timeline_chart glance "patients"|"shelf" %}: the recall-at-a-glance charts
(worklist.charts) drawn where templates/worklist/_glance.html places them, beside their tables."""

from django import template
from django.utils import timezone

from worklist import charts

register = template.Library()

TIMELINE_TITLES = {
    "patients": "Patients whose letter was approved, delivered, and who replied, so far by day",
    "shelf": "Recalled units received, moved to quarantine, returned and dispensed so far, by day",
}


@register.simple_tag
def funnel_chart(glance):
    return charts.funnel_svg(glance.funnel, title=f"Recall {glance.recall_number}: patients at each step",
                             chart_id="glance-funnel-chart")


@register.simple_tag
def timeline_chart(glance, which: str):
    return charts.timeline_svg(getattr(glance, which), title=TIMELINE_TITLES[which],
                               chart_id=f"glance-{which}-chart", deadline_day=glance.deadline_day,
                               today=timezone.localdate())
