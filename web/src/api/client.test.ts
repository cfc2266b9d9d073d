import { afterEach, describe, expect, it, vi } from "vitest";
import { api, ApiError, explain, onLoggedOut, queryString, setToken } from "./client";

afterEach(() => {
  vi.unstubAllGlobals();
  setToken(null);
});

describe("requests", () => {
  it("carry the token and say a refusal in words", async () => {
    setToken("crl_abc");
    const fetch = vi.fn().mockResolvedValue(
      new Response(JSON.stringify({ error_code: "ModelArts.2775", error_msg: "training job 'x' does not exist" }), { status: 404 }),
    );
    vi.stubGlobal("fetch", fetch);
    const err = (await api("/v2/p/training-jobs/x").catch((e) => e)) as ApiError;
    expect(fetch.mock.calls[0][1].headers["X-Auth-Token"]).toBe("crl_abc");
    expect(err).toBeInstanceOf(ApiError);
    expect(err.message).toBe("Training job 'x' does not exist");
  });

  it("log the user out when the server no longer takes the token", async () => {
    const out = vi.fn();
    const stop = onLoggedOut(out);
    vi.stubGlobal("fetch", vi.fn().mockResolvedValue(new Response("{}", { status: 401 })));
    await api("/corral/whoami").catch(() => undefined);
    expect(out).toHaveBeenCalledTimes(1);
    await api("/corral/whoami", { probe: true }).catch(() => undefined);
    expect(out).toHaveBeenCalledTimes(1); // a token being tried is not a log-out
    stop();
  });

  it("say so when the server cannot be reached", async () => {
    vi.stubGlobal("fetch", vi.fn().mockRejectedValue(new TypeError("Failed to fetch")));
    const err = (await api("/corral/info").catch((e) => e)) as ApiError;
    expect(err.message).toMatch(/did not answer/);
  });

  it("build their query from what is set", () => {
    expect(queryString({ a: 1, b: undefined, c: "", d: ["x", "y"], e: false })).toBe("?a=1&d=x&d=y&e=false");
    expect(queryString({})).toBe("");
  });
});

describe("errors in words", () => {
  it("explain what a status means to the person who saw it", () => {
    expect(explain(403, "ModelArts.0403", "needs member")).toBe("Your role in this project does not allow this: needs member");
    expect(explain(404, "ModelArts.2786", "no such project")).toMatch(/not one of its members/);
    expect(explain(500, "ModelArts.0500", "internal error")).toMatch(/failed to answer/);
  });
});
