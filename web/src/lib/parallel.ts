// The axes of a parallel-coordinates view of a search: one per searched parameter (its
// range from the policy: a wide positive range on a log scale, a discrete one by its
// values) and one for the reward, and where a trial crosses each.

import type { AutoSearch } from "../api/types";
import type { Trial } from "./trials";

export interface Axis {
  name: string;
  kind: "linear" | "log" | "category";
  lo: number;
  hi: number;
  categories: string[];
}

function numeric(values: string[]): boolean {
  return values.length > 0 && values.every((v) => v.trim() !== "" && !Number.isNaN(Number(v)));
}

function rangeAxis(name: string, lo: number, hi: number): Axis {
  if (lo === hi) return { name, kind: "linear", lo: lo - 0.5, hi: hi + 0.5, categories: [] };
  // a range of two decades or more (a learning rate) is read on a log scale
  const kind = lo > 0 && hi / lo >= 100 ? "log" : "linear";
  return { name, kind, lo, hi, categories: [] };
}

function paramAxis(name: string, policy: AutoSearch | null, seen: string[]): Axis {
  const spec = policy?.search_params.find((p) => p.name === name);
  if (spec?.param_type === "discrete") {
    const listed = spec.discrete_values ?? [];
    return { name, kind: "category", lo: 0, hi: 0, categories: [...listed, ...seen.filter((v) => !listed.includes(v))] };
  }
  const lo = Number(spec?.lower_bound);
  const hi = Number(spec?.upper_bound);
  const values = seen.map(Number);
  if (spec && !Number.isNaN(lo) && !Number.isNaN(hi)) return rangeAxis(name, Math.min(lo, ...values), Math.max(hi, ...values));
  // not in the policy: read from the values themselves
  if (numeric(seen)) return rangeAxis(name, Math.min(...values), Math.max(...values));
  return { name, kind: "category", lo: 0, hi: 0, categories: seen };
}

/** The axes, left to right: the parameters in the given order, then the reward. */
export function axesFor(policy: AutoSearch | null, params: string[], reward: string, trials: Trial[]): Axis[] {
  const axes = params.map((p) => paramAxis(p, policy, [...new Set(trials.map((t) => t.params[p]).filter((v) => v !== undefined && v !== ""))]));
  const rewards = trials.map((t) => t.reward).filter((r): r is number => r !== null);
  const rewardAxis = rewards.length ? rangeAxis(reward, Math.min(...rewards), Math.max(...rewards)) : rangeAxis(reward, 0, 1);
  return [...axes, { ...rewardAxis, kind: "linear" }];
}

/** Where `value` lies on `axis`, from 0 (bottom) to 1 (top); null when it has none there. */
export function position(axis: Axis, value: string | number | null | undefined): number | null {
  if (value === null || value === undefined || value === "") return null;
  if (axis.kind === "category") {
    const i = axis.categories.indexOf(String(value));
    if (i < 0) return null;
    return axis.categories.length === 1 ? 0.5 : i / (axis.categories.length - 1);
  }
  const v = Number(value);
  if (Number.isNaN(v)) return null;
  if (axis.kind === "log") return (Math.log(v) - Math.log(axis.lo)) / (Math.log(axis.hi) - Math.log(axis.lo));
  return (v - axis.lo) / (axis.hi - axis.lo);
}

/** A trial's crossing of each axis (null where it has no value: a reward not yet said). */
export function crossings(axes: Axis[], trial: Trial): (number | null)[] {
  return axes.map((axis, i) => position(axis, i === axes.length - 1 ? trial.reward : trial.params[axis.name]));
}

/** The labels an axis shows: its categories, or its two ends. */
export function ticks(axis: Axis): { at: number; label: string }[] {
  if (axis.kind === "category") return axis.categories.map((c) => ({ at: position(axis, c) as number, label: c }));
  return [
    { at: 0, label: short(axis.lo) },
    { at: 1, label: short(axis.hi) },
  ];
}

function short(v: number): string {
  return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)));
}
