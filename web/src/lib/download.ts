import { send, type Query } from "../api/client";

/** Fetch a file with the token (a plain link cannot send it) and hand it to the browser. */
export async function download(path: string, fallbackName: string, query?: Query): Promise<void> {
  const response = await send(path, { query });
  const disposition = response.headers.get("Content-Disposition") ?? "";
  const name = /filename="?([^";]+)"?/.exec(disposition)?.[1] ?? fallbackName;
  const url = URL.createObjectURL(await response.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
