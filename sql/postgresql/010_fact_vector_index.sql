-- HNSW over believed facts only. Queries filter `retracted_at IS NULL`, which matches this
-- partial index; connections set hnsw.iterative_scan=strict_order so a filtered top-k still returns k.
CREATE INDEX IF NOT EXISTS fact_believed_embedding_hnsw
    ON memory_fact USING hnsw (embedding vector_cosine_ops)
    WHERE retracted_at IS NULL;
