import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { api } from "../../api/client";
import type { Job, JobEvent } from "../../api/types";
import { Badge, ErrorNote, KeyValues, Loading, Section } from "../../components/bits";
import { Duration, Time } from "../../components/Time";
import { duration } from "../../lib/time";
import { LastLines } from "./LastLines";

export const WAITS: Record<string, string> = {
  queued: "waiting for its turn in the queue",
  no_capacity: "next to start: the pool lacks free capacity for now",
  gang_does_not_fit: "next to start: capacity is free but not on enough nodes",
  preempting: "next to start: preempted jobs are stopping to make room",
  behind_priority: "a job of higher priority is next to start in the pool",
  quota_exceeded: "its project's quota in the pool would be exceeded",
  no_node: "no node of its pool could hold it",
  disk_low: "the server's disk is below its free-space floor: nothing starts",
};

export function Overview({ pid, job }: { pid: string; job: Job }) {
  const s = job.status;
  const r = job.spec.resource;
  const alg = job.algorithm;
  return (
    <div className="overview">
      {s.phase === "Pending" || s.phase === "Creating" ? <WhyItWaits job={job} /> : null}
      {s.failure_class ? (
        <div className="error" data-testid="failure">
          {s.failure_class.replace("_", " ")}: {s.reason}
        </div>
      ) : null}
      {s.phase === "Failed" || s.phase === "Abnormal" ? <LastLines pid={pid} job={job} /> : null}
      <div className="columns">
        <Section title="Status">
          <KeyValues
            rows={[
              ["phase", <Badge state={s.phase} key="p" />],
              ["secondary phase", s.secondary_phase],
              ["created", <Time ms={job.metadata.create_time} key="c" />],
              ["started", s.start_time ? <Time ms={s.start_time} key="s" /> : null],
              ["duration", <Duration key="d" ms={s.duration} start={s.start_time} running={s.phase === "Running"} />],
              ["user", job.metadata.user_name],
              ["description", job.metadata.description || null],
            ]}
          />
        </Section>
        <Section title="What it runs">
          <KeyValues
            rows={[
              ["code", alg.command ? <code key="c">{alg.command}</code> : <code key="c">{`${alg.code_dir ?? ""} ${alg.boot_file ?? ""}`}</code>],
              ["flavor", `${r.flavor_id}${r.flavor_name && r.flavor_name !== r.flavor_id ? ` (${r.flavor_name})` : ""}`],
              ["nodes", String(r.node_count)],
              ["pool", r.pool_id],
              ["parameters", (alg.parameters ?? []).map((p) => `${p.name}=${p.value ?? ""}`).join(" ") || null],
              ["inputs", channels(alg.inputs)],
              ["outputs", channels(alg.outputs)],
            ]}
          />
        </Section>
      </div>
      <Attempts job={job} />
      <Timeline pid={pid} job={job} />
    </div>
  );
}

function channels(list: Job["algorithm"]["inputs"]) {
  if (!list?.length) return null;
  return (
    <ul className="plain">
      {list.map((c) => {
        const ds = c.remote?.dataset;
        return (
          <li key={c.name}>
            {c.name}:{" "}
            {ds ? (
              <span data-testid={`dataset-${c.name}`}>
                dataset {ds.name ?? ds.id} version {ds.version_name ?? ds.version_id}{" "}
                <code className="muted small">{ds.obs_url ?? ""}</code>
              </span>
            ) : (
              <code>{c.remote?.obs?.obs_url ?? ""}</code>
            )}
          </li>
        );
      })}
    </ul>
  );
}

function WhyItWaits({ job }: { job: Job }) {
  const q = job.status.queue;
  return (
    <div className="waits" data-testid="why-it-waits">
      <strong>Why it waits:</strong> {job.status.reason ?? (q ? WAITS[q.wait_code] : "it is being created")}
      {q ? (
        <div className="muted small">
          {WAITS[q.wait_code] ?? q.wait_code} · pool {q.pool_id} · priority {q.priority} ·{" "}
          {q.jobs_ahead ? `${q.jobs_ahead} job(s) ahead` : "next to start"}
        </div>
      ) : null}
    </div>
  );
}

