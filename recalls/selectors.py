"""A recall fact's long texts (reason, firm, product description, distribution, code_info), the one way
every reader gets them.

A fact ingested since the texts were stored once per record version carries only their digest
(attributes["texts"], recalls.models.RecallText); a fact written before carries them inline. Both read
the same here:

    recall_texts(facts)            -> {fact id: {reason, firm, ...}}  one query for the digests not cached
    recall_attributes(fact)        -> the fact's attributes with its texts inline (readers of one fact)
    resolved_attributes(attrs)     -> the same for an attributes dict (rows read with values_list)
    with_texts(facts)              -> copies of the facts whose attributes hold their texts inline, for
                                      readers below recalls that read attributes (drugs.recall_terms.describe)

A RecallText row never changes (its key is the digest of its content), so the texts read are cached by
digest for the life of the process: a sweep page, a worklist page or a letter reads each record's texts
at most once, and a second page reads none.
"""

import copy

from core.lru import LruCache

from .models import TEXT_ATTRIBUTES, TEXTS_REFERENCE, RecallText

CACHE_SIZE = 4096  # distinct record versions (a full openFDA history is about 12,500)

_cache = LruCache(CACHE_SIZE)


def texts_by_digest(digests) -> dict[str, dict]:
    """{digest: texts} for these digests: the cache, then one query for the rest. A digest with no row
    (never expected: the row commits with its facts) reads as empty texts rather than failing a letter."""
    out, missing = _cache.get_many(digests)
    if missing:
        found = {row["digest"]: {name: row[name] for name in TEXT_ATTRIBUTES}
                 for row in RecallText.objects.filter(digest__in=missing).values("digest", *TEXT_ATTRIBUTES)}
        _cache.put_many(found)
        out.update(found)
    return out


def _reference(attributes) -> str | None:
    return (attributes or {}).get(TEXTS_REFERENCE) or None


def _inline(attributes) -> dict:
    attributes = attributes or {}
    return {name: attributes.get(name, "") for name in TEXT_ATTRIBUTES}


def resolved_attributes_of(attribute_dicts) -> list[dict]:
    """Each attributes dict with its texts inline (legacy inline texts kept as they are); one lookup."""
    attribute_dicts = list(attribute_dicts)
    found = texts_by_digest({ref for ref in map(_reference, attribute_dicts) if ref})
    out = []
    for attributes in attribute_dicts:
        ref = _reference(attributes)
        if ref is None:
            out.append(dict(attributes or {}))
        else:
            texts = found.get(ref) or dict.fromkeys(TEXT_ATTRIBUTES, "")
            out.append({**{k: v for k, v in attributes.items() if k != TEXTS_REFERENCE}, **texts})
    return out


def resolved_attributes(attributes: dict) -> dict:
    return resolved_attributes_of([attributes])[0]


def recall_texts(facts) -> dict[int, dict]:
    """{fact id: its texts} for recall facts, inline or referred to; one query at most."""
    facts = [f for f in facts if f is not None]
    found = texts_by_digest({ref for ref in (_reference(f.attributes) for f in facts) if ref})
    out = {}
    for fact in facts:
        ref = _reference(fact.attributes)
        out[fact.pk] = (found.get(ref) or dict.fromkeys(TEXT_ATTRIBUTES, "")) if ref else _inline(fact.attributes)
    return out


def recall_attributes(fact) -> dict:
    """One fact's attributes with its texts inline ({} for no fact)."""
    if fact is None:
        return {}
    return resolved_attributes(fact.attributes or {})


def with_texts(facts) -> list:
    """Shallow copies of the facts, their attributes holding their texts inline (one lookup for all).
    For readers that take a fact and cannot import recalls (drugs.recall_terms.describe); the copies
    are for reading only (facts are never saved in place)."""
    facts = list(facts)
    resolved = resolved_attributes_of(f.attributes for f in facts)
    out = []
    for fact, attributes in zip(facts, resolved, strict=True):
        if attributes == (fact.attributes or {}):
            out.append(fact)
            continue
        clone = copy.copy(fact)
        clone.attributes = attributes
        out.append(clone)
    return out


def prefetch(facts) -> None:
    """Read the texts of these facts into the cache in one query (a sweep or worklist page, before its
    letters and rows read them one fact at a time)."""
    texts_by_digest({ref for ref in (_reference(f.attributes) for f in facts if f is not None) if ref})
