// A failed job's error at a glance: the last lines of the log of the task that failed,
// read from the end of its log (one window of the logs API), under why it failed.

import { useQuery } from "@tanstack/react-query";
import { Link } from "react-router";
import { api } from "../../api/client";
import type { Job, LogWindow } from "../../api/types";
import { ErrorNote } from "../../components/bits";

/** lines shown, and the bytes read from the log's end to find them */
export const LINES = 20;
const TAIL_BYTES = 8 * 1024;

/** The task whose log says why the job failed: the first that exited with an error, or the
 * one the reason names, or the first. */
export function failedTask(job: Job): string | undefined {
  const s = job.status;
  const exited = s.task_statuses.find((t) => t.exit_code !== undefined && t.exit_code !== 0);
  if (exited) return exited.task;
  const named = s.reason?.match(/^([\w.-]+):/)?.[1];
  return named && s.tasks.includes(named) ? named : s.tasks[0];
}

/** The last `n` lines of `text` (a trailing line break ends the last, it adds none). */
export function lastLines(text: string, n = LINES): string[] {
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines.slice(-n);
}

export function LastLines({ pid, job }: { pid: string; job: Job }) {
  const task = failedTask(job);
  const id = job.metadata.id;
  const tail = useQuery({
    queryKey: ["job-extra", pid, id, "tail", task],
    queryFn: () => api<LogWindow>(`/v2/${pid}/training-jobs/${id}/tasks/${task}/logs/window`, { query: { max_bytes: TAIL_BYTES } }),
    enabled: !!task,
    staleTime: Infinity, // the log of an ended job does not change
  });
  if (!task) return null;
  const lines = tail.data ? lastLines(tail.data.content ?? "") : [];
  return (
    <div className="last-log" data-testid="last-lines">
      <div className="muted small">
        the last lines of {task}'s log{tail.data && tail.data.attempt > 1 ? ` (attempt ${tail.data.attempt})` : ""} ·{" "}
        <Link to={`/p/${pid}/jobs/${id}/logs?task=${encodeURIComponent(task)}`}>the whole log</Link>
      </div>
      <ErrorNote error={tail.error} />
      {tail.data && lines.length ? <pre className="last-lines">{lines.join("\n")}</pre> : null}
      {tail.data && !lines.length ? <div className="muted small">{tail.data.attempt ? "Its log is empty." : "It never started: it has no log."}</div> : null}
    </div>
  );
}
