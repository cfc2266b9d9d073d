import { describe, expect, it } from "vitest";
import { fromParams, NO_FILTERS, searchBody, toParams } from "./jobsearch";

describe("the jobs list's filters", () => {
  it("live in the URL and come back from it as they were", () => {
    const f = { ...NO_FILTERS, name: "mlp", phases: ["Running", "Pending"], owner: "", pool: "gpu", user: "ann", from: "2026-03-01", sort: "duration" as const, order: "asc" as const };
    expect(fromParams(toParams(f))).toEqual(f);
    expect(toParams(NO_FILTERS).toString()).toBe("");
  });

  it("ignore what the URL holds that is not a filter", () => {
    const f = fromParams(new URLSearchParams("phase=Bogus&sort=drop_table&order=sideways"));
    expect(f).toEqual(NO_FILTERS);
  });

  it("make the search the server pages, filters and sorts", () => {
    const body = searchBody({ ...NO_FILTERS, name: " mlp ", phases: ["Failed"], owner: "", user: "ann", to: "2026-03-02" }, 3);
    expect(body.offset).toBe(3);
    expect(body.limit).toBe(50);
    expect(body.sort_by).toBe("create_time");
    const byKey = Object.fromEntries(body.filters.map((f) => [f.key, f]));
    expect(byKey.name).toEqual({ key: "name", operator: "like", value: ["mlp"] });
    expect(byKey.phase.value).toEqual(["Failed"]);
    expect(byKey.owner_kind.value).toEqual([""]);
    expect(byKey.user_name.value).toEqual(["ann"]);
    const [low, high] = byKey.create_time.value.map(Number);
    expect(low).toBe(0);
    expect(high).toBe(new Date(2026, 2, 3).getTime() - 1); // the whole last day
  });

  it("send no filter for what is not asked", () => {
    expect(searchBody(NO_FILTERS, 0).filters).toEqual([]);
  });
});
