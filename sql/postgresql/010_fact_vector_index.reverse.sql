DROP INDEX IF EXISTS fact_believed_embedding_hnsw;
