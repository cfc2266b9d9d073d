import { useQuery } from "@tanstack/react-query";
import { api } from "../api/client";
import type { Info, Leader, Pool } from "../api/types";
import { ErrorNote, KeyValues, Loading, Section } from "../components/bits";
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
