// Times as people read them: "3 min ago" on the page, the exact local time on hover.

const UNITS: [number, string][] = [
  [86_400_000, "d"],
  [3_600_000, "h"],
  [60_000, "min"],
  [1_000, "s"],
];

/** "12 s ago", "3 min ago", "in 2 h", "5 d ago"; "just now" within a second. */
export function relative(ms: number, now: number): string {
  const delta = now - ms;
  const abs = Math.abs(delta);
  if (abs < 1000) return "just now";
  for (const [size, unit] of UNITS) {
    if (abs >= size) {
      const n = Math.floor(abs / size);
      return delta >= 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`;
    }
  }
  return "just now";
}

const pad = (n: number, width = 2) => String(n).padStart(width, "0");

/** "2026-03-02 14:05:31 UTC+01:00", in the browser's time zone. */
export function absolute(ms: number): string {
  const d = new Date(ms);
  const offset = -d.getTimezoneOffset();
  const sign = offset >= 0 ? "+" : "-";
  const zone = `UTC${sign}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`;
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${zone}`
  );
}

/** "45 s", "3 min 05 s", "2 h 07 min", "3 d 4 h". */
export function duration(ms: number): string {
  if (!ms || ms < 0) return "0 s";
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${pad(s % 60)} s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h} h ${pad(m % 60)} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** A date input's value (local midnight) as ms since the epoch, or null. */
export function dayStart(value: string): number | null {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return null;
  const [y, mo, d] = value.split("-").map(Number);
  return new Date(y, mo - 1, d).getTime();
}
