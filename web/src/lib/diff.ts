// Two versions of a job side by side: every field either has, and whether it changed.

import type { Version } from "../api/types";

export interface DiffRow {
  key: string;
  left: string;
  right: string;
  changed: boolean;
}

type Flat = Record<string, string>;

function show(value: unknown): string {
  if (value === null || value === undefined) return "";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(6)));
  return String(value);
}

/** A version as "section.name" -> value, in a stable order. */
export function flatten(v: Version): Flat {
  const out: Flat = {
    phase: v.phase,
    code: v.command ? `command: ${v.command}` : `${v.code_dir ?? ""} ${v.boot_file ?? ""}`.trim(),
    "code hash": show(v.code_hash),
    "git commit": show(v.git_commit),
    flavor: v.flavor_id,
    nodes: show(v.node_count),
    "from version": show(v.pre_version_name),
    resumed: v.resume ? "yes" : "no",
  };
  const sections: [string, Record<string, unknown> | null][] = [
    ["parameter", v.parameters],
    ["input", v.inputs],
    ["output", v.outputs],
    ["metric", v.final_metrics],
  ];
  for (const [section, values] of sections) {
    for (const key of Object.keys(values ?? {}).sort()) out[`${section} ${key}`] = show(values?.[key]);
  }
  return out;
}

/** Every key of either version, those that differ first flagged; `onlyChanged` drops the rest. */
export function diffVersions(left: Version, right: Version, onlyChanged = false): DiffRow[] {
  const a = flatten(left);
  const b = flatten(right);
  const keys = [...Object.keys(a), ...Object.keys(b).filter((k) => !(k in a))];
  return keys
    .map((key) => ({ key, left: a[key] ?? "", right: b[key] ?? "", changed: (a[key] ?? "") !== (b[key] ?? "") }))
    .filter((row) => !onlyChanged || row.changed);
}
