"""How one fact walks through the code: from a new recall's ingestion to the patient's message leaving.

    .venv/bin/python bench/fact_walk.py                  # set-based sweep pages (the default)
    .venv/bin/python bench/fact_walk.py --per-decision   # the sweep's per-decision path (same rows)

The house's aim: following a fact from ingestion to the outbox enters each product file once and never
climbs back up a layer (.importlinter: core < drugs < memory < recalls | patients < ask | shelf <
corrections < outbox < worklist < replies < privacy < api < demo < unsay_site). This traces it, it does not time it.

The world (its own database, UNSAY_DB_NAME=unsay_bench_walk, emptied first): the 2021 bulk file's
varenicline records ingested, three synthetic patients holding lots of the real D-0809-2021 (varenicline,
in the 2023 file, absent from 2021) who asked "is my varenicline safe?". Then, traced stage by stage with
sys.setprofile, only frames in product files (the apps; not tests/, bench/, migrations, libraries):

    ingest     recalls.services.ingest_file of the new record (sweep triggers suppressed: the sweep is
               the next stage, so the walk is not split across a broker)
    sweep      corrections.sweep.run.sweep()
    review     corrections.review.approve of one draft, by a pharmacist, and what its commit sets off:
               the outbox dispatch task (Celery eager here, as a worker would run it), email to files

Figures per stage and for the whole walk:

    files      distinct product files a call entered
    entries    calls from one product file into another (a call within a file is not counted; the
               caller is the nearest product frame below, so a call that comes back through Django or
               a library counts as coming from the product code that called the library)
    re-entries entries into a file that was entered before in the walk, has no frame on the stack at
               that moment (it was left), and is entered again
    climbs     entries whose callee's app sits in a higher layer than its caller's (possible only
               through callbacks: on_commit hooks, signals, registries, Celery tasks run eagerly, a
               method or property of an object the caller was handed), but for those handed down
    handed down
               the entries into a higher layer whose callee is a function the caller was handed: the
               function itself (or a bound method or functools.partial of it) is the value of one of
               the calling frame's arguments (*args and **kwargs included) or of a variable it closes
               over (core.retry.run_in_transaction(fn)'s inner attempt() calling fn). A higher-order
               function calls what it is given by design, and the code that gave it is the higher
               layer's, so these are counted apart. Anything else the lower layer reaches stays a
               climb: a method or property of an argument (it names the higher layer's code), a
               receiver registered for a signal or an on_commit hook, a logging filter or a database
               backend installed by settings, a task run by name

Raw output (every re-entry, climb and call handed down, by function) goes to
bench/results/fact_walk-<time>.json.
"""

import argparse
import functools
import inspect
import json
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROJECT_DIR, setup_django  # noqa: E402

QUESTION = "Is my varenicline safe?"


