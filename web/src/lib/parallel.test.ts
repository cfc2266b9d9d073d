import { describe, expect, it } from "vitest";
import type { AutoSearch } from "../api/types";
import { axesFor, crossings, position, ticks } from "./parallel";
import type { Trial } from "./trials";

const POLICY: AutoSearch = {
  reward_attrs: [{ name: "accuracy", mode: "max" }],
  search_params: [
    { name: "lr", param_type: "continuous", lower_bound: "0.0001", upper_bound: "0.1" },
    { name: "epochs", param_type: "continuous", lower_bound: "1", upper_bound: "9" },
    { name: "width", param_type: "discrete", discrete_values: ["8", "16", "32"] },
  ],
  algo_configs: [{ name: "tpe_search" }],
};

const trial = (id: string, lr: string, epochs: string, width: string, reward: number | null): Trial => ({
  id, number: Number(id), status: reward === null ? "running" : "completed", params: { lr, epochs, width }, reward, jobId: `j${id}`, reason: "",
});

describe("parallel coordinates of a search", () => {
  const trials = [trial("0", "0.001", "5", "16", 0.5), trial("1", "0.1", "1", "32", 0.9), trial("2", "0.0001", "9", "8", null)];
  const axes = axesFor(POLICY, ["lr", "epochs", "width"], "accuracy", trials);

  it("has an axis per parameter from the policy, a wide range on a log scale, then the reward's", () => {
    expect(axes.map((a) => [a.name, a.kind])).toEqual([["lr", "log"], ["epochs", "linear"], ["width", "category"], ["accuracy", "linear"]]);
    expect(axes[2].categories).toEqual(["8", "16", "32"]);
    expect([axes[3].lo, axes[3].hi]).toEqual([0.5, 0.9]); // the rewards seen
    expect(ticks(axes[2]).map((t) => t.label)).toEqual(["8", "16", "32"]);
    expect(ticks(axes[0]).map((t) => t.label)).toEqual(["0.0001", "0.1"]);
  });

  it("places each trial on every axis, bottom 0 to top 1; no reward yet is no point there", () => {
    expect(position(axes[0], "0.001")).toBeCloseTo(1 / 3);
    expect(crossings(axes, trials[0])).toEqual([expect.closeTo(1 / 3), 0.5, 0.5, 0]);
    expect(crossings(axes, trials[1])).toEqual([1, 0, 1, 1]);
    expect(crossings(axes, trials[2])[3]).toBeNull();
  });

  it("reads a parameter the policy does not name from its values", () => {
    const [free] = axesFor(null, ["opt"], "accuracy", [{ ...trials[0], params: { opt: "adam" } }, { ...trials[1], params: { opt: "sgd" } }]);
    expect(free).toMatchObject({ kind: "category", categories: ["adam", "sgd"] });
  });
});
