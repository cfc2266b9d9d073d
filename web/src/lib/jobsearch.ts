// The jobs list's filters, kept in the page's URL (so a filtered list is a link), and the
// training-job-searches body they make. The server does the filtering, sorting and paging.

import { dayStart } from "./time";

export const PHASES = ["Creating", "Pending", "Running", "Terminating", "Completed", "Failed", "Terminated", "Abnormal"];
export const SORT_KEYS = ["create_time", "name", "phase", "duration", "start_time"] as const;
export type SortKey = (typeof SORT_KEYS)[number];
/** what made a job: "" for a job submitted by itself */
export const OWNERS: Record<string, string> = {
  "": "submitted",
  pipeline: "pipeline task",
  incremental_learning: "learning loop",
  notebook: "notebook",
  search: "search trial",
};
export const PAGE = 50;

export interface JobFilters {
  name: string;
  phases: string[];
  owner: string | null; // null: any
  pool: string;
  user: string;
  from: string; // yyyy-mm-dd
  to: string;
  sort: SortKey;
  order: "asc" | "desc";
}

export const NO_FILTERS: JobFilters = {
  name: "",
  phases: [],
  owner: null,
  pool: "",
  user: "",
  from: "",
  to: "",
  sort: "create_time",
  order: "desc",
};

export function fromParams(params: URLSearchParams): JobFilters {
  const sort = params.get("sort") as SortKey | null;
  return {
    name: params.get("name") ?? "",
    phases: params.getAll("phase").filter((p) => PHASES.includes(p)),
    owner: params.has("made_by") ? params.get("made_by") ?? "" : null,
    pool: params.get("pool") ?? "",
    user: params.get("user") ?? "",
    from: params.get("from") ?? "",
    to: params.get("to") ?? "",
    sort: sort && SORT_KEYS.includes(sort) ? sort : "create_time",
    order: params.get("order") === "asc" ? "asc" : "desc",
  };
}

export function toParams(f: JobFilters): URLSearchParams {
  const out = new URLSearchParams();
  if (f.name) out.set("name", f.name);
  f.phases.forEach((p) => out.append("phase", p));
  if (f.owner !== null) out.set("made_by", f.owner);
  if (f.pool) out.set("pool", f.pool);
  if (f.user) out.set("user", f.user);
  if (f.from) out.set("from", f.from);
  if (f.to) out.set("to", f.to);
  if (f.sort !== "create_time") out.set("sort", f.sort);
  if (f.order !== "desc") out.set("order", f.order);
  return out;
}

export interface SearchBody {
  offset: number;
  limit: number;
  sort_by: SortKey;
  order: "asc" | "desc";
  filters: { key: string; operator: string; value: string[] }[];
}

/** The search for page `page` (`offset` counts pages, as ModelArts has it). */
export function searchBody(f: JobFilters, page: number, limit = PAGE): SearchBody {
  const filters: SearchBody["filters"] = [];
  if (f.name.trim()) filters.push({ key: "name", operator: "like", value: [f.name.trim()] });
  if (f.phases.length) filters.push({ key: "phase", operator: "in", value: f.phases });
  if (f.owner !== null) filters.push({ key: "owner_kind", operator: "in", value: [f.owner] });
  if (f.pool) filters.push({ key: "pool_id", operator: "in", value: [f.pool] });
  if (f.user.trim()) filters.push({ key: "user_name", operator: "in", value: [f.user.trim()] });
  const from = dayStart(f.from);
  const to = dayStart(f.to);
  if (from !== null || to !== null) {
    const low = from ?? 0;
    const high = to === null ? 253402300799999 : to + 86_400_000 - 1; // the whole last day
    filters.push({ key: "create_time", operator: "between", value: [String(low), String(high)] });
  }
  return { offset: page, limit, sort_by: f.sort, order: f.order, filters };
}
