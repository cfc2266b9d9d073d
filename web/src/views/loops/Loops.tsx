import { useQuery } from "@tanstack/react-query";
import { Link } from "react-router";
import { api } from "../../api/client";
import type { Loop } from "../../api/types";
import { Badge, Empty, ErrorNote, Loading } from "../../components/bits";
import { Time } from "../../components/Time";
import { useProject } from "../../session";

export default function Loops() {
  const { id: pid } = useProject();
  const q = useQuery({
    queryKey: ["loops", pid],
    queryFn: () => api<{ total: number; items: Loop[] }>(`/v2/${pid}/incremental-learning-jobs`),
    refetchInterval: 5_000,
  });
  return (
    <div>
      <header className="page-head">
        <h1>Incremental-learning loops</h1>
      </header>
      <ErrorNote error={q.error} />
      {q.isPending ? <Loading /> : null}
      {q.data && !q.data.items.length ? (
        <Empty>
          No loop yet: <code>corral il create -f loop.yaml</code> makes one.
        </Empty>
      ) : null}
      {q.data?.items.length ? (
        <table className="grid">
          <thead>
            <tr>
              <th>name</th>
              <th>state</th>
              <th>rounds</th>
              <th>new samples</th>
              <th>model</th>
              <th>service</th>
              <th>created</th>
            </tr>
          </thead>
          <tbody>
            {q.data.items.map((l) => (
              <tr key={l.metadata.id}>
                <td>
                  <Link to={`/p/${pid}/loops/${l.metadata.name}`}>{l.metadata.name}</Link>
                </td>
                <td>
                  <Badge state={l.status.state} />
                </td>
                <td>{l.status.rounds_started}</td>
                <td>{l.status.num_of_samples}</td>
                <td>
                  {l.status.model.name}:{l.status.model.alias} → {l.status.model.version ? `v${l.status.model.version}` : l.status.model.initial}
                </td>
                <td>{l.status.service ? <Badge state={l.status.service.phase} /> : <span className="muted">none</span>}</td>
                <td>
                  <Time ms={l.metadata.create_time} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </div>
  );
}
