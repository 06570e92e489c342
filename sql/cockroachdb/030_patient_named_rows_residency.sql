-- Rows that name a patient live in that patient's home region, like the patient row itself:
-- decisions (and their read sets' parent), correction drafts and outbox messages. Each carries a
-- plain `region` copied from the patient; `home` maps it to the database region enum.
-- A decision asked for no patient has region '' and is homed in the primary region.
-- Skipped on a database without regions (unsay_site.sqlfiles), like 020.
ALTER TABLE memory_decision ADD COLUMN IF NOT EXISTS home crdb_internal_region NOT NULL AS ({{ region_case_or_primary }}) STORED;
ALTER TABLE memory_decision SET LOCALITY REGIONAL BY ROW AS home;
ALTER TABLE corrections_correction ADD COLUMN IF NOT EXISTS home crdb_internal_region NOT NULL AS ({{ region_case }}) STORED;
ALTER TABLE corrections_correction SET LOCALITY REGIONAL BY ROW AS home;
ALTER TABLE corrections_outboxmessage ADD COLUMN IF NOT EXISTS home crdb_internal_region NOT NULL AS ({{ region_case }}) STORED;
ALTER TABLE corrections_outboxmessage SET LOCALITY REGIONAL BY ROW AS home;
