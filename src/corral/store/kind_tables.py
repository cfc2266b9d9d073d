"""The tables of the job kinds (kinds/): their event log, incremental-learning datasets and
loops, pipelines, notebooks. They live on `schema.metadata` beside the jobs they own;
whatever needs every table (the migrations' environment, a test comparing the schema with
them) imports this module too.
"""

from __future__ import annotations

import sqlalchemy as sa

from corral.store import schema

metadata = schema.metadata

#: the event log of the job kinds' own objects (kinds/), as job_events is of jobs
kind_events = sa.Table(
    "kind_events", metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
              autoincrement=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("object_id", sa.String(36), nullable=False),
    sa.Column("time", sa.BigInteger, nullable=False),
    sa.Column("level", sa.String(8), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
)
sa.Index("ix_kind_events_object", kind_events.c.kind, kind_events.c.object_id,
         kind_events.c.id)

# --- incremental learning (revision 0008) ---------------------------------------------------

#: datasets: an index file of samples, one a line (kinds/incremental reads them)
datasets = sa.Table(
    "datasets", metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("description", sa.String(256), nullable=False),
    #: the index file: a local path or an s3:// URL
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("format", sa.String(8), nullable=False),
    sa.Column("number_of_samples", sa.BigInteger, nullable=False),
    #: what the file looked like when its samples were counted (size and mtime, or ETag)
    sa.Column("stamp", sa.String(256)),
    sa.Column("checked_at", sa.BigInteger),
    sa.Column("user_name", sa.String(128), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.UniqueConstraint("project_id", "name", name="ux_datasets_project_name"),
)

#: a dataset's versions: its samples frozen as they were, for jobs to read
dataset_versions = sa.Table(
    "dataset_versions", metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("dataset_id", sa.String(36), sa.ForeignKey("datasets.id", ondelete="CASCADE"),
              nullable=False),
    sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
    #: 1, 2, ... in its dataset (its name: V0001, V0002, ...)
    sa.Column("number", sa.Integer, nullable=False),
    sa.Column("description", sa.String(256), nullable=False),
    #: the folder of its frozen files: local, or an s3:// URL beside a remote index file
    sa.Column("location", sa.Text, nullable=False),
    sa.Column("format", sa.String(8), nullable=False),
    sa.Column("number_of_samples", sa.BigInteger, nullable=False),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    #: sha256 of its manifest's files (path, size, sha256 each)
    sa.Column("content_hash", sa.String(80), nullable=False),
    #: JSON: the manifest's files, [{path, size, sha256}]
    sa.Column("files", sa.Text, nullable=False),
    sa.Column("user_name", sa.String(128), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    #: when it was deleted (its files are gone; the row stays so that its number is not
    #: given to another version)
    sa.Column("deleted_at", sa.BigInteger),
    sa.UniqueConstraint("dataset_id", "number", name="ux_dataset_versions_number"),
)

#: incremental-learning loops (IncrementalLearningJob): their spec and where they stand
il_loops = sa.Table(
    "il_loops", metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("description", sa.String(256), nullable=False),
    sa.Column("user_name", sa.String(128), nullable=False),
    #: JSON: the LoopSpec as created
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("dataset_id", sa.String(36), sa.ForeignKey("datasets.id"), nullable=False),
    #: the model the loop started from, pinned at creation
    sa.Column("initial_model", sa.String(64), nullable=False),
    sa.Column("initial_version", sa.Integer, nullable=False),
    #: evalSpec.initialModel, pinned at creation
    sa.Column("eval_model", sa.String(64)),
    sa.Column("eval_version", sa.Integer),
    #: the number of the latest round started (0: none yet)
    sa.Column("rounds", sa.Integer, nullable=False),
    #: rounds failed in a row
    sa.Column("failed_rounds", sa.Integer, nullable=False),
    #: no round starts before this (a backoff after a failed round)
    sa.Column("not_before", sa.BigInteger),
    #: when the train trigger is checked next
    sa.Column("next_check_at", sa.BigInteger, nullable=False),
    #: a user asked for a round now ("train now"), and who
    sa.Column("trigger_requested_at", sa.BigInteger),
    sa.Column("trigger_requested_by", sa.String(128)),
    #: the dataset's samples split so far, and the ranges of line numbers (JSON) of the
    #: training samples waiting for a round and of the evaluation versions
    sa.Column("split_upto", sa.BigInteger, nullable=False),
    sa.Column("train_pending", sa.Text, nullable=False),
    sa.Column("eval_versions", sa.Text, nullable=False),
    #: deploys made so far, and the number of the service job started last
    sa.Column("deploys", sa.Integer, nullable=False),
    sa.Column("services", sa.Integer, nullable=False),
    #: how far the hard-examples file has been read (bytes)
    sa.Column("hard_examples_read", sa.BigInteger, nullable=False),
    #: why it stopped or failed
    sa.Column("message", sa.Text),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.UniqueConstraint("project_id", "name", name="ux_il_loops_project_name"),
)

#: one record per round of a loop: its trigger, jobs, evaluation set, metrics, verdict
il_rounds = sa.Table(
    "il_rounds", metadata,
    sa.Column("loop_id", sa.String(36), sa.ForeignKey("il_loops.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("started_at", sa.BigInteger, nullable=False),
    sa.Column("ended_at", sa.BigInteger),
    #: JSON: what started it (num_of_samples, the rule, or who asked)
    sa.Column("trigger", sa.Text, nullable=False),
    #: JSON: the ranges of training samples it took (given back if it fails)
    sa.Column("train_ranges", sa.Text, nullable=False),
    sa.Column("train_samples", sa.Integer, nullable=False),
    sa.Column("eval_samples", sa.Integer, nullable=False),
    #: the content hash of the frozen evaluation set
    sa.Column("eval_hash", sa.String(80), nullable=False),
    #: the model training started from, and the one the new model was judged against
    sa.Column("base_model", sa.String(64), nullable=False),
    sa.Column("base_version", sa.Integer, nullable=False),
    sa.Column("current_model", sa.String(64)),
    sa.Column("current_version", sa.Integer),
    sa.Column("train_job_id", sa.String(36)),
    sa.Column("eval_job_id", sa.String(36)),
    #: the version the train job's model was registered as
    sa.Column("new_version", sa.Integer),
    #: JSON: each model's metrics as the evaluation reported them
    sa.Column("metrics_new", sa.Text),
    sa.Column("metrics_current", sa.Text),
    #: promote or reject, and the rule that decided (with the values it read)
    sa.Column("decision", sa.String(16)),
    sa.Column("rule", sa.Text),
    #: the deploy of the new model (il_deploys.seq)
    sa.Column("deploy_seq", sa.Integer),
    #: why it failed
    sa.Column("message", sa.Text),
)

#: every model a loop wrote for its service (model_config.json), and its acknowledgement
il_deploys = sa.Table(
    "il_deploys", metadata,
    sa.Column("loop_id", sa.String(36), sa.ForeignKey("il_loops.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("round", sa.Integer),
    sa.Column("model_name", sa.String(64), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    #: model_config.json's model_update_time for this deploy
    sa.Column("token", sa.String(64), nullable=False),
    #: it moves the loop's alias once loaded (a promotion or a rollback)
    sa.Column("moves_alias", sa.Boolean, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("user_name", sa.String(128), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    #: the role of the service job that is to load it
    sa.Column("service_role", sa.String(64)),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("written_at", sa.BigInteger),
    sa.Column("deadline", sa.BigInteger),
    sa.Column("ended_at", sa.BigInteger),
    sa.Column("message", sa.Text),
)


# --- pipelines (revision 0009; kinds/pipelines) -------------------------------------------

#: a DAG of training jobs; its state is its current attempt's
pipelines = sa.Table(
    "pipelines", metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("name", sa.String(64), nullable=False),
    sa.Column("description", sa.String(256), nullable=False),
    sa.Column("user_name", sa.String(128), nullable=False),
    #: the PipelineCreate as accepted (JSON)
    sa.Column("spec", sa.Text, nullable=False),
    #: the folder its task runs' output folders go under
    sa.Column("output_base", sa.Text, nullable=False),
    #: its current (latest) attempt
    sa.Column("attempt", sa.Integer, nullable=False),
    #: the model registered when it succeeded
    sa.Column("model_name", sa.String(64)),
    sa.Column("model_version", sa.Integer),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    #: asked to be deleted while it ran: purged once its jobs have ended
    sa.Column("deleted_at", sa.BigInteger),
)
LIVE_PIPELINE = pipelines.c.deleted_at.is_(None)
sa.Index("ux_pipelines_project_name_live", pipelines.c.project_id, pipelines.c.name,
         unique=True, sqlite_where=LIVE_PIPELINE, postgresql_where=LIVE_PIPELINE)
sa.Index("ix_pipelines_project_created", pipelines.c.project_id, pipelines.c.created_at)

#: one run of a pipeline: the first, and one per rerun
pipeline_attempts = sa.Table(
    "pipeline_attempts", metadata,
    sa.Column("pipeline_id", sa.String(36), sa.ForeignKey("pipelines.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True),
    #: domain.pipelines.status.Status
    sa.Column("state", sa.String(16), nullable=False),
    #: initial, from_failed, from_task or all
    sa.Column("mode", sa.String(16), nullable=False),
    sa.Column("from_task", sa.String(32)),
    #: JSON: the pipeline's parameters for this attempt; a task's own overrides
    sa.Column("parameters", sa.Text, nullable=False),
    sa.Column("overrides", sa.Text, nullable=False),
    #: the share of its task runs that have ended, in percent (never goes down)
    sa.Column("progress", sa.Integer, nullable=False),
    sa.Column("message", sa.Text),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("started_at", sa.BigInteger),
    sa.Column("ended_at", sa.BigInteger),
    sa.Column("stop_requested_at", sa.BigInteger),
    sa.Column("timed_out_at", sa.BigInteger),
)
sa.Index("ix_pipeline_attempts_state", pipeline_attempts.c.state)

#: one run of a task (of an item of it) in an attempt
pipeline_runs = sa.Table(
    "pipeline_runs", metadata,
    sa.Column("pipeline_id", sa.String(36), sa.ForeignKey("pipelines.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True),
    #: `train`, or `train[1]` for an item of a task that fans out
    sa.Column("key", sa.String(48), primary_key=True),
    sa.Column("project_id", sa.String(64), nullable=False),
    sa.Column("task", sa.String(32), nullable=False),
    sa.Column("item", sa.Integer),
    #: domain.pipelines.status.TaskState
    sa.Column("state", sa.String(16), nullable=False),
    #: run (its own job), reused (an earlier attempt's run) or cached (an earlier identical
    #: run's outputs)
    sa.Column("origin", sa.String(8), nullable=False),
    #: the training job that made its outputs (for a reused or cached run, the earlier one's)
    sa.Column("job_id", sa.String(36)),
    #: where a reused or cached run's outputs come from: "<pipeline id>/<attempt>/<key>"
    sa.Column("source", sa.String(128)),
    sa.Column("cache_key", sa.String(80)),
    #: JSON: what it was given and what it made (channel -> location, metric -> value)
    sa.Column("parameters", sa.Text),
    sa.Column("inputs", sa.Text),
    sa.Column("outputs", sa.Text),
    sa.Column("metrics", sa.Text),
    sa.Column("message", sa.Text),
    sa.Column("submitted_at", sa.BigInteger),
    sa.Column("ended_at", sa.BigInteger),
    #: its output folders were removed (clean): it cannot be reused or cached from
    sa.Column("outputs_removed_at", sa.BigInteger),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)
CACHEABLE = pipeline_runs.c.cache_key.is_not(None)
sa.Index("ix_pipeline_runs_cache", pipeline_runs.c.project_id, pipeline_runs.c.cache_key,
         sqlite_where=CACHEABLE, postgresql_where=CACHEABLE)

# --- notebooks (revision 0010) -------------------------------------------------------------

#: a JupyterLab a user keeps (kinds/notebooks/): its settings, its state, its current
#: session (an owned job in role `session-<n>`) and how that session is reached and leased
notebooks = sa.Table(
    "notebooks", metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("project_id", sa.String(64), sa.ForeignKey("projects.id"), nullable=False),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("description", sa.String(512), nullable=False),
    #: who made it: its sessions run as their jobs
    sa.Column("user_name", sa.String(128), nullable=False),
    sa.Column("flavor_id", sa.String(128), nullable=False),
    #: the engine whose Python runs JupyterLab
    sa.Column("image_id", sa.String(128), nullable=False),
    sa.Column("pool_id", sa.String(64)),
    #: the folder its sessions work in, kept from one session to the next
    sa.Column("workspace", sa.Text, nullable=False),
    #: JSON: the volume as asked for (category, ownership, uri)
    sa.Column("volume", sa.Text, nullable=False),
    #: a domain.notebooks.State
    sa.Column("state", sa.String(16), nullable=False),
    #: the number of its latest session (0 before the first)
    sa.Column("session", sa.Integer, nullable=False),
    sa.Column("lease_type", sa.String(8), nullable=False),
    #: timing: how long a session runs; idle: how long nothing may happen in it
    sa.Column("lease_ms", sa.BigInteger, nullable=False),
    sa.Column("lease_updated_at", sa.BigInteger),
    #: when the latest session was asked for, came up, is to stop (timing), was asked to stop
    sa.Column("started_at", sa.BigInteger),
    sa.Column("ready_at", sa.BigInteger),
    sa.Column("stops_at", sa.BigInteger),
    sa.Column("stop_requested_at", sa.BigInteger),
    #: why the latest session stopped or failed
    sa.Column("stop_reason", sa.Text),
    #: where the session's JupyterLab listens on its node, once it answers
    sa.Column("port", sa.Integer),
    #: the session's secrets: JupyterLab's own token (never shown), the one-time token of
    #: its URL, and the value of the cookie that URL sets
    sa.Column("jupyter_token", sa.String(64)),
    sa.Column("access_token", sa.String(64)),
    sa.Column("cookie_secret", sa.String(64)),
    #: the latest change made through the proxy, and the latest activity seen (idle leases)
    sa.Column("last_request_at", sa.BigInteger),
    sa.Column("last_active_at", sa.BigInteger),
    sa.Column("checked_at", sa.BigInteger),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)
sa.Index("ix_notebooks_project", notebooks.c.project_id, notebooks.c.created_at)
sa.Index("ix_notebooks_state", notebooks.c.state)

# --- hyperparameter searches (revision 0013) ------------------------------------------------

#: a training job that is a search (kinds/search/): its policy as checked at submit, what
#: it registers, and how it ended; the job's own row says its phase
searches = sa.Table(
    "searches", metadata,
    sa.Column("job_id", sa.String(36), sa.ForeignKey("jobs.id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("project_id", sa.String(64), nullable=False),
    #: JSON: the job's `policies.auto_search`, as accepted
    sa.Column("policy", sa.Text, nullable=False),
    #: the model its best trial's outputs are registered as (None: none), and from which
    #: output channel
    sa.Column("model_name", sa.String(64)),
    sa.Column("model_channel", sa.String(64)),
    sa.Column("model_version", sa.Integer),
    sa.Column("best_trial", sa.Integer),
    sa.Column("started_at", sa.BigInteger),
    sa.Column("ended_at", sa.BigInteger),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)
sa.Index("ix_searches_live", searches.c.ended_at)

#: a search's trials: each an owned job in role `trial-<number>`, its sampled parameters
#: and what it reported (enough to rebuild the sampler's study after a restart)
search_trials = sa.Table(
    "search_trials", metadata,
    sa.Column("search_id", sa.String(36), sa.ForeignKey("searches.job_id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True),
    sa.Column("job_id", sa.String(36), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    #: what asked a stopping trial to stop (domain.search.trials.StopCause)
    sa.Column("stop_cause", sa.String(16)),
    #: why it ended as it did, in words
    sa.Column("reason", sa.Text),
    #: JSON: parameter name -> value, as passed to its job
    sa.Column("params", sa.Text, nullable=False),
    #: JSON: the sampler's attributes of the trial (a grid's cell)
    sa.Column("system_attrs", sa.Text, nullable=False),
    #: JSON: step -> intermediate reward, as reported so far
    sa.Column("intermediate", sa.Text, nullable=False),
    sa.Column("reward", sa.Float),
    sa.Column("started_at", sa.BigInteger, nullable=False),
    sa.Column("ended_at", sa.BigInteger),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
)
