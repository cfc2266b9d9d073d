// The shapes of corral's answers, as far as the console reads them (docs/api.md).

export interface Project {
  project_id: string;
  name: string;
  created_at: number;
  role?: string | null;
}

export interface Whoami {
  user: string;
  is_admin: boolean;
  credential: string;
  projects: Project[];
}

export interface RunningRecord {
  start_at: number; // seconds
  end_at?: number;
  start_type: string;
  end_reason?: string;
  end_related_task?: string;
  end_recover?: string;
}

export interface TaskStatus {
  task: string;
  exit_code?: number;
  message?: string;
}

export interface JobStatus {
  phase: string;
  secondary_phase: string;
  duration: number;
  start_time: number;
  tasks: string[];
  task_statuses: TaskStatus[];
  running_records: RunningRecord[];
  reason?: string | null;
  failure_class?: string | null;
  queue?: { pool_id: string; priority: number; jobs_ahead: number; wait_code: string };
  borrowed?: boolean;
  preempting?: boolean;
}

/** A dataset version an input reads (pinned at submit: ids, names, where its files are). */
export interface DatasetRef {
  id?: string;
  version_id?: string;
  obs_url?: string;
  name?: string;
  version_name?: string;
}

export interface Channel {
  name: string;
  remote?: { obs?: { obs_url?: string }; dataset?: DatasetRef };
}

export interface Job {
  kind: string;
  metadata: {
    id: string;
    name: string;
    description: string;
    create_time: number;
    user_name: string;
    annotations: Record<string, string>;
    version?: string;
    family_id?: string;
    /** the pipeline, loop or notebook that made it */
    owner?: { kind: string; id: string; role: string };
  };
  status: JobStatus;
  algorithm: {
    code_dir?: string;
    boot_file?: string;
    command?: string;
    engine?: { engine_id?: string; engine_name?: string; engine_version?: string };
    parameters?: { name: string; value?: string }[];
    inputs?: Channel[];
    outputs?: Channel[];
    environments?: Record<string, string>[];
    /** a search's `auto_search` (docs/search.md) */
    policies?: { auto_search?: AutoSearch } | null;
  };
  spec: {
    resource: { flavor_id: string; flavor_name?: string; node_count: number; pool_id: string };
    schedule_policy?: { priority?: number };
  };
  /** a job with `tensorboard/enable: true`: its TensorBoard's page, and what opens it for the caller */
  endpoints?: { tensorboard?: { url: string; token: string } };
}

export interface SearchResult {
  total: number;
  count: number;
  limit: number;
  offset: number;
  items: Job[];
}

export interface JobEvent {
  message: string;
  level: string;
  time: string;
  source: string;
}

export interface Version {
  version_id: string;
  version_name: string;
  pre_version_id?: string | null;
  pre_version_name?: string | null;
  resume: boolean;
  create_time: number;
  phase: string;
  secondary_phase: string;
  duration: number;
  final_metrics: Record<string, number> | null;
  code_hash?: string | null;
  git_commit?: string | null;
  parameters: Record<string, string>;
  inputs: Record<string, string>;
  outputs: Record<string, string>;
  code_dir?: string | null;
  boot_file?: string | null;
  command?: string | null;
  flavor_id: string;
  node_count: number;
  reason?: string | null;
}

export interface Series {
  metric: string;
  value: number[];
  steps?: (number | null)[];
  times?: number[];
  tasks?: string[];
}

export interface LogWindow {
  content: string;
  offset: number;
  next_offset: number;
  full_size: number;
  attempt: number;
  finished: boolean;
}

export interface Amounts {
  cpu: number;
  memory_gb: number;
  gpu: number;
  accelerators?: Record<string, number>;
}

export interface Pool {
  pool_id: string;
  executor?: string;
  nodes: ({ name: string; gpu_type: string } & Amounts)[];
  capacity: Amounts;
  used: Amounts;
  free: Amounts;
  pending_jobs: number;
  projects: {
    project_id: string;
    name: string;
    used: Amounts;
    recent_share: number;
    limits?: Partial<Amounts>;
    borrowing?: boolean;
    weight?: number;
  }[];
}

export interface QueuedJob {
  position: number;
  id: string | null;
  name: string | null;
  project_id: string;
  priority: number;
  node_count: number;
  flavor_id: string;
  create_time: number;
  phase: string;
  wait_code: string;
  reason: string;
}

