import { describe, expect, it } from "vitest";
import type { Algorithm, Pool } from "../api/types";
import { check, EMPTY, placeErrors, requestBody, roomFor, takes, violation, withAlgorithm, type JobForm } from "./jobform";

const ALG: Algorithm = {
  metadata: { id: "a1", name: "mlp", description: "", user_name: "ann", create_time: 1 },
  job_config: {
    code_dir: "/code",
    boot_file: "train.py",
    parameters: [
      { name: "epochs", value: "3", constraint: { type: "Integer", required: true, valid_type: "Range", valid_range: ["1", "10"] } },
      { name: "opt", value: "adam", constraint: { valid_type: "Enumeration", valid_range: ["adam", "sgd"] } },
    ],
    inputs: [{ name: "data_url", description: "the data" }],
    outputs: [{ name: "train_url" }],
  },
};

const CODE: JobForm = { ...EMPTY, name: "mlp-1", codeDir: "/code", bootFile: "train.py", flavorId: "corral.cpu.1u" };

describe("the request body", () => {
  it("of a code folder: its engine and packages, parameters, channels, retries and run time", () => {
    const body = requestBody({
      ...CODE,
      engineId: "python-3.11",
      requirements: "six\n\n tomli>=2 \n",
      nodeCount: "2",
      params: [{ name: "lr", value: "0.1", fromAlgorithm: false }, { name: "", value: "", fromAlgorithm: false }],
      inputs: [{ name: "data_url", path: " /data ", fromAlgorithm: false }, { name: "", path: "", fromAlgorithm: false }],
      outputs: [{ name: "train_url", path: "/out", fromAlgorithm: false }],
      retries: "2",
      hangRetry: true,
      maxRunTime: "90",
      checkpoint: "train_url",
    });
    expect(body).toEqual({
      kind: "job",
      metadata: { name: "mlp-1", annotations: { "fault-tolerance/job-retry-num": "2", "fault-tolerance/hang-retry": "true" } },
      algorithm: {
        code_dir: "/code",
        boot_file: "train.py",
        engine: { engine_id: "python-3.11", requirements: ["six", "tomli>=2"] },
        parameters: [{ name: "lr", value: "0.1" }],
        inputs: [{ name: "data_url", remote: { obs: { obs_url: "/data" } } }],
        outputs: [{ name: "train_url", remote: { obs: { obs_url: "/out" } } }],
      },
      spec: { resource: { flavor_id: "corral.cpu.1u", node_count: 2, pool_id: undefined }, fault_tolerance: { max_run_time: 5400, checkpoint: "train_url" } },
    });
  });

  it("of an algorithm: its id, its parameters' values and its channels' paths, no code nor engine", () => {
    const form = { ...withAlgorithm({ ...CODE, source: "algorithm" as const, engineId: "x" }, ALG) };
    form.inputs[0].path = "/data";
    const body = requestBody(form) as { algorithm: Record<string, unknown> };
    expect(body.algorithm).toEqual({
      id: "a1",
      parameters: [{ name: "epochs", value: "3" }, { name: "opt", value: "adam" }],
      inputs: [{ name: "data_url", remote: { obs: { obs_url: "/data" } } }],
      outputs: [{ name: "train_url", remote: { obs: { obs_url: "" } } }],
    });
  });
});

describe("an image", () => {
  it("is sent as algorithm.engine.image_url, trimmed", () => {
    const body = requestBody({ ...CODE, imageUrl: " registry.example.com/team/train:1.0 " });
    expect((body.algorithm as Record<string, unknown>).engine).toEqual({ image_url: "registry.example.com/team/train:1.0" });
  });

  it("is the whole environment: given with an engine or packages, the form says so", () => {
    expect(check({ ...CODE, imageUrl: "busybox:1", engineId: "python-3.11" }).image).toMatch(/leave the engine and the packages empty/);
    expect(check({ ...CODE, imageUrl: "busybox:1", requirements: "six" }).image).toMatch(/whole environment/);
    expect(check({ ...CODE, imageUrl: "busybox:1" }).image).toBeUndefined();
  });
});

