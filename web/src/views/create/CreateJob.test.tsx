import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, expect, it, vi } from "vitest";
import { setToken } from "../../api/client";
import { json, ME, renderAt, Where } from "../../test-utils";
import CreateJob from "./CreateJob";

afterEach(() => {
  vi.unstubAllGlobals();
  setToken(null);
});

const ALGORITHM = {
  metadata: { id: "a1", name: "mlp-spirals", description: "a two-layer MLP", user_name: "ann", create_time: 1 },
  job_config: {
    code_dir: "/code/mlp",
    boot_file: "train.py",
    parameters: [
      { name: "epochs", value: "120", description: "passes over the data", constraint: { type: "Integer", required: true, valid_type: "Range", valid_range: ["1", "2000"] } },
      { name: "hidden", value: "64", constraint: { type: "Integer", valid_type: "Enumeration", valid_range: ["16", "32", "64"] } },
    ],
    inputs: [],
    outputs: [{ name: "train_url", description: "model.npz" }],
    engine: { engine_id: "python-3.11", requirements: ["numpy"] },
    parameters_customization: false,
  },
  resource_requirements: [{ key: "flavor_type", value: ["CPU"] }],
};
const FLAVORS = [
  { flavor_id: "corral.cpu.1u", flavor_name: "1 core", flavor_type: "CPU", max_num: 2, flavor_info: { cpu: { core_num: 1 }, memory: { size: 4, unit: "GB" } } },
  { flavor_id: "corral.cpu.big", flavor_name: "4 cores", flavor_type: "CPU", max_num: 1, flavor_info: { cpu: { core_num: 4 }, memory: { size: 8, unit: "GB" } } },
];
const POOL = { pool_id: "default", nodes: [], capacity: { cpu: 4, memory_gb: 16, gpu: 0 }, used: { cpu: 1, memory_gb: 4, gpu: 0 }, free: { cpu: 3, memory_gb: 12, gpu: 0 }, pending_jobs: 0, projects: [] };

const VERSION = (n: number, samples: number) => ({ version_id: `v${n}`, version_name: `V000${n}`, dataset_id: "d1", number_of_samples: samples, create_time: n, description: "" });

function server(posted: unknown[], answer: () => Response) {
  setToken("crl_x");
  return vi.fn(async (url: string, init?: RequestInit) => {
    if (init?.method === "POST") {
      posted.push(JSON.parse(String(init.body)));
      return answer();
    }
    if (url.startsWith("/corral/whoami")) return json(ME);
    if (url.startsWith("/v2/p1/algorithms")) return json({ total: 1, count: 1, items: [ALGORITHM] });
    if (url.startsWith("/v2/p1/training-job-engines")) return json({ total: 1, items: [{ engine_id: "python-3.11", engine_name: "Python", engine_version: "3.11.7" }] });
    if (url.startsWith("/v2/p1/training-job-flavors")) return json({ total_count: 2, flavors: FLAVORS });
    if (url.startsWith("/v2/p1/training-pools")) return json({ total: 1, pools: [POOL] });
    if (url.startsWith("/v2/p1/datasets/d1/versions")) return json({ total: 2, versions: [VERSION(1, 40), VERSION(2, 55)] });
    if (url.startsWith("/v2/p1/datasets")) return json({ total: 1, datasets: [{ id: "d1", name: "helmets", description: "", number_of_samples: 60 }] });
    return json({});
  });
}

function shown() {
  renderAt(
    <>
      <CreateJob />
      <Where />
    </>,
    "/p/p1/jobs/new",
    "/p/:pid/jobs/*",
  );
}

const preview = () => JSON.parse(screen.getByTestId("preview").textContent!);

