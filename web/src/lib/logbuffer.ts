// The part of a log the console holds: whole lines with the byte offset each starts at,
// grown at either end by windows the server sends, and never more than a cap of lines
// (a log of a gigabyte is read a window at a time, as its reader scrolls).

export interface LogState {
  lines: string[];
  /** the byte offset each line starts at */
  offsets: number[];
  /** bytes [start, end) of the log are held */
  start: number;
  end: number;
  /** the last line has no line break yet (it is still being written) */
  open: boolean;
}

export const EMPTY: LogState = { lines: [], offsets: [], start: 0, end: 0, open: false };
export const MAX_LINES = 50_000;

/** The UTF-8 length of a string (offsets are bytes; the text is decoded). */
export function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      n += 4;
      i += 1;
    } else n += 3;
  }
  return n;
}

function split(offset: number, content: string): { lines: string[]; offsets: number[]; open: boolean } {
  const parts = content.split("\n");
  const open = parts[parts.length - 1] !== "";
  if (!open) parts.pop();
  const offsets: number[] = [];
  let at = offset;
  for (const line of parts) {
    offsets.push(at);
    at += utf8Length(line) + 1;
  }
  return { lines: parts, offsets, open };
}

/** A state holding exactly one window. */
export function fromWindow(offset: number, content: string): LogState {
  const { lines, offsets, open } = split(offset, content);
  return { lines, offsets, start: offset, end: offset + utf8Length(content), open };
}

/** `content`, which starts at byte `offset`, added at the end. A window that does not
 * follow on from what is held replaces it. Beyond `cap` lines, the oldest are dropped. */
export function append(s: LogState, offset: number, content: string, cap = MAX_LINES): LogState {
  if (offset !== s.end || !s.lines.length) return trimStart(fromWindow(offset, content), cap);
  if (!content) return s;
  const add = split(offset, content);
  let lines = s.lines;
  let offsets = s.offsets;
  if (s.open) {
    // the unfinished last line goes on
    lines = lines.slice(0, -1).concat(lines[lines.length - 1] + add.lines[0], add.lines.slice(1));
    offsets = offsets.concat(add.offsets.slice(1));
  } else {
    lines = lines.concat(add.lines);
    offsets = offsets.concat(add.offsets);
  }
  return trimStart({ lines, offsets, start: s.start, end: offset + utf8Length(content), open: add.open }, cap);
}

/** A window that ends where what is held starts, added before it. Beyond `cap` lines,
 * the newest are dropped (the reader is going back in time). */
export function prepend(s: LogState, offset: number, content: string, cap = MAX_LINES): LogState {
  if (!s.lines.length) return fromWindow(offset, content);
  if (offset + utf8Length(content) !== s.start) return s; // not the window before: ignored
  const add = split(offset, content);
  if (add.open) {
    // a window cut inside a very long line: it joins the first line held
    const lines = add.lines.slice(0, -1).concat(add.lines[add.lines.length - 1] + s.lines[0], s.lines.slice(1));
    const offsets = add.offsets.concat(s.offsets.slice(1));
    return trimEnd({ ...s, lines, offsets, start: offset }, cap);
  }
  return trimEnd({ ...s, lines: add.lines.concat(s.lines), offsets: add.offsets.concat(s.offsets), start: offset }, cap);
}

function trimStart(s: LogState, cap: number): LogState {
  const drop = s.lines.length - cap;
  if (drop <= 0) return s;
  return { ...s, lines: s.lines.slice(drop), offsets: s.offsets.slice(drop), start: s.offsets[drop] };
}

function trimEnd(s: LogState, cap: number): LogState {
  if (s.lines.length <= cap) return s;
  return { ...s, lines: s.lines.slice(0, cap), offsets: s.offsets.slice(0, cap), end: s.offsets[cap], open: false };
}

/** The index of the line holding byte `offset`, or -1 when it is not held. */
export function lineAt(s: LogState, offset: number): number {
  if (offset < s.start || offset >= s.end) return -1;
  let lo = 0;
  let hi = s.offsets.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (s.offsets[mid] <= offset) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
