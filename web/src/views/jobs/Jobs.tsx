import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useVirtualizer } from "@tanstack/react-virtual";
import { useEffect, useMemo, useRef, useState } from "react";
import { Link, useNavigate, useSearchParams } from "react-router";
import { api } from "../../api/client";
import { useEventStream } from "../../api/sse";
import type { Job, Pool } from "../../api/types";
import { Badge, ErrorNote, Loading } from "../../components/bits";
import { Duration, Time } from "../../components/Time";
import { count } from "../../lib/format";
import { fromParams, NO_FILTERS, OWNERS, PHASES, toParams, type JobFilters, type SortKey } from "../../lib/jobsearch";
import { useProject } from "../../session";
import { BatchActions, type Outcome, type Picked } from "./BatchActions";
import { pageKey, useJobPages } from "./useJobPages";

const ROW = 34;
const ACTIVE = new Set(["Creating", "Pending", "Running", "Terminating"]);

export function Jobs() {
  const project = useProject();
  const [params, setParams] = useSearchParams();
  const filters = useMemo(() => fromParams(params), [params]);
  const setFilters = (f: JobFilters) => setParams(toParams(f), { replace: true });
  const scroller = useRef<HTMLDivElement>(null);
  const [range, setRange] = useState<[number, number]>([0, 40]);
  const wanted = useMemo(() => {
    const out: number[] = [];
    for (let p = Math.floor(range[0] / 50); p <= Math.floor(range[1] / 50); p++) out.push(p);
    return out;
  }, [range]);
  const { first, pages } = useJobPages(project.id, filters, wanted);
  const [picked, setPicked] = useState<Picked[]>([]);
  const [outcome, setOutcome] = useState<Outcome | null>(null);
  const navigate = useNavigate();
  const toggle = (job: Job) =>
    setPicked((p) =>
      p.some((x) => x.id === job.metadata.id)
        ? p.filter((x) => x.id !== job.metadata.id)
        : [...p, { id: job.metadata.id, name: job.metadata.name, phase: job.status.phase }],
    );
  const total = first.data?.count ?? 0;
  const virtual = useVirtualizer({
    count: total,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW,
    overscan: 15,
  });
  const items = virtual.getVirtualItems();
  const lo = items[0]?.index ?? 0;
  const hi = items[items.length - 1]?.index ?? 0;
  useEffect(() => {
    const timer = setTimeout(() => setRange([lo, hi]), 80); // not a fetch per pixel scrolled
    return () => clearTimeout(timer);
  }, [lo, hi]);
  const rowAt = (i: number): Job | undefined => pages.get(Math.floor(i / 50))?.items[i % 50];
  const visible = items.map((it) => rowAt(it.index)).filter((j): j is Job => !!j);
  useLiveRows(project.id, filters, visible);
  // a ticked job's phase as the list shows it now
  const now = new Map(visible.map((j) => [j.metadata.id, j.status.phase]));
  const ticked = picked.map((p) => ({ ...p, phase: now.get(p.id) ?? p.phase }));

  return (
    <div className="jobs">
      <header className="page-head">
        <h1>Jobs</h1>
        <span className="muted">
          <span data-testid="job-count">{first.data ? `${count(total)} of ${count(first.data.total)} jobs` : ""}</span>
          {first.isPlaceholderData ? <span className="small"> · searching…</span> : null}
        </span>
        <span className="spacer" />
        <div className="actions">
          {project.canAct ? (
            <Link className="button primary" to={`/p/${project.id}/jobs/new`}>
              Create training job
            </Link>
          ) : null}
          {project.canAct ? (
            <BatchActions
              pid={project.id}
              picked={ticked}
              onDone={(result, deleted) => {
                setOutcome(result);
                setPicked((p) => p.filter((x) => !deleted.includes(x.id)));
              }}
            />
          ) : null}
          {picked.length ? (
            <button className="link" onClick={() => setPicked([])}>
              Clear the {picked.length} ticked
            </button>
          ) : null}
          <button
            disabled={picked.length < 2}
            title="tick two or more jobs to compare them side by side"
            onClick={() => navigate(`/p/${project.id}/compare?jobs=${picked.map((p) => p.id).join(",")}`)}
          >
            Compare{picked.length >= 2 ? ` ${picked.length} jobs` : ""}
          </button>
        </div>
      </header>
      {outcome ? (
        <div className={outcome.failed.length ? "error" : "notice"} role={outcome.failed.length ? "alert" : "status"} data-testid="batch-outcome">
          {outcome.done}
          {outcome.failed.map((f) => (
            <div key={f}>{f}</div>
          ))}{" "}
          <button className="link" onClick={() => setOutcome(null)}>
            dismiss
          </button>
        </div>
      ) : null}
      <FilterBar filters={filters} onChange={setFilters} pid={project.id} />
      <ErrorNote error={first.error} />
      <div className="table jobs-table" role="table" aria-rowcount={total}>
        <div className="row head" role="row">
          <div role="columnheader" title="tick jobs to compare, stop or delete them" />
          <SortHeader label="Name" k="name" filters={filters} onChange={setFilters} />
          <SortHeader label="Phase" k="phase" filters={filters} onChange={setFilters} />
          <div role="columnheader">Made by</div>
          <div role="columnheader">User</div>
          <div role="columnheader">Pool · flavor</div>
          <SortHeader label="Created" k="create_time" filters={filters} onChange={setFilters} />
          <SortHeader label="Duration" k="duration" filters={filters} onChange={setFilters} />
        </div>
        <div className="scroll" ref={scroller}>
          {first.isPending ? <Loading what="Loading the jobs" /> : null}
          {first.data && total === 0 ? <div className="empty muted">No job matches.</div> : null}
          <div style={{ height: virtual.getTotalSize(), position: "relative" }}>
            {items.map((item) => {
              const job = rowAt(item.index);
              return (
                <div
                  key={item.key}
                  className="row"
                  role="row"
                  style={{ position: "absolute", top: 0, left: 0, right: 0, height: ROW, transform: `translateY(${item.start}px)` }}
                >
                  {job ? (
                    <JobRow job={job} pid={project.id} picked={picked.some((p) => p.id === job.metadata.id)} onPick={() => toggle(job)} />
                  ) : (
                    <div className="muted">…</div>
                  )}
                </div>
              );
            })}
          </div>
        </div>
      </div>
    </div>
  );
}

