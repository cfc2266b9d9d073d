import { screen } from "@testing-library/react";
import { afterEach, expect, it, vi } from "vitest";
import { setToken } from "../api/client";
import { json, ME, renderAt } from "../test-utils";
import Queue from "./Queue";

afterEach(() => {
  vi.unstubAllGlobals();
  setToken(null);
});

const NONE = { cpu: 0, memory_gb: 0, gpu: 0 };
const SPEECH = "5f0c3a9e2b7d4e1f8a6c0d3b9e2f7a41";
const HIDDEN = "a41b2c3d4e5f60718293a4b5c6d7e8f9";

function waiting(position: number, project_id: string, own = false) {
  return {
    position, project_id, id: own ? "j1" : null, name: own ? "mine" : null, priority: 1, node_count: 1,
    flavor_id: "corral.cpu.1u", create_time: 1, phase: "Pending", wait_code: "queued", reason: "queued",
  };
}

it("names another project's waiting job by its project where the user may know it, never by an id", async () => {
  setToken("crl_x");
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string) => {
      if (url.startsWith("/corral/whoami")) return json(ME);
      if (url.includes("/training-pools"))
        return json({
          pools: [{
            pool_id: "default", nodes: [], capacity: NONE, used: NONE, free: NONE, pending_jobs: 3,
            projects: [{ project_id: SPEECH, name: "speech", used: NONE, recent_share: 0.5 }],
          }],
        });
      if (url.includes("/training-queue")) return json({ pools: [{ pool_id: "default", jobs: [waiting(1, "p1", true), waiting(2, SPEECH), waiting(3, HIDDEN)] }] });
      return json({ total: 0, count: 0, limit: 50, offset: 0, items: [] });
    }),
  );
  renderAt(<Queue />, "/p/p1/queue", "/p/:pid/queue");
  const queue = await screen.findByTestId("queue-default");
  const rows = queue.querySelectorAll("tbody tr");
  expect(rows[0]).toHaveTextContent("mine");
  expect(rows[1]).toHaveTextContent("a job of project speech");
  expect(rows[2]).toHaveTextContent("a job of another project");
  expect(queue.textContent).not.toContain(SPEECH.slice(0, 8));
  expect(queue.textContent).not.toContain(HIDDEN.slice(0, 8));
});

it("says the queue is loading while it has not come", async () => {
  setToken("crl_x");
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string) => {
      if (url.startsWith("/corral/whoami")) return json(ME);
      if (url.includes("/training-pools"))
        return json({ pools: [{ pool_id: "default", nodes: [], capacity: NONE, used: NONE, free: NONE, pending_jobs: 0, projects: [] }] });
      return new Promise<Response>(() => {}); // a slow network
    }),
  );
  renderAt(<Queue />, "/p/p1/queue", "/p/:pid/queue");
  expect(await screen.findByText("Loading the queue…")).toBeInTheDocument();
  expect(screen.getByText("Loading the running jobs…")).toBeInTheDocument();
  expect(screen.queryByText("No job waits in this pool.")).toBeNull(); // not said before it is known
});
