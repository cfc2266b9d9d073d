// Parallel coordinates of a search: an axis per parameter and one for the reward, a line
// per trial through its values, coloured by how good its reward is; the best in bold.
// Drawn as SVG (a few dozen lines: no canvas needed).

import type { AutoSearch } from "../api/types";
import { axesFor, crossings, ticks } from "../lib/parallel";
import type { Trial } from "../lib/trials";

const W = 760;
const H = 240;
const PAD = { top: 28, bottom: 24, side: 60 };

interface Props {
  policy: AutoSearch | null;
  params: string[];
  reward: string;
  trials: Trial[];
  mode: "max" | "min";
  best?: string;
}

/** light grey for the worst reward to the accent blue for the best */
function shade(goodness: number): string {
  const mix = (a: number, b: number) => Math.round(a + (b - a) * goodness);
  return `rgb(${mix(203, 37)}, ${mix(213, 99)}, ${mix(225, 235)})`;
}

export function Parallel({ policy, params, reward, trials, mode, best }: Props) {
  const axes = axesFor(policy, params, reward, trials);
  const xAt = (i: number) => PAD.side + (axes.length === 1 ? 0 : (i * (W - 2 * PAD.side)) / (axes.length - 1));
  const yAt = (p: number) => H - PAD.bottom - p * (H - PAD.top - PAD.bottom);
  const rewardAxis = axes[axes.length - 1];
  // the best trial drawn last, over the others
  const order = [...trials].sort((a, b) => Number(a.id === best) - Number(b.id === best));
  return (
    <svg className="parallel" viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${params.join(", ")} against ${reward}`} data-testid="parallel">
      {order.map((t) => {
        const ys = crossings(axes, t);
        const points = ys.flatMap((y, i) => (y === null ? [] : [`${xAt(i).toFixed(1)},${yAt(y).toFixed(1)}`]));
        if (points.length < 2) return null;
        const r = ys[ys.length - 1];
        const goodness = r === null ? 0 : mode === "max" ? r : 1 - r;
        const isBest = t.id === best;
        return (
          <polyline
            key={t.id}
            data-testid={`pc-trial-${t.id}`}
            className={isBest ? "best" : ""}
            points={points.join(" ")}
            fill="none"
            stroke={isBest ? "#ea580c" : r === null ? "#d1d5db" : shade(goodness)}
            strokeWidth={isBest ? 3 : 1.5}
            strokeDasharray={r === null ? "4 3" : undefined}
          >
            <title>
              {`trial ${t.id} (${t.status}): ${params.map((p) => `${p}=${t.params[p] ?? ""}`).join(" ")} ${reward}=${t.reward ?? "–"}`}
            </title>
          </polyline>
        );
      })}
      {axes.map((axis, i) => (
        <g key={axis.name} className="axis">
          <line x1={xAt(i)} x2={xAt(i)} y1={yAt(0)} y2={yAt(1)} stroke="#6b7280" />
          <text x={xAt(i)} y={14} textAnchor="middle" className="axis-name">
            {axis.name}
            {axis.kind === "log" ? " (log)" : ""}
            {axis === rewardAxis ? ` (${mode})` : ""}
          </text>
          {ticks(axis).map((tick) => (
            <text key={tick.label} x={xAt(i) + 5} y={yAt(tick.at) + 4} className="tick">
              {tick.label}
            </text>
          ))}
        </g>
      ))}
    </svg>
  );
}
