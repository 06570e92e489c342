"""Sweep at scale: N standing decisions, A of them touched by one change to a real recall lot.

    .venv/bin/python bench/sweep.py [--case escalation|new-recall|both] [--runs 3] [--decisions 100000]
                                    [--affected 10000] [--shared-inputs] [--page-size 200] [--profile]
                                    [--workers 1|2|1,2] [--processes] [--keep-last]

--case escalation: the affected were told "caution" on D-0326-2019 lot 3069020, which is escalated to
Class I (their load-bearing read is retracted). --case new-recall: D-0326-2019 is not ingested at
first, so the affected were told "safe"; then its real record is ingested (a brand-new recall:
nothing is retracted, the affected are found through their premises). Default: both.

Runs on the embedded PostgreSQL in its own database (UNSAY_DB_NAME, default unsay_bench_sweep) with
the rules reasoner and hashing embeddings. Set-up per case (not timed): every valsartan record of the
real openFDA 2021 file is ingested; N synthetic patients are COPY-loaded with their dispensing; for
each group of identical inputs the real ask.services.decide() is run once and its decision + read set
is COPY-replicated for every patient of the group (what ask() would have written for them). Each of
the --runs runs then works on a fresh copy of that database (CREATE DATABASE ... TEMPLATE).

Affected patients were dispensed the demo lot (D-0326-2019 lot 3069020, Class II -> caution); by
default each also has a unique second valsartan lot, so no two affected decisions have identical
inputs and the sweep must call the reasoner once per decision (the worst case). --shared-inputs drops
that second lot, so all affected decisions share inputs per question phrasing.

Timed: the change commits, then corrections.sweep.run.sweep() for the changed fact versions (what the
after-commit Celery task runs), notices included. Then, in the same run on the same database, the
COPY ceiling: the rows that sweep wrote (decisions, reads, premises, inputs, corrections, outbox,
audit, redecisions, and the superseding UPDATE) written again by COPY in one committed transaction
into empty LIKE-copies of the tables (same indexes and unique constraints, no foreign keys).
Then, for information, the same COPY again with the real tables' foreign keys added to the copies
(deferred, checked at commit, as the sweep's are), and the ratio to that. --workers N runs N sweeps
of the same change at once in threads (the first cuts the stale set into key ranges, the others join
its plan and claim ranges: corrections.sweep.claims; notices in the first only); --processes makes them
forked processes instead, as Celery's prefork workers run two sweeps. --workers 1,2 measures each count
on its own copy of the loaded data, interleaved run by run, and prints the speedup per run.
Prints per run: re-decisions/s, ceiling re-decisions/s, their ratio, time to the first committed page,
set-based pages of all pages, the process's CPU during the sweep, load average; then min / median /
max over the runs per case. --keep-last leaves the last run's database (UNSAY_DB_NAME + "_run") in
place, to EXPLAIN the sweep's queries on it afterwards; the next run of the bench drops it.
"""

import argparse
import json
import os
import statistics
import sys
import time
import uuid
import zipfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROJECT_DIR, SWEEP_TABLES, copy_ceiling, describe_machine, setup_django  # noqa: E402

setup_django(db_name="unsay_bench_sweep", profile="test", UNSAY_SWEEP_ON_SUPERSESSION="0")

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from ask.beliefs import DispensedRow  # noqa: E402
from ask.services import decide, premises_for  # noqa: E402
from corrections.models import Correction, OutboxMessage, SweepRun  # noqa: E402
from corrections.sweep.run import count_stale, sweep  # noqa: E402
from corrections.sweep.staleness import Scope, _union  # noqa: E402
from corrections.triggers import auto_sweep_suppressed  # noqa: E402
from demo.escalation import escalate  # noqa: E402
from drugs.lots import near_lot_key  # noqa: E402
from memory import premise_sets, read_sets  # noqa: E402
from memory.decisions import inputs_fingerprint  # noqa: E402
from memory.models import Fact  # noqa: E402
from patients.models import Patient, dispensing_fingerprint  # noqa: E402

