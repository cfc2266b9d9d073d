import { expect, it } from "vitest";
import { axisSize, labels, memory } from "./axis";

const width = (s: string) => s.length * 7;

it("makes the value axis as wide as its widest label", () => {
  const shown = labels([0, 5000, 10000, 15000], " MB");
  expect(shown).toEqual(["0 MB", "5000 MB", "10000 MB", "15000 MB"]);
  expect(axisSize(shown, width)).toBeGreaterThanOrEqual(8 * 7 + 15); // label, tick and gap
  expect(axisSize(labels([123456789], " MB"), width)).toBeGreaterThan(axisSize(shown, width));
  expect(axisSize(null, width)).toBeGreaterThan(0); // before uPlot has labels
});

it("writes ticks without float noise", () => {
  expect(labels([0.1 + 0.2, 100], "%")).toEqual(["0.3%", "100%"]);
});

it("shows memory in GB from 1 GB up", () => {
  expect(memory([100, 900, null])).toEqual({ values: [100, 900, null], unit: " MB" });
  expect(memory([512, 3072, null])).toEqual({ values: [0.5, 3, null], unit: " GB" });
});
