import { useQuery, useQueryClient } from "@tanstack/react-query";
import { api } from "../../api/client";
import { useEventStream } from "../../api/sse";
import type { Job } from "../../api/types";

export const ACTIVE = new Set(["Creating", "Pending", "Running", "Terminating"]);

export function jobKey(pid: string, id: string) {
  return ["job", pid, id];
}

/** The job, read again the moment it changes (the job-changes stream), with what hangs off it. */
export function useJob(pid: string, id: string) {
  const client = useQueryClient();
  const query = useQuery({
    queryKey: jobKey(pid, id),
    queryFn: ({ signal }) => api<Job>(`/v2/${pid}/training-jobs/${id}`, { signal }),
    // durations and queue positions move without the phase changing
    refetchInterval: (q) => (q.state.data && ACTIVE.has(q.state.data.status.phase) ? 5_000 : false),
  });
  const phase = query.data?.status.phase;
  useEventStream(
    `/v2/${pid}/training-job-changes`,
    id,
    () => {
      client.invalidateQueries({ queryKey: jobKey(pid, id) });
      client.invalidateQueries({ queryKey: ["job-extra", pid, id] });
    },
    { query: () => ({ job_id: id }), enabled: !!phase && ACTIVE.has(phase) },
  );
  return query;
}