RECALL, LOT, DRUG = "D-0326-2019", "3069020", "valsartan"
UNAFFECTED_LOT = "3095511"  # in no recall record (demo/patients.py)
# Mylan valsartan 40 mg (D-0326-2019's maker): every patient's dispensing carries it, so the
# drug-level recalls of other makers (Solco, Camber: they list their own NDCs) do not apply.
NDC = "00378-5814-77"
QUESTIONS = ["Is my valsartan safe?", "Should I keep taking my blood pressure pills?",
             "Has my valsartan been recalled?", "Is there anything wrong with the tablets the pharmacy gave me?"]


def reset():
    with connection.cursor() as cursor:
        cursor.execute("""
            TRUNCATE corrections_auditevent, corrections_outboxmessage, corrections_redecision, corrections_correction,
                     corrections_sweeprun, memory_readsetmember, memory_readset, memory_premisesetmember,
                     memory_premiseset, memory_decisioninput,
                     memory_decision, patients_dispensingchange, patients_dispensingrecord,
                     patients_patient, recalls_recallrecord, recalls_quarantinedrecord, recalls_ingestrun, memory_fact
            RESTART IDENTITY CASCADE
        """)


def valsartan_records() -> tuple[dict, list]:
    with zipfile.ZipFile(PROJECT_DIR / "tests/fixtures/openfda/drug-enforcement-2021-04-28.json.zip") as archive:
        data = json.loads(archive.read(archive.namelist()[0]))
    return data.get("meta", {}), [r for r in data["results"] if DRUG in r["product_description"].lower()]


def ingest_real_facts(tmp: Path, *, without: str | None = None) -> int:
    meta, records = valsartan_records()
    records = [r for r in records if r["recall_number"] != without]
    tmp.write_text(json.dumps({"meta": meta, "results": records}))
    call_command("ingest_recalls", "--file", str(tmp), "--no-progress", verbosity=0)
    return len(records)


def fingerprint(patient_id, lot, at) -> str:
    """The fingerprint DispensingRecord.save() would store for a COPY-loaded row."""
    return dispensing_fingerprint(patient_id, DRUG, NDC, lot, None, at)


