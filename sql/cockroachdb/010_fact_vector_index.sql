-- CockroachDB: a vector index is used only when every prefix column is pinned, so `believed`
-- (a stored computed column) is the prefix and retrieval pins `believed = true`.
ALTER TABLE memory_fact ADD COLUMN IF NOT EXISTS believed BOOL NOT NULL AS (retracted_at IS NULL) STORED;
CREATE VECTOR INDEX IF NOT EXISTS fact_believed_embedding_vec ON memory_fact (believed, embedding vector_cosine_ops);
-- Facts are read from every region: GLOBAL gives local reads everywhere (writes are slower, and rare).
ALTER TABLE memory_fact SET LOCALITY GLOBAL;
