import { describe, expect, it } from "vitest";
import { align } from "./series";

describe("reported metrics on a chart", () => {
  it("draw by step when every point has one", () => {
    const a = align({ metric: "loss", value: [3, 2, 1], steps: [10, 20, 30], times: [5, 6, 7], tasks: ["worker-0", "worker-0", "worker-0"] });
    expect(a).toEqual({ x: [10, 20, 30], time: false, lines: [{ label: "loss", values: [3, 2, 1] }] });
  });

  it("draw by time when a point has no step", () => {
    const a = align({ metric: "acc", value: [0.5, 0.6], steps: [null, 3], times: [1000, 2000], tasks: ["w", "w"] });
    expect(a.time).toBe(true);
    expect(a.x).toEqual([1000, 2000]);
  });

  it("give each task its line on one axis", () => {
    const a = align({ metric: "loss", value: [4, 3, 2], steps: [1, 1, 2], times: [0, 0, 0], tasks: ["worker-0", "worker-1", "worker-0"] });
    expect(a.x).toEqual([1, 2]);
    expect(a.lines).toEqual([
      { label: "loss (worker-0)", values: [4, 2] },
      { label: "loss (worker-1)", values: [3, null] },
    ]);
  });
});