def load(decisions: int, affected: int, shared_inputs: bool, case: str) -> dict:
    regions = settings.UNSAY_REGIONS
    now = datetime.now(UTC)
    began = time.monotonic()
    raw = connection.connection
    with raw.cursor() as cur:
        with cur.copy("COPY patients_patient (id, public_id, region, display_name, email, phone, preferred_channel, "
                      "preferred_language, external_ref, synthetic, created, updated) FROM STDIN") as copy:
            for pid in range(1, decisions + 1):
                copy.write_row((pid, uuid.uuid4(), regions[pid % len(regions)], f"Bench patient {pid} (synthetic)",
                                f"bench{pid}@example.com", "", "email", "en", f"BENCH-{pid:08d}", True, now, now))
        rows_of: dict[int, list[DispensedRow]] = {}
        row_id = 0
        with cur.copy("COPY patients_dispensingrecord (id, patient_id, region, drug, drug_text, drug_source, "
                      "product_description, ndc, ndc_product, lot, lot_near, expiry, quantity, dispensed_at, site, "
                      "synthetic, fingerprint, created, updated) FROM STDIN") as copy:
            for pid in range(1, decisions + 1):
                lots = [LOT] if pid <= affected else [UNAFFECTED_LOT]
                if pid <= affected and not shared_inputs:
                    lots.append(f"BX{pid:07d}")  # a second, unrecalled lot: makes this patient's inputs unique
                for lot in lots:
                    row_id += 1
                    digest = fingerprint(pid, lot, now)
                    rows_of.setdefault(pid, []).append(DispensedRow(row_id, lot, NDC, now, digest))
                    copy.write_row((row_id, pid, regions[pid % len(regions)], DRUG, DRUG, "drug-ner", "", NDC,
                                    NDC[:10], lot, near_lot_key(lot), None, 90, now,
                                    "Bench site (synthetic)", True, digest, now, now))
    with connection.cursor() as cursor:
        for table in ("patients_patient", "patients_dispensingrecord"):
            cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
    patients_done = time.monotonic()

    # One real decide() per template (group of identical inputs but for the unique lot), replicated.
    templates = {}
    for group, pid in (("affected", 1), ("unaffected", affected + 1)):
        patient = Patient.objects.get(pk=pid)
        for question in QUESTIONS:
            templates[(group, question)] = decide(patient, question, subject=DRUG)
    expected = "safe" if case == "new-recall" else "caution"
    assert templates[("affected", QUESTIONS[0])].verdict == expected, templates[("affected", QUESTIONS[0])].answer
    decision_cols = ("id, public_id, patient_id, region, question, subject, verdict, answer, reasoner, "
                     "reasoner_verdict, guardrail_override, inputs_hash, status, replaces_id, decided_at, "
                     "superseded_at, created, read_set_id, premise_set_id")
    read_rows = 0
    # Each template's read set, stored once (memory.read_sets) as record_decision would.
    set_of = {key: read_sets.members_of(o.read_specs()) for key, o in templates.items()}
    read_sets.store({read_sets.read_set_id(members): members for members in set_of.values()})
    set_of = {key: read_sets.read_set_id(members) for key, members in set_of.items()}
    # Each decision's premise set, stored once (memory.premise_sets) as record_decision would.
    premises_of = {pid: premise_sets.canonical(premises_for(DRUG, rows_of[pid])) for pid in range(1, decisions + 1)}
    premise_set_of = {pid: premise_sets.premise_set_id(scopes) for pid, scopes in premises_of.items()}
    premise_sets.store({premise_set_of[pid]: scopes for pid, scopes in premises_of.items()})
    with raw.cursor() as cur:
        with cur.copy(f"COPY memory_decision ({decision_cols}) FROM STDIN") as copy:
            for pid in range(1, decisions + 1):
                group = "affected" if pid <= affected else "unaffected"
                question = QUESTIONS[pid % len(QUESTIONS)]
                o = templates[(group, question)]
                lots = [LOT] if pid <= affected else [UNAFFECTED_LOT]
                if pid <= affected and not shared_inputs:
                    lots.append(f"BX{pid:07d}")
                versions = [f"{r.fact.fact_key}@{r.fact.version}" for r in o.retrieved]
                digest = inputs_fingerprint(question, lots, versions)
                copy.write_row((pid, uuid.uuid4(), pid, regions[pid % len(regions)], question, o.subject, o.verdict,
                                o.answer, o.reasoner, o.reasoner_verdict, o.guardrail_override, digest, "standing",
                                None, now, None, now, set_of[(group, question)], premise_set_of[pid]))
                read_rows += len(o.retrieved)
        with cur.copy("COPY memory_decisioninput (decision_id, dispensing_id, fingerprint) FROM STDIN") as copy:
            for pid in range(1, decisions + 1):
                for row in rows_of[pid]:
                    copy.write_row((pid, row.id, row.fingerprint))
    with connection.cursor() as cursor:
        for table in ("memory_decision", "memory_premisesetmember", "memory_decisioninput"):
            cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
        for table in ("patients_patient", "patients_dispensingrecord", "memory_decision", "memory_readsetmember",
                      "memory_premisesetmember", "memory_decisioninput", "memory_fact"):
            cursor.execute(f"ANALYZE {table}")
    return {"patients": decisions, "decisions": decisions, "reads": read_rows,
            "copy_patients_s": round(patients_done - began, 1),
            "copy_decisions_s": round(time.monotonic() - patients_done, 1)}


def explain_page(fact_ids) -> str:
    union, params = _union(Scope.of(fact_ids))
    sql = (f"SELECT d.id FROM memory_decision d WHERE d.status = 'standing' AND d.id > %s "
           f"AND d.id IN (SELECT decision_id FROM ({union}) AS stale) ORDER BY d.id LIMIT %s")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) " + sql, [0, *params, 200])
        return "\n".join(row[0] for row in cursor.fetchall())


