-- Cluster mode's schema, version 2: workspaces move with the job, and the
-- budget is checked where a call starts.
--
-- Snapshot contents, content-addressed (SHA-256, lowercase hex) and shared
-- by every job: a file unchanged between recovery points, or the same in
-- two jobs, is stored once. Objects are inserted in the fenced commit of
-- the recovery point whose listing (logist_points.snapshot) names them.
CREATE TABLE logist_objects (
	sha256  text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
	content bytea NOT NULL,
	size    bigint NOT NULL
);

-- A debit records what calls cost in the world and may pass the budget by
-- the calls in flight when it ran out; the database refuses, under the
-- fence, a call that would start with the budget spent (clusterstore.Apply).
ALTER TABLE logist_jobs DROP CONSTRAINT IF EXISTS logist_jobs_check;
ALTER TABLE logist_jobs ADD CONSTRAINT logist_jobs_spent_check CHECK (spent_micros >= 0 AND budget_micros >= 0);
