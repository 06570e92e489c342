-- Back to one home for all rows (the primary region), then drop the computed columns.
ALTER TABLE corrections_outboxmessage SET LOCALITY REGIONAL BY TABLE IN PRIMARY REGION;
ALTER TABLE corrections_outboxmessage DROP COLUMN IF EXISTS home;
ALTER TABLE corrections_correction SET LOCALITY REGIONAL BY TABLE IN PRIMARY REGION;
ALTER TABLE corrections_correction DROP COLUMN IF EXISTS home;
ALTER TABLE memory_decision SET LOCALITY REGIONAL BY TABLE IN PRIMARY REGION;
ALTER TABLE memory_decision DROP COLUMN IF EXISTS home;
