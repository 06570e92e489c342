"""A national-scale world for bench/recall_to_queue.py: synthetic patients (labelled synthetic) holding
real products and lots, real facts ingested from the 2021 openFDA bulk file, and a standing decision per
(patient, product held) bulk-loaded with COPY as bench/sweep.py does.

Import after _common.setup_django(). Every name the world is built from is here:

- NEW_RECALL: the real record that arrives during a run. D-0809-2021 (Pfizer's Chantix, varenicline
  tartrate, six lots on four NDCs, Class II) is in the 2023-08-05 bulk part and absent from the
  2021-04-28 bulk file, so the 2021 file is "before" and this record is "after".
- OTHER_PRODUCTS: real 2021 recall records of common drugs whose NDCs and lots the other dispensing
  rows carry (some patients hold lots those records name: their decisions say so).
- The "before" facts: every 2021 record of the ingredients used (varenicline's own earlier recall,
  D-803-2014 on the same NDC, included), through the normal ingestion path.

Patients are spread evenly: `affected` of `patients` hold varenicline on a lot of NEW_RECALL (each
also holds other products); the rest hold only other products. Each patient has decisions/patients
standing decisions (one per product held, the remainder spread over the first patients), one real
ask.services.decide() per distinct (product, NDC + lot, question) replicated for every decision with
those inputs (what ask() would have written), with the decision's own dispensing row as its input.
"""

import json
import time
import uuid
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import _common
from _common import PROJECT_DIR, SWEEP_TABLES  # noqa: F401 (SWEEP_TABLES: read by recall_to_queue.py)

OLD_FILE = PROJECT_DIR / "tests/fixtures/openfda/drug-enforcement-2021-04-28.json.zip"
NEW_FILE = PROJECT_DIR / "tests/fixtures/openfda/drug-enforcement-2023-08-05-part.json.zip"
NEW_RECALL = "D-0809-2021"
OTHER_PRODUCTS = ["D-0326-2019", "D-1044-2019", "D-0101-2019", "D-900-2014", "D-920-2014", "D-0162-2016",
                  "D-1043-2014", "D-1219-2015"]  # valsartan, losartan, metformin, atorvastatin,
# levothyroxine, ranitidine, bupropion, amlodipine
LOTS_PER_PRODUCT = 3
QUESTIONS = ["Is my {} safe?", "Has my {} been recalled?", "Should I keep taking my {}?",
             "Is there anything wrong with the {} the pharmacy gave me?"]
SITE = "Bench pharmacy (synthetic)"


def bulk_records(path: Path) -> tuple[dict, list[dict]]:
    with zipfile.ZipFile(path) as archive:
        data = json.loads(archive.read(archive.namelist()[0]))
    return data.get("meta", {}), data["results"]


@dataclass
class Product:
    """A real product as a pharmacy dispenses it: the (NDC, lot) pairs patients hold, normalised the
    way DispensingRecord.save() stores them."""

    recall_number: str
    drug: str  # identity key, as DispensingRecord.resolve_identity() stores it
    drug_text: str
    drug_source: str
    description: str
    pairs: list  # [(ndc, ndc_product, lot, lot_near)]
    dispensed_before: datetime  # the recall's initiation: dispensed in the half year before it

    def question(self, n: int) -> str:
        return QUESTIONS[n % len(QUESTIONS)].format(self.drug)


def _product(record: dict, *, lots: int | None) -> Product:
    from patients.models import DispensingRecord
    from recalls.ingest import parse_enforcement

    parsed = parse_enforcement(record)
    chosen = parsed.lots if lots is None else parsed.lots[:lots]
    pairs = []
    template = None
    for n, lot in enumerate(chosen):
        row = DispensingRecord(drug_text=parsed.subject, product_description=record["product_description"],
                               ndc=parsed.ndcs[n % len(parsed.ndcs)], lot=lot)
        row.resolve_identity()
        row.fill_derived()
        pairs.append((row.ndc, row.ndc_product, row.lot, row.lot_near))
        template = row
    initiated = datetime.fromisoformat(parsed.attributes["recall_initiation_date"]).replace(tzinfo=UTC)
    return Product(parsed.recall_number, template.drug, template.drug_text, template.drug_source,
                   record["product_description"], pairs, initiated)


