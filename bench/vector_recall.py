"""How often the HNSW-indexed top-8 agrees with an exact scan (recall@8), on real recall statements
embedded with the real local MiniLM model, before and after many versions are retracted.

    .venv/bin/python bench/vector_recall.py                 # 3,000 statements, 200 held-out queries
    .venv/bin/python bench/vector_recall.py --all           # every unique statement of the 12.5k records
    .venv/bin/python bench/vector_recall.py --index ivfflat-after,40 --ef-search 4,8,12   # IVFFlat, probes

IVFFlat (for the cost of a fact write: bench/hnsw_insert.py): `--index ivfflat,LISTS` builds
it on the empty table, as a migration would, so its lists are trained on nothing; `ivfflat-after,LISTS`
builds it after the corpus is loaded, as a rebuild would. --ef-search then gives ivfflat.probes values
(iterative scan relaxed_order, as pgvector allows for IVFFlat).

Corpus: reason_for_recall + product_description of tests/fixtures/openfda/drug-enforcement-2021-04-28.json.zip
(duplicates removed); queries are held-out statements from the same file, never in the table.
Facts are bulk-inserted into a bench database of their own (unsay_bench_vectors) as version 1 of
`bench:<recall_number>:<n>`; embeddings are cached under var/bench-cache/ so reruns skip the model.
Phases: (1) all believed; (2) half the keys re-versioned (v1 retracted, v2 believed, text amended);
(3) then 90% of believed keys retracted outright. No VACUUM in between: dead index entries stay, the
worst case for a filtered index scan.
"""

import argparse
import hashlib
import json
import random
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROJECT_DIR, describe_machine, percentile, setup_django  # noqa: E402

FIXTURE = PROJECT_DIR / "tests" / "fixtures" / "openfda" / "drug-enforcement-2021-04-28.json.zip"
CACHE = PROJECT_DIR / "var" / "bench-cache"


def load_statements():
    with zipfile.ZipFile(FIXTURE) as archive:
        records = json.loads(archive.read(archive.namelist()[0]))["results"]
    seen, out = set(), []
    for r in records:
        text = f"{r.get('reason_for_recall', '').strip()} {r.get('product_description', '').strip()}".strip()
        if text and text not in seen:
            seen.add(text)
            out.append((r["recall_number"], text))
    return out


def embed_cached(provider, texts, label):
    import numpy as np

    digest = hashlib.sha256(("\n".join(texts) + provider.name).encode()).hexdigest()[:16]
    path = CACHE / f"{label}-{len(texts)}-{digest}.npy"
    if path.exists():
        return np.load(path).tolist()
    CACHE.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    vectors = []
    for i in range(0, len(texts), 256):
        vectors.extend(provider.embed(texts[i:i + 256]))
    print(f"  embedded {len(texts)} {label} texts in {time.perf_counter() - started:.1f}s")
    np.save(path, np.array(vectors, dtype="float32"))
    return vectors


PLANNER = {
    "auto": [],
    "exact": ["SET LOCAL enable_indexscan = off"],
    # Steer the planner onto the HNSW index even where an exact sort of few rows is cheaper.
    "forced": ["SET LOCAL enable_sort = off", "SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off"],
}


def halfvec_order_neighbours(vector, k, *, exclude_ids=()):
    """semantic_neighbours ordered by `embedding::halfvec(n)`, the expression a halfvec build
    (--index halfvec,m,ef_construction) indexes, so the planner can use it; `distance` stays the
    full-precision distance. retrieve() itself orders by the vector (the build memory 0006 made)."""
    from django.db.models.functions import Cast
    from pgvector import HalfVector
    from pgvector.django import CosineDistance, HalfVectorField

    from memory.models import Fact

    qs = Fact.objects.believed().exclude(id__in=list(exclude_ids)).defer("embedding")
    qs = qs.annotate(distance=CosineDistance("embedding", vector),
                     index_distance=CosineDistance(Cast("embedding", HalfVectorField(dimensions=len(vector))),
                                                   HalfVector(vector)))
    return qs.order_by("index_distance")[:k]


NEIGHBOURS = {}


