DROP INDEX IF EXISTS fact_believed_embedding_hnsw;
CREATE INDEX fact_believed_embedding_hnsw
    ON memory_fact USING hnsw (embedding vector_cosine_ops)
    WHERE retracted_at IS NULL;
