ALTER TABLE memory_fact SET LOCALITY REGIONAL BY TABLE IN PRIMARY REGION;
DROP INDEX IF EXISTS memory_fact@fact_believed_embedding_vec;
ALTER TABLE memory_fact DROP COLUMN IF EXISTS believed;