function JobRow({ job, pid, picked, onPick }: { job: Job; pid: string; picked: boolean; onPick: () => void }) {
  const s = job.status;
  const owner = job.metadata.owner;
  const made = owner ? (OWNERS[owner.kind] ?? owner.kind) : job.kind !== "job" ? job.kind : "";
  return (
    <>
      <div role="cell">
        <input type="checkbox" aria-label={`tick ${job.metadata.name}`} checked={picked} onChange={onPick} />
      </div>
      <div role="cell" className="name">
        <Link to={`/p/${pid}/jobs/${job.metadata.id}`}>{job.metadata.name}</Link>
        {job.metadata.version && job.metadata.version !== "V0001" ? <span className="muted"> {job.metadata.version}</span> : null}
      </div>
      <div role="cell" title={s.reason ?? undefined}>
        <Badge state={s.phase} />
        {s.phase === "Pending" && s.reason ? <span className="muted small reason"> {s.reason}</span> : null}
      </div>
      <div role="cell" className="muted">{made || "–"}</div>
      <div role="cell">{job.metadata.user_name}</div>
      <div role="cell" className="muted">
        {job.spec.resource.pool_id} · {job.spec.resource.flavor_id}
      </div>
      <div role="cell">
        <Time ms={job.metadata.create_time} />
      </div>
      <div role="cell">
        <Duration ms={s.duration} start={s.start_time} running={s.phase === "Running"} />
      </div>
    </>
  );
}

function SortHeader({ label, k, filters, onChange }: { label: string; k: SortKey; filters: JobFilters; onChange: (f: JobFilters) => void }) {
  const active = filters.sort === k;
  const arrow = active ? (filters.order === "desc" ? " ↓" : " ↑") : "";
  return (
    <div role="columnheader" aria-sort={active ? (filters.order === "desc" ? "descending" : "ascending") : "none"}>
      <button
        className="link"
        onClick={() => onChange({ ...filters, sort: k, order: active && filters.order === "desc" ? "asc" : "desc" })}
      >
        {label}
        {arrow}
      </button>
    </div>
  );
}

