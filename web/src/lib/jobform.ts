// The "Create training job" form: what it holds, the request body it makes, what it can
// tell is wrong before sending, and where each error the API answers belongs.

import type { Algorithm, Constraint, Flavor, Pool } from "../api/types";

export interface ParamRow {
  name: string;
  value: string;
  description?: string;
  constraint?: Constraint;
  /** one of the picked algorithm's: its name is fixed */
  fromAlgorithm: boolean;
}

/** what an input reads: a path or URL, or a version of a dataset of the project */
export type InputKind = "path" | "dataset";

export interface ChannelRow {
  name: string;
  path: string;
  description?: string;
  fromAlgorithm: boolean;
  /** inputs: what it reads (a path when not said) */
  kind?: InputKind;
  /** inputs: the kinds it may read (an algorithm's channel may take one only) */
  kinds?: InputKind[];
  /** a dataset input: the dataset's id and the version's */
  dataset?: string;
  version?: string;
}

export interface JobForm {
  name: string;
  description: string;
  source: "code" | "algorithm";
  algorithmId: string;
  codeDir: string;
  bootFile: string;
  engineId: string;
  /** one requirement a line */
  requirements: string;
  /** an OCI image the tasks run in, in place of an engine and packages */
  imageUrl: string;
  flavorId: string;
  nodeCount: string;
  poolId: string;
  params: ParamRow[];
  inputs: ChannelRow[];
  outputs: ChannelRow[];
  retries: string;
  unconditional: boolean;
  hangRetry: boolean;
  /** minutes; "" for no limit */
  maxRunTime: string;
  /** an output channel every attempt checkpoints to */
  checkpoint: string;
}

export const EMPTY: JobForm = {
  name: "", description: "", source: "code", algorithmId: "", codeDir: "", bootFile: "",
  engineId: "", requirements: "", imageUrl: "", flavorId: "", nodeCount: "1", poolId: "",
  params: [], inputs: [], outputs: [], retries: "", unconditional: false, hangRetry: false,
  maxRunTime: "", checkpoint: "",
};

const NAME_RE = /^[A-Za-z0-9_-]{1,64}$/;
const CHANNEL_RE = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;
const PARAM_RE = /^[^\s=]{1,128}$/;
const INT_RE = /^-?[0-9]+$/;
const MAX_RETRIES = 100;
const MAX_MINUTES = 365 * 24 * 60;

/** The form with `alg`'s parameters (defaults and constraints), inputs and outputs. */
export function withAlgorithm(form: JobForm, alg: Algorithm | undefined): JobForm {
  if (!alg) return { ...form, algorithmId: "", params: [], inputs: [], outputs: [], checkpoint: "" };
  const cfg = alg.job_config;
  const channel = (c: { name: string; description?: string | null }): ChannelRow => ({ name: c.name, path: "", description: c.description ?? undefined, fromAlgorithm: true });
  return {
    ...form,
    algorithmId: alg.metadata.id,
    params: (cfg.parameters ?? []).map((p) => ({
      name: p.name, value: p.value ?? "", description: p.description ?? undefined, constraint: p.constraint ?? undefined, fromAlgorithm: true,
    })),
    inputs: (cfg.inputs ?? []).map((c) => {
      const kinds = takes((c.remote_constraints ?? []).map((r) => r.data_type ?? ""));
      return { ...channel(c), kinds, kind: kinds[0] };
    }),
    outputs: (cfg.outputs ?? []).map(channel),
    checkpoint: "",
  };
}

/** What an algorithm's input channel takes, by its constraints' data types (either when
 * they name none), as the server judges it. */
export function takes(types: string[]): InputKind[] {
  const named = types.filter(Boolean);
  const path = !named.length || named.some((t) => t === "obs" || t === "OBS");
  const dataset = !named.length || named.some((t) => t === "dataset" || t === "DATASET");
  return [...(path ? ["path" as const] : []), ...(dataset ? ["dataset" as const] : [])];
}

function remote(c: ChannelRow) {
  if (c.kind === "dataset") return { dataset: { id: c.dataset ?? "", version_id: c.version ?? "" } };
  return { obs: { obs_url: c.path.trim() } };
}

function channels(rows: ChannelRow[]) {
  return rows.filter((c) => c.fromAlgorithm || c.name || c.path || c.dataset).map((c) => ({ name: c.name, remote: remote(c) }));
}

