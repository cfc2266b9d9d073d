import { useSearchParams } from "react-router";
import type { Job } from "../../api/types";
import { LogViewer } from "../../components/LogViewer";
import { ACTIVE } from "./useJob";

export function TaskLogs({ pid, job }: { pid: string; job: Job }) {
  const [params, setParams] = useSearchParams();
  const tasks = job.status.tasks;
  const task = tasks.includes(params.get("task") ?? "") ? params.get("task")! : tasks[0];
  const attempts = job.status.running_records.length;
  const picked = Number(params.get("attempt")) || undefined;
  const attempt = picked && picked <= attempts ? picked : undefined;
  const set = (key: string, value: string) => {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    setParams(next, { replace: true });
  };
  const live = ACTIVE.has(job.status.phase) && (!attempt || attempt === attempts);
  if (!task) return null;
  return (
    <div className="task-logs">
      <div className="pickers">
        {tasks.length > 1 ? (
          <label>
            task{" "}
            <select aria-label="task" value={task} onChange={(e) => set("task", e.target.value)}>
              {tasks.map((t) => (
                <option key={t}>{t}</option>
              ))}
            </select>
          </label>
        ) : (
          <span className="muted">{task}</span>
        )}
        {attempts > 1 ? (
          <label>
            attempt{" "}
            <select aria-label="attempt" value={attempt ?? ""} onChange={(e) => set("attempt", e.target.value)}>
              <option value="">latest ({attempts})</option>
              {Array.from({ length: attempts }, (_, i) => (
                <option key={i} value={i + 1}>
                  {i + 1}
                </option>
              ))}
            </select>
          </label>
        ) : null}
      </div>
      <LogViewer
        key={`${task}/${attempt ?? "latest"}/${attempts}`}
        pid={pid}
        jobId={job.metadata.id}
        task={task}
        attempt={attempt}
        live={live}
        fileName={`${job.metadata.name}-${task}.log`}
      />
    </div>
  );
}
