"""Patients read by id, for what holds a patient only as its id (memory.Decision.patient_id: memory
sits below patients, so a decision keeps no foreign key up to its patient; docs/architecture.md).

    patients_by_id(ids) -> {id: Patient}, one query
    attach_patients(decisions) -> the same list, each decision's .patient set (None when it has none)

A page of decisions gets its patients in one query, never one per decision."""

from collections.abc import Iterable

from .models import Patient


def patients_by_id(ids: Iterable[int | None], *, defer: Iterable[str] = ()) -> dict[int, Patient]:
    """The patients with these ids (None and repeats ignored). An id with no patient row is absent:
    patients refuses to delete a patient who has decisions (patients.deletion), so for a decision's
    patient_id that means it never had one."""
    wanted = {i for i in ids if i is not None}
    if not wanted:
        return {}
    query = Patient.objects.filter(pk__in=wanted)
    if defer:
        query = query.defer(*defer)
    return {p.pk: p for p in query}


def attach_patients(decisions, *, defer: Iterable[str] = ()):
    """Set `.patient` on each decision from its patient_id, in one query; returns the decisions."""
    decisions = list(decisions)
    by_id = patients_by_id((d.patient_id for d in decisions), defer=defer)
    for decision in decisions:
        decision.patient = by_id.get(decision.patient_id)
    return decisions