describe("a dataset input", () => {
  const row = { name: "data_url", path: "", fromAlgorithm: false, kind: "dataset" as const, dataset: "d1", version: "v2" };

  it("is sent as remote.dataset{id, version_id}", () => {
    const body = requestBody({ ...CODE, inputs: [row] }) as { algorithm: { inputs: unknown[] } };
    expect(body.algorithm.inputs).toEqual([{ name: "data_url", remote: { dataset: { id: "d1", version_id: "v2" } } }]);
  });

  it("needs a dataset and a version of it", () => {
    expect(check({ ...CODE, inputs: [row] })).toEqual({});
    expect(check({ ...CODE, inputs: [{ ...row, dataset: "", version: "" }] })).toEqual({ "input:0": "pick a dataset" });
    expect(check({ ...CODE, inputs: [{ ...row, version: "" }] })).toEqual({ "input:0": "pick a version of the dataset" });
  });

  it("is what an algorithm's channel that takes datasets only starts as", () => {
    expect(takes([])).toEqual(["path", "dataset"]);
    expect(takes(["dataset"])).toEqual(["dataset"]);
    expect(takes(["obs", ""])).toEqual(["path"]);
    const alg = { ...ALG, job_config: { ...ALG.job_config, inputs: [{ name: "data_url", remote_constraints: [{ data_type: "dataset" }] }] } };
    const form = withAlgorithm({ ...CODE, source: "algorithm" }, alg);
    expect(form.inputs[0]).toMatchObject({ kind: "dataset", kinds: ["dataset"] });
    expect(check(form)["input:0"]).toBe("pick a dataset");
  });
});

describe("what the form checks before sending", () => {
  it("an algorithm's parameters against their constraints, and its channels' paths", () => {
    const form = withAlgorithm({ ...CODE, source: "algorithm" }, ALG);
    form.params[0].value = "30";
    form.params[1].value = "rmsprop";
    expect(check(form)).toEqual({
      "param:0": "30 is outside [1, 10]",
      "param:1": "'rmsprop' is not one of adam, sgd",
      "input:0": "give its data's path",
      "output:0": "give its path",
    });
    form.params[0].value = "";
    expect(check(form)["param:0"]).toBe("required: give it a value");
  });

  it("the name, the code, the node count, the retries and the run time", () => {
    expect(check(CODE)).toEqual({});
    expect(check({ ...CODE, name: "bad name", codeDir: " ", nodeCount: "0", retries: "101", maxRunTime: "1.5" })).toEqual({
      name: "1-64 letters, digits, '_' or '-'",
      code_dir: "give the folder of the code",
      node_count: "a whole number from 1 to 1024",
      retries: "a whole number from 0 to 100",
      max_run_time: "whole minutes from 1 to 525600 (a year)",
    });
    expect(check({ ...CODE, source: "algorithm" }).algorithm).toBe("pick an algorithm");
  });

  it("a job's own parameters: a name, once", () => {
    const params = [
      { name: "a", value: "1", fromAlgorithm: false },
      { name: "a", value: "2", fromAlgorithm: false },
      { name: "", value: "3", fromAlgorithm: false },
      { name: "b c", value: "", fromAlgorithm: false },
    ];
    expect(check({ ...CODE, params })).toEqual({
      "param:1": "'a' is given twice",
      "param:2": "give the parameter a name",
      "param:3": "a name is 1-128 characters without spaces or '='",
    });
  });

  it("constraints as the server words them", () => {
    expect(violation("1.5", { type: "Integer" })).toBe("'1.5' is not an Integer");
    expect(violation("x", { type: "Float" })).toBe("'x' is not a Float");
    expect(violation("yes", { type: "Boolean" })).toBe("'yes' is not a Boolean (true or false)");
    expect(violation("TRUE", { type: "Boolean" })).toBeNull();
    expect(violation("0.5", { type: "Float", valid_type: "Range", valid_range: ["0", "1"] })).toBeNull();
  });
});

