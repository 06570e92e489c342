"""What a decision reads, behind one interface: the database (ask) or a page read as a set (the sweep).

    DbBeliefs()                       each read is a query (ask.services.decide's default)
    PageBeliefs(patient_ids, ...)     a sweep page's dispensing and candidate believed facts, read in a
                                      few queries; every read after that is in memory

Both answer the same four questions with the same ordering, so ask.services.decide gives the same
Outcome whichever it is handed (tests/corrections/test_sweep_set_based.py checks the rows written are equal):

    patient_drugs(patient)                       sorted drug identity keys dispensed to the patient
    dispensed_rows(patient, subject)             DispensedRow per row of the drug, by id
    facts_in_scopes(premises)                    believed facts sharing a scope, by id
    retrieve(question, subject=, lots=, k=)      memory.retrieval.retrieve's list, same order

A page reads one snapshot (the sweep sets REPEATABLE READ), so what it loads is what each query
would have returned. Fact versions are immutable but for their retraction, and a page only uses the
versions believed in its snapshot, so a cache of loaded versions can be shared across pages.
"""

from dataclasses import dataclass, field, fields

from django.db import connection

from drugs.matching import Dispensed, dispensed
from drugs.scopes import DRUG_LEVEL, dispensing_scopes
from memory.embeddings import get_provider
from memory.models import Fact
from memory.retrieval import FILL_ROUTE, Retrieved, facts_in_scopes, fill, retrieve
from patients.models import DispensingRecord

ROW_COLUMNS = ("id", "lot", "ndc", "dispensed_at", "fingerprint", "drug", "lot_unknown", "expiry", "lot_alternatives")


@dataclass(frozen=True)
class DispensedRow:
    """What a decision reads from one dispensing row of the drug asked about."""

    id: int
    lot: str
    ndc: str
    dispensed_at: object
    fingerprint: str
    drug: str = ""
    lot_unknown: bool = False
    expiry: object = None
    # Other lots the lot field may mean (drugs.lot_field); a tuple, so rows stay hashable and comparable.
    lot_alternatives: tuple = ()
    # What drugs.matching reads of the row (its NDC product: the NDC's first ten characters), computed
    # once here: matching reads values, it calls no code of ask's.
    matched: Dispensed = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "lot_alternatives", tuple(self.lot_alternatives or ()))
        object.__setattr__(self, "matched", dispensed(
            drug=self.drug, ndc=self.ndc, lot=self.lot, lot_unknown=self.lot_unknown, expiry=self.expiry,
            dispensed_at=self.dispensed_at, product=self.ndc[:10] if self.ndc else "",
            alternatives=self.lot_alternatives))

    @property
    def ndc_product(self) -> str:
        return self.matched.ndc_product

    @property
    def lot_known(self) -> bool:
        return not self.lot_unknown

    def decision_inputs(self) -> tuple:
        """Everything a decision may read from this row: every field but the row's id, the
        fingerprint over them and `matched` (made of them). The sweep shares one outcome between decisions
        whose rows have equal inputs (corrections.sweep.decider.SharedDecider), so a field added here joins
        that key by itself."""
        return tuple(getattr(self, f.name) for f in fields(self) if f.name not in ("id", "fingerprint", "matched"))


class DbBeliefs:
    """Every read is a query (what ask has always done)."""

    def patient_drugs(self, patient) -> list[str]:
        return sorted(set(patient.dispensings.values_list("drug", flat=True)))

    def dispensed_rows(self, patient, subject: str) -> list:
        rows = patient.dispensings.filter(drug=subject).order_by("id").values_list(*ROW_COLUMNS)
        return [DispensedRow(*row) for row in rows]

    def facts_in_scopes(self, premises) -> list[Fact]:
        return facts_in_scopes(premises)

    def retrieve(self, question: str, *, subject=None, lots=None, k: int = 8) -> list[Retrieved]:
        return retrieve(question, subject=subject, lots=lots, k=k)


class FactCache:
    """Believed fact versions loaded by earlier pages, by id (embedding deferred)."""

    def __init__(self, limit: int = 200_000):
        self.limit = limit
        self._facts: dict[int, Fact] = {}

    def get_many(self, ids) -> dict[int, Fact]:
        ids = list(ids)
        missing = [i for i in ids if i not in self._facts]
        if missing:
            if len(self._facts) + len(missing) > self.limit:
                self._facts.clear()
                missing = ids
            self._facts.update(Fact.objects.defer("embedding").in_bulk(missing))
        return {i: self._facts[i] for i in ids}


