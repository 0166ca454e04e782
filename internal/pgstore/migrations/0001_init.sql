-- Cluster mode's schema, version 1.
CREATE TABLE logist_nodes (
	id            text PRIMARY KEY,
	key_id        text NOT NULL,
	public_key    bytea NOT NULL,
	registered_at timestamptz NOT NULL DEFAULT now(),
	heartbeat_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE logist_jobs (
	id            text PRIMARY KEY,
	status        text NOT NULL,
	manifest      bytea NOT NULL,
	epoch         bigint NOT NULL DEFAULT 0,
	owner         text,
	lease_until   timestamptz,
	next_seq      bigint NOT NULL DEFAULT 0,
	last_hash     text NOT NULL DEFAULT '',
	budget_micros bigint NOT NULL DEFAULT 0,
	spent_micros  bigint NOT NULL DEFAULT 0,
	rescues       bigint NOT NULL DEFAULT 0,
	created_at    timestamptz NOT NULL DEFAULT now(),
	updated_at    timestamptz NOT NULL DEFAULT now(),
	CHECK (budget_micros = 0 OR spent_micros <= budget_micros)
);
CREATE INDEX logist_jobs_by_status ON logist_jobs (status, created_at);

CREATE TABLE logist_history (
	job_id text NOT NULL REFERENCES logist_jobs (id),
	seq    bigint NOT NULL,
	line   bytea NOT NULL,
	epoch  bigint NOT NULL,
	PRIMARY KEY (job_id, seq)
);

CREATE TABLE logist_points (
	job_id   text NOT NULL REFERENCES logist_jobs (id),
	id       text NOT NULL,
	seq      bigint NOT NULL,
	snapshot bytea,
	epoch    bigint NOT NULL,
	PRIMARY KEY (job_id, id)
);

CREATE TABLE logist_idempotency (
	key     text PRIMARY KEY,
	command text NOT NULL,
	job_id  text NOT NULL,
	epoch   bigint NOT NULL,
	at      timestamptz NOT NULL DEFAULT now()
);
