import { screen } from "@testing-library/react";
import { afterEach, expect, it, vi } from "vitest";
import { setToken } from "../../api/client";
import type { ModelVersion } from "../../api/types";
import { json, ME, renderAt } from "../../test-utils";
import ModelPage from "./ModelPage";

afterEach(() => {
  vi.unstubAllGlobals();
  setToken(null);
});

function version(n: number, datasets: ModelVersion["datasets"]): ModelVersion {
  return {
    model_name: "helmet", version: n, aliases: [], create_time: 1_700_000_000_000, location: "/m", size_bytes: 10, file_count: 1,
    source_job_id: `j${n}`, source_job_name: "train", source_version: "V0001", source_channel: "train_url", source_phase: "Completed",
    metrics: {}, parameters: {}, datasets,
  };
}

it("shows each version's lineage: the job that made it and the dataset versions that job read", async () => {
  setToken("crl_x");
  const read = {
    channel: "data_url", dataset_id: "d1", dataset_name: "stream", version_id: "v2", version_name: "V0002",
    content_hash: "sha256:0123456789abcdef0123", number_of_samples: 80,
  };
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string) => {
      if (url.startsWith("/corral/whoami")) return json(ME);
      return json({
        id: "m1", name: "helmet", create_time: 1, update_time: 1, latest_version: 2, version_count: 2, aliases: {},
        versions: [version(1, []), version(2, [read, { ...read, channel: "old", version_name: "V0001", content_hash: null, number_of_samples: null }])],
      });
    }),
  );
  renderAt(<ModelPage />, "/p/p1/models/helmet", "/p/:pid/models/:model");
  const lineage = await screen.findByTestId("datasets-v2");
  expect(lineage).toHaveTextContent("read dataset stream V0002 as data_url · 80 samples · sha256:0123456789ab");
  expect(lineage).toHaveTextContent("read dataset stream V0001 as old · gone");
  const jobs = screen.getAllByRole("link", { name: /train V0001/ }).map((a) => a.getAttribute("href"));
  expect(jobs).toEqual(["/p/p1/jobs/j2", "/p/p1/jobs/j1"]); // newest first, each from its job
  expect(screen.queryByTestId("datasets-v1")).toBeNull(); // a job that read no dataset
});
