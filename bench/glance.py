"""What the recall at a glance adds to a recall page: its selectors (queries, time) and its three charts (time,
SVG size), on the database bench/review_pages.py builds (run it first; 8,000 / 500 synthetic patients on two real
recalls, 5% of the letters sent).

    UNSAY_DB_NAME=unsay_bench_worklist .venv/bin/python bench/review_pages.py --requests 15 --runs 1
    .venv/bin/python bench/glance.py [--repeats 15]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import setup_django  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    setup_django(db_name="unsay_bench_worklist", migrate=False)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from worklist import charts, glance, recall_pages

    for number in ("D-0315-2019", "D-0326-2019"):
        page = recall_pages.recall_page(number, per_page=50)
        reads, draws = [], []
        for _ in range(args.repeats):
            started = time.perf_counter()
            with CaptureQueriesContext(connection) as queries:
                g = glance.recall_glance(number, exposed=page.exposed, deadline=page.deadline)
            reads.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            svgs = [charts.funnel_svg(g.funnel, title="f", chart_id="f"),
                    charts.timeline_svg(g.patients, title="p", chart_id="p", deadline_day=g.deadline_day),
                    charts.timeline_svg(g.shelf, title="s", chart_id="s", deadline_day=g.deadline_day)]
            draws.append((time.perf_counter() - started) * 1000)
        print(f"{number}: {page.exposed} patients, {g.replies['notified']} notified; selectors median "
              f"{statistics.median(reads):.1f} ms ({len(queries)} queries), charts median "
              f"{statistics.median(draws):.1f} ms, SVG {sum(map(len, svgs)) / 1024:.1f} kB")


if __name__ == "__main__":
    main()
