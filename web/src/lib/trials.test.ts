import { describe, expect, it } from "vitest";
import type { TrialsTable } from "../api/types";
import { bestTrial, curveLines, parseTrials, sortTrials } from "./trials";

const TABLE: TrialsTable = {
  total: 5,
  items: {
    header: ["trial_id", "status", "lr", "width", "accuracy", "job_id", "reason"],
    data: [
      ["0", "completed", "0.01", "16", "0.91", "j0", ""],
      ["1", "pruned", "0.09", "8", "0.2", "j1", "pruned at step 2: 0.2"],
      ["2", "completed", "0.002", "32", "0.95", "j2", ""],
      ["3", "running", "0.0005", "8", "", "j3", ""],
      ["4", "failed", "0.05", "16", "", "j4", "its job failed"],
    ],
  },
};

describe("a search's trials", () => {
  const found = parseTrials(TABLE);

  it("reads the parameters and the reward from the header", () => {
    expect(found.params).toEqual(["lr", "width"]);
    expect(found.reward).toBe("accuracy");
    expect(found.trials[1]).toEqual({ id: "1", number: 1, status: "pruned", params: { lr: "0.09", width: "8" }, reward: 0.2, jobId: "j1", reason: "pruned at step 2: 0.2" });
    expect(found.trials[3].reward).toBeNull();
  });

  it("finds the best completed trial by the search's mode, never a pruned or running one", () => {
    expect(bestTrial(found.trials, "max")?.id).toBe("2");
    expect(bestTrial(found.trials, "min")?.id).toBe("0"); // trial 1's 0.2 was pruned
    expect(bestTrial(found.trials.slice(3), "max")).toBeUndefined();
  });

  it("sorts by a column, numbers as numbers, trials without the value last either way", () => {
    expect(sortTrials(found.trials, "lr", false).map((t) => t.id)).toEqual(["3", "2", "0", "4", "1"]);
    expect(sortTrials(found.trials, "reward", true).map((t) => t.id)).toEqual(["2", "0", "1", "3", "4"]);
    expect(sortTrials(found.trials, "reward", false).map((t) => t.id)).toEqual(["1", "0", "2", "3", "4"]);
    expect(sortTrials(found.trials, "status", false).map((t) => t.status)).toEqual(["completed", "completed", "failed", "pruned", "running"]);
  });
});

describe("the trials' learning curves", () => {
  it("draws a line per trial on all their steps, one stopped early dashed and ending where it stopped", () => {
    const { x, lines } = curveLines({
      reward: "accuracy",
      mode: "max",
      trials: [
        { trial_id: "0", status: "completed", job_id: "j0", steps: [0, 1, 2, 3], values: [0.1, 0.2, 0.3, 0.4] },
        { trial_id: "1", status: "pruned", job_id: "j1", steps: [0, 1], values: [0.05, 0.06] },
        { trial_id: "2", status: "early_stopped", job_id: "j2", steps: [0], values: [0.5] },
        { trial_id: "3", status: "running", job_id: "j3", steps: [], values: [] },
      ],
    });
    expect(x).toEqual([0, 1, 2, 3]);
    expect(lines.map((l) => l.label)).toEqual(["trial 0", "trial 1 (pruned at step 1)", "trial 2 (stopped by hand at step 0)"]);
    expect(lines[1]).toMatchObject({ values: [0.05, 0.06, null, null], dash: true });
    expect(lines[0].dash).toBe(false);
  });
});
