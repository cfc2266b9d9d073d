import { fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, expect, it, vi } from "vitest";
import { setToken } from "../../api/client";
import { json, makeJob, ME, renderAt } from "../../test-utils";
import JobPage from "./JobPage";
import { failedTask, lastLines } from "./LastLines";
import { Overview } from "./Overview";

afterEach(() => {
  vi.unstubAllGlobals();
  setToken(null);
});

const LOG = Array.from({ length: 30 }, (_, i) => `step ${i}`).join("\n") + "\nTraceback (most recent call last):\nValueError: loss is nan\n";

function server(urls: string[]) {
  return vi.fn(async (url: string) => {
    urls.push(url);
    if (url.startsWith("/corral/whoami")) return json(ME);
    if (url.includes("/logs/window")) return json({ content: LOG, offset: 0, next_offset: LOG.length, full_size: LOG.length, attempt: 1, finished: true });
    if (url.startsWith("/v2/p1/training-jobs/j1?") || url === "/v2/p1/training-jobs/j1") return json(FAILED);
    return json({ total: 0, events: [] });
  });
}

const FAILED = makeJob({
  phase: "Failed",
  secondary_phase: "Failed",
  failure_class: "user_exit",
  reason: "worker-1: exit with 1",
  tasks: ["worker-0", "worker-1"],
  task_statuses: [{ task: "worker-0", exit_code: 0 }, { task: "worker-1", exit_code: 1 }],
});

it("shows a failed job's last log lines, of the task that failed, read from the log's end", async () => {
  const urls: string[] = [];
  vi.stubGlobal("fetch", server(urls));
  renderAt(<Overview pid="p1" job={FAILED} />);
  const box = await screen.findByTestId("last-lines");
  await waitFor(() => expect(box).toHaveTextContent("ValueError: loss is nan"));
  expect(box).toHaveTextContent("worker-1's log");
  const shown = box.querySelector("pre")!.textContent!.split("\n");
  expect(shown).toHaveLength(20);
  expect(shown[0]).toBe("step 12");
  expect(urls.find((u) => u.includes("/logs/window"))).toMatch(/^\/v2\/p1\/training-jobs\/j1\/tasks\/worker-1\/logs\/window\?max_bytes=\d+$/);
  expect(screen.getByRole("link", { name: "the whole log" })).toHaveAttribute("href", "/p/p1/jobs/j1/logs?task=worker-1");
});

it("reads no log for a job that did not fail", () => {
  const urls: string[] = [];
  vi.stubGlobal("fetch", server(urls));
  renderAt(<Overview pid="p1" job={makeJob({ phase: "Completed" })} />);
  expect(screen.queryByTestId("last-lines")).toBeNull();
  expect(urls.some((u) => u.includes("/logs/"))).toBe(false);
});

it("finds the failed task by its exit code, else by the reason", () => {
  expect(failedTask(FAILED)).toBe("worker-1");
  expect(failedTask(makeJob({ phase: "Abnormal", reason: "worker-2: lost", tasks: ["worker-0", "worker-1", "worker-2"] }))).toBe("worker-2");
  expect(failedTask(makeJob({ phase: "Failed", reason: "could not start" }))).toBe("worker-0");
  expect(lastLines("a\nb\nc\n", 2)).toEqual(["b", "c"]);
  expect(lastLines("", 2)).toEqual([]);
});

it("copies the job's id", async () => {
  setToken("crl_x");
  vi.stubGlobal("fetch", server([]));
  const writeText = vi.fn(async () => {});
  Object.defineProperty(navigator, "clipboard", { value: { writeText }, configurable: true });
  renderAt(<JobPage />, "/p/p1/jobs/j1", "/p/:pid/jobs/:jobId/:tab?");
  expect(await screen.findByTestId("job-id")).toHaveTextContent("j1");
  fireEvent.click(screen.getByRole("button", { name: "copy the job's id" }));
  await waitFor(() => expect(writeText).toHaveBeenCalledWith("j1"));
  expect(await screen.findByText("Copied")).toBeInTheDocument();
});
