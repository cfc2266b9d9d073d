// The pages of a job search that the table shows, fetched as they scroll into view.

import { keepPreviousData, useQueries, useQuery } from "@tanstack/react-query";
import { api } from "../../api/client";
import type { SearchResult } from "../../api/types";
import { PAGE, searchBody, type JobFilters } from "../../lib/jobsearch";

export function searchJobs(pid: string, filters: JobFilters, page: number, signal?: AbortSignal): Promise<SearchResult> {
  return api<SearchResult>(`/v2/${pid}/training-job-searches`, {
    method: "POST",
    body: searchBody(filters, page),
    signal,
  });
}

export function pageKey(pid: string, filters: JobFilters, page: number) {
  return ["jobs", pid, JSON.stringify(filters), page];
}

/** The first page (which says how many jobs match), and each page in `wanted`. */
export function useJobPages(pid: string, filters: JobFilters, wanted: number[]) {
  const first = useQuery({
    queryKey: pageKey(pid, filters, 0),
    queryFn: ({ signal }) => searchJobs(pid, filters, 0, signal),
    placeholderData: keepPreviousData,
    refetchInterval: 10_000,
  });
  const others = useQueries({
    queries: wanted
      .filter((p) => p > 0)
      .map((page) => ({
        queryKey: pageKey(pid, filters, page),
        queryFn: ({ signal }: { signal: AbortSignal }) => searchJobs(pid, filters, page, signal),
        refetchInterval: 10_000,
        staleTime: 5_000,
      })),
  });
  const pages = new Map<number, SearchResult>();
  if (first.data) pages.set(0, first.data);
  wanted
    .filter((p) => p > 0)
    .forEach((page, i) => {
      const data = others[i]?.data;
      if (data) pages.set(page, data);
    });
  return { first, pages, pageSize: PAGE };
}
