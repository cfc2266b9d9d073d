import { fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, expect, it, vi } from "vitest";
import { getToken, setToken } from "../api/client";
import { json, renderAt } from "../test-utils";
import { Login } from "./Login";

afterEach(() => {
  vi.unstubAllGlobals();
  setToken(null);
});

it("keeps a token the server takes, and says why it refuses one", async () => {
  const fetch = vi.fn(async (_url: string, init: RequestInit) => {
    const token = (init.headers as Record<string, string>)["X-Auth-Token"];
    if (token === "crl_good") return json({ user: "ann", is_admin: false, credential: "token", projects: [{ project_id: "p1", name: "vision", role: "member", created_at: 0 }] });
    return json({ error_code: "ModelArts.2784", error_msg: "the token is unknown, expired or revoked" }, 401);
  });
  vi.stubGlobal("fetch", fetch);
  renderAt(<Login />, "/login?next=/p/p1/jobs/abc", "/login");

  fireEvent.change(screen.getByLabelText("Token"), { target: { value: "crl_bad" } });
  fireEvent.click(screen.getByRole("button", { name: "Log in" }));
  expect(await screen.findByRole("alert")).toHaveTextContent(/unknown, expired or revoked/);
  expect(getToken()).toBeNull();

  fireEvent.change(screen.getByLabelText("Token"), { target: { value: "crl_good" } });
  fireEvent.click(screen.getByRole("button", { name: "Log in" }));
  await waitFor(() => expect(screen.getByText("elsewhere")).toBeInTheDocument()); // on to ?next=
  expect(getToken()).toBe("crl_good");
});
