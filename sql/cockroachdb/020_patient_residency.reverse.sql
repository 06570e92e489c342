-- Back to one home for all rows (the primary region), then drop the computed column.
ALTER TABLE patients_dispensingrecord SET LOCALITY REGIONAL BY TABLE IN PRIMARY REGION;
ALTER TABLE patients_dispensingrecord DROP COLUMN IF EXISTS home;
ALTER TABLE patients_patient SET LOCALITY REGIONAL BY TABLE IN PRIMARY REGION;
ALTER TABLE patients_patient DROP COLUMN IF EXISTS home;
