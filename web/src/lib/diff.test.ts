import { describe, expect, it } from "vitest";
import type { Version } from "../api/types";
import { diffVersions } from "./diff";

function version(over: Partial<Version>): Version {
  return {
    version_id: "a", version_name: "V0001", resume: false, create_time: 0, phase: "Completed",
    secondary_phase: "Completed", duration: 0, final_metrics: { loss: 0.5 }, code_hash: "sha256:1",
    parameters: { lr: "0.1", epochs: "10" }, inputs: {}, outputs: { train_url: "/out/V0001" },
    code_dir: "/code", boot_file: "train.py", flavor_id: "cpu", node_count: 1, ...over,
  };
}

describe("two versions side by side", () => {
  const a = version({});
  const b = version({ version_name: "V0002", parameters: { lr: "0.01", batch: "64" }, final_metrics: { loss: 0.25 }, pre_version_name: "V0001" });

  it("lists what differs, and what one has and the other not", () => {
    const rows = diffVersions(a, b, true);
    const byKey = Object.fromEntries(rows.map((r) => [r.key, r]));
    expect(byKey["parameter lr"]).toMatchObject({ left: "0.1", right: "0.01", changed: true });
    expect(byKey["parameter epochs"]).toMatchObject({ left: "10", right: "", changed: true });
    expect(byKey["parameter batch"]).toMatchObject({ left: "", right: "64", changed: true });
    expect(byKey["metric loss"]).toMatchObject({ left: "0.5", right: "0.25" });
    expect(byKey["from version"]).toMatchObject({ left: "", right: "V0001" });
    expect(byKey["flavor"]).toBeUndefined();
  });

  it("shows everything unless asked for the differences only", () => {
    const rows = diffVersions(a, b);
    expect(rows.find((r) => r.key === "flavor")).toMatchObject({ left: "cpu", right: "cpu", changed: false });
  });
});
