// A pipeline's DAG, laid out by ELK (layered, left to right) and drawn with React Flow;
// each task's node shows its state, its runs and how long it ran.

import { Background, Handle, Position, ReactFlow, type Edge as FlowEdge, type Node, type NodeProps } from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { useEffect, useMemo, useState } from "react";
import { Link } from "react-router";
import { describe } from "../api/client";
import type { Edge, TaskNode } from "../lib/dag";
import { isLoadError, retrying } from "../lib/load";
import { duration } from "../lib/time";
import { Badge } from "./bits";

const WIDTH = 190;
const HEIGHT = 70;
// ELK is large: it loads with the first graph drawn, not with the page
let elk: Promise<{ layout: (graph: ElkGraph) => Promise<ElkGraph> }> | null = null;
function layoutEngine() {
  // a load that failed (after its retries) is made again when the graph is next drawn
  elk ??= retrying(() => import("elkjs/lib/elk.bundled.js")).then(
    (m) => new m.default(),
    (err: unknown) => {
      elk = null;
      throw err;
    },
  );
  return elk;
}

interface ElkGraph {
  id: string;
  x?: number;
  y?: number;
  width?: number;
  height?: number;
  layoutOptions?: Record<string, string>;
  children?: ElkGraph[];
  edges?: { id: string; sources: string[]; targets: string[] }[];
}

type TaskData = { task: TaskNode; pid: string };

function TaskBox({ data }: NodeProps<Node<TaskData>>) {
  const t = data.task;
  const done = Object.entries(t.runs)
    .map(([state, n]) => `${n} ${state.replace("_", " ")}`)
    .join(", ");
  return (
    <div className={`dag-node state-${t.state}`} data-testid={`dag-node-${t.id}`} data-state={t.state}>
      <Handle type="target" position={Position.Left} />
      <div className="dag-title">
        {t.jobId ? <Link to={`/p/${data.pid}/jobs/${t.jobId}`}>{t.id}</Link> : t.id}
        {t.items > 1 ? <span className="muted"> ×{t.items}</span> : null}
        {t.finally ? <span className="muted"> (finally)</span> : null}
      </div>
      <div>
        <Badge state={t.state} /> <span className="muted small">{t.duration ? duration(t.duration) : ""}</span>
      </div>
      {t.items > 1 ? <div className="muted small">{done}</div> : null}
      <Handle type="source" position={Position.Right} />
    </div>
  );
}

const TYPES = { task: TaskBox };

export function Dag({ nodes, edges, pid }: { nodes: TaskNode[]; edges: Edge[]; pid: string }) {
  const shape = useMemo(() => JSON.stringify([nodes.map((n) => n.id), edges.map((e) => e.id)]), [nodes, edges]);
  const [positions, setPositions] = useState<Record<string, { x: number; y: number }>>({});
  const [failed, setFailed] = useState<unknown>(null);
  const [tries, setTries] = useState(0);
  useEffect(() => {
    let current = true;
    setFailed(null);
    layoutEngine()
      .then((engine) => engine.layout({
        id: "root",
        layoutOptions: {
          "elk.algorithm": "layered",
          "elk.direction": "RIGHT",
          "elk.spacing.nodeNode": "30",
          "elk.layered.spacing.nodeNodeBetweenLayers": "60",
        },
        children: nodes.map((n) => ({ id: n.id, width: WIDTH, height: HEIGHT })),
        edges: edges.map((e) => ({ id: e.id, sources: [e.source], targets: [e.target] })),
      }))
      .then((laid) => {
        if (!current) return;
        const out: Record<string, { x: number; y: number }> = {};
        (laid.children ?? []).forEach((c) => (out[c.id] = { x: c.x ?? 0, y: c.y ?? 0 }));
        setPositions(out);
      })
      .catch((err: unknown) => current && setFailed(err));
    return () => {
      current = false;
    };
  }, [shape, tries]); // laid out again only when the graph's shape changes, not its states
  const flowNodes: Node<TaskData>[] = nodes.map((task) => ({
    id: task.id,
    type: "task",
    position: positions[task.id] ?? { x: 0, y: 0 },
    data: { task, pid },
    draggable: false,
    style: { width: WIDTH },
  }));
  const flowEdges: FlowEdge[] = edges.map((e) => {
    const from = nodes.find((n) => n.id === e.source);
    return { id: e.id, source: e.source, target: e.target, animated: from?.state === "running" };
  });
  const ready = nodes.every((n) => positions[n.id]);
  if (failed)
    return (
      <div className="error" role="alert">
        The graph could not be drawn: {isLoadError(failed) ? "its layout code could not be loaded from the server" : describe(failed)}.{" "}
        <button onClick={() => setTries(tries + 1)}>Try again</button>
      </div>
    );
  return (
    <div className="dag" data-testid="dag" data-ready={ready}>
      {ready ? (
        <ReactFlow nodes={flowNodes} edges={flowEdges} nodeTypes={TYPES} fitView fitViewOptions={{ maxZoom: 1 }} proOptions={{ hideAttribution: true }} nodesConnectable={false}>
          <Background />
        </ReactFlow>
      ) : null}
    </div>
  );
}
