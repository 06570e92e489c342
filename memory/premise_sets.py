"""Premise sets: the scopes a decision rests on, stored once per distinct content (ADR 0018).

A set's id is the sha256 of its sorted scopes, so every decision resting on the same scopes (patients
holding the same product and lot, asking alike) points at one set, and a set already stored is never
written again. The one writer is `store`, as memory.read_sets.store: it looks up which ids exist and
inserts the others with ON CONFLICT DO NOTHING, members in the caller's transaction.
"""

import hashlib
import json

from memory.models import PremiseSet, PremiseSetMember


def canonical(scopes) -> list[str]:
    """The set's scopes as stored: each once, sorted."""
    return sorted(set(scopes))


def premise_set_id(scopes) -> str:
    """The content address of a collection of scopes (order and repeats do not matter)."""
    payload = json.dumps(canonical(scopes), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def store(sets: dict[str, list[str]]) -> int:
    """Store every set of `sets` (id -> canonical scopes) not stored yet, in the caller's transaction.
    Under REPEATABLE READ a set another writer committed after the snapshot makes ON CONFLICT raise a
    serialization failure, which the caller's transaction retry handles (as memory.read_sets.store).
    Returns how many member rows this call tried to insert."""
    if not sets:
        return 0
    known = set(PremiseSet.objects.filter(id__in=list(sets)).values_list("id", flat=True))
    new = {set_id: scopes for set_id, scopes in sets.items() if set_id not in known}
    if not new:
        return 0
    PremiseSet.objects.bulk_create([PremiseSet(id=set_id, size=len(scopes)) for set_id, scopes in new.items()],
                                   ignore_conflicts=True)
    rows = [PremiseSetMember(premise_set_id=set_id, scope=scope) for set_id, scopes in new.items() for scope in scopes]
    PremiseSetMember.objects.bulk_create(rows, ignore_conflicts=True, batch_size=2000)
    return len(rows)


def store_one(scopes) -> str:
    """Store one set (if new) and return its id."""
    scopes = canonical(scopes)
    set_id = premise_set_id(scopes)
    store({set_id: scopes})
    return set_id
