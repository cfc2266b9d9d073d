import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render } from "@testing-library/react";
import type { ReactNode } from "react";
import { MemoryRouter, Route, Routes, useLocation } from "react-router";
import type { Job } from "./api/types";
import { SessionProvider } from "./session";

/** `ui` rendered as the app renders it: a query cache, a router at `path`, a session. */
export function renderAt(ui: ReactNode, path = "/", route = "*") {
  const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  return render(
    <QueryClientProvider client={client}>
      <MemoryRouter initialEntries={[path]}>
        <SessionProvider>
          <Routes>
            <Route path={route} element={ui} />
            <Route path="*" element={<div>elsewhere</div>} />
          </Routes>
        </SessionProvider>
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

export function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}

/** who the tests' user is: a member of project p1 ("vision") */
export const ME = { user: "ann", is_admin: false, credential: "token", projects: [{ project_id: "p1", name: "vision", role: "member", created_at: 0 }] };

/** A job as the API answers it, `status` changed as given. */
export function makeJob(status: Partial<Job["status"]> = {}, name = "mlp"): Job {
  return {
    kind: "job",
    metadata: { id: "j1", name, description: "", create_time: 1_700_000_000_000, user_name: "ann", annotations: {} },
    status: { phase: "Running", secondary_phase: "Running", duration: 0, start_time: 0, tasks: ["worker-0"], task_statuses: [], running_records: [], ...status },
    algorithm: { command: "python train.py" },
    spec: { resource: { flavor_id: "corral.cpu.1u", node_count: 1, pool_id: "default" } },
  };
}

/** The page's address as the router has it (a filter kept in the URL, a page led to). */
export function Where() {
  const location = useLocation();
  return <output data-testid="where">{location.pathname + location.search}</output>;
}
