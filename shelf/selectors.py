"""Reads of the shelf (no writes): on hand per site and lot, a recall's shelf half, recalled units on hand.

    held_sites(user) -> [site] | None                      the sites a person's shelf page shows (None: every site)
    on_hand(site=None, sites, recall) -> [LotCount]        received, on hand, quarantined, dispensed, returned...
    recall_shelf(recall_number) -> [TaskView]              per site: counts, the units that left with patients
    recalled_units_on_hand(site=None) -> {recall: count}   what is still on a shelf under a recall
    recall_shelf_summary(recall_number) -> dict            the counts the effectiveness report adds up
    recall_shelf_by_day(recall_number) -> [(day, {..})]    units received, moved to quarantine, returned, dispensed
    open_tasks(sites=None, recall) -> [dict]               tasks with units still on hand or not yet returned
    left_with_patients(recall_numbers, sites=None)         recalled units dispensed, with the fill and its patient
    recalls_at(sites=None), sites_with_stock()             what the shelf page's filters offer
    ndcs_received(gtin) -> {ndc}                           the package NDCs receiving recorded for a GTIN

Every unit has one state, so received = on hand + quarantined + dispensed + returned + destroyed holds by
construction (tests check it against the events).
"""

from dataclasses import dataclass, field

from django.db.models import Count, Max, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from .models import ShelfEvent, ShelfTask, StaffSite, TaskUnit, Unit

S = Unit.State


@dataclass
class Counts:
    received: int = 0
    on_hand: int = 0
    quarantined: int = 0
    dispensed: int = 0
    returned: int = 0
    destroyed: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _count_kwargs(prefix: str = "") -> dict:
    state = f"{prefix}state"
    return {"received": Count("id"), "on_hand": Count("id", filter=Q(**{state: S.ON_HAND})),
            "quarantined": Count("id", filter=Q(**{state: S.QUARANTINED})),
            "dispensed": Count("id", filter=Q(**{state: S.DISPENSED})),
            "returned": Count("id", filter=Q(**{state: S.RETURNED})),
            "destroyed": Count("id", filter=Q(**{state: S.DESTROYED}))}


def held_sites(user) -> list[str] | None:
    """The sites whose stock a person sees on the shelf page: the ones an operator granted them (StaffSite,
    ADR 0015); a superuser (the operator) sees every site, which None stands for."""
    if user.is_superuser:
        return None
    return sorted(StaffSite.objects.filter(user=user).values_list("site", flat=True))


def _at_sites(queryset, sites, field_name="site"):
    return queryset if sites is None else queryset.filter(**{f"{field_name}__in": list(sites)})


@dataclass
class LotCount:
    site: str
    ndc: str
    gtin: str
    lot: str
    expiry: object
    counts: Counts
    product_name: str = ""


def on_hand(site: str | None = None, *, sites=None, recall_number: str = "") -> list[LotCount]:
    """Units by site, product and lot in every state; `site` one site, `sites` a person's held sites,
    `recall_number` only the units that recall matched."""
    units = Unit.objects.all() if site is None else Unit.objects.filter(site=site)
    if recall_number:
        units = units.filter(id__in=TaskUnit.objects.filter(task__recall_number=recall_number).values("unit_id"))
    rows = (_at_sites(units, sites).values("site", "gtin", "ndc", "lot_printed", "expiry")
            .annotate(product=Max("product_name"), **_count_kwargs()).order_by("site", "gtin", "lot_printed"))
    return [LotCount(r["site"], r["ndc"], r["gtin"], r["lot_printed"], r["expiry"],
                     Counts(**{k: r[k] for k in Counts.__dataclass_fields__}), r["product"] or "") for r in rows]


@dataclass
class TaskView:
    task: ShelfTask
    counts: Counts
    dispensed: list = field(default_factory=list)  # units that left with patients: (unit, dispensing row)
    by_class: dict = field(default_factory=dict)

    @property
    def open(self) -> bool:
        return self.counts.on_hand > 0 or self.counts.quarantined > 0


def recall_shelf(recall_number: str) -> list[TaskView]:
    out = []
    tasks = ShelfTask.objects.filter(recall_number=recall_number).select_related(
        "quarantined_by", "returned_by").order_by("site")
    for task in tasks:
        links = TaskUnit.objects.filter(task=task)
        agg = Unit.objects.filter(id__in=links.values("unit_id")).aggregate(**_count_kwargs())
        by_class = dict(links.values_list("match_class").annotate(n=Count("id")).values_list("match_class", "n"))
        dispensed = list(Unit.objects.filter(id__in=links.values("unit_id"), state=S.DISPENSED)
                         .select_related("dispensing__patient").order_by("changed_at")[:200])
        out.append(TaskView(task, Counts(**agg), dispensed, by_class))
    return out


