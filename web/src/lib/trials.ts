// A search's trials as the API answers them (a `header` and rows of strings) made into
// objects, the best one found, sorted by a column, and their learning curves as lines.

import type { AutoSearch, Job, TrialRewards, TrialsTable } from "../api/types";

export interface Trial {
  id: string;
  number: number;
  status: string;
  params: Record<string, string>;
  reward: number | null;
  jobId: string;
  reason: string;
}

export interface Trials {
  /** the searched parameters, in the table's order */
  params: string[];
  /** the reward's name */
  reward: string;
  trials: Trial[];
}

/** how a trial ended early: the algorithm pruned it, it was stopped by hand or with its search */
export const ENDED_EARLY = new Set(["pruned", "early_stopped", "stopped"]);

export function policyOf(job: Job): AutoSearch | null {
  return job.algorithm.policies?.auto_search ?? null;
}

export function modeOf(policy: AutoSearch | null): "max" | "min" {
  return policy?.reward_attrs[0]?.mode === "min" ? "min" : "max";
}

/** The table's columns are trial_id, status, each parameter, the reward, job_id, reason. */
export function parseTrials(table: TrialsTable): Trials {
  const header = table.items.header;
  const params = header.slice(2, header.length - 3);
  const reward = header[header.length - 3] ?? "reward";
  const trials = table.items.data.map((row) => {
    const raw = row[2 + params.length];
    const value = raw === "" || raw === undefined ? null : Number(raw);
    return {
      id: row[0],
      number: Number(row[0]),
      status: row[1],
      params: Object.fromEntries(params.map((p, i) => [p, row[2 + i] ?? ""])),
      reward: value === null || Number.isNaN(value) ? null : value,
      jobId: row[row.length - 2] ?? "",
      reason: row[row.length - 1] ?? "",
    };
  });
  return { params, reward, trials };
}

/** The best completed trial with a reward, by the search's mode (what the search ends with). */
export function bestTrial(trials: Trial[], mode: "max" | "min"): Trial | undefined {
  const sign = mode === "min" ? -1 : 1;
  let best: Trial | undefined;
  for (const t of trials) {
    if (t.status !== "completed" || t.reward === null) continue;
    if (!best || sign * t.reward > sign * (best.reward as number)) best = t;
  }
  return best;
}

/** a column to sort by: "trial", "status", "reward", or a parameter's name */
export type SortKey = string;

function compareValues(a: string | number | null, b: string | number | null): number {
  if (a === b) return 0;
  if (a === null || a === "") return 1; // nothing said: last either way
  if (b === null || b === "") return -1;
  const x = Number(a);
  const y = Number(b);
  if (!Number.isNaN(x) && !Number.isNaN(y)) return x - y;
  return String(a).localeCompare(String(b));
}

export function sortTrials(trials: Trial[], key: SortKey, desc: boolean): Trial[] {
  const value = (t: Trial): string | number | null =>
    key === "trial" ? t.number : key === "status" ? t.status : key === "reward" ? t.reward : (t.params[key] ?? null);
  return [...trials].sort((a, b) => {
    const va = value(a);
    const vb = value(b);
    const missing = va === null || va === "" || vb === null || vb === "";
    const order = compareValues(va, vb);
    // a trial without the value stays last whichever way the column is sorted
    return (desc && !missing ? -order : order) || a.number - b.number;
  });
}

export interface CurveLine {
  label: string;
  values: (number | null)[];
  /** drawn dashed: the trial was stopped before its end */
  dash: boolean;
}

const ENDED_HOW: Record<string, string> = { pruned: "pruned", early_stopped: "stopped by hand", stopped: "stopped with the search" };

/** One line per trial on the union of their steps; a trial stopped early ends where it stopped. */
export function curveLines(rewards: TrialRewards): { x: number[]; lines: CurveLine[] } {
  const x = [...new Set(rewards.trials.flatMap((t) => t.steps))].sort((a, b) => a - b);
  const at = new Map(x.map((s, i) => [s, i]));
  const lines = rewards.trials
    .filter((t) => t.steps.length > 0)
    .map((t) => {
      const values: (number | null)[] = x.map(() => null);
      t.steps.forEach((s, i) => (values[at.get(s)!] = t.values[i]));
      const how = ENDED_HOW[t.status];
      const last = t.steps[t.steps.length - 1];
      return { label: `trial ${t.trial_id}${how ? ` (${how} at step ${last})` : ""}`, values, dash: ENDED_EARLY.has(t.status) };
    });
  return { x, lines };
}
