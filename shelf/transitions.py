"""Which state a unit may move to, by which act, and the one write of Unit.state (`move_units`).

A unit's state says where the pack is. Each move is made by one act, and UNIT says which act may make it:

    epcis       an EPCIS event received (shelf.receiving): receiving, shipping, dispensing, decommissioning
    scan        a scan at fill (shelf.scans): the pack handed to a patient
    quarantine  a pharmacist's confirmation of quarantine, with the count (shelf.quarantine.confirm_quarantine)
    return      a pharmacist's confirmation of return, with the count (shelf.quarantine.confirm_return)
    destruction a pharmacist's confirmation that the quarantined units were destroyed on site, with the count
                (shelf.quarantine.confirm_destruction): a recall may tell the pharmacy to destroy, not return

So, on every path: a quarantined unit leaves quarantine only by a return or a destruction a pharmacist confirms
with the count (it is never dispensed, and no EPCIS event ships or destroys it); a unit that left with a patient stays
dispensed; a returned or destroyed unit is not dispensed. A caller asks `why_not` first, to refuse with a
sentence (an EPCIS event is refused with it, a scan at fill gets it as the form's error); `move_units`
checks the table again and raises InvalidTransition before writing anything it does not allow.
tests/house/test_status_writers.py fails on any other writer of Unit.state.
"""

from collections import defaultdict
from enum import StrEnum

from django.db import transaction

from core.copy_rows import insert_rows
from core.transitions import InvalidTransition

from .models import ShelfEvent, Unit

S = Unit.State
NEW = "new"  # a unit the site does not know yet: it has no row


class By(StrEnum):
    EPCIS = "epcis"
    SCAN = "scan"
    QUARANTINE = "quarantine"
    RETURN = "return"
    DESTRUCTION = "destruction"


UNIT = {
    NEW: {S.ON_HAND: {By.EPCIS}, S.DISPENSED: {By.EPCIS}, S.DESTROYED: {By.EPCIS}},
    S.ON_HAND: {S.QUARANTINED: {By.QUARANTINE}, S.DISPENSED: {By.EPCIS, By.SCAN}, S.RETURNED: {By.EPCIS},
                S.DESTROYED: {By.EPCIS}},
    S.QUARANTINED: {S.RETURNED: {By.RETURN}, S.DESTROYED: {By.DESTRUCTION}},  # only with a pharmacist's count
    S.DISPENSED: {},                            # it left with a patient: the recall's patient work follows it
    S.RETURNED: {S.ON_HAND: {By.EPCIS}},        # received again
    S.DESTROYED: {},
}

# The columns a unit without a row brings to move_units (shelf.receiving's new units carry exactly these).
NEW_UNIT_COLUMNS = ("site", "gtin", "serial", "ndc", "ndc_products", "lot", "lot_printed", "expiry", "product_name",
                    "received_at", "changed_at")


def allowed(old: str, new: str, by: By) -> bool:
    """One step of the table."""
    return by in UNIT.get(old, {}).get(new, set())


def reachable(old: str, new: str, by: By) -> bool:
    """Steps `by` allows lead from old to new. A receipt writes a unit once per chunk of events, after every
    step of it was checked one by one (returned -> on hand -> dispensed is written as returned -> dispensed)."""
    seen, todo = {old}, [old]
    while todo:
        for target, acts in UNIT.get(todo.pop(), {}).items():
            if by in acts and target not in seen:
                seen.add(target)
                todo.append(target)
    return new in seen


def recalls_quarantining(unit) -> list[str]:
    """The recalls whose confirmed quarantine holds this unit (else every recall that matched it)."""
    if unit.pk is None:
        return []
    tasks = unit.tasks.order_by("recall_number")
    confirmed = list(tasks.filter(quarantined_at__isnull=False).values_list("recall_number", flat=True))
    return confirmed or list(tasks.values_list("recall_number", flat=True))


