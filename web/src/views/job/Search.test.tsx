import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, expect, it, vi } from "vitest";

// uPlot draws on a canvas, which jsdom has not: the charts are drawn in the browser tests
// (tests/web); here, which lines the learning curves get.
vi.mock("../../components/Chart", () => ({
  Chart: ({ title, lines }: { title: string; lines: { label: string; dash?: boolean }[] }) => (
    <figure data-testid={`chart-${title}`}>
      {lines.map((l) => (
        <span key={l.label} data-dash={l.dash ? "yes" : "no"}>
          {l.label}
        </span>
      ))}
    </figure>
  ),
}));
import { setToken } from "../../api/client";
import { json, makeJob, ME, renderAt } from "../../test-utils";
import JobPage from "./JobPage";

afterEach(() => {
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
  setToken(null);
});

const POLICY = {
  reward_attrs: [{ name: "accuracy", mode: "max", regex: "accuracy=([0-9.]+)" }],
  search_params: [
    { name: "lr", param_type: "continuous", lower_bound: "0.0001", upper_bound: "0.1" },
    { name: "width", param_type: "discrete", discrete_values: ["8", "16", "32"] },
  ],
  algo_configs: [{ name: "asha_search", params: [{ key: "num_samples", value: "6", type: "int" }] }],
};
const TABLE = {
  total: 4,
  items: {
    header: ["trial_id", "status", "lr", "width", "accuracy", "job_id", "reason"],
    data: [
      ["0", "completed", "0.01", "16", "0.91", "t0", ""],
      ["1", "pruned", "0.09", "8", "0.2", "t1", "pruned at step 1"],
      ["2", "completed", "0.002", "32", "0.95", "t2", ""],
      ["3", "running", "0.0005", "8", "", "t3", ""],
    ],
  },
};
const REWARDS = {
  reward: "accuracy",
  mode: "max",
  trials: [
    { trial_id: "0", status: "completed", job_id: "t0", steps: [0, 1, 2], values: [0.3, 0.6, 0.91] },
    { trial_id: "1", status: "pruned", job_id: "t1", steps: [0, 1], values: [0.1, 0.2] },
    { trial_id: "2", status: "completed", job_id: "t2", steps: [0, 1, 2], values: [0.4, 0.7, 0.95] },
    { trial_id: "3", status: "running", job_id: "t3", steps: [0], values: [0.2] },
  ],
};

function server(calls: string[]) {
  setToken("crl_x");
  const search = makeJob({ phase: "Running" }, "mysearch");
  search.algorithm.policies = { auto_search: POLICY };
  return vi.fn(async (url: string, init?: RequestInit) => {
    if ((init?.method ?? "GET") !== "GET") {
      calls.push(`${init?.method} ${url}`);
      return json({ earlystop_trial: "3" });
    }
    if (url.startsWith("/corral/whoami")) return json(ME);
    if (url.includes("/training-job-changes")) return new Promise<Response>(() => {});
    if (url.includes("/autosearch-trials")) return json(TABLE);
    if (url.includes("/autosearch-trial-rewards")) return json(REWARDS);
    if (url.endsWith("/autosearch-parameter-analysis")) return json({ header: ["parameter", "importance"], data: [["lr", "0.8123"], ["width", "0.1877"]] });
    if (url.startsWith("/v2/p1/training-jobs/j1")) return json(search);
    return json({});
  });
}

function open() {
  renderAt(<JobPage />, "/p/p1/jobs/j1/trials", "/p/:pid/jobs/:jobId/:tab?");
}

