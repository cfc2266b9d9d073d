import { render, screen } from "@testing-library/react";
import { expect, it } from "vitest";
import { absolute } from "../lib/time";
import { Time } from "./Time";

it("shows a relative time with the exact time on hover", () => {
  const ms = Date.now() - 5 * 60_000;
  render(<Time ms={ms} />);
  const el = screen.getByText("5 min ago");
  expect(el.getAttribute("title")).toBe(absolute(ms));
  expect(el.getAttribute("datetime")).toBe(new Date(ms).toISOString());
});
