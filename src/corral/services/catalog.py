"""What can be asked for: the nodes, the pools, the flavors and the engines, from settings
and executor.

Flavors come from configuration when it names any, otherwise from what the machine has.
Pools come from configuration too, each on one executor (this machine or a Ray cluster): a
node is in the first pool of its executor that names it, else in its executor's catch-all
pool: the first pool that names that executor and no nodes, else the default pool when it
runs there.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Mapping

from corral import settings as settings_mod
from corral.domain import errors, resources, scheduling, specs
from corral.storage import runs


@dataclasses.dataclass(frozen=True)
class Catalog:
    nodes: tuple[resources.Node, ...]
    flavors: tuple[resources.Flavor, ...]
    engines: tuple[settings_mod.EngineConfig, ...]
    default_flavor: str
    #: node name -> its pool
    pool_of: dict[str, str] = dataclasses.field(default_factory=dict)
    default_pool: str = "default"
    #: every pool, configured or default, in a stable order (empty ones too)
    pool_ids: tuple[str, ...] = ("default",)
    #: accelerator name -> the variable that pins a task to its devices, where configured
    visible_env: dict[str, str] = dataclasses.field(default_factory=dict)
    #: pool -> the executor key that runs it (settings.LOCAL or "ray:<address>")
    pool_executor: dict[str, str] = dataclasses.field(default_factory=dict)
    #: GB jobs may fill on the run folders' disk: its size less disk_free_floor_gb and
    #: disk_reserve_mb (shared by every task; flavors' `disk`); None: not known
    disk_gb: int | None = None
    #: what runs jobs in their image (`container_runtime`: "podman"; None: nothing), and
    #: the options of every `podman run` (`container_options`)
    container_runtime: str | None = None
    container_options: tuple[str, ...] = ()

    @classmethod
    def build(cls, settings: settings_mod.Settings, nodes: list[resources.Node],
              origin: Mapping[str, str] | None = None) -> Catalog:
        """`origin`: the executor key each node comes from (default: the default pool's)."""
        if settings.flavors:
            arch = nodes[0].arch if nodes else "x86_64"
            flavors = [resources.Flavor(
                flavor_id=f.flavor_id, flavor_name=f.flavor_name or f.flavor_id, cpu=f.cpu,
                memory_gb=f.memory_gb, gpu=f.gpu, max_num=f.max_num, arch=arch,
                gpu_product=nodes[0].gpus[0].name if f.gpu and nodes and nodes[0].gpus else "",
                accelerators=tuple(_accelerator(settings, nodes, name, n)
                                   for name, n in sorted(f.accelerators.items())),
            ) for f in settings.flavors]
        else:
            flavors = resources.cluster_flavors(nodes)
        default = settings.default_flavor
        if flavors and default not in {f.flavor_id for f in flavors}:
            default = flavors[0].flavor_id
        return cls(nodes=tuple(nodes), flavors=tuple(flavors),
                   engines=tuple(settings.all_engines()), default_flavor=default,
                   pool_of=assign_pools(settings, nodes, origin),
                   default_pool=settings.default_pool,
                   pool_ids=tuple(dict.fromkeys(
                       [settings.default_pool, *(p.pool_id for p in settings.pools)])),
                   visible_env={k: a.visible_env for k, a in settings.accelerators.items()
                                if a.visible_env},
                   pool_executor=settings.pool_executors(),
                   disk_gb=runs.room_gb(settings.runs_dir, int(
                       settings.disk_free_floor_gb * 2**30) + (settings.disk_reserve_mb << 20)),
                   container_runtime=settings.container_runtime,
                   container_options=tuple(settings.container_options))

    def pool_nodes(self, pool_id: str) -> list[resources.Node]:
        return [n for n in self.nodes if self.pool_of.get(n.name, self.default_pool) == pool_id]

    def executor_of(self, pool_id: str) -> dict[str, str | None]:
        """What runs a pool, as the API shows it: "local", or "ray" and the cluster's
        address (without any user or password a URL may carry)."""
        address = settings_mod.ray_address_of(self.pool_executor.get(pool_id, settings_mod.LOCAL))
        if address is None:
            return {"executor": settings_mod.LOCAL, "address": None}
        return {"executor": "ray", "address": settings_mod.public_address(address)}

    def pool(self, pool_id: str | None) -> str:
        """The pool a job asks for (the default pool when it names none), or BadParameter."""
        pool = pool_id or self.default_pool
        if pool not in self.pool_ids:
            raise errors.BadParameter(
                f"spec.resource.pool_id '{pool}' does not exist; known pools: "
                f"{', '.join(self.pool_ids)}")
        return pool

    def node(self, name: str) -> resources.Node | None:
        return next((n for n in self.nodes if n.name == name), None)

    def scheduling_nodes(self) -> list[scheduling.Node]:
        return [scheduling.Node(n.name, self.pool_of.get(n.name, self.default_pool), n.capacity,
                                tuple(g.index for g in n.gpus),
                                n.gpus[0].name if n.gpus else "")
                for n in self.nodes]

    def flavor(self, flavor_id: str | None) -> resources.Flavor:
        return resources.find_flavor(self.flavors, flavor_id or self.default_flavor)

    def engine(self, want: specs.Engine | None) -> settings_mod.EngineConfig:
        if want is None or not (want.engine_id or want.engine_name or want.engine_version):
            return self.engines[0]
        for e in self.engines:
            if want.engine_id and want.engine_id == e.engine_id:
                return e
            if not want.engine_id and want.engine_name == e.engine_name and (
                    not want.engine_version or want.engine_version == e.engine_version):
                return e
        known = ", ".join(e.engine_id for e in self.engines)
        asked = want.engine_id or f"{want.engine_name} {want.engine_version or ''}".strip()
        raise errors.BadEngine(f"engine '{asked}' does not exist; known engines: {known}")


def _accelerator(settings: settings_mod.Settings, nodes: list[resources.Node], name: str,
                 count: int) -> resources.Accelerator:
    """A configured flavor's accelerator, described as the nodes (else the settings) do."""
    known = next((a for n in nodes for a in n.accelerators if a.name == name), None)
    conf = settings.accelerators.get(name)
    return resources.Accelerator(
        name, count, (known and known.product_name) or (conf.product_name if conf else ""),
        (known and known.memory) or (conf.memory if conf else ""))


def local_accelerators(settings: settings_mod.Settings) -> tuple[resources.Accelerator, ...]:
    """This machine's accelerators, as configured (they cannot be detected here)."""
    return tuple(resources.Accelerator(name, a.count, a.product_name, a.memory)
                 for name, a in sorted(settings.accelerators.items()) if a.count)


def assign_pools(settings: settings_mod.Settings, nodes: list[resources.Node],
                 origin: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each node's pool: the first pool on its executor naming it, else that executor's
    catch-all pool; "" (no pool: it runs nothing) when its executor has none."""
    on = settings.pool_executors()
    default_key = on[settings.default_pool]
    rest: dict[str, str] = {}
    for key in set(on.values()):
        rest[key] = next((p.pool_id for p in settings.pools
                          if p.executor_key == key and not p.nodes),
                         settings.default_pool if key == default_key else "")
    out = {}
    for n in nodes:
        key = (origin or {}).get(n.name, default_key)
        out[n.name] = next((p.pool_id for p in settings.pools if on[p.pool_id] == key
                            and any(fnmatch.fnmatchcase(n.name, pat) for pat in p.nodes)),
                           rest.get(key, ""))
    return out
