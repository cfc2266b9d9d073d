import { fireEvent, screen, waitFor } from "@testing-library/react";
import { useState } from "react";
import { afterEach, expect, it, vi } from "vitest";
import { setToken } from "../../api/client";
import { json, ME, renderAt } from "../../test-utils";
import { BatchActions, type Outcome, type Picked } from "./BatchActions";

afterEach(() => {
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
  setToken(null);
});

const TICKED: Picked[] = [
  { id: "ja", name: "a", phase: "Running" },
  { id: "jb", name: "b", phase: "Pending" },
  { id: "jc", name: "c", phase: "Completed" },
];

/** the buttons as the list has them: what is ticked, and what came of the last action */
function Ticked() {
  const [picked, setPicked] = useState(TICKED);
  const [outcome, setOutcome] = useState<Outcome | null>(null);
  return (
    <>
      <BatchActions
        pid="p1"
        picked={picked}
        onDone={(o, deleted) => {
          setOutcome(o);
          setPicked((p) => p.filter((x) => !deleted.includes(x.id)));
        }}
      />
      {outcome ? <output data-testid="outcome">{[outcome.done, ...outcome.failed].join(" | ")}</output> : null}
    </>
  );
}

function server(calls: string[], refuse = "") {
  setToken("crl_x");
  return vi.fn(async (url: string, init?: RequestInit) => {
    if (url.startsWith("/corral/whoami")) return json(ME);
    calls.push(`${init?.method ?? "GET"} ${url} ${init?.body ?? ""}`);
    if (refuse && url.includes(refuse)) return json({ error_code: "ModelArts.0403", error_msg: "job 'b' belongs to bob" }, 403);
    return json({}, 202);
  });
}

it("stops the ticked jobs that run or wait, after one question naming how many", async () => {
  const calls: string[] = [];
  vi.stubGlobal("fetch", server(calls));
  const confirm = vi.spyOn(window, "confirm").mockReturnValue(false);
  renderAt(<Ticked />);
  fireEvent.click(await screen.findByRole("button", { name: "Stop 2 jobs" }));
  expect(confirm).toHaveBeenCalledTimes(1);
  expect(confirm.mock.calls[0][0]).toMatch(/^Stop 2 jobs\? .*\(1 ticked job ended already and is left as it is\.\)$/);
  expect(calls).toEqual([]);
  confirm.mockReturnValue(true);
  fireEvent.click(screen.getByRole("button", { name: "Stop 2 jobs" }));
  expect(await screen.findByTestId("outcome")).toHaveTextContent("Stopped 2 of 2 jobs.");
  expect(confirm).toHaveBeenCalledTimes(2);
  expect(calls.sort()).toEqual([
    'POST /v2/p1/training-jobs/ja/actions {"action_type":"terminate"}',
    'POST /v2/p1/training-jobs/jb/actions {"action_type":"terminate"}',
  ]);
});

it("deletes the ticked jobs, says which it could not and why, and keeps those ticked", async () => {
  const calls: string[] = [];
  vi.stubGlobal("fetch", server(calls, "/jb"));
  const confirm = vi.spyOn(window, "confirm").mockReturnValue(true);
  renderAt(<Ticked />);
  fireEvent.click(await screen.findByRole("button", { name: "Delete 3 jobs" }));
  expect(confirm.mock.calls[0][0]).toMatch(/^Delete 3 jobs and their logs\?/);
  await waitFor(() => expect(screen.getByTestId("outcome")).toHaveTextContent("Deleted 2 of 3 jobs. | b: Your role in this project does not allow this: job 'b' belongs to bob"));
  expect(calls.filter((c) => c.startsWith("DELETE"))).toHaveLength(3);
  expect(screen.getByRole("button", { name: "Delete 1 job" })).toBeInTheDocument();
});

it("offers no Stop when none of the ticked jobs runs or waits", async () => {
  vi.stubGlobal("fetch", server([]));
  renderAt(<BatchActions pid="p1" picked={[TICKED[2]]} onDone={() => {}} />);
  expect(await screen.findByRole("button", { name: "Stop" })).toBeDisabled();
  expect(screen.getByRole("button", { name: "Delete 1 job" })).toBeEnabled();
});
