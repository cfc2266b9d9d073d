import { useQuery } from "@tanstack/react-query";
import { Link } from "react-router";
import { api } from "../../api/client";
import type { Model } from "../../api/types";
import { Empty, ErrorNote, Loading } from "../../components/bits";
import { Time } from "../../components/Time";
import { useProject } from "../../session";

export default function Models() {
  const { id: pid } = useProject();
  const q = useQuery({ queryKey: ["models", pid], queryFn: () => api<{ models: Model[] }>(`/v2/${pid}/models`) });
  return (
    <div>
      <header className="page-head">
        <h1>Models</h1>
      </header>
      <ErrorNote error={q.error} />
      {q.isPending ? <Loading /> : null}
      {q.data && !q.data.models.length ? <Empty>No model yet: a job that completes registers its model output as one.</Empty> : null}
      {q.data?.models.length ? (
        <table className="grid">
          <thead>
            <tr>
              <th>name</th>
              <th>versions</th>
              <th>latest</th>
              <th>aliases</th>
              <th>updated</th>
            </tr>
          </thead>
          <tbody>
            {q.data.models.map((m) => (
              <tr key={m.id}>
                <td>
                  <Link to={`/p/${pid}/models/${m.name}`}>{m.name}</Link>
                </td>
                <td>{m.version_count}</td>
                <td>{m.latest_version ? `v${m.latest_version}` : ""}</td>
                <td>
                  {Object.entries(m.aliases)
                    .map(([a, v]) => `${a} → v${v}`)
                    .join(", ")}
                </td>
                <td>
                  <Time ms={m.update_time} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </div>
  );
}