/** The body of POST /v2/{project_id}/training-jobs the form makes, as it is sent. */
export function requestBody(form: JobForm): Record<string, unknown> {
  const annotations: Record<string, string> = {};
  if (form.retries.trim()) annotations["fault-tolerance/job-retry-num"] = form.retries.trim();
  if (form.unconditional) annotations["fault-tolerance/job-unconditional-retry"] = "true";
  if (form.hangRetry) annotations["fault-tolerance/hang-retry"] = "true";
  const parameters = form.params.filter((p) => p.name).map((p) => ({ name: p.name, value: p.value }));
  const io = { parameters, inputs: channels(form.inputs), outputs: channels(form.outputs) };
  let algorithm: Record<string, unknown>;
  if (form.source === "algorithm") {
    algorithm = { id: form.algorithmId, ...io };
  } else {
    const requirements = form.requirements.split("\n").map((r) => r.trim()).filter(Boolean);
    const image = form.imageUrl.trim();
    const engine = { ...(form.engineId ? { engine_id: form.engineId } : {}), ...(requirements.length ? { requirements } : {}), ...(image ? { image_url: image } : {}) };
    algorithm = { code_dir: form.codeDir.trim(), boot_file: form.bootFile.trim(), ...io, ...(Object.keys(engine).length ? { engine } : {}) };
  }
  const resource = { flavor_id: form.flavorId || undefined, node_count: Number(form.nodeCount), pool_id: form.poolId || undefined };
  const faults = {
    ...(form.maxRunTime.trim() ? { max_run_time: Number(form.maxRunTime) * 60 } : {}),
    ...(form.checkpoint ? { checkpoint: form.checkpoint } : {}),
  };
  return {
    kind: "job",
    metadata: { name: form.name.trim(), ...(form.description ? { description: form.description } : {}), ...(Object.keys(annotations).length ? { annotations } : {}) },
    algorithm,
    spec: { resource, ...(Object.keys(faults).length ? { fault_tolerance: faults } : {}) },
  };
}

function number(value: string): number | null {
  const x = Number(value);
  return value.trim() !== "" && Number.isFinite(x) ? x : null;
}

/** What is wrong with `value` under `c` (as the server says it), or null. */
export function violation(value: string, c: Constraint): string | null {
  if (c.type === "Integer" && !INT_RE.test(value.trim())) return `'${value}' is not an Integer`;
  if (c.type === "Float" && number(value) === null) return `'${value}' is not a Float`;
  if (c.type === "Boolean" && !["true", "false"].includes(value.toLowerCase())) return `'${value}' is not a Boolean (true or false)`;
  const range = c.valid_range ?? [];
  if (c.valid_type === "Range" && range.length === 2) {
    const x = number(value);
    if (x === null) return `'${value}' is not a number in [${range[0]}, ${range[1]}]`;
    if (x < Number(range[0]) || x > Number(range[1])) return `${value} is outside [${range[0]}, ${range[1]}]`;
  }
  if (c.valid_type === "Enumeration" && !range.includes(value)) return `'${value}' is not one of ${range.join(", ")}`;
  return null;
}

function checkParams(form: JobForm, out: Record<string, string>) {
  const names = form.params.map((p) => p.name);
  form.params.forEach((p, i) => {
    const key = `param:${i}`;
    if (!p.fromAlgorithm && p.name && !PARAM_RE.test(p.name)) out[key] = "a name is 1-128 characters without spaces or '='";
    else if (!p.fromAlgorithm && !p.name && p.value) out[key] = "give the parameter a name";
    else if (p.name && names.indexOf(p.name) !== i) out[key] = `'${p.name}' is given twice`;
    else if (p.value === "" && p.constraint?.required) out[key] = "required: give it a value";
    else if (p.value !== "" && p.constraint) {
      const problem = violation(p.value, p.constraint);
      if (problem) out[key] = problem;
    }
  });
}

function checkChannels(rows: ChannelRow[], what: "input" | "output", out: Record<string, string>) {
  rows.forEach((c, i) => {
    const key = `${what}:${i}`;
    const given = c.kind === "dataset" ? !!c.dataset : !!c.path.trim();
    if (!c.fromAlgorithm && !c.name && given) out[key] = "give the channel a name";
    else if (c.name && !CHANNEL_RE.test(c.name)) out[key] = "a name starts with a letter or '_' and holds letters, digits, '_' or '-'";
    else if ((c.fromAlgorithm || c.name) && c.kind === "dataset" && !c.dataset) out[key] = "pick a dataset";
    else if ((c.fromAlgorithm || c.name) && c.kind === "dataset" && !c.version) out[key] = "pick a version of the dataset";
    else if ((c.fromAlgorithm || c.name) && !given) out[key] = `give ${what === "input" ? "its data's" : "its"} path`;
  });
}

