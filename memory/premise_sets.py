"""Premise sets: the scopes a decision rests on, stored once per distinct content (ADR 0018).

A set's id is the sha256 of its sorted scopes, so every decision resting on the same scopes (patients
holding the same product and lot, asking alike) points at one set, and a set already stored is never
written again. The one writer is `store`, as memory.read_sets.store: it looks up which ids exist and
inserts the others with ON CONFLICT DO NOTHING, members in the caller's transaction.
"""

import hashlib
import json

from memory import content_sets
from memory.models import PremiseSet, PremiseSetMember


def canonical(scopes) -> list[str]:
    """The set's scopes as stored: each once, sorted."""
    return sorted(set(scopes))


def premise_set_id(scopes) -> str:
    """The content address of a collection of scopes (order and repeats do not matter)."""
    payload = json.dumps(canonical(scopes), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def store(sets: dict[str, list[str]]) -> int:
    """Store every set of `sets` (id -> canonical scopes) not stored yet, in the caller's transaction
    (memory.content_sets.store_new: concurrent writers, REPEATABLE READ). Returns how many member rows
    this call tried to insert."""
    _sets, members = content_sets.store_new(PremiseSet, sets, lambda new: [
        PremiseSetMember(premise_set_id=set_id, scope=scope) for set_id, scopes in new.items() for scope in scopes])
    return members


def store_one(scopes) -> str:
    """Store one set (if new) and return its id."""
    scopes = canonical(scopes)
    set_id = premise_set_id(scopes)
    store({set_id: scopes})
    return set_id
