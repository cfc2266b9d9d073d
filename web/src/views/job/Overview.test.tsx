import { screen } from "@testing-library/react";
import { afterEach, expect, it, vi } from "vitest";
import type { Job } from "../../api/types";
import { json, renderAt } from "../../test-utils";
import { Overview } from "./Overview";

afterEach(() => vi.unstubAllGlobals());

function job(status: Partial<Job["status"]>): Job {
  return {
    kind: "job",
    metadata: { id: "j1", name: "mlp", description: "", create_time: 1_700_000_000_000, user_name: "ann", annotations: {} },
    status: {
      phase: "Pending", secondary_phase: "Pending", duration: 0, start_time: 0, tasks: ["worker-0"],
      task_statuses: [], running_records: [], ...status,
    },
    algorithm: { command: "python train.py" },
    spec: { resource: { flavor_id: "corral.cpu.1u", node_count: 1, pool_id: "default" } },
  };
}

it("says why a waiting job waits, and where it stands", async () => {
  vi.stubGlobal("fetch", vi.fn(async () => json({ total: 0, events: [] })));
  renderAt(
    <Overview
      pid="p1"
      job={job({ reason: "quota: cpu 2 of 2 used in pool default", queue: { pool_id: "default", priority: 2, jobs_ahead: 3, wait_code: "quota_exceeded" } })}
    />,
  );
  const waits = screen.getByTestId("why-it-waits");
  expect(waits).toHaveTextContent("quota: cpu 2 of 2 used in pool default");
  expect(waits).toHaveTextContent("its project's quota in the pool would be exceeded");
  expect(waits).toHaveTextContent("3 job(s) ahead");
});

it("shows each attempt with how it ended, and the tasks' exit codes", async () => {
  vi.stubGlobal("fetch", vi.fn(async () => json({ total: 1, events: [{ message: "Job failed", level: "Error", time: "1700000100000", source: "Job" }] })));
  renderAt(
    <Overview
      pid="p1"
      job={job({
        phase: "Failed",
        failure_class: "user_exit",
        reason: "worker-0 exited with code 3",
        task_statuses: [{ task: "worker-0", exit_code: 3 }],
        running_records: [
          { start_at: 1_700_000_000, end_at: 1_700_000_030, start_type: "init_or_rescheduled", end_reason: "worker-0 exited with 3", end_recover: "restart" },
          { start_at: 1_700_000_040, end_at: 1_700_000_050, start_type: "restart", end_reason: "worker-0 exited with 3", end_recover: "end" },
        ],
      })}
    />,
  );
  expect(screen.getByTestId("failure")).toHaveTextContent("user exit: worker-0 exited with code 3");
  expect(screen.getByTestId("attempts").querySelectorAll("tbody tr")).toHaveLength(2);
  expect(screen.getByTestId("exit-worker-0")).toHaveTextContent("exit code 3");
  expect(await screen.findByText("Job failed")).toBeInTheDocument();
  expect(screen.queryByTestId("why-it-waits")).toBeNull();
});

it("shows an input that reads a dataset version by the dataset and version it read", async () => {
  vi.stubGlobal("fetch", vi.fn(async () => json({ total: 0, events: [] })));
  const reading = job({ phase: "Completed" });
  reading.algorithm.inputs = [
    { name: "data_url", remote: { dataset: { id: "d1", version_id: "v2", obs_url: "/srv/corral/datasets/p1/d1/v2", name: "stream", version_name: "V0002" } } },
    { name: "extra", remote: { obs: { obs_url: "/data/extra" } } },
  ];
  renderAt(<Overview pid="p1" job={reading} />);
  expect(screen.getByTestId("dataset-data_url")).toHaveTextContent("dataset stream version V0002 /srv/corral/datasets/p1/d1/v2");
  expect(screen.getByText("/data/extra")).toBeInTheDocument();
});