function FilterBar({ filters, onChange, pid }: { filters: JobFilters; onChange: (f: JobFilters) => void; pid: string }) {
  const [name, setName] = useState(filters.name);
  const [user, setUser] = useState(filters.user);
  useEffect(() => setName(filters.name), [filters.name]);
  useEffect(() => setUser(filters.user), [filters.user]);
  // The filters as they are when the typing pauses, not as they were when it began: a
  // phase clicked (or a column sorted) meanwhile stays.
  const latest = useRef({ filters, onChange });
  latest.current = { filters, onChange };
  useEffect(() => {
    const timer = setTimeout(() => {
      const now = latest.current;
      if (name !== now.filters.name || user !== now.filters.user) now.onChange({ ...now.filters, name, user });
    }, 300);
    return () => clearTimeout(timer);
  }, [name, user]); // what is typed, once typing pauses
  // any other filter set takes along what is typed, at once
  const change = (f: JobFilters) => onChange({ ...f, name, user });
  const pools = useQuery({
    queryKey: ["pools", pid],
    queryFn: () => api<{ pools: Pool[] }>(`/v2/${pid}/training-pools`),
    staleTime: 60_000,
  });
  const toggle = (phase: string) =>
    change({
      ...filters,
      phases: filters.phases.includes(phase) ? filters.phases.filter((p) => p !== phase) : [...filters.phases, phase],
    });
  return (
    <div className="filters">
      <input aria-label="search names" placeholder="Search names" value={name} onChange={(e) => setName(e.target.value)} />
      <div className="chips" aria-label="phases">
        {PHASES.map((p) => (
          <button key={p} className={`chip ${filters.phases.includes(p) ? "on" : ""}`} aria-pressed={filters.phases.includes(p)} onClick={() => toggle(p)}>
            {p}
          </button>
        ))}
      </div>
      <select
        aria-label="made by"
        value={filters.owner ?? "*"}
        onChange={(e) => change({ ...filters, owner: e.target.value === "*" ? null : e.target.value })}
      >
        <option value="*">made by anything</option>
        {Object.entries(OWNERS).map(([k, label]) => (
          <option key={k} value={k}>
            {label}
          </option>
        ))}
      </select>
      <select aria-label="pool" value={filters.pool} onChange={(e) => change({ ...filters, pool: e.target.value })}>
        <option value="">any pool</option>
        {(pools.data?.pools ?? []).map((p) => (
          <option key={p.pool_id} value={p.pool_id}>
            {p.pool_id}
          </option>
        ))}
      </select>
      <input aria-label="user" placeholder="User" value={user} onChange={(e) => setUser(e.target.value)} size={10} />
      <label className="small muted">
        created from <input type="date" aria-label="created from" value={filters.from} onChange={(e) => change({ ...filters, from: e.target.value })} />
      </label>
      <label className="small muted">
        to <input type="date" aria-label="created to" value={filters.to} onChange={(e) => change({ ...filters, to: e.target.value })} />
      </label>
      <button
        className="link"
        onClick={() => {
          setName("");
          setUser("");
          onChange(NO_FILTERS);
        }}
      >
        Clear
      </button>
    </div>
  );
}

/** The jobs on screen that may still change are followed: a change refetches their page. */
function useLiveRows(pid: string, filters: JobFilters, visible: Job[]) {
  const client = useQueryClient();
  const live = visible.filter((j) => ACTIVE.has(j.status.phase)).slice(0, 100);
  const ids = live.map((j) => j.metadata.id).sort();
  const [key, setKey] = useState("");
  useEffect(() => {
    const timer = setTimeout(() => setKey(ids.join(",")), 500);
    return () => clearTimeout(timer);
  }, [ids.join(",")]); // a new stream only when the set of jobs followed changes
  const phases = new Map(visible.map((j) => [j.metadata.id, j.status.phase]));
  useEventStream(
    key ? `/v2/${pid}/training-job-changes` : null,
    key,
    (_event, data) => {
      const change = data as { job_id: string; phase?: string };
      if (change.phase !== phases.get(change.job_id)) client.invalidateQueries({ queryKey: pageKey(pid, filters, 0).slice(0, 3) });
    },
    { query: () => ({ job_id: key.split(",") }) },
  );
}
