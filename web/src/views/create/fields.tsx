// The pieces of the "Create training job" form: a field with its error beside it, the
// parameters' and channels' rows, and the flavor with what is free now.

import { useQuery } from "@tanstack/react-query";
import { useEffect, type ReactNode } from "react";
import { api } from "../../api/client";
import type { Constraint, Dataset, DatasetVersion, Flavor, Pool } from "../../api/types";
import { number } from "../../lib/format";
import { roomFor, type ChannelRow, type InputKind, type ParamRow } from "../../lib/jobform";

export type Errors = Record<string, string>;

/** A labelled field, the error the form or the API found in it said beside it. */
export function Field({ label, error, errorKey, hint, children }: { label: string; error?: string; errorKey: string; hint?: ReactNode; children: ReactNode }) {
  return (
    <div className={`field ${error ? "invalid" : ""}`}>
      <span className="field-label">{label}</span>
      <div className="field-body">
        {children}
        {hint ? <div className="muted small">{hint}</div> : null}
        {error ? (
          <div className="field-error" id={errorId(errorKey)} data-testid={`error-${errorKey}`}>
            {error}
          </div>
        ) : null}
      </div>
    </div>
  );
}

export function errorId(key: string): string {
  return `err-${key.replace(/[^A-Za-z0-9_-]/g, "-")}`;
}

/** What an input with an error says to assistive technology. */
export function invalid(errors: Errors, key: string) {
  return errors[key] ? { "aria-invalid": true, "aria-describedby": errorId(key) } : {};
}

function describe(c: Constraint | undefined): string {
  if (!c) return "";
  const bits = [c.type ?? "", c.required ? "required" : ""];
  if (c.valid_type === "Range" && c.valid_range?.length === 2) bits.push(`${c.valid_range[0]} to ${c.valid_range[1]}`);
  if (c.editable === false) bits.push("fixed by the algorithm");
  return bits.filter(Boolean).join(", ");
}

export function ParamRows({ rows, errors, canAdd, onChange }: { rows: ParamRow[]; errors: Errors; canAdd: boolean; onChange: (rows: ParamRow[]) => void }) {
  const set = (i: number, patch: Partial<ParamRow>) => onChange(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  return (
    <div className="rows">
      {rows.length === 0 ? <div className="muted small">none</div> : null}
      {rows.map((p, i) => {
        const key = `param:${i}`;
        const label = p.fromAlgorithm ? p.name : "parameter";
        const choices = p.constraint?.valid_type === "Enumeration" ? (p.constraint.valid_range ?? []) : null;
        return (
          <Field key={i} label={label} errorKey={key} error={errors[key]} hint={[p.description, describe(p.constraint)].filter(Boolean).join(" · ")}>
            <div className="param">
              {p.fromAlgorithm ? null : <input aria-label="parameter name" placeholder="name" value={p.name} onChange={(e) => set(i, { name: e.target.value })} {...invalid(errors, key)} />}
              {choices ? (
                <select aria-label={`value of ${p.name || i + 1}`} value={p.value} disabled={p.constraint?.editable === false} onChange={(e) => set(i, { value: e.target.value })} {...invalid(errors, key)}>
                  {choices.includes(p.value) ? null : <option value={p.value}>{p.value || "–"}</option>}
                  {choices.map((c) => (
                    <option key={c}>{c}</option>
                  ))}
                </select>
              ) : (
                <input aria-label={`value of ${p.name || i + 1}`} placeholder="value" value={p.value} readOnly={p.constraint?.editable === false} onChange={(e) => set(i, { value: e.target.value })} {...invalid(errors, key)} />
              )}
              {p.fromAlgorithm ? null : (
                <button type="button" className="link" onClick={() => onChange(rows.filter((_, j) => j !== i))}>
                  remove
                </button>
              )}
            </div>
          </Field>
        );
      })}
      {canAdd ? (
        <button type="button" className="link" onClick={() => onChange([...rows, { name: "", value: "", fromAlgorithm: false }])}>
          add a parameter
        </button>
      ) : null}
    </div>
  );
}

const KINDS: Record<InputKind, string> = { path: "a path or URL", dataset: "a dataset version" };

/** What an input reads, where it may read either. */
function KindPick({ row, onChange }: { row: ChannelRow; onChange: (patch: Partial<ChannelRow>) => void }) {
  const kinds = row.kinds ?? (["path", "dataset"] as InputKind[]);
  if (kinds.length < 2) return null;
  return (
    <select aria-label={`what ${row.name || "the input"} reads`} value={row.kind ?? "path"} onChange={(e) => onChange({ kind: e.target.value as InputKind })}>
      {kinds.map((k) => (
        <option key={k} value={k}>
          {KINDS[k]}
        </option>
      ))}
    </select>
  );
}

/** A dataset of the project and one of its versions (the latest, once a dataset is picked). */
function DatasetPick({ pid, row, bad, onChange }: { pid: string; row: ChannelRow; bad: object; onChange: (patch: Partial<ChannelRow>) => void }) {
  const datasets = useQuery({ queryKey: ["datasets", pid], queryFn: () => api<{ datasets: Dataset[] }>(`/v2/${pid}/datasets`), staleTime: 30_000 });
  const versions = useQuery({
    queryKey: ["dataset-versions", pid, row.dataset],
    queryFn: () => api<{ versions: DatasetVersion[] }>(`/v2/${pid}/datasets/${row.dataset}/versions`),
    enabled: !!row.dataset,
  });
  const newest = [...(versions.data?.versions ?? [])].reverse();
  const latest = newest[0]?.version_id;
  useEffect(() => {
    if (row.dataset && !row.version && latest) onChange({ version: latest });
  }, [row.dataset, row.version, latest]); // (onChange is made anew at each render)
  const label = row.name || "the input";
  return (
    <>
      <select aria-label={`dataset of ${label}`} value={row.dataset ?? ""} onChange={(e) => onChange({ dataset: e.target.value, version: "" })} {...bad}>
        <option value="">{datasets.data && !datasets.data.datasets.length ? "the project has no dataset" : "pick a dataset"}</option>
        {(datasets.data?.datasets ?? []).map((d) => (
          <option key={d.id} value={d.id}>
            {d.name}
          </option>
        ))}
      </select>
      <select aria-label={`version of ${label}`} value={row.version ?? ""} disabled={!row.dataset} onChange={(e) => onChange({ version: e.target.value })} {...bad}>
        <option value="">{row.dataset && versions.data && !newest.length ? "no version yet" : "version"}</option>
        {newest.map((v) => (
          <option key={v.version_id} value={v.version_id}>
            {v.version_name} · {number(v.number_of_samples)} samples
          </option>
        ))}
      </select>
    </>
  );
}

export function ChannelRows({ pid, what, rows, errors, canAdd, onChange }: { pid: string; what: "input" | "output"; rows: ChannelRow[]; errors: Errors; canAdd: boolean; onChange: (rows: ChannelRow[]) => void }) {
  const set = (i: number, patch: Partial<ChannelRow>) => onChange(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)));
  const placeholder = what === "input" ? "/data/train, or s3://bucket/data" : "/results/run-1, or s3://bucket/out";
  return (
    <div className="rows">
      {rows.length === 0 ? <div className="muted small">none</div> : null}
      {rows.map((c, i) => {
        const key = `${what}:${i}`;
        return (
          <Field key={i} label={c.fromAlgorithm ? c.name : what} errorKey={key} error={errors[key]} hint={c.description}>
            <div className="param">
              {c.fromAlgorithm ? null : <input aria-label={`${what} name`} placeholder="name (--name=path)" value={c.name} onChange={(e) => set(i, { name: e.target.value })} {...invalid(errors, key)} />}
              {what === "input" ? <KindPick row={c} onChange={(patch) => set(i, patch)} /> : null}
              {c.kind === "dataset" ? (
                <DatasetPick pid={pid} row={c} bad={invalid(errors, key)} onChange={(patch) => set(i, patch)} />
              ) : (
                <input className="path" aria-label={`${what} path ${c.name || i + 1}`} placeholder={placeholder} value={c.path} onChange={(e) => set(i, { path: e.target.value })} {...invalid(errors, key)} />
              )}
              {c.fromAlgorithm ? null : (
                <button type="button" className="link" onClick={() => onChange(rows.filter((_, j) => j !== i))}>
                  remove
                </button>
              )}
            </div>
          </Field>
        );
      })}
      {canAdd ? (
        <button type="button" className="link" onClick={() => onChange([...rows, { name: "", path: "", fromAlgorithm: false }])}>
          add an {what}
        </button>
      ) : null}
    </div>
  );
}

