// Code files loaded when first needed (a view, the DAG's layout engine) can fail to arrive:
// the server is restarting, the network blinked, or the server was upgraded and the files
// this page knows of have new names. A load is tried again a few times before giving up,
// and a load that gave up can be asked for again.

import { lazy, type ComponentType } from "react";

/** how long to wait before each new try, in ms */
export const WAITS = [300, 1_000, 3_000];

/** `load()`, tried again after each of `waits` while it fails. */
export async function retrying<T>(load: () => Promise<T>, waits: number[] = WAITS): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await load();
    } catch (err) {
      if (i >= waits.length) throw err;
      await new Promise((resolve) => setTimeout(resolve, waits[i]));
    }
  }
}

/** Whether `err` says that a code file did not arrive (as Chromium, Firefox, Safari and
 * Vite's preloading word it). */
export function isLoadError(err: unknown): boolean {
  const message = err instanceof Error ? err.message : String(err ?? "");
  return /dynamically imported module|importing a module script failed|unable to preload css|error loading dynamically/i.test(message);
}

/** views whose load gave up, each with the way to make it anew */
const failed = new Set<() => void>();

/** Make every view whose load gave up load again when next shown (the page's "Try
 * again", or another page). */
export function renewFailedViews(): void {
  const renew = [...failed];
  failed.clear();
  renew.forEach((fn) => fn());
}

/** A view whose code is loaded when first shown (React.lazy), each load tried again while
 * it fails. React keeps a lazy component's failure for good, so one whose load gave up is
 * made anew by renewFailedViews: not at once, which would have React load it again and
 * again in place of saying that it failed. */
export function lazyView<P extends object>(load: () => Promise<{ default: ComponentType<P> }>, waits: number[] = WAITS): ComponentType<P> {
  const make = () =>
    lazy(() =>
      retrying(load, waits).catch((err: unknown) => {
        failed.add(() => (current = make()));
        throw err;
      }),
    );
  let current = make();
  function View(props: P) {
    const Current = current;
    return <Current {...props} />;
  }
  return View;
}
