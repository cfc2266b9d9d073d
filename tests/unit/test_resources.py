"""Flavors detected from a machine, and refusing jobs that could never start."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.domain import errors, resources


def node(
    cpu: int = 2, memory_gb: int = 8, gpus: int = 0, name: str = "local", gpu_gb: int = 16
) -> resources.Node:
    return resources.Node(
        name=name,
        cpu=cpu,
        memory_mb=memory_gb * 1024,
        gpus=tuple(resources.Gpu(i, "NVIDIA A100", gpu_gb * 1024) for i in range(gpus)),
    )


def by_id(flavors: list[resources.Flavor]) -> dict[str, resources.Flavor]:
    return {f.flavor_id: f for f in flavors}


SMALL = node(cpu=2, memory_gb=8)
BIG = node(cpu=16, memory_gb=64, gpus=4)


# --- default flavors ----------------------------------------------------------------------


@pytest.mark.parametrize("machine", [SMALL, BIG], ids=["2-core", "16-core-4-gpu"])
def test_a_one_core_flavor_exists(machine: resources.Node) -> None:
    one = by_id(resources.default_flavors(machine))["corral.cpu.1u"]
    assert (one.cpu, one.gpu, one.flavor_type) == (1.0, 0, "CPU")
    assert one.memory_gb >= 1


@pytest.mark.parametrize("machine", [SMALL, BIG], ids=["2-core", "16-core-4-gpu"])
def test_a_whole_machine_flavor_takes_every_core(machine: resources.Node) -> None:
    full = by_id(resources.default_flavors(machine))["corral.cpu.full"]
    assert full.cpu == machine.cpu
    assert full.max_num == 1
    assert full.gpu == 0


@pytest.mark.parametrize("machine", [SMALL, BIG], ids=["2-core", "16-core-4-gpu"])
def test_no_flavor_is_bigger_than_the_machine(machine: resources.Node) -> None:
    for f in resources.default_flavors(machine):
        assert f.resources.fits_in(machine.capacity), f


def test_a_machine_without_gpus_has_no_gpu_flavor() -> None:
    flavors = resources.default_flavors(SMALL)
    assert [f.flavor_id for f in flavors] == ["corral.cpu.1u", "corral.cpu.full"]
    assert all(f.flavor_type == "CPU" for f in flavors)


def test_the_two_core_machine_runs_two_one_core_jobs() -> None:
    assert by_id(resources.default_flavors(SMALL))["corral.cpu.1u"].max_num == 2


def test_a_gpu_machine_has_flavors_for_one_two_and_all_gpus() -> None:
    flavors = by_id(resources.default_flavors(BIG))
    gpu = {fid: f for fid, f in flavors.items() if f.flavor_type == "GPU"}
    assert sorted(gpu) == ["corral.gpu.1x", "corral.gpu.2x", "corral.gpu.4x"]
    assert [gpu[k].gpu for k in sorted(gpu)] == [1, 2, 4]
    assert [gpu[k].max_num for k in sorted(gpu)] == [4, 2, 1]
    assert gpu["corral.gpu.1x"].gpu_product == "NVIDIA A100"
    assert gpu["corral.gpu.1x"].gpu_memory == "16GB"
    # each GPU comes with its share of the cores
    assert gpu["corral.gpu.1x"].cpu == 4
    assert gpu["corral.gpu.4x"].cpu == 16


def test_cpu_flavors_double_in_cores_up_to_the_machine() -> None:
    cpu = [f for f in resources.default_flavors(BIG) if f.flavor_type == "CPU"]
    assert [f.cpu for f in cpu] == [1, 2, 4, 8, 16]
    assert cpu[-1].flavor_id == "corral.cpu.full"


def test_the_whole_machine_flavor_leaves_some_memory_to_the_system() -> None:
    full = by_id(resources.default_flavors(BIG))["corral.cpu.full"]
    assert 0 < full.memory_gb < 64


def test_a_one_core_machine_still_has_a_one_core_flavor() -> None:
    # "corral.cpu.1u" is the default flavor: a job that names it must run on any machine.
    flavors = by_id(resources.default_flavors(node(cpu=1, memory_gb=4)))
    assert flavors["corral.cpu.1u"].cpu == 1
    assert flavors["corral.cpu.full"].cpu == 1


MACHINES = st.builds(
    node, cpu=st.integers(1, 256), memory_gb=st.integers(1, 2048), gpus=st.integers(0, 8)
)


@settings(max_examples=200, deadline=None)
@given(MACHINES)
def test_every_default_flavor_fits_its_machine_max_num_times(machine: resources.Node) -> None:
    # max_num is how many tasks of the flavor the machine holds at once (node_count's limit).
    for f in resources.default_flavors(machine):
        assert f.resources.fits_in(machine.capacity), f
        assert f.max_num >= 1
        resources.check_fits_somewhere(f.resources, f.max_num, [machine])
        with pytest.raises(errors.NeverFits):
            resources.check_fits_somewhere(f.resources, f.max_num + 1, [machine])


@settings(max_examples=100, deadline=None)
@given(MACHINES)
def test_flavor_ids_are_unique(machine: resources.Node) -> None:
    ids = [f.flavor_id for f in resources.default_flavors(machine)]
    assert len(ids) == len(set(ids))
    assert "corral.cpu.1u" in ids
    assert "corral.cpu.full" in ids


def test_find_flavor_names_the_known_ones_when_it_fails() -> None:
    flavors = resources.default_flavors(SMALL)
    assert resources.find_flavor(flavors, "corral.cpu.full").cpu == 2
    with pytest.raises(errors.BadFlavor) as caught:
        resources.find_flavor(flavors, "modelarts.vm.cpu.8u")
    assert caught.value.error_code == "ModelArts.2763"
    assert "corral.cpu.1u, corral.cpu.full" in caught.value.message


# --- check_fits_somewhere -----------------------------------------------------------------


def test_a_job_that_fits_passes() -> None:
    resources.check_fits_somewhere(resources.Resources(1, 1024), 1, [SMALL])
    resources.check_fits_somewhere(resources.Resources(2, 8 * 1024), 1, [SMALL])
    resources.check_fits_somewhere(resources.Resources(4, 1024, 1), 4, [BIG])


def test_a_task_bigger_than_any_node_never_fits() -> None:
    with pytest.raises(errors.NeverFits) as caught:
        resources.check_fits_somewhere(resources.Resources(4, 1024), 1, [SMALL])
    assert "2 CPU core(s)" in caught.value.message
    assert caught.value.error_code == "ModelArts.2763"


def test_a_task_bigger_than_its_one_node_names_that_node() -> None:
    # (a job pinned by spec.resource.node_name is checked against that node alone)
    with pytest.raises(errors.NeverFits) as caught:
        resources.check_fits_somewhere(resources.Resources(4, 1024), 1, [SMALL],
                                       where="pool 'default'")
    assert caught.value.message.startswith(
        "one task needs 4 CPU, 1.0 GiB memory but node 'local' of pool 'default' has 2 CPU")
    with pytest.raises(errors.NeverFits) as caught:
        resources.check_fits_somewhere(resources.Resources(32, 1024), 1, [SMALL, BIG])
    assert "but the largest node of the cluster has 16 CPU" in caught.value.message


@pytest.mark.parametrize(
    "demand,short",
    [(resources.Resources(1, 16 * 1024), "GiB of memory"),
     (resources.Resources(1, 1024, 1), "1 GPU(s)")],
)
def test_memory_or_gpus_beyond_the_node_never_fit(demand: resources.Resources, short: str) -> None:
    with pytest.raises(errors.NeverFits) as caught:
        resources.check_fits_somewhere(demand, 1, [SMALL])
    assert short in caught.value.message


def test_a_gang_larger_than_the_machine_never_fits() -> None:
    resources.check_fits_somewhere(resources.Resources(1, 1024), 2, [SMALL])
    with pytest.raises(errors.NeverFits) as caught:
        resources.check_fits_somewhere(resources.Resources(1, 1024), 3, [SMALL])
    assert "node_count 3" in caught.value.message
    assert "at most 2" in caught.value.message


def test_a_gang_limited_by_memory_never_fits() -> None:
    with pytest.raises(errors.NeverFits):
        resources.check_fits_somewhere(resources.Resources(1, 5 * 1024), 2, [SMALL])


def test_a_gang_may_spread_over_several_nodes() -> None:
    two = [node(name="a"), node(name="b")]
    resources.check_fits_somewhere(resources.Resources(2, 1024), 2, two)
    with pytest.raises(errors.NeverFits):
        resources.check_fits_somewhere(resources.Resources(2, 1024), 3, two)


def test_a_task_is_not_split_across_nodes() -> None:
    # Two 2-core nodes hold 4 cores, but no single one can run a 3-core task.
    with pytest.raises(errors.NeverFits):
        resources.check_fits_somewhere(resources.Resources(3, 1024), 1,
                                       [node(name="a"), node(name="b")])


def test_no_node_means_nothing_fits() -> None:
    with pytest.raises(errors.NeverFits) as caught:
        resources.check_fits_somewhere(resources.Resources(1, 1024), 1, [])
    assert "no node" in caught.value.message


def test_fractional_cores_add_up_exactly() -> None:
    third = resources.Resources(1 / 3, 0)
    total = third + third + third
    assert total.fits_in(resources.Resources(1.0, 0))
    resources.check_fits_somewhere(third, 6, [SMALL])


def test_describe_reads_like_a_flavor() -> None:
    assert resources.describe(resources.Resources(2, 4096, 1)) == "2 CPU, 4.0 GiB memory, 1 GPU"
    assert resources.describe(resources.Resources(0.5, 1500)) == "0.5 CPU, 1.5 GiB memory"


# --- accelerators other than GPUs, by name ------------------------------------------------


def npu_node(npus: int = 8, name: str = "ascend") -> resources.Node:
    return resources.Node(name=name, cpu=16, memory_mb=64 * 1024, accelerators=(
        resources.Accelerator("npu", npus, "Ascend 910B", "64GB"),))


def test_named_counts_add_subtract_multiply_and_stay_sorted() -> None:
    a = resources.Resources(1, 1024, 0, resources.accels({"tpu-v4": 1, "npu": 2}))
    assert a.accel == (("npu", 2), ("tpu-v4", 1))
    b = resources.Resources(1, 0, 0, resources.accels({"npu": 1}))
    assert (a + b).accel == (("npu", 3), ("tpu-v4", 1))
    assert (a - b).accel == (("npu", 1), ("tpu-v4", 1))
    assert (a - a).accel == ()  # nothing of a kind left: not kept as a zero
    assert a.times(3).accel == (("npu", 6), ("tpu-v4", 3)) and a.times(0).accel == ()
    assert a.count("npu") == 2 and a.count("gpu") == 0
    assert a + b == b + a and hash(a + b) == hash(b + a)  # one form: equal and hashable


def test_named_counts_fit_or_say_what_is_short() -> None:
    need = resources.Resources(1, 1024, 0, resources.accels({"npu": 2}))
    assert need.fits_in(resources.Resources(2, 2048, 0, resources.accels({"npu": 2})))
    assert not need.fits_in(resources.Resources(2, 2048, 0, resources.accels({"npu": 1})))
    assert not need.fits_in(resources.Resources(2, 2048, 4))  # GPUs are not NPUs
    short = need.shortfall(resources.Resources(2, 2048, 0, resources.accels({"npu": 1})))
    assert short == ["1 npu"]
    assert resources.describe(need) == "1 CPU, 1.0 GiB memory, 2 npu"


@pytest.mark.parametrize("name", ["gpu", "CPU", "memory", "9npu", "", "n p u", "x" * 65])
def test_bad_accelerator_names_are_refused(name: str) -> None:
    with pytest.raises(errors.BadParameter, match="accelerator name"):
        resources.accels({name: 1})


def test_named_counts_round_trip_through_the_store_form() -> None:
    a = resources.accels({"npu": 2, "tpu-v4": 1})
    assert resources.parse_accels(resources.accels_json(a)) == a
    assert resources.accels_json(()) is None and resources.parse_accels(None) == ()
    limits = resources.accels({"npu": 0}, keep_zero=True)  # a quota of 0 is a limit
    assert resources.parse_accels(resources.accels_json(limits), keep_zero=True) == limits
    ids = (("npu", (0, 3)),)
    assert resources.parse_device_ids(resources.device_ids_json(ids)) == ids


def test_a_node_with_npus_gets_npu_flavors_that_fit_it() -> None:
    machine = npu_node()
    flavors = by_id(resources.default_flavors(machine))
    assert [f for f in flavors if f.startswith("corral.npu.")] == [
        "corral.npu.1x", "corral.npu.2x", "corral.npu.4x", "corral.npu.8x"]
    two = flavors["corral.npu.2x"]
    assert two.flavor_type == "Ascend" and two.npu == resources.Accelerator(
        "npu", 2, "Ascend 910B", "64GB")
    assert two.resources.count("npu") == 2 and two.max_num == 4
    assert flavors["corral.cpu.1u"].flavor_type == "CPU"
    assert resources.dominant_share(two.resources, machine.capacity) == 0.25


def test_a_job_asking_for_an_accelerator_no_node_has_is_refused_by_name() -> None:
    need = resources.Resources(1, 1024, 0, resources.accels({"npu": 1}))
    resources.check_fits_somewhere(need, 8, [SMALL, npu_node()])
    with pytest.raises(errors.NeverFits) as caught:
        resources.check_fits_somewhere(need, 1, [SMALL, BIG], where="pool 'default'")
    assert caught.value.message == ("one task needs 1 npu but no node of pool 'default' has "
                                    "any npu (it has no accelerators)")
    with pytest.raises(errors.NeverFits, match="holds at most 8 such task"):
        resources.check_fits_somewhere(need, 9, [npu_node()])
    with pytest.raises(errors.NeverFits, match=r"short of 8 npu"):
        sixteen = resources.Resources(1, 1024, 0, resources.accels({"npu": 16}))
        resources.check_fits_somewhere(sixteen, 1, [npu_node()])