def max_ids() -> dict:
    with connection.cursor() as cursor:
        found = {}
        for table in SWEEP_TABLES:
            cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}")
            found[table] = cursor.fetchone()[0]
        return found


def _admin():
    import psycopg

    params = dict(connection.get_connection_params())
    params["dbname"] = "postgres"
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**{k: v for k, v in params.items() if k in (
        "dbname", "user", "password", "host", "port", "sslmode")}, autocommit=True)


def use_database(name: str):
    connection.close()
    connection.settings_dict["NAME"] = name


def clone(base: str, name: str):
    use_database(base)
    connection.close()
    with _admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{base}" STRATEGY FILE_COPY')
    use_database(name)


def drop(base: str, name: str):
    use_database(base)
    with _admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')


def change(case: str) -> list[int]:
    """The change whose after-commit trigger hands the sweep these fact ids."""
    if case == "new-recall":
        meta, records = valsartan_records()
        before = set(Fact.objects.values_list("id", flat=True))
        tmp = PROJECT_DIR / "var" / "bench-sweep-new-recall.json"
        tmp.write_text(json.dumps({"meta": meta, "results": [r for r in records if r["recall_number"] == RECALL]}))
        call_command("ingest_recalls", "--file", str(tmp), "--no-progress", verbosity=0)
        return sorted(set(Fact.objects.values_list("id", flat=True)) - before)
    [result] = escalate(RECALL, "Class I", lot=LOT, by="bench")
    old_fact = Fact.objects.get(fact_key=f"recall:{RECALL}:lot:{LOT}", version=result.old_version)
    new_fact = Fact.objects.get(fact_key=f"recall:{RECALL}:lot:{LOT}", version=result.new_version)
    return [old_fact.id, new_fact.id]


def _sweeps(changed, page_size: int, workers: int, processes: bool = False):
    """corrections.sweep.run.sweep() as the after-commit task runs it; with workers > 1, that many sweeps
    at once in threads (own connections), sharing the stale set through claimed key ranges (notices in
    the first only, as they would be drafted once). processes: the sweeps are forked processes instead."""
    if workers == 1:
        return sweep(fact_ids=changed, trigger=SweepRun.Trigger.MANUAL, page_size=page_size, progress=progress_hook)
    if processes:
        return _sweep_processes(changed, page_size, workers)
    import threading

    from django.db import connections

    reports, failures = [None] * workers, []

    def work(n):
        try:
            reports[n] = sweep(fact_ids=changed, trigger=SweepRun.Trigger.MANUAL, page_size=page_size,
                               progress=progress_hook, notices=n == 0)
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the main thread
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    total = reports[0]
    for other in reports[1:]:
        total.add(other)
    return total


def _sweep_processes(changed, page_size: int, workers: int):
    """_sweeps with each sweep a forked process (its own interpreter, so no shared GIL), as Celery's
    prefork workers (--concurrency 2 in compose.yaml) run two triggered sweeps. Connections are
    closed before the fork, so no child inherits the parent's socket. Each child sends back its
    report and when its first page committed (CLOCK_MONOTONIC is one clock for all)."""
    import multiprocessing

    from django.db import connections

    from corrections.sweep.report import SweepReport

    context = multiprocessing.get_context("fork")
    results = context.Queue()

    def run(n):
        first, outcome = [], None
        try:
            outcome = sweep(fact_ids=changed, trigger=SweepRun.Trigger.MANUAL, page_size=page_size,
                            progress=lambda _: first or first.append(time.monotonic()), notices=n == 0)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the parent
            outcome = repr(exc)
        finally:
            connections.close_all()
            results.put((outcome, first[0] if first else None))

    connections.close_all()
    children = [context.Process(target=run, args=(n,)) for n in range(workers)]
    for child in children:
        child.start()
    outcomes = [results.get() for _ in children]
    for child in children:
        child.join()
    total = SweepReport()
    for outcome, first in outcomes:
        if isinstance(outcome, str):
            raise RuntimeError(f"a sweep process failed: {outcome}")
        total.add(outcome)
        if first is not None and progress_hook is not None:
            progress_hook(None, first)
    return total


