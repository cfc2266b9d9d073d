import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Link, useParams } from "react-router";
import { api } from "../../api/client";
import type { Pipeline } from "../../api/types";
import { Badge, ErrorNote, KeyValues, Loading, Progress, Section } from "../../components/bits";
import { Dag } from "../../components/Dag";
import { Duration, Time } from "../../components/Time";
import { graph } from "../../lib/dag";
import { number } from "../../lib/format";
import { useProject } from "../../session";

export default function PipelinePage() {
  const project = useProject();
  const pid = project.id;
  const { pipelineId = "" } = useParams();
  const client = useQueryClient();
  const key = ["pipeline", pid, pipelineId];
  const q = useQuery({
    queryKey: key,
    queryFn: () => api<Pipeline>(`/v2/${pid}/pipelines/${pipelineId}`),
    refetchInterval: (query) => (query.state.data?.status.state === "running" ? 1_500 : false),
  });
  const act = useMutation({
    mutationFn: (body: Record<string, unknown>) => api<Pipeline>(`/v2/${pid}/pipelines/${pipelineId}/actions`, { method: "POST", body }),
    onSuccess: (p) => client.setQueryData(key, p),
  });
  const [mode, setMode] = useState("from_failed");
  const [fromTask, setFromTask] = useState("");
  if (q.isPending) return <Loading />;
  if (!q.data) return <ErrorNote error={q.error} />;
  const p = q.data;
  const { nodes, edges } = graph(p.dag, p.tasks);
  const running = p.status.state === "running";
  return (
    <div className="pipeline">
      <header className="page-head">
        <div>
          <div className="crumbs">
            <Link to={`/p/${pid}/pipelines`}>Pipelines</Link>
          </div>
          <h1>{p.name}</h1>
          <div className="phase-line">
            <Badge state={p.status.state} />
            <Progress value={p.status.progress} state={p.status.state} label="progress" /> <span data-testid="progress">{Math.round(p.status.progress)}%</span>
            <span className="muted">attempt {p.status.attempt}</span>
            {p.status.message ? <span className="reason">{p.status.message}</span> : null}
          </div>
        </div>
        {project.canAct ? (
          <div className="actions">
            {running ? (
              <button
                onClick={() =>
                  window.confirm(`Stop the pipeline ${p.name}? Its running tasks' jobs are stopped and its waiting tasks canceled; it ends canceled.`) &&
                  act.mutate({ action: "stop" })
                }
                disabled={p.status.stopping || act.isPending}
              >
                {p.status.stopping ? "Stopping…" : "Stop"}
              </button>
            ) : (
              <form
                className="inline"
                onSubmit={(e) => {
                  e.preventDefault();
                  act.mutate({ action: "rerun", mode, ...(mode === "from_task" ? { from_task: fromTask || p.dag[0]?.name } : {}) });
                }}
              >
                <select aria-label="rerun mode" value={mode} onChange={(e) => setMode(e.target.value)}>
                  <option value="from_failed">what did not succeed</option>
                  <option value="from_task">from a task on</option>
                  <option value="all">everything</option>
                </select>
                {mode === "from_task" ? (
                  <select aria-label="from task" value={fromTask} onChange={(e) => setFromTask(e.target.value)}>
                    {p.dag.map((t) => (
                      <option key={t.name}>{t.name}</option>
                    ))}
                  </select>
                ) : null}
                <button type="submit" disabled={act.isPending}>
                  Rerun
                </button>
              </form>
            )}
          </div>
        ) : null}
      </header>
      <ErrorNote error={act.error} />
      <Dag nodes={nodes} edges={edges} pid={pid} />
      <Section title="Runs">
        <table className="grid" data-testid="runs">
          <thead>
            <tr>
              <th>run</th>
              <th>state</th>
              <th>origin</th>
              <th>job</th>
              <th>started</th>
              <th>ran</th>
              <th>metrics</th>
              <th>message</th>
            </tr>
          </thead>
          <tbody>
            {p.tasks.map((r) => (
              <tr key={r.key}>
                <td>{r.key}</td>
                <td>
                  <Badge state={r.state} />
                </td>
                <td className="muted">{r.origin}</td>
                <td>{r.job_id ? <Link to={`/p/${pid}/jobs/${r.job_id}`}>{r.job_phase ?? "job"}</Link> : ""}</td>
                <td>{r.start_time ? <Time ms={r.start_time} /> : ""}</td>
                <td>{r.start_time ? <Duration ms={r.duration} start={r.start_time} running={r.state === "running"} /> : ""}</td>
                <td className="small">
                  {Object.entries(r.metrics ?? {})
                    .map(([k, v]) => `${k}=${number(v)}`)
                    .join(" ")}
                </td>
                <td className="small">{r.message ?? ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
      <div className="columns">
        <Section title="Pipeline">
          <KeyValues
            rows={[
              ["created", <Time ms={p.create_time} key="c" />],
              ["by", p.user_name],
              ["ran", <Duration key="d" ms={p.status.duration} start={p.status.start_time} running={running} />],
              ["parameters", Object.entries(p.parameters).map(([k, v]) => `${k}=${v}`).join(" ") || null],
              ["model", p.model ? <Link key="m" to={`/p/${pid}/models/${p.model.name}`}>{p.model.name}{p.model.version ? ` v${p.model.version}` : ""}</Link> : null],
            ]}
          />
        </Section>
        <Section title="Attempts">
          <table className="grid">
            <tbody>
              {p.attempts.map((a) => (
                <tr key={a.number}>
                  <td>{a.number}</td>
                  <td>
                    <Badge state={a.state} />
                  </td>
                  <td className="muted">{a.mode && a.mode !== "initial" ? `rerun ${a.mode.replace("_", " ")}${a.from_task ? ` ${a.from_task}` : ""}` : "first run"}</td>
                  <td>
                    <Time ms={a.start_time} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Section>
      </div>
    </div>
  );
}
