import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { Link, useNavigate } from "react-router";
import { api, send } from "../../api/client";
import type { Job, ParameterAnalysis, TrialRewards, TrialsTable } from "../../api/types";
import { Badge, Empty, ErrorNote, Loading, Section } from "../../components/bits";
import { Chart } from "../../components/Chart";
import { Parallel } from "../../components/Parallel";
import { number } from "../../lib/format";
import { bestTrial, curveLines, ENDED_EARLY, modeOf, parseTrials, policyOf, sortTrials, type Trial, type Trials } from "../../lib/trials";
import { ACTIVE } from "./useJob";

/** A search's page: its trials, the best one, parameters against the reward, the trials'
 * learning curves and the parameters' importance (docs/search.md). */
export function Search({ pid, job, canAct }: { pid: string; job: Job; canAct: boolean }) {
  const id = job.metadata.id;
  const active = ACTIVE.has(job.status.phase);
  const base = `/v2/${pid}/training-jobs/${id}`;
  const every = active ? 2_000 : false;
  const table = useQuery({
    queryKey: ["job-extra", pid, id, "trials"],
    queryFn: () => api<TrialsTable>(`${base}/autosearch-trials`),
    refetchInterval: every,
  });
  const rewards = useQuery({
    queryKey: ["job-extra", pid, id, "trial-rewards"],
    queryFn: () => api<TrialRewards>(`${base}/autosearch-trial-rewards`),
    refetchInterval: every,
  });
  const analysis = useQuery({
    queryKey: ["job-extra", pid, id, "analysis"],
    queryFn: () => api<ParameterAnalysis>(`${base}/autosearch-parameter-analysis`),
    refetchInterval: active ? 5_000 : false,
  });
  const policy = policyOf(job);
  const mode = modeOf(policy);
  if (table.isPending) return <Loading what="Loading the trials" />;
  if (!table.data) return <ErrorNote error={table.error} />;
  const found = parseTrials(table.data);
  const best = bestTrial(found.trials, mode);
  const algorithm = policy?.algo_configs[0];
  const planned = algorithm?.params?.find((p) => p.key === "num_samples")?.value;
  return (
    <div className="search">
      <p className="search-summary" data-testid="search-summary">
        <strong>{algorithm?.name ?? "search"}</strong>, {found.trials.length}
        {planned && planned !== "0" ? ` of ${planned}` : ""} trial(s), {found.reward} ({mode === "max" ? "higher" : "lower"} is better).
        Best{active ? " so far" : ""}:{" "}
        {best ? (
          <span data-testid="best-trial">
            trial {best.id}, {found.reward} {number(best.reward)} ({found.params.map((p) => `${p}=${best.params[p]}`).join(", ")})
          </span>
        ) : (
          <span className="muted">none yet</span>
        )}
      </p>
      <TrialsSection pid={pid} job={job} found={found} best={best?.id} canAct={canAct} />
      <div className="columns">
        <Section title="Parameters against the reward">
          {found.trials.length ? (
            <Parallel policy={policy} params={found.params} reward={found.reward} trials={found.trials} mode={mode} best={best?.id} />
          ) : (
            <Empty>No trial yet.</Empty>
          )}
          <p className="muted small">A line per trial; the best in orange, the others darker the better their reward; dashed: no reward yet.</p>
        </Section>
        <Importance pid={pid} jobId={id} analysis={analysis.data} error={analysis.error} />
      </div>
      <Section title={`Learning curves: ${found.reward} by step`}>
        <ErrorNote error={rewards.error} />
        {rewards.data ? <Curves rewards={rewards.data} /> : null}
      </Section>
    </div>
  );
}

function Curves({ rewards }: { rewards: TrialRewards }) {
  const { x, lines } = curveLines(rewards);
  if (!lines.length) return <Empty>No trial has reported its {rewards.reward} yet.</Empty>;
  return (
    <>
      <Chart title={`${rewards.reward} by trial`} x={x} lines={lines} height={240} />
      <p className="muted small">Dashed: a trial stopped before its end (pruned by the algorithm, stopped by hand or with the search).</p>
    </>
  );
}

const COLUMNS = ["trial", "status"];

