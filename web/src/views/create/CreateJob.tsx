// "Create training job": a form that makes the body of POST /v2/{project_id}/training-jobs,
// shown as it grows, and puts what the server refuses beside the field it is about.

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useState, type FormEvent } from "react";
import { Link, useNavigate } from "react-router";
import { api, ApiError, describe } from "../../api/client";
import type { Algorithm, Engine, Flavor, Job, Pool } from "../../api/types";
import { Section } from "../../components/bits";
import { check, EMPTY, placeErrors, requestBody, withAlgorithm, type JobForm } from "../../lib/jobform";
import { useProject } from "../../session";
import { ChannelRows, Field, FlavorPicker, invalid, ParamRows, type Errors } from "./fields";

function useCatalog(pid: string) {
  const algorithms = useQuery({
    queryKey: ["algorithms", pid],
    queryFn: () => api<{ items: Algorithm[] }>(`/v2/${pid}/algorithms`, { query: { limit: 50, sort_by: "name", order: "asc" } }),
  });
  const engines = useQuery({ queryKey: ["engines", pid], queryFn: () => api<{ items: Engine[] }>(`/v2/${pid}/training-job-engines`), staleTime: 60_000 });
  const flavors = useQuery({ queryKey: ["flavors", pid], queryFn: () => api<{ flavors: Flavor[] }>(`/v2/${pid}/training-job-flavors`), staleTime: 60_000 });
  // what is free moves as jobs start and end
  const pools = useQuery({ queryKey: ["pools", pid], queryFn: () => api<{ pools: Pool[] }>(`/v2/${pid}/training-pools`), refetchInterval: 5_000 });
  return {
    algorithms: algorithms.data?.items ?? [],
    engines: engines.data?.items ?? [],
    flavors: flavors.data?.flavors ?? [],
    pools: pools.data?.pools ?? [],
    error: algorithms.error ?? engines.error ?? flavors.error ?? pools.error,
  };
}

/** the fields the page shows now: an error about another goes to the top */
function shownKeys(form: JobForm): (key: string) => boolean {
  const fixed = ["name", "description", "flavor", "node_count", "pool", "retries", "max_run_time", "checkpoint"];
  const own = form.source === "algorithm" ? ["algorithm"] : ["code_dir", "boot_file", "engine", "requirements", "image"];
  return (key) => {
    if (fixed.includes(key) || own.includes(key)) return true;
    const [what, i] = key.split(":");
    const rows = { param: form.params, input: form.inputs, output: form.outputs }[what];
    return !!rows && Number(i) < rows.length;
  };
}

