// The schema of every released store version, verbatim: the kSchema text of
// the commit named above each. Test data for store_migration_test.cc only
// (a schema change adds the schema it replaces here, and its migration in
// store_schema.cc). All three version 1 shapes were released with
// user_version 1.
#pragma once

namespace stoker::store::released {

// clang-format off
// 2da4607 (the first release): jobs and events.
constexpr char kVersion1Spine[] = R"sql(
CREATE TABLE IF NOT EXISTS jobs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  display_name TEXT NOT NULL,
  state INTEGER NOT NULL,
  spec TEXT NOT NULL,
  create_time INTEGER NOT NULL,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  update_time INTEGER NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  attempt INTEGER NOT NULL DEFAULT 0,
  allocation TEXT,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  wait_reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
CREATE TABLE IF NOT EXISTS events(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL,
  time INTEGER NOT NULL,
  from_state INTEGER NOT NULL,
  to_state INTEGER NOT NULL,
  reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_job ON events(job_id);
PRAGMA user_version = 1;
)sql";

// e48ee48: studies and trials; jobs.study_id and jobs.trial_id.
constexpr char kVersion1Studies[] = R"sql(
CREATE TABLE IF NOT EXISTS jobs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  display_name TEXT NOT NULL,
  state INTEGER NOT NULL,
  spec TEXT NOT NULL,
  create_time INTEGER NOT NULL,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  update_time INTEGER NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  attempt INTEGER NOT NULL DEFAULT 0,
  allocation TEXT,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  wait_reason TEXT NOT NULL DEFAULT '',
  study_id INTEGER NOT NULL DEFAULT 0,
  trial_id TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS studies(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  display_name TEXT NOT NULL,
  state INTEGER NOT NULL,
  spec TEXT NOT NULL,
  create_time INTEGER NOT NULL,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  update_time INTEGER NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS trials(
  study_id INTEGER NOT NULL,
  trial_id INTEGER NOT NULL,
  job_id INTEGER NOT NULL,
  state INTEGER NOT NULL,
  parameters TEXT NOT NULL,
  measurements TEXT NOT NULL,
  final_measurement TEXT,
  infeasible_reason TEXT NOT NULL DEFAULT '',
  stopped_early INTEGER NOT NULL DEFAULT 0,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(study_id, trial_id)
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
CREATE TABLE IF NOT EXISTS events(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL,
  time INTEGER NOT NULL,
  from_state INTEGER NOT NULL,
  to_state INTEGER NOT NULL,
  reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_job ON events(job_id);
PRAGMA user_version = 1;
)sql";

// 34a1319: jobs.legacy_job_id and jobs.legacy_input (AI Platform job ids).
constexpr char kVersion1Legacy[] = R"sql(
CREATE TABLE IF NOT EXISTS jobs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  display_name TEXT NOT NULL,
  state INTEGER NOT NULL,
  spec TEXT NOT NULL,
  create_time INTEGER NOT NULL,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  update_time INTEGER NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  attempt INTEGER NOT NULL DEFAULT 0,
  allocation TEXT,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  wait_reason TEXT NOT NULL DEFAULT '',
  study_id INTEGER NOT NULL DEFAULT 0,
  trial_id TEXT NOT NULL DEFAULT '',
  legacy_job_id TEXT NOT NULL DEFAULT '',
  legacy_input TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_by_legacy_id ON jobs(project, legacy_job_id)
  WHERE legacy_job_id != '';
CREATE TABLE IF NOT EXISTS studies(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  display_name TEXT NOT NULL,
  state INTEGER NOT NULL,
  spec TEXT NOT NULL,
  create_time INTEGER NOT NULL,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  update_time INTEGER NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS trials(
  study_id INTEGER NOT NULL,
  trial_id INTEGER NOT NULL,
  job_id INTEGER NOT NULL,
  state INTEGER NOT NULL,
  parameters TEXT NOT NULL,
  measurements TEXT NOT NULL,
  final_measurement TEXT,
  infeasible_reason TEXT NOT NULL DEFAULT '',
  stopped_early INTEGER NOT NULL DEFAULT 0,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(study_id, trial_id)
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
CREATE TABLE IF NOT EXISTS events(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL,
  time INTEGER NOT NULL,
  from_state INTEGER NOT NULL,
  to_state INTEGER NOT NULL,
  reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_job ON events(job_id);
PRAGMA user_version = 1;
)sql";

// 29e9238: the submitting user on jobs and studies.
constexpr char kVersion2[] = R"sql(
CREATE TABLE IF NOT EXISTS jobs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  display_name TEXT NOT NULL,
  state INTEGER NOT NULL,
  spec TEXT NOT NULL,
  create_time INTEGER NOT NULL,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  update_time INTEGER NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  attempt INTEGER NOT NULL DEFAULT 0,
  allocation TEXT,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  wait_reason TEXT NOT NULL DEFAULT '',
  study_id INTEGER NOT NULL DEFAULT 0,
  trial_id TEXT NOT NULL DEFAULT '',
  legacy_job_id TEXT NOT NULL DEFAULT '',
  legacy_input TEXT,
  user TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_by_legacy_id ON jobs(project, legacy_job_id)
  WHERE legacy_job_id != '';
CREATE TABLE IF NOT EXISTS studies(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  display_name TEXT NOT NULL,
  state INTEGER NOT NULL,
  spec TEXT NOT NULL,
  create_time INTEGER NOT NULL,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  update_time INTEGER NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  user TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS trials(
  study_id INTEGER NOT NULL,
  trial_id INTEGER NOT NULL,
  job_id INTEGER NOT NULL,
  state INTEGER NOT NULL,
  parameters TEXT NOT NULL,
  measurements TEXT NOT NULL,
  final_measurement TEXT,
  infeasible_reason TEXT NOT NULL DEFAULT '',
  stopped_early INTEGER NOT NULL DEFAULT 0,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(study_id, trial_id)
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
CREATE TABLE IF NOT EXISTS events(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL,
  time INTEGER NOT NULL,
  from_state INTEGER NOT NULL,
  to_state INTEGER NOT NULL,
  reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_job ON events(job_id);
PRAGMA user_version = 2;
)sql";

// 7e8e7f3 (the schema before studies.legacy_job_id): preemptions, restart reasons, state counts.
constexpr char kVersion3[] = R"sql(
CREATE TABLE IF NOT EXISTS jobs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  display_name TEXT NOT NULL,
  state INTEGER NOT NULL,
  spec TEXT NOT NULL,
  create_time INTEGER NOT NULL,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  update_time INTEGER NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  attempt INTEGER NOT NULL DEFAULT 0,
  allocation TEXT,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  wait_reason TEXT NOT NULL DEFAULT '',
  study_id INTEGER NOT NULL DEFAULT 0,
  trial_id TEXT NOT NULL DEFAULT '',
  legacy_job_id TEXT NOT NULL DEFAULT '',
  legacy_input TEXT,
  user TEXT NOT NULL DEFAULT '',
  preemptions INTEGER NOT NULL DEFAULT 0,
  restart_reason TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_by_legacy_id ON jobs(project, legacy_job_id)
  WHERE legacy_job_id != '';
CREATE TABLE IF NOT EXISTS studies(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  display_name TEXT NOT NULL,
  state INTEGER NOT NULL,
  spec TEXT NOT NULL,
  create_time INTEGER NOT NULL,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  update_time INTEGER NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  user TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS trials(
  study_id INTEGER NOT NULL,
  trial_id INTEGER NOT NULL,
  job_id INTEGER NOT NULL,
  state INTEGER NOT NULL,
  parameters TEXT NOT NULL,
  measurements TEXT NOT NULL,
  final_measurement TEXT,
  infeasible_reason TEXT NOT NULL DEFAULT '',
  stopped_early INTEGER NOT NULL DEFAULT 0,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(study_id, trial_id)
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
CREATE TABLE IF NOT EXISTS events(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL,
  time INTEGER NOT NULL,
  from_state INTEGER NOT NULL,
  to_state INTEGER NOT NULL,
  reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_job ON events(job_id);
CREATE TABLE IF NOT EXISTS usage(
  job_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  replica TEXT NOT NULL,
  pool INTEGER NOT NULL,
  user TEXT NOT NULL,
  project TEXT NOT NULL,
  labels TEXT NOT NULL,
  study_id INTEGER NOT NULL,
  node TEXT NOT NULL,
  start_time INTEGER NOT NULL,
  end_time INTEGER NOT NULL,
  end_kind TEXT NOT NULL,
  cpus REAL NOT NULL,
  memory_bytes INTEGER NOT NULL,
  gpu_type TEXT NOT NULL,
  gpus REAL NOT NULL,
  machine_type TEXT NOT NULL,
  accelerator_type TEXT NOT NULL,
  accelerator_count REAL NOT NULL,
  sampled_seconds REAL NOT NULL DEFAULT 0,
  busy_gpu_seconds REAL NOT NULL DEFAULT 0,
  energy_joules REAL,
  PRIMARY KEY(job_id, attempt, replica)
);
CREATE INDEX IF NOT EXISTS usage_by_end ON usage(end_time);
CREATE INDEX IF NOT EXISTS usage_by_study ON usage(study_id) WHERE study_id != 0;
CREATE TABLE IF NOT EXISTS outbox(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  url TEXT NOT NULL,
  event TEXT NOT NULL,
  body TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_time INTEGER NOT NULL DEFAULT 0,
  create_time INTEGER NOT NULL,
  last_error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS outbox_by_time ON outbox(next_time);
CREATE TABLE IF NOT EXISTS budgets(
  scope TEXT PRIMARY KEY,
  monthly_usd REAL,
  monthly_gpu_hours REAL,
  price TEXT NOT NULL,
  warn_at REAL NOT NULL,
  stop_running INTEGER NOT NULL,
  update_time INTEGER NOT NULL,
  updated_by TEXT NOT NULL
);
-- Jobs and studies by state, kept by triggers in each writing transaction so
-- that GET /metrics reads a few rows instead of counting every job ever
-- (docs/decisions/0023). Stores made before it are counted once by Open.
CREATE TABLE IF NOT EXISTS state_counts(
  kind TEXT NOT NULL,
  state INTEGER NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY(kind, state)
);
CREATE TRIGGER IF NOT EXISTS jobs_count_insert AFTER INSERT ON jobs BEGIN
  INSERT INTO state_counts(kind, state, n) VALUES('jobs', NEW.state, 1)
    ON CONFLICT(kind, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS jobs_count_update AFTER UPDATE OF state ON jobs
  WHEN OLD.state != NEW.state BEGIN
  UPDATE state_counts SET n = n - 1 WHERE kind = 'jobs' AND state = OLD.state;
  INSERT INTO state_counts(kind, state, n) VALUES('jobs', NEW.state, 1)
    ON CONFLICT(kind, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS jobs_count_delete AFTER DELETE ON jobs BEGIN
  UPDATE state_counts SET n = n - 1 WHERE kind = 'jobs' AND state = OLD.state;
END;
CREATE TRIGGER IF NOT EXISTS studies_count_insert AFTER INSERT ON studies BEGIN
  INSERT INTO state_counts(kind, state, n) VALUES('studies', NEW.state, 1)
    ON CONFLICT(kind, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS studies_count_update AFTER UPDATE OF state ON studies
  WHEN OLD.state != NEW.state BEGIN
  UPDATE state_counts SET n = n - 1 WHERE kind = 'studies' AND state = OLD.state;
  INSERT INTO state_counts(kind, state, n) VALUES('studies', NEW.state, 1)
    ON CONFLICT(kind, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS studies_count_delete AFTER DELETE ON studies BEGIN
  UPDATE state_counts SET n = n - 1 WHERE kind = 'studies' AND state = OLD.state;
END;
PRAGMA user_version = 3;
)sql";

// d39bc3d (the schema before usage.location): studies.legacy_job_id and
// legacy_input, operations.
constexpr char kVersion4[] = R"sql(
CREATE TABLE IF NOT EXISTS jobs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  display_name TEXT NOT NULL,
  state INTEGER NOT NULL,
  spec TEXT NOT NULL,
  create_time INTEGER NOT NULL,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  update_time INTEGER NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  attempt INTEGER NOT NULL DEFAULT 0,
  allocation TEXT,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  wait_reason TEXT NOT NULL DEFAULT '',
  study_id INTEGER NOT NULL DEFAULT 0,
  trial_id TEXT NOT NULL DEFAULT '',
  legacy_job_id TEXT NOT NULL DEFAULT '',
  legacy_input TEXT,
  user TEXT NOT NULL DEFAULT '',
  preemptions INTEGER NOT NULL DEFAULT 0,
  restart_reason TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_by_legacy_id ON jobs(project, legacy_job_id)
  WHERE legacy_job_id != '';
CREATE TABLE IF NOT EXISTS studies(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  display_name TEXT NOT NULL,
  state INTEGER NOT NULL,
  spec TEXT NOT NULL,
  create_time INTEGER NOT NULL,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  update_time INTEGER NOT NULL,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  user TEXT NOT NULL DEFAULT '',
  legacy_job_id TEXT NOT NULL DEFAULT '',
  legacy_input TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS studies_by_legacy_id ON studies(project, legacy_job_id)
  WHERE legacy_job_id != '';
CREATE TABLE IF NOT EXISTS trials(
  study_id INTEGER NOT NULL,
  trial_id INTEGER NOT NULL,
  job_id INTEGER NOT NULL,
  state INTEGER NOT NULL,
  parameters TEXT NOT NULL,
  measurements TEXT NOT NULL,
  final_measurement TEXT,
  infeasible_reason TEXT NOT NULL DEFAULT '',
  stopped_early INTEGER NOT NULL DEFAULT 0,
  start_time INTEGER NOT NULL DEFAULT 0,
  end_time INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(study_id, trial_id)
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
CREATE TABLE IF NOT EXISTS events(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id INTEGER NOT NULL,
  time INTEGER NOT NULL,
  from_state INTEGER NOT NULL,
  to_state INTEGER NOT NULL,
  reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_job ON events(job_id);
CREATE TABLE IF NOT EXISTS usage(
  job_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  replica TEXT NOT NULL,
  pool INTEGER NOT NULL,
  user TEXT NOT NULL,
  project TEXT NOT NULL,
  labels TEXT NOT NULL,
  study_id INTEGER NOT NULL,
  node TEXT NOT NULL,
  start_time INTEGER NOT NULL,
  end_time INTEGER NOT NULL,
  end_kind TEXT NOT NULL,
  cpus REAL NOT NULL,
  memory_bytes INTEGER NOT NULL,
  gpu_type TEXT NOT NULL,
  gpus REAL NOT NULL,
  machine_type TEXT NOT NULL,
  accelerator_type TEXT NOT NULL,
  accelerator_count REAL NOT NULL,
  sampled_seconds REAL NOT NULL DEFAULT 0,
  busy_gpu_seconds REAL NOT NULL DEFAULT 0,
  energy_joules REAL,
  PRIMARY KEY(job_id, attempt, replica)
);
CREATE INDEX IF NOT EXISTS usage_by_end ON usage(end_time);
CREATE INDEX IF NOT EXISTS usage_by_study ON usage(study_id) WHERE study_id != 0;
CREATE TABLE IF NOT EXISTS outbox(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  url TEXT NOT NULL,
  event TEXT NOT NULL,
  body TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_time INTEGER NOT NULL DEFAULT 0,
  create_time INTEGER NOT NULL,
  last_error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS outbox_by_time ON outbox(next_time);
CREATE TABLE IF NOT EXISTS budgets(
  scope TEXT PRIMARY KEY,
  monthly_usd REAL,
  monthly_gpu_hours REAL,
  price TEXT NOT NULL,
  warn_at REAL NOT NULL,
  stop_running INTEGER NOT NULL,
  update_time INTEGER NOT NULL,
  updated_by TEXT NOT NULL
);
-- Jobs and studies by state, kept by triggers in each writing transaction so
-- that GET /metrics reads a few rows instead of counting every job ever
-- (docs/decisions/0023). Stores made before it are counted once by Open.
CREATE TABLE IF NOT EXISTS state_counts(
  kind TEXT NOT NULL,
  state INTEGER NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY(kind, state)
);
CREATE TRIGGER IF NOT EXISTS jobs_count_insert AFTER INSERT ON jobs BEGIN
  INSERT INTO state_counts(kind, state, n) VALUES('jobs', NEW.state, 1)
    ON CONFLICT(kind, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS jobs_count_update AFTER UPDATE OF state ON jobs
  WHEN OLD.state != NEW.state BEGIN
  UPDATE state_counts SET n = n - 1 WHERE kind = 'jobs' AND state = OLD.state;
  INSERT INTO state_counts(kind, state, n) VALUES('jobs', NEW.state, 1)
    ON CONFLICT(kind, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS jobs_count_delete AFTER DELETE ON jobs BEGIN
  UPDATE state_counts SET n = n - 1 WHERE kind = 'jobs' AND state = OLD.state;
END;
CREATE TRIGGER IF NOT EXISTS studies_count_insert AFTER INSERT ON studies BEGIN
  INSERT INTO state_counts(kind, state, n) VALUES('studies', NEW.state, 1)
    ON CONFLICT(kind, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS studies_count_update AFTER UPDATE OF state ON studies
  WHEN OLD.state != NEW.state BEGIN
  UPDATE state_counts SET n = n - 1 WHERE kind = 'studies' AND state = OLD.state;
  INSERT INTO state_counts(kind, state, n) VALUES('studies', NEW.state, 1)
    ON CONFLICT(kind, state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS studies_count_delete AFTER DELETE ON studies BEGIN
  UPDATE state_counts SET n = n - 1 WHERE kind = 'studies' AND state = OLD.state;
END;
-- Long-running operations Stoker returned (store_deletion.cc): so far the
-- deletions of jobs and studies, done when returned; kept so that GET
-- .../operations/{id} answers them after a restart.
CREATE TABLE IF NOT EXISTS operations(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  project TEXT NOT NULL,
  location TEXT NOT NULL,
  user TEXT NOT NULL,
  type TEXT NOT NULL,
  target TEXT NOT NULL,
  create_time INTEGER NOT NULL
);
PRAGMA user_version = 4;
)sql";
// clang-format on

}  // namespace stoker::store::released
