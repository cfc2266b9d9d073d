import { useQuery } from "@tanstack/react-query";
import { Link } from "react-router";
import { api } from "../api/client";
import type { Pool, QueuedJob, SearchResult, Whoami } from "../api/types";
import { Badge, Empty, ErrorNote, Loading, Section } from "../components/bits";
import { Time } from "../components/Time";
import { AmountBars } from "../components/Usage";
import { count } from "../lib/format";
import { useProject, useSession } from "../session";

const SHOWN = 200;

export default function Queue() {
  const project = useProject();
  const { me } = useSession();
  const pid = project.id;
  const pools = useQuery({ queryKey: ["pools", pid], queryFn: () => api<{ pools: Pool[] }>(`/v2/${pid}/training-pools`), refetchInterval: 5_000 });
  const queue = useQuery({
    queryKey: ["queue", pid],
    queryFn: () => api<{ pools: { pool_id: string; jobs: QueuedJob[] }[] }>(`/v2/${pid}/training-queue`),
    refetchInterval: 5_000,
  });
  const running = useQuery({
    queryKey: ["running", pid],
    queryFn: () =>
      api<SearchResult>(`/v2/${pid}/training-job-searches`, {
        method: "POST",
        body: { limit: 50, sort_by: "start_time", order: "desc", filters: [{ key: "phase", operator: "in", value: ["Running", "Terminating"] }] },
      }),
    refetchInterval: 5_000,
  });
  if (pools.isPending) return <Loading />;
  const names = projectNames(me?.projects ?? [], pools.data?.pools ?? []);
  return (
    <div className="queue">
      <header className="page-head">
        <h1>Queue and quotas</h1>
      </header>
      <ErrorNote error={pools.error ?? queue.error ?? running.error} />
      {(pools.data?.pools ?? []).map((pool) => {
        const waiting = queue.data?.pools.find((p) => p.pool_id === pool.pool_id)?.jobs ?? [];
        const runs = (running.data?.items ?? []).filter((j) => j.spec.resource.pool_id === pool.pool_id);
        return (
          <Section key={pool.pool_id} title={`Pool ${pool.pool_id}`}>
            <div className="columns">
              <div>
                <h3>Capacity</h3>
                <AmountBars used={pool.used} total={pool.capacity} />
                <p className="muted small">
                  {pool.nodes.length} node(s) · {count(pool.pending_jobs)} job(s) waiting
                </p>
              </div>
              <div>
                <h3>Projects: use, quota and fair share</h3>
                <table className="grid">
                  <thead>
                    <tr>
                      <th>project</th>
                      <th>use against quota</th>
                      <th>weight</th>
                      <th>recent share</th>
                    </tr>
                  </thead>
                  <tbody>
                    {pool.projects.map((p) => (
                      <tr key={p.project_id} className={p.project_id === pid ? "current" : ""}>
                        <td>{p.name || p.project_id}</td>
                        <td>
                          <AmountBars used={p.used} total={p.limits} />
                          {p.limits ? (p.borrowing ? <span className="muted small">may borrow idle capacity</span> : null) : <span className="muted small">no quota</span>}
                        </td>
                        <td>{p.weight ?? 1}</td>
                        <td>{Math.round(p.recent_share * 1000) / 10}%</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            </div>
            <h3>Running ({runs.length})</h3>
            {running.isPending ? <Loading what="Loading the running jobs" /> : null}
            {running.isPending ? null : runs.length ? (
              <ul className="plain">
                {runs.map((j) => (
                  <li key={j.metadata.id}>
                    <Link to={`/p/${pid}/jobs/${j.metadata.id}`}>{j.metadata.name}</Link> <Badge state={j.status.phase} />{" "}
                    <span className="muted">
                      {j.spec.resource.flavor_id} × {j.spec.resource.node_count} · started <Time ms={j.status.start_time} />
                    </span>
                  </li>
                ))}
              </ul>
            ) : (
              <Empty>Nothing of this project runs in this pool.</Empty>
            )}
            <h3>Waiting ({waiting.length})</h3>
            {queue.isPending ? <Loading what="Loading the queue" /> : null}
            {queue.isPending ? null : waiting.length ? (
              <table className="grid" data-testid={`queue-${pool.pool_id}`}>
                <thead>
                  <tr>
                    <th>#</th>
                    <th>job</th>
                    <th>priority</th>
                    <th>size</th>
                    <th>submitted</th>
                    <th>why it waits</th>
                  </tr>
                </thead>
                <tbody>
                  {waiting.slice(0, SHOWN).map((j) => (
                    <tr key={j.position}>
                      <td>{j.position}</td>
                      <td>{j.id ? <Link to={`/p/${pid}/jobs/${j.id}`}>{j.name}</Link> : <span className="muted">{otherJob(j.project_id, names)}</span>}</td>
                      <td>{j.priority}</td>
                      <td>
                        {j.flavor_id} × {j.node_count}
                      </td>
                      <td>
                        <Time ms={j.create_time} />
                      </td>
                      <td>{j.reason}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            ) : (
              <Empty>No job waits in this pool.</Empty>
            )}
            {waiting.length > SHOWN ? <p className="muted">and {count(waiting.length - SHOWN)} more</p> : null}
          </Section>
        );
      })}
    </div>
  );
}

/** The names of the projects the user may know: theirs, and those the pools show (each
 * project that uses a pool or has a quota in it is named there to every member). */
export function projectNames(mine: Whoami["projects"], pools: Pool[]): Map<string, string> {
  const names = new Map<string, string>();
  pools.forEach((pool) => pool.projects.forEach((p) => p.name && names.set(p.project_id, p.name)));
  mine.forEach((p) => names.set(p.project_id, p.name));
  return names;
}

/** A waiting job of another project, whose id and name the queue does not give. */
export function otherJob(projectId: string, names: Map<string, string>): string {
  const name = names.get(projectId);
  return name ? `a job of project ${name}` : "a job of another project";
}
