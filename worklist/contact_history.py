"""What was done, looking back: the messages approved and sent, and everything done for one patient."""



from corrections.models import AuditEvent, Correction

from .models import WorkEvent

# --- history and audit by patient ---------------------------------------------------------------


def sent_history(*, before_id: int | None = None, limit: int = 50):
    """Approved and sent messages, newest first, keyset-paged by correction id."""
    S = Correction.Status
    qs = (Correction.objects.filter(status__in=[S.APPROVED, S.SENT, S.REJECTED])
          .select_related("patient", "reviewed_by", "message")
          .only("public_id", "status", "recall_number", "classification", "new_verdict", "reviewed_at", "kind",
                "rejection_reason", "patient__display_name", "patient__external_ref", "patient__public_id",
                "reviewed_by__username", "message__status", "message__channel", "message__recipient",
                "message__sent_at", "message__attempts")
          .order_by("-id"))
    if before_id:
        qs = qs.filter(id__lt=before_id)
    items = list(qs[: limit + 1])
    return items[:limit], (items[limit - 1].id if len(items) > limit else None)


def patient_trail(patient) -> list[dict]:
    """Everything done for one patient: drafts, reviews, sends (corrections' audit) and worklist
    contacts, oldest first, named by patient and recall instead of row ids."""
    trail = []
    for e in (AuditEvent.objects.filter(correction__patient=patient)
              .select_related("correction").order_by("at", "id")):
        trail.append({"at": e.at, "who": e.actor_label, "what": e.get_action_display(),
                      "recall": e.correction.recall_number if e.correction else "", "note": e.note,
                      "detail": f"{e.before.get('status', e.before.get('verdict', ''))} → "
                                f"{e.after.get('status', e.after.get('verdict', ''))}"})
    for e in WorkEvent.objects.filter(patient=patient).order_by("at", "id"):
        trail.append({"at": e.at, "who": e.actor_label, "what": e.get_action_display(), "recall": e.recall_number,
                      "note": e.details.get("note", ""),
                      "detail": f"{e.details.get('method', '')} {e.details.get('outcome', '')}".strip()})
    return sorted(trail, key=lambda t: t["at"])
