"""Copies of a patient's identity that no column ties to the patient, found by what identifies them and
replaced, on erasure (privacy.services.erase_patient runs this in its transaction).

    Identity.of(patient) -> Identity          name, reference, email and phone, before the erasure
    identity.scrub(text) -> str               each of them replaced by what the erased patient row shows
    scrub_free_text(identity) -> ({table: n}, {table: ids})   rows changed in each table that copies
                                              identity as text; the audited events among them (marked
                                              redacted, so the audit chain checks their structure only)
    scrub_sessions(identity) -> int           sessions changed

Where such copies come from: Django's admin log keeps the text of each added or changed object
(`object_repr`, and in `change_message` the text of inline rows), so every patient added in the admin or by
a CSV import (patients.patient_import) and every change to their dispensing names them; staff type names
into recall-step notes; a failed sign-in may carry an email as its username; a session may hold an admin
message ("The patient “…” was changed") not yet shown. Only the identity is replaced, where it stands as a
whole word: the rest of the text (what was changed, when, by whom) stays, and a session is cleaned, not
ended. Matched in any case, in plain text and as JSON writes it (non-ASCII escaped). The whole name is
matched, not its parts: a first name alone is a word too common to replace in other people's notes.

Django's cache holds no identity (reply-page counters keyed by link id), so an erasure has nothing there to
reach; tests/privacy walks the whole database, the sessions and the cache after an erasure."""

import json
import re
from dataclasses import dataclass

from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.contrib.admin.models import LogEntry
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.db.models import Q, TextField
from django.db.models.functions import Cast

from core.audit_chain import ChainedEvent
from patients.erasure import ERASED_NAME, erased_reference
from worklist.models import RecallTask, RecallWork, WorkEvent

ERASED_CONTACT = "[erased]"

# Where identity can be copied as text with nothing tying the row to the patient: (model, text or JSON fields).
FREE_TEXT = [
    (LogEntry, ("object_repr", "change_message")),
    (RecallTask, ("note",)),
    (RecallWork, ("none_found_note",)),
    (WorkEvent, ("details",)),
    (AccessAttempt, ("username", "get_data", "post_data", "path_info")),
    (AccessFailureLog, ("username", "path_info")),
    (AccessLog, ("username", "path_info")),
]


@dataclass(frozen=True)
class Identity:
    replacements: tuple[tuple[str, str], ...]  # (what identifies the patient, what replaces it)

    @classmethod
    def of(cls, patient) -> "Identity":
        pairs = [(patient.display_name, ERASED_NAME), (patient.external_ref, erased_reference(patient)),
                 (patient.email, ERASED_CONTACT), (patient.phone, ERASED_CONTACT)]
        return cls(tuple((found.strip(), by) for found, by in pairs if found and found.strip()))

    @property
    def terms(self) -> list[str]:
        """Each identifier as written in plain text and as JSON writes it."""
        return list(dict.fromkeys(form for found, _ in self.replacements for form in (found, _json(found))))

    def _pattern(self) -> re.Pattern:
        alternatives = sorted(self.terms, key=len, reverse=True)
        return re.compile(r"(?<![\w-])(" + "|".join(re.escape(t) for t in alternatives) + r")(?![\w-])",
                          re.IGNORECASE)

    def _replacement(self, found: str) -> str:
        for term, by in self.replacements:
            if found.lower() == term.lower():
                return by
            if found.lower() == _json(term).lower():
                return _json(by)
        return ERASED_CONTACT

    def scrub(self, text: str) -> str:
        if not self.replacements or not text:
            return text
        return self._pattern().sub(lambda match: self._replacement(match.group(1)), text)

    def scrub_value(self, value):
        """A string, or the strings inside a JSON value, scrubbed."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, dict):
            return {self.scrub(k): self.scrub_value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.scrub_value(v) for v in value]
        return value

    def found_in(self, field: str) -> Q:
        """Rows whose `field` (text, or JSON cast to text) may hold the identity (rechecked by scrub)."""
        query = Q()
        for term in self.terms:
            query |= Q(**{f"_erasure_{field}__icontains": term})
        return query


def _json(text: str) -> str:
    return json.dumps(text)[1:-1]


def scrub_free_text(identity: Identity) -> tuple[dict[str, int], dict[str, list[int]]]:
    counts, redacted = {}, {}
    for model, fields in FREE_TEXT:
        rows = model.objects.none()
        if identity.replacements:
            casts = {f"_erasure_{f}": Cast(f, TextField()) for f in fields}
            wanted = Q()
            for field in fields:
                wanted |= identity.found_in(field)
            rows = model.objects.annotate(**casts).filter(wanted).only("pk", *fields)
        changed, audited = 0, issubclass(model, ChainedEvent)
        for row in rows:
            values = {f: identity.scrub_value(getattr(row, f)) for f in fields}
            if any(values[f] != getattr(row, f) for f in fields):
                changed += model.objects.filter(pk=row.pk).update(**values, **({"redacted": True} if audited else {}))
                if audited:
                    redacted.setdefault(model._meta.db_table, []).append(row.pk)
        counts[model._meta.db_table] = changed
    return counts, redacted


def scrub_sessions(identity: Identity) -> int:
    """Every stored session is decoded (its data is signed and compressed, so the database cannot search it);
    one that holds the identity is written back without it, and its user stays signed in."""
    store, changed = SessionStore(), 0
    for session in Session.objects.iterator():
        data = store.decode(session.session_data)
        cleaned = identity.scrub_value(data)
        if cleaned != data:
            changed += Session.objects.filter(pk=session.pk).update(session_data=store.encode(cleaned))
    return changed