function Attempts({ job }: { job: Job }) {
  const records = job.status.running_records;
  if (!records.length) return null;
  const exits = new Map(job.status.task_statuses.map((t) => [t.task, t]));
  return (
    <Section title={`Attempts (${records.length})`}>
      <table className="grid" data-testid="attempts">
        <thead>
          <tr>
            <th>#</th>
            <th>started</th>
            <th>how</th>
            <th>ran</th>
            <th>ended because</th>
            <th>then</th>
          </tr>
        </thead>
        <tbody>
          {records.map((rec, i) => (
            <tr key={i}>
              <td>{i + 1}</td>
              <td>
                <Time ms={rec.start_at * 1000} />
              </td>
              <td>{rec.start_type}</td>
              <td>{rec.end_at ? duration((rec.end_at - rec.start_at) * 1000) : "running"}</td>
              <td>
                {rec.end_reason ?? ""}
                {rec.end_related_task ? <span className="muted"> ({rec.end_related_task})</span> : null}
              </td>
              <td>{rec.end_recover ?? ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <div className="tasks">
        {job.status.tasks.map((task) => {
          const t = exits.get(task);
          return (
            <span key={task} className="task" data-testid={`exit-${task}`}>
              {task}: {t?.exit_code === undefined ? "no exit code yet" : `exit code ${t.exit_code}`}
              {t?.message ? <span className="muted"> · {t.message}</span> : null}
            </span>
          );
        })}
      </div>
    </Section>
  );
}

interface Entry {
  time: number;
  level: string;
  text: string;
  source: string;
}

function Timeline({ pid, job }: { pid: string; job: Job }) {
  const [pages, setPages] = useState(1);
  const events = useQuery({
    queryKey: ["job-extra", pid, job.metadata.id, "events", pages],
    queryFn: () =>
      api<{ total: number; events: JobEvent[] }>(`/v2/${pid}/training-jobs/${job.metadata.id}/events`, {
        query: { order: "desc", limit: 100, offset: 0 },
      }).then(async (first) => {
        // older pages, as many as asked for
        const more = [];
        for (let p = 1; p < pages && p * 100 < first.total; p++) {
          more.push(
            await api<{ events: JobEvent[] }>(`/v2/${pid}/training-jobs/${job.metadata.id}/events`, {
              query: { order: "desc", limit: 100, offset: p },
            }),
          );
        }
        return { total: first.total, events: first.events.concat(...more.map((m) => m.events)) };
      }),
  });
  const entries: Entry[] = (events.data?.events ?? []).map((e) => ({
    time: Number(e.time),
    level: e.level,
    text: e.message,
    source: e.source,
  }));
  job.status.running_records.forEach((rec, i) => {
    entries.push({ time: rec.start_at * 1000, level: "Attempt", text: `attempt ${i + 1} started (${rec.start_type})`, source: "record" });
    if (rec.end_at)
      entries.push({
        time: rec.end_at * 1000,
        level: "Attempt",
        text: `attempt ${i + 1} ended${rec.end_reason ? `: ${rec.end_reason}` : ""}${rec.end_recover ? `; ${rec.end_recover}` : ""}`,
        source: "record",
      });
  });
  entries.sort((a, b) => b.time - a.time);
  const total = events.data?.total ?? 0;
  return (
    <Section title="Timeline">
      <ErrorNote error={events.error} />
      {events.isPending ? <Loading what="Loading the events" /> : null}
      <ol className="timeline" data-testid="timeline">
        {entries.map((e, i) => (
          <li key={i} className={`lvl-${e.level.toLowerCase()}`}>
            <span className="when">
              <Time ms={e.time} />
            </span>
            <span className="what">{e.text}</span>
          </li>
        ))}
      </ol>
      {total > pages * 100 ? (
        <button className="link" onClick={() => setPages(pages + 1)}>
          Older events ({total - pages * 100} more)
        </button>
      ) : null}
    </Section>
  );
}
