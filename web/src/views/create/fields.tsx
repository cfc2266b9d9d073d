// The pieces of the "Create training job" form: a field with its error beside it, the
// parameters' and channels' rows, and the flavor with what is free now.

import type { ReactNode } from "react";
import type { Constraint, Flavor, Pool } from "../../api/types";
import { number } from "../../lib/format";
import { roomFor, type ChannelRow, type ParamRow } from "../../lib/jobform";

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

export function ChannelRows({ what, rows, errors, canAdd, onChange }: { what: "input" | "output"; rows: ChannelRow[]; errors: Errors; canAdd: boolean; onChange: (rows: ChannelRow[]) => void }) {
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
              <input className="path" aria-label={`${what} path ${c.name || i + 1}`} placeholder={placeholder} value={c.path} onChange={(e) => set(i, { path: e.target.value })} {...invalid(errors, key)} />
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