export default function CreateJob() {
  const project = useProject();
  const pid = project.id;
  const navigate = useNavigate();
  const client = useQueryClient();
  const catalog = useCatalog(pid);
  const [form, setForm] = useState<JobForm>(EMPTY);
  const [errors, setErrors] = useState<Errors>({});
  const set = (patch: Partial<JobForm>, ...keys: string[]) => {
    setForm((f) => ({ ...f, ...patch }));
    if (keys.some((k) => errors[k])) setErrors((e) => Object.fromEntries(Object.entries(e).filter(([k]) => !keys.includes(k))));
  };
  const firstFlavor = catalog.flavors[0]?.flavor_id;
  useEffect(() => {
    if (firstFlavor) setForm((f) => (f.flavorId ? f : { ...f, flavorId: firstFlavor }));
  }, [firstFlavor]);
  const algorithm = catalog.algorithms.find((a) => a.metadata.id === form.algorithmId);
  const body = requestBody(form);
  const create = useMutation({
    mutationFn: () => api<Job>(`/v2/${pid}/training-jobs`, { method: "POST", body }),
    onSuccess: (made) => {
      client.invalidateQueries({ queryKey: ["jobs", pid] });
      navigate(`/p/${pid}/jobs/${made.metadata.id}`);
    },
    onError: (err) => {
      const bad = err instanceof ApiError && err.status === 400 && err.detail;
      setErrors(bad ? placeErrors(err.detail, form, shownKeys(form)) : { top: describe(err) });
    },
  });
  function submit(e: FormEvent) {
    e.preventDefault();
    const found = check(form);
    setErrors(found);
    if (Object.keys(found).length === 0) create.mutate();
  }
  const pool = catalog.pools.find((p) => p.pool_id === form.poolId) ?? catalog.pools[0];
  const flavor = catalog.flavors.find((f) => f.flavor_id === form.flavorId);
  const outputs = form.outputs.map((o) => o.name).filter(Boolean);
  return (
    <div className="create-job">
      <header className="page-head">
        <div>
          <div className="crumbs">
            <Link to={`/p/${pid}/jobs`}>Jobs</Link>
          </div>
          <h1>Create training job</h1>
        </div>
      </header>
      {catalog.error ? <div className="error" role="alert">{describe(catalog.error)}</div> : null}
      <div className="create-grid">
        <form onSubmit={submit} aria-label="create training job" noValidate>
          {errors.top ? (
            <div className="error" role="alert" data-testid="error-top">
              {errors.top}
            </div>
          ) : null}
          <Section title="The job">
            <Field label="name" errorKey="name" error={errors.name}>
              <input aria-label="name" value={form.name} onChange={(e) => set({ name: e.target.value }, "name")} {...invalid(errors, "name")} />
            </Field>
            <Field label="description" errorKey="description" error={errors.description}>
              <input aria-label="description" value={form.description} maxLength={256} onChange={(e) => set({ description: e.target.value }, "description")} />
            </Field>
          </Section>
          <Section title="What it runs">
            <div className="inline" role="radiogroup" aria-label="code from">
              <label>
                <input type="radio" name="source" checked={form.source === "code"} onChange={() => set({ ...withAlgorithm(form, undefined), source: "code" })} /> a code folder and boot file
              </label>
              <label>
                <input type="radio" name="source" checked={form.source === "algorithm"} onChange={() => set({ ...withAlgorithm(form, undefined), source: "algorithm" })} /> a saved algorithm
              </label>
            </div>
            {form.source === "algorithm" ? (
              <AlgorithmPick form={form} algorithms={catalog.algorithms} algorithm={algorithm} errors={errors} onPick={(a) => set(withAlgorithm(form, a), "algorithm")} />
            ) : (
              <CodeFields form={form} engines={catalog.engines} errors={errors} set={set} />
            )}
          </Section>
          <Section title="Resources">
            {catalog.pools.length > 1 ? (
              <Field label="pool" errorKey="pool" error={errors.pool}>
                <select aria-label="pool" value={form.poolId} onChange={(e) => set({ poolId: e.target.value }, "pool")}>
                  {catalog.pools.map((p, i) => (
                    <option key={p.pool_id} value={i === 0 ? "" : p.pool_id}>
                      {p.pool_id}
                      {i === 0 ? " (the default)" : ""}
                    </option>
                  ))}
                </select>
              </Field>
            ) : null}
            <FlavorPicker flavors={catalog.flavors} pool={pool} value={form.flavorId} nodes={Number(form.nodeCount) || 1} error={errors.flavor} onChange={(id) => set({ flavorId: id }, "flavor")} />
            <Field label="nodes" errorKey="node_count" error={errors.node_count} hint={flavor?.max_num ? `this flavor: up to ${flavor.max_num}; more than one starts worker-0 … worker-N-1 together` : undefined}>
              <input aria-label="nodes" type="number" min={1} max={flavor?.max_num ?? 1024} value={form.nodeCount} onChange={(e) => set({ nodeCount: e.target.value }, "node_count")} {...invalid(errors, "node_count")} />
            </Field>
          </Section>
          <Section title="Parameters">
            <ParamRows rows={form.params} errors={errors} canAdd={!algorithm || algorithm.job_config.parameters_customization !== false} onChange={(params) => set({ params }, ...changed("param", form.params, params))} />
          </Section>
          <Section title="Inputs">
            <ChannelRows pid={pid} what="input" rows={form.inputs} errors={errors} canAdd={form.source === "code"} onChange={(inputs) => set({ inputs }, ...changed("input", form.inputs, inputs))} />
          </Section>
          <Section title="Outputs">
            <ChannelRows pid={pid} what="output" rows={form.outputs} errors={errors} canAdd={form.source === "code"} onChange={(outputs) => set({ outputs, checkpoint: outputs.some((o) => o.name === form.checkpoint) ? form.checkpoint : "" }, ...changed("output", form.outputs, outputs))} />
          </Section>
          <RetryFields form={form} outputs={outputs} errors={errors} set={set} />
          <div className="actions">
            <button type="submit" className="primary" disabled={create.isPending}>
              {create.isPending ? "Creating…" : "Create"}
            </button>
            <Link to={`/p/${pid}/jobs`}>Cancel</Link>
          </div>
        </form>
        <aside className="preview">
          <h3>The request</h3>
          <div className="muted small">POST /v2/{pid}/training-jobs</div>
          <pre data-testid="preview">{JSON.stringify(body, null, 2)}</pre>
        </aside>
      </div>
    </div>
  );
}

/** the keys of the rows an edit changed (their errors are the user's to recheck) */
function changed<T>(what: string, before: T[], after: T[]): string[] {
  const n = Math.max(before.length, after.length);
  return Array.from({ length: n }, (_, i) => i)
    .filter((i) => JSON.stringify(before[i]) !== JSON.stringify(after[i]))
    .map((i) => `${what}:${i}`);
}

type Set = (patch: Partial<JobForm>, ...keys: string[]) => void;