export interface PipelineStatus {
  state: string;
  progress: number;
  attempt: number;
  start_time: number;
  end_time: number | null;
  duration: number;
  message: string | null;
  stopping: boolean;
  timed_out: boolean;
}

export interface PipelineSummary {
  id: string;
  name: string;
  description: string;
  user_name: string;
  create_time: number;
  status: PipelineStatus;
  runs: Record<string, number>;
  model: { name: string; version: number | null } | null;
}

export interface DagTask {
  name: string;
  depends_on: string[];
  trigger: string;
  when: string | null;
  finally: boolean;
  items: number | null;
  parallelism: number | null;
  cache: boolean;
}

export interface PipelineRun {
  key: string;
  task: string;
  item: number | null;
  state: string;
  origin: string;
  job_id: string | null;
  job_phase: string | null;
  start_time: number;
  end_time: number | null;
  duration: number;
  message: string | null;
  metrics: Record<string, number> | null;
}

export interface Pipeline extends PipelineSummary {
  parameters: Record<string, string>;
  dag: DagTask[];
  tasks: PipelineRun[];
  attempts: (PipelineStatus & { number: number; mode: string | null; from_task: string | null })[];
}

export interface Round {
  number: number;
  state: string;
  start_time: number;
  end_time: number | null;
  trigger: Record<string, unknown>;
  train_samples: number;
  eval_samples: number;
  base_model: string | null;
  current_model: string | null;
  new_version: number | null;
  train_job_id: string | null;
  train_job_name: string | null;
  eval_job_id: string | null;
  eval_job_name: string | null;
  metrics: { new: Record<string, number>; current: Record<string, number> };
  decision: string | null;
  rule: string | null;
  message: string | null;
  deploy: { model: string; state: string; message: string | null } | null;
}

export interface Loop {
  metadata: { id: string; name: string; description: string; create_time: number; user_name: string };
  spec: Record<string, unknown>;
  status: {
    state: string;
    message: string | null;
    stage: string;
    num_of_samples: number;
    eval_samples: number;
    rounds_started: number;
    dataset: { name: string | null; number_of_samples: number | null };
    model: { name: string; alias: string; version: number | null; initial: string };
    service: { job_id: string; job_name: string; phase: string } | null;
    conditions: { stage: string; type: string; reason: string; message: string; lastTransitionTime: number | null }[];
    rounds: Round[];
    deploys: { seq: number; round: number | null; model: string; state: string; reason: string | null; user_name: string | null; create_time: number; message: string | null }[];
  };
}

export interface ModelVersion {
  model_name: string;
  version: number;
  aliases: string[];
  create_time: number;
  location: string;
  size_bytes: number;
  file_count: number;
  source_job_id: string;
  source_job_name: string;
  source_version: string | null;
  source_channel: string;
  source_phase: string;
  metrics: Record<string, number>;
  parameters: Record<string, string>;
  /** the dataset versions its job read: job -> dataset version -> this version */
  datasets?: DatasetRead[];
}

export interface DatasetRead {
  channel: string;
  dataset_id: string | null;
  dataset_name: string | null;
  version_id: string | null;
  version_name: string | null;
  content_hash: string | null;
  number_of_samples: number | null;
}

export interface Model {
  id: string;
  name: string;
  create_time: number;
  update_time: number;
  latest_version: number | null;
  version_count: number;
  aliases: Record<string, number>;
  versions?: ModelVersion[] | null;
}

export interface AliasMove {
  from_version: number | null;
  to_version: number | null;
  time: number;
  user_name: string | null;
  reason: string | null;
}

export interface Info {
  version: string;
  default_project_id: string;
  database: string;
  home: string;
  containment: string;
  nodes: { name: string; cpu: number; memory_mb: number; gpus: number; accelerators: Record<string, number> }[];
  /** the server that answered, as a leadership lease names it */
  server?: string;
  /** the server that schedules; null while none holds the lease */
  leader?: Leader | null;
}

/** GET /corral/node-usage: each node's own use over time, machine-wide */
export interface NodeUsage {
  name: string;
  cpu: number;
  memory_mb: number;
  gpus: number;
  gpu_memory_mb: number;
  times: number[];
  cpu_percent: number[];
  mem_mb: number[];
  /** null: no GPU figures for this node */
  gpu_util: number[] | null;
  gpu_mem_mb: number[] | null;
}

