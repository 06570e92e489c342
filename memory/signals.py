"""What memory announces to the layers above it (they import memory; memory never imports them)."""

from django.dispatch import Signal

# Sent once per committed transaction that wrote fact versions, never after a rollback, with
# `pairs=[(old_fact_id | None, new_fact_id | None), ...]`: (old, new) a supersession, (old, None) a
# bare retraction, (None, new) a brand-new key. One recall record or one escalation is one send,
# so the sweep it triggers is one task, not one per lot.
facts_changed = Signal()