it("shows a search's trials with the best marked, the parallel view, the curves and the importance", async () => {
  vi.stubGlobal("fetch", server([]));
  open();
  const table = await screen.findByTestId("trials");
  expect(screen.getByRole("link", { name: "Trials" })).toBeInTheDocument();
  expect(screen.getByTestId("best-trial").textContent).toBe("trial 2, accuracy 0.95 (lr=0.002, width=32)");
  expect(within(table).getByTestId("trial-2").textContent).toContain("★ best");
  expect(within(table).getByTestId("trial-0").textContent).not.toContain("best");
  expect(within(screen.getByTestId("trial-1")).getByTestId("ended-early").textContent).toBe("prunedpruned at step 1");
  expect(within(screen.getByTestId("trial-0")).getByRole("link").getAttribute("href")).toBe("/p/p1/jobs/t0");
  // one line a trial in the parallel coordinates, the best drawn apart
  const parallel = screen.getByTestId("parallel");
  expect(parallel.querySelectorAll("polyline")).toHaveLength(4);
  expect(screen.getByTestId("pc-trial-2").getAttribute("class")).toBe("best");
  // the learning curves: the pruned trial's dashed, ending where it was pruned
  const curves = await screen.findByTestId("chart-accuracy by trial");
  expect(within(curves).getByText("trial 1 (pruned at step 1)").dataset.dash).toBe("yes");
  expect(within(curves).getByText("trial 0").dataset.dash).toBe("no");
  const importance = await screen.findByTestId("importance");
  expect(importance.textContent).toMatch(/^lr.*0\.81width.*0\.19$/);
});

it("sorts the trials by a column's header", async () => {
  vi.stubGlobal("fetch", server([]));
  open();
  await screen.findByTestId("trials");
  const order = () => screen.getAllByTestId(/^trial-\d$/).map((r) => r.dataset.testid);
  expect(order()).toEqual(["trial-0", "trial-1", "trial-2", "trial-3"]);
  const table = screen.getByTestId("trials");
  fireEvent.click(within(table).getByRole("button", { name: "accuracy" })); // best first
  expect(order()).toEqual(["trial-2", "trial-0", "trial-1", "trial-3"]);
  fireEvent.click(within(table).getByRole("button", { name: "lr" }));
  expect(order()).toEqual(["trial-3", "trial-2", "trial-0", "trial-1"]);
});

it("stops a running trial only when the answer is yes", async () => {
  const calls: string[] = [];
  vi.stubGlobal("fetch", server(calls));
  const confirm = vi.spyOn(window, "confirm").mockReturnValue(false);
  open();
  const row = await screen.findByTestId("trial-3");
  expect(screen.getAllByRole("button", { name: "Stop trial" })).toHaveLength(1); // only the running one
  fireEvent.click(within(row).getByRole("button", { name: "Stop trial" }));
  expect(confirm.mock.calls[0][0]).toMatch(/^Stop trial 3 of mysearch now\?/);
  expect(calls).toEqual([]);
  confirm.mockReturnValue(true);
  fireEvent.click(within(row).getByRole("button", { name: "Stop trial" }));
  await waitFor(() => expect(calls).toEqual(["POST /v2/p1/training-jobs/j1/autosearch-trial-earlystop/3"]));
});

it("says what stopping the search does before it stops it", async () => {
  const calls: string[] = [];
  vi.stubGlobal("fetch", server(calls));
  const confirm = vi.spyOn(window, "confirm").mockReturnValue(false);
  open();
  fireEvent.click(await screen.findByRole("button", { name: "Stop" }));
  expect(confirm.mock.calls[0][0]).toMatch(/^Stop the search mysearch\? Its running trials are stopped with it/);
  expect(calls).toEqual([]);
});

it("picks trials to compare", async () => {
  vi.stubGlobal("fetch", server([]));
  open();
  const compare = await screen.findByRole("button", { name: /^Compare/ });
  expect(compare).toBeDisabled();
  fireEvent.click(screen.getByLabelText("compare trial 0"));
  fireEvent.click(screen.getByLabelText("compare trial 2"));
  expect(compare).toHaveTextContent("Compare 2 trials");
  fireEvent.click(compare);
  expect(await screen.findByText("elsewhere")).toBeInTheDocument(); // led to /p/p1/compare?jobs=t0,t2
});

it("has no trials tab for a job that is no search", async () => {
  setToken("crl_x");
  vi.stubGlobal("fetch", vi.fn(async (url: string) => (url.startsWith("/corral/whoami") ? json(ME) : url.includes("changes") ? new Promise<Response>(() => {}) : json(makeJob()))));
  open();
  expect(await screen.findByText("Not found")).toBeInTheDocument();
});
