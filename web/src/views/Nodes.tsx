import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { api } from "../api/client";
import type { Info, Leader, NodeUsage, Pool } from "../api/types";
import { Chart } from "../components/Chart";
import { Empty, ErrorNote, KeyValues, Loading, Section } from "../components/bits";
import { Time } from "../components/Time";
import { AmountBars } from "../components/Usage";
import { useProject } from "../session";

export default function Nodes() {
  const { id: pid } = useProject();
  const info = useQuery({ queryKey: ["info"], queryFn: () => api<Info>("/corral/info"), staleTime: 30_000, refetchInterval: 10_000 });
  const pools = useQuery({ queryKey: ["pools", pid], queryFn: () => api<{ pools: Pool[] }>(`/v2/${pid}/training-pools`), refetchInterval: 5_000 });
  if (info.isPending || pools.isPending) return <Loading />;
  const gpus = new Map(info.data?.nodes.map((n) => [n.name, n.gpus]) ?? []);
  return (
    <div>
      <header className="page-head">
        <h1>Nodes and GPUs</h1>
      </header>
      <ErrorNote error={info.error ?? pools.error} />
      {info.data ? (
        <Section title="Server">
          <KeyValues
            rows={[
              ["corral", info.data.version],
              ["database", info.data.database],
              ["home", info.data.home],
              ["task containment", info.data.containment],
              ["scheduling leader", <LeaderLine leader={info.data.leader} />],
            ]}
          />
        </Section>
      ) : null}
      {(pools.data?.pools ?? []).map((pool) => (
        <Section key={pool.pool_id} title={`Pool ${pool.pool_id}${pool.executor ? ` (${pool.executor})` : ""}`}>
          <AmountBars used={pool.used} total={pool.capacity} />
          <table className="grid" data-testid={`nodes-${pool.pool_id}`}>
            <thead>
              <tr>
                <th>node</th>
                <th>CPUs</th>
                <th>memory</th>
                <th>GPUs</th>
                <th>GPU type</th>
                <th>other accelerators</th>
              </tr>
            </thead>
            <tbody>
              {pool.nodes.map((n) => (
                <tr key={n.name}>
                  <td>{n.name}</td>
                  <td>{n.cpu}</td>
                  <td>{n.memory_gb} GB</td>
                  <td>{n.gpu || gpus.get(n.name) || 0}</td>
                  <td>{n.gpu_type || <span className="muted">–</span>}</td>
                  <td>
                    {Object.entries(n.accelerators ?? {})
                      .map(([k, v]) => `${k} ×${v}`)
                      .join(", ")}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Section>
      ))}
      <UseOverTime />
    </div>
  );
}

const SPANS: [number, string][] = [
  [15, "15 minutes"],
  [60, "1 hour"],
  [360, "6 hours"],
  [1440, "24 hours"],
];

/** Each node's own use over time, whoever uses it (GET /corral/node-usage). */
function UseOverTime() {
  const [minutes, setMinutes] = useState(60);
  const q = useQuery({
    queryKey: ["node-usage", minutes],
    queryFn: () => api<{ nodes: NodeUsage[] }>("/corral/node-usage", { query: { minutes, points: 300 } }),
    refetchInterval: 10_000,
  });
  return (
    <Section title="Use over time">
      <label>
        over the last{" "}
        <select value={minutes} onChange={(e) => setMinutes(Number(e.target.value))} data-testid="usage-span">
          {SPANS.map(([m, label]) => (
            <option key={m} value={m}>
              {label}
            </option>
          ))}
        </select>
      </label>
      <ErrorNote error={q.error} />
      {q.isPending ? <Loading what="Loading the samples" /> : null}
      {(q.data?.nodes ?? []).map((n) => (
        <NodeCharts key={n.name} node={n} />
      ))}
    </Section>
  );
}

/** CPU and memory, and GPU utilisation and memory where it has GPUs, as percentages of
 * what the node has. */
export function NodeCharts({ node }: { node: NodeUsage }) {
  const pct = (values: number[], total: number) => values.map((v) => (total > 0 ? Math.round((v / total) * 1000) / 10 : null));
  return (
    <div data-testid={`usage-${node.name}`}>
      <h3>{node.name}</h3>
      {node.times.length ? (
        <div className="charts">
          <Chart
            title={`CPU and memory ${node.name}`}
            x={node.times}
            time
            unit="%"
            lines={[
              { label: `CPU % of ${node.cpu} cores`, values: node.cpu_percent },
              { label: `memory % of ${Math.round(node.memory_mb / 1024)} GB`, values: pct(node.mem_mb, node.memory_mb) },
            ]}
          />
          {node.gpu_util ? (
            <Chart
              title={`GPUs ${node.name}`}
              x={node.times}
              time
              unit="%"
              lines={[
                { label: `GPU % (${node.gpus})`, values: node.gpu_util },
                { label: "GPU memory %", values: pct(node.gpu_mem_mb ?? [], node.gpu_memory_mb) },
              ]}
            />
          ) : null}
        </div>
      ) : (
        <Empty>No samples yet: the scheduling server samples each node every few seconds.</Empty>
      )}
    </div>
  );
}

/** Which server schedules (docs/high-availability.md): its name, where, since when. */
export function LeaderLine({ leader }: { leader: Leader | null | undefined }) {
  if (!leader) return <span data-testid="leader">none now: a standby takes over within seconds</span>;
  return (
    <span data-testid="leader">
      {leader.name}
      {leader.url ? ` at ${leader.url}` : ""} (epoch {leader.epoch}, since <Time ms={leader.since} />)
      {leader.this_server ? ", this server" : ""}
    </span>
  );
}