function TrialsSection({ pid, job, found, best, canAct }: { pid: string; job: Job; found: Trials; best?: string; canAct: boolean }) {
  const [sort, setSort] = useState<{ key: string; desc: boolean }>({ key: "trial", desc: false });
  const [picked, setPicked] = useState<string[]>([]);
  const navigate = useNavigate();
  const client = useQueryClient();
  const id = job.metadata.id;
  const stop = useMutation({
    mutationFn: (trial: string) => api(`/v2/${pid}/training-jobs/${id}/autosearch-trial-earlystop/${trial}`, { method: "POST" }),
    onSettled: () => client.invalidateQueries({ queryKey: ["job-extra", pid, id] }),
  });
  const rows = sortTrials(found.trials, sort.key, sort.desc);
  const header = (key: string, label: string) => {
    const on = sort.key === key;
    return (
      <th key={key} aria-sort={on ? (sort.desc ? "descending" : "ascending") : "none"}>
        <button className="link" onClick={() => setSort({ key, desc: on ? !sort.desc : key === "reward" })}>
          {label}
          {on ? (sort.desc ? " ↓" : " ↑") : ""}
        </button>
      </th>
    );
  };
  const toggle = (jobId: string) => setPicked((p) => (p.includes(jobId) ? p.filter((x) => x !== jobId) : [...p, jobId]));
  const compare = () => navigate(`/p/${pid}/compare?jobs=${picked.join(",")}`);
  const askStop = (t: Trial) =>
    window.confirm(`Stop trial ${t.id} of ${job.metadata.name} now? It ends early_stopped; the search goes on with its other trials.`) &&
    stop.mutate(t.id);
  return (
    <Section
      title={`Trials (${found.trials.length})`}
      actions={
        <button disabled={picked.length < 2} onClick={compare} title="pick two or more trials to compare">
          {picked.length >= 2 ? `Compare ${picked.length} trials` : "Compare trials"}
        </button>
      }
    >
      <ErrorNote error={stop.error} />
      {found.trials.length ? (
        <table className="grid trials" data-testid="trials">
          <thead>
            <tr>
              <th>compare</th>
              {COLUMNS.map((c) => header(c, c))}
              {found.params.map((p) => header(p, p))}
              {header("reward", found.reward)}
              <th>ended early</th>
              <th>job</th>
              {canAct ? <th /> : null}
            </tr>
          </thead>
          <tbody>
            {rows.map((t) => (
              <tr key={t.id} className={t.id === best ? "best" : ""} data-testid={`trial-${t.id}`} data-state={t.status}>
                <td>
                  <input type="checkbox" aria-label={`compare trial ${t.id}`} checked={picked.includes(t.jobId)} onChange={() => toggle(t.jobId)} />
                </td>
                <td>
                  {t.id}
                  {t.id === best ? <span className="best-mark" title="the best trial"> ★ best</span> : null}
                </td>
                <td>
                  <Badge state={t.status} />
                </td>
                {found.params.map((p) => (
                  <td key={p}>{t.params[p]}</td>
                ))}
                <td>{t.reward === null ? <span className="muted">–</span> : number(t.reward)}</td>
                <td className="small" data-testid="ended-early">
                  {ENDED_EARLY.has(t.status) ? (t.status === "pruned" ? "pruned" : "stopped") : t.status === "running" ? "" : "no"}
                  {t.reason ? <div className="muted">{t.reason}</div> : null}
                </td>
                <td>
                  <Link to={`/p/${pid}/jobs/${t.jobId}`}>{`${job.metadata.name}-trial-${t.id}`}</Link>
                </td>
                {canAct ? (
                  <td>
                    {t.status === "running" ? (
                      <button onClick={() => askStop(t)} disabled={stop.isPending}>
                        Stop trial
                      </button>
                    ) : null}
                  </td>
                ) : null}
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <Empty>No trial has started yet.</Empty>
      )}
    </Section>
  );
}

function Importance({ pid, jobId, analysis, error }: { pid: string; jobId: string; analysis?: ParameterAnalysis; error: unknown }) {
  const [shown, setShown] = useState<string | null>(null);
  const ranked = (analysis?.data ?? []).map(([name, value]) => ({ name, value: value === "" ? null : Number(value) }));
  const known = ranked.some((r) => r.value !== null);
  return (
    <Section title="Parameter importance">
      <ErrorNote error={error} />
      {!analysis && !error ? <Loading what="Ranking the parameters" /> : null}
      {analysis && !known ? <Empty>Ranked once two trials have completed.</Empty> : null}
      {known ? (
        <ol className="importance plain" data-testid="importance">
          {ranked.map((r) => (
            <li key={r.name}>
              <button className="link" onClick={() => setShown(shown === r.name ? null : r.name)} title="its plot against the reward">
                {r.name}
              </button>
              <span className="bar">
                <span style={{ width: `${Math.round((r.value ?? 0) * 100)}%` }} />
              </span>
              <span className="small">{r.value === null ? "–" : r.value.toFixed(2)}</span>
            </li>
          ))}
        </ol>
      ) : null}
      {known ? <p className="muted small">Optuna's importance evaluator over the completed trials; a parameter's name shows its plot.</p> : null}
      {shown ? <Plot pid={pid} jobId={jobId} parameter={shown} /> : null}
    </Section>
  );
}

/** The server's plot of one parameter against the reward (an SVG; fetched with the token). */
function Plot({ pid, jobId, parameter }: { pid: string; jobId: string; parameter: string }) {
  const svg = useQuery({
    queryKey: ["job-extra", pid, jobId, "plot", parameter],
    queryFn: async () => {
      const where = await api<{ file_path: string }>(`/v2/${pid}/training-jobs/${jobId}/autosearch-parameter-analysis/${encodeURIComponent(parameter)}`);
      return (await send(where.file_path)).text();
    },
  });
  if (svg.isPending) return <Loading what="Drawing the plot" />;
  if (!svg.data) return <ErrorNote error={svg.error} />;
  return <img className="plot" alt={`${parameter} against the reward`} src={`data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg.data)}`} />;
}
