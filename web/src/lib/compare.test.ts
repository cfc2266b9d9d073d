import { describe, expect, it } from "vitest";
import { makeJob } from "../test-utils";
import { compareRows, metricNames, overlay, runsOf } from "./compare";

function run(id: string, name: string, lr: string, loss: number[], duration = 60_000) {
  const job = makeJob({ phase: "Completed", duration }, name);
  job.metadata.id = id;
  job.metadata.version = "V0001";
  job.algorithm.parameters = [{ name: "lr", value: lr }, { name: "hidden", value: "16" }];
  return { job, metrics: { final_metrics: { val_accuracy: 0.5 + loss.length / 10 }, metrics: [{ metric: "loss", value: loss, steps: loss.map((_, i) => i + 1), tasks: loss.map(() => "worker-0") }] } };
}

describe("runs side by side, as corral compare shows them", () => {
  const runs = runsOf([run("a", "slow", "0.001", [1, 0.8, 0.7], 60_400), run("b", "fast", "0.05", [1, 0.4], 60_100)]);
  const rows = compareRows(runs);
  const by = (label: string) => rows.find((r) => r.label === label);

  it("marks the rows that differ, and only those", () => {
    expect(by("--lr")).toEqual({ section: "parameters", label: "--lr", values: ["0.001", "0.05"], differs: true });
    expect(by("--hidden")?.differs).toBe(false);
    expect(by("phase")?.differs).toBe(false);
    expect(by("duration")?.differs).toBe(false); // 1 min either way: milliseconds do not count
    expect(by("final val_accuracy")).toMatchObject({ values: ["0.8", "0.7"], differs: true });
  });

  it("gives each metric's last and best value, the best of a loss its lowest", () => {
    expect(by("loss last")?.values).toEqual(["0.7", "0.4"]);
    expect(by("loss best (min)")?.values).toEqual(["0.7", "0.4"]);
    expect(metricNames(runs)).toEqual(["loss"]);
  });

  it("overlays a metric's curves, a line per run on the union of their steps", () => {
    const o = overlay("loss", runs);
    expect(o.x).toEqual([1, 2, 3]);
    expect(o.lines).toEqual([
      { label: "slow", values: [1, 0.8, 0.7] },
      { label: "fast", values: [1, 0.4, null] },
    ]);
  });

  it("tells two runs of one name apart by their version", () => {
    const same = runsOf([run("a", "mlp", "0.1", [1]), { ...run("b", "mlp", "0.2", [1]) }]);
    same[1].job.metadata.version = "V0002";
    expect(runsOf(same.map((r) => ({ job: r.job }))).map((r) => r.label)).toEqual(["mlp V0001", "mlp V0002"]);
  });
});
