import { describe, expect, it } from "vitest";
import type { DagTask, PipelineRun } from "../api/types";
import { graph, taskState } from "./dag";

const task = (name: string, depends_on: string[] = [], items: number | null = null): DagTask => ({
  name, depends_on, trigger: "all_success", when: null, finally: false, items, parallelism: null, cache: false,
});
const run = (t: string, state: string, item: number | null = null, job: string | null = `${t}-job`): PipelineRun => ({
  key: item === null ? t : `${t}[${item}]`, task: t, item, state, origin: "run", job_id: job, job_phase: null,
  start_time: 0, end_time: null, duration: 1000, message: null, metrics: null,
});

describe("a pipeline's graph", () => {
  it("has a node per task and an edge per dependency", () => {
    const g = graph([task("prepare"), task("train", ["prepare"], 2), task("evaluate", ["train", "gone"])], [
      run("prepare", "success"),
      run("train", "success", 0),
      run("train", "running", 1),
    ]);
    expect(g.nodes.map((n) => [n.id, n.state])).toEqual([["prepare", "success"], ["train", "running"], ["evaluate", "waiting"]]);
    expect(g.edges.map((e) => e.id)).toEqual(["prepare->train", "train->evaluate"]);
    const train = g.nodes[1];
    expect(train.runs).toEqual({ success: 1, running: 1 });
    expect(train.jobId).toBeNull(); // several jobs: no one link
    expect(g.nodes[0].jobId).toBe("prepare-job");
  });

  it("shows a task by the state that matters most among its runs", () => {
    expect(taskState(["success", "waiting"])).toBe("running");
    expect(taskState(["waiting", "waiting"])).toBe("waiting");
    expect(taskState(["success", "failed"])).toBe("failed");
    expect(taskState(["skipped", "success"])).toBe("skipped");
    expect(taskState(["cached", "success"])).toBe("cached");
    expect(taskState([])).toBe("waiting");
  });
});
