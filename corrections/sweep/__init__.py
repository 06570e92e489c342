"""The sweep: from a changed fact (or dispensing) to the standing answers it touches, re-decided and
their corrections and notices drafted. One job per module, in the order a sweep meets them:

    run         the run loop (sweep(), the class Sweep), its run row and lock; dead runs; has_work
    claims      the key ranges of the stale set that sweeps on any machine claim and share
    staleness   the stale set: one query (Scope: what changed)
    stale_page  one page of it, locked and read: decisions, reasons (facts), pending drafts
    pages       the set-based page: plan_page (decided in memory), write_page (COPY)
    groups      decisions the rules cannot tell apart, decided once per group (PageDecider)
    one_by_one  the per-decision path, written through the ORM (same rows)
    change      what changed under one decision: trigger, dedupe token, letter fact, match class
    decider     SharedDecider: ask.services.decide shared between identical inputs
    notices     the notice pass after the pages: one reviewed letter per patient and recall
    report      SweepReport and the run row's running totals
    faults      fault injection for the crash-replay tests
"""
