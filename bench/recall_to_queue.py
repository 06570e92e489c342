"""Recall to review queue, end to end at national scale: a real new recall arrives and every affected
patient's correction draft reaches the pharmacists' queue.

    .venv/bin/python bench/recall_to_queue.py [--patients 200000] [--decisions 1000000] [--affected 100000]
        [--runs 3] [--warmup 1] [--keep] [--sweep celery|inline] [--concurrency 2] [--profile] [--db-name NAME]

The world (bench/_scale.py): synthetic patients (labelled synthetic) holding real products and lots;
the 2021-04-28 openFDA bulk file's records of those drugs ingested as the facts believed before; one
standing decision per (patient, product held), bulk-loaded with COPY from real ask decisions. Then the
real record D-0809-2021 (varenicline, six lots; in the 2023 bulk part, absent from the 2021 file)
arrives through recalls.services.ingest_file, the function `manage.py ingest_recalls --file` runs.

--sweep celery (default) runs the sweep as production does: the ingest's after-commit signal queues
corrections.tasks.sweep_facts on Redis (REDIS_URL, required) and a Celery worker started by this bench
(`celery -A unsay_site worker --concurrency N`, prefork, as compose.yaml runs it) takes it, queueing its
helpers (UNSAY_SWEEP_WORKERS) for the other pool process. --sweep inline calls the same task function
in this process (no broker; UNSAY_SWEEP_WORKERS=1), which is what --profile profiles.

An uncounted warm-up run comes first (--warmup). Per run: seconds from ingest start to the last draft
of the recall committed (Correction.created of its last draft; the drafts are the review queue's
pending rows for that recall), the split (ingest, queue wait, sweep), re-decisions/s, rows written per
re-decision (read-set member rows among them; how many new decisions' dispensing inputs equal those of
the decision they replaced), the floor in the same run (bench/_scale.copy_floor: a COPY of one decision
row, one draft row and one audit link per affected patient plus the UPDATE that supersedes their old
decisions, into unlogged scratch tables; and into logged ones) and the ratio floor seconds / end-to-end
seconds: the rows any design keeping per-patient provenance and a reviewed draft must write, so writing
fewer rows shows. Beside it the older reference, the COPY ceiling of the very rows the sweep wrote
(bench/_scale.copy_ceiling, unlogged and logged: bench/sweep.py's reference), peak RSS of every process (VmHWM, reset
at the run's start: this bench, the worker's main process and each pool process), the CPU-seconds each of them and the
whole machine spent (the rest is the database server's), load average, affected patients and
drafts, and the check that every affected patient has exactly one draft and no other patient has any.
Then min / median / max over the runs, and the goal.

The world is built in its own database (default unsay_bench_r2q_<patients>_<decisions>_<affected>);
between runs only what a run wrote is undone (_scale.reset_to: rows past the build's ids deleted,
superseded decisions standing again, counts checked). --keep reuses a database built by an earlier
invocation with the same sizes instead of building it again. Raw output: bench/results/.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROJECT_DIR, describe_machine, setup_django  # noqa: E402

RESULTS = PROJECT_DIR / "bench" / "results"
GOAL = {"affected": 100_000, "seconds": 20.0, "cores": 2, "ratio": 0.5, "rss_mb": 1024, "members": 0.1}
GOAL_LINE = ("Goal: 100,000 affected patients from ingest start to last draft in <= 20 s (median) on 2 cores, "
             "ratio (floor seconds / actual seconds) >= 0.5, peak RSS <= 1 GB per process, "
             "<= 0.1 read-set member rows per re-decision")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patients", type=int, default=200_000)
    parser.add_argument("--decisions", type=int, default=1_000_000, help="standing decisions (one per product held)")
    parser.add_argument("--affected", type=int, default=100_000, help="patients holding a lot of the new recall")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1,
                        help="uncounted runs first (a production worker has imported and loaded everything "
                             "before a recall arrives; a fresh pool process spends seconds on that)")
    parser.add_argument("--keep", action="store_true",
                        help="reuse the database an earlier invocation built with the same sizes")
    parser.add_argument("--same-fill-time", action="store_true",
                        help="every fill of a product at one instant (default: each fill its own time), so "
                             "the sweep can share reasoner calls: prices the reasoner's share of the time")
    parser.add_argument("--sweep", choices=["celery", "inline"], default="celery")
    parser.add_argument("--concurrency", type=int, default=2, help="pool processes of the Celery worker")
    parser.add_argument("--profile", action="store_true", help="with --sweep inline: cProfile the sweep (to stderr)")
    parser.add_argument("--db-name", help="database to build the world in")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the sweeps of one run")
    parser.add_argument("--out", help="raw output file (default bench/results/recall_to_queue-<time>.json)")
    return parser.parse_args(argv)


# --- processes and their peak memory -----------------------------------------------------------------

def _status(pid: int) -> dict:
    found = {}
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    found[line.split(":")[0]] = int(line.split()[1]) // 1024  # kB -> MB
    except OSError:
        pass
    return found


def _reset_peak(pid: int) -> None:
    """VmHWM starts again from the current RSS (Linux: 5 > /proc/pid/clear_refs)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU-seconds a process has used so far (None: it is gone)."""
    import psutil

    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system


def machine_busy_seconds() -> float:
    """CPU-seconds every core of the machine has spent busy so far (all but idle, I/O wait and steal)."""
    import psutil

    times = psutil.cpu_times()
    return sum(getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq"))


class Meter:
    """Samples every process's peak RSS and the 1-minute load while a run goes on, and counts the
    CPU-seconds each process and the whole machine spent: what the named processes did not spend is
    the database server's (and anything else running), which says whether Python or the server is
    the larger share of a run."""

    def __init__(self, processes: dict):
        self.processes = processes  # role -> pid
        self.peak_mb = {}
        self.load_max = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        for pid in self.processes.values():
            _reset_peak(pid)
        self.load_before = os.getloadavg()
        self._cpu_before = {role: _cpu_seconds(pid) for role, pid in self.processes.items()}
        self._busy_before = machine_busy_seconds()
        self._thread.start()
        return self

    def cpu_seconds(self) -> dict:
        """role -> CPU-seconds during the run, and what the rest of the machine spent."""
        spent = {}
        for role, before in self._cpu_before.items():
            after = _cpu_seconds(self.processes[role])
            if before is not None and after is not None:
                spent[role] = round(after - before, 2)
        busy = machine_busy_seconds() - self._busy_before
        spent["database server and the rest of the machine"] = round(busy - sum(spent.values()), 2)
        spent["machine"] = round(busy, 2)
        return spent

    def _sample(self):
        for role, pid in self.processes.items():
            peak = _status(pid).get("VmHWM")
            if peak is not None:
                self.peak_mb[role] = max(self.peak_mb.get(role, 0), peak)
        self.load_max = max(self.load_max, os.getloadavg()[0])

    def _loop(self):
        while not self._stop.wait(0.25):
            self._sample()

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()
        self.load_after = os.getloadavg()
        self.cpu_s = self.cpu_seconds()


class Worker:
    """A Celery worker as compose.yaml runs it (prefork, --concurrency N), on this bench's database and
    Redis db; its log goes to bench/results/."""

    def __init__(self, concurrency: int, log_path: Path):
        self.concurrency = concurrency
        self.name = f"recall-to-queue-{os.getpid()}@bench"
        self.log = open(log_path, "a")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "unsay_site", "worker", "-l", "warning", "--concurrency",
             str(concurrency), "-n", self.name, "--without-mingle", "--without-gossip"],
            cwd=PROJECT_DIR, env=dict(os.environ), stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 120) -> None:
        import psutil

        from unsay_site.celery import app

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the Celery worker exited with {self.process.returncode}; see {self.log.name}")
            children = psutil.Process(self.process.pid).children()
            if len(children) >= self.concurrency and app.control.ping(destination=[self.name], timeout=1):
                return
            time.sleep(0.5)
        raise RuntimeError(f"the Celery worker did not answer within {timeout:.0f}s; see {self.log.name}")

    def processes(self) -> dict:
        import psutil

        roles = {"worker main": self.process.pid}
        for n, child in enumerate(sorted(psutil.Process(self.process.pid).children(), key=lambda c: c.pid), 1):
            roles[f"worker pool {n}"] = child.pid
        return roles

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # warm shutdown: nothing is running by now
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


# --- one run --------------------------------------------------------------------------------------------

def _database_admin():
    import psycopg
    from django.db import connection

    params = dict(connection.get_connection_params())
    return psycopg.connect(**{k: v for k, v in params.items() if k in ("user", "password", "host", "port", "sslmode")},
                           dbname="postgres", autocommit=True)


def recreate_database(name: str) -> None:
    from django.db import connection

    connection.ensure_connection()  # starts the embedded server when it is not running
    connection.close()
    with _database_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')


def build(args, log) -> dict:
    """A fresh database, migrated; the before facts ingested; the world COPY-loaded; its state saved."""
    import _scale
    from django.core.management import call_command
    from django.db import connection

    from corrections.triggers import auto_sweep_suppressed
    from recalls.services import ingest_file

    began = time.monotonic()
    recreate_database(connection.settings_dict["NAME"])
    call_command("migrate", verbosity=0)
    recalled, others = _scale.products()
    _scale.check_no_near_lot_overlap(recalled, others)
    document, records = _scale.before_document({recalled.drug, *(p.drug for p in others)})
    before_path = PROJECT_DIR / "var" / "bench-recall-to-queue-before.json"
    before_path.parent.mkdir(exist_ok=True)
    before_path.write_text(json.dumps(document))
    with auto_sweep_suppressed():
        run = ingest_file(before_path)
    log(f"  before: {records} real 2021 records ingested ({run.new_facts} facts) in {time.monotonic() - began:.1f}s")
    world = _scale.World(args.patients, args.decisions, args.affected, recalled, others,
                         same_fill_time=args.same_fill_time)
    figures = _scale.load(world, log=log)
    vacuum_began = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE)")
    figures["vacuum_s"] = round(time.monotonic() - vacuum_began, 1)
    snapshot = _scale.snapshot()
    sizes = {"patients": args.patients, "decisions": args.decisions, "affected": args.affected,
             "same_fill_time": args.same_fill_time}
    figures.update({"before_records": records, "facts": snapshot["believed_facts"],
                    "build_s": round(time.monotonic() - began, 1)})
    _scale.save_state({"sizes": sizes, "build": figures, "snapshot": snapshot, "dirty": False})
    return figures


def _recall_drafts_by_patient(recall: str) -> dict:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT patient_id, COUNT(*) FROM corrections_correction WHERE recall_number = %s "
                       "GROUP BY patient_id", [recall])
        return dict(cursor.fetchall())


def check_drafts(world, recall: str) -> dict:
    """Every affected patient exactly one draft of this recall; no other patient any."""
    drafts = _recall_drafts_by_patient(recall)
    affected = [pid for pid in range(1, world.patients + 1) if world.is_affected(pid)]
    return {
        "affected_patients": len(affected),
        "affected_with_one_draft": sum(1 for pid in affected if drafts.get(pid) == 1),
        "affected_without_draft": sum(1 for pid in affected if pid not in drafts),
        "affected_with_several_drafts": sum(1 for pid in affected if drafts.get(pid, 0) > 1),
        "unaffected_with_a_draft": sum(1 for pid in drafts if not world.is_affected(pid)),
    }


def wait_for_sweeps(since, expected_runs: int, timeout: float) -> list:
    """The triggered sweep and its helpers have all run: at least `expected_runs` sweep runs started
    since the ingest, none still running, nothing left on the queue."""
    import redis
    from django.conf import settings

    from corrections.models import SweepRun

    queue = redis.Redis.from_url(settings.REDIS_URL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = list(SweepRun.objects.filter(started__gte=since).order_by("id"))
        if (len(runs) >= expected_runs and all(r.status != SweepRun.Status.RUNNING for r in runs)
                and queue.llen("celery") == 0):
            return runs
        time.sleep(0.2)
    raise RuntimeError(f"the sweeps did not finish within {timeout:.0f}s")


class SqlTimes:
    """Django's execute wrapper: wall time per statement (its first 140 characters), for --profile."""

    def __init__(self):
        self.spent = {}

    def __call__(self, execute, sql, params, many, context):
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            key = " ".join(sql.split())[:140]
            calls, seconds = self.spent.get(key, (0, 0.0))
            self.spent[key] = (calls + 1, seconds + time.perf_counter() - began)

    def top(self, n: int = 15) -> list:
        ranked = sorted(self.spent.items(), key=lambda item: -item[1][1])[:n]
        return [{"seconds": round(seconds, 2), "calls": calls, "sql": sql} for sql, (calls, seconds) in ranked]


