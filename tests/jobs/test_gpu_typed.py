"""Typed GPU requests: the model glob and memory rule (pure), the validation of `gpus`, and the scheduler's choice."""

from __future__ import annotations

import pytest

from euler.errors import InvalidInput
from jobs import validation
from jobs.scheduling import policy
from jobs.scheduling.snapshots import JobSnapshot, NodeSnapshot
from nodeagent import gpumatch

GIB = 1024**3
A100_80 = ("NVIDIA A100-SXM4-80GB", 80 * GIB)
A100_40 = ("NVIDIA A100-SXM4-40GB", 40 * GIB)
H100 = ("NVIDIA H100 80GB HBM3", 81559 * 1024**2)
T4 = ("Tesla T4", 15360 * 1024**2)


def node(id, kinds, **over) -> NodeSnapshot:
    uuids = tuple(f"GPU-{id}-{k}" for k in range(len(kinds)))
    base = dict(id=id, name=f"n{id}", cpu_milli=64000, memory_bytes=256 * GIB, gpu_uuids=uuids, gpu_kinds=tuple(kinds))
    base.update(over)
    return NodeSnapshot(**base)


def job(id, count, model="", gib=0, **over) -> JobSnapshot:
    base = dict(id=id, project_id=1, cpu_milli=1000, memory_bytes=GIB, queued_at=float(id), gpu_count=count,
                gpu_model=model, gpu_min_memory_bytes=gib * GIB)  # fmt: skip
    base.update(over)
    return JobSnapshot(**base)


# --- the glob ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("glob", "name", "expected"),
    [
        ("A100*", "NVIDIA A100-SXM4-80GB", True),
        ("a100*", "NVIDIA A100-SXM4-80GB", True),  # case-insensitive
        ("NVIDIA A100*", "NVIDIA A100-SXM4-80GB", True),  # the whole name works too
        ("*80GB*", "NVIDIA H100 80GB HBM3", True),
        ("Tesla T4", "Tesla T4", True),
        ("T4", "Tesla T4", False),  # only "NVIDIA " is stripped
        ("A10", "NVIDIA A100-SXM4-80GB", False),  # no wildcard: the whole name
        ("A10", "NVIDIA A10", True),
        ("H100*", "NVIDIA A100-SXM4-80GB", False),
        ("", "anything", True),
    ],
)
def test_the_model_glob_matches_the_whole_nvml_name_with_or_without_nvidia(glob, name, expected):
    assert gpumatch.model_matches(glob, name) is expected


def test_memory_is_a_floor_on_the_nvml_total():
    assert gpumatch.gpu_matches(*A100_40, min_memory_bytes=40 * GIB)
    assert not gpumatch.gpu_matches(*H100, min_memory_bytes=80 * GIB)  # 79.6 GiB on the box's "80GB"
    assert gpumatch.gpu_matches(*H100, glob="H100*", min_memory_bytes=79 * GIB)


def test_a_request_is_described_in_words():
    assert gpumatch.describe(2, "A100*", 40 * GIB, free=True) == "2 free GPUs matching A100* with ≥ 40 GiB"
    assert gpumatch.describe(1) == "1 GPU"


# --- validation -------------------------------------------------------------------------------
def test_gpus_takes_an_integer_or_a_typed_object():
    assert validation.gpus(2) == {"gpu_count": 2, "gpu_model": "", "gpu_min_memory_bytes": 0}
    assert validation.gpus({"count": 2, "model": "A100*", "min_memory_gib": 40}) == {
        "gpu_count": 2, "gpu_model": "A100*", "gpu_min_memory_bytes": 40 * GIB}  # fmt: skip
    assert validation.gpus({"count": 1, "min_memory_gib": 79.5})["gpu_min_memory_bytes"] == int(79.5 * GIB)


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("2", "invalid_gpus"),
        (9, "invalid_gpus"),
        ({"model": "A100*"}, "invalid_gpus"),
        ({"count": 0, "model": "A100*"}, "invalid_gpus"),
        ({"count": 1, "vendor": "nvidia"}, "invalid_gpus"),
        ({"count": 1, "model": "A100; rm -rf"}, "invalid_gpu_model"),
        ({"count": 1, "model": 100}, "invalid_gpu_model"),
        ({"count": 1, "min_memory_gib": -1}, "invalid_gpu_memory"),
        ({"count": 1, "min_memory_gib": "40"}, "invalid_gpu_memory"),
        ({"count": 1, "min_memory_gib": True}, "invalid_gpu_memory"),
    ],
)
def test_bad_gpus_fail_with_a_stable_code(value, code):
    with pytest.raises(InvalidInput) as err:
        validation.gpus(value)
    assert err.value.code == code