class Walk:
    """sys.setprofile hook: product-file transitions of one stage after another."""

    def __init__(self):
        from core.layers import layer_ranks

        self.ranks = layer_ranks()
        self._files: dict[str, str | None] = {}
        self.entered: set[str] = set()  # over the whole walk
        self.stages: dict[str, dict] = {}
        self.stage = None

    def product_file(self, filename: str) -> str | None:
        found = self._files.get(filename, "")
        if found != "":
            return found
        path = Path(filename)
        relative = None
        if path.is_absolute() and path.is_relative_to(PROJECT_DIR):
            parts = path.relative_to(PROJECT_DIR).parts
            if parts and parts[0] in self.ranks and "migrations" not in parts:
                relative = "/".join(parts)
        self._files[filename] = relative
        return relative

    def _caller(self, frame):
        frame = frame.f_back
        while frame is not None:
            found = self.product_file(frame.f_code.co_filename)
            if found:
                return found, frame
            frame = frame.f_back
        return None, None

    def _on_stack(self, frame, wanted: str) -> bool:
        while frame is not None:
            if self.product_file(frame.f_code.co_filename) == wanted:
                return True
            frame = frame.f_back
        return False

    @staticmethod
    def handed_down(code, frame) -> bool:
        """Is `code` a function held by one of `frame`'s arguments or by a variable it closes over?"""
        caller = frame.f_code
        count = caller.co_argcount + caller.co_kwonlyargcount
        count += bool(caller.co_flags & inspect.CO_VARARGS) + bool(caller.co_flags & inspect.CO_VARKEYWORDS)
        local = frame.f_locals
        for name in caller.co_varnames[:count] + caller.co_freevars:
            value = local.get(name)
            values = value.values() if isinstance(value, dict) else value if isinstance(value, tuple) else (value,)
            for held in values:
                if isinstance(held, functools.partial):
                    held = held.func
                if getattr(getattr(held, "__func__", held), "__code__", None) is code:
                    return True
        return False

    def __call__(self, frame, event, arg):
        if event != "call":
            return
        callee = self.product_file(frame.f_code.co_filename)
        if callee is None:
            return
        caller, caller_frame = self._caller(frame)
        if caller == callee:
            return
        stage = self.stages[self.stage]
        stage["files"].add(callee)
        stage["entries"] += 1
        function = f"{callee}:{frame.f_code.co_name}"
        if callee in self.entered and not self._on_stack(frame.f_back, callee):
            stage["re_entries"][callee] += 1
            source = f"{caller}:{caller_frame.f_code.co_name}" if caller else "(outside the product)"
            stage["re_entry_calls"][f"{source} -> {function}"] += 1
            stage["re_entry_pairs"][f"{caller or '(outside the product)'} -> {callee}"] += 1
        self.entered.add(callee)
        if caller is not None:
            up, down = self.ranks[callee.split("/")[0]], self.ranks[caller.split("/")[0]]
            if up > down:
                kind = "handed_down" if self.handed_down(frame.f_code, caller_frame) else "climbs"
                stage[kind][f"{caller}:{caller_frame.f_code.co_name} -> {function}"] += 1
        if len(stage["order"]) < 400 and callee not in stage["order"]:
            stage["order"].append(callee)

    def run(self, stage: str, action):
        self.stage = stage
        self.stages[stage] = {"files": set(), "entries": 0, "re_entries": Counter(), "re_entry_calls": Counter(),
                              "re_entry_pairs": Counter(), "climbs": Counter(), "handed_down": Counter(), "order": []}
        sys.setprofile(self)
        try:
            return action()
        finally:
            sys.setprofile(None)


