// Server-Sent Events read with fetch (EventSource cannot send the token header), and a
// hook that keeps a stream open, connecting again after it ends or breaks.

import { createParser } from "eventsource-parser";
import { useEffect, useRef } from "react";
import { send, type Query } from "./client";

export type Handler = (event: string, data: unknown) => void;

/** Read the stream at `path` until it ends; `onEvent` gets each event's name and JSON. */
export async function readStream(path: string, query: Query, onEvent: Handler, signal: AbortSignal): Promise<void> {
  const response = await send(path, { query, signal });
  if (!response.body) return;
  const parser = createParser({
    onEvent(message) {
      let data: unknown = null;
      try {
        data = JSON.parse(message.data);
      } catch {
        return; // not one of corral's events
      }
      onEvent(message.event ?? "message", data);
    },
  });
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      parser.feed(value);
    }
  } finally {
    reader.releaseLock();
  }
}

export interface StreamOptions {
  /** what to ask for on each (re)connection: lets a log stream go on from where it was */
  query: () => Query;
  /** false: the stream is not needed (the page is hidden, the job ended) */
  enabled?: boolean;
  /** an `end` event or this returning true closes it for good */
  done?: (event: string, data: unknown) => boolean;
  onError?: (err: unknown) => void;
}

/** Keep the stream at `path` open while enabled; `key` changes open a new one. */
export function useEventStream(path: string | null, key: string, onEvent: Handler, opts: StreamOptions): void {
  const handler = useRef(onEvent);
  handler.current = onEvent;
  const options = useRef(opts);
  options.current = opts;
  const enabled = opts.enabled ?? true;
  useEffect(() => {
    if (!path || !enabled) return;
    const abort = new AbortController();
    let finished = false;
    (async () => {
      let failures = 0;
      while (!abort.signal.aborted && !finished) {
        try {
          await readStream(path, options.current.query(), (event, data) => {
            failures = 0;
            if (options.current.done?.(event, data)) finished = true;
            handler.current(event, data);
          }, abort.signal);
        } catch (err) {
          if (abort.signal.aborted) return;
          failures += 1;
          options.current.onError?.(err);
        }
        if (finished || abort.signal.aborted) return;
        // a stream that ends normally is reopened at once; a broken one after a pause
        await sleep(failures ? Math.min(10_000, 500 * 2 ** failures) : 0, abort.signal);
      }
    })();
    return () => abort.abort();
  }, [path, key, enabled]);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (!ms) return resolve();
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
