"""What changed under one re-decided decision, as both paths of a page tell it (corrections.sweep.pages
for a page, corrections.sweep.one_by_one per decision): the change that triggers the letter, the token
of its dedupe key, the fact the letter is about and the match class it names."""

from drugs.matching import CERTAINTY_RANK, match, stated_class
from drugs.recall_terms import is_active, severity
from memory.models import Fact

from ..recall_letters import latest_version


def pick_trigger(reasons: dict, latest: dict) -> tuple[Fact | None, Fact | None]:
    """(previous, trigger): what the patient's answer rested on and what is believed now, the most
    severe change first. A retracted read pairs with its current version; a new fact has no
    previous; a dispensing change alone has neither. `latest` caches latest_version per page."""
    pairs = []
    for old in reasons["retracted"]:
        if old.id not in latest:
            latest[old.id] = latest_version(old)
        pairs.append((old, latest[old.id]))
    pairs.extend((None, new) for new in reasons["new"])
    if not pairs:
        return None, None
    pairs.sort(key=lambda p: (severity(p[1]), is_active(p[1]), (p[1] or p[0]).id), reverse=True)
    return pairs[0]


def change_token(trigger, previous, outcome) -> str:
    """What changed, for the dedupe key: the fact version believed now, a bare retraction, or the
    dispensing the new decision rests on."""
    if trigger is not None:
        return str(trigger.id)
    if previous is not None:
        return f"retracted-{previous.id}"
    return f"inputs-{outcome.inputs_hash}"


def letter_fact(trigger, previous, outcome):
    """(the fact a letter is about, whether what changed was the dispensing). A dispensing change has
    no fact of its own: the letter is about the most severe fact the new answer rests on."""
    if trigger is not None or previous is not None:
        return trigger, False
    bearing = [r.fact for r in outcome.retrieved if r.fact.id in outcome.load_bearing_ids]
    return max(bearing, key=lambda f: (severity(f), f.id), default=None), True


def strongest_match(rows, facts) -> str:
    """The strongest drugs.matching class between these facts and these dispensing rows (drugs.matching.Dispensed),
    as a letter may state it (drugs.matching.stated_class)."""
    found = {str(stated_class(m, fact, [row])) for fact in facts if fact is not None for row in rows
             if (m := match(fact, row))}
    return min(found, key=CERTAINTY_RANK.get, default="")
