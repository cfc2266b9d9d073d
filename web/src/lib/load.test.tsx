import { fireEvent, render, screen } from "@testing-library/react";
import { Suspense } from "react";
import { expect, it, vi } from "vitest";
import { PageError } from "../components/PageError";
import { isLoadError, lazyView, retrying } from "./load";

const GONE = () => new TypeError("Failed to fetch dynamically imported module: http://x/console/assets/Queue-abc.js");

it("tries a load again while it fails, and gives up after the last wait", async () => {
  const load = vi.fn().mockRejectedValueOnce(GONE()).mockRejectedValueOnce(GONE()).mockResolvedValue("code");
  expect(await retrying(load, [1, 1])).toBe("code");
  expect(load).toHaveBeenCalledTimes(3);
  const never = vi.fn().mockRejectedValue(GONE());
  await expect(retrying(never, [1, 1])).rejects.toThrow(/dynamically imported module/);
  expect(never).toHaveBeenCalledTimes(3);
});

it("knows a code file that did not arrive, as browsers word it", () => {
  expect(isLoadError(GONE())).toBe(true);
  expect(isLoadError(new TypeError("error loading dynamically imported module"))).toBe(true); // Firefox
  expect(isLoadError(new TypeError("Importing a module script failed."))).toBe(true); // Safari
  expect(isLoadError(new Error("Unable to preload CSS for /console/assets/JobPage.css"))).toBe(true); // Vite
  expect(isLoadError(new TypeError("x is undefined"))).toBe(false);
});

function View() {
  return <h1>the queue</h1>;
}

function shown(load: () => Promise<{ default: typeof View }>) {
  const Lazy = lazyView(load, [1, 1]);
  return render(
    <PageError>
      <Suspense fallback={<p>loading</p>}>
        <Lazy />
      </Suspense>
    </PageError>,
  );
}

it("shows a view whose file arrives on a new try", async () => {
  shown(vi.fn().mockRejectedValueOnce(GONE()).mockResolvedValue({ default: View }));
  expect(await screen.findByRole("heading", { name: "the queue" })).toBeInTheDocument();
});

it("says in words that a view's file did not arrive, offers a reload, and tries again when asked", async () => {
  vi.spyOn(console, "error").mockImplementation(() => {}); // React reports the error it caught
  let up = false;
  const load = vi.fn(async () => {
    if (!up) throw GONE();
    return { default: View };
  });
  shown(load);
  const alert = await screen.findByRole("alert");
  expect(alert).toHaveTextContent("This page's code could not be loaded from the server");
  expect(screen.getByRole("button", { name: "Reload" })).toBeInTheDocument();
  expect(load).toHaveBeenCalledTimes(3);
  up = true; // the server is back
  fireEvent.click(screen.getByRole("button", { name: "Try again" }));
  expect(await screen.findByRole("heading", { name: "the queue" })).toBeInTheDocument();
  vi.restoreAllMocks();
});
