import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Link, useParams } from "react-router";
import { api } from "../../api/client";
import type { AliasMove, Model, ModelVersion } from "../../api/types";
import { ErrorNote, Loading, Section } from "../../components/bits";
import { Time } from "../../components/Time";
import { download } from "../../lib/download";
import { bytes, number } from "../../lib/format";
import { useProject } from "../../session";

export default function ModelPage() {
  const project = useProject();
  const pid = project.id;
  const { model: name = "" } = useParams();
  const client = useQueryClient();
  const key = ["model", pid, name];
  const q = useQuery({ queryKey: key, queryFn: () => api<Model>(`/v2/${pid}/models/${name}`) });
  const move = useMutation({
    mutationFn: ({ alias, version }: { alias: string; version: number }) =>
      api<Model>(`/v2/${pid}/models/${name}/aliases/${encodeURIComponent(alias)}`, { method: "PUT", body: { version } }),
    onSuccess: (m) => {
      client.setQueryData(key, (old: Model | undefined) => ({ ...old, ...m, versions: m.versions ?? old?.versions }));
      client.invalidateQueries({ queryKey: key });
      client.invalidateQueries({ queryKey: ["alias-history", pid, name] });
    },
  });
  const [failed, setFailed] = useState<unknown>(null);
  if (q.isPending) return <Loading />;
  if (!q.data) return <ErrorNote error={q.error} />;
  const m = q.data;
  const versions = m.versions ?? [];
  return (
    <div className="model">
      <header className="page-head">
        <div>
          <div className="crumbs">
            <Link to={`/p/${pid}/models`}>Models</Link>
          </div>
          <h1>{m.name}</h1>
          <span className="muted">
            {m.version_count} version(s) · updated <Time ms={m.update_time} />
          </span>
        </div>
      </header>
      <ErrorNote error={move.error ?? failed} />
      <Section title="Aliases">
        <Aliases model={m} canAct={project.canAct} onMove={(alias, version) => move.mutate({ alias, version })} pid={pid} />
      </Section>
      <Section title="Versions">
        <table className="grid" data-testid="model-versions">
          <thead>
            <tr>
              <th>version</th>
              <th>aliases</th>
              <th>made by (lineage)</th>
              <th>metrics</th>
              <th>size</th>
              <th>registered</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {[...versions].reverse().map((v) => (
              <tr key={v.version}>
                <td>v{v.version}</td>
                <td>{v.aliases.join(", ")}</td>
                <td>
                  <Link to={`/p/${pid}/jobs/${v.source_job_id}`}>
                    {v.source_job_name}
                    {v.source_version ? ` ${v.source_version}` : ""}
                  </Link>{" "}
                  <span className="muted small">
                    channel {v.source_channel} · {v.source_phase}
                  </span>
                  <DatasetsRead version={v} />
                </td>
                <td className="small">
                  {Object.entries(v.metrics)
                    .map(([k, x]) => `${k}=${number(x)}`)
                    .join(" ")}
                </td>
                <td>
                  {bytes(v.size_bytes)} <span className="muted small">({v.file_count} files)</span>
                </td>
                <td>
                  <Time ms={v.create_time} />
                </td>
                <td>
                  <button
                    className="link"
                    onClick={() => download(`/v2/${pid}/models/${m.name}/versions/${v.version}/archive`, `${m.name}-v${v.version}.tar.gz`).catch(setFailed)}
                  >
                    Download
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
    </div>
  );
}

/** The dataset versions the version's job read: the start of its lineage. */
function DatasetsRead({ version }: { version: ModelVersion }) {
  const read = version.datasets ?? [];
  if (!read.length) return null;
  return (
    <ul className="plain small" data-testid={`datasets-v${version.version}`}>
      {read.map((d) => (
        <li key={d.channel} title={d.content_hash ?? "the version is gone"}>
          read dataset {d.dataset_name ?? d.dataset_id} {d.version_name ?? d.version_id}{" "}
          <span className="muted">
            as {d.channel}
            {d.number_of_samples !== null ? ` · ${d.number_of_samples} samples` : ""}
            {d.content_hash ? ` · ${d.content_hash.slice(0, 19)}` : " · gone"}
          </span>
        </li>
      ))}
    </ul>
  );
}

function Aliases({ model, canAct, onMove, pid }: { model: Model; canAct: boolean; onMove: (alias: string, version: number) => void; pid: string }) {
  const [alias, setAlias] = useState("production");
  const [version, setVersion] = useState(String(model.latest_version ?? ""));
  const [open, setOpen] = useState<string | null>(null);
  const entries = Object.entries(model.aliases);
  return (
    <div>
      {entries.length ? (
        <table className="grid" data-testid="aliases">
          <tbody>
            {entries.map(([a, v]) => (
              <tr key={a}>
                <th>{a}</th>
                <td data-testid={`alias-${a}`}>v{v}</td>
                <td>
                  <button className="link" onClick={() => setOpen(open === a ? null : a)}>
                    {open === a ? "hide history" : "history"}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p className="muted">No alias names a version of this model.</p>
      )}
      {open ? <AliasHistory pid={pid} model={model.name} alias={open} /> : null}
      {canAct ? (
        <form
          className="inline"
          onSubmit={(e) => {
            e.preventDefault();
            if (!alias || !version) return;
            const now = model.aliases[alias];
            const what = now === undefined ? `Point the new alias ${alias} at v${version}?` : `Move ${alias} from v${now} to v${version}?`;
            if (now === Number(version) || window.confirm(`${what} Whatever loads ${model.name}:${alias} gets that version from now on.`))
              onMove(alias, Number(version));
          }}
        >
          <span>Point</span>
          <input aria-label="alias" value={alias} onChange={(e) => setAlias(e.target.value)} size={14} />
          <span>at</span>
          <select aria-label="version" value={version} onChange={(e) => setVersion(e.target.value)}>
            {(model.versions ?? []).map((v) => (
              <option key={v.version} value={v.version}>
                v{v.version}
              </option>
            ))}
          </select>
          <button type="submit">Move alias</button>
        </form>
      ) : null}
    </div>
  );
}

function AliasHistory({ pid, model, alias }: { pid: string; model: string; alias: string }) {
  const q = useQuery({
    queryKey: ["alias-history", pid, model, alias],
    queryFn: () => api<{ history: AliasMove[] }>(`/v2/${pid}/models/${model}/aliases/${encodeURIComponent(alias)}/history`),
  });
  if (q.isPending) return <Loading />;
  if (!q.data) return <ErrorNote error={q.error} />;
  return (
    <ol className="timeline" data-testid="alias-history">
      {[...q.data.history].reverse().map((h, i) => (
        <li key={i}>
          <span className="when">
            <Time ms={h.time} />
          </span>
          <span className="what">
            {h.from_version ? `v${h.from_version}` : "nothing"} → {h.to_version ? `v${h.to_version}` : "removed"}
            {h.user_name ? ` by ${h.user_name}` : ""}
            {h.reason ? <span className="muted"> · {h.reason}</span> : null}
          </span>
        </li>
      ))}
    </ol>
  );
}