def top_k(vector, k, *, mode, ef_search=None):
    from django.db import connection, transaction

    from memory.embeddings import to_sql_vector

    semantic_neighbours = NEIGHBOURS["fn"]

    if mode == "exact":
        # The reference: every believed row, full-precision cosine distance, no index (whatever
        # expression the index and retrieve() use, e.g. the halfvec cast).
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL enable_indexscan = off")
                started = time.perf_counter()
                cursor.execute("SELECT id, embedding <=> %s::vector AS d FROM memory_fact WHERE retracted_at IS NULL"
                               " ORDER BY d, id LIMIT %s", [to_sql_vector(vector), k])
                return cursor.fetchall(), time.perf_counter() - started, False
    with transaction.atomic():
        with connection.cursor() as cursor:
            for statement in PLANNER[mode]:
                cursor.execute(statement)
            if ef_search and IVFFLAT:
                cursor.execute(f"SET LOCAL ivfflat.probes = {int(ef_search)}")
                cursor.execute("SET LOCAL ivfflat.iterative_scan = relaxed_order")
            elif ef_search:
                cursor.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}")
        plan = semantic_neighbours(vector, k).explain()
        started = time.perf_counter()
        hits = [(f.id, f.distance) for f in semantic_neighbours(vector, k)]
        return hits, time.perf_counter() - started, "fact_believed_embedding_hnsw" in plan


IVFFLAT = {}


def measure(phase, queries, k, *, ef_values, mode="auto"):
    for ef in ef_values:
        _measure(phase, queries, k, ef, mode)


def _measure(phase, queries, k, ef, mode):
    from memory.models import Fact

    recalls, tie_recalls, short, t_index, t_exact, hnsw_plans = [], [], 0, [], [], 0
    for vector in queries:
        indexed, ti, used = top_k(vector, k, mode=mode, ef_search=ef)
        hnsw_plans += used
        exact, te, _ = top_k(vector, k, mode="exact")
        t_index.append(ti)
        t_exact.append(te)
        short += len(indexed) < min(k, len(exact))
        recalls.append(len({i for i, _ in indexed} & {i for i, _ in exact}) / max(1, len(exact)))
        # Near-duplicate statements tie on distance; an indexed hit as close as the exact k-th is as good.
        kth = exact[-1][1] if exact else 0.0
        tie_recalls.append(sum(1 for _, d in indexed if d <= kth + 1e-6) / max(1, len(exact)))
    believed = Fact.objects.believed().count()
    print(f"| {phase} | {ef} | {Fact.objects.count()} | {believed} | {hnsw_plans}/{len(queries)} | "
          f"{sum(recalls) / len(recalls):.3f} | {min(recalls):.3f} | {sum(tie_recalls) / len(tie_recalls):.3f} | "
          f"{min(tie_recalls):.3f} | {short} | "
          f"{percentile(t_index, 50) * 1000:.1f} | {percentile(t_exact, 50) * 1000:.1f} |")


