// Reported metric points made into chart lines: one line per task, on one x axis.

import type { Series } from "../api/types";

export interface Aligned {
  x: number[];
  lines: { label: string; values: (number | null)[] }[];
  /** x is a time (some point has no step) */
  time: boolean;
}

export function align(series: Series): Aligned {
  const steps = series.steps ?? [];
  const time = series.value.length > 0 && steps.length === series.value.length ? steps.some((s) => s === null) : true;
  const xs = series.value.map((_, i) => (time ? (series.times?.[i] ?? i) : (steps[i] as number)));
  const tasks = series.tasks?.length === series.value.length ? series.tasks : series.value.map(() => "");
  const labels = [...new Set(tasks)];
  const x = [...new Set(xs)].sort((a, b) => a - b);
  const at = new Map(x.map((v, i) => [v, i]));
  const lines = labels.map((task) => ({
    label: labels.length > 1 ? `${series.metric} (${task})` : series.metric,
    values: x.map(() => null) as (number | null)[],
  }));
  series.value.forEach((v, i) => {
    lines[labels.indexOf(tasks[i])].values[at.get(xs[i])!] = v;
  });
  return { x, lines, time };
}
