import { useQueries } from "@tanstack/react-query";
import { useState } from "react";
import { Link, useSearchParams } from "react-router";
import { api } from "../../api/client";
import type { Job } from "../../api/types";
import { Badge, Empty, ErrorNote, Loading, Section } from "../../components/bits";
import { Chart } from "../../components/Chart";
import { compareRows, direction, metricNames, overlay, runsOf, type Metrics } from "../../lib/compare";
import { useProject } from "../../session";

/** about as many points as a chart is wide: the server downsamples longer series */
const POINTS = 800;

/** The jobs in `?jobs=a,b,...` side by side, as `corral compare` shows them. */
export default function Compare() {
  const project = useProject();
  const [params, setParams] = useSearchParams();
  const ids = (params.get("jobs") ?? "").split(",").filter(Boolean);
  const [onlyDiffers, setOnlyDiffers] = useState(false);
  const base = `/v2/${project.id}/training-jobs`;
  const jobs = useQueries({
    queries: ids.map((id) => ({ queryKey: ["job", project.id, id], queryFn: () => api<Job>(`${base}/${id}`) })),
  });
  const metrics = useQueries({
    queries: ids.map((id) => ({
      queryKey: ["job-extra", project.id, id, "training-metrics"],
      queryFn: () => api<Metrics>(`${base}/${id}/training-metrics`, { query: { points: POINTS } }),
    })),
  });
  const head = (
    <header className="page-head">
      <div>
        <div className="crumbs">
          <Link to={`/p/${project.id}/jobs`}>Jobs</Link>
        </div>
        <h1>Compare runs</h1>
      </div>
    </header>
  );
  if (ids.length < 2)
    return (
      <div className="compare">
        {head}
        <Empty>Pick two or more jobs to compare: tick them in the list of jobs, or trials on a search's page.</Empty>
      </div>
    );
  const error = [...jobs, ...metrics].find((q) => q.error)?.error;
  if (error) return <div className="compare">{head}<ErrorNote error={error} /></div>;
  if (jobs.some((q) => q.isPending) || metrics.some((q) => q.isPending)) return <Loading what="Loading the jobs" />;
  const runs = runsOf(jobs.map((q, i) => ({ job: q.data as Job, metrics: metrics[i].data })));
  const rows = compareRows(runs).filter((r) => !onlyDiffers || r.differs);
  const remove = (id: string) => setParams({ jobs: ids.filter((x) => x !== id).join(",") }, { replace: true });
  return (
    <div className="compare">
      {head}
      <Section
        title={`${runs.length} runs side by side`}
        actions={
          <label className="small">
            <input type="checkbox" checked={onlyDiffers} onChange={(e) => setOnlyDiffers(e.target.checked)} /> only what differs
          </label>
        }
      >
        <table className="grid diff" data-testid="compare">
          <thead>
            <tr>
              <th />
              {runs.map((r) => (
                <th key={r.id}>
                  <Link to={`/p/${project.id}/jobs/${r.id}`}>{r.label}</Link>{" "}
                  <Badge state={r.job.status.phase} />{" "}
                  {runs.length > 2 ? (
                    <button className="link small" onClick={() => remove(r.id)} aria-label={`leave out ${r.label}`}>
                      ✕
                    </button>
                  ) : null}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <tr key={`${row.section} ${row.label}`} className={row.differs ? "changed" : ""} data-differs={row.differs}>
                <th>{row.label}</th>
                {row.values.map((v, i) => (
                  <td key={runs[i].id}>{v}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
        <p className="muted small">Highlighted: a row whose values differ between the runs. A curve's best is its lowest for a loss or an error, else its highest.</p>
      </Section>
      <Section title="Metric curves">
        {metricNames(runs).length ? null : <Empty>None of these runs reported metrics.</Empty>}
        <div className="charts">
          {metricNames(runs).map((metric) => {
            const o = overlay(metric, runs);
            return <Chart key={metric} title={`${metric} (${direction(metric)})`} x={o.x} lines={o.lines} />;
          })}
        </div>
      </Section>
    </div>
  );
}
