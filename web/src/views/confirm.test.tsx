// What cannot be taken back is asked about first: stopping a job, a pipeline or a loop,
// moving a model's alias, promoting or rolling back a loop's model.

import { fireEvent, screen, waitFor } from "@testing-library/react";
import type { ReactNode } from "react";
import { afterEach, expect, it, vi } from "vitest";
import { setToken } from "../api/client";
import { json, makeJob, ME, renderAt } from "../test-utils";
import JobPage from "./job/JobPage";
import LoopPage from "./loops/LoopPage";
import ModelPage from "./models/ModelPage";
import PipelinePage from "./pipelines/PipelinePage";

afterEach(() => {
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
  setToken(null);
});

const STATUS = { state: "running", progress: 40, attempt: 1, start_time: 1, end_time: null, duration: 0, message: null, stopping: false, timed_out: false };
const PIPELINE = { id: "pl1", name: "nightly", description: "", user_name: "ann", create_time: 1, status: STATUS, runs: {}, model: null, parameters: {}, dag: [], tasks: [], attempts: [] };
const LOOP = {
  metadata: { id: "l1", name: "helmet", description: "", create_time: 1, user_name: "ann" },
  spec: {},
  status: {
    state: "Waiting", message: null, stage: "Train", num_of_samples: 0, eval_samples: 0, rounds_started: 1,
    dataset: { name: "d", number_of_samples: 4 }, model: { name: "helmet-model", alias: "production", version: 2, initial: "base" },
    service: null, conditions: [], rounds: [], deploys: [],
  },
};
const VERSION = { model_name: "clf", aliases: [], create_time: 1, location: "", size_bytes: 1, file_count: 1, source_job_id: "j1", source_job_name: "mlp", source_version: null, source_channel: "train_url", source_phase: "Completed", metrics: {}, parameters: {} };
const MODEL = { id: "m1", name: "clf", create_time: 1, update_time: 1, latest_version: 2, version_count: 2, aliases: { production: 1 }, versions: [{ ...VERSION, version: 1 }, { ...VERSION, version: 2 }] };

function server(calls: string[]) {
  setToken("crl_x");
  return vi.fn(async (url: string, init?: RequestInit) => {
    const method = init?.method ?? "GET";
    if (method !== "GET") {
      calls.push(`${method} ${url} ${init?.body ?? ""}`);
      return json(url.includes("/pipelines/") ? PIPELINE : {}, 202); // a pipeline's action answers the pipeline
    }
    if (url.startsWith("/corral/whoami")) return json(ME);
    if (url.includes("/training-job-changes")) return new Promise<Response>(() => {}); // a stream with nothing to say
    if (url.startsWith("/v2/p1/training-jobs/j1?") || url === "/v2/p1/training-jobs/j1") return json(makeJob({ phase: "Running" }));
    if (url.startsWith("/v2/p1/pipelines/pl1")) return json(PIPELINE);
    if (url.startsWith("/v2/p1/incremental-learning-jobs/helmet")) return json(LOOP);
    if (url.startsWith("/v2/p1/models/clf")) return json(MODEL);
    return json({ total: 0, events: [], metrics: [] });
  });
}

const CASES: [string, ReactNode, string, string, string, RegExp][] = [
  ["a job's Stop", <JobPage />, "/p/p1/jobs/j1", "/p/:pid/jobs/:jobId/:tab?", "Stop", /POST \/v2\/p1\/training-jobs\/j1\/actions .*terminate/],
  ["a pipeline's Stop", <PipelinePage />, "/p/p1/pipelines/pl1", "/p/:pid/pipelines/:pipelineId", "Stop", /POST \/v2\/p1\/pipelines\/pl1\/actions .*stop/],
  ["a loop's Stop", <LoopPage />, "/p/p1/loops/helmet", "/p/:pid/loops/:loop", "Stop", /POST .*helmet\/actions .*"stop"/],
  ["a loop's Promote", <LoopPage />, "/p/p1/loops/helmet", "/p/:pid/loops/:loop", "Promote", /POST .*helmet\/actions .*"promote"/],
  ["a loop's Roll back", <LoopPage />, "/p/p1/loops/helmet", "/p/:pid/loops/:loop", "Roll back", /POST .*helmet\/actions .*"rollback"/],
  ["moving an alias", <ModelPage />, "/p/p1/models/clf", "/p/:pid/models/:model", "Move alias", /PUT \/v2\/p1\/models\/clf\/aliases\/production .*"version":2/],
];

it.each(CASES)("%s asks first, and does nothing when the answer is no", async (_what, ui, path, route, button, call) => {
  window.ResizeObserver ??= class { observe() {} unobserve() {} disconnect() {} } as unknown as typeof ResizeObserver; // the DAG's
  const calls: string[] = [];
  vi.stubGlobal("fetch", server(calls));
  const confirm = vi.spyOn(window, "confirm").mockReturnValue(false);
  renderAt(ui, path, route);
  if (button === "Move alias") fireEvent.change(await screen.findByLabelText("version"), { target: { value: "2" } });
  fireEvent.click(await screen.findByRole("button", { name: button }));
  expect(confirm).toHaveBeenCalledTimes(1);
  expect(confirm.mock.calls[0][0]).toMatch(/\?/);
  confirm.mockReturnValue(true);
  fireEvent.click(screen.getByRole("button", { name: button }));
  await waitFor(() => expect(calls).toHaveLength(1));
  expect(calls[0]).toMatch(call); // only the call said yes to was made
});
