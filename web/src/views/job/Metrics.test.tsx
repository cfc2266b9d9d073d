import { screen } from "@testing-library/react";
import { afterEach, expect, it, vi } from "vitest";
import { makeJob, renderAt } from "../../test-utils";
import { Metrics } from "./Metrics";

afterEach(() => vi.unstubAllGlobals());

it("says the metrics and samples are loading while they have not come", async () => {
  vi.stubGlobal("fetch", vi.fn(() => new Promise<Response>(() => {}))); // a slow network
  const job = makeJob({ phase: "Running", running_records: [{ start_at: 1, start_type: "init_or_rescheduled" }] });
  renderAt(<Metrics pid="p1" job={job} />);
  expect(await screen.findByText("Loading the metrics…")).toBeInTheDocument();
  expect(screen.getByText("Loading the samples…")).toBeInTheDocument();
});