def test_gpus_and_gpu_count_together_conflict():
    typed = validation.gpus({"count": 1, "model": "A100*"})
    with pytest.raises(InvalidInput) as err:
        validation.merge_gpus({"gpu_count": 1, "gpus": typed}, given={"gpu_count", "gpus"})
    assert err.value.code == "conflicting_gpus"
    assert validation.merge_gpus({"gpu_count": 0, "gpus": typed}, given={"gpus"})["gpu_model"] == "A100*"


# --- the scheduler ----------------------------------------------------------------------------
def test_a_typed_job_takes_only_matching_gpus_pinned_by_uuid():
    mixed = node(1, [T4, A100_80, T4, A100_80])
    plan = policy.place([job(1, 2, "A100*", 40)], [mixed], now=0)
    assert plan.placements[0].gpu_uuids == ("GPU-1-1", "GPU-1-3")


def test_a_typed_job_goes_to_the_node_with_the_matching_model():
    plan = policy.place([job(1, 1, "H100*")], [node(1, [A100_80] * 4), node(2, [H100])], now=0)
    assert [(p.node_id, p.gpu_uuids) for p in plan.placements] == [(2, ("GPU-2-0",))]


def test_memory_alone_picks_the_bigger_cards():
    plan = policy.place([job(1, 2, gib=40)], [node(1, [T4] * 8), node(2, [A100_40, A100_80])], now=0)
    assert plan.placements[0].node_id == 2


def test_an_untyped_job_takes_any_gpus_and_leaves_the_rest_for_a_typed_one():
    n = node(1, [T4, A100_80])
    plan = policy.place([job(1, 1, "A100*"), job(2, 1)], [n], now=0)
    assert {p.job_id: p.gpu_uuids for p in plan.placements} == {1: ("GPU-1-1",), 2: ("GPU-1-0",)}


def test_the_pending_reason_names_the_model_and_memory_missing():
    plan = policy.place([job(1, 2, "A100*", 40)], [node(1, [A100_80, T4]), node(2, [], gpu_kinds=())], now=0)
    assert plan.pending[1] == "no node fits: 2 lack 2 free GPUs matching A100* with ≥ 40 GiB"


def test_matching_gpus_held_by_running_attempts_are_not_handed_out():
    n = node(1, [A100_80, A100_80, T4], used_gpus=frozenset({"GPU-1-0"}))
    plan = policy.place([job(1, 2, "A100*")], [n], now=0)
    assert plan.placements == () and "lack 2 free GPUs matching A100*" in plan.pending[1]
    plan = policy.place([job(1, 1, "A100*")], [n], now=0)
    assert plan.placements[0].gpu_uuids == ("GPU-1-1",)


def test_a_typed_job_that_found_no_room_does_not_block_an_untyped_one_of_the_same_size():
    n = node(1, [T4, T4])
    plan = policy.place([job(1, 2, "A100*"), job(2, 2)], [n], now=0)
    assert [p.job_id for p in plan.placements] == [2]
    assert "matching A100*" in plan.pending[1]


def test_a_gpu_left_out_of_the_snapshot_as_unhealthy_is_never_placed_on():
    # loading.node_rows drops unhealthy GPUs from gpu_uuids/gpu_kinds: the node offers one GPU here.
    n = node(1, [A100_80])
    plan = policy.place([job(1, 2)], [n], now=0)
    assert plan.pending[1] == "no node fits: 1 lack 2 free GPUs"


def test_a_starved_typed_job_reserves_a_node_with_matching_gpus():
    nodes = [node(1, [T4] * 4), node(2, [A100_80] * 2, used_gpus=frozenset({"GPU-2-0", "GPU-2-1"}))]
    plan = policy.place([job(1, 2, "A100*", queued_at=0.0)], nodes, now=1000, reserve_after=10)
    assert plan.reservations == {1: 2}


def test_a_typed_reservation_keeps_its_kind_of_gpu_from_later_untyped_jobs():
    # The starved typed job reserves the node; the A100 it needs is busy. A later untyped job may use the node's
    # T4 (the GPU the reservation cannot use), never the free A100 the reservation waits to complete its set.
    n = node(1, [A100_80, T4, A100_80], used_gpus=frozenset({"GPU-1-2"}))
    starved = job(1, 2, "A100*", queued_at=0.0)
    plan = policy.place([starved, job(2, 1, queued_at=500.0)], [n], now=1000, reserve_after=10)
    assert plan.reservations == {1: 1}
    assert {p.job_id: p.gpu_uuids for p in plan.placements} == {2: ("GPU-1-1",)}
    plan = policy.place([starved, job(2, 2, queued_at=500.0)], [n], now=1000, reserve_after=10)
    assert plan.placements == ()  # two untyped GPUs would take the A100
