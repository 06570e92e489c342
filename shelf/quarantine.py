"""A recall reaches the shelf: matching units become a quarantine task; staff confirm quarantine, then return
or destruction.

    match_facts(fact_ids) -> [ShelfTask]   every unit of the sites (any state) a recall fact matches
                                           (queued by shelf.tasks when facts change; `manage.py shelf_match`)
    match_units(site, lots, products)      units just received or changed, against believed recall facts
    confirm_quarantine(task, *, counted, user, note="")   on-hand matched units -> quarantined
    confirm_return(task, *, counted, user, note="")       quarantined matched units -> returned
    confirm_destruction(task, *, counted, user, note="")  quarantined matched units -> destroyed on site
                                                          (these two are the only ways out of quarantine:
                                                          shelf.transitions)

Matching is drugs.matching.explain, the same package-first rules as patients (a unit is a dispensing-like
object: NDC, canonical lot, expiry). A unit whose GTIN's NDC hyphenation was not resolved is tried with
each candidate NDC, and a match through one is at most probable (candidate for an all-lots recall): the
barcode does not say which labeler's product its digits are. Units of every state are linked, so the
task's counts show what is still on the shelf beside what already left with patients. Near-miss lots are
not looked for: EPCIS lots are machine data, not typed.
"""


from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from drugs import recall_terms
from drugs.lots import canonical_lot, canonical_lot_sql
from drugs.matching import CERTAINTY_RANK, Dispensed, Found, MatchClass, explain
from memory.models import Fact

from .models import ShelfEvent, ShelfTask, TaskUnit, Unit
from .transitions import By, move_units

_UNRESOLVED_CLASS = {MatchClass.CONFIRMED: MatchClass.PROBABLE, MatchClass.PRODUCT_ALL_LOTS: MatchClass.CANDIDATE}


class ShelfError(ValueError):
    """A confirmation that cannot be recorded, with a sentence for the pharmacist."""


def unit_match(fact, unit):
    """The strongest Found of a recall fact for a unit, trying each candidate NDC of an unresolved GTIN."""
    ndcs = [unit.ndc] if unit.ndc else [f"{p}-00" for p in unit.ndc_products]
    best = None
    for ndc in ndcs or [""]:
        # An unresolved candidate stands for its product only: '00000' package digits never match a package.
        probe = Dispensed(drug="", ndc="", ndc_product=ndc[:10], lot=unit.lot, lot_known=bool(unit.lot),
                          expiry=unit.expiry, dispensed_at=None)
        found = explain(fact, probe)
        if found and (best is None or CERTAINTY_RANK[found.klass.value] < CERTAINTY_RANK[best.klass.value]):
            best = found
    if best and not unit.ndc and best.klass in _UNRESOLVED_CLASS:
        # The GTIN's 10 digits could be read as another labeler's product: the package is not confirmed.
        best = Found(_UNRESOLVED_CLASS[best.klass],
                     f"{best.rule} (NDC read from the GTIN, its hyphenation unconfirmed)")
    return best


def _units_for(fact):
    products = sorted(recall_terms.products(fact))
    if not products:
        return Unit.objects.none()  # a recall naming no NDC cannot be read against a package
    by_product = Q(ndc_products__overlap=products)
    if fact.lot and not recall_terms.is_drug_level(fact):
        return Unit.objects.filter(Q(lot=canonical_lot(fact.lot)) | Q(lot=""), by_product)
    return Unit.objects.filter(by_product)


def match_facts(fact_ids) -> list[ShelfTask]:
    facts = list(Fact.objects.filter(id__in=fact_ids, retracted_at__isnull=True, kind=Fact.Kind.RECALL)
                 .defer("embedding"))
    # This runs for every committed batch of ingested records: one query on the products index says whether any
    # unit can match at all (usually none). Every fact's units (_units_for) hold one of its products, so
    # no unit is missed; building each fact's lot condition first cost more than the query.
    products = set().union(*(recall_terms.products(fact) for fact in facts))
    if not products or not Unit.objects.filter(ndc_products__overlap=sorted(products)).exists():
        return []
    found = []
    for fact in facts:
        for unit in _units_for(fact):
            hit = unit_match(fact, unit)
            if hit:
                found.append((recall_terms.recall_number(fact), unit, hit))
    return _link(found)


def match_units(site: str, lots, products) -> list[ShelfTask]:
    """Units just received or changed at a site (their canonical lots and candidate NDC products): the believed
    recall facts of those lots, and all-lots recalls of those products, read first, so a shipment no recall
    touches costs one query; then each relevant fact's units at the site."""
    lots, products = sorted(set(lots) - {""}), set(products)
    if not products:
        return []
    # A fact names its lot as printed ('M331J18-1'); units carry the canonical lot: compare canonically.
    facts = Fact.objects.filter(kind=Fact.Kind.RECALL, retracted_at__isnull=True).annotate(
        lot_key=canonical_lot_sql("lot")).filter(
        Q(lot_key__in=lots) | Q(lot__isnull=True) | Q(lot="") | Q(attributes__scope="drug"))
    found = []
    for fact in facts:
        if not recall_terms.products(fact) & products:
            continue
        for unit in _units_for(fact).filter(site=site):
            hit = unit_match(fact, unit)
            if hit:
                found.append((recall_terms.recall_number(fact), unit, hit))
    return _link(found)


