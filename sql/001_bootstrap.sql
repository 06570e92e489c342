-- CockroachDB bootstrap for the compose cluster (run once by compose's `init` service after
-- `cockroach init`; safe to run again). Not applied by migrations: migrations run inside the
-- database this file creates, and need its regions before sql/cockroachdb/*.sql sets localities.
--
-- Region names must equal the nodes' --locality=region=... values (check: SHOW REGIONS FROM CLUSTER)
-- and the app's UNSAY_REGIONS (checked by unsay_site.checks at start-up).
CREATE DATABASE IF NOT EXISTS unsay;

-- The primary region holds REGIONAL BY TABLE tables' leaseholders by default; it is where the web
-- service's gateway node (roach1) lives.
ALTER DATABASE unsay SET PRIMARY REGION "aws-us-east-1";
ALTER DATABASE unsay ADD REGION IF NOT EXISTS "aws-eu-west-1";
ALTER DATABASE unsay ADD REGION IF NOT EXISTS "aws-ap-southeast-1";

-- Stay available for reads and writes with a whole region down. Needs >= 3 database regions
-- (error 42602 otherwise) and costs write latency of at least one inter-region round trip.
ALTER DATABASE unsay SURVIVE REGION FAILURE;