function AlgorithmPick({ form, algorithms, algorithm, errors, onPick }: { form: JobForm; algorithms: Algorithm[]; algorithm?: Algorithm; errors: Errors; onPick: (a: Algorithm | undefined) => void }) {
  const cfg = algorithm?.job_config;
  const engine = cfg?.engine;
  return (
    <>
      <Field label="algorithm" errorKey="algorithm" error={errors.algorithm} hint={algorithms.length ? undefined : "The project has no algorithm yet (corral algorithms create)."}>
        <select aria-label="algorithm" value={form.algorithmId} onChange={(e) => onPick(algorithms.find((a) => a.metadata.id === e.target.value))} {...invalid(errors, "algorithm")}>
          <option value="">pick one</option>
          {algorithms.map((a) => (
            <option key={a.metadata.id} value={a.metadata.id}>
              {a.metadata.name}
            </option>
          ))}
        </select>
      </Field>
      {cfg ? (
        <div className="muted small algorithm-summary" data-testid="algorithm-summary">
          {algorithm.metadata.description ? <div>{algorithm.metadata.description}</div> : null}
          <div>
            runs <code>{cfg.command ?? `${cfg.code_dir ?? ""} ${cfg.boot_file ?? ""}`}</code>
            {engine ? (
              <>
                {" "}with engine <code>{engine.engine_id ?? `${engine.engine_name ?? ""} ${engine.engine_version ?? ""}`.trim()}</code>
                {engine.requirements?.length ? <> and packages <code>{engine.requirements.join(" ")}</code></> : null}
              </>
            ) : null}
            {(algorithm.resource_requirements ?? []).map((r) => ` · needs ${r.key} ${r.value.join(" or ")}`).join("")}
          </div>
        </div>
      ) : null}
    </>
  );
}

function CodeFields({ form, engines, errors, set }: { form: JobForm; engines: Engine[]; errors: Errors; set: Set }) {
  return (
    <>
      <Field label="code folder" errorKey="code_dir" error={errors.code_dir} hint="a folder on the server (or an s3:// URL); each attempt runs in a copy of it">
        <input aria-label="code folder" className="path" placeholder="/home/ann/mlp" value={form.codeDir} onChange={(e) => set({ codeDir: e.target.value }, "code_dir")} {...invalid(errors, "code_dir")} />
      </Field>
      <Field label="boot file" errorKey="boot_file" error={errors.boot_file} hint="in the code folder, run with the engine's Python">
        <input aria-label="boot file" placeholder="train.py" value={form.bootFile} onChange={(e) => set({ bootFile: e.target.value }, "boot_file")} {...invalid(errors, "boot_file")} />
      </Field>
      <Field label="engine" errorKey="engine" error={errors.engine}>
        <select aria-label="engine" value={form.engineId} onChange={(e) => set({ engineId: e.target.value }, "engine")} {...invalid(errors, "engine")}>
          <option value="">the server's default Python</option>
          {engines.map((e) => (
            <option key={e.engine_id} value={e.engine_id}>
              {e.engine_id} ({e.engine_name} {e.engine_version})
            </option>
          ))}
        </select>
      </Field>
      <Field label="packages" errorKey="requirements" error={errors.requirements} hint="one requirement a line (tomli>=2): installed in a cached environment made from the engine's Python before the job is queued">
        <textarea aria-label="packages" rows={3} value={form.requirements} onChange={(e) => set({ requirements: e.target.value }, "requirements")} {...invalid(errors, "requirements")} />
      </Field>
      <Field label="image" errorKey="image" error={errors.image} hint="or an OCI image the tasks run in, with podman, in place of the engine and packages (the boot file runs with its python3); on a server set up for images">
        <input aria-label="image" className="path" placeholder="registry.example.com/team/train:1.0" value={form.imageUrl} onChange={(e) => set({ imageUrl: e.target.value }, "image")} {...invalid(errors, "image")} />
      </Field>
    </>
  );
}

function RetryFields({ form, outputs, errors, set }: { form: JobForm; outputs: string[]; errors: Errors; set: Set }) {
  return (
    <Section title="When it fails">
      <Field label="retries" errorKey="retries" error={errors.retries} hint="restarts after a failure (0-100; none by default)">
        <input aria-label="retries" type="number" min={0} max={100} value={form.retries} onChange={(e) => set({ retries: e.target.value }, "retries")} {...invalid(errors, "retries")} />
      </Field>
      <div className="inline">
        <label>
          <input type="checkbox" checked={form.unconditional} onChange={(e) => set({ unconditional: e.target.checked }, "retries")} /> retry whatever the failure
        </label>
        <label>
          <input type="checkbox" checked={form.hangRetry} onChange={(e) => set({ hangRetry: e.target.checked }, "retries")} /> restart a hung job
        </label>
      </div>
      <Field label="max run time" errorKey="max_run_time" error={errors.max_run_time} hint="minutes from its start; past it the job fails (class timeout)">
        <input aria-label="max run time" type="number" min={1} placeholder="no limit" value={form.maxRunTime} onChange={(e) => set({ maxRunTime: e.target.value }, "max_run_time")} {...invalid(errors, "max_run_time")} />
      </Field>
      <Field label="checkpoint" errorKey="checkpoint" error={errors.checkpoint} hint="an output each attempt writes checkpoints to and, after the first, resumes from (CORRAL_CHECKPOINT_DIR)">
        <select aria-label="checkpoint" value={form.checkpoint} onChange={(e) => set({ checkpoint: e.target.value }, "checkpoint")}>
          <option value="">none</option>
          {outputs.map((o) => (
            <option key={o}>{o}</option>
          ))}
        </select>
      </Field>
    </Section>
  );
}