/** What the form can tell is wrong without asking the server, by field. */
export function check(form: JobForm): Record<string, string> {
  const out: Record<string, string> = {};
  if (!NAME_RE.test(form.name.trim())) out.name = "1-64 letters, digits, '_' or '-'";
  if (form.source === "algorithm" && !form.algorithmId) out.algorithm = "pick an algorithm";
  if (form.source === "code" && !form.codeDir.trim()) out.code_dir = "give the folder of the code";
  if (form.source === "code" && !form.bootFile.trim()) out.boot_file = "give the file to run, in the code folder";
  if (form.source === "code" && form.imageUrl.trim() && (form.engineId || form.requirements.trim())) out.image = "an image is the whole environment: leave the engine and the packages empty";
  const nodes = Number(form.nodeCount);
  if (!INT_RE.test(form.nodeCount.trim()) || nodes < 1 || nodes > 1024) out.node_count = "a whole number from 1 to 1024";
  const retries = Number(form.retries);
  if (form.retries.trim() && (!INT_RE.test(form.retries.trim()) || retries < 0 || retries > MAX_RETRIES)) out.retries = `a whole number from 0 to ${MAX_RETRIES}`;
  const minutes = Number(form.maxRunTime);
  if (form.maxRunTime.trim() && (!INT_RE.test(form.maxRunTime.trim()) || minutes < 1 || minutes > MAX_MINUTES)) out.max_run_time = `whole minutes from 1 to ${MAX_MINUTES} (a year)`;
  checkParams(form, out);
  checkChannels(form.inputs, "input", out);
  checkChannels(form.outputs, "output", out);
  return out;
}

// Where an answer's message belongs: the first rule that matches it names the field.
const RULES: [RegExp, (m: RegExpMatchArray, form: JobForm) => string | null][] = [
  [/^metadata\.name\b|^a training job named /, () => "name"],
  [/^metadata\.description\b/, () => "description"],
  [/fault-tolerance\/|^spec\.fault_tolerance\.checkpoint/, (m) => (m[0].includes("checkpoint") ? "checkpoint" : "retries")],
  [/^spec\.(fault_tolerance\.max_run_time|auto_stop)\b/, () => "max_run_time"],
  [/^(?:algorithm\.parameters\.(\d+)|parameter '([^']*)')/, (m, f) => row("param", m, f.params)],
  [/^(?:algorithm\.inputs\.(\d+)|input '([^']*)')/, (m, f) => row("input", m, f.inputs)],
  [/^(?:algorithm\.outputs\.(\d+)|output '([^']*)')/, (m, f) => row("output", m, f.outputs)],
  [/algorithm\.engine\.requirements|^requirement /, () => "requirements"],
  [/engine\.image_url\b/, () => "image"],
  [/^engine '|^algorithm\.engine\b/, () => "engine"],
  [/algorithm\.code_dir/, () => "code_dir"],
  [/algorithm\.boot_file/, () => "boot_file"],
  [/^algorithm\.(id|name)\b/, () => "algorithm"],
  [/needs host_distributed_mode|^(spec\.resource\.)?node_count\b/, () => "node_count"],
  [/needs (flavor_type|device_distributed_mode)|^flavor '|^spec\.resource\.flavor|GPUs$/, () => "flavor"],
  [/^(spec\.resource\.)?pool_id\b|^pool '/, () => "pool"],
];

function row(what: string, m: RegExpMatchArray, rows: { name: string }[]): string | null {
  const i = m[1] !== undefined ? Number(m[1]) : rows.findIndex((r) => r.name === m[2]);
  return i >= 0 ? `${what}:${i}` : null;
}

/** The parts of an answer's message: the API joins field errors with "; " (each "where: what"). */
function parts(message: string): string[] {
  return message.split(/; (?=[a-z_]+(?:\.[a-z0-9_]+)*: )/);
}

/** An error the API answered, beside the fields it names; the rest under `top`. `shown`:
 * the fields on the page (an error of a field not shown goes to the top). */
export function placeErrors(message: string, form: JobForm, shown: (key: string) => boolean): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of parts(message)) {
    const part = raw.replace(/^algorithm: /, "");
    let key: string | null = null;
    for (const [re, pick] of RULES) {
      const m = part.match(re);
      if (m && (key = pick(m, form))) break;
    }
    const at = key && shown(key) ? key : "top";
    out[at] = out[at] ? `${out[at]}; ${part}` : part;
  }
  return out;
}

/** How many tasks of `flavor` the pool's free resources hold now (null: not known). */
export function roomFor(flavor: Flavor | undefined, pool: Pool | undefined): number | null {
  const info = flavor?.flavor_info;
  if (!info || !pool) return null;
  const cpu = info.cpu?.core_num ?? 0;
  const mem = info.memory?.size ?? 0;
  const gpu = info.gpu?.unit_num ?? 0;
  const fits = [cpu ? pool.free.cpu / cpu : Infinity, mem ? pool.free.memory_gb / mem : Infinity, gpu ? pool.free.gpu / gpu : Infinity];
  const n = Math.min(...fits);
  return Number.isFinite(n) ? Math.max(0, Math.floor(n + 1e-9)) : null;
}
