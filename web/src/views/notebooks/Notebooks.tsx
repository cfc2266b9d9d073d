// Notebook instances, in ModelArts' shape (/v1/{project_id}/notebooks): create, open,
// the time left on the lease, extend, stop, start, delete.

import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { api } from "../../api/client";
import type { Flavor, Notebook, NotebookList } from "../../api/types";
import { Badge, Empty, ErrorNote, Loading, Section } from "../../components/bits";
import { useNow } from "../../components/Time";
import { count } from "../../lib/format";
import { duration } from "../../lib/time";
import { useProject } from "../../session";
import { useNotebooksAvailable } from "./available";

const PAGE = 20;
const HOUR = 3_600_000;

export default function Notebooks() {
  const project = useProject();
  const pid = project.id;
  const available = useNotebooksAvailable(pid);
  const [page, setPage] = useState(0);
  const client = useQueryClient();
  const q = useQuery({
    queryKey: ["notebooks", pid, page],
    queryFn: () => api<NotebookList>(`/v1/${pid}/notebooks`, { query: { offset: page * PAGE, limit: PAGE } }),
    enabled: available === true,
    placeholderData: keepPreviousData,
    refetchInterval: 5_000,
  });
  const act = useMutation({
    mutationFn: ({ id, what, hours }: { id: string; what: "start" | "stop" | "extend" | "delete"; hours?: number }) => {
      const base = `/v1/${pid}/notebooks/${id}`;
      if (what === "delete") return api(base, { method: "DELETE" });
      if (what === "extend") return api(`${base}/lease`, { method: "PATCH", body: { duration: (hours ?? 1) * HOUR, type: "timing" } });
      return api(`${base}/${what}`, { method: "POST" });
    },
    onSettled: () => client.invalidateQueries({ queryKey: ["notebooks", pid] }),
  });
  if (available === undefined) return <Loading />;
  if (!available) return <Empty>This server has no notebooks.</Empty>;
  const total = q.data?.total ?? 0;
  return (
    <div>
      <header className="page-head">
        <h1>Notebooks</h1>
      </header>
      {project.canAct ? <CreateNotebook pid={pid} /> : null}
      <ErrorNote error={q.error ?? act.error} />
      {q.isPending ? <Loading /> : null}
      {q.data && !q.data.data?.length ? <Empty>No notebook yet.</Empty> : null}
      {q.data?.data?.length ? (
        <table className="grid">
          <thead>
            <tr>
              <th>name</th>
              <th>status</th>
              <th>flavor</th>
              <th>time left</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {q.data.data.map((n) => (
              <tr key={n.id}>
                <td>
                  {n.name}
                  {n.description ? <div className="muted small">{n.description}</div> : null}
                </td>
                <td>
                  <Badge state={n.status} title={n.fail_reason} />
                  {n.fail_reason ? <div className="error small">{n.fail_reason}</div> : null}
                </td>
                <td>{n.flavor}</td>
                <td>
                  <Lease notebook={n} />
                </td>
                <td className="actions">
                  {n.status === "RUNNING" && n.url ? (
                    <a className="button" href={n.url} target="_blank" rel="noreferrer">
                      Open
                    </a>
                  ) : null}
                  {project.canAct && n.status === "RUNNING" ? (
                    <>
                      <button onClick={() => act.mutate({ id: n.id, what: "extend", hours: 1 })}>+1 h</button>
                      <button onClick={() => act.mutate({ id: n.id, what: "extend", hours: 4 })}>+4 h</button>
                      <button onClick={() => window.confirm(`Stop notebook ${n.name}? Its JupyterLab and kernels end (what is not saved in the workspace is lost); its workspace stays.`) && act.mutate({ id: n.id, what: "stop" })}>Stop</button>
                    </>
                  ) : null}
                  {project.canAct && ["STOPPED", "START_FAILED", "ERROR"].includes(n.status) ? (
                    <button onClick={() => act.mutate({ id: n.id, what: "start" })}>Start</button>
                  ) : null}
                  {project.canAct && n.status !== "RUNNING" ? (
                    <button className="danger" onClick={() => window.confirm(`Delete notebook ${n.name}?`) && act.mutate({ id: n.id, what: "delete" })}>
                      Delete
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {total > PAGE ? (
        <div className="pager">
          <button disabled={page === 0} onClick={() => setPage(page - 1)}>
            Previous
          </button>
          <span className="muted">
            {page * PAGE + 1}–{Math.min(total, (page + 1) * PAGE)} of {count(total)}
          </span>
          <button disabled={(page + 1) * PAGE >= total} onClick={() => setPage(page + 1)}>
            Next
          </button>
        </div>
      ) : null}
    </div>
  );
}

/** The time left before a timing lease stops the notebook (ModelArts: create_at + duration). */
function Lease({ notebook }: { notebook: Notebook }) {
  const now = useNow();
  const lease = notebook.lease;
  if (!lease?.enable) return <span className="muted">no auto stop</span>;
  if (lease.type === "idle") return <span>stops when idle {lease.duration ? `for ${duration(lease.duration)}` : ""}</span>;
  if (!lease.create_at || !lease.duration || notebook.status !== "RUNNING") return <span className="muted">–</span>;
  const left = lease.create_at + lease.duration - now;
  return <span className={left < 15 * 60_000 ? "warn" : ""}>{left > 0 ? duration(left) : "stopping"}</span>;
}

function CreateNotebook({ pid }: { pid: string }) {
  const client = useQueryClient();
  const [open, setOpen] = useState(false);
  const [name, setName] = useState("");
  const [flavor, setFlavor] = useState("");
  const [image, setImage] = useState("");
  const [leaseType, setLeaseType] = useState("timing");
  const [hours, setHours] = useState("4");
  const flavors = useQuery({
    queryKey: ["notebook-flavors", pid],
    queryFn: () =>
      api<{ data?: { id: string; name?: string }[] }>(`/v1/${pid}/notebooks/flavors`).catch(() =>
        api<{ flavors: Flavor[] }>(`/v2/${pid}/training-job-flavors`).then((f) => ({ data: f.flavors.map((x) => ({ id: x.flavor_id, name: x.flavor_name })) })),
      ),
    enabled: open,
  });
  const engines = useQuery({
    queryKey: ["engines", pid],
    queryFn: () => api<{ items: { engine_id: string; engine_name: string; engine_version: string }[] }>(`/v2/${pid}/training-job-engines`),
    enabled: open,
  });
  const create = useMutation({
    mutationFn: () =>
      api<Notebook>(`/v1/${pid}/notebooks`, {
        method: "POST",
        body: {
          name,
          flavor: flavor || flavors.data?.data?.[0]?.id,
          image_id: image || engines.data?.items[0]?.engine_id,
          volume: { category: "EVS", ownership: "MANAGED" },
          lease: { type: leaseType, duration: Number(hours) * HOUR },
        },
      }),
    onSuccess: () => {
      setOpen(false);
      client.invalidateQueries({ queryKey: ["notebooks", pid] });
    },
  });
  if (!open) return <button onClick={() => setOpen(true)}>New notebook</button>;
  function submit(e: FormEvent) {
    e.preventDefault();
    create.mutate();
  }
  return (
    <Section title="New notebook">
      <form className="panel" onSubmit={submit}>
        <label>
          name <input aria-label="notebook name" value={name} onChange={(e) => setName(e.target.value)} required />
        </label>
        <label>
          flavor{" "}
          <select aria-label="notebook flavor" value={flavor} onChange={(e) => setFlavor(e.target.value)}>
            {(flavors.data?.data ?? []).map((f) => (
              <option key={f.id} value={f.id}>
                {f.name ?? f.id}
              </option>
            ))}
          </select>
        </label>
        <label>
          image{" "}
          <select aria-label="notebook image" value={image} onChange={(e) => setImage(e.target.value)}>
            {(engines.data?.items ?? []).map((e) => (
              <option key={e.engine_id} value={e.engine_id}>
                {e.engine_name} {e.engine_version}
              </option>
            ))}
          </select>
        </label>
        <label>
          stops{" "}
          <select aria-label="lease type" value={leaseType} onChange={(e) => setLeaseType(e.target.value)}>
            <option value="timing">after</option>
            <option value="idle">when idle for</option>
          </select>{" "}
          <input aria-label="hours" type="number" min="0.25" step="0.25" value={hours} onChange={(e) => setHours(e.target.value)} size={4} /> h
        </label>
        <div className="actions">
          {/* what the flavor and image lists say is only known once they have arrived */}
          <button type="submit" disabled={create.isPending || !flavors.data || !engines.data}>
            Create
          </button>
          <button type="button" className="link" onClick={() => setOpen(false)}>
            Cancel
          </button>
        </div>
        <ErrorNote error={create.error} />
      </form>
    </Section>
  );
}