progress_hook = None


def _children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


def one_run(case: str, page_size: int, profile: bool = False, workers: int = 1, processes: bool = False) -> dict:
    from drugs.identity import vocabulary

    vocabulary()  # loaded once per process (~1.8 s); a worker has it from its first task, so not timed
    load_before = open("/proc/loadavg").read().split()[:3]
    before = max_ids()
    with auto_sweep_suppressed():
        t_change = time.monotonic()
        changed = change(case)
    t0 = time.monotonic()  # the change has committed
    figures = {"change_s": round(t0 - t_change, 3), "stale": count_stale(changed)}
    first_page = []

    def progress(n, when=None):  # a page committed; `when`: as a sweep process reports it afterwards
        first_page[:] = [min([(when or time.monotonic()) - t0, *first_page])]

    global progress_hook
    progress_hook = progress

    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    cpu0 = time.process_time() + _children_cpu()
    report = _sweeps(changed, page_size, workers, processes)
    elapsed = time.monotonic() - t0
    cpu = time.process_time() + _children_cpu() - cpu0
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(45)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(30)
    figures.update({
        "examined": report.examined, "corrected": report.corrected, "reaffirmed": report.reaffirmed,
        "notices": report.notices, "errors": report.errors, "already_handled": report.already_handled,
        "reasoner_calls": report.reasoner_calls, "pages": report.pages, "set_based_pages": report.set_pages,
        "drafts_written": Correction.objects.count(),
        "outbox_held": OutboxMessage.objects.filter(status="held").count(),
        "first_page_committed_s": round(first_page[0], 2) if first_page else None,
        "change_commit_to_all_drafts_s": round(elapsed, 2),
        "redecided_per_s": round(report.examined / elapsed, 1) if elapsed else None,
        "workers": workers, "processes": processes,
        "python_cpu_s": round(cpu, 2),  # this process's CPU during the sweep, all threads (and its sweep processes)
    })
    figures.update(copy_ceiling(before))
    figures["ceiling_per_s"] = round(figures["ceiling_redecisions"] / figures["ceiling_s"], 1)
    figures["ratio"] = round(figures["redecided_per_s"] / figures["ceiling_per_s"], 3)
    # For information: the same COPY with the real tables' (deferred) foreign keys, checked at commit
    # as the sweep's are. The ratio above is against the ceiling without them.
    figures.update(copy_ceiling(before, foreign_keys=True))
    figures["ceiling_fk_per_s"] = round(figures["ceiling_redecisions"] / figures["ceiling_fk_s"], 1)
    figures["ratio_fk"] = round(figures["redecided_per_s"] / figures["ceiling_fk_per_s"], 3)
    figures["loadavg_before"] = " ".join(load_before)
    figures["loadavg_after"] = " ".join(open("/proc/loadavg").read().split()[:3])
    return figures


