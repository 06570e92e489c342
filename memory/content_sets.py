"""Sets stored once by their content: a decision's read set (ADR 0016) and its premise set (ADR 0018).

A set's id is the hash of its content, so the one write both kinds share is: look up which of the ids
exist, and insert the others and their members with ON CONFLICT DO NOTHING (bulk_create(ignore_conflicts=True),
the same statement on both engines), in the caller's transaction and in the order given. Two writers of
the same new set both succeed and neither duplicates it; under REPEATABLE READ a set another writer
committed after the snapshot makes ON CONFLICT raise a serialization failure (SQLSTATE 40001), which the
caller's transaction retry handles (core.retry): its new snapshot sees the set.
"""


def store_new(set_model, sets: dict, member_rows) -> tuple[int, int]:
    """Store every set of `sets` (id -> its content, whose len() is the set's size) not stored yet;
    `member_rows(new)` builds the member model instances of the sets `new` (id -> content). Returns how
    many sets and member rows this call inserted (attempted: a concurrent writer of the same new set may
    have won, in which case ON CONFLICT wrote nothing)."""
    if not sets:
        return 0, 0
    known = set(set_model.objects.filter(id__in=list(sets)).values_list("id", flat=True))
    new = {set_id: content for set_id, content in sets.items() if set_id not in known}
    if not new:
        return 0, 0
    set_model.objects.bulk_create([set_model(id=set_id, size=len(content)) for set_id, content in new.items()],
                                  ignore_conflicts=True)
    rows = member_rows(new)
    if rows:
        type(rows[0]).objects.bulk_create(rows, ignore_conflicts=True, batch_size=2000)
    return len(new), len(rows)
