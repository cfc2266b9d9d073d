import { render, screen } from "@testing-library/react";
import { expect, it, vi } from "vitest";

// uPlot draws on a canvas, which jsdom has not: the charts themselves are drawn in the
// browser tests (tests/web); here, which charts a node gets.
vi.mock("../components/Chart", () => ({ Chart: ({ title }: { title: string }) => <figure>{title}</figure> }));
import { LeaderLine, NodeCharts } from "./Nodes";

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

const NODE = { name: "gpu-1", cpu: 16, memory_mb: 131072, gpus: 1, gpu_memory_mb: 81559, times: [1, 2], cpu_percent: [10, 20], mem_mb: [1024, 2048] };

it("draws a node's CPU and memory over time, and its GPUs' where it has them", () => {
  render(<NodeCharts node={{ ...NODE, gpu_util: [0, 100], gpu_mem_mb: [0, 40779.5] }} />);
  const box = screen.getByTestId("usage-gpu-1");
  expect(box.textContent).toContain("CPU and memory gpu-1");
  expect(box.textContent).toContain("GPUs gpu-1");
});

it("draws no GPU chart for a node without GPU figures, and says when nothing was sampled", () => {
  render(<NodeCharts node={{ ...NODE, name: "cpu-1", gpus: 0, gpu_util: null, gpu_mem_mb: null }} />);
  expect(screen.getByTestId("usage-cpu-1").textContent).not.toContain("GPUs cpu-1");
  render(<NodeCharts node={{ ...NODE, name: "new", times: [], cpu_percent: [], mem_mb: [], gpu_util: null, gpu_mem_mb: null }} />);
  expect(screen.getByTestId("usage-new").textContent).toContain("No samples yet");
});
