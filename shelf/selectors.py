"""Reads of the shelf (no writes): on hand per site and lot, a recall's shelf half, recalled units on hand.

    on_hand(site=None) -> [LotCount]                       received, on hand, quarantined, dispensed, returned...
    recall_shelf(recall_number) -> [TaskView]              per site: counts, the units that left with patients
    recalled_units_on_hand(site=None) -> {recall: count}   what is still on a shelf under a recall
    recall_shelf_summary(recall_number) -> dict            the counts the effectiveness report adds up
    open_tasks() -> [dict]                                 tasks with units still on hand or not yet returned
    ndcs_received(gtin) -> {ndc}                           the package NDCs receiving recorded for a GTIN

Every unit has one state, so received = on hand + quarantined + dispensed + returned + destroyed holds by
construction (tests check it against the events).
"""

from dataclasses import dataclass, field

from django.db.models import Count, Q

from .models import ShelfTask, TaskUnit, Unit

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


@dataclass
class LotCount:
    site: str
    ndc: str
    gtin: str
    lot: str
    expiry: object
    counts: Counts


def on_hand(site: str | None = None) -> list[LotCount]:
    units = Unit.objects.all() if site is None else Unit.objects.filter(site=site)
    rows = (units.values("site", "gtin", "ndc", "lot_printed", "expiry").annotate(**_count_kwargs())
            .order_by("site", "gtin", "lot_printed"))
    return [LotCount(r["site"], r["ndc"], r["gtin"], r["lot_printed"], r["expiry"],
                     Counts(**{k: r[k] for k in Counts.__dataclass_fields__})) for r in rows]


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


def open_tasks() -> list[dict]:
    """Shelf tasks with matched units still on hand, or quarantined and not yet returned, per recall and site: the
    worklist home lists them, since a recall can touch the shelf without touching a patient."""
    rows = (TaskUnit.objects.filter(unit__state__in=[S.ON_HAND, S.QUARANTINED])
            .values("task__public_id", "task__recall_number", "task__site")
            .annotate(on_hand=Count("id", filter=Q(unit__state=S.ON_HAND)),
                      quarantined=Count("id", filter=Q(unit__state=S.QUARANTINED)))
            .order_by("task__recall_number", "task__site"))
    return [{"code": r["task__public_id"], "recall_number": r["task__recall_number"], "site": r["task__site"],
             "on_hand": r["on_hand"], "quarantined": r["quarantined"]} for r in rows]


def ndcs_received(gtin: str) -> set[str]:
    """The package NDCs (5-4-2) EPCIS receiving recorded for units of this GTIN at any site: the NDC the
    supplier's master data named, or the one product known when the unit arrived (shelf.receiving). A scan
    at fill reads it to settle the GTIN's hyphenation (patients.scanning.GTIN_NDC_SOURCES; shelf.apps)."""
    return set(Unit.objects.filter(gtin=gtin).exclude(ndc="").values_list("ndc", flat=True).distinct()[:10])