def recall_shelf_summary(recall_number: str) -> dict:
    total = Counts()
    for view in recall_shelf(recall_number):
        for key, value in view.counts.as_dict().items():
            setattr(total, key, getattr(total, key) + value)
    return {"sites": ShelfTask.objects.filter(recall_number=recall_number).count(), **total.as_dict(),
            "dispensed_to_known_patient": Unit.objects.filter(
                tasks__recall_number=recall_number, state=S.DISPENSED, dispensing__isnull=False).count()}


def recalled_units_on_hand(site: str | None = None) -> dict[str, int]:
    """Units on a shelf (not yet quarantined) that a recall matched, per recall number."""
    links = TaskUnit.objects.filter(unit__state=S.ON_HAND)
    if site is not None:
        links = links.filter(unit__site=site)
    return dict(links.values_list("task__recall_number").annotate(n=Count("id")).values_list("task__recall_number",
                                                                                              "n"))


def recall_shelf_by_day(recall_number: str) -> list[tuple]:
    """(day, {"received", "quarantined", "returned", "dispensed": units that day}) for the recall's units at
    every site, days in order: received when EPCIS receiving recorded them, moved into quarantine and returned
    when staff confirmed it (the confirmations' units), dispensed when the unit left with a patient. The
    totals are recall_shelf_summary()'s received and dispensed; quarantined counts every unit ever moved in."""
    units = Unit.objects.filter(id__in=TaskUnit.objects.filter(task__recall_number=recall_number).values("unit_id"))
    days: dict = {}

    def add(kind, rows):
        for day, n in rows:
            if n:
                days.setdefault(day, {"received": 0, "quarantined": 0, "returned": 0, "dispensed": 0})[kind] += n

    def by_day(queryset, field_name):
        return (queryset.annotate(day=TruncDate(field_name)).values("day").annotate(n=Count("id"))
                .values_list("day", "n"))

    add("received", by_day(units, "received_at"))
    add("dispensed", by_day(units.filter(state=S.DISPENSED), "changed_at"))
    confirmations = ShelfEvent.objects.filter(recall_number=recall_number, action__in=[ShelfEvent.Action.QUARANTINED,
                                                                                      ShelfEvent.Action.RETURNED])
    for event in confirmations.only("at", "action", "details"):
        add(event.action, [(timezone.localdate(event.at), int((event.details or {}).get("expected") or 0))])
    return sorted(days.items())


def open_tasks(sites=None, recall_number: str = "") -> list[dict]:
    """Shelf tasks with matched units still on hand, or quarantined and not yet returned, per recall and site: the
    worklist home lists them, since a recall can touch the shelf without touching a patient."""
    links = _at_sites(TaskUnit.objects.filter(unit__state__in=[S.ON_HAND, S.QUARANTINED]), sites, "task__site")
    if recall_number:
        links = links.filter(task__recall_number=recall_number)
    rows = (links.values("task__public_id", "task__recall_number", "task__site", "task__quarantined_at")
            .annotate(on_hand=Count("id", filter=Q(unit__state=S.ON_HAND)),
                      quarantined=Count("id", filter=Q(unit__state=S.QUARANTINED)))
            .order_by("task__recall_number", "task__site"))
    return [{"code": r["task__public_id"], "recall_number": r["task__recall_number"], "site": r["task__site"],
             "quarantined_at": r["task__quarantined_at"], "on_hand": r["on_hand"], "quarantined": r["quarantined"]}
            for r in rows]


def ndcs_received(gtin: str) -> set[str]:
    """The package NDCs (5-4-2) EPCIS receiving recorded for units of this GTIN at any site: the NDC the
    supplier's master data named, or the one product known when the unit arrived (shelf.receiving). A scan
    at fill reads it to settle the GTIN's hyphenation (patients.scanning.GTIN_NDC_SOURCES; shelf.apps)."""
    return set(Unit.objects.filter(gtin=gtin).exclude(ndc="").values_list("ndc", flat=True).distinct()[:10])


def recalls_at(sites=None) -> list[str]:
    """The recall numbers with a shelf task at these sites (every site: None), for the shelf page's filter."""
    return sorted(set(_at_sites(ShelfTask.objects.all(), sites).values_list("recall_number", flat=True)))


def sites_with_stock() -> list[str]:
    """Every site a unit was received at (what the operator, who holds every site, may filter by)."""
    return sorted(set(Unit.objects.values_list("site", flat=True).distinct()))


def left_with_patients(recall_numbers, sites=None, limit: int = 500) -> list[TaskUnit]:
    """The recalls' units that left with a patient (dispensed), newest first, each with its recall (task), the
    fill and its patient when a scan at fill recorded them: who to call first while a recall is open."""
    links = TaskUnit.objects.filter(task__recall_number__in=list(recall_numbers), unit__state=S.DISPENSED)
    return list(_at_sites(links, sites, "task__site").select_related("task", "unit__dispensing__patient")
                .order_by("-unit__changed_at", "id")[:limit])
