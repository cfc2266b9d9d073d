// A pipeline's graph for drawing: one node per task (a task that fans out is one node
// with its items counted), its state from its runs', edges from `depends_on`.

import type { DagTask, PipelineRun } from "../api/types";

export interface TaskNode {
  id: string;
  state: string;
  /** runs of the task by state ("2 success, 1 running") */
  runs: Record<string, number>;
  items: number;
  finally: boolean;
  jobId: string | null;
  duration: number;
}

export interface Edge {
  id: string;
  source: string;
  target: string;
}

// What a task with several runs shows: the first of these any of its runs is in.
const PRECEDENCE = ["running", "waiting", "failed", "timeout", "upstream_failed", "canceled", "skipped", "cached", "success"];

export function taskState(states: string[]): string {
  if (!states.length) return "waiting";
  const has = new Set(states);
  if (has.has("running") || (has.has("waiting") && states.some((s) => s !== "waiting"))) return "running";
  return PRECEDENCE.find((s) => has.has(s)) ?? states[0];
}

export function graph(dag: DagTask[], runs: PipelineRun[]): { nodes: TaskNode[]; edges: Edge[] } {
  const byTask = new Map<string, PipelineRun[]>();
  for (const run of runs) byTask.set(run.task, [...(byTask.get(run.task) ?? []), run]);
  const nodes = dag.map((task) => {
    const mine = byTask.get(task.name) ?? [];
    const counts: Record<string, number> = {};
    mine.forEach((r) => (counts[r.state] = (counts[r.state] ?? 0) + 1));
    return {
      id: task.name,
      state: taskState(mine.map((r) => r.state)),
      runs: counts,
      items: task.items ?? 1,
      finally: task.finally,
      jobId: mine.length === 1 ? mine[0].job_id : null,
      duration: Math.max(0, ...mine.map((r) => r.duration)),
    };
  });
  const names = new Set(dag.map((t) => t.name));
  const edges = dag.flatMap((task) =>
    task.depends_on.filter((d) => names.has(d)).map((d) => ({ id: `${d}->${task.name}`, source: d, target: task.name })),
  );
  return { nodes, edges };
}