def new_recall_record() -> tuple[dict, dict]:
    meta, records = bulk_records(NEW_FILE)
    [record] = [r for r in records if r["recall_number"] == NEW_RECALL]
    return meta, record


def products() -> tuple[Product, list[Product]]:
    """(the recalled product: every lot of NEW_RECALL, the other products: LOTS_PER_PRODUCT lots each)."""
    _meta, old = bulk_records(OLD_FILE)
    assert NEW_RECALL not in {r["recall_number"] for r in old}, "the new recall must be absent from the old file"
    by_number = {r["recall_number"]: r for r in old}
    recalled = _product(new_recall_record()[1], lots=None)
    others = [_product(by_number[number], lots=LOTS_PER_PRODUCT) for number in OTHER_PRODUCTS]
    return recalled, others


def check_no_near_lot_overlap(recalled: Product, others: list[Product]) -> None:
    """An unaffected row whose lot is 'near' a recalled lot would rest on the new facts (a near-lot
    candidate) and blur what the bench counts: the real lots chosen must not collide."""
    near = {pair[3] for pair in recalled.pairs}
    clash = [(p.drug, pair[2]) for p in others for pair in p.pairs if pair[3] in near]
    assert not clash, f"other products' lots near a recalled lot: {clash}"


def before_document(ingredients: set[str]) -> tuple[dict, int]:
    """The 2021 file's records of the ingredients used: the facts believed before the new recall."""
    from recalls.ingest import parse_enforcement
    from recalls.record_fields import Malformed

    meta, records = bulk_records(OLD_FILE)
    kept = []
    for record in records:
        try:
            if parse_enforcement(record).subject in ingredients:
                kept.append(record)
        except Malformed:
            continue
    return {"meta": meta, "results": kept}, len(kept)


