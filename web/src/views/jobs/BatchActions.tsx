// Stopping or deleting the jobs ticked in the list, at once: one question naming how many,
// then a request per job (the API has no batch call), and what came of each said after.

import { useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { api, describe } from "../../api/client";
import { plural } from "../../lib/format";

/** a job ticked in the list, its phase as the list last showed it */
export interface Picked {
  id: string;
  name: string;
  phase: string;
}

export interface Outcome {
  done: string;
  failed: string[];
}

const ACTIVE = new Set(["Creating", "Pending", "Running"]);
/** requests in flight at once */
const AT_ONCE = 4;

/** `act` on each job, AT_ONCE at a time; those it failed for, with why. */
export async function eachJob(jobs: Picked[], act: (job: Picked) => Promise<unknown>): Promise<{ job: Picked; why: string }[]> {
  const failed: { job: Picked; why: string }[] = [];
  for (let i = 0; i < jobs.length; i += AT_ONCE) {
    const batch = jobs.slice(i, i + AT_ONCE);
    const results = await Promise.allSettled(batch.map(act));
    results.forEach((r, j) => {
      if (r.status === "rejected") failed.push({ job: batch[j], why: describe(r.reason) });
    });
  }
  return failed;
}

export function BatchActions({ pid, picked, onDone }: { pid: string; picked: Picked[]; onDone: (outcome: Outcome, deleted: string[]) => void }) {
  const client = useQueryClient();
  const [busy, setBusy] = useState(false);
  const stoppable = picked.filter((p) => ACTIVE.has(p.phase));
  async function run(jobs: Picked[], act: (job: Picked) => Promise<unknown>, verb: string, deleting: boolean) {
    setBusy(true);
    try {
      const failed = await eachJob(jobs, act);
      const ok = jobs.length - failed.length;
      const gone = deleting ? jobs.filter((j) => !failed.some((f) => f.job.id === j.id)).map((j) => j.id) : [];
      onDone({ done: `${verb} ${ok} of ${plural(jobs.length, "job")}.`, failed: failed.map((f) => `${f.job.name}: ${f.why}`) }, gone);
    } finally {
      setBusy(false);
      client.invalidateQueries({ queryKey: ["jobs", pid] });
    }
  }
  const stop = () => {
    const skipped = picked.length - stoppable.length;
    const ask = `Stop ${plural(stoppable.length, "job")}? Their tasks get SIGTERM, then SIGKILL after the grace period; they end Terminated.${skipped ? ` (${plural(skipped, "ticked job")} ended already and ${skipped === 1 ? "is" : "are"} left as ${skipped === 1 ? "it is" : "they are"}.)` : ""}`;
    if (!window.confirm(ask)) return;
    void run(stoppable, (j) => api(`/v2/${pid}/training-jobs/${j.id}/actions`, { method: "POST", body: { action_type: "terminate" } }), "Stopped", false);
  };
  const remove = () => {
    if (!window.confirm(`Delete ${plural(picked.length, "job")} and their logs? Running ones are stopped first; their outputs stay.`)) return;
    void run(picked, (j) => api(`/v2/${pid}/training-jobs/${j.id}`, { method: "DELETE" }), "Deleted", true);
  };
  return (
    <>
      <button disabled={busy || stoppable.length === 0} title="stop the ticked jobs that run or wait" onClick={stop}>
        Stop{stoppable.length ? ` ${plural(stoppable.length, "job")}` : ""}
      </button>
      <button className="danger" disabled={busy || picked.length === 0} title="delete the ticked jobs" onClick={remove}>
        Delete{picked.length ? ` ${plural(picked.length, "job")}` : ""}
      </button>
    </>
  );
}
