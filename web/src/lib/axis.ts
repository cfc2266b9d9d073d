// A chart's value axis: labels a reader can take in ("1.5 GB", not "1536.0000001 MB"), and
// an axis as wide as its widest label, so that no label is cut off at the chart's edge.

/** the labels' font, which the width of a label is measured in */
export const FONT = "12px system-ui, sans-serif";
/** room beside a label: uPlot's tick (10 px), its gap (5 px), and a margin */
const BESIDE = 10 + 5 + 6;

/** a tick value without the float noise of its arithmetic (0.30000000000000004) */
export function tidy(v: number): string {
  return String(Number(v.toPrecision(6)));
}

export function labels(ticks: number[], unit: string): string[] {
  return ticks.map((t) => `${tidy(t)}${unit}`);
}

/** The axis's width, in px, for these labels (`measure` says a label's width). */
export function axisSize(shown: (string | null)[] | null | undefined, measure: (text: string) => number): number {
  const widest = Math.max(0, ...(shown ?? []).map((s) => (s ? measure(s) : 0)));
  return Math.max(40, Math.ceil(widest) + BESIDE);
}

let context: CanvasRenderingContext2D | null | undefined;

/** A label's width in the browser's font; an estimate where there is no canvas. */
export function measure(text: string): number {
  if (context === undefined) {
    try {
      context = typeof document === "undefined" ? null : document.createElement("canvas").getContext("2d");
    } catch {
      context = null;
    }
    if (context) context.font = FONT;
  }
  return context ? context.measureText(text).width : text.length * 7.5;
}

/** Memory samples (MB) in the unit they read best in: GB from 1 GB up. */
export function memory(valuesMb: (number | null)[]): { values: (number | null)[]; unit: string } {
  const top = Math.max(0, ...valuesMb.map((v) => v ?? 0));
  if (top < 1024) return { values: valuesMb, unit: " MB" };
  return { values: valuesMb.map((v) => (v === null ? null : v / 1024)), unit: " GB" };
}
