import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { useNavigate } from "react-router";
import { api } from "../../api/client";
import type { Flavor, Job } from "../../api/types";
import { ErrorNote } from "../../components/bits";

/** A new version of the job: its parameters and flavor changed, or resumed from its outputs. */
export function NewVersion({ pid, job, resume, onClose }: { pid: string; job: Job; resume: boolean; onClose: () => void }) {
  const navigate = useNavigate();
  const client = useQueryClient();
  const [params, setParams] = useState<[string, string][]>((job.algorithm.parameters ?? []).map((p) => [p.name, p.value ?? ""]));
  const [flavor, setFlavor] = useState(job.spec.resource.flavor_id);
  const [description, setDescription] = useState("");
  const flavors = useQuery({
    queryKey: ["flavors", pid],
    queryFn: () => api<{ flavors: Flavor[] }>(`/v2/${pid}/training-job-flavors`),
    staleTime: 60_000,
  });
  const create = useMutation({
    mutationFn: () => {
      const before = new Map((job.algorithm.parameters ?? []).map((p) => [p.name, p.value ?? ""]));
      const names = new Set(params.map(([n]) => n));
      return api<Job>(`/v2/${pid}/training-jobs/${job.metadata.id}/versions`, {
        method: "POST",
        body: {
          resume,
          description: description || undefined,
          algorithm: { parameters: params.filter(([n, v]) => n && before.get(n) !== v).map(([name, value]) => ({ name, value })) },
          remove_parameters: [...before.keys()].filter((n) => !names.has(n)),
          spec: flavor !== job.spec.resource.flavor_id ? { resource: { flavor_id: flavor } } : {},
        },
      });
    },
    onSuccess: (made) => {
      client.invalidateQueries({ queryKey: ["jobs", pid] });
      onClose();
      navigate(`/p/${pid}/jobs/${made.metadata.id}`);
    },
  });
  function submit(e: FormEvent) {
    e.preventDefault();
    create.mutate();
  }
  return (
    <form className="panel" onSubmit={submit} aria-label="new version">
      <h3>{resume ? "Resume: a new version from this one's outputs" : "New version"}</h3>
      <div className="params">
        {params.map(([name, value], i) => (
          <div key={i} className="param">
            <input aria-label="parameter name" value={name} onChange={(e) => setParams(params.map((p, j) => (j === i ? [e.target.value, p[1]] : p)))} />
            <input aria-label={`value of ${name}`} value={value} onChange={(e) => setParams(params.map((p, j) => (j === i ? [p[0], e.target.value] : p)))} />
            <button type="button" className="link" onClick={() => setParams(params.filter((_, j) => j !== i))}>
              remove
            </button>
          </div>
        ))}
        <button type="button" className="link" onClick={() => setParams([...params, ["", ""]])}>
          add a parameter
        </button>
      </div>
      <label>
        flavor{" "}
        <select value={flavor} onChange={(e) => setFlavor(e.target.value)} aria-label="flavor">
          {(flavors.data?.flavors ?? [{ flavor_id: flavor, flavor_name: flavor, flavor_type: "" }]).map((f) => (
            <option key={f.flavor_id} value={f.flavor_id}>
              {f.flavor_id}
            </option>
          ))}
        </select>
      </label>
      <label>
        description <input value={description} onChange={(e) => setDescription(e.target.value)} aria-label="description" />
      </label>
      <div className="actions">
        <button type="submit" disabled={create.isPending}>
          Start it
        </button>
        <button type="button" className="link" onClick={onClose}>
          Cancel
        </button>
      </div>
      <ErrorNote error={create.error} />
    </form>
  );
}
