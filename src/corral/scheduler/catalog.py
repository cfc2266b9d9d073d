"""What can be asked for: the nodes, the flavors and the engines, from settings and executor.

Flavors come from configuration when it names any, otherwise from what the machine has.
"""

from __future__ import annotations

import dataclasses

from corral import settings as settings_mod
from corral.domain import errors, resources
from corral.domain import specs as specs_mod


@dataclasses.dataclass(frozen=True)
class Catalog:
    nodes: tuple[resources.Node, ...]
    flavors: tuple[resources.Flavor, ...]
    engines: tuple[settings_mod.EngineConfig, ...]
    default_flavor: str

    @classmethod
    def build(cls, settings: settings_mod.Settings,
              nodes: list[resources.Node]) -> Catalog:
        if settings.flavors:
            arch = nodes[0].arch if nodes else "x86_64"
            flavors = [resources.Flavor(
                flavor_id=f.flavor_id, flavor_name=f.flavor_name or f.flavor_id, cpu=f.cpu,
                memory_gb=f.memory_gb, gpu=f.gpu, max_num=f.max_num, arch=arch,
                gpu_product=nodes[0].gpus[0].name if f.gpu and nodes and nodes[0].gpus else "",
            ) for f in settings.flavors]
        else:
            flavors = resources.cluster_flavors(nodes)
        default = settings.default_flavor
        if flavors and default not in {f.flavor_id for f in flavors}:
            default = flavors[0].flavor_id
        return cls(nodes=tuple(nodes), flavors=tuple(flavors),
                   engines=tuple(settings.all_engines()), default_flavor=default)

    def flavor(self, flavor_id: str | None) -> resources.Flavor:
        return resources.find_flavor(self.flavors, flavor_id or self.default_flavor)

    def engine(self, want: specs_mod.Engine | None) -> settings_mod.EngineConfig:
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
