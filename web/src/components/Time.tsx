import { useEffect, useState } from "react";
import { absolute, duration, relative } from "../lib/time";

const listeners = new Set<(now: number) => void>();
let timer: ReturnType<typeof setInterval> | null = null;

/** The current time, updated every 5 s for every component that shows one (one timer). */
export function useNow(): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    listeners.add(setNow);
    if (!timer) timer = setInterval(() => listeners.forEach((fn) => fn(Date.now())), 5000);
    return () => {
      listeners.delete(setNow);
      if (!listeners.size && timer) {
        clearInterval(timer);
        timer = null;
      }
    };
  }, []);
  return now;
}

/** "3 min ago", with the exact time on hover. */
export function Time({ ms }: { ms: number | null | undefined }) {
  const now = useNow();
  if (!ms) return <span className="muted">–</span>;
  return (
    <time dateTime={new Date(ms).toISOString()} title={absolute(ms)}>
      {relative(ms, now)}
    </time>
  );
}

/** How long something ran: `ms`, or from `start` to now while it runs. */
export function Duration({ ms, start, running }: { ms: number; start?: number; running?: boolean }) {
  const now = useNow();
  const value = running && start ? now - start : ms;
  return <span title={`${Math.round(value / 1000)} s`}>{duration(value)}</span>;
}
