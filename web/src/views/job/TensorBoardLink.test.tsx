import { screen } from "@testing-library/react";
import { afterEach, expect, it, vi } from "vitest";
import { makeJob, renderAt } from "../../test-utils";
import { TensorBoardLink } from "./TensorBoardLink";

afterEach(() => vi.unstubAllGlobals());

it("opens the job's TensorBoard in a tab of its own, with the token the server gave", () => {
  vi.stubGlobal("fetch", vi.fn());
  const job = { ...makeJob(), endpoints: { tensorboard: { url: "http://h:8001/training-jobs/j1/tensorboard/", token: "u.1.ab" } } };
  renderAt(<TensorBoardLink pid="p1" job={job} />);
  const link = screen.getByRole("link", { name: "TensorBoard" });
  expect(link).toHaveAttribute("href", "http://h:8001/training-jobs/j1/tensorboard/?token=u.1.ab");
  expect(link).toHaveAttribute("target", "_blank");
  expect(link).toHaveAttribute("rel", "noreferrer");
});

it("shows nothing for a job that asked for no TensorBoard", () => {
  const fetched = vi.fn();
  vi.stubGlobal("fetch", fetched);
  renderAt(<TensorBoardLink pid="p1" job={makeJob()} />);
  expect(screen.queryByRole("link", { name: "TensorBoard" })).toBeNull();
  expect(fetched).not.toHaveBeenCalled();
});
