from django.db import models


class ErasureCertificate(models.Model):
    """What an erasure of a patient's personal data did: when, by whom, why, how many rows of each kind,
    every database table it reached with the rows it changed there, and the audit chain's head after it
    (corrections.audit), so the erasure itself is in the chain."""

    patient_public_id = models.UUIDField(help_text="The erased patient's id (not personal data).")
    erased_at = models.DateTimeField()
    erased_by = models.CharField(max_length=150)
    reason = models.TextField()
    counts = models.JSONField(default=dict, help_text="Rows changed, per kind.")
    tables = models.JSONField(default=dict, help_text="Every database table the erasure reached: rows changed.")
    audit_event_id = models.BigIntegerField(help_text="The erasure's own audit event.")
    chain_head_seq = models.BigIntegerField(null=True, blank=True)
    chain_head_link = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-erased_at", "-id"]
        permissions = [("erase_patient", "Can erase a patient's personal data")]

    def __str__(self):
        return f"erasure of patient {self.patient_public_id} at {self.erased_at:%Y-%m-%d %H:%M} by {self.erased_by}"

    def as_dict(self) -> dict:
        return {"certificate": self.pk, "patient": str(self.patient_public_id), "erased_at": self.erased_at.isoformat(),
                "erased_by": self.erased_by, "reason": self.reason, "counts": self.counts, "tables": self.tables,
                "audit_event": self.audit_event_id,
                "audit_chain_head": {"seq": self.chain_head_seq, "link_hash": self.chain_head_link}}
