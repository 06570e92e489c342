"""Read sets: what a decision read, stored once per distinct content (ADR 0016).

A set's id is the sha256 of its members' canonical content (fact key, version, rank, score, load-bearing,
in rank order), so two decisions that read the same fact versions alike point at one set, and a set
already stored is never written again. The one writer is `store`: it looks up which of the hashes exist
and inserts the others with ON CONFLICT DO NOTHING (bulk_create(ignore_conflicts=True), the same
statement on both engines), members in the caller's transaction, so two sweeps writing the same new set
at once both succeed and neither duplicates it.
"""

import hashlib
import json
from dataclasses import dataclass

from memory import content_sets
from memory.models import ReadSet, ReadSetMember


@dataclass(frozen=True)
class Member:
    fact_id: int
    fact_key: str
    fact_version: int
    rank: int
    score: float
    load_bearing: bool


def read_set_id(members) -> str:
    """The content address of a list of members. The fact id is not part of it: a fact version is
    named by key and version, each of which is one immutable row (fact_key_version_unique). A version
    read twice is refused here: members are stored with ON CONFLICT DO NOTHING, which would drop it."""
    if len({(m.fact_key, m.fact_version) for m in members}) != len(members):
        raise ValueError("A read set names each fact version once.")
    canonical = [[m.fact_key, int(m.fact_version), int(m.rank), float(m.score), bool(m.load_bearing)]
                 for m in sorted(members, key=lambda m: (m.rank, m.fact_key, m.fact_version))]
    payload = json.dumps(canonical, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def members_of(reads) -> list[Member]:
    """Members from ReadSpec-like reads (fact, rank, score, load_bearing)."""
    return [Member(r.fact.id, r.fact.fact_key, r.fact.version, r.rank, float(r.score), bool(r.load_bearing))
            for r in reads]


@dataclass
class Written:
    sets: int = 0
    members: int = 0


def store(sets: dict[str, list[Member]]) -> Written:
    """Store every set of `sets` (id -> members) not stored yet, in the caller's transaction
    (memory.content_sets.store_new: concurrent writers, REPEATABLE READ). Sets are inserted in the order
    given (first read first), so a page and the per-decision path give their rows the same ids. Returns
    how many sets and member rows this call inserted (attempted)."""
    return Written(*content_sets.store_new(ReadSet, sets, lambda new: [
        ReadSetMember(read_set_id=set_id, fact_id=m.fact_id, fact_key=m.fact_key, fact_version=m.fact_version,
                      rank=m.rank, score=m.score, load_bearing=m.load_bearing)
        for set_id, members in new.items() for m in members]))


def store_one(members: list[Member]) -> str:
    """Store one set (if new) and return its id."""
    set_id = read_set_id(members)
    store({set_id: members})
    return set_id
