import { useQuery } from "@tanstack/react-query";
import { api, ApiError } from "../../api/client";

/** Whether the server has notebooks (ModelArts' /v1/{project_id}/notebooks): a server
 * without them answers 404 (APIGW.0101, no such path), and the view stays hidden;
 * undefined until the server has answered. */
export function useNotebooksAvailable(pid: string): boolean | undefined {
  const q = useQuery({
    queryKey: ["notebooks-available", pid],
    queryFn: async () => {
      try {
        await api(`/v1/${pid}/notebooks`, { query: { limit: 1 } });
        return true;
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return false;
        throw err;
      }
    },
    enabled: !!pid,
    staleTime: 5 * 60_000,
    retry: false,
  });
  return q.data;
}
