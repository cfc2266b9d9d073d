// Any runs of a project side by side, as `corral compare` shows them (src/corral/cli/compare.py):
// phase, flavor, duration, a row per parameter, the final metrics and per metric the last
// and best value of its curve, rows whose values differ marked; and each metric's curves
// overlaid, a line per run.

import type { Job, Series } from "../api/types";
import { number } from "./format";
import { align } from "./series";
import { duration } from "./time";

/** metric names whose best value is the lowest (the CLI's rule); any other's is its highest */
const LOWER_IS_BETTER = /loss|err|mse|mae|perplexity|ppl|latency/i;

export function direction(metric: string): "min" | "max" {
  return LOWER_IS_BETTER.test(metric) ? "min" : "max";
}

export interface Metrics {
  metrics: Series[];
  final_metrics: Record<string, number>;
}

export interface Run {
  id: string;
  /** its name, with its version where two runs have one name */
  label: string;
  job: Job;
  parameters: Record<string, string>;
  finals: Record<string, number>;
  series: Series[];
}

export function runsOf(found: { job: Job; metrics?: Metrics }[]): Run[] {
  const names = found.map((f) => f.job.metadata.name);
  return found.map(({ job, metrics }) => {
    const m = job.metadata;
    const twice = names.filter((n) => n === m.name).length > 1;
    return {
      id: m.id,
      label: twice ? `${m.name} ${m.version ?? m.id.slice(0, 8)}` : m.name,
      job,
      parameters: Object.fromEntries((job.algorithm.parameters ?? []).map((p) => [p.name, p.value ?? ""])),
      finals: metrics?.final_metrics ?? {},
      series: metrics?.metrics ?? [],
    };
  });
}

export interface CompareRow {
  section: "job" | "parameters" | "final metrics" | "curves";
  label: string;
  values: string[];
  differs: boolean;
}

function names(runs: Run[], of: (r: Run) => string[]): string[] {
  return [...new Set(runs.flatMap(of))];
}

/** what a metric's curve ends at and its best value (of all its tasks' points) */
function lastAndBest(series: Series | undefined): { last: number; best: number } | null {
  const values = (series?.value ?? []).filter((v) => typeof v === "number" && !Number.isNaN(v));
  if (!series || !values.length) return null;
  const best = direction(series.metric) === "min" ? Math.min(...values) : Math.max(...values);
  return { last: values[values.length - 1], best };
}

function shown(v: number | string | null | undefined): string {
  if (v === null || v === undefined) return "";
  return typeof v === "number" ? number(v) : v;
}

export function compareRows(runs: Run[]): CompareRow[] {
  const rows: CompareRow[] = [];
  const add = (section: CompareRow["section"], label: string, values: string[]) =>
    rows.push({ section, label, values, differs: values.some((v) => v !== values[0]) });
  add("job", "phase", runs.map((r) => r.job.status.phase));
  add("job", "flavor", runs.map((r) => r.job.spec.resource.flavor_id));
  // durations differ by milliseconds between any two runs: only one seen to differ counts
  add("job", "duration", runs.map((r) => duration(r.job.status.duration)));
  for (const name of names(runs, (r) => Object.keys(r.parameters))) add("parameters", `--${name}`, runs.map((r) => r.parameters[name] ?? ""));
  for (const name of names(runs, (r) => Object.keys(r.finals))) add("final metrics", `final ${name}`, runs.map((r) => shown(r.finals[name])));
  for (const name of names(runs, (r) => r.series.map((s) => s.metric))) {
    const ends = runs.map((r) => lastAndBest(r.series.find((s) => s.metric === name)));
    add("curves", `${name} last`, ends.map((e) => shown(e?.last)));
    add("curves", `${name} best (${direction(name)})`, ends.map((e) => shown(e?.best)));
  }
  return rows;
}

/** The metrics any run reported, in the order first seen. */
export function metricNames(runs: Run[]): string[] {
  return names(runs, (r) => r.series.map((s) => s.metric));
}

/** One metric's curves overlaid: a line per run (and per task, where a run has several), by
 * step; a series reported without steps is drawn by its points' count. */
export function overlay(metric: string, runs: Run[]): { x: number[]; lines: { label: string; values: (number | null)[] }[] } {
  const parts = runs.flatMap((run) => {
    const series = run.series.find((s) => s.metric === metric);
    if (!series || !series.value.length) return [];
    const a = align(series);
    const x = a.time ? a.x.map((_, i) => i) : a.x;
    return a.lines.map((line) => ({ label: a.lines.length > 1 ? `${run.label} ${line.label.slice(metric.length).trim()}` : run.label, x, values: line.values }));
  });
  const x = [...new Set(parts.flatMap((p) => p.x))].sort((a, b) => a - b);
  const at = new Map(x.map((v, i) => [v, i]));
  return {
    x,
    lines: parts.map((p) => {
      const values: (number | null)[] = x.map(() => null);
      p.x.forEach((v, i) => (values[at.get(v)!] = p.values[i]));
      return { label: p.label, values };
    }),
  };
}