it("fills in an algorithm's parameters with their defaults and constraints, and previews the body", async () => {
  vi.stubGlobal("fetch", server([], () => json({})));
  shown();
  fireEvent.click(screen.getByLabelText(/a saved algorithm/));
  await screen.findByRole("option", { name: "mlp-spirals" });
  fireEvent.change(screen.getByRole("combobox", { name: "algorithm" }), { target: { value: "a1" } });
  expect(await screen.findByLabelText("value of epochs")).toHaveValue("120");
  expect(screen.getByText(/passes over the data · Integer, required, 1 to 2000/)).toBeInTheDocument();
  const hidden = screen.getByLabelText("value of hidden");
  expect(within(hidden).getAllByRole("option").map((o) => o.textContent)).toEqual(["16", "32", "64"]);
  expect(screen.queryByRole("button", { name: "add a parameter" })).toBeNull(); // parameters_customization: false
  expect(screen.getByTestId("algorithm-summary")).toHaveTextContent("packages numpy");
  fireEvent.change(screen.getByLabelText("name"), { target: { value: "spirals-1" } });
  fireEvent.change(hidden, { target: { value: "32" } });
  fireEvent.change(screen.getByLabelText("output path train_url"), { target: { value: "/results/s1" } });
  await waitFor(() => expect(preview().spec.resource.flavor_id).toBe("corral.cpu.1u"));
  expect(preview()).toEqual({
    kind: "job",
    metadata: { name: "spirals-1" },
    algorithm: {
      id: "a1",
      parameters: [{ name: "epochs", value: "120" }, { name: "hidden", value: "32" }],
      inputs: [],
      outputs: [{ name: "train_url", remote: { obs: { obs_url: "/results/s1" } } }],
    },
    spec: { resource: { flavor_id: "corral.cpu.1u", node_count: 1 } },
  });
});

it("shows what is free now for each flavor, and warns when the nodes asked for do not fit", async () => {
  vi.stubGlobal("fetch", server([], () => json({})));
  shown();
  const flavor = await screen.findByRole("combobox", { name: "flavor" });
  await waitFor(() => expect(within(flavor).getAllByRole("option").map((o) => o.textContent)).toEqual(["corral.cpu.1u (1 CPU · 4 GB) · 3 free now", "corral.cpu.big (4 CPU · 8 GB) · 0 free now"]));
  expect(screen.getByTestId("free-now")).toHaveTextContent("free now in pool default: 3 CPU · 12 GB · room for 3 tasks of this flavor");
  fireEvent.change(flavor, { target: { value: "corral.cpu.big" } });
  expect(screen.getByTestId("free-now")).toHaveTextContent("room for 0 tasks of this flavor · the job waits in the queue until 1 fit");
});

it("says what it can tell is wrong beside the field, and sends nothing", async () => {
  const posted: unknown[] = [];
  vi.stubGlobal("fetch", server(posted, () => json({})));
  shown();
  fireEvent.change(screen.getByLabelText("name"), { target: { value: "no spaces please" } });
  fireEvent.click(screen.getByRole("button", { name: "Create" }));
  expect(await screen.findByTestId("error-name")).toHaveTextContent("1-64 letters, digits, '_' or '-'");
  expect(screen.getByTestId("error-code_dir")).toHaveTextContent("give the folder of the code");
  expect(screen.getByLabelText("name")).toHaveAttribute("aria-invalid", "true");
  expect(posted).toEqual([]);
  fireEvent.change(screen.getByLabelText("name"), { target: { value: "ok" } }); // an edit clears its field's error
  expect(screen.queryByTestId("error-name")).toBeNull();
});

it("puts the API's refusal beside the field it names, and the rest at the top", async () => {
  const posted: unknown[] = [];
  let answer = json({ error_code: "ModelArts.2788", error_msg: "algorithm.code_dir '/nowhere' is not a directory" }, 400);
  vi.stubGlobal("fetch", server(posted, () => answer));
  shown();
  fireEvent.change(screen.getByLabelText("name"), { target: { value: "mlp-1" } });
  fireEvent.change(screen.getByLabelText("code folder"), { target: { value: "/nowhere" } });
  fireEvent.change(screen.getByLabelText("boot file"), { target: { value: "train.py" } });
  fireEvent.click(screen.getByRole("button", { name: "Create" }));
  expect(await screen.findByTestId("error-code_dir")).toHaveTextContent("algorithm.code_dir '/nowhere' is not a directory");
  expect(screen.queryByTestId("error-top")).toBeNull();
  expect(posted).toHaveLength(1);
  answer = json({ error_code: "ModelArts.0500", error_msg: "database is locked" }, 500);
  fireEvent.click(screen.getByRole("button", { name: "Create" }));
  expect(await screen.findByTestId("error-top")).toHaveTextContent("The server failed to answer (ModelArts.0500): database is locked.");
});

