-- Patients and their dispensing rows live in the patient's home region (REGIONAL BY ROW).
-- REGIONAL BY ROW AS needs a NOT NULL column of the database's region enum, so `home` is computed
-- from the app's plain `region` column. {{ region_case }} is rendered from settings.UNSAY_REGIONS by
-- patients.residency.region_case_sql() when the migration runs; a region outside that list gives
-- NULL, which NOT NULL refuses, so a row can never land in an unintended place. Every region in
-- UNSAY_REGIONS must be a database region (ALTER DATABASE ... ADD REGION) before migrating.
-- Both statement pairs are skipped on a database without regions (unsay_site.sqlfiles).
ALTER TABLE patients_patient ADD COLUMN IF NOT EXISTS home crdb_internal_region NOT NULL AS ({{ region_case }}) STORED;
ALTER TABLE patients_patient SET LOCALITY REGIONAL BY ROW AS home;
ALTER TABLE patients_dispensingrecord ADD COLUMN IF NOT EXISTS home crdb_internal_region NOT NULL AS ({{ region_case }}) STORED;
ALTER TABLE patients_dispensingrecord SET LOCALITY REGIONAL BY ROW AS home;
