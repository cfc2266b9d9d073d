import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { Link } from "react-router";
import { api } from "../../api/client";
import type { PipelineSummary } from "../../api/types";
import { Badge, Empty, ErrorNote, Loading, Progress } from "../../components/bits";
import { Duration, Time } from "../../components/Time";
import { count } from "../../lib/format";
import { useProject } from "../../session";

const PAGE = 25;
const STATES = ["running", "success", "failed", "timeout", "canceled"];

export default function Pipelines() {
  const { id: pid } = useProject();
  const [page, setPage] = useState(0);
  const [state, setState] = useState("");
  const q = useQuery({
    queryKey: ["pipelines", pid, page, state],
    queryFn: () =>
      api<{ total: number; items: PipelineSummary[] }>(`/v2/${pid}/pipelines`, { query: { offset: page * PAGE, limit: PAGE, state: state || undefined } }),
    placeholderData: keepPreviousData,
    refetchInterval: 5_000,
  });
  const total = q.data?.total ?? 0;
  return (
    <div>
      <header className="page-head">
        <h1>Pipelines</h1>
        <select aria-label="state" value={state} onChange={(e) => (setState(e.target.value), setPage(0))}>
          <option value="">any state</option>
          {STATES.map((s) => (
            <option key={s}>{s}</option>
          ))}
        </select>
      </header>
      <ErrorNote error={q.error} />
      {q.isPending ? <Loading /> : null}
      {q.data && !q.data.items.length ? (
        <Empty>
          No pipeline yet: <code>corral pipeline submit pipeline.yaml</code> makes one.
        </Empty>
      ) : null}
      {q.data?.items.length ? (
        <table className="grid">
          <thead>
            <tr>
              <th>name</th>
              <th>state</th>
              <th>progress</th>
              <th>attempt</th>
              <th>runs</th>
              <th>created</th>
              <th>ran</th>
            </tr>
          </thead>
          <tbody>
            {q.data.items.map((p) => (
              <tr key={p.id}>
                <td>
                  <Link to={`/p/${pid}/pipelines/${p.id}`}>{p.name}</Link>
                </td>
                <td>
                  <Badge state={p.status.state} />
                </td>
                <td>
                  <Progress value={p.status.progress} state={p.status.state} /> {Math.round(p.status.progress)}%
                </td>
                <td>{p.status.attempt}</td>
                <td className="small muted">
                  {Object.entries(p.runs)
                    .map(([k, n]) => `${n} ${k}`)
                    .join(", ")}
                </td>
                <td>
                  <Time ms={p.create_time} />
                </td>
                <td>
                  <Duration ms={p.status.duration} start={p.status.start_time} running={p.status.state === "running"} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {total > PAGE ? (
        <div className="pager">
          <button disabled={page === 0} onClick={() => setPage(page - 1)}>
            Newer
          </button>
          <span className="muted">
            {page * PAGE + 1}–{Math.min(total, (page + 1) * PAGE)} of {count(total)}
          </span>
          <button disabled={(page + 1) * PAGE >= total} onClick={() => setPage(page + 1)}>
            Older
          </button>
        </div>
      ) : null}
    </div>
  );
}
