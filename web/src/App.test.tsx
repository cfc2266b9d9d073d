import { screen, waitFor } from "@testing-library/react";
import { afterEach, expect, it, vi } from "vitest";
import { setToken } from "./api/client";
import { App } from "./App";
import { json, makeJob, ME, renderAt, Where } from "./test-utils";

afterEach(() => {
  vi.unstubAllGlobals();
  setToken(null);
});

function at(path: string) {
  setToken("crl_x");
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string) => {
      if (url.startsWith("/corral/whoami")) return json(ME);
      if (url.includes("/training-jobs/j1")) return json(makeJob());
      if (url.includes("/training-job-searches")) return json({ total: 0, count: 0, limit: 50, offset: 0, items: [] });
      if (url.includes("/training-pools")) return json({ pools: [] });
      return json({ error_code: "APIGW.0101", error_msg: "no such path" }, 404);
    }),
  );
  renderAt(
    <>
      <App />
      <Where />
    </>,
    path,
  );
}

it.each(["/p/p1/no-such-view", "/nowhere", "/p/p1/jobs/j1/no-such-tab", "/admin/more"])("says that %s is no page, not another page", async (path) => {
  at(path);
  expect(await screen.findByRole("heading", { name: "Not found" }, { timeout: 5_000 })).toBeInTheDocument(); // a view loads its code first
  expect(screen.getByTestId("where")).toHaveTextContent(path); // not led elsewhere
  expect(screen.queryByRole("heading", { name: "Jobs" })).toBeNull();
});

it.each([
  ["/", "/p/p1/jobs"],
  ["/p/p1", "/p/p1/jobs"],
])("leads %s to the jobs", async (path, to) => {
  at(path);
  expect(await screen.findByRole("heading", { name: "Jobs" })).toBeInTheDocument();
  await waitFor(() => expect(screen.getByTestId("where")).toHaveTextContent(new RegExp(`^${to}$`)));
});

it("tells a user in no project so, rather than leading them to no page", async () => {
  setToken("crl_x");
  vi.stubGlobal("fetch", vi.fn(async () => json({ ...ME, projects: [] })));
  renderAt(<App />, "/");
  expect(await screen.findByText(/not a member of any project yet/)).toBeInTheDocument();
  expect(screen.queryByRole("heading", { name: "Not found" })).toBeNull();
});