describe("where an error the API answers is shown", () => {
  const form = withAlgorithm({ ...CODE, source: "algorithm" }, ALG);
  const all = () => true;

  it("beside the field its message names", () => {
    const cases: [string, string][] = [
      ["metadata.name: name must be 1-64 letters, digits, '_' or '-'", "name"],
      ["a training job named 'a' already exists", "name"],
      ["algorithm.code_dir '/nonexist' is not a directory", "code_dir"],
      ["algorithm: algorithm.code_dir and algorithm.boot_file go together", "code_dir"],
      ["algorithm.boot_file '/code/nope.py' does not exist", "boot_file"],
      ["engine 'zz' does not exist; known engines: python-3.11", "engine"],
      ["algorithm.engine.requirements: requirement '--index-url x': installer options are not taken", "requirements"],
      ["algorithm.id: algorithm 'nope' does not exist in this project", "algorithm"],
      ["parameter 'opt' of algorithm 'mlp': 'x' is not one of adam, sgd", "param:1"],
      ["algorithm.parameters.0.name: parameter names are 1-128 characters", "param:0"],
      ["input 'data_url' of algorithm 'mlp': give its data", "input:0"],
      ["output 'train_url' of algorithm 'mlp': say where it goes", "output:0"],
      ["input 'data_url': dataset 'nope' does not exist in this project", "input:0"],
      ["node_count 5 x 1 CPU, 11.0 GiB memory can never be placed: pool 'default' holds at most 2", "node_count"],
      ["flavor 'nope' does not exist; known flavors: corral.cpu.1u", "flavor"],
      ["algorithm 'mlp' needs flavor_type in GPU; the job's flavor and node count give CPU", "flavor"],
      ["metadata.annotations: fault-tolerance/job-retry-num must be between 0 and 100", "retries"],
      ["spec.fault_tolerance.checkpoint: 'x' is not an output channel of the job", "checkpoint"],
      ["spec.resource.pool_id 'x' does not exist; known pools: default", "pool"],
      ["engine.image_url needs container_runtime = 'podman' in the server's settings (docs/environments.md#images)", "image"],
      ["algorithm.engine: engine.image_url runs the job in that image: give it without engine.requirements", "image"],
    ];
    for (const [message, key] of cases) expect([message, placeErrors(message, form, all)]).toEqual([message, { [key]: message.replace(/^algorithm: /, "") }]);
  });

  it("at the top when it names no field, or one the page does not show", () => {
    expect(placeErrors("the project's quota is exhausted", form, all)).toEqual({ top: "the project's quota is exhausted" });
    expect(placeErrors("algorithm.code_dir '/x' is not a directory", form, (k) => k !== "code_dir")).toEqual({ top: "algorithm.code_dir '/x' is not a directory" });
    expect(placeErrors("input 'other' of algorithm 'mlp': no such", form, all)).toEqual({ top: "input 'other' of algorithm 'mlp': no such" });
  });

  it("each part of a message that holds several beside its own field", () => {
    const message = "metadata.name: name must be 1-64 letters; spec.resource.node_count: Input should be greater than or equal to 1";
    expect(placeErrors(message, form, all)).toEqual({ name: "metadata.name: name must be 1-64 letters", node_count: "spec.resource.node_count: Input should be greater than or equal to 1" });
  });
});

describe("what is free now", () => {
  const pool = { free: { cpu: 3, memory_gb: 23.5, gpu: 1 } } as Pool;

  it("is how many tasks of the flavor the pool's free resources hold", () => {
    expect(roomFor({ flavor_id: "c", flavor_name: "", flavor_type: "CPU", flavor_info: { cpu: { core_num: 1 }, memory: { size: 11, unit: "GB" } } }, pool)).toBe(2);
    expect(roomFor({ flavor_id: "g", flavor_name: "", flavor_type: "GPU", flavor_info: { cpu: { core_num: 1 }, memory: { size: 1, unit: "GB" }, gpu: { unit_num: 2 } } }, pool)).toBe(0);
    expect(roomFor(undefined, pool)).toBeNull();
  });
});