def _link(found) -> list[ShelfTask]:
    if not found:
        return []
    now = timezone.now()
    tasks = {}
    with transaction.atomic():
        for number, unit, _hit in found:
            key = (number, unit.site)
            if key not in tasks:
                task, _ = ShelfTask.objects.get_or_create(recall_number=number, site=unit.site,
                                                          defaults={"created": now, "updated": now})
                tasks[key] = task
        links = [TaskUnit(task=tasks[(n, u.site)], unit=u, match_class=h.klass.value, rule=h.rule[:200])
                 for n, u, h in found]
        created = TaskUnit.objects.bulk_create(links, ignore_conflicts=True, batch_size=5000)
        ShelfTask.objects.filter(id__in=[t.id for t in tasks.values()]).update(updated=now)
        for (number, site), _task in tasks.items():
            ShelfEvent.objects.create(actor_label="recall", action=ShelfEvent.Action.MATCHED, site=site,
                                      recall_number=number,
                                      details={"units": sum(1 for n, u, _ in found if (n, u.site) == (number, site)),
                                               "linked": len(created)})
    return list(tasks.values())


def _event(user, action, task, **details):
    ShelfEvent.objects.create(actor=user, actor_label=user.get_username()[:150], action=action, site=task.site,
                              recall_number=task.recall_number, details=details)


def _task_units(task: ShelfTask, state: str) -> list[Unit]:
    """The task's units in a state, locked in id order (as a receipt locks the units it moves)."""
    return list(Unit.objects.select_for_update().filter(
        id__in=TaskUnit.objects.filter(task=task).values("unit_id"), state=state).order_by("id"))


def confirm_quarantine(task: ShelfTask, *, counted: int, user, note: str = "") -> int:
    """Staff pulled the recalled units off the shelf: every matched on-hand unit becomes quarantined. The
    count they give is kept beside the count expected, so a difference is on the record."""
    return _confirm(task, _QUARANTINE, counted=counted, user=user, note=note)


def confirm_return(task: ShelfTask, *, counted: int, user, note: str = "") -> int:
    """The quarantined units went back to the supplier (or to the recall's returns processor). A way out of
    quarantine (shelf.transitions): an EPCIS shipping event of a quarantined unit is refused and points here."""
    return _confirm(task, _RETURN, counted=counted, user=user, note=note)


def confirm_destruction(task: ShelfTask, *, counted: int, user, note: str = "") -> int:
    """The quarantined units were destroyed on site, as the recall instructs (some tell the pharmacy to
    destroy the product rather than send it back). Like a return, only from quarantine and with the count."""
    return _confirm(task, _DESTRUCTION, counted=counted, user=user, note=note)


@dataclass(frozen=True)
class _Step:
    """A pharmacist's confirmation on a shelf task: the task's units in one state move to another by one act
    (shelf.transitions), and the task and the log record who, when and the count given."""

    source: str
    state: str
    by: By
    step: str  # the task's <step>_at / <step>_by
    count_field: str
    action: str
    no_count: str  # the refusal without a count
    before_quarantine: str = ""  # the refusal while the quarantine is not confirmed ("": allowed)


_QUARANTINE = _Step(Unit.State.ON_HAND, Unit.State.QUARANTINED, By.QUARANTINE, "quarantined", "quarantine_count",
                    ShelfEvent.Action.QUARANTINED,
                    "Give the number of units you put in quarantine (0 if none were on the shelf).")
_RETURN = _Step(Unit.State.QUARANTINED, Unit.State.RETURNED, By.RETURN, "returned", "return_count",
                ShelfEvent.Action.RETURNED, "Give the number of units returned.",
                "Confirm the quarantine first: only quarantined units are returned.")
_DESTRUCTION = _Step(Unit.State.QUARANTINED, Unit.State.DESTROYED, By.DESTRUCTION, "destroyed", "destroy_count",
                     ShelfEvent.Action.DESTROYED, "Give the number of units destroyed.",
                     "Confirm the quarantine first: only quarantined units are destroyed.")


def _confirm(task: ShelfTask, step: _Step, *, counted: int, user, note: str) -> int:
    """The units move, the task records the confirmation and the log its event, in one transaction. A step
    confirmed again (units matched after the first confirmation, pulled or sent back later) keeps the first
    confirmation's time and person -- the Class I deadline was met or missed then -- and the task's count is
    every count given; each confirmation is its own event with its own count."""
    if counted is None or counted < 0:
        raise ShelfError(step.no_count)
    with transaction.atomic():
        task = ShelfTask.objects.select_for_update().get(pk=task.pk)
        if step.before_quarantine and task.quarantined_at is None:
            raise ShelfError(step.before_quarantine)
        now = timezone.now()
        moved = move_units(_task_units(task, step.source), step.state, by=step.by, changed_at=now)
        if getattr(task, f"{step.step}_at") is None:
            setattr(task, f"{step.step}_at", now)
            setattr(task, f"{step.step}_by", user)
        setattr(task, step.count_field, (getattr(task, step.count_field) or 0) + counted)
        task.updated = now
        task.save(update_fields=[f"{step.step}_at", f"{step.step}_by", step.count_field, "updated"])
        _event(user, step.action, task, expected=moved, counted=counted, note=note[:2000])
    return moved