export interface Leader {
  server: string;
  name: string;
  url: string | null;
  epoch: number;
  since: number;
  this_server: boolean;
}

export interface Flavor {
  flavor_id: string;
  flavor_name: string;
  flavor_type: string;
  /** the most nodes a job of it may ask for */
  max_num?: number;
  flavor_info?: {
    cpu?: { core_num: number };
    memory?: { size: number; unit: string };
    gpu?: { unit_num: number; product_name?: string } | null;
  };
}

/** GET /v2/{project_id}/training-job-engines: the server's interpreters */
export interface Engine {
  engine_id: string;
  engine_name: string;
  engine_version: string;
}

/** GET /v2/{project_id}/datasets: a dataset (an index file of samples) */
export interface Dataset {
  id: string;
  name: string;
  description: string;
  number_of_samples: number;
}

/** GET /v2/{project_id}/datasets/{dataset}/versions: a frozen version of a dataset */
export interface DatasetVersion {
  version_id: string;
  version_name: string;
  dataset_id: string;
  number_of_samples: number;
  create_time: number;
  description: string;
}

/** What a parameter of an algorithm may be (ModelArts' constraint). */
export interface Constraint {
  type?: string;
  editable?: boolean;
  required?: boolean;
  valid_type?: string;
  valid_range?: string[];
}

/** A saved algorithm (/v2/{project_id}/algorithms): what a job made from it runs. */
export interface Algorithm {
  metadata: { id: string; name: string; description: string; user_name: string; create_time: number };
  job_config: {
    code_dir?: string;
    boot_file?: string;
    command?: string;
    parameters?: { name: string; value?: string; description?: string | null; constraint?: Constraint | null }[];
    inputs?: { name: string; description?: string | null; remote_constraints?: { data_type?: string | null }[] }[];
    outputs?: { name: string; description?: string | null }[];
    engine?: { engine_id?: string; engine_name?: string; engine_version?: string; requirements?: string[] } | null;
    parameters_customization?: boolean | null;
  };
  resource_requirements?: { key: string; value: string[] }[];
}

export interface User {
  name: string;
  is_admin: boolean;
  created_at: number;
  projects: Record<string, string>;
}

export interface Key {
  access_key: string;
  project_id: string;
  user_name: string;
  description: string;
  created_at: number;
  revoked_at?: number | null;
  secret_key?: string;
}

export interface Token {
  id: string;
  description: string;
  project_id?: string | null;
  created_at: number;
  expires_at?: number | null;
  revoked_at?: number | null;
  token?: string;
}

// ModelArts' notebook instances (/v1/{project_id}/notebooks)
export interface Notebook {
  id: string;
  name: string;
  description?: string;
  flavor: string;
  status: string;
  url?: string;
  token?: string;
  fail_reason?: string;
  image?: { id?: string; name?: string };
  lease?: { create_at?: number; duration?: number; enable?: boolean; type?: string; update_at?: number };
  action_progress?: { step: number; status: string; step_description?: string }[];
}

export interface NotebookList {
  current: number;
  data: Notebook[];
  pages: number;
  size: number;
  total: number;
}

/** A job's `policies.auto_search`: the job is a hyperparameter search. */
export interface AutoSearch {
  reward_attrs: { name: string; mode?: string; regex?: string }[];
  search_params: {
    name: string;
    param_type: string;
    lower_bound?: string;
    upper_bound?: string;
    discrete_points_num?: string;
    discrete_values?: string[];
  }[];
  algo_configs: { name: string; params?: { key: string; value: string; type?: string }[] }[];
}

/** `.../autosearch-trials`: a row of strings a trial, `header` naming the columns. */
export interface TrialsTable {
  total: number;
  items: { header: string[]; data: string[][] };
}

/** `.../autosearch-trial-rewards`: each trial's intermediate rewards by step. */
export interface TrialRewards {
  reward: string;
  mode: "max" | "min";
  trials: { trial_id: string; status: string; job_id: string; steps: number[]; values: number[] }[];
}

/** `.../autosearch-parameter-analysis`: the parameters, most important first ("" before two trials completed). */
export interface ParameterAnalysis {
  header: string[];
  data: string[][];
}
