import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Link, NavLink, useNavigate, useParams } from "react-router";
import { api } from "../../api/client";
import { Badge, ErrorNote, Loading, NotFound } from "../../components/bits";
import { CopyButton } from "../../components/CopyButton";
import { useProject } from "../../session";
import { Metrics } from "./Metrics";
import { NewVersion } from "./NewVersion";
import { Overview } from "./Overview";
import { TaskLogs } from "./TaskLogs";
import { Search } from "./Search";
import { TensorBoardLink } from "./TensorBoardLink";
import { ACTIVE, jobKey, useJob } from "./useJob";
import { Versions } from "./Versions";

const TABS: [string, string][] = [
  ["", "Overview"],
  ["logs", "Logs"],
  ["metrics", "Metrics"],
  ["versions", "Versions"],
];
/** a search's page: its trials, after its overview */
const SEARCH_TAB: [string, string] = ["trials", "Trials"];

export default function JobPage() {
  const project = useProject();
  const { jobId = "", tab = "" } = useParams();
  const job = useJob(project.id, jobId);
  const navigate = useNavigate();
  const client = useQueryClient();
  const [newVersion, setNewVersion] = useState<null | "new" | "resume">(null);
  const base = `/p/${project.id}/jobs/${jobId}`;
  const stop = useMutation({
    mutationFn: () => api(`/v2/${project.id}/training-jobs/${jobId}/actions`, { method: "POST", body: { action_type: "terminate" } }),
    onSettled: () => client.invalidateQueries({ queryKey: jobKey(project.id, jobId) }),
  });
  const remove = useMutation({
    mutationFn: () => api(`/v2/${project.id}/training-jobs/${jobId}`, { method: "DELETE" }),
    onSuccess: () => {
      client.invalidateQueries({ queryKey: ["jobs", project.id] });
      navigate(`/p/${project.id}/jobs`);
    },
  });
  if (tab !== SEARCH_TAB[0] && !TABS.some(([path]) => path === tab)) return <NotFound />;
  if (job.isPending) return <Loading what="Loading the job" />;
  if (!job.data) return <ErrorNote error={job.error} />;
  const j = job.data;
  const search = !!j.algorithm.policies?.auto_search;
  if (tab === SEARCH_TAB[0] && !search) return <NotFound />;
  const tabs = search ? [TABS[0], SEARCH_TAB, ...TABS.slice(1)] : TABS;
  const active = ACTIVE.has(j.status.phase);
  const owner = j.metadata.owner;
  return (
    <div className="job">
      <header className="page-head">
        <div>
          <div className="crumbs">
            <Link to={`/p/${project.id}/jobs`}>Jobs</Link>
            {owner ? <OwnerLink pid={project.id} owner={owner} /> : null}
          </div>
          <h1>
            {j.metadata.name} {j.metadata.version ? <span className="muted">{j.metadata.version}</span> : null}
          </h1>
          <div className="phase-line">
            <Badge state={j.status.phase} />
            <span className="muted">{j.status.secondary_phase !== j.status.phase ? j.status.secondary_phase : ""}</span>
            {j.status.reason ? <span className="reason" data-testid="reason">{j.status.reason}</span> : null}
          </div>
          <div className="copy-id muted small">
            id <code data-testid="job-id">{j.metadata.id}</code>
            <CopyButton text={j.metadata.id} label="copy the job's id" />
          </div>
        </div>
        <div className="actions">
          <TensorBoardLink pid={project.id} job={j} />
          {project.canAct ? (
            <>
              {active ? (
                <button
                  onClick={() =>
                    window.confirm(
                      search
                        ? `Stop the search ${j.metadata.name}? Its running trials are stopped with it (SIGTERM, then SIGKILL after the grace period), no new trial starts; it ends Terminated.`
                        : `Stop ${j.metadata.name}? Its tasks get SIGTERM, then SIGKILL after the grace period; it ends Terminated.`,
                    ) &&
                    stop.mutate()
                  }
                  disabled={stop.isPending || j.status.phase === "Terminating"}
                >
                  {j.status.phase === "Terminating" ? "Stopping…" : "Stop"}
                </button>
              ) : null}
              <button onClick={() => setNewVersion("new")}>New version</button>
              {!active ? <button onClick={() => setNewVersion("resume")}>Resume</button> : null}
              <button
                className="danger"
                onClick={() => window.confirm(`Delete ${j.metadata.name} and its logs? Its outputs stay.`) && remove.mutate()}
              >
                Delete
              </button>
            </>
          ) : null}
        </div>
      </header>
      <ErrorNote error={stop.error ?? remove.error} />
      {newVersion ? (
        <NewVersion pid={project.id} job={j} resume={newVersion === "resume"} onClose={() => setNewVersion(null)} />
      ) : null}
      <nav className="tabs">
        {tabs.map(([path, label]) => (
          <NavLink key={path} to={path ? `${base}/${path}` : base} end>
            {label}
          </NavLink>
        ))}
      </nav>
      {tab === "" ? <Overview pid={project.id} job={j} /> : null}
      {tab === "logs" ? <TaskLogs pid={project.id} job={j} /> : null}
      {tab === "metrics" ? <Metrics pid={project.id} job={j} /> : null}
      {tab === "versions" ? <Versions pid={project.id} job={j} /> : null}
      {tab === SEARCH_TAB[0] ? <Search pid={project.id} job={j} canAct={project.canAct} /> : null}
    </div>
  );
}

function OwnerLink({ pid, owner }: { pid: string; owner: { kind: string; id: string; role: string } }) {
  if (owner.kind === "pipeline")
    return (
      <>
        {" / "}
        <Link to={`/p/${pid}/pipelines/${owner.id}`}>pipeline</Link> <span className="muted">{owner.role}</span>
      </>
    );
  if (owner.kind === "incremental_learning")
    return (
      <>
        {" / "}
        <Link to={`/p/${pid}/loops/${owner.id}`}>learning loop</Link> <span className="muted">{owner.role}</span>
      </>
    );
  if (owner.kind === "search")
    return (
      <>
        {" / "}
        <Link to={`/p/${pid}/jobs/${owner.id}/trials`}>search</Link> <span className="muted">{owner.role}</span>
      </>
    );
  return (
    <span className="muted">
      {" / "}
      {owner.kind} {owner.role}
    </span>
  );
}
