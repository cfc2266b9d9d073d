import { fireEvent, screen, within } from "@testing-library/react";
import { afterEach, expect, it, vi } from "vitest";

// uPlot cannot draw in jsdom (tests/web draws it): here, which lines each chart gets.
vi.mock("../../components/Chart", () => ({
  Chart: ({ title, lines }: { title: string; lines: { label: string }[] }) => (
    <figure data-testid={`chart-${title}`}>{lines.map((l) => l.label).join(",")}</figure>
  ),
}));
import { setToken } from "../../api/client";
import { json, makeJob, ME, renderAt } from "../../test-utils";
import Compare from "./Compare";

afterEach(() => {
  vi.unstubAllGlobals();
  setToken(null);
});

function job(id: string, name: string, lr: string) {
  const j = makeJob({ phase: "Completed", duration: 30_000 }, name);
  j.metadata.id = id;
  j.algorithm.parameters = [{ name: "lr", value: lr }, { name: "epochs", value: "3" }];
  return j;
}

const METRICS: Record<string, unknown> = {
  a: { final_metrics: { accuracy: 0.8 }, metrics: [{ metric: "loss", value: [0.9, 0.5], steps: [1, 2] }] },
  b: { final_metrics: { accuracy: 0.9 }, metrics: [{ metric: "loss", value: [0.8, 0.3, 0.2], steps: [1, 2, 3] }] },
};

function server() {
  setToken("crl_x");
  return vi.fn(async (url: string) => {
    if (url.startsWith("/corral/whoami")) return json(ME);
    const m = url.match(/^\/v2\/p1\/training-jobs\/(\w+)(\/training-metrics)?/);
    if (!m) return json({});
    if (m[1] === "gone") return json({ error_code: "ModelArts.2775", error_msg: "training job 'gone' does not exist" }, 404);
    if (m[2]) return json(METRICS[m[1]]);
    return json(job(m[1], m[1] === "a" ? "slow" : "fast", m[1] === "a" ? "0.001" : "0.05"));
  });
}

it("shows the picked jobs side by side, what differs highlighted, their curves overlaid", async () => {
  vi.stubGlobal("fetch", server());
  renderAt(<Compare />, "/p/p1/compare?jobs=a,b", "/p/:pid/compare");
  const table = await screen.findByTestId("compare");
  const row = (label: string) => within(table).getByText(label).closest("tr") as HTMLElement;
  expect(within(table).getAllByRole("link").map((a) => a.textContent)).toEqual(["slow", "fast"]);
  expect(row("--lr").textContent).toBe("--lr0.0010.05");
  expect(row("--lr").className).toBe("changed");
  expect(row("--epochs").className).toBe("");
  expect(row("final accuracy").className).toBe("changed");
  expect(row("loss best (min)").textContent).toBe("loss best (min)0.50.2");
  expect(screen.getByTestId("chart-loss (min)").textContent).toBe("slow,fast");
  fireEvent.click(screen.getByLabelText("only what differs"));
  expect(within(table).queryByText("--epochs")).toBeNull();
  expect(within(table).getByText("--lr")).toBeInTheDocument();
});

it("asks for two jobs, and says which one is not there", async () => {
  vi.stubGlobal("fetch", server());
  const first = renderAt(<Compare />, "/p/p1/compare?jobs=a", "/p/:pid/compare");
  expect(await screen.findByText(/Pick two or more jobs to compare/)).toBeInTheDocument();
  first.unmount();
  renderAt(<Compare />, "/p/p1/compare?jobs=a,gone", "/p/:pid/compare");
  expect(await screen.findByRole("alert")).toHaveTextContent("Training job 'gone' does not exist");
});