it("goes to the new job's page once it is created", async () => {
  const posted: unknown[] = [];
  vi.stubGlobal("fetch", server(posted, () => json({ metadata: { id: "j42", name: "mlp-1" } }, 201)));
  shown();
  fireEvent.change(screen.getByLabelText("name"), { target: { value: "mlp-1" } });
  fireEvent.change(screen.getByLabelText("code folder"), { target: { value: "/code/mlp" } });
  fireEvent.change(screen.getByLabelText("boot file"), { target: { value: "train.py" } });
  await screen.findByRole("option", { name: "python-3.11 (Python 3.11.7)" });
  fireEvent.change(screen.getByRole("combobox", { name: "engine" }), { target: { value: "python-3.11" } });
  fireEvent.change(screen.getByLabelText("packages"), { target: { value: "numpy\ntomli>=2" } });
  fireEvent.change(screen.getByLabelText("retries"), { target: { value: "2" } });
  await waitFor(() => expect(preview().spec.resource.flavor_id).toBe("corral.cpu.1u"));
  fireEvent.click(screen.getByRole("button", { name: "Create" }));
  await waitFor(() => expect(screen.getByTestId("where")).toHaveTextContent("/p/p1/jobs/j42"));
  expect(posted).toEqual([
    {
      kind: "job",
      metadata: { name: "mlp-1", annotations: { "fault-tolerance/job-retry-num": "2" } },
      algorithm: { code_dir: "/code/mlp", boot_file: "train.py", parameters: [], inputs: [], outputs: [], engine: { engine_id: "python-3.11", requirements: ["numpy", "tomli>=2"] } },
      spec: { resource: { flavor_id: "corral.cpu.1u", node_count: 1 } },
    },
  ]);
});

it("gives an input a dataset's version, the latest once the dataset is picked", async () => {
  vi.stubGlobal("fetch", server([], () => json({})));
  shown();
  fireEvent.click(screen.getByRole("button", { name: "add an input" }));
  fireEvent.change(screen.getByLabelText("input name"), { target: { value: "data_url" } });
  fireEvent.change(screen.getByLabelText("what data_url reads"), { target: { value: "dataset" } });
  await screen.findByRole("option", { name: "helmets" });
  fireEvent.change(screen.getByLabelText("dataset of data_url"), { target: { value: "d1" } });
  const version = screen.getByLabelText("version of data_url");
  await waitFor(() => expect(version).toHaveValue("v2"));
  expect(within(version).getAllByRole("option").map((o) => o.textContent)).toEqual(["version", "V0002 · 55 samples", "V0001 · 40 samples"]);
  fireEvent.change(version, { target: { value: "v1" } });
  expect(preview().algorithm.inputs).toEqual([{ name: "data_url", remote: { dataset: { id: "d1", version_id: "v1" } } }]);
});

it("runs the code in an image named in place of the engine, and puts the server's refusal of it beside the field", async () => {
  const posted: unknown[] = [];
  vi.stubGlobal("fetch", server(posted, () => json({ error_code: "ModelArts.2788", error_msg: "engine.image_url needs container_runtime = 'podman' in the server's settings (docs/environments.md#images)" }, 400)));
  shown();
  fireEvent.change(screen.getByLabelText("name"), { target: { value: "in-image" } });
  fireEvent.change(screen.getByLabelText("code folder"), { target: { value: "/code/mlp" } });
  fireEvent.change(screen.getByLabelText("boot file"), { target: { value: "train.py" } });
  fireEvent.change(screen.getByLabelText("image"), { target: { value: "registry.example.com/team/train:1.0" } });
  await waitFor(() => expect(preview().spec.resource.flavor_id).toBe("corral.cpu.1u"));
  expect(preview().algorithm.engine).toEqual({ image_url: "registry.example.com/team/train:1.0" });
  fireEvent.click(screen.getByRole("button", { name: "Create" }));
  expect(await screen.findByTestId("error-image")).toHaveTextContent("needs container_runtime = 'podman'");
  expect(posted).toHaveLength(1);
});