def spread(values) -> str:
    values = sorted(values)
    return f"{values[0]} / {statistics.median(values)} / {values[-1]}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=100_000)
    parser.add_argument("--affected", type=int, default=10_000)
    parser.add_argument("--shared-inputs", action="store_true",
                        help="affected patients share inputs per phrasing (reasoner calls are shared)")
    parser.add_argument("--page-size", type=int, default=200)
    parser.add_argument("--case", choices=["escalation", "new-recall", "both"], default="both")
    parser.add_argument("--runs", type=int, default=3, help="runs per case, each on a fresh copy of the loaded data")
    parser.add_argument("--profile", action="store_true", help="cProfile the first run's sweep (to stderr)")
    parser.add_argument("--workers", default="1",
                        help="sweeps run at once for the same change (they share its claimed key ranges); a list "
                             "such as 1,2 measures each count on its own copy per run, interleaved, and the speedup")
    parser.add_argument("--processes", action="store_true",
                        help="with --workers N: the sweeps are forked processes, as Celery's prefork workers run them")
    parser.add_argument("--keep-last", action="store_true",
                        help="keep the last run's database (named <UNSAY_DB_NAME>_run) to EXPLAIN its queries")
    args = parser.parse_args()
    if not 1 <= args.affected <= args.decisions - 1:
        parser.error("--affected must be between 1 and --decisions - 1")

    base = connection.settings_dict["NAME"]
    work = f"{base}_run"
    summary = {}
    for case in (["escalation", "new-recall"] if args.case == "both" else [args.case]):
        began = time.monotonic()
        use_database(base)
        reset()
        records = ingest_real_facts(PROJECT_DIR / "var" / "bench-sweep-valsartan.json",
                                    without=RECALL if case == "new-recall" else None)
        setup = {"case": case, "real_records": records, "facts": Fact.objects.count(),
                 **load(args.decisions, args.affected, args.shared_inputs, case),
                 "page_size": args.page_size, "shared_inputs": args.shared_inputs,
                 "engine": connection.vendor, "reasoner": settings.UNSAY_REASONER}
        setup["setup_s"] = round(time.monotonic() - began, 1)
        print(json.dumps(setup, indent=2), flush=True)
        counts = [int(w) for w in str(args.workers).split(",")]
        by_workers = {w: [] for w in counts}
        for n in range(args.runs):
            for workers in counts:  # interleaved: each count meets the same load drift
                clone(base, work)
                last = n == args.runs - 1 and workers == counts[-1]
                try:
                    figures = one_run(case, args.page_size, profile=args.profile and n == 0, workers=workers,
                                      processes=args.processes)
                    if last:
                        print("\nPlan of one stale-set page after the sweep (0 rows left):")
                        print(explain_page(Fact.objects.order_by("-id").values_list("id", flat=True)[:1]))
                finally:
                    if args.keep_last and last:
                        print(f"\nKept the last run's database for inspection: {work}")
                    else:
                        drop(base, work)
                print(json.dumps({"case": case, "run": n + 1, **figures}), flush=True)
                by_workers[workers].append(figures)
        for workers, runs in by_workers.items():
            summary[f"{case}, {workers} worker(s)"] = {
                "runs": len(runs),
                "redecided_per_s min/median/max": spread([r["redecided_per_s"] for r in runs]),
                "change_commit_to_all_drafts_s min/median/max": spread(
                    [r["change_commit_to_all_drafts_s"] for r in runs]),
                "copy_ceiling_per_s min/median/max": spread([r["ceiling_per_s"] for r in runs]),
                "ratio min/median/max": spread([r["ratio"] for r in runs]),
                "copy_ceiling_with_fks_per_s min/median/max": spread([r["ceiling_fk_per_s"] for r in runs]),
                "ratio_to_ceiling_with_fks min/median/max": spread([r["ratio_fk"] for r in runs]),
                "python_cpu_s min/median/max": spread([r["python_cpu_s"] for r in runs]),
                "workers": workers, "processes": args.processes,
                "first_page_committed_s min/median/max": spread([r["first_page_committed_s"] for r in runs]),
                "set_based_pages/pages": f"{runs[-1]['set_based_pages']}/{runs[-1]['pages']}",
                "loadavg": [r["loadavg_before"] for r in runs],
            }
        if len(counts) > 1:  # each run's speedup over the first count, on copies made back to back
            base_runs = by_workers[counts[0]]
            for workers in counts[1:]:
                speedups = [r["redecided_per_s"] / b["redecided_per_s"] for r, b in zip(by_workers[workers], base_runs,
                                                                                        strict=True)]
                summary[f"{case}, speedup {counts[0]} -> {workers} worker(s) min/median/max"] = spread(
                    [round(x, 2) for x in speedups])
    print("\nSummary (" + describe_machine() + "):")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
