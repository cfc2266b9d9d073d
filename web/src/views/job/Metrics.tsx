import { useQuery } from "@tanstack/react-query";
import { api } from "../../api/client";
import type { Job, Series } from "../../api/types";
import { Empty, ErrorNote, Loading, Section } from "../../components/bits";
import { Chart } from "../../components/Chart";
import { number } from "../../lib/format";
import { memory } from "../../lib/axis";
import { align } from "../../lib/series";
import { ACTIVE } from "./useJob";

/** about as many points as a chart is wide: the server downsamples longer series */
const POINTS = 800;

export function Metrics({ pid, job }: { pid: string; job: Job }) {
  const active = ACTIVE.has(job.status.phase);
  const id = job.metadata.id;
  const training = useQuery({
    queryKey: ["job-extra", pid, id, "training-metrics"],
    queryFn: () =>
      api<{ metrics: Series[]; final_metrics: Record<string, number> }>(`/v2/${pid}/training-jobs/${id}/training-metrics`, {
        query: { points: POINTS },
      }),
    refetchInterval: active ? 3_000 : false,
  });
  const finals = Object.entries(training.data?.final_metrics ?? {});
  return (
    <div className="metrics">
      <Section title="Training metrics">
        <ErrorNote error={training.error} />
        {training.isPending ? <Loading what="Loading the metrics" /> : null}
        {finals.length ? (
          <div className="finals" data-testid="final-metrics">
            {finals.map(([k, v]) => (
              <span key={k} className="final">
                {k} <strong>{number(v)}</strong>
              </span>
            ))}
          </div>
        ) : null}
        {training.data && !training.data.metrics.length ? (
          <Empty>
            No metrics reported {active ? "yet" : ""}. A job reports them with <code>corral.job.log_metrics</code> or by
            printing <code>corral:metrics loss=0.3</code> lines.
          </Empty>
        ) : null}
        <div className="charts">
          {(training.data?.metrics ?? []).map((s) => {
            const a = align(s);
            return <Chart key={s.metric} title={s.metric} x={a.x} lines={a.lines} time={a.time} />;
          })}
        </div>
      </Section>
      {job.status.tasks.map((task) => (
        <Resources key={task} pid={pid} job={job} task={task} active={active} />
      ))}
    </div>
  );
}

const RESOURCE = ["cpuUsage", "memUsedMB", "memUsage", "gpuUtil", "gpuMemUsage"];

function Resources({ pid, job, task, active }: { pid: string; job: Job; task: string; active: boolean }) {
  const id = job.metadata.id;
  const q = useQuery({
    queryKey: ["job-extra", pid, id, "metrics", task],
    queryFn: () => api<{ metrics: Series[]; times: number[] }>(`/v2/${pid}/training-jobs/${id}/metrics/${task}`, { query: { points: POINTS } }),
    refetchInterval: active ? 3_000 : false,
  });
  if (!job.status.running_records.length) return null;
  const by = new Map((q.data?.metrics ?? []).filter((s) => RESOURCE.includes(s.metric)).map((s) => [s.metric, s.value]));
  const x = q.data?.times ?? [];
  const mem = memory(by.get("memUsedMB") ?? []);
  const gpus = (by.get("gpuUtil") ?? []).some((v) => v > 0) || (by.get("gpuMemUsage") ?? []).some((v) => v > 0);
  return (
    <Section title={`Resources of ${task} (latest attempt)`}>
      <ErrorNote error={q.error} />
      {q.isPending ? <Loading what="Loading the samples" /> : null}
      {q.data && !x.length ? <Empty>No samples yet.</Empty> : null}
      {x.length ? (
        <div className="charts">
          <Chart title={`CPU ${task}`} x={x} time unit="%" lines={[{ label: "CPU % of its cores", values: by.get("cpuUsage") ?? [] }]} />
          <Chart title={`memory ${task}`} x={x} time unit={mem.unit} lines={[{ label: `memory${mem.unit}`, values: mem.values }]} />
          {gpus ? (
            <Chart
              title={`GPU ${task}`}
              x={x}
              time
              unit="%"
              lines={[
                { label: "GPU %", values: by.get("gpuUtil") ?? [] },
                { label: "GPU memory %", values: by.get("gpuMemUsage") ?? [] },
              ]}
            />
          ) : null}
        </div>
      ) : null}
    </Section>
  );
}
