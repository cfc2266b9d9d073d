"""Accelerators in the configuration: this machine's counts, the variable that pins a task
to its devices, and flavors that ask for them."""

from __future__ import annotations

import pathlib
from typing import Any

import pydantic
import pytest

from corral import settings
from corral.domain import resources
from corral.services import catalog

TOML = """
[accelerators]
npu = 8

[accelerators.tpu-v4]
count = 4
visible_env = "TPU_VISIBLE_CHIPS"
product_name = "TPU v4"

[[flavors]]
flavor_id = "ascend.2"
cpu = 4
memory_gb = 16
accelerators = {npu = 2}
"""


def test_a_toml_file_names_this_machines_accelerators_and_flavors_asking_for_them(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.toml").write_text(TOML)
    monkeypatch.setenv("CORRAL_CONFIG", str(tmp_path / "config.toml"))
    config = settings.Settings(home=tmp_path)
    local = catalog.local_accelerators(config)
    assert local == (resources.Accelerator("npu", 8),
                     resources.Accelerator("tpu-v4", 4, "TPU v4"))
    node = resources.Node("local", cpu=8, memory_mb=32768, accelerators=local)
    cat = catalog.Catalog.build(config, [node])
    [flavor] = cat.flavors
    assert flavor.resources == resources.Resources(4, 16384, 0, (("npu", 2),))
    assert flavor.flavor_type == "Ascend"
    assert cat.visible_env == {"tpu-v4": "TPU_VISIBLE_CHIPS"}
    assert node.capacity.accel == (("npu", 8), ("tpu-v4", 4))


def test_the_environment_gives_counts_too(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: pathlib.Path) -> None:
    monkeypatch.setenv("CORRAL_ACCELERATORS", '{"npu": 2}')
    config = settings.Settings(home=tmp_path)
    assert catalog.local_accelerators(config) == (resources.Accelerator("npu", 2),)


@pytest.mark.parametrize("bad", [{"accelerators": {"gpu": 2}},
                                 {"accelerators": {"npu": -1}},
                                 {"accelerators": {"npu": {"count": 1, "visible_env": "A B"}}},
                                 {"flavors": [{"flavor_id": "f", "cpu": 1, "memory_gb": 1,
                                               "accelerators": {"npu": 0}}]}])
def test_bad_accelerator_settings_are_refused(bad: dict[str, Any],
                                              tmp_path: pathlib.Path) -> None:
    with pytest.raises(pydantic.ValidationError):
        settings.Settings(home=tmp_path, **bad)
