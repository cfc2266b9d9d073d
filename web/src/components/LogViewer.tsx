// A task's log: its end shown at once and followed as it grows (a stream), earlier lines
// read a window at a time as the reader scrolls up, a search over the whole file on the
// server, a jump to any line found, and a download. Never the whole log at once.

import { useVirtualizer } from "@tanstack/react-virtual";
import { useCallback, useEffect, useLayoutEffect, useRef, useState, type FormEvent } from "react";
import { api } from "../api/client";
import { useEventStream } from "../api/sse";
import type { LogWindow } from "../api/types";
import { download } from "../lib/download";
import { bytes } from "../lib/format";
import { append, EMPTY, fromWindow, lineAt, prepend, type LogState } from "../lib/logbuffer";
import { ErrorNote } from "./bits";

const ROW = 18;
const WINDOW = 256 * 1024;
const TAIL = 64 * 1024;

interface Props {
  pid: string;
  jobId: string;
  task: string;
  /** the attempt to show; undefined: the latest */
  attempt?: number;
  /** the job may still write to this log */
  live: boolean;
  fileName: string;
}

interface Match {
  offset: number;
  line: string;
}

export function LogViewer({ pid, jobId, task, attempt, live, fileName }: Props) {
  const base = `/v2/${pid}/training-jobs/${jobId}/tasks/${task}/logs`;
  const [log, setLog] = useState<LogState>(EMPTY);
  const [size, setSize] = useState(0);
  const [shownAttempt, setShownAttempt] = useState<number | undefined>(attempt);
  // "tail": the end, followed; "browse": somewhere else in the file
  const [mode, setMode] = useState<"tail" | "browse">("tail");
  const [streamKey, setStreamKey] = useState(0);
  const [ended, setEnded] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [highlight, setHighlight] = useState<number | null>(null);
  const [query, setQuery] = useState("");
  const logRef = useRef(log);
  logRef.current = log;
  const scroller = useRef<HTMLDivElement>(null);
  const following = useRef(true);
  const previous = useRef<LogState>(EMPTY);

  const virtual = useVirtualizer({
    count: log.lines.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW,
    overscan: 30,
  });

  useEventStream(
    mode === "tail" ? `${base}/stream` : null,
    `${streamKey}`,
    (event, data) => {
      const d = data as { attempt: number; offset: number; content: string; full_size: number; next_offset: number };
      setShownAttempt(d.attempt);
      if (event === "log") {
        setLog((s) => append(s, d.offset, d.content));
        setSize(d.full_size);
      } else if (event === "end") {
        setEnded(true);
      }
    },
    {
      query: () => {
        const s = logRef.current;
        const att = attempt ?? shownAttempt;
        return s.lines.length ? { offset: s.end, attempt: att } : { tail: TAIL, attempt: att };
      },
      done: (event) => event === "end",
      onError: setError,
    },
  );

  const loading = useRef(false);
  const loadBefore = useCallback(async () => {
    const s = logRef.current;
    if (loading.current || s.start <= 0) return;
    loading.current = true;
    setBusy(true);
    try {
      const w = await api<LogWindow>(`${base}/window`, { query: { end: s.start, max_bytes: WINDOW, attempt: attempt ?? shownAttempt } });
      setLog((cur) => prepend(cur, w.offset, w.content));
      setSize(w.full_size);
    } catch (err) {
      setError(err);
    } finally {
      loading.current = false;
      setBusy(false);
    }
  }, [base, attempt, shownAttempt]);

  const loadAfter = useCallback(async () => {
    const s = logRef.current;
    if (loading.current || mode !== "browse") return;
    loading.current = true;
    setBusy(true);
    try {
      const w = await api<LogWindow>(`${base}/window`, { query: { start: s.end, max_bytes: WINDOW, attempt: attempt ?? shownAttempt } });
      setLog((cur) => append(cur, w.offset, w.content));
      setSize(w.full_size);
      if (w.next_offset >= w.full_size && live) {
        following.current = true;
        setMode("tail"); // caught up: follow from here
      }
    } catch (err) {
      setError(err);
    } finally {
      loading.current = false;
      setBusy(false);
    }
  }, [base, mode, attempt, shownAttempt, live]);

  // Keep what was on screen in place when lines are added above it or dropped from the top;
  // stay at the bottom while following.
  useLayoutEffect(() => {
    const el = scroller.current;
    const before = previous.current;
    previous.current = log;
    if (!el || !log.lines.length) return;
    if (el.scrollHeight <= el.clientHeight && log.start > 0) loadBefore(); // fill the view
    if (mode === "tail" && following.current) {
      el.scrollTop = el.scrollHeight;
      return;
    }
    if (before.lines.length && log.start < before.start) {
      el.scrollTop += Math.max(0, lineAt(log, before.start)) * ROW;
    } else if (before.lines.length && log.start > before.start) {
      el.scrollTop -= Math.max(0, lineAt(before, log.start)) * ROW;
    }
  }, [log, mode, loadBefore]);

  function onScroll() {
    const el = scroller.current;
    if (!el) return;
    const atBottom = el.scrollTop + el.clientHeight >= el.scrollHeight - ROW * 2;
    following.current = atBottom;
    if (el.scrollTop < ROW * 20) loadBefore();
    if (atBottom && mode === "browse" && logRef.current.end < size) loadAfter();
  }

  async function jumpTo(offset: number) {
    setHighlight(offset);
    const held = lineAt(logRef.current, offset);
    if (held >= 0) {
      following.current = false;
      virtual.scrollToIndex(held, { align: "center" });
      return;
    }
    setBusy(true);
    try {
      const att = attempt ?? shownAttempt;
      const [above, below] = await Promise.all([
        api<LogWindow>(`${base}/window`, { query: { end: offset, max_bytes: WINDOW / 2, attempt: att } }),
        api<LogWindow>(`${base}/window`, { query: { start: offset, max_bytes: WINDOW / 2, attempt: att } }),
      ]);
      const s = append(fromWindow(above.offset, above.content), below.offset, below.content);
      following.current = false;
      setMode("browse");
      setLog(s);
      setSize(below.full_size);
      requestAnimationFrame(() => virtual.scrollToIndex(Math.max(0, lineAt(s, offset)), { align: "center" }));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  async function toStart() {
    setBusy(true);
    try {
      const w = await api<LogWindow>(`${base}/window`, { query: { start: 0, max_bytes: WINDOW, attempt: attempt ?? shownAttempt } });
      following.current = false;
      setMode("browse");
      setLog(fromWindow(w.offset, w.content));
      setSize(w.full_size);
      requestAnimationFrame(() => {
        if (scroller.current) scroller.current.scrollTop = 0;
      });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  function toEnd() {
    following.current = true;
    setEnded(false);
    setLog(EMPTY);
    setMode("tail");
    setStreamKey((k) => k + 1);
  }

  const items = virtual.getVirtualItems();
  const status = mode === "tail" ? (ended || !live ? "the whole log's end" : "following") : "browsing";
  return (
    <div className="logviewer">
      <div className="log-tools">
        <button onClick={toStart} disabled={busy || log.start === 0}>
          Start
        </button>
        <button onClick={toEnd} disabled={mode === "tail" && following.current}>
          {live ? "Follow" : "End"}
        </button>
        <span className="muted small" data-testid="log-status">
          {log.lines.length ? `bytes ${bytes(log.start)}–${bytes(log.end)} of ${bytes(Math.max(size, log.end))} · ${status}` : ended ? "empty log" : "waiting for output…"}
          {busy ? " · loading…" : ""}
        </span>
        <span className="spacer" />
        <Download base={base} attempt={attempt ?? shownAttempt} fileName={fileName} />
      </div>
      <ErrorNote error={error} />
      <LogSearch base={base} attempt={attempt ?? shownAttempt} onQuery={setQuery} onPick={jumpTo} />
      <div className="log" ref={scroller} onScroll={onScroll} data-testid="log">
        <div style={{ height: virtual.getTotalSize(), position: "relative" }}>
          {items.map((item) => (
            <div
              key={item.key}
              className={`line${log.offsets[item.index] === highlight ? " hit" : ""}`}
              style={{ position: "absolute", top: 0, left: 0, minWidth: "100%", height: ROW, transform: `translateY(${item.start}px)` }}
            >
              <Marked text={log.lines[item.index]} query={query} />
            </div>
          ))}
        </div>
      </div>
    </div>
  );
}

function Marked({ text, query }: { text: string; query: string }) {
  if (!query) return <>{text || " "}</>;
  const lower = text.toLowerCase();
  const q = query.toLowerCase();
  const parts = [];
  let at = 0;
  for (let i = lower.indexOf(q); i >= 0; i = lower.indexOf(q, i + q.length)) {
    parts.push(text.slice(at, i), <mark key={i}>{text.slice(i, i + q.length)}</mark>);
    at = i + q.length;
  }
  parts.push(text.slice(at));
  return <>{parts}</>;
}

interface SearchAnswer {
  matches: Match[];
  next_offset: number;
  full_size: number;
  done: boolean;
}

const MAX_MATCHES = 1000;

function LogSearch({ base, attempt, onQuery, onPick }: { base: string; attempt?: number; onQuery: (q: string) => void; onPick: (offset: number) => void }) {
  const [text, setText] = useState("");
  const [found, setFound] = useState<Match[] | null>(null);
  const [progress, setProgress] = useState<{ at: number; size: number; done: boolean } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const run = useRef<AbortController | null>(null);
  useEffect(() => () => run.current?.abort(), []);

  async function search(e: FormEvent) {
    e.preventDefault();
    run.current?.abort();
    const q = text.trim();
    onQuery(q);
    if (!q) {
      setFound(null);
      setProgress(null);
      return;
    }
    const abort = (run.current = new AbortController());
    const matches: Match[] = [];
    setFound([]);
    setError(null);
    let offset = 0;
    try {
      for (;;) {
        const a = await api<SearchAnswer>(`${base}/search`, {
          query: { q, offset, attempt, limit: Math.min(200, MAX_MATCHES - matches.length) },
          signal: abort.signal,
        });
        matches.push(...a.matches);
        offset = a.next_offset;
        setFound([...matches]);
        setProgress({ at: offset, size: a.full_size, done: a.done });
        if (a.done || matches.length >= MAX_MATCHES) break;
      }
    } catch (err) {
      if (!abort.signal.aborted) setError(err);
    }
  }

  return (
    <div className="log-search">
      <form onSubmit={search}>
        <input aria-label="search the log" placeholder="Search the whole log" value={text} onChange={(e) => setText(e.target.value)} />
        <button type="submit">Search</button>
        {progress ? (
          <span className="muted small" data-testid="search-progress">
            {found?.length ?? 0} line(s) found
            {progress.done ? "" : ` · searched ${bytes(progress.at)} of ${bytes(progress.size)}`}
            {found && found.length >= MAX_MATCHES ? ` · showing the first ${MAX_MATCHES}` : ""}
          </span>
        ) : null}
      </form>
      <ErrorNote error={error} />
      {found && found.length ? (
        <ol className="matches">
          {found.map((m) => (
            <li key={m.offset}>
              <button className="link" onClick={() => onPick(m.offset)} title={`byte ${m.offset}`}>
                {m.line}
              </button>
            </li>
          ))}
        </ol>
      ) : null}
    </div>
  );
}

function Download({ base, attempt, fileName }: { base: string; attempt?: number; fileName: string }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  async function save() {
    setBusy(true);
    setError(null);
    try {
      await download(`${base}/download`, fileName, { attempt });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }
  return (
    <>
      <button onClick={save} disabled={busy}>
        {busy ? "Downloading…" : "Download"}
      </button>
      <ErrorNote error={error} />
    </>
  );
}
