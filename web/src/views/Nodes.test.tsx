import { render, screen } from "@testing-library/react";
import { expect, it } from "vitest";
import { LeaderLine } from "./Nodes";

it("names the server that schedules, where and since when", () => {
  const since = Date.now() - 5 * 60_000;
  render(<LeaderLine leader={{ server: "a:1:2", name: "corral-a", url: "http://a:8765", epoch: 3, since, this_server: false }} />);
  const line = screen.getByTestId("leader");
  expect(line.textContent).toBe("corral-a at http://a:8765 (epoch 3, since 5 min ago)");
});

it("says so while no server leads", () => {
  render(<LeaderLine leader={null} />);
  expect(screen.getByTestId("leader").textContent).toMatch(/^none now/);
});
