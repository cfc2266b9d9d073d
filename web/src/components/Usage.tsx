import type { Amounts } from "../api/types";
import { number } from "../lib/format";

/** A bar: `used` of `total` (a quota, or a pool's capacity). */
export function Bar({ used, total, label }: { used: number; total: number | null | undefined; label: string }) {
  const share = total ? Math.min(1, used / total) : 0;
  return (
    <div className="bar" title={`${label}: ${number(used)} of ${total ?? "no limit"}`}>
      <div className={`fill ${share >= 1 ? "full" : ""}`} style={{ width: `${share * 100}%` }} />
      <span>
        {label} {number(used)}
        {total !== null && total !== undefined ? ` / ${number(total)}` : ""}
      </span>
    </div>
  );
}

export function AmountBars({ used, total }: { used: Amounts; total?: Partial<Amounts> | null }) {
  return (
    <div className="bars">
      <Bar label="CPU" used={used.cpu} total={total?.cpu} />
      <Bar label="memory GB" used={used.memory_gb} total={total?.memory_gb} />
      {used.gpu || total?.gpu ? <Bar label="GPU" used={used.gpu} total={total?.gpu} /> : null}
      {Object.entries(used.accelerators ?? {}).map(([k, v]) => (
        <Bar key={k} label={k} used={v} total={total?.accelerators?.[k]} />
      ))}
    </div>
  );
}