def one_run(n: int, args, world, built: dict, new_path: Path, worker: Worker | None, log) -> dict:
    import _scale
    from django.conf import settings
    from django.db import connection
    from django.db.models import Max
    from django.utils import timezone

    from corrections.models import Correction, SweepRun
    from corrections.sweep.run import page_size_default
    from corrections.tasks import sweep_facts
    from corrections.triggers import auto_sweep_suppressed
    from drugs.identity import vocabulary
    from memory.signals import facts_changed
    from recalls.services import ingest_file

    vocabulary()  # loaded once per process; a long-running worker has it, so it is not timed
    _scale.save_state({"dirty": True})
    changed = []

    def capture(sender=None, pairs=(), **kwargs):
        changed.extend(fact_id for pair in pairs for fact_id in pair if fact_id)

    facts_changed.connect(capture, weak=False, dispatch_uid="bench.recall_to_queue")
    processes = {"bench": os.getpid(), **(worker.processes() if worker else {})}
    profiler = None
    try:
        with Meter(processes) as meter:
            started_at = timezone.now()
            t0 = time.monotonic()
            if worker is None:
                with auto_sweep_suppressed():
                    ingest = ingest_file(new_path)
            else:
                ingest = ingest_file(new_path)  # its after-commit signal queues the sweep task
            ingested = time.monotonic()
            if worker is None:
                sql_times = SqlTimes()
                if args.profile and n == 1:
                    import cProfile

                    profiler = cProfile.Profile()
                    profiler.enable()
                with connection.execute_wrapper(sql_times):
                    summary = sweep_facts(sorted(set(changed)))  # the task's body, in this process
                if profiler is not None:
                    profiler.disable()
                runs = list(SweepRun.objects.filter(started__gte=started_at).order_by("id"))
            else:
                affected_decisions = args.affected  # one decision per affected patient rests on the recall
                expected = settings.UNSAY_SWEEP_WORKERS if affected_decisions > 2 * page_size_default() else 1
                runs = wait_for_sweeps(started_at, expected, args.timeout)
                summary = "; ".join(f"run {r.id} {r.status}" for r in runs)
            waited = time.monotonic()
    finally:
        facts_changed.disconnect(dispatch_uid="bench.recall_to_queue")
    drafts = Correction.objects.filter(recall_number=_scale.NEW_RECALL)
    last_draft = drafts.aggregate(last=Max("created"))["last"]
    e2e = (last_draft - started_at).total_seconds() if last_draft else float("nan")
    examined = sum(r.examined for r in runs)
    figures = {
        "run": n,
        "ingest_to_last_draft_s": round(e2e, 2),
        "ingest_s": round(ingested - t0, 2),
        "queue_wait_s": round((min(r.started for r in runs) - started_at).total_seconds() - (ingested - t0), 2)
        if runs else None,
        "sweep_runs": len(runs),
        "sweep_first_start_to_last_finish_s": round(
            (max(r.finished for r in runs) - min(r.started for r in runs)).total_seconds(), 2) if runs else None,
        "wall_until_all_sweeps_done_s": round(waited - t0, 2),
        "examined": examined, "corrected": sum(r.corrected for r in runs),
        "reaffirmed": sum(r.reaffirmed for r in runs), "notices": sum(r.notices for r in runs),
        "errors": sum(r.errors for r in runs), "pages": sum(r.pages for r in runs),
        "reasoner_calls": sum(r.reasoner_calls for r in runs),
        "redecisions_per_s": round(examined / e2e, 1) if e2e else None,
        "drafts_written": drafts.count(),
        "drafts_in_review_queue": Correction.objects.pending_review().filter(recall_number=_scale.NEW_RECALL).count(),
        "new_facts": ingest.new_facts,
        "sweep_summary": summary if isinstance(summary, str) else str(summary),
        **check_drafts(world, _scale.NEW_RECALL),
    }
    figures.update(_scale.rows_per_redecision(built["snapshot"]["max_id"]))
    figures.update(_scale.copy_floor(built["snapshot"]["max_id"]))
    figures["ratio_floor_to_actual"] = round(figures["floor_s"] / e2e, 3) if e2e else None
    figures["ratio_logged_floor_to_actual"] = round(figures["floor_logged_s"] / e2e, 3) if e2e else None
    ceiling_busy_before = machine_busy_seconds()
    figures.update(_scale.copy_ceiling(built["snapshot"]["max_id"]))
    figures["ceiling_machine_cpu_s"] = round(machine_busy_seconds() - ceiling_busy_before, 2)
    figures["ratio_ceiling_to_actual"] = round(figures["ceiling_s"] / e2e, 3) if e2e else None
    figures.update(_scale.logged_copy_ceiling(built["snapshot"]["max_id"]))
    figures["ratio_logged_ceiling_to_actual"] = round(figures["ceiling_logged_s"] / e2e, 3) if e2e else None
    sweep_s = figures["sweep_first_start_to_last_finish_s"]
    figures["ratio_ceiling_to_sweep"] = round(figures["ceiling_s"] / sweep_s, 3) if sweep_s else None
    if worker is None:
        figures["sql_seconds"] = round(sum(seconds for _calls, seconds in sql_times.spent.values()), 2)
        figures["sql_top"] = sql_times.top()
    figures["peak_rss_mb"] = dict(meter.peak_mb)
    figures["cpu_s"] = meter.cpu_s
    figures["bench_maxrss_mb_since_start"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    figures["loadavg_before"] = [round(x, 2) for x in meter.load_before]
    figures["loadavg_after"] = [round(x, 2) for x in meter.load_after]
    figures["load1_max_during"] = round(meter.load_max, 2)
    if profiler is not None:
        import pstats

        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(30)
        profile_path = RESULTS / f"recall_to_queue-profile-run{n}.pstats"
        profiler.dump_stats(str(profile_path))
        figures["profile"] = str(profile_path.relative_to(PROJECT_DIR))
    reset_began = time.monotonic()
    figures["reset"] = reset(built)
    figures["reset_s"] = round(time.monotonic() - reset_began, 1)
    return figures


def reset(built: dict) -> dict:
    import _scale
    from django.db import connection

    deleted = _scale.reset_to(built["snapshot"])
    with connection.cursor() as cursor:  # the run's dead rows gone, so every run starts alike
        cursor.execute("VACUUM (ANALYZE) " + ", ".join([*_scale.SWEEP_TABLES, "memory_fact", "corrections_sweeprun",
                                                        "recalls_recallrecord", "recalls_ingestrun"]))
    _scale.save_state({"dirty": False})
    return deleted


# --- the whole bench ------------------------------------------------------------------------------------

def spread(values) -> str:
    values = sorted(v for v in values if v is not None)
    if not values:
        return "n/a"
    median = statistics.median(values)
    return f"{values[0]} / {round(median, 3) if isinstance(median, float) else median} / {values[-1]}"


def code_version() -> str:
    """The commit measured: git's HEAD, or the name of an exported tree (git archive into a folder named
    after its commit, so that edits in a shared working tree cannot change the code mid-run)."""
    found = subprocess.run(["git", "-C", str(PROJECT_DIR), "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True)
    dirty = subprocess.run(["git", "-C", str(PROJECT_DIR), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    if found.returncode == 0:
        return found.stdout.strip() + (" with uncommitted changes in the tree" if dirty else "")
    return f"exported tree {PROJECT_DIR.name}"


def against_goal(runs: list, affected: int) -> dict:
    median_s = statistics.median(r["ingest_to_last_draft_s"] for r in runs)
    median_ratio = statistics.median(r["ratio_floor_to_actual"] for r in runs)
    logged_ratio = statistics.median(r["ratio_logged_floor_to_actual"] for r in runs)
    members = statistics.median(r["read_set_member_rows_per_redecision"] for r in runs)
    peak = max(v for r in runs for v in r["peak_rss_mb"].values())
    at_scale = affected >= GOAL["affected"]
    seconds_met = "met" if median_s <= GOAL["seconds"] else "not met"
    return {
        "seconds (median)": f"{median_s} s for {affected:,} affected (goal <= {GOAL['seconds']} s for "
                            f"{GOAL['affected']:,}): {seconds_met if at_scale else 'not at the goal scale'}",
        "ratio to the floor (median)": f"{median_ratio} (goal >= {GOAL['ratio']}): "
                                       f"{'met' if median_ratio >= GOAL['ratio'] else 'not met'}",
        "ratio to the logged floor (median)": f"{logged_ratio} (the same rows with WAL)",
        "read-set member rows per re-decision (median)": f"{members} (goal <= {GOAL['members']}): "
                                                         f"{'met' if members <= GOAL['members'] else 'not met'}",
        "peak RSS": f"{peak} MB, the largest process (goal <= {GOAL['rss_mb']} MB): "
                    f"{'met' if peak <= GOAL['rss_mb'] else 'not met'}",
        "cores": f"{os.cpu_count()} here (goal on {GOAL['cores']})",
    }


def main(argv=None):
    args = parse_args(argv)
    if args.sweep == "inline":
        os.environ.pop("REDIS_URL", None)  # Celery eager, nothing queued: the bench calls the task itself
        os.environ["UNSAY_SWEEP_WORKERS"] = "1"
    elif not os.environ.get("REDIS_URL"):
        sys.exit("--sweep celery needs REDIS_URL (a Redis db of its own, e.g. redis://127.0.0.1:6379/8)")
    db_name = args.db_name or (f"unsay_bench_r2q_{args.patients}_{args.decisions}_{args.affected}"
                               + ("_same_fill_time" if args.same_fill_time else ""))
    os.environ["UNSAY_DB_NAME"] = db_name
    if os.environ.get("DATABASE_URL"):  # the same server, this bench's own database (it is dropped and rebuilt)
        from urllib.parse import urlparse, urlunparse

        os.environ["DATABASE_URL"] = urlunparse(urlparse(os.environ["DATABASE_URL"])._replace(path="/" + db_name))
    setup_django(db_name=db_name, profile="test", migrate=False)

    import _scale
    from django.conf import settings

    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out_path = Path(args.out) if args.out else RESULTS / f"recall_to_queue-{stamp}.json"
    lines = []

    def log(text=""):
        print(text, flush=True)
        lines.append(text)

    log(GOAL_LINE)
    log(f"Sizes: {args.patients:,} patients, {args.decisions:,} decisions, {args.affected:,} affected; "
        f"{args.runs} run(s); sweep {args.sweep}"
        + (f" (worker --concurrency {args.concurrency}, UNSAY_SWEEP_WORKERS {os.environ.get('UNSAY_SWEEP_WORKERS', '')}"
           f"{'' if os.environ.get('UNSAY_SWEEP_WORKERS') else 'default'})" if args.sweep == "celery" else "")
        + f"; database {db_name}")
    sizes = {"patients": args.patients, "decisions": args.decisions, "affected": args.affected,
             "same_fill_time": args.same_fill_time}
    state = {}
    if args.keep:
        from django.db import connection

        try:
            connection.ensure_connection()
            state = _scale.load_state()
        except Exception:  # noqa: BLE001 - no such database yet: build it
            state = {}
    if {"same_fill_time": False, **state.get("sizes", {})} == sizes and "snapshot" in state:
        from django.core.management import call_command

        log(f"Reusing the world built earlier in {db_name} ({state['build']['build_s']}s to build).")
        if state.get("dirty"):
            log(f"  a run was left unfinished; undone: {reset(state)}")
        # The code may have moved on since the build: migrate, then take the world as it now is (a
        # migration's own rows, content types and permissions, are not a run's to undo).
        call_command("migrate", verbosity=0)
        _scale.save_state({"snapshot": _scale.snapshot()})
        state = _scale.load_state()
    else:
        log("Building the world ...")
        build(args, log)
        state = _scale.load_state()
    built = state
    log("Build: " + json.dumps(built["build"]))

    recalled, others = _scale.products()
    world = _scale.World(args.patients, args.decisions, args.affected, recalled, others,
                         same_fill_time=args.same_fill_time)
    meta, record = _scale.new_recall_record()
    new_path = PROJECT_DIR / "var" / "bench-recall-to-queue-new.json"
    new_path.parent.mkdir(exist_ok=True)
    new_path.write_text(json.dumps({"meta": meta, "results": [record]}))

    worker = None
    if args.sweep == "celery":
        from unsay_site.celery import app

        app.control.purge()
        worker = Worker(args.concurrency, RESULTS / f"recall_to_queue-worker-{stamp}.log")
    runs, warmups = [], []
    try:
        if worker:
            worker.wait_ready()
        for n in range(1, args.warmup + 1):
            figures = one_run(-n, args, world, built, new_path, worker, log)
            log(f"warm-up {n} (not counted): {figures['ingest_to_last_draft_s']} s ingest to last draft")
            warmups.append(figures)
        for n in range(1, args.runs + 1):
            figures = one_run(n, args, world, built, new_path, worker, log)
            log(json.dumps(figures))
            runs.append(figures)
    finally:
        if worker:
            worker.stop()

    if not runs:  # --runs 0: build (or reuse) the world for later runs with --keep, and measure nothing
        log(f"\nNo counted runs (--runs {args.runs}): the world is in {db_name}; run again with --keep to measure.")
        out_path.write_text(json.dumps({"sizes": sizes, "sweep": args.sweep, "build": built["build"], "runs": [],
                                        "warmups": warmups, "summary": None, "log": lines}, indent=2, default=str))
        log(f"Raw output: {out_path}")
        return None
    roles = sorted({role for r in runs for role in r["peak_rss_mb"]})
    summary = {
        "machine": describe_machine(),
        "code": code_version(),
        "runs": len(runs),
        "affected_patients": runs[-1]["affected_patients"],
        "drafts_written min/median/max": spread([r["drafts_written"] for r in runs]),
        "ingest_to_last_draft_s min/median/max": spread([r["ingest_to_last_draft_s"] for r in runs]),
        "redecisions_per_s min/median/max": spread([r["redecisions_per_s"] for r in runs]),
        "floor_s min/median/max": spread([r["floor_s"] for r in runs]),
        "ratio_floor_to_actual min/median/max": spread([r["ratio_floor_to_actual"] for r in runs]),
        "floor_logged_s min/median/max": spread([r["floor_logged_s"] for r in runs]),
        "ratio_logged_floor_to_actual min/median/max": spread([r["ratio_logged_floor_to_actual"] for r in runs]),
        "read_set_member_rows_per_redecision min/median/max": spread(
            [r["read_set_member_rows_per_redecision"] for r in runs]),
        "memory_decisioninput_rows_per_redecision min/median/max": spread(
            [r["memory_decisioninput_rows_per_redecision"] for r in runs]),
        "inputs_same_as_replaced_share min/median/max": spread([r["inputs_same_as_replaced_share"] for r in runs]),
        "copy_ceiling_s min/median/max": spread([r["ceiling_s"] for r in runs]),
        "ratio_ceiling_to_actual min/median/max": spread([r["ratio_ceiling_to_actual"] for r in runs]),
        "ratio_ceiling_to_sweep min/median/max": spread([r["ratio_ceiling_to_sweep"] for r in runs]),
        "copy_ceiling_logged_s min/median/max": spread([r["ceiling_logged_s"] for r in runs]),
        "ratio_logged_ceiling_to_actual min/median/max": spread([r["ratio_logged_ceiling_to_actual"] for r in runs]),
        **{f"peak_rss_mb {role} min/median/max": spread([r["peak_rss_mb"].get(role) for r in runs]) for role in roles},
        **{f"cpu_s {role} min/median/max": spread([r["cpu_s"].get(role) for r in runs])
           for role in sorted({role for r in runs for role in r["cpu_s"]})},
        "ceiling_machine_cpu_s min/median/max": spread([r["ceiling_machine_cpu_s"] for r in runs]),
        "load1_max_during min/median/max": spread([r["load1_max_during"] for r in runs]),
        "every affected patient exactly one draft, no other patient any": all(
            r["affected_with_one_draft"] == r["affected_patients"] and r["unaffected_with_a_draft"] == 0
            for r in runs),
        "sweep": args.sweep, "concurrency": args.concurrency if worker else None,
        "sweep_workers": settings.UNSAY_SWEEP_WORKERS, "page_size": settings.UNSAY_SWEEP_PAGE_SIZE,
    }
    summary["against the goal"] = against_goal(runs, args.affected)
    log("\nSummary:")
    log(json.dumps(summary, indent=2))
    out_path.write_text(json.dumps({"sizes": sizes, "sweep": args.sweep, "build": built["build"], "runs": runs,
                                    "warmups": warmups, "summary": summary, "log": lines}, indent=2, default=str))
    log(f"Raw output: {out_path}")
    return summary


if __name__ == "__main__":
    main()
