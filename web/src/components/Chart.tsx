// A line chart of one or more series on a shared x axis (uPlot: fast with long series;
// the server has already cut them to about as many points as the chart has pixels).

import { useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { axisSize, FONT, labels, measure } from "../lib/axis";

export interface Line {
  label: string;
  values: (number | null)[];
  /** drawn dashed (a run stopped before its end) */
  dash?: boolean;
}

const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04"];

interface Props {
  title: string;
  x: number[];
  lines: Line[];
  /** x is a time in ms (else a step) */
  time?: boolean;
  unit?: string;
  height?: number;
}

export function Chart({ title, x, lines, time = false, unit = "", height = 180 }: Props) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = `${time}|${unit}|${lines.map((l) => `${l.label}${l.dash ? "~" : ""}`).join(",")}`;

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height,
      scales: { x: { time } },
      axes: [
        { font: FONT },
        { font: FONT, values: (_u, ticks) => labels(ticks, unit), size: (_u, shown) => axisSize(shown, measure) },
      ],
      series: [{ label: time ? "time" : "step" }, ...lines.map((l, i) => ({ label: l.label, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true, dash: l.dash ? [6, 4] : undefined }))],
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
    };
    plot.current = new uPlot(opts, data(x, lines, time), el);
    const resize = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(200, el.clientWidth), height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [shape, height]); // made again only for other series; new data goes in below

  useEffect(() => {
    plot.current?.setData(data(x, lines, time));
  }, [x, lines, time]);

  return (
    <figure className="chart" data-testid={`chart-${title}`}>
      <figcaption>{title}</figcaption>
      <div ref={box} />
    </figure>
  );
}

function data(x: number[], lines: Line[], time: boolean): uPlot.AlignedData {
  // uPlot's time scale counts seconds
  return [time ? x.map((v) => v / 1000) : x, ...lines.map((l) => l.values)] as uPlot.AlignedData;
}