def why_not(unit, new: str, by: By, *, state: str | None = None) -> str:
    """'' when `by` may move the unit to `new` in one step; else why not and what to do, for whoever sent it.
    state: the unit's state when it differs from the row's (a receipt's earlier events in memory)."""
    old = state or (unit.state if unit.pk else NEW)
    if old == new or allowed(old, new, by):
        return ""
    what = f"Unit GTIN {unit.gtin} serial {unit.serial}"
    if old == S.QUARANTINED:
        recalls = recalls_quarantining(unit)
        under = f" for recall {', '.join(recalls)}" if recalls else ""
        page = f" on the recall page (/worklist/recall/{recalls[0]})" if recalls else " on the recall page"
        leaves = f"it leaves quarantine only when a pharmacist confirms its return with the count{page}"
        if new == S.DISPENSED:
            return (f"{what} is quarantined{under}: a quarantined unit is never dispensed. Put the pack back in "
                    f"quarantine and fill from another pack; {leaves}.")
        if new == S.RETURNED:
            return (f"{what} is quarantined{under}: its return is recorded when a pharmacist confirms it with the "
                    f"count of units sent back (Confirm return{page}), not by a shipping event.")
        return f"{what} is quarantined{under}: {leaves}."
    when = f" on {unit.changed_at:%Y-%m-%d}" if getattr(unit, "changed_at", None) else ""
    if old == S.DISPENSED:
        return f"{what} was dispensed to a patient{when}: a unit that left with a patient stays dispensed."
    if old == S.RETURNED:
        if new == S.DISPENSED:
            return (f"{what} was returned (shipped out){when}: it is dispensed only after it is received again. "
                    "Check the pack against the return.")
        return f"{what} was returned (shipped out){when}: a unit that left the site is not {_label(new)} here."
    if old == S.DESTROYED:
        return (f"{what} was destroyed (decommissioned){when}: a decommissioned serial is never dispensed or moved "
                "again. Set the pack aside as suspect product and tell the pharmacist in charge.")
    return f"{what} is {_label(old)}: a {by} cannot make it {_label(new)}."


def _label(state: str) -> str:
    return "new" if state == NEW else str(S(state).label).lower()


def move_units(units, new: str, *, by: By, event: dict | None = None, **values) -> int:
    """Write `new` as the state of these units, `by` this act; the number of units moved.

    A unit without a row (pk None: a receipt's new unit, with NEW_UNIT_COLUMNS) is inserted in that state. A unit
    with a row moves by a guarded UPDATE from the state it was read in (`WHERE id IN .. AND state = <read>`), with
    `values` (changed_at, dispensing); one another writer moved since it was read is left alone, and the count
    says so. Every move is checked against UNIT before anything is written. `event`: a ShelfEvent's fields,
    recorded when a unit moved. Instances that moved are updated to match."""
    units = list(units)
    fresh = [u for u in units if u.pk is None]
    held = defaultdict(list)
    for unit in units:
        if unit.pk is not None and unit.state != new:
            held[unit.state].append(unit)
    for old in ([NEW] if fresh else []) + list(held):
        if not reachable(old, new, by):
            raise InvalidTransition(f"a {by} cannot move a unit from '{old}' to '{new}'")
    moved = 0
    with transaction.atomic():
        if fresh:
            insert_rows(Unit, [*NEW_UNIT_COLUMNS, "state"],
                        ([*(getattr(u, f) for f in NEW_UNIT_COLUMNS), new] for u in fresh))
            moved += len(fresh)
        for old, group in held.items():
            ids = [u.pk for u in group]
            count = Unit.objects.filter(id__in=ids, state=old).update(state=new, **values)
            moved += count
            now = {u.pk: new for u in group} if count == len(group) else dict(
                Unit.objects.filter(id__in=ids).values_list("id", "state"))
            for unit in group:
                if now[unit.pk] == new:
                    unit.state = new
                    for name, value in values.items():
                        setattr(unit, name, value)
        if moved and event is not None:
            ShelfEvent.objects.create(**event)
    return moved
