"""The audit chain's own tables (core.audit_chain): one link per audited event, whatever app wrote it,
and the chain's head. The events stay in their apps' tables (corrections.AuditEvent, worklist.WorkEvent,
shelf.ShelfEvent, patients.DispensingChange), which subclass core.audit_chain.ChainedEvent."""

from django.db import models


class AuditLink(models.Model):
    """Link `seq` of the chain: which event it seals (its table and row id), the key that signed it, the
    digest of the event's redactable part (kept here so an erasure can blank that part and the link still
    verifies), and the link hash over the previous link, the event's structure and that digest."""

    seq = models.BigIntegerField(primary_key=True)
    event_table = models.CharField(max_length=63)
    event_id = models.BigIntegerField()
    key_id = models.CharField(max_length=40)
    redactable_digest = models.CharField(max_length=64)
    link_hash = models.CharField(max_length=64)
    sealed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["event_table", "event_id"], name="auditlink_one_per_event")]

    def __str__(self):
        return f"link {self.seq}: {self.event_table} {self.event_id}"


class AuditChainHead(models.Model):
    """The last link of the chain: one row, locked (SELECT ... FOR UPDATE) by every seal, so links are
    written in one order however many writers there are, in every app."""

    seq = models.BigIntegerField(default=0)
    link_hash = models.CharField(max_length=64, default="")

    def __str__(self):
        return f"audit chain at {self.seq}"