def _create_ivfflat(cursor):
    # Same name as the migrated index, so the plan check below counts it.
    cursor.execute(f"CREATE INDEX fact_believed_embedding_hnsw ON memory_fact USING ivfflat "
                   f"(embedding vector_cosine_ops) WITH (lists = {IVFFLAT['lists']}) WHERE retracted_at IS NULL")
    cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'fact_believed_embedding_hnsw'")
    print(f"  index: {cursor.fetchone()[0]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=3000, help="corpus statements (default 3,000)")
    parser.add_argument("--all", action="store_true", help="every unique statement (about 12k)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--index", default="",
                        help="[halfvec,]m,ef_construction: rebuild the HNSW index with these before inserting "
                             "(default: leave the migrated index as it is). A halfvec build is queried by "
                             "the same cast (halfvec_order_neighbours); retrieve() orders by the vector")
    parser.add_argument("--phase1-only", action="store_true", help="stop after phase 1 (no amended texts to embed)")
    parser.add_argument("--ef-search", default="40",
                        help="comma-separated hnsw.ef_search values (40 is pgvector's default)")
    args = parser.parse_args()

    setup_django(db_name="unsay_bench_vectors", profile="demo", UNSAY_EMBEDDINGS="local")
    from django.db import connection
    from django.utils import timezone

    from memory.embeddings import get_provider
    from memory.models import Fact
    from memory.retrieval import semantic_neighbours

    NEIGHBOURS["fn"] = semantic_neighbours
    provider = get_provider()
    statements = load_statements()
    rng = random.Random(args.seed)
    rng.shuffle(statements)
    held_out, corpus = statements[:args.queries], statements[args.queries:]
    if not args.all:
        corpus = corpus[:args.size]
    print(f"# vector_recall on {describe_machine()}; embeddings={provider.name}; "
          f"corpus {len(corpus)} statements, {len(held_out)} held-out queries, k={args.k}")

    vectors = embed_cached(provider, [t for _, t in corpus], "corpus")
    queries = embed_cached(provider, [t for _, t in held_out], "queries")
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE memory_fact CASCADE")
        if args.index.startswith("ivfflat"):
            IVFFLAT["lists"] = int(args.index.split(",")[1])
            IVFFLAT["after"] = args.index.startswith("ivfflat-after")
            cursor.execute("DROP INDEX IF EXISTS fact_believed_embedding_hnsw")
            if not IVFFLAT["after"]:
                _create_ivfflat(cursor)
        elif args.index:
            parts = args.index.split(",")
            half = parts[0] == "halfvec"
            m, ef_construction = (int(v) for v in parts[-2:])
            column = f"(embedding::halfvec({len(vectors[0])})) halfvec_cosine_ops" if half else \
                "embedding vector_cosine_ops"
            if half:
                NEIGHBOURS["fn"] = halfvec_order_neighbours
            cursor.execute("DROP INDEX IF EXISTS fact_believed_embedding_hnsw")
            cursor.execute(f"CREATE INDEX fact_believed_embedding_hnsw ON memory_fact USING hnsw ({column}) "
                           f"WITH (m = {m}, ef_construction = {ef_construction}) WHERE retracted_at IS NULL")
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'fact_believed_embedding_hnsw'")
        print(f"  index: {(cursor.fetchone() or ['built after the load'])[0]}")
    now = timezone.now()
    started = time.perf_counter()
    Fact.objects.bulk_create([
        Fact(fact_key=f"bench:{number}:{i}", version=1, kind="recall", subject="bench", statement=text,
             content_hash=hashlib.sha256(text.encode()).hexdigest(), source="bench", asserted_at=now,
             embedding=vector)
        for i, ((number, text), vector) in enumerate(zip(corpus, vectors, strict=True))], batch_size=500)
    with connection.cursor() as cursor:
        if IVFFLAT.get("after"):
            _create_ivfflat(cursor)
        cursor.execute("ANALYZE memory_fact")
    print(f"  inserted {len(corpus)} facts (index maintained on insert) in {time.perf_counter() - started:.1f}s")

    print(f"\n| phase | ef_search | rows | believed | queries planned on HNSW | recall@{args.k} by id: mean | min | "
          "by distance (ties count): mean | min | short answers | indexed p50 ms | exact p50 ms |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    ef_values = [int(v) for v in args.ef_search.split(",")]
    measure("1. all believed", queries, args.k, ef_values=ef_values)
    measure("1b. same, HNSW forced", queries, args.k, ef_values=ef_values, mode="forced")
    if args.phase1_only:
        return

    # Phase 2: half the keys get a second version with amended text (the first is retracted).
    facts = list(Fact.objects.defer("embedding").order_by("id"))
    amended = rng.sample(facts, len(facts) // 2)
    new_texts = [f"{f.statement} Status: Terminated." for f in amended]
    new_vectors = embed_cached(provider, new_texts, "amended")
    later = timezone.now()
    Fact.objects.filter(id__in=[f.id for f in amended]).update(retracted_at=later, retraction_reason="bench")
    Fact.objects.bulk_create([
        Fact(fact_key=f.fact_key, version=2, kind="recall", subject="bench", statement=text,
             content_hash=hashlib.sha256(text.encode()).hexdigest(), source="bench", asserted_at=later,
             embedding=vector)
        for f, text, vector in zip(amended, new_texts, new_vectors, strict=True)], batch_size=500)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_fact")
    measure("2. half re-versioned", queries, args.k, ef_values=ef_values)
    measure("2b. same, HNSW forced", queries, args.k, ef_values=ef_values, mode="forced")

    # Phase 3: 90% of what is believed is retracted outright.
    believed_ids = list(Fact.objects.believed().values_list("id", flat=True))
    doomed = rng.sample(believed_ids, int(len(believed_ids) * 0.9))
    Fact.objects.filter(id__in=doomed).update(retracted_at=timezone.now(), retraction_reason="bench")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_fact")
    measure("3. then 90% retracted", queries, args.k, ef_values=ef_values)
    measure("3b. same, HNSW forced", queries, args.k, ef_values=ef_values, mode="forced")


if __name__ == "__main__":
    main()
