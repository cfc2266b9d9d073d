import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { Link } from "react-router";
import { api } from "../../api/client";
import type { Job, Version } from "../../api/types";
import { Badge, ErrorNote, Loading, Section } from "../../components/bits";
import { Time } from "../../components/Time";
import { diffVersions } from "../../lib/diff";
import { number } from "../../lib/format";
import { duration } from "../../lib/time";

export function Versions({ pid, job }: { pid: string; job: Job }) {
  const id = job.metadata.id;
  const q = useQuery({
    queryKey: ["job-extra", pid, id, "versions"],
    queryFn: () => api<{ versions: Version[] }>(`/v2/${pid}/training-jobs/${id}/versions`),
  });
  const [picked, setPicked] = useState<string[]>([]);
  const [onlyChanged, setOnlyChanged] = useState(false);
  if (q.isPending) return <Loading />;
  if (!q.data) return <ErrorNote error={q.error} />;
  const versions = q.data.versions;
  const chosen = picked.length === 2 ? picked : versions.length >= 2 ? [versions[versions.length - 2].version_id, versions[versions.length - 1].version_id] : [];
  const [left, right] = chosen.map((v) => versions.find((x) => x.version_id === v)).filter((v): v is Version => !!v);
  const toggle = (vid: string) => setPicked((p) => (p.includes(vid) ? p.filter((x) => x !== vid) : [...p.slice(-1), vid]));
  return (
    <div className="versions">
      <Section title={`Versions (${versions.length})`}>
        <table className="grid">
          <thead>
            <tr>
              <th>compare</th>
              <th>version</th>
              <th>phase</th>
              <th>from</th>
              <th>created</th>
              <th>ran</th>
              <th>final metrics</th>
            </tr>
          </thead>
          <tbody>
            {versions.map((v) => (
              <tr key={v.version_id} className={v.version_id === id ? "current" : ""}>
                <td>
                  <input type="checkbox" aria-label={`compare ${v.version_name}`} checked={chosen.includes(v.version_id)} onChange={() => toggle(v.version_id)} />
                </td>
                <td>
                  <Link to={`/p/${pid}/jobs/${v.version_id}`}>{v.version_name}</Link>
                </td>
                <td>
                  <Badge state={v.phase} />
                </td>
                <td>{v.pre_version_name ?? ""}{v.resume ? " (resumed)" : ""}</td>
                <td>
                  <Time ms={v.create_time} />
                </td>
                <td>{duration(v.duration)}</td>
                <td className="small">
                  {Object.entries(v.final_metrics ?? {})
                    .map(([k, x]) => `${k}=${number(x)}`)
                    .join(" ")}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
      {left && right ? (
        <Section
          title={`${left.version_name} and ${right.version_name} side by side`}
          actions={
            <label className="small">
              <input type="checkbox" checked={onlyChanged} onChange={(e) => setOnlyChanged(e.target.checked)} /> only what differs
            </label>
          }
        >
          <table className="grid diff" data-testid="version-diff">
            <thead>
              <tr>
                <th />
                <th>{left.version_name}</th>
                <th>{right.version_name}</th>
              </tr>
            </thead>
            <tbody>
              {diffVersions(left, right, onlyChanged).map((row) => (
                <tr key={row.key} className={row.changed ? "changed" : ""}>
                  <th>{row.key}</th>
                  <td>{row.left}</td>
                  <td>{row.right}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </Section>
      ) : (
        <p className="muted">A job with one version has nothing to compare: make a new version to change its parameters, code or flavor.</p>
      )}
    </div>
  );
}
