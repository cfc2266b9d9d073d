// Numbers and sizes as people read them.

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = n / 1024;
  let i = 0;
  while (value >= 1024 && i < units.length - 1) {
    value /= 1024;
    i += 1;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[i]}`;
}

export function count(n: number): string {
  return n.toLocaleString("en-US");
}

export function number(n: number | null | undefined): string {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  if (Number.isInteger(n)) return String(n);
  const abs = Math.abs(n);
  return abs !== 0 && (abs < 1e-3 || abs >= 1e6) ? n.toExponential(3) : String(Number(n.toPrecision(4)));
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${count(n)} ${n === 1 ? one : many}`;
}
