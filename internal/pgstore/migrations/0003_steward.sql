-- Cluster mode's schema, version 3: steward commands, files and schedules.
-- A steward's key (logist's), registered beside the nodes' keys.
ALTER TABLE logist_nodes ADD COLUMN steward boolean NOT NULL DEFAULT false;

-- A schedule's template: no node claims it; its ticks create runs.
ALTER TABLE logist_jobs ADD COLUMN template boolean NOT NULL DEFAULT false;

-- The outcome of the command an idempotency key was used for.
ALTER TABLE logist_idempotency ADD COLUMN status text NOT NULL DEFAULT '';

-- Files of a job's folder that a steward's change wrote (a reply).
CREATE TABLE logist_files (
	job_id  text NOT NULL REFERENCES logist_jobs (id),
	path    text NOT NULL,
	content bytea NOT NULL,
	PRIMARY KEY (job_id, path)
);

-- One row per fired tick of a template: the primary key makes a tick fire
-- once cluster-wide, in the transaction that inserts its run.
CREATE TABLE logist_ticks (
	template text NOT NULL REFERENCES logist_jobs (id),
	tick     timestamptz NOT NULL,
	node     text NOT NULL,
	run_id   text,
	at       timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (template, tick)
);
