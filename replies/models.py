"""Reply links: one per sent message. The token itself is never stored (only its SHA-256), and the URL
carries nothing but the token: no patient, recall or message id."""

from django.db import models


class ReplyLink(models.Model):
    # sha256 hex of the token in the URL (replies.links): a lookup by hash, never by the token itself.
    token_hash = models.CharField(max_length=64, unique=True)
    message = models.OneToOneField("corrections.OutboxMessage", on_delete=models.PROTECT, related_name="reply_link")
    created = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    # Set by the first accepted answer: the link answers once (the same answer again is taken as a retry).
    used_at = models.DateTimeField(null=True, blank=True)
    answer = models.OneToOneField("worklist.PatientAnswer", null=True, blank=True, on_delete=models.PROTECT,
                                  related_name="reply_link")

    def __str__(self):
        return f"reply link for message {self.message_id}"