class PageBeliefs:
    """The dispensing of a page's patients and the believed facts its decisions can read.

    Loads the patients' dispensing rows (one query), then `load_facts`: the ids of believed facts
    that share a scope with any premise of the page or are about one of its subjects, and (through
    `cache`, only those not loaded by an earlier page) those versions' rows. The fill (memory.retrieval.fill)
    is read per distinct (question, k, excluded) and remembered for the page."""

    def __init__(self, patient_ids, *, cache: FactCache | None = None):
        self.cache = cache or FactCache()
        self._rows: dict[tuple[int, str], list] = {}
        self._drugs: dict[int, set] = {int(pid): set() for pid in patient_ids}
        # patient id -> [(DispensedRow, stored ndc_product)], by row id (the sweep's letters and
        # its SharedDecider read these too).
        self.records: dict[int, list[tuple]] = {pid: [] for pid in self._drugs}
        self.stored_product: dict[int, str] = {}  # dispensing id -> its stored ndc_product column
        with connection.cursor() as cursor:  # one array parameter, not one per patient (ORM __in)
            cursor.execute(f"SELECT patient_id, ndc_product, {', '.join(ROW_COLUMNS)} "
                           f"FROM {DispensingRecord._meta.db_table} WHERE patient_id = ANY(%s) ORDER BY id",
                           [sorted(self._drugs)])
            found = cursor.fetchall()
        for pid, ndc_product, *row in found:
            dispensed = DispensedRow(*row)
            self._rows.setdefault((pid, dispensed.drug), []).append(dispensed)
            self._drugs[pid].add(dispensed.drug)
            self.records[pid].append((dispensed, ndc_product))
            self.stored_product[dispensed.id] = ndc_product
        self._subjects: set = set()
        self._loaded_scopes: set = set()
        self.facts: list[Fact] = []
        self._by_subject: dict[str, list[Fact]] = {}
        self._by_scope: dict[str, list[Fact]] = {}
        self._semantic: dict[tuple, list] = {}
        self._vectors: dict[str, list] = {}

    def load_facts(self, wanted):
        """Read the believed facts for these (patient id, subject) pairs: those sharing a scope with
        a premise of any of them, and those about one of the subjects. Two queries at most."""
        scopes, subjects = set(), set()
        for pid, subject in wanted:
            if not subject:
                continue
            subjects.add(subject)
            scopes.add(f"drug:{subject}|{DRUG_LEVEL}")
            for row in self._rows.get((pid, subject), ()):
                scopes.update(dispensing_scopes(subject, "" if row.lot_unknown else row.lot, row.ndc_product,
                                                row.lot_alternatives))
        ids = []
        if subjects:
            # Exactly `scopes && page scopes OR subject IN subjects` over believed versions, but the
            # overlap is tested through a hashed `= ANY` first: `&&` alone compares every scope of every
            # fact with every scope of the page (O(n*m), ~20 ms a page at 400 scopes on a seq scan),
            # while `&&` stays in the clause so a large table can still use the GIN index.
            page_scopes = sorted(scopes)
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT f.id FROM {Fact._meta.db_table} f WHERE f.retracted_at IS NULL AND ("
                    "f.subject = ANY(%s) OR (EXISTS (SELECT 1 FROM unnest(f.scopes) AS s(scope) "
                    "WHERE s.scope = ANY(%s::varchar[])) AND f.scopes && %s::varchar[])) ORDER BY f.id",
                    [sorted(subjects), page_scopes, page_scopes])
                ids = [row[0] for row in cursor.fetchall()]
        self._subjects, self._loaded_scopes = subjects, scopes
        self.facts = list(self.cache.get_many(ids).values())  # by id
        self._by_scope = {}
        self._by_subject = {}
        for fact in self.facts:
            for scope in fact.scopes or ():
                self._by_scope.setdefault(scope, []).append(fact)
            self._by_subject.setdefault(fact.subject, []).append(fact)
        # retrieve's exact part orders by (match rank, -asserted_at, id): keep each subject's facts in
        # (-asserted_at, id) order once, so a decision only partitions them by match rank.
        for facts in self._by_subject.values():
            facts.sort(key=lambda f: f.asserted_at, reverse=True)  # stable: ties stay by id
        return self

    def patient_drugs(self, patient) -> list[str]:
        return sorted(self._drugs[patient.pk])

    def dispensed_rows(self, patient, subject: str) -> list:
        return list(self._rows.get((patient.pk, subject), ()))

    def facts_in_scopes(self, premises) -> list[Fact]:
        wanted = set(premises)
        if not wanted:
            return []
        if not wanted.issubset(self._loaded_scopes):
            return facts_in_scopes(premises)  # a premise this page did not load: ask the database
        found = {f.id: f for scope in wanted for f in self._by_scope.get(scope, ())}
        return [found[i] for i in sorted(found)]

    def retrieve(self, question: str, *, subject=None, lots=None, k: int = 8) -> list[Retrieved]:
        """memory.retrieval.retrieve over the page's facts: ORDER BY match_rank, -asserted_at, id."""
        if k <= 0:
            return []
        if not subject or subject not in self._subjects:
            return retrieve(question, subject=subject, lots=lots, k=k)
        lots = {lot for lot in (lots or []) if lot}
        ranked: tuple[list, list, list] = ([], [], [])
        for fact in self._by_subject.get(subject, ()):
            ranked[0 if (fact.lot is not None and fact.lot in lots) else 1 if fact.lot is None else 2].append(fact)
        picked = []
        for rank, facts in enumerate(ranked):
            match = ("lot", "drug", "subject")[rank]
            picked.extend(Retrieved(f, 1.0 if match != "subject" else 0.9, match) for f in facts[:k - len(picked)])
        remaining = k - len(picked)
        if remaining > 0 and question:
            exclude = tuple(r.fact.id for r in picked)
            key = (question, remaining, exclude)
            if key not in self._semantic:
                if question not in self._vectors and FILL_ROUTE != "text":
                    self._vectors[question] = get_provider().embed_one(question)
                self._semantic[key] = fill(question, remaining, exclude_ids=list(exclude),
                                           vector=self._vectors.get(question))
            picked.extend(self._semantic[key])
        return picked
