import { fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, expect, it, vi } from "vitest";
import { setToken } from "../../api/client";
import { json, renderAt } from "../../test-utils";
import Notebooks from "./Notebooks";

// The notebook API is ModelArts' (/v1/{project_id}/notebooks); these answers are shaped as
// its reference documents them.

afterEach(() => {
  vi.unstubAllGlobals();
  setToken(null);
});

const ME = { user: "ann", is_admin: false, credential: "token", projects: [{ project_id: "p1", name: "vision", role: "member", created_at: 0 }] };

function server(notebooks: unknown, calls: string[] = []) {
  setToken("crl_x");
  return vi.fn(async (url: string, init?: RequestInit) => {
    calls.push(`${init?.method ?? "GET"} ${url}`);
    if (url.startsWith("/corral/whoami")) return json(ME);
    if (url.startsWith("/v1/p1/notebooks") && (init?.method ?? "GET") === "GET") return notebooks === 404
      ? json({ error_code: "APIGW.0101", error_msg: "no such path" }, 404)
      : json(notebooks);
    return json({});
  });
}

it("lists notebooks with their status and the time left on their lease, and acts on them", async () => {
  const calls: string[] = [];
  const now = Date.now();
  vi.stubGlobal("fetch", server({
    current: 0, pages: 1, size: 2, total: 2, data: [
      { id: "n1", name: "explore", flavor: "corral.gpu.1", status: "RUNNING", url: "/notebooks/n1/?token=t",
        lease: { enable: true, type: "timing", create_at: now - 60 * 60_000, duration: 3 * 3_600_000 } },
      { id: "n2", name: "old", flavor: "corral.cpu.1u", status: "STOPPED", lease: { enable: true, type: "timing" } },
    ],
  }, calls));
  renderAt(<Notebooks />, "/p/p1/notebooks", "/p/:pid/notebooks");
  expect(await screen.findByText("explore")).toBeInTheDocument();
  expect(screen.getByText(/^1 h 59 min|^2 h 00 min/)).toBeInTheDocument(); // 3 h lease, 1 h gone
  expect(screen.getByRole("link", { name: "Open" })).toHaveAttribute("href", "/notebooks/n1/?token=t");
  fireEvent.click(screen.getByRole("button", { name: "+1 h" }));
  fireEvent.click(screen.getByRole("button", { name: "Start" }));
  await waitFor(() => expect(calls).toContain("PATCH /v1/p1/notebooks/n1/lease"));
  await waitFor(() => expect(calls).toContain("POST /v1/p1/notebooks/n2/start"));
});

it("is hidden where the server has no notebooks", async () => {
  vi.stubGlobal("fetch", server(404));
  renderAt(<Notebooks />, "/p/p1/notebooks", "/p/:pid/notebooks");
  expect(await screen.findByText("This server has no notebooks.")).toBeInTheDocument();
});

it("makes a notebook only once the flavors and images it offers have arrived", async () => {
  setToken("crl_x");
  const bodies: unknown[] = [];
  let release = () => {};
  const flavorsArrive = new Promise<void>((resolve) => (release = resolve));
  vi.stubGlobal("fetch", vi.fn(async (url: string, init?: RequestInit) => {
    if (url.startsWith("/corral/whoami")) return json(ME);
    if (url.startsWith("/v1/p1/notebooks/flavors")) {
      await flavorsArrive;
      return json({ data: [{ id: "corral.cpu.1u", name: "CPU 1 core" }] });
    }
    if (url.startsWith("/v2/p1/training-job-engines")) return json({ items: [{ engine_id: "py", engine_name: "Python", engine_version: "3" }] });
    if (url.startsWith("/v1/p1/notebooks") && init?.method === "POST") {
      bodies.push(JSON.parse(String(init.body)));
      return json({ id: "n9", name: "scratch", status: "CREATING" });
    }
    return json({ current: 0, pages: 1, size: 0, total: 0, data: [] });
  }));
  renderAt(<Notebooks />, "/p/p1/notebooks", "/p/:pid/notebooks");
  fireEvent.click(await screen.findByRole("button", { name: "New notebook" }));
  fireEvent.change(screen.getByLabelText("notebook name"), { target: { value: "scratch" } });
  const create = screen.getByRole("button", { name: "Create" });
  expect(create).toBeDisabled(); // (a click now sent no flavor: "Flavor: Field required")
  release();
  await waitFor(() => expect(create).toBeEnabled());
  fireEvent.click(create);
  await waitFor(() => expect(bodies).toHaveLength(1));
  expect(bodies[0]).toMatchObject({ name: "scratch", flavor: "corral.cpu.1u", image_id: "py" });
});
