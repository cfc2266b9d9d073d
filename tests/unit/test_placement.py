"""FIFO gang placement: who starts where, and who waits."""

from __future__ import annotations

import collections
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.domain import placement, resources

R = resources.Resources


def req(
    job_id: str, cpu: float = 1, memory_mb: int = 1024, gpu: int = 0, count: int = 1
) -> placement.Request:
    return placement.Request(job_id, R(cpu, memory_mb, gpu), count)


def free(
    name: str = "local", cpu: float = 2, memory_mb: int = 8192, gpus: Sequence[int] = ()
) -> placement.NodeFree:
    return placement.NodeFree(name, R(cpu, memory_mb, len(gpus)), tuple(gpus))


def placed_ids(result: tuple[list[placement.Assignment], placement.Blocked | None]) -> list[str]:
    return [a.job_id for a in result[0]]


# --- examples -----------------------------------------------------------------------------


def test_jobs_start_in_queue_order_while_they_fit() -> None:
    placed, blocked = placement.place_fifo([req("a"), req("b"), req("c")], [free()])
    assert [a.job_id for a in placed] == ["a", "b"]
    assert blocked is not None
    assert blocked.job_id == "c"


def test_an_empty_queue_places_nothing_and_blocks_nothing() -> None:
    assert placement.place_fifo([], [free()]) == ([], None)


def test_everything_placed_means_nothing_blocked() -> None:
    placed, blocked = placement.place_fifo([req("a"), req("b")], [free()])
    assert [a.job_id for a in placed] == ["a", "b"]
    assert blocked is None


def test_a_big_job_at_the_head_blocks_smaller_ones_behind_it() -> None:
    # One core is free: "small" would fit, but starting it could starve "big" for ever.
    queue = [req("big", cpu=2), req("small", cpu=1)]
    placed, blocked = placement.place_fifo(queue, [free(cpu=1)])
    assert placed == []
    assert blocked is not None
    assert blocked.job_id == "big"


def test_the_waiting_reason_says_what_is_needed_and_what_is_free() -> None:
    _, blocked = placement.place_fifo([req("g", count=3)], [free(cpu=2)])
    assert blocked is not None
    assert blocked.reason == (
        "waiting for resources: needs 3 tasks of 1 CPU, 1 GB memory; "
        "free now local: 2 CPU, 8 GB memory"
    )


def test_a_gang_starts_whole() -> None:
    placed, _ = placement.place_fifo([req("g", count=2)], [free(cpu=2)])
    assert len(placed) == 1
    assert placed[0].slots == (placement.TaskSlot("local", ()), placement.TaskSlot("local", ()))


def test_a_gang_that_does_not_fit_whole_takes_nothing() -> None:
    queue = [req("a"), req("g", count=2), req("b")]
    placed, blocked = placement.place_fifo(queue, [free(cpu=2)])
    assert [a.job_id for a in placed] == ["a"]
    assert blocked is not None
    assert blocked.job_id == "g"


def test_a_gang_may_spread_over_nodes() -> None:
    placed, _ = placement.place_fifo(
        [req("g", cpu=2, count=2)], [free("a", cpu=2), free("b", cpu=2)]
    )
    assert [s.node for s in placed[0].slots] == ["a", "b"]


def test_tasks_fill_the_first_node_that_has_room() -> None:
    placed, _ = placement.place_fifo(
        [req("x"), req("y"), req("z")], [free("a", cpu=2), free("b", cpu=2)]
    )
    assert [a.slots[0].node for a in placed] == ["a", "a", "b"]


def test_memory_counts_as_much_as_cores() -> None:
    placed, blocked = placement.place_fifo(
        [req("a", memory_mb=6000), req("b", memory_mb=6000)], [free(cpu=2, memory_mb=8192)]
    )
    assert [a.job_id for a in placed] == ["a"]
    assert blocked is not None


def test_gpu_ids_are_handed_out_distinct() -> None:
    queue = [req("a", gpu=1), req("b", gpu=2), req("c", gpu=1)]
    placed, blocked = placement.place_fifo(queue, [free(cpu=8, gpus=[0, 1, 2, 3])])
    assert blocked is None
    assert [a.slots[0].gpu_ids for a in placed] == [(0,), (1, 2), (3,)]


def test_only_free_gpu_ids_are_handed_out() -> None:
    placed, blocked = placement.place_fifo(
        [req("a", gpu=1), req("b", gpu=1)], [free(cpu=8, gpus=[1, 3])]
    )
    assert [a.slots[0].gpu_ids for a in placed] == [(1,), (3,)]
    assert blocked is None


def test_a_gpu_job_waits_when_the_gpus_are_taken() -> None:
    placed, blocked = placement.place_fifo(
        [req("a", gpu=1), req("b", gpu=1)], [free(cpu=8, gpus=[2])]
    )
    assert [a.job_id for a in placed] == ["a"]
    assert blocked is not None
    assert "1 GPU" in blocked.reason


def test_gang_tasks_get_different_gpus() -> None:
    placed, _ = placement.place_fifo([req("g", gpu=1, count=2)], [free(cpu=8, gpus=[0, 1])])
    assert [s.gpu_ids for s in placed[0].slots] == [(0,), (1,)]


