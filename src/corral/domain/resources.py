"""Resources, flavors and nodes: what a job asks for and what a machine can give.

Pure arithmetic; detecting the machine happens in the executors.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from corral.domain import errors, values

#: other accelerators as named counts, e.g. (("npu", 8), ("tpu-v4", 4)): sorted by name
Accels = tuple[tuple[str, int], ...]
#: an accelerator's name: what jobs, quotas and Ray custom resources call it
ACCEL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
#: names that mean something else (Ray's own resources among them)
RESERVED_NAMES = frozenset({"cpu", "gpu", "memory", "object_store_memory"})


@values.value
class Resources:
    """An amount of CPU (cores, may be fractional), memory (MiB), GPUs and other
    accelerators by name (`accel`: sorted, without zero counts; see `accels`)."""

    cpu: float = 0.0
    memory_mb: int = 0
    gpu: int = 0
    accel: Accels = ()

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.memory_mb + other.memory_mb,
                         self.gpu + other.gpu,
                         _merge(self.accel, other.accel, 1) if other.accel else self.accel)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu - other.cpu, self.memory_mb - other.memory_mb,
                         self.gpu - other.gpu,
                         _merge(self.accel, other.accel, -1) if other.accel else self.accel)

    def times(self, n: int) -> Resources:
        return Resources(self.cpu * n, self.memory_mb * n, self.gpu * n,
                         tuple((k, v * n) for k, v in self.accel) if n else ())

    def count(self, name: str) -> int:
        """How many of the accelerator `name` (0 when none)."""
        for k, v in self.accel:
            if k == name:
                return v
        return 0

    def fits_in(self, free: Resources) -> bool:
        # A tiny epsilon keeps float sums of fractional cores from refusing an exact fit.
        return (self.cpu <= free.cpu + 1e-9 and self.memory_mb <= free.memory_mb
                and self.gpu <= free.gpu
                and (not self.accel or all(v <= free.count(k) for k, v in self.accel)))

    def shortfall(self, free: Resources) -> list[str]:
        """Human words for what is missing, e.g. ['1 CPU core'] (empty when it fits)."""
        out = []
        if self.cpu > free.cpu + 1e-9:
            out.append(f"{self.cpu - free.cpu:g} CPU core(s)")
        if self.memory_mb > free.memory_mb:
            out.append(f"{gib(self.memory_mb - free.memory_mb)} of memory")
        if self.gpu > free.gpu:
            out.append(f"{self.gpu - free.gpu} GPU(s)")
        out += [f"{v - free.count(k)} {k}" for k, v in self.accel if v > free.count(k)]
        return out


ZERO = Resources()


def accels(counts: Mapping[str, int] | Iterable[tuple[str, int]], *,
           keep_zero: bool = False) -> Accels:
    """Named counts in their one form: sorted by name, without zeros (unless `keep_zero`:
    a quota of 0 is a limit, not its absence). Raises BadParameter for a bad name."""
    items = counts.items() if isinstance(counts, Mapping) else counts
    out: dict[str, int] = {}
    for name, n in items:
        check_accel_name(name)
        out[name] = out.get(name, 0) + int(n)
    return tuple(sorted((k, v) for k, v in out.items() if v or keep_zero))


def check_accel_name(name: str) -> str:
    if not ACCEL_NAME.match(name) or name.lower() in RESERVED_NAMES:
        raise errors.BadParameter(
            f"accelerator name '{name}' is not allowed: a letter, then letters, digits, "
            "'_', '.' or '-' (64 at most), and not cpu, gpu or memory")
    return name


def _merge(a: Accels, b: Accels, sign: int) -> Accels:
    total = dict(a)
    for k, v in b:
        total[k] = total.get(k, 0) + sign * v
    return tuple(sorted((k, v) for k, v in total.items() if v))


def dominant_share(r: Resources, total: Resources) -> float:
    """The largest fraction of `total` that `r` takes of any one resource (0 for a total
    without capacity): what fair share compares projects by."""
    share = max(r.cpu / total.cpu if total.cpu else 0.0,
                r.memory_mb / total.memory_mb if total.memory_mb else 0.0,
                r.gpu / total.gpu if total.gpu else 0.0)
    for k, v in r.accel:
        cap = total.count(k)
        if cap:
            share = max(share, v / cap)
    return share


def accels_json(a: Accels) -> str | None:
    """How the store keeps named counts (None for none)."""
    return json.dumps(dict(a), sort_keys=True) if a else None


@functools.lru_cache(maxsize=1024)
def parse_accels(text: str | None, *, keep_zero: bool = False) -> Accels:
    """`accels_json` read back (a long queue holds the same few texts thousands of times)."""
    return accels(json.loads(text), keep_zero=keep_zero) if text else ()


#: device ids per accelerator, e.g. (("npu", (0, 1)),): what one task was given
DeviceIds = tuple[tuple[str, tuple[int, ...]], ...]


def device_ids_json(ids: DeviceIds) -> str | None:
    return json.dumps({k: list(v) for k, v in ids}, sort_keys=True) if ids else None


@functools.lru_cache(maxsize=1024)
def parse_device_ids(text: str | None) -> DeviceIds:
    if not text:
        return ()
    return tuple(sorted((k, tuple(int(i) for i in v)) for k, v in json.loads(text).items()))


@dataclasses.dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    memory_mb: int


@dataclasses.dataclass(frozen=True)
class Accelerator:
    """Devices of one kind other than GPUs (`npu`, `tpu-v4`), asked for by name: `count`
    of them on a node (numbered 0 .. count-1 there), or per task in a flavor."""

    name: str
    count: int
    product_name: str = ""
    memory: str = ""  #: each device's memory, as flavors show it ("64GB")


@dataclasses.dataclass(frozen=True)
class Node:
    """A machine that runs tasks, with its total capacity."""

    name: str
    cpu: int
    memory_mb: int
    gpus: tuple[Gpu, ...] = ()
    arch: str = "x86_64"
    accelerators: tuple[Accelerator, ...] = ()

    @property
    def capacity(self) -> Resources:
        return Resources(float(self.cpu), self.memory_mb, len(self.gpus),
                         accels((a.name, a.count) for a in self.accelerators))


@dataclasses.dataclass(frozen=True)
class Flavor:
    """A named shape of resources that one task of a job gets."""

    flavor_id: str
    flavor_name: str
    cpu: float
    memory_gb: int
    gpu: int = 0
    gpu_product: str = ""
    gpu_memory: str = ""
    max_num: int = 1
    arch: str = "x86_64"
    #: accelerators per task, by name
    accelerators: tuple[Accelerator, ...] = ()

    @property
    def flavor_type(self) -> str:
        """As ModelArts has it: GPU, Ascend (NPUs), else CPU."""
        if self.gpu:
            return "GPU"
        return "Ascend" if self.npu is not None else "CPU"

    @property
    def npu(self) -> Accelerator | None:
        """Its NPUs (the accelerator named npu), which ModelArts shows in a field of their
        own."""
        return next((a for a in self.accelerators if a.name.lower() == "npu"), None)

    @property
    def resources(self) -> Resources:
        return Resources(self.cpu, self.memory_gb * 1024, self.gpu,
                         accels((a.name, a.count) for a in self.accelerators))


def default_flavors(node: Node) -> list[Flavor]:
    """Flavors that make sense on `node`: 1, 2, 4 ... cores, the whole machine, GPUs and
    other accelerators (`corral.npu.1x`, `2x`, ...).

    Every flavor fits the node, and its `max_num` is how many of its tasks the node holds
    at once (the largest node_count it can be given).
    """
    total_gb = max(1, node.memory_mb // 1024)
    # Leave a little memory to the system when the whole machine is handed out.
    whole_gb = max(1, total_gb - max(1, total_gb // 16))
    return [*_cpu_flavors(node, total_gb),
            _sized(node, flavor_id="corral.cpu.full",
                   flavor_name=f"CPU whole machine, {node.cpu} cores", cpu=float(node.cpu),
                   memory_gb=whole_gb),
            *_gpu_flavors(node, whole_gb),
            *(f for a in node.accelerators for f in _accel_flavors(node, a, whole_gb))]


def cluster_flavors(nodes: Sequence[Node]) -> list[Flavor]:
    """The default flavors of every node shape in a cluster, largest node first.

    A flavor id names the same shape on every node (`corral.cpu.2u` is always 2 cores), so
    the first node offering it defines it; its `max_num` counts what all nodes hold at once.
    """
    ordered = sorted(nodes, key=lambda n: (len(n.gpus), sum(a.count for a in n.accelerators),
                                           n.cpu, n.memory_mb), reverse=True)
    out: dict[str, Flavor] = {}
    for node in ordered:
        for f in default_flavors(node):
            out.setdefault(f.flavor_id, f)
    return [dataclasses.replace(f, max_num=max(1, sum(_how_many(f.resources, n.capacity)
                                                      for n in ordered)))
            for f in out.values()]


def _cpu_flavors(node: Node, total_gb: int) -> list[Flavor]:
    per_core_gb = max(1, total_gb // max(1, node.cpu))
    out: list[Flavor] = []
    cores = 1
    # The 1-core flavor exists even on a 1-core machine: it is the default flavor.
    while cores == 1 or cores < node.cpu:
        # Capped: on a machine with more cores than GiB, cores * 1 GiB would not fit.
        mem = min(per_core_gb * cores, total_gb)
        out.append(_sized(node, flavor_id=f"corral.cpu.{cores}u",
                          flavor_name=f"CPU {cores} core{'s' if cores > 1 else ''}, {mem} GiB",
                          cpu=float(cores), memory_gb=mem))
        cores *= 2
    return out


def _gpu_flavors(node: Node, whole_gb: int) -> list[Flavor]:
    n_gpu = len(node.gpus)
    if not n_gpu:
        return []
    product = node.gpus[0].name
    gpu_mem = f"{node.gpus[0].memory_mb // 1024}GB"
    out: list[Flavor] = []
    count = 1
    while count <= n_gpu:
        share = count / n_gpu
        out.append(_sized(
            node, flavor_id=f"corral.gpu.{count}x", flavor_name=f"GPU {count}x {product}",
            cpu=float(max(1, int(node.cpu * share))),
            memory_gb=max(1, int(whole_gb * share)), gpu=count, gpu_product=product,
            gpu_memory=gpu_mem))
        count *= 2
    return out


def _accel_flavors(node: Node, acc: Accelerator, whole_gb: int) -> list[Flavor]:
    """1, 2, 4 ... of the node's `acc`, with a matching share of its cores and memory."""
    out: list[Flavor] = []
    count = 1
    while count <= acc.count:
        share = count / acc.count
        product = f" {acc.product_name}" if acc.product_name else ""
        out.append(_sized(
            node, flavor_id=f"corral.{acc.name}.{count}x",
            flavor_name=f"{acc.name} {count}x{product}",
            cpu=float(max(1, int(node.cpu * share))), memory_gb=max(1, int(whole_gb * share)),
            accelerators=(dataclasses.replace(acc, count=count),)))
        count *= 2
    return out


