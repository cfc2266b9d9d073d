import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Link, useParams } from "react-router";
import { api } from "../../api/client";
import type { Loop, Round } from "../../api/types";
import { Badge, ErrorNote, KeyValues, Loading, Section } from "../../components/bits";
import { Time } from "../../components/Time";
import { number } from "../../lib/format";
import { absolute, duration } from "../../lib/time";
import { useProject } from "../../session";

export default function LoopPage() {
  const project = useProject();
  const pid = project.id;
  const { loop: name = "" } = useParams();
  const client = useQueryClient();
  const key = ["loop", pid, name];
  const q = useQuery({ queryKey: key, queryFn: () => api<Loop>(`/v2/${pid}/incremental-learning-jobs/${name}`), refetchInterval: 3_000 });
  const act = useMutation({
    mutationFn: (body: Record<string, unknown>) => api(`/v2/${pid}/incremental-learning-jobs/${name}/actions`, { method: "POST", body }),
    onSettled: () => client.invalidateQueries({ queryKey: key }),
  });
  const [reason, setReason] = useState("");
  const [version, setVersion] = useState("");
  if (q.isPending) return <Loading />;
  if (!q.data) return <ErrorNote error={q.error} />;
  const l = q.data;
  const s = l.status;
  const waiting = s.state === "Waiting";
  const stopped = s.state === "Stopped" || s.state === "Failed";
  return (
    <div className="loop">
      <header className="page-head">
        <div>
          <div className="crumbs">
            <Link to={`/p/${pid}/loops`}>Learning loops</Link>
          </div>
          <h1>{l.metadata.name}</h1>
          <div className="phase-line">
            <Badge state={s.state} /> <span className="muted">stage {s.stage}</span>
            {s.message ? <span className="reason">{s.message}</span> : null}
          </div>
        </div>
        {project.canAct ? (
          <div className="actions">
            {!stopped ? <button onClick={() => act.mutate({ action: "trigger" })}>Start a round</button> : null}
            {!stopped ? (
              <button
                onClick={() =>
                  window.confirm(`Stop the loop ${l.metadata.name}? Its round, deploy, jobs and service stop (its samples are kept); Resume starts it again.`) &&
                  act.mutate({ action: "stop" })
                }
              >
                Stop
              </button>
            ) : (
              <button onClick={() => act.mutate({ action: "resume" })}>Resume</button>
            )}
          </div>
        ) : null}
      </header>
      <ErrorNote error={act.error} />
      <div className="columns">
        <Section title="Now">
          <KeyValues
            rows={[
              ["model", `${s.model.name}:${s.model.alias} → ${s.model.version ? `v${s.model.version}` : `the initial model (${s.model.initial})`}`],
              ["dataset", `${s.dataset.name ?? "?"}: ${s.dataset.number_of_samples ?? "?"} samples`],
              ["new training samples", String(s.num_of_samples)],
              ["evaluation samples", String(s.eval_samples)],
              ["service", s.service ? <Link key="s" to={`/p/${pid}/jobs/${s.service.job_id}`}>{s.service.job_name} ({s.service.phase})</Link> : null],
            ]}
          />
        </Section>
        <Section title="Conditions">
          <ul className="plain conditions">
            {s.conditions.map((c, i) => (
              <li key={i}>
                <strong>{c.stage}</strong> <Badge state={c.type} /> {c.reason && c.reason !== c.type ? <span className="muted">{c.reason}</span> : null} {c.message}
              </li>
            ))}
          </ul>
        </Section>
      </div>
      {project.canAct && waiting ? (
        <Section title="Promote or roll back">
          <div className="inline">
            <input aria-label="reason" placeholder="why (recorded in the alias's history)" value={reason} onChange={(e) => setReason(e.target.value)} />
            <input aria-label="version" placeholder="version (default: the last round's)" value={version} onChange={(e) => setVersion(e.target.value)} size={28} />
            <button
              onClick={() =>
                window.confirm(`Deploy ${version ? `v${version}` : "the last round's new model"} and move ${s.model.name}:${s.model.alias} to it?`) &&
                act.mutate({ action: "promote", reason: reason || "promoted from the console", ...(version ? { version: Number(version) } : {}) })
              }
            >
              Promote
            </button>
            <button
              onClick={() =>
                window.confirm(`Deploy the version ${s.model.name}:${s.model.alias} named before its last move, and move the alias back to it?`) &&
                act.mutate({ action: "rollback", reason: reason || "rolled back from the console" })
              }
            >
              Roll back
            </button>
          </div>
        </Section>
      ) : null}
      <Section title={`Rounds (${s.rounds.length})`}>
        <RoundsTimeline rounds={s.rounds} />
        <div className="rounds" data-testid="rounds">
          {[...s.rounds].reverse().map((r) => (
            <RoundCard key={r.number} round={r} pid={pid} />
          ))}
        </div>
      </Section>
      <Section title="Deploys">
        <table className="grid">
          <thead>
            <tr>
              <th>#</th>
              <th>model</th>
              <th>state</th>
              <th>round</th>
              <th>why</th>
              <th>when</th>
            </tr>
          </thead>
          <tbody>
            {[...s.deploys].reverse().map((d) => (
              <tr key={d.seq}>
                <td>{d.seq}</td>
                <td>{d.model}</td>
                <td>
                  <Badge state={d.state} />
                </td>
                <td>{d.round ?? ""}</td>
                <td className="small">{d.reason ?? ""}{d.message ? ` · ${d.message}` : ""}</td>
                <td>
                  <Time ms={d.create_time} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
    </div>
  );
}

/** Each round as a bar on one time axis, coloured by how it ended. */
function RoundsTimeline({ rounds }: { rounds: Round[] }) {
  if (!rounds.length) return <p className="muted">No round yet: the loop waits for its trigger.</p>;
  const now = Date.now();
  const start = Math.min(...rounds.map((r) => r.start_time));
  const end = Math.max(...rounds.map((r) => r.end_time ?? now));
  const span = Math.max(1, end - start);
  return (
    <div className="round-axis" aria-label="rounds timeline">
      {rounds.map((r) => {
        const left = ((r.start_time - start) / span) * 100;
        const width = Math.max(1.5, (((r.end_time ?? now) - r.start_time) / span) * 100);
        return (
          <div
            key={r.number}
            className={`round-bar state-${r.state}`}
            style={{ left: `${left}%`, width: `${width}%` }}
            title={`round ${r.number}: ${r.state}, ${absolute(r.start_time)}, ${duration((r.end_time ?? now) - r.start_time)}`}
          >
            {r.number}
          </div>
        );
      })}
    </div>
  );
}

function RoundCard({ round: r, pid }: { round: Round; pid: string }) {
  const names = [...new Set([...Object.keys(r.metrics.new), ...Object.keys(r.metrics.current)])].sort();
  const trigger = r.trigger as { num_of_samples?: number; rule?: string; manual?: boolean; by?: string };
  return (
    <article className="round" data-testid={`round-${r.number}`}>
      <header>
        <strong>Round {r.number}</strong> <Badge state={r.state} /> <Time ms={r.start_time} />{" "}
        <span className="muted small">{r.end_time ? `took ${duration(r.end_time - r.start_time)}` : "running"}</span>
      </header>
      <div className="small">
        <span className="muted">trigger:</span> {trigger.rule ?? (trigger.manual ? `asked for${trigger.by ? ` by ${trigger.by}` : ""}` : JSON.stringify(r.trigger))} ·{" "}
        {r.train_samples} training / {r.eval_samples} evaluation samples
      </div>
      <div className="small">
        {r.train_job_id ? <Link to={`/p/${pid}/jobs/${r.train_job_id}`}>train job</Link> : null}
        {r.eval_job_id ? <> · <Link to={`/p/${pid}/jobs/${r.eval_job_id}`}>eval job</Link></> : null}
        {r.new_version ? <span> · new version v{r.new_version}</span> : null}
        {r.current_model ? <span className="muted"> · judged against {r.current_model}</span> : null}
      </div>
      {names.length ? (
        <table className="grid metrics-vs">
          <thead>
            <tr>
              <th>metric</th>
              <th>new</th>
              <th>current</th>
              <th>delta</th>
            </tr>
          </thead>
          <tbody>
            {names.map((m) => {
              const a = r.metrics.new[m];
              const b = r.metrics.current[m];
              const delta = a !== undefined && b !== undefined ? a - b : undefined;
              return (
                <tr key={m}>
                  <td>{m}</td>
                  <td>{number(a)}</td>
                  <td>{number(b)}</td>
                  <td className={delta === undefined ? "" : delta > 0 ? "up" : delta < 0 ? "down" : ""}>{delta === undefined ? "" : number(delta)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      ) : null}
      {r.decision ? (
        <div className="verdict">
          verdict: <strong>{r.decision}</strong> <span className="muted">{r.rule}</span>
        </div>
      ) : null}
      {r.deploy ? (
        <div className="small">
          deploy of {r.deploy.model}: <Badge state={r.deploy.state} /> {r.deploy.message ?? ""}
        </div>
      ) : null}
      {r.message ? <div className="error small">{r.message}</div> : null}
    </article>
  );
}