def test_free_capacity_subtracts_what_is_used_and_busy() -> None:
    gpus = tuple(resources.Gpu(i, "T4", 16384) for i in range(4))
    nodes = [
        resources.Node("local", cpu=8, memory_mb=32768, gpus=gpus),
        resources.Node("idle", cpu=2, memory_mb=4096),
    ]
    out = placement.free_capacity(nodes, {"local": R(3, 4096, 2)}, {"local": {0, 2}})
    assert out == [
        placement.NodeFree("local", R(5, 28672, 2), (1, 3)),
        placement.NodeFree("idle", R(2, 4096, 0), ()),
    ]


# --- properties ---------------------------------------------------------------------------


@st.composite
def nodes_free(draw: st.DrawFn) -> list[placement.NodeFree]:
    count = draw(st.integers(1, 3))
    out = []
    for i in range(count):
        gpus = draw(st.lists(st.integers(0, 7), max_size=8, unique=True))
        cpu = draw(st.sampled_from([0, 0.5, 1, 2, 3, 4, 8, 16]))
        mem = draw(st.integers(0, 64)) * 512
        out.append(free(f"n{i}", cpu=cpu, memory_mb=mem, gpus=gpus))
    return out


@st.composite
def queues(draw: st.DrawFn) -> list[placement.Request]:
    size = draw(st.integers(0, 12))
    return [
        req(
            f"j{i}",
            cpu=draw(st.sampled_from([0.25, 0.5, 1, 2, 4])),
            memory_mb=draw(st.integers(0, 16)) * 512,
            gpu=draw(st.integers(0, 3)),
            count=draw(st.integers(1, 4)),
        )
        for i in range(size)
    ]


PROPS = settings(max_examples=150, deadline=None)


@PROPS
@given(queues(), nodes_free())
def test_no_node_is_ever_over_committed(
    queue: list[placement.Request], nodes: list[placement.NodeFree]
) -> None:
    placed, _ = placement.place_fifo(queue, nodes)
    per_job = {r.job_id: r.per_task for r in queue}
    used: dict[str, resources.Resources] = collections.defaultdict(lambda: resources.ZERO)
    for a in placed:
        for slot in a.slots:
            used[slot.node] = used[slot.node] + per_job[a.job_id]
    for n in nodes:
        assert used[n.name].fits_in(n.free), (n, used[n.name])


@PROPS
@given(queues(), nodes_free())
def test_a_gang_is_never_half_placed(
    queue: list[placement.Request], nodes: list[placement.NodeFree]
) -> None:
    placed, _ = placement.place_fifo(queue, nodes)
    counts = {r.job_id: r.count for r in queue}
    for a in placed:
        assert len(a.slots) == counts[a.job_id]


@PROPS
@given(queues(), nodes_free())
def test_placed_jobs_are_a_prefix_of_the_queue(
    queue: list[placement.Request], nodes: list[placement.NodeFree]
) -> None:
    placed, blocked = placement.place_fifo(queue, nodes)
    ids = [r.job_id for r in queue]
    assert [a.job_id for a in placed] == ids[: len(placed)]
    if len(placed) < len(queue):
        assert blocked is not None
        assert blocked.job_id == ids[len(placed)]
    else:
        assert blocked is None


@PROPS
@given(queues(), nodes_free())
def test_placement_is_deterministic(
    queue: list[placement.Request], nodes: list[placement.NodeFree]
) -> None:
    assert placement.place_fifo(queue, nodes) == placement.place_fifo(list(queue), list(nodes))


@PROPS
@given(queues(), nodes_free())
def test_gpu_ids_are_never_given_twice(
    queue: list[placement.Request], nodes: list[placement.NodeFree]
) -> None:
    placed, _ = placement.place_fifo(queue, nodes)
    per_job = {r.job_id: r.per_task for r in queue}
    free_ids = {n.name: set(n.free_gpus) for n in nodes}
    given_out: dict[str, list[int]] = collections.defaultdict(list)
    for a in placed:
        for slot in a.slots:
            assert len(slot.gpu_ids) == per_job[a.job_id].gpu
            given_out[slot.node].extend(slot.gpu_ids)
    for name, ids in given_out.items():
        assert len(ids) == len(set(ids)), ids
        assert set(ids) <= free_ids[name]


@PROPS
@given(queues(), nodes_free())
def test_the_blocked_job_really_does_not_fit_in_what_is_left(
    queue: list[placement.Request], nodes: list[placement.NodeFree]
) -> None:
    placed, blocked = placement.place_fifo(queue, nodes)
    if blocked is None:
        return
    head = queue[len(placed)]
    room = sum(_how_many_fit(head.per_task, n) for n in _left_after(queue, placed, nodes))
    assert room < head.count


def _how_many_fit(task: resources.Resources, node: placement.NodeFree) -> int:
    left, gpus, n = node.free, len(node.free_gpus), 0
    while n < 64 and task.fits_in(left) and task.gpu <= gpus:
        left, gpus, n = left - task, gpus - task.gpu, n + 1
    return n


def _left_after(
    queue: Sequence[placement.Request],
    placed: Sequence[placement.Assignment],
    nodes: Sequence[placement.NodeFree],
) -> list[placement.NodeFree]:
    per_job = {r.job_id: r.per_task for r in queue}
    left = {n.name: (n.free, set(n.free_gpus)) for n in nodes}
    for a in placed:
        for slot in a.slots:
            f, g = left[slot.node]
            left[slot.node] = (f - per_job[a.job_id], g - set(slot.gpu_ids))
    return [placement.NodeFree(name, f, tuple(sorted(g))) for name, (f, g) in left.items()]
