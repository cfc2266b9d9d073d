import { useQuery } from "@tanstack/react-query";
import { api } from "../../api/client";
import type { Job } from "../../api/types";

/** the show body's token opens the page for 10 minutes: read afresh well before that */
const REFRESH_MS = 240_000;

/**
 * A job's TensorBoard (`tensorboard/enable: true`), opened in a tab of its own on the
 * notebooks' origin, where its pages cannot reach the console's token. The link carries a
 * one-time token the server exchanges for a cookie of that page's path.
 */
export function TensorBoardLink({ pid, job }: { pid: string; job: Job }) {
  const shown = job.endpoints?.tensorboard;
  const fresh = useQuery({
    queryKey: ["tensorboard-link", pid, job.metadata.id],
    queryFn: ({ signal }) => api<Job>(`/v2/${pid}/training-jobs/${job.metadata.id}`, { signal }),
    enabled: !!shown,
    refetchInterval: REFRESH_MS,
    staleTime: REFRESH_MS,
    initialData: job,
  });
  const board = fresh.data?.endpoints?.tensorboard ?? shown;
  if (!board) return null;
  const href = board.token ? `${board.url}?token=${encodeURIComponent(board.token)}` : board.url;
  return (
    <a className="button" href={href} target="_blank" rel="noreferrer" data-testid="tensorboard">
      TensorBoard
    </a>
  );
}