class World:
    """Who holds what, computed (never stored in Python for all patients at once)."""

    def __init__(self, patients: int, decisions: int, affected: int, recalled: Product, others: list[Product],
                 *, same_fill_time: bool = False):
        if not 1 <= affected < patients:
            raise ValueError("affected must be between 1 and patients - 1")
        if decisions < patients:
            raise ValueError("decisions must be at least patients (one per patient)")
        per, extra = divmod(decisions, patients)
        if per + (1 if extra else 0) > len(others):
            raise ValueError(f"at most {len(others)} decisions per patient (one per product held)")
        self.patients, self.decisions, self.affected = patients, decisions, affected
        self.recalled, self.others = recalled, others
        self.per, self.extra = per, extra
        self.same_fill_time = same_fill_time
        self.epoch = datetime(2026, 1, 1, tzinfo=UTC)

    def is_affected(self, pid: int) -> bool:
        """Evenly spread: patient pid is affected when pid*A/P crosses an integer."""
        return (pid * self.affected) // self.patients != ((pid - 1) * self.affected) // self.patients

    def held(self, pid: int) -> list[tuple[int, int]]:
        """[(product index, pair index)]: product -1 is the recalled product."""
        count = self.per + (1 if pid <= self.extra else 0)
        rows = []
        if self.is_affected(pid):
            rows.append((-1, pid % len(self.recalled.pairs)))
        start = pid % len(self.others)
        for step in range(count - len(rows)):
            index = (start + step) % len(self.others)
            rows.append((index, (pid // len(self.others)) % len(self.others[index].pairs)))
        return rows

    def product(self, index: int) -> Product:
        return self.recalled if index < 0 else self.others[index]

    def dispensed_at(self, pid: int, index: int) -> datetime:
        """Unique per patient and product (a fill has its own time), within the half year before the recall.
        same_fill_time: one instant per product for everyone (then the sweep can share one reasoner call
        between patients whose inputs are otherwise equal: the experiment that prices the reasoner)."""
        if self.same_fill_time:
            return self.product(index).dispensed_before - timedelta(days=30)
        seconds = (pid * 7919 + (index + 1) * 104_729) % (182 * 86400)
        return self.product(index).dispensed_before - timedelta(seconds=seconds + 1)


def _setval(cursor, table: str) -> None:
    cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")


def load(world: World, *, log=print) -> dict:
    """COPY patients, dispensing, decisions, reads, premises and inputs. Returns counts and timings."""
    from django.conf import settings
    from django.db import connection

    from ask.services import DispensedRow, decide
    from memory import premise_sets, read_sets
    from memory.decisions import inputs_fingerprint
    from patients.models import Patient, dispensing_fingerprint

    regions = settings.UNSAY_REGIONS
    now = datetime.now(UTC)
    began = time.monotonic()
    raw = connection.connection
    representative: dict[tuple[int, int], int] = {}
    with raw.cursor() as cur:
        with cur.copy("COPY patients_patient (id, public_id, region, display_name, email, phone, preferred_channel, "
                      "preferred_language, external_ref, synthetic, created, updated) FROM STDIN") as copy:
            for pid in range(1, world.patients + 1):
                copy.write_row((pid, uuid.uuid4(), regions[pid % len(regions)], f"Bench patient {pid} (synthetic)",
                                f"bench{pid}@example.com", "", "email", "en", f"BENCH-{pid:08d}", True, now, now))
        row_id = 0
        with cur.copy("COPY patients_dispensingrecord (id, patient_id, region, drug, drug_text, drug_source, "
                      "product_description, ndc, ndc_product, lot, lot_near, lot_unknown, expiry, serial, gtin, "
                      "quantity, dispensed_at, site, synthetic, fingerprint, created, updated) FROM STDIN") as copy:
            for pid in range(1, world.patients + 1):
                for index, pair in world.held(pid):
                    row_id += 1
                    product = world.product(index)
                    ndc, ndc_product, lot, lot_near = product.pairs[pair]
                    at = world.dispensed_at(pid, index)
                    representative.setdefault((index, pair), pid)
                    copy.write_row((row_id, pid, regions[pid % len(regions)], product.drug, product.drug_text,
                                    product.drug_source, product.description, ndc, ndc_product, lot, lot_near,
                                    False, None, "", "", 30, at, SITE, True,
                                    dispensing_fingerprint(pid, product.drug, ndc, lot, None, at), now, now))
    with connection.cursor() as cursor:
        for table in ("patients_patient", "patients_dispensingrecord"):
            _setval(cursor, table)
            cursor.execute(f"ANALYZE {table}")
    patients_done = time.monotonic()
    log(f"  patients and dispensing: {world.patients:,} / {row_id:,} rows in {patients_done - began:.1f}s")

    # One real decide() per (product, pair, question), replicated for every decision with those inputs.
    templates = {}
    for (index, pair), pid in representative.items():
        patient = Patient.objects.get(pk=pid)
        product = world.product(index)
        for q in range(len(QUESTIONS)):
            outcome = decide(patient, product.question(q), subject=product.drug)
            versions = [f"{r.fact.fact_key}@{r.fact.version}" for r in outcome.retrieved]
            specs = read_sets.members_of(outcome.read_specs())
            templates[(index, pair, q)] = (outcome, versions, specs, list(outcome.premises))
    verdicts = {}
    for (index, _pair, _q), (outcome, *_rest) in templates.items():
        verdicts.setdefault(world.product(index).drug, set()).add(outcome.verdict)
    templates_done = time.monotonic()
    log(f"  {len(templates)} real decide() templates in {templates_done - patients_done:.1f}s; verdicts {verdicts}")
    assert "safe" in verdicts[world.recalled.drug], "before the new recall, the affected must have been told safe"

    decision_cols = ("id, public_id, patient_id, region, question, subject, verdict, answer, reasoner, "
                     "reasoner_verdict, guardrail_override, inputs_hash, status, replaces_id, decided_at, "
                     "superseded_at, created, read_set_id, premise_set_id")
    counts = {"reads": 0, "premises": 0, "read_sets": 0, "read_set_members": 0, "premise_sets": 0}
    # Each template's read set, stored once (memory.read_sets) as record_decision would.
    set_of = {}
    for key, (_o, _v, specs, _p) in templates.items():
        set_of[key] = read_sets.read_set_id(specs)
    distinct = {set_of[key]: specs for key, (_o, _v, specs, _p) in templates.items()}
    read_sets.store(distinct)
    counts["read_sets"], counts["read_set_members"] = len(distinct), sum(len(m) for m in distinct.values())
    # Each template's premise set, stored once (memory.premise_sets) as record_decision would.
    premise_set_of = {key: premise_sets.premise_set_id(premises) for key, (_o, _v, _s, premises) in templates.items()}
    distinct_premises = {premise_set_of[key]: premise_sets.canonical(premises)
                         for key, (_o, _v, _s, premises) in templates.items()}
    premise_sets.store(distinct_premises)
    counts["premise_sets"] = len(distinct_premises)

    def each_decision():
        """(decision id, patient id, product index, question index, template, dispensing row id, fingerprint)."""
        did = row = 0
        for pid in range(1, world.patients + 1):
            for index, pair in world.held(pid):
                did += 1
                row += 1
                product = world.product(index)
                q = pid + index + 1
                at = world.dispensed_at(pid, index)
                ndc, _p, lot, _n = product.pairs[pair]
                yield did, pid, product, q, templates[(index, pair, q % len(QUESTIONS))], row, \
                    dispensing_fingerprint(pid, product.drug, ndc, lot, None, at)

    with raw.cursor() as cur:
        with cur.copy(f"COPY memory_decision ({decision_cols}) FROM STDIN") as copy:
            for did, pid, product, q, (o, versions, specs, premises), row, digest in each_decision():
                question = product.question(q)
                inputs_hash = inputs_fingerprint(question, [f"{row}:{digest}"], versions)
                copy.write_row((did, uuid.uuid4(), pid, regions[pid % len(regions)], question, o.subject, o.verdict,
                                o.answer, o.reasoner, o.reasoner_verdict, o.guardrail_override, inputs_hash,
                                "standing", None, now, None, now, read_sets.read_set_id(specs),
                                premise_sets.premise_set_id(premises)))
                counts["reads"] += len(specs)
                counts["premises"] += len(premises)
        log(f"  decisions ({counts['reads']:,} reads in {counts['read_sets']} read sets) in "
            f"{time.monotonic() - templates_done:.1f}s")
        with cur.copy("COPY memory_decisioninput (decision_id, dispensing_id, fingerprint) FROM STDIN") as copy:
            for did, _pid, _product, _q, _t, row, digest in each_decision():
                copy.write_row((did, row, digest))
    with connection.cursor() as cursor:
        for table in ("memory_decision", "memory_readsetmember", "memory_premisesetmember", "memory_decisioninput"):
            _setval(cursor, table)
    # DispensedRow is what decide() read; asserted here so a change of its fields fails the build loudly.
    assert {"id", "lot", "ndc", "dispensed_at", "fingerprint"} <= set(DispensedRow.__dataclass_fields__)
    return {"patients": world.patients, "dispensing_rows": row_id, "decisions": world.decisions,
            "templates": len(templates), **counts,
            "copy_patients_s": round(patients_done - began, 1),
            "copy_decisions_s": round(time.monotonic() - templates_done, 1)}


# --- The COPY ceiling (bench/_common.py), into unlogged scratch tables -------------------------------------


def copy_ceiling(before: dict) -> dict:
    """The run's rows written again by COPY into UNLOGGED copies of their tables (no foreign keys, no WAL)."""
    return _common.copy_ceiling(before, unlogged=True)


def copy_floor(before: dict) -> dict:
    """The floor (bench/_common.copy_floor) into unlogged copies, as copy_ceiling; and into logged ones."""
    found = _common.copy_floor(before, unlogged=True)
    found["floor_logged_s"] = _common.copy_floor(before)["floor_s"]
    return found


def rows_per_redecision(before: dict) -> dict:
    """What the run wrote per re-decision: rows of each sweep table past `before`, read sets and their
    member rows; and how many of the new decisions' dispensing inputs equal those of the decision they
    replaced (what sharing inputs by content, as read sets share reads, could save)."""
    from django.db import connection

    found = {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM corrections_redecision WHERE id > %s", [before["corrections_redecision"]])
        redecisions = cursor.fetchone()[0] or 1
        for table in _common.SWEEP_TABLES:
            cursor.execute(f"SELECT count(*) FROM {table} WHERE id > %s", [before[table]])
            found[f"{table}_rows_per_redecision"] = round(cursor.fetchone()[0] / redecisions, 3)
        cursor.execute("SELECT count(DISTINCT read_set_id) FROM memory_readsetmember WHERE id > %s",
                       [before["memory_readsetmember"]])
        found["read_sets_written"] = cursor.fetchone()[0]
        cursor.execute("""
            SELECT count(*) FILTER (WHERE mine IS NOT DISTINCT FROM theirs), count(*) FROM (
              SELECT (SELECT string_agg(i.dispensing_id || ':' || i.fingerprint, ',' ORDER BY i.dispensing_id)
                      FROM memory_decisioninput i WHERE i.decision_id = r.new_decision_id) AS mine,
                     (SELECT string_agg(i.dispensing_id || ':' || i.fingerprint, ',' ORDER BY i.dispensing_id)
                      FROM memory_decisioninput i WHERE i.decision_id = r.old_decision_id) AS theirs
              FROM corrections_redecision r WHERE r.id > %s) AS pairs""", [before["corrections_redecision"]])
        same, total = cursor.fetchone()
        found["inputs_same_as_replaced_share"] = round(same / total, 3) if total else None
    found["read_set_member_rows_per_redecision"] = found["memory_readsetmember_rows_per_redecision"]
    return found


def logged_copy_ceiling(before: dict) -> dict:
    """The same rows into logged copies (WAL, no foreign keys): bench/sweep.py's reference, which any
    durable write of them pays. Returns ceiling_logged_s."""
    return {"ceiling_logged_s": _common.copy_ceiling(before)["ceiling_s"]}


# --- Build state: what the world looked like when built, so a run's changes can be undone ---------------

STATE_TABLE = "bench_recall_to_queue_state"


def id_tables() -> list[str]:
    """Every table with an integer `id` column (Django models and their m2m tables), but the record of
    applied migrations: a run never writes it, a migrate between runs does."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("""
            SELECT c.table_name FROM information_schema.columns c
            JOIN information_schema.tables t ON t.table_name = c.table_name AND t.table_schema = c.table_schema
            WHERE c.table_schema = 'public' AND c.column_name = 'id' AND t.table_type = 'BASE TABLE'
              AND c.data_type IN ('bigint', 'integer') AND c.table_name NOT LIKE 'ceiling_%%'
              AND c.table_name <> %s AND c.table_name <> 'django_migrations'
            ORDER BY c.table_name""", [STATE_TABLE])
        return [row[0] for row in cursor.fetchall()]


def snapshot() -> dict:
    """Max id and row count of every id table, and how many decisions stand."""
    from django.db import connection

    found = {"max_id": {}, "rows": {}}
    with connection.cursor() as cursor:
        for table in id_tables():
            cursor.execute(f"SELECT COALESCE(MAX(id), 0), COUNT(*) FROM {table}")
            found["max_id"][table], found["rows"][table] = cursor.fetchone()
        cursor.execute("SELECT COUNT(*) FROM memory_decision WHERE status = 'standing'")
        found["standing"] = cursor.fetchone()[0]
        cursor.execute("SELECT COUNT(*) FROM memory_fact WHERE retracted_at IS NULL")
        found["believed_facts"] = cursor.fetchone()[0]
        cursor.execute("SELECT now()")
        found["built_at"] = cursor.fetchone()[0].isoformat()
    return found


def save_state(value: dict) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {STATE_TABLE} (key text PRIMARY KEY, value jsonb NOT NULL)")
        for key, item in value.items():
            cursor.execute(f"INSERT INTO {STATE_TABLE} (key, value) VALUES (%s, %s) "
                           "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", [key, json.dumps(item)])


def load_state() -> dict:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [STATE_TABLE])
        if cursor.fetchone()[0] is None:
            return {}
        cursor.execute(f"SELECT key, value FROM {STATE_TABLE}")
        return {key: (json.loads(value) if isinstance(value, str) else value) for key, value in cursor.fetchall()}


def reset_to(built: dict) -> dict:
    """Undo a run: delete every row past the build's max ids, stand the superseded decisions again,
    believe the facts the build believed, then check every id table's row count against the build.
    Returns {table: rows deleted}."""
    from django.db import connection, transaction

    from core.audit_chain import CHAIN_START

    deleted = {}
    present = set(id_tables())  # a migration since the build may have renamed or dropped a table
    with transaction.atomic(), connection.cursor() as cursor:
        # History rows (facts, decisions, audit) are guarded by triggers that refuse deletes and rewrites:
        # rightly so for the product, but this undoes the bench's own run on the bench's own database.
        # The replica role skips those triggers (and the foreign-key triggers: the rows deleted are
        # exactly a run's rows, and the counts are checked below).
        cursor.execute("SET LOCAL session_replication_role = replica")
        for table, max_id in built["max_id"].items():
            if table not in present:
                continue
            cursor.execute(f"DELETE FROM {table} WHERE id > %s", [max_id])
            if cursor.rowcount:
                deleted[table] = cursor.rowcount
        cursor.execute("UPDATE memory_decision SET status = 'standing', superseded_at = NULL "
                       "WHERE status <> 'standing' AND id <= %s", [built["max_id"]["memory_decision"]])
        if cursor.rowcount:
            deleted["memory_decision (stood again)"] = cursor.rowcount
        cursor.execute("UPDATE memory_fact SET retracted_at = NULL, retracted_by = '', retraction_reason = '', "
                       "superseded_by_id = NULL WHERE id <= %s AND retracted_at >= %s",
                       [built["max_id"]["memory_fact"], built["built_at"]])
        if cursor.rowcount:
            deleted["memory_fact (believed again)"] = cursor.rowcount
        # Audit links are keyed by their place in the chain, not by id: those sealing an event the run wrote
        # went with the events above, and the chain's head goes back to the build's last link (a head row
        # the run created went with the ids above).
        for table in _chained_tables(present):
            cursor.execute(f"DELETE FROM core_auditlink l WHERE l.event_table = %s AND NOT EXISTS "
                           f"(SELECT 1 FROM {table} e WHERE e.id = l.event_id)", [table])
            if cursor.rowcount:
                deleted[f"core_auditlink ({table})"] = cursor.rowcount
        cursor.execute("UPDATE core_auditchainhead h SET seq = COALESCE(last.seq, 0), link_hash = COALESCE("
                       "last.link_hash, %s) FROM (SELECT max(seq) AS seq FROM core_auditlink) AS top "
                       "LEFT JOIN core_auditlink last ON last.seq = top.seq", [CHAIN_START])
        # Read sets are addressed by content, not by id: those the run wrote are the ones no decision of
        # the build points at (their members went with the ids above).
        cursor.execute("DELETE FROM memory_readset s WHERE NOT EXISTS "
                       "(SELECT 1 FROM memory_decision d WHERE d.read_set_id = s.id)")
        if cursor.rowcount:
            deleted["memory_readset"] = cursor.rowcount
        # Premise sets likewise; every decision of the build stands again here, so the partial index
        # decision_premise_set answers.
        cursor.execute("DELETE FROM memory_premiseset s WHERE NOT EXISTS (SELECT 1 FROM memory_decision d "
                       "WHERE d.premise_set_id = s.id AND d.status = 'standing')")
        if cursor.rowcount:
            deleted["memory_premiseset"] = cursor.rowcount
    now = snapshot()
    wrong = {t: (now["rows"][t], n) for t, n in built["rows"].items() if t in now["rows"] and now["rows"][t] != n}
    if wrong or now["standing"] != built["standing"] or now["believed_facts"] != built["believed_facts"]:
        raise RuntimeError(f"reset left the world unlike the build: {wrong}, standing {now['standing']} vs "
                           f"{built['standing']}, believed facts {now['believed_facts']} vs {built['believed_facts']}")
    return deleted


def _chained_tables(present) -> list[str]:
    """The tables of audit events the one chain links (core.audit_chain), of those present."""
    from core.audit_chain import chained_models

    return sorted(table for table in chained_models() if table in present)
