import { fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, expect, it, vi } from "vitest";
import { setToken } from "../../api/client";
import { json, ME, renderAt, Where } from "../../test-utils";
import { Jobs } from "./Jobs";

afterEach(() => {
  vi.unstubAllGlobals();
  setToken(null);
});

function server(search: () => Promise<Response>) {
  setToken("crl_x");
  return vi.fn(async (url: string) => {
    if (url.startsWith("/corral/whoami")) return json(ME);
    if (url.includes("/training-pools")) return json({ pools: [] });
    if (url.includes("/training-job-searches")) return search();
    return json({});
  });
}

const NONE = () => Promise.resolve(json({ total: 0, count: 0, limit: 50, offset: 0, items: [] }));

function shown() {
  renderAt(
    <>
      <Jobs />
      <Where />
    </>,
    "/p/p1/jobs",
    "/p/:pid/jobs",
  );
}

it("keeps a phase clicked while the name typed waits to be searched for", async () => {
  vi.stubGlobal("fetch", server(NONE));
  shown();
  fireEvent.change(screen.getByLabelText("search names"), { target: { value: "resnet" } });
  fireEvent.click(screen.getByRole("button", { name: "Failed" })); // before the typing pause ends
  await waitFor(() => expect(screen.getByTestId("where")).toHaveTextContent("name=resnet"));
  expect(screen.getByTestId("where")).toHaveTextContent("phase=Failed");
  expect(screen.getByRole("button", { name: "Failed" })).toHaveAttribute("aria-pressed", "true");
});

it("keeps a sort chosen while the name typed waits, and Clear drops what is typed", async () => {
  vi.stubGlobal("fetch", server(NONE));
  shown();
  fireEvent.change(screen.getByLabelText("search names"), { target: { value: "resnet" } });
  fireEvent.click(screen.getByRole("button", { name: "Name" }));
  await waitFor(() => expect(screen.getByTestId("where")).toHaveTextContent("name=resnet"));
  expect(screen.getByTestId("where")).toHaveTextContent("sort=name");
  fireEvent.change(screen.getByLabelText("search names"), { target: { value: "vgg" } });
  fireEvent.click(screen.getByRole("button", { name: "Clear" }));
  await new Promise((resolve) => setTimeout(resolve, 400)); // past the typing pause
  expect(screen.getByTestId("where")).toHaveTextContent(/^\/p\/p1\/jobs$/);
  expect(screen.getByLabelText("search names")).toHaveValue("");
});

it("says the jobs are loading while the first page has not come", async () => {
  vi.stubGlobal("fetch", server(() => new Promise(() => {})));
  shown();
  expect(await screen.findByText("Loading the jobs…")).toBeInTheDocument();
});
