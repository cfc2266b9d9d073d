"""The tables corral keeps its state in (SQLAlchemy Core; SQLite or PostgreSQL).

Times are integers in milliseconds since the epoch. Specs and handles are JSON text so the
same schema runs on both databases. The job kinds' tables (pipelines, notebooks, learning
loops) are in `kind_tables`, on the same `metadata`.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()
#: on PostgreSQL a real sequence; SQLite has none, and repo.insert_job supplies the value
JOB_SEQ = sa.Sequence("jobs_seq_seq", metadata=metadata)

meta = sa.Table(
    "meta", metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

projects = sa.Table(
    "projects", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("name", sa.String(128), nullable=False, unique=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

jobs = sa.Table(
    "jobs", metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    #: submission order (ids are random and create_time has ties within a millisecond)
    sa.Column("seq", sa.BigInteger, JOB_SEQ, nullable=False),
    sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("description", sa.String(256), nullable=False, default=""),
    sa.Column("kind", sa.String(32), nullable=False, default="job"),
    sa.Column("user_name", sa.String(128), nullable=False, default=""),
    sa.Column("phase", sa.String(16), nullable=False),
    sa.Column("secondary_phase", sa.String(24), nullable=False),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("flavor_id", sa.String(128), nullable=False),
    sa.Column("node_count", sa.Integer, nullable=False),
    sa.Column("cpu", sa.Float, nullable=False),
    sa.Column("memory_mb", sa.Integer, nullable=False),
    sa.Column("gpu", sa.Integer, nullable=False),
    sa.Column("retry_limit", sa.Integer, nullable=False, default=0),
    sa.Column("create_time", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.Column("start_time", sa.BigInteger),
    sa.Column("end_time", sa.BigInteger),
    sa.Column("failure_class", sa.String(32)),
    sa.Column("failure_message", sa.Text),
    sa.Column("wait_reason", sa.Text),
    sa.Column("terminate_requested_at", sa.BigInteger),
    sa.Column("deleted_at", sa.BigInteger),
    sa.Column("master_port", sa.Integer),
    # --- scheduling (revision 0003) ---
    #: the resource pool it runs in (the default pool when the spec names none)
    sa.Column("pool_id", sa.String(64), nullable=False, server_default="default"),
    #: 1 (low) to 3 (high), as spec.schedule_policy.priority on ModelArts
    sa.Column("priority", sa.Integer, nullable=False, server_default="1"),
    sa.Column("preemptible", sa.Boolean, nullable=False, server_default=sa.false()),
    #: tasks spread one per node where possible (else packed onto as few nodes as fit)
    sa.Column("spread", sa.Boolean, nullable=False, server_default=sa.false()),
    #: only nodes with this GPU product ("" for any)
    sa.Column("gpu_type", sa.String(128), nullable=False, server_default=""),
    #: running beyond its project's quota on idle capacity: the first to be reclaimed
    sa.Column("borrowed", sa.Boolean, nullable=False, server_default=sa.false()),
    #: a domain.scheduling.WaitCode while it waits
    sa.Column("wait_code", sa.String(24)),
    #: when the scheduler decided to preempt it (SIGTERM sent; requeued once it stopped)
    sa.Column("preempt_requested_at", sa.BigInteger),
    # --- versions and models (revision 0004) ---
    #: the job family (the id of its first version) and this job's number in it (V0001 = 1)
    sa.Column("family_id", sa.String(36)),
    sa.Column("version", sa.Integer),
    #: 'pending' while inputs, code, a model or resumed outputs are still to be fetched;
    #: such a job is not admitted until the storage component has fetched them
    sa.Column("staging", sa.String(16)),
    #: when the storage component finished with an ended job (final metrics, last upload,
    #: model registered); NULL for an ended job means that is still to be done
    sa.Column("finalized_at", sa.BigInteger),
    # --- accelerators (revision 0005) ---
    #: JSON: accelerators other than GPUs per task by name ({"npu": 2}); NULL for none
    sa.Column("accelerators", sa.Text),
    # --- job kinds (revision 0007) ---
    #: the object of a job kind that owns this job (kinds/), and the job's role there
    sa.Column("owner_kind", sa.String(32)),
    sa.Column("owner_id", sa.String(36)),
    sa.Column("owner_role", sa.String(64)),
    # --- fault tolerance (revision 0011) ---
    #: when the restart after a failed attempt may start (its backoff); NULL: none is due
    sa.Column("restart_at", sa.BigInteger),
    #: why corral is stopping its tasks ('hang', 'timeout'), from the moment it decided to
    #: until the job has restarted or ended
    sa.Column("stop_cause", sa.String(16)),
    #: JSON list of the nodes it is kept off (it failed there with `retry_elsewhere`)
    sa.Column("excluded_nodes", sa.Text),
    # --- node pinning (revision 0017) ---
    #: the one node it runs on ("": any node of its pool)
    sa.Column("node_name", sa.String(128), nullable=False, server_default=""),
)
sa.Index("ix_jobs_phase_seq", jobs.c.phase, jobs.c.seq)
#: the queue the scheduler decides on (new and admitted jobs, less those still fetching
#: their inputs), with its values written out: a query with this condition word for word
#: can read the index below (SQLite does not match a partial index to bound parameters)
IN_QUEUE_SQL = "phase IN ('Creating', 'Pending') AND staging IS NULL"
IN_QUEUE = sa.text(IN_QUEUE_SQL)
#: the queue stream by stream (pool, priority, project) in submission order: a pass reads
#: the first jobs of each without going through the rest of the queue
sa.Index("ix_jobs_queue", jobs.c.pool_id, jobs.c.priority, jobs.c.project_id, jobs.c.seq,
         sqlite_where=IN_QUEUE, postgresql_where=IN_QUEUE)
sa.Index("ix_jobs_project_created", jobs.c.project_id, jobs.c.create_time)
#: the deleted jobs that the reconciler purges (every pass looks for them)
sa.Index("ix_jobs_deleted", jobs.c.deleted_at, sqlite_where=jobs.c.deleted_at.is_not(None),
         postgresql_where=jobs.c.deleted_at.is_not(None))
#: a project's jobs by name, live or not, every version (is a name taken?)
sa.Index("ix_jobs_project_name", jobs.c.project_id, jobs.c.name, jobs.c.deleted_at)
#: submission order (the next job's number is max(seq) + 1)
sa.Index("ix_jobs_seq", jobs.c.seq)
#: a project's live jobs, by phase, creation time and name (the job list, its searches)
sa.Index("ix_jobs_project_live", jobs.c.project_id, jobs.c.deleted_at, jobs.c.phase,
         jobs.c.create_time, jobs.c.name)
#: the versions of a job share its name; only first versions (and jobs from before versions)
#: are held unique by the database, the others by the family they belong to
LIVE_FIRST_VERSION = sa.and_(jobs.c.deleted_at.is_(None),
                             sa.or_(jobs.c.version.is_(None), jobs.c.version == 1))
sa.Index(
    "ux_jobs_project_name_live", jobs.c.project_id, jobs.c.name, unique=True,
    sqlite_where=LIVE_FIRST_VERSION, postgresql_where=LIVE_FIRST_VERSION,
)

#: a controller that submits the same job again after a crash finds the one it made
OWNED = jobs.c.owner_kind.is_not(None)
sa.Index("ux_jobs_owner", jobs.c.owner_kind, jobs.c.owner_id, jobs.c.owner_role, unique=True,
         sqlite_where=OWNED, postgresql_where=OWNED)

attempts = sa.Table(
    "attempts", metadata,
    sa.Column("job_id", sa.String(36), sa.ForeignKey("jobs.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("start_at", sa.BigInteger, nullable=False),
    sa.Column("end_at", sa.BigInteger),
    sa.Column("start_type", sa.String(32), nullable=False),
    sa.Column("end_reason", sa.Text),
    sa.Column("end_related_task", sa.String(64)),
    sa.Column("end_recover", sa.String(32)),
    #: why it ended, when not by completing (a domain.jobs.FailureClass; revision 0011)
    sa.Column("failure_class", sa.String(32)),
)

tasks = sa.Table(
    "tasks", metadata,
    sa.Column("job_id", sa.String(36), sa.ForeignKey("jobs.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("rank", sa.Integer, nullable=False),
    sa.Column("node", sa.String(128), nullable=False),
    sa.Column("state", sa.String(24), nullable=False),
    sa.Column("launch_id", sa.String(32), nullable=False),
    sa.Column("gpu_ids", sa.String(256), nullable=False, default=""),
    #: JSON: device ids per accelerator it was given ({"npu": [0, 1]}); NULL for none
    sa.Column("accel_ids", sa.Text),
    sa.Column("handle", sa.Text),
    sa.Column("exit_code", sa.Integer),
    sa.Column("message", sa.Text),
    sa.Column("launched_at", sa.BigInteger),
    sa.Column("ended_at", sa.BigInteger),
    sa.Column("kill_sent_at", sa.BigInteger),
)
sa.Index("ix_tasks_state", tasks.c.state)

job_events = sa.Table(
    "job_events", metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
              autoincrement=True),
    sa.Column("job_id", sa.String(36), sa.ForeignKey("jobs.id", ondelete="CASCADE"),
              nullable=False),
    sa.Column("time", sa.BigInteger, nullable=False),
    sa.Column("level", sa.String(8), nullable=False),
    sa.Column("source", sa.String(8), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
)
sa.Index("ix_job_events_job", job_events.c.job_id, job_events.c.id)

task_metrics = sa.Table(
    "task_metrics", metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
              autoincrement=True),
    sa.Column("job_id", sa.String(36), sa.ForeignKey("jobs.id", ondelete="CASCADE"),
              nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("task", sa.String(64), nullable=False),
    sa.Column("time", sa.BigInteger, nullable=False),
    sa.Column("cpu_usage", sa.Float, nullable=False),
    sa.Column("mem_usage", sa.Float, nullable=False),
    sa.Column("mem_mb", sa.Float, nullable=False),
    sa.Column("gpu_util", sa.Float, nullable=False),
    sa.Column("gpu_mem_usage", sa.Float, nullable=False),
)
sa.Index("ix_task_metrics_job_task", task_metrics.c.job_id, task_metrics.c.task,
         task_metrics.c.time)

#: each node's use, machine-wide, sampled with the tasks (the Nodes page's charts); kept
#: for `NODE_SAMPLES_KEEP_MS` (job_repo)
node_samples = sa.Table(
    "node_samples", metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
              autoincrement=True),
    sa.Column("node", sa.String(128), nullable=False),
    sa.Column("time", sa.BigInteger, nullable=False),
    sa.Column("cpu_percent", sa.Float, nullable=False),
    sa.Column("mem_mb", sa.Float, nullable=False),
    sa.Column("gpu_util", sa.Float),
    sa.Column("gpu_mem_mb", sa.Float),
)
sa.Index("ix_node_samples_time", node_samples.c.time)

users = sa.Table(
    "users", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("name", sa.String(64), nullable=False, unique=True),
    #: a platform admin manages projects and users, and is an admin in every project
    sa.Column("is_admin", sa.Boolean, nullable=False, default=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    #: a disabled user's credentials all stop working
    sa.Column("disabled_at", sa.BigInteger),
)

memberships = sa.Table(
    "memberships", metadata,
    sa.Column("user_id", sa.String(32), sa.ForeignKey("users.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

access_keys = sa.Table(
    "access_keys", metadata,
    sa.Column("access_key", sa.String(64), primary_key=True),
    sa.Column("user_id", sa.String(32), sa.ForeignKey("users.id", ondelete="CASCADE"),
              nullable=False),
    #: a key signs requests for this project only
    sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id", ondelete="CASCADE"),
              nullable=False),
    #: the secret key, encrypted with the server key (never stored in clear)
    sa.Column("secret_sealed", sa.Text, nullable=False),
    sa.Column("description", sa.String(256), nullable=False, default=""),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("revoked_at", sa.BigInteger),
)
sa.Index("ix_access_keys_project", access_keys.c.project_id, access_keys.c.user_id)

tokens = sa.Table(
    "tokens", metadata,
    #: public id, for listing and revoking; the token itself is never stored
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("user_id", sa.String(32), sa.ForeignKey("users.id", ondelete="CASCADE"),
              nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    #: a token made with an access key is bound to that key's project; else None
    sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id", ondelete="CASCADE")),
    sa.Column("description", sa.String(256), nullable=False, default=""),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.BigInteger),
    sa.Column("revoked_at", sa.BigInteger),
)
sa.Index("ix_tokens_user", tokens.c.user_id)

#: per project and pool: quota per resource (NULL: no limit), borrowing, fair-share weight
quotas = sa.Table(
    "quotas", metadata,
    sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("pool_id", sa.String(64), primary_key=True),
    sa.Column("cpu", sa.Float),
    sa.Column("memory_mb", sa.BigInteger),
    sa.Column("gpu", sa.Integer),
    sa.Column("borrowing", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("weight", sa.Float, nullable=False, server_default="1"),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    #: JSON: limits per accelerator by name ({"npu": 8}; revision 0005); NULL for none
    sa.Column("accelerators", sa.Text),
)

#: per project and pool: its recent mean dominant share (an exponential moving average),
#: what fair share orders projects by
project_usage = sa.Table(
    "project_usage", metadata,
    sa.Column("project_id", sa.String(64), primary_key=True),
    sa.Column("pool_id", sa.String(64), primary_key=True),
    sa.Column("share", sa.Float, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)


# --- versions, training metrics and models (revision 0004) --------------------------------

#: a job and every version made from it; outlives its versions so that a deleted version's
#: number is never given again
job_families = sa.Table(
    "job_families", metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("next_version", sa.Integer, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)

job_versions = sa.Table(
    "job_versions", metadata,
    sa.Column("job_id", sa.String(36), sa.ForeignKey("jobs.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("family_id", sa.String(36), nullable=False),
    sa.Column("number", sa.Integer, nullable=False),
    sa.Column("parent_job_id", sa.String(36)),
    sa.Column("parent_number", sa.Integer),
    sa.Column("resume", sa.Boolean, nullable=False, default=False),
    #: JSON: output channel -> the folder the family's versions write under
    sa.Column("output_bases", sa.Text, nullable=False, default="{}"),
    sa.Column("code_hash", sa.String(80)),
    sa.Column("git_commit", sa.String(64)),
    sa.Column("code_attempt", sa.Integer),
    #: JSON: metric -> last value, fixed when the job has ended
    sa.Column("final_metrics", sa.Text),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)
sa.Index("ix_job_versions_family", job_versions.c.family_id, job_versions.c.number)

training_metrics = sa.Table(
    "training_metrics", metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
              autoincrement=True),
    sa.Column("job_id", sa.String(36), sa.ForeignKey("jobs.id", ondelete="CASCADE"),
              nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("task", sa.String(64), nullable=False),
    sa.Column("step", sa.BigInteger),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("value", sa.Float, nullable=False),
    sa.Column("time", sa.BigInteger, nullable=False),
)
sa.Index("ix_training_metrics_job", training_metrics.c.job_id, training_metrics.c.id)

#: how far the metrics in each task's log and metrics file have been read
metric_offsets = sa.Table(
    "metric_offsets", metadata,
    sa.Column("job_id", sa.String(36), sa.ForeignKey("jobs.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True),
    sa.Column("task", sa.String(64), primary_key=True),
    sa.Column("source", sa.String(8), primary_key=True),
    sa.Column("position", sa.BigInteger, nullable=False),
)

models = sa.Table(
    "models", metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("next_version", sa.Integer, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.UniqueConstraint("project_id", "name", name="ux_models_project_name"),
)

model_versions = sa.Table(
    "model_versions", metadata,
    sa.Column("model_id", sa.String(36), sa.ForeignKey("models.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    #: where the files are: a local folder or an s3:// URL in the model store
    sa.Column("location", sa.Text, nullable=False),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("file_count", sa.Integer, nullable=False),
    sa.Column("source_job_id", sa.String(36), nullable=False),
    sa.Column("source_job_name", sa.String(64), nullable=False),
    sa.Column("source_version", sa.Integer),
    sa.Column("source_channel", sa.String(64), nullable=False),
    sa.Column("source_phase", sa.String(16), nullable=False),
    #: JSON: final metrics, parameters, input channel -> URL
    sa.Column("metrics", sa.Text, nullable=False),
    sa.Column("parameters", sa.Text, nullable=False),
    sa.Column("inputs", sa.Text, nullable=False),
    sa.Column("code_hash", sa.String(80)),
    sa.Column("git_commit", sa.String(64)),
    #: JSON: the dataset versions the job read, [{channel, dataset_id, dataset_name,
    #: version_id, version_name, content_hash}]
    sa.Column("datasets", sa.Text, nullable=False, server_default="[]"),
    sa.UniqueConstraint("model_id", "source_job_id", name="ux_model_versions_source"),
)

model_aliases = sa.Table(
    "model_aliases", metadata,
    sa.Column("model_id", sa.String(36), sa.ForeignKey("models.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("alias", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)

#: every move of a model's alias: what it named before and after, who moved it and why
model_alias_history = sa.Table(
    "model_alias_history", metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
              autoincrement=True),
    sa.Column("model_id", sa.String(36), sa.ForeignKey("models.id", ondelete="CASCADE"),
              nullable=False),
    sa.Column("alias", sa.String(64), nullable=False),
    #: None: the alias named nothing before (from) or was removed (to)
    sa.Column("from_version", sa.Integer),
    sa.Column("to_version", sa.Integer),
    sa.Column("time", sa.BigInteger, nullable=False),
    sa.Column("user_name", sa.String(128), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
)
sa.Index("ix_model_alias_history_alias", model_alias_history.c.model_id,
         model_alias_history.c.alias, model_alias_history.c.id)


#: which server schedules (domain/leadership.py): one row, id 1, written with the
#: database's clock only (milliseconds since the epoch)
leadership = sa.Table(
    "leadership", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    #: "host:pid:start" of the server holding the lease; NULL before the first
    sa.Column("holder", sa.String(255)),
    #: where the holder serves its API
    sa.Column("url", sa.Text),
    #: raised by one at every takeover: the fencing token every scheduler write checks
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("acquired_at", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
)

#: saved algorithms (ModelArts' algorithm management) that training jobs name by id; a
#: job copies what it takes at submit, so none refers to this table
algorithms = sa.Table(
    "algorithms", metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("description", sa.String(256), nullable=False),
    sa.Column("user_name", sa.String(128), nullable=False),
    #: the create body as stored: metadata, job_config, resource_requirements, advanced_config
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("create_time", sa.BigInteger, nullable=False),
    sa.Column("update_time", sa.BigInteger, nullable=False),
    sa.UniqueConstraint("project_id", "name", name="ux_algorithms_project_name"),
)