def _sized(node: Node, **fields: Any) -> Flavor:
    """A flavor on `node` whose max_num says how many of it fit there at once."""
    f = Flavor(arch=node.arch, **fields)
    return dataclasses.replace(f, max_num=max(1, _how_many(f.resources, node.capacity)))


def find_flavor(flavors: Sequence[Flavor], flavor_id: str) -> Flavor:
    for f in flavors:
        if f.flavor_id == flavor_id:
            return f
    known = ", ".join(f.flavor_id for f in flavors)
    raise errors.BadFlavor(f"flavor '{flavor_id}' does not exist; known flavors: {known}")


def check_fits_somewhere(demand: Resources, node_count: int, nodes: Iterable[Node], *,
                         where: str = "the cluster") -> None:
    """Refuse a job that no amount of waiting could start.

    On one node the whole gang must fit on it; with several nodes each task must fit on
    some node and the gang must fit in their sum.
    """
    node_list = list(nodes)
    if not node_list:
        raise errors.NeverFits(f"no node is available to run jobs in {where}")
    for name, n in demand.accel:
        if not any(node.capacity.count(name) for node in node_list):
            kinds = ", ".join(sorted({a.name for node in node_list for a in node.accelerators}))
            raise errors.NeverFits(
                f"one task needs {n} {name} but no node of {where} has any {name} "
                f"({f'its accelerators: {kinds}' if kinds else 'it has no accelerators'})")
    if not any(demand.fits_in(n.capacity) for n in node_list):
        biggest = max(node_list, key=lambda n: (n.cpu, n.memory_mb, len(n.gpus)))
        missing = ", ".join(demand.shortfall(biggest.capacity))
        # (one node: the pool's only one, or the one spec.resource.node_name pins it to)
        which = "the largest node" if len(node_list) > 1 else f"node '{biggest.name}'"
        raise errors.NeverFits(
            f"one task needs {describe(demand)} but {which} of {where} has "
            f"{describe(biggest.capacity)} (short of {missing})")
    per_node = sum(_how_many(demand, n.capacity) for n in node_list)
    if per_node < node_count:
        raise errors.NeverFits(
            f"node_count {node_count} x {describe(demand)} can never be placed: {where} "
            f"holds at most {per_node} such task(s) at once")


def _how_many(demand: Resources, cap: Resources) -> int:
    counts = []
    if demand.cpu > 0:
        counts.append(int(cap.cpu // demand.cpu + 1e-9))
    if demand.memory_mb > 0:
        counts.append(cap.memory_mb // demand.memory_mb)
    if demand.gpu > 0:
        counts.append(cap.gpu // demand.gpu)
    counts += [cap.count(k) // v for k, v in demand.accel if v > 0]
    return min(counts) if counts else 1_000_000


def gib(memory_mb: float) -> str:
    """An amount of memory as corral shows it everywhere: GiB, one decimal."""
    return f"{memory_mb / 1024:.1f} GiB"


def describe(r: Resources) -> str:
    parts = [f"{r.cpu:g} CPU", f"{gib(r.memory_mb)} memory"]
    if r.gpu:
        parts.append(f"{r.gpu} GPU")
    parts += [f"{v} {k}" for k, v in r.accel]
    return ", ".join(parts)
