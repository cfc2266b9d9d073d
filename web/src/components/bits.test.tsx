import { render, screen } from "@testing-library/react";
import { expect, it } from "vitest";
import { Progress } from "./bits";

it.each([
  ["failed", "tone-bad"],
  ["timeout", "tone-bad"],
  ["success", "tone-ok"],
  ["running", "tone-run"],
  ["canceled", "tone-off"],
])("colours a %s pipeline's bar as its state (%s)", (state, tone) => {
  render(<Progress value={100} state={state} label="progress" />);
  expect(screen.getByRole("progressbar", { name: "progress" })).toHaveClass(tone);
});
