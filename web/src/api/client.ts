// The one way the console talks to corral: its public REST API, with the user's token in
// X-Auth-Token, and errors turned into sentences.

const TOKEN_KEY = "corral.token";

let token: string | null = readToken();
const loggedOut = new Set<() => void>();

function readToken(): string | null {
  try {
    return localStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function getToken(): string | null {
  return token;
}

export function setToken(value: string | null): void {
  token = value;
  try {
    if (value) localStorage.setItem(TOKEN_KEY, value);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    // private mode: the token lives as long as the page
  }
}

/** Called when the server refuses the token (expired, revoked): the app asks for a new one. */
export function onLoggedOut(fn: () => void): () => void {
  loggedOut.add(fn);
  return () => loggedOut.delete(fn);
}

/** An answer that is not a success, in words a person can act on. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** the server's own words (error_msg), as it sent them */
    readonly detail = "",
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export type Query = Record<string, string | number | boolean | undefined | null | (string | number)[]>;

export function queryString(query: Query | undefined): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === null || value === "") continue;
    if (Array.isArray(value)) value.forEach((v) => params.append(key, String(v)));
    else params.append(key, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

export function headers(json = false, use: string | null = token): Record<string, string> {
  const out: Record<string, string> = {};
  if (use) out["X-Auth-Token"] = use;
  if (json) out["Content-Type"] = "application/json";
  return out;
}

export interface RequestOptions {
  method?: string;
  query?: Query;
  body?: unknown;
  signal?: AbortSignal;
  /** a 401 does not log the user out (the login form trying a token) */
  probe?: boolean;
  /** sent instead of the kept token (the login form trying one) */
  token?: string;
}

/** fetch, answering a network failure with an ApiError that says so */
export async function send(path: string, opts: RequestOptions = {}): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(path + queryString(opts.query), {
      method: opts.method ?? "GET",
      headers: headers(opts.body !== undefined, opts.token ?? token),
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal: opts.signal,
    });
  } catch (err) {
    if (err instanceof DOMException && err.name === "AbortError") throw err;
    throw new ApiError(0, "network", "The corral server did not answer. Is it running, and is this its address?");
  }
  if (!response.ok) throw await errorOf(response, opts.probe ?? false);
  return response;
}

export async function api<T>(path: string, opts: RequestOptions = {}): Promise<T> {
  const response = await send(path, opts);
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

async function errorOf(response: Response, probe: boolean): Promise<ApiError> {
  let code = "";
  let message = "";
  try {
    const body = await response.json();
    code = String(body.error_code ?? "");
    message = String(body.error_msg ?? "");
  } catch {
    // not a corral error body (a proxy's page)
  }
  if (response.status === 401 && !probe) loggedOut.forEach((fn) => fn());
  return new ApiError(response.status, code, explain(response.status, code, message), message);
}

/** What an error means to the person who saw it. */
export function explain(status: number, code: string, message: string): string {
  if (status === 401) return "This token is not valid: it is unknown, expired or revoked. Log in with a valid one.";
  if (status === 403) return `Your role in this project does not allow this${message ? `: ${message}` : "."}`;
  if (code === "ModelArts.2786") return "This project does not exist, or you are not one of its members.";
  if (status === 413) return "What was sent is too large for the server.";
  if (status >= 500) return `The server failed to answer (${code || status}): ${message || "see its log"}.`;
  if (message) return message.charAt(0).toUpperCase() + message.slice(1);
  return `The server answered ${status}${code ? ` (${code})` : ""}.`;
}

export function describe(err: unknown): string {
  if (err instanceof ApiError) return err.message;
  if (err instanceof Error) return err.message;
  return String(err);
}
