// Small pieces every view uses: a state badge, an error said in words, a loading line.

import type { ReactNode } from "react";
import { Link } from "react-router";
import { describe } from "../api/client";

const TONES: Record<string, string> = {
  Completed: "ok", completed: "ok", success: "ok", cached: "ok", Promoted: "ok", Loaded: "ok", RUNNING: "run",
  Running: "run", running: "run", Training: "run", Evaluating: "run", Deploying: "run", STARTING: "run",
  Creating: "wait", Pending: "wait", waiting: "wait", Waiting: "wait", Terminating: "wait", stopping: "wait", STOPPING: "wait", CREATING: "wait",
  Failed: "bad", failed: "bad", Abnormal: "bad", upstream_failed: "bad", timeout: "bad", Rejected: "bad", ERROR: "bad",
  CREATE_FAILED: "bad", START_FAILED: "bad",
  Terminated: "off", canceled: "off", skipped: "off", Stopped: "off", STOPPED: "off", Superseded: "off",
};

/** how a state is coloured: ok, run, wait, bad or off */
export function tone(state: string): string {
  return TONES[state] ?? "off";
}

export function Badge({ state, title }: { state: string; title?: string }) {
  return (
    <span className={`badge ${tone(state)}`} title={title} data-state={state}>
      {state.replace("_", " ")}
    </span>
  );
}

export function ErrorNote({ error, prefix }: { error: unknown; prefix?: string }) {
  if (!error) return null;
  return (
    <div className="error" role="alert">
      {prefix ? `${prefix}: ` : ""}
      {describe(error)}
    </div>
  );
}

export function Loading({ what = "Loading" }: { what?: string }) {
  return <div className="muted loading">{what}…</div>;
}

export function Section({ title, actions, children }: { title: string; actions?: ReactNode; children: ReactNode }) {
  return (
    <section className="section">
      <header>
        <h2>{title}</h2>
        {actions ? <div className="actions">{actions}</div> : null}
      </header>
      {children}
    </section>
  );
}

export function KeyValues({ rows }: { rows: [string, ReactNode][] }) {
  return (
    <dl className="kv">
      {rows.map(([k, v]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v ?? <span className="muted">–</span>}</dd>
        </div>
      ))}
    </dl>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="empty muted">{children}</div>;
}

/** A bar of a share done, coloured as the state it belongs to is (a failed run in red). */
export function Progress({ value, state, label }: { value: number; state: string; label?: string }) {
  return <progress className={`tone-${tone(state)}`} max={100} value={value} aria-label={label} />;
}

/** What an address that names no page of the console shows. */
export function NotFound() {
  return (
    <div className="not-found" role="alert">
      <h1>Not found</h1>
      <p>The console has no page at this address. The link may be mistyped, or from another version of corral.</p>
      <p>
        <Link to="/">Go to the jobs</Link>
      </p>
    </div>
  );
}