function shape(f: Flavor): string {
  const i = f.flavor_info;
  if (!i) return f.flavor_name;
  const gpu = i.gpu?.unit_num ? ` · ${i.gpu.unit_num} GPU${i.gpu.product_name ? ` ${i.gpu.product_name}` : ""}` : "";
  return `${i.cpu?.core_num ?? "?"} CPU · ${i.memory?.size ?? "?"} GB${gpu}`;
}

/** The flavor's select, each with how many of its tasks fit in the pool now, and the pool's
 * free resources under it. */
export function FlavorPicker({ flavors, pool, value, nodes, error, onChange }: { flavors: Flavor[]; pool?: Pool; value: string; nodes: number; error?: string; onChange: (id: string) => void }) {
  const picked = flavors.find((f) => f.flavor_id === value);
  const room = roomFor(picked, pool);
  const hint = pool ? (
    <span data-testid="free-now">
      free now in pool {pool.pool_id}: {number(pool.free.cpu)} CPU · {number(pool.free.memory_gb)} GB{pool.free.gpu ? ` · ${pool.free.gpu} GPU` : ""}
      {room !== null ? ` · room for ${room} task${room === 1 ? "" : "s"} of this flavor` : ""}
      {room !== null && room < nodes ? <span className="warn"> · the job waits in the queue until {nodes} fit</span> : null}
    </span>
  ) : null;
  return (
    <Field label="flavor" errorKey="flavor" error={error} hint={hint}>
      <select aria-label="flavor" value={value} onChange={(e) => onChange(e.target.value)} {...(error ? { "aria-invalid": true, "aria-describedby": errorId("flavor") } : {})}>
        {value && !picked ? <option value={value}>{value}</option> : null}
        {flavors.map((f) => {
          const n = roomFor(f, pool);
          return (
            <option key={f.flavor_id} value={f.flavor_id}>
              {f.flavor_id} ({shape(f)}){n !== null ? ` · ${n} free now` : ""}
            </option>
          );
        })}
      </select>
    </Field>
  );
}