def build_world(log):
    import _scale
    from django.core.management import call_command
    from django.utils import timezone

    from ask.services import ask
    from corrections.triggers import auto_sweep_suppressed
    from patients.models import DispensingRecord, Patient
    from recalls.services import ingest_file

    call_command("flush", interactive=False, verbosity=0)
    recalled, _others = _scale.products()
    before, count = _scale.before_document({recalled.drug})
    var = PROJECT_DIR / "var"
    var.mkdir(exist_ok=True)
    before_path, new_path = var / "bench-fact-walk-before.json", var / "bench-fact-walk-new.json"
    before_path.write_text(json.dumps(before))
    meta, record = _scale.new_recall_record()
    new_path.write_text(json.dumps({"meta": meta, "results": [record]}))
    with auto_sweep_suppressed():
        ingest_file(before_path)
        for n, (ndc, _product, lot, _near) in enumerate(recalled.pairs[:3]):
            patient = Patient.objects.create(region="aws-us-east-1", display_name=f"Synthetic walk {n}",
                                             external_ref=f"SYN-WALK-{n}", email=f"walk{n}@example.com",
                                             preferred_channel="email", synthetic=True)
            DispensingRecord.objects.create(patient=patient, drug=recalled.drug_text, ndc=ndc, lot=lot,
                                            synthetic=True, dispensed_at=timezone.now() - timedelta(days=30))
            ask(patient, QUESTION)
    log(f"World: {count} varenicline records of the 2021 file, 3 synthetic patients holding D-0809-2021 lots.")
    return new_path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-decision", action="store_true", help="the sweep's per-decision path")
    parser.add_argument("--out", help="raw output file (default bench/results/fact_walk-<time>.json)")
    args = parser.parse_args(argv)
    env = {"UNSAY_SWEEP_SET_BASED": "0"} if args.per_decision else {}
    setup_django(db_name="unsay_bench_walk", UNSAY_EMBEDDINGS="hashing", UNSAY_CELERY_EAGER="1",
                 UNSAY_SWEEP_ON_SUPERSESSION="0", **env)
    from django.contrib.auth import get_user_model

    from corrections.models import Correction, OutboxMessage
    from corrections.review import approve
    from corrections.sweep.run import sweep
    from corrections.triggers import auto_sweep_suppressed
    from recalls.services import ingest_file

    new_path = build_world(print)
    pharmacist = get_user_model().objects.create_superuser("walk-pharmacist", "walk@example.com", "x" * 16)
    walk = Walk()
    with auto_sweep_suppressed():
        walk.run("ingest", lambda: ingest_file(new_path))
    report = walk.run("sweep", sweep)
    draft = Correction.objects.filter(status=Correction.Status.DRAFT).order_by("id").first()
    assert draft is not None, f"the sweep drafted nothing: {report}"
    walk.run("review", lambda: approve(draft.id, user=pharmacist))
    sent = OutboxMessage.objects.filter(status=OutboxMessage.Status.SENT).count()
    assert sent == 1, f"the approved message was not sent by the walk ({sent} sent)"

    path = "per-decision" if args.per_decision else "set-based"
    print(f"\nFact walk, sweep {path} (files / entries / re-entries / climbs / handed down):")
    total_files, raw = set(), {}
    for stage, figures in walk.stages.items():
        total_files |= figures["files"]
        print(f"  {stage:9s} {len(figures['files']):3d} / {figures['entries']:6d} / "
              f"{sum(figures['re_entries'].values()):5d} / {sum(figures['climbs'].values()):4d} / "
              f"{sum(figures['handed_down'].values()):4d}")
        raw[stage] = {"files": sorted(figures["files"]), "entries": figures["entries"],
                      "re_entries": dict(figures["re_entries"].most_common()),
                      "re_entry_pairs": dict(figures["re_entry_pairs"].most_common()),
                      "re_entry_calls": dict(figures["re_entry_calls"].most_common(60)),
                      "climbs": dict(figures["climbs"].most_common()),
                      "handed_down": dict(figures["handed_down"].most_common()), "first_entered": figures["order"]}

    def whole(name):
        return sum((Counter(s[name]) for s in walk.stages.values()), Counter())

    re_entries, pairs = whole("re_entries"), whole("re_entry_pairs")
    climbs, handed = whole("climbs"), whole("handed_down")
    print(f"  whole     {len(total_files):3d} / {sum(s['entries'] for s in walk.stages.values()):6d} / "
          f"{sum(re_entries.values()):5d} / {sum(climbs.values()):4d} / {sum(handed.values()):4d}")
    print("\nMost re-entered files:", ", ".join(f"{f} {n}" for f, n in re_entries.most_common(8)))
    print(f"Most re-entries by file pair ({len(pairs)} pairs):", ", ".join(f"{p} {n}" for p, n in pairs.most_common(6)))
    for title, found in (("Climbs", climbs), ("Handed down", handed)):
        print(f"{title} (caller -> callee, count):")
        for pair, n in found.most_common(12):
            print(f"  {n:5d}  {pair}")
    out = Path(args.out) if args.out else PROJECT_DIR / "bench" / "results" / \
        f"fact_walk-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"sweep": path, "stages": raw}, indent=1))
    print(f"Raw output: {out}")


if __name__ == "__main__":
    main()
