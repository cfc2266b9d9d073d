import { Suspense, type ReactNode } from "react";
import { Navigate, NavLink, Route, Routes, useLocation, useNavigate } from "react-router";
import { getToken } from "./api/client";
import { Empty, ErrorNote, Loading, NotFound } from "./components/bits";
import { PageError } from "./components/PageError";
import { lazyView } from "./lib/load";
import { useSession } from "./session";
import { useNotebooksAvailable } from "./views/notebooks/available";
import { Jobs } from "./views/jobs/Jobs";
import { Login } from "./views/Login";

// The list of jobs loads with the app; every other view when first opened (tried again
// while its file does not arrive: lib/load.tsx).
const JobPage = lazyView(() => import("./views/job/JobPage"));
const CreateJob = lazyView(() => import("./views/create/CreateJob"));
const Compare = lazyView(() => import("./views/compare/Compare"));
const Queue = lazyView(() => import("./views/Queue"));
const Pipelines = lazyView(() => import("./views/pipelines/Pipelines"));
const PipelinePage = lazyView(() => import("./views/pipelines/PipelinePage"));
const Loops = lazyView(() => import("./views/loops/Loops"));
const LoopPage = lazyView(() => import("./views/loops/LoopPage"));
const Models = lazyView(() => import("./views/models/Models"));
const ModelPage = lazyView(() => import("./views/models/ModelPage"));
const Notebooks = lazyView(() => import("./views/notebooks/Notebooks"));
const Nodes = lazyView(() => import("./views/Nodes"));
const Access = lazyView(() => import("./views/Access"));
const Admin = lazyView(() => import("./views/Admin"));

export function App() {
  const { me, loading, error, retry } = useSession();
  const location = useLocation();
  if (loading) return <Loading what="Checking your token" />;
  if (!me && error && getToken()) {
    // a token is kept but the server could not say whose: not a reason to log out
    return (
      <div className="login">
        <div className="panel">
          <ErrorNote error={error} />
          <button onClick={retry}>Try again</button>
        </div>
      </div>
    );
  }
  if (!me) {
    if (location.pathname === "/login") return <Login />;
    const next = location.pathname + location.search;
    return <Navigate to={`/login${next && next !== "/" ? `?next=${encodeURIComponent(next)}` : ""}`} replace />;
  }
  // a user in no project yet has no page of a project to start on
  const home = me.projects[0] ? `/p/${me.projects[0].project_id}/jobs` : me.is_admin ? "/admin" : "/";
  // once logged in, the login page leads where the user was going
  const next = new URLSearchParams(location.search).get("next");
  return (
    <Routes>
      <Route path="/login" element={<Navigate to={next && next.startsWith("/") ? next : home} replace />} />
      <Route path="/p/:pid/*" element={<Shell><ProjectRoutes /></Shell>} />
      <Route path="/admin" element={<Shell><Admin /></Shell>} />
      <Route index element={home === "/" ? <Shell><NoProject /></Shell> : <Navigate to={home} replace />} />
      <Route path="*" element={error ? <ErrorNote error={error} /> : <Shell><NotFound /></Shell>} />
    </Routes>
  );
}

function NoProject() {
  return <Empty>You are not a member of any project yet: a platform administrator can add you to one.</Empty>;
}

function ProjectRoutes() {
  return (
    <Routes>
      <Route path="jobs" element={<Jobs />} />
      <Route path="jobs/new" element={<CreateJob />} />
      <Route path="jobs/:jobId/:tab?" element={<JobPage />} />
      <Route path="compare" element={<Compare />} />
      <Route path="queue" element={<Queue />} />
      <Route path="pipelines" element={<Pipelines />} />
      <Route path="pipelines/:pipelineId" element={<PipelinePage />} />
      <Route path="loops" element={<Loops />} />
      <Route path="loops/:loop" element={<LoopPage />} />
      <Route path="models" element={<Models />} />
      <Route path="models/:model" element={<ModelPage />} />
      <Route path="notebooks" element={<Notebooks />} />
      <Route path="nodes" element={<Nodes />} />
      <Route path="access" element={<Access />} />
      <Route index element={<Navigate to="jobs" replace />} />
      <Route path="*" element={<NotFound />} />
    </Routes>
  );
}

function Shell({ children }: { children: ReactNode }) {
  const { me, logout } = useSession();
  const location = useLocation();
  const navigate = useNavigate();
  const match = location.pathname.match(/^\/p\/([^/]+)(?:\/([^/]+))?/);
  const pid = match?.[1] ?? me?.projects[0]?.project_id ?? "";
  const view = match?.[2] ?? "jobs";
  const notebooks = useNotebooksAvailable(pid);
  if (!me) return null;
  const known = me.projects.some((p) => p.project_id === pid);
  const links: [string, string][] = [
    ["jobs", "Jobs"],
    ["queue", "Queue & quotas"],
    ["pipelines", "Pipelines"],
    ["loops", "Learning loops"],
    ["models", "Models"],
    ...(notebooks === true ? ([["notebooks", "Notebooks"]] as [string, string][]) : []),
    ["nodes", "Nodes & GPUs"],
    ["access", "Keys & tokens"],
  ];
  return (
    <div className="shell">
      <header className="top">
        <a className="brand" href="/console/">corral</a>
        <label className="project">
          <span className="muted">project</span>
          <select
            aria-label="project"
            value={known ? pid : ""}
            onChange={(e) => navigate(`/p/${e.target.value}/${view}`)}
          >
            {!known && <option value="">–</option>}
            {me.projects.map((p) => (
              <option key={p.project_id} value={p.project_id}>
                {p.name} ({p.role})
              </option>
            ))}
          </select>
        </label>
        <span className="spacer" />
        <span className="user" data-testid="user">
          {me.user}
          {me.is_admin ? <span className="badge off">platform admin</span> : null}
        </span>
        <button className="link" onClick={() => logout()}>
          Log out
        </button>
      </header>
      <nav className="side">
        {links.map(([path, label]) => (
          <NavLink key={path} to={`/p/${pid}/${path}`}>
            {label}
          </NavLink>
        ))}
        {me.is_admin ? <NavLink to="/admin">Administration</NavLink> : null}
      </nav>
      <main className="main">
        {match && !known ? (
          <ErrorNote error={new Error("This project does not exist, or you are not one of its members.")} />
        ) : (
          // a view that fails says so in place of itself; another view is another chance
          <PageError resetKey={location.pathname}>
            <Suspense fallback={<Loading />}>{children}</Suspense>
          </PageError>
        )}
      </main>
    </div>
  );
}
