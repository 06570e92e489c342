"""A patient who has decisions is never deleted.

A decision (memory.Decision) holds its patient as a plain patient_id, with no foreign key, because
memory sits below patients in the layers; what the foreign key's PROTECT guaranteed is kept here, on
the patients side: any delete of such a patient (the model's, a queryset's, the admin's) is refused
before anything is deleted. Erasure on request does not delete the patient, it redacts the row
(privacy.services.erase_patient), so this never stands in its way."""

from django.db.models import Count, ProtectedError

from memory.models import Decision

ERASE_INSTEAD = ("Decisions are history and are never deleted. To remove the patient's personal data, erase "
                 "them instead (manage.py erase_patient, or Add erasure certificate in the admin).")


def decision_counts(patient_ids) -> dict[int, int]:
    rows = (Decision.objects.filter(patient_id__in=list(patient_ids)).order_by()
            .values("patient_id").annotate(n=Count("id")).values_list("patient_id", "n"))
    return dict(rows)


def refuse_deleting_a_patient_with_decisions(sender, instance, **kwargs):
    """pre_delete receiver for Patient (connected in patients.apps)."""
    count = decision_counts([instance.pk]).get(instance.pk)
    if count:
        held = Decision.objects.filter(patient_id=instance.pk).only("id")[:20]
        raise ProtectedError(f"Cannot delete patient {instance.public_id}: {count} decision(s) were recorded for "
                             f"them. {ERASE_INSTEAD}", set(held))


def protected_descriptions(patients) -> list[str]:
    """For the admin's delete confirmation: each of these patients that cannot be deleted, and why."""
    patients = list(patients)
    counts = decision_counts(p.pk for p in patients)
    return [f"{p}: {counts[p.pk]} recorded decision(s)" for p in patients if p.pk in counts]
