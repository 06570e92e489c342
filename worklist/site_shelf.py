"""The shelf page of the sites a person works at (/shelf/): stock by product and lot, what is quarantined, the open
recall tasks with their due dates (Class I first) and the recalled units that left with patients while their
recall is open. Reads only (shelf.selectors), scoped to the person's sites (shelf.selectors.held_sites, ADR 0015).

    site_shelf(user, *, site="", recall_number="", now=None) -> SiteShelf
    STOCK_COLUMNS, stock_csv_rows(lots)                  the CSV export of the stock table
"""

from dataclasses import dataclass, field

from django.utils import timezone

from shelf import selectors

from . import recall_list
from .models import RecallTask, Step


@dataclass
class SiteShelf:
    held: list | None  # the person's sites; None: every site (an operator)
    sites: list  # the sites on this page (one when filtered)
    recall_number: str
    lots: list = field(default_factory=list)
    tasks: list = field(default_factory=list)
    left: list = field(default_factory=list)

    @property
    def quarantined(self) -> list:
        return [lot for lot in self.lots if lot.counts.quarantined]


def site_choices(user) -> list[str]:
    held = selectors.held_sites(user)
    return selectors.sites_with_stock() if held is None else held


def _task_order(task):
    due = task["deadline"].due_at
    return (task["classification"] != "Class I", due is None, due or timezone.now(), task["recall_number"],
            task["site"])


def site_shelf(user, *, site: str = "", recall_number: str = "", now=None) -> SiteShelf:
    """`site` and `recall_number` narrow the page; `site` must be one the person holds (the form checks it)."""
    held = selectors.held_sites(user)
    sites = [site] if site else held
    shown = sites if sites is not None else site_choices(user)
    if sites == []:
        return SiteShelf(held, [], recall_number)
    tasks = selectors.open_tasks(sites, recall_number)
    numbers = selectors.recalls_at(sites) if not recall_number else [recall_number]
    facts = recall_list.recall_facts(numbers)
    for t in tasks:
        f = facts.get(t["recall_number"]) or recall_list.RecallFacts(t["recall_number"])
        t["classification"] = f.classification
        t["deadline"] = recall_list.deadline_for(f.first_class1, t["quarantined_at"], now=now)
    closed = set(RecallTask.objects.filter(step=Step.CLOSE, work__recall_number__in=numbers)
                 .values_list("work__recall_number", flat=True))
    open_numbers = [n for n in numbers if n not in closed]
    return SiteShelf(held, shown, recall_number, selectors.on_hand(sites=sites, recall_number=recall_number),
                     sorted(tasks, key=_task_order), selectors.left_with_patients(open_numbers, sites))


STOCK_COLUMNS = ["site", "product", "ndc", "gtin", "lot", "expiry", "received", "on_hand", "quarantined", "dispensed",
                 "returned", "destroyed"]


def stock_csv_rows(lots):
    for lot in lots:
        c = lot.counts
        yield [lot.site, lot.product_name, lot.ndc, lot.gtin, lot.lot, lot.expiry.isoformat() if lot.expiry else "",
               c.received, c.on_hand, c.quarantined, c.dispensed, c.returned, c.destroyed]
