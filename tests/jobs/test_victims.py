"""Victim choice (jobs/scheduling/victims.py), pure: the fewest jobs, then the lowest classes, then the youngest."""

from __future__ import annotations

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.scheduling import victims
from jobs.scheduling.victims import Guards, Need, Running, choose, frees_enough, preemptible, rank

NOW = 10_000.0


def run(aid, *, cpu=1000, mem=0, gpus=(), value=0, age=600.0, **kw) -> Running:
    return Running(
        attempt_id=aid, job_id=aid, project_id=1, node_id=1, priority_value=value, cpu_milli=cpu, memory_bytes=mem,
        gpu_uuids=tuple(gpus), started_at=NOW - age, **kw,
    )  # fmt: skip


def need(cpu=0, mem=0, gpus=0, *, free_cpu=0, free_mem=0, free_gpus=(), usable=None) -> Need:
    return Need(
        cpu_milli=cpu, memory_bytes=mem, disk_bytes=0, gpu_count=gpus, free_cpu_milli=free_cpu,
        free_memory_bytes=free_mem, free_disk_bytes=0, free_gpus=frozenset(free_gpus),
        usable_gpus=None if usable is None else frozenset(usable),
    )  # fmt: skip


def ids(found):
    return None if found is None else [r.attempt_id for r in found]


def test_it_takes_the_fewest_jobs_before_the_lowest_class():
    # Two small jobs of the lowest class, or one big job of a higher (but still lower than the preemptor's) class.
    cands = [run(1, cpu=1000, value=0), run(2, cpu=1000, value=0), run(3, cpu=2000, value=5)]
    assert ids(choose(need(cpu=2000), cands, now=NOW)) == [3]


def test_between_sets_of_one_size_it_takes_the_lowest_class():
    cands = [run(1, cpu=2000, value=5), run(2, cpu=2000, value=1), run(3, cpu=2000, value=3)]
    assert ids(choose(need(cpu=2000), cands, now=NOW)) == [2]


def test_between_equal_classes_it_takes_the_youngest():
    cands = [run(1, cpu=2000, age=900), run(2, cpu=2000, age=300), run(3, cpu=2000, age=3600)]
    assert ids(choose(need(cpu=2000), cands, now=NOW)) == [2]


def test_it_counts_what_the_node_has_free_already():
    cands = [run(1, cpu=1000, age=100), run(2, cpu=3000, age=5000)]
    assert ids(choose(need(cpu=3000, free_cpu=2000), cands, now=NOW)) == [1]


def test_room_already_needs_no_victim_and_too_little_gives_none():
    assert choose(need(cpu=1000, free_cpu=1000), [run(1)], now=NOW) == ()
    assert choose(need(cpu=5000), [run(1), run(2)], now=NOW) is None


def test_it_frees_gpus_of_the_kind_asked_for():
    # The job wants 2 GPUs of kind A (g1, g2 usable); only jobs holding those help, whatever else they free.
    cands = [run(1, cpu=0, gpus=["g3", "g4"]), run(2, cpu=0, gpus=["g1"], age=100), run(3, cpu=0, gpus=["g2"])]
    found = choose(need(gpus=2, usable=["g1", "g2"]), cands, now=NOW)
    assert ids(found) == [2, 3]


def test_an_attempt_that_frees_nothing_needed_is_never_a_victim():
    cands = [run(1, cpu=0, mem=8), run(2, cpu=4000, mem=0)]
    assert ids(choose(need(cpu=4000, mem=4, free_mem=4), cands, now=NOW)) == [2]


def test_the_guards():
    g = Guards(min_run_seconds=300, max_per_hour=2)
    assert preemptible(run(1, age=301), value=1, now=NOW, guards=g)
    assert not preemptible(run(1, age=299), value=1, now=NOW, guards=g)  # too young
    assert not preemptible(run(1, value=1), value=1, now=NOW, guards=g)  # same class
    assert not preemptible(run(1, preempted_last_hour=2), value=1, now=NOW, guards=g)  # the hourly cap
    assert not preemptible(run(1, immune=True), value=1, now=NOW, guards=g)
    assert not preemptible(run(1, stopping=True), value=1, now=NOW, guards=g)
    not_started = Running(attempt_id=1, job_id=1, project_id=1, node_id=1, priority_value=0, started_at=None)
    assert not preemptible(not_started, value=1, now=NOW, guards=Guards(min_run_seconds=0))


def test_past_the_search_limit_it_still_frees_enough(monkeypatch):
    monkeypatch.setattr(victims, "SEARCH_LIMIT", 5)
    cands = [run(i, cpu=500, age=i) for i in range(1, 13)]
    found = choose(need(cpu=2000), cands, now=NOW)
    assert found is not None and frees_enough(need(cpu=2000), found) and len(found) == 4


# Properties, against a brute force over every subset.

running_st = st.builds(
    lambda i, cpu, mem, g, value, age: (cpu, mem, g, value, age),
    st.just(0),
    st.integers(0, 4000),
    st.integers(0, 8),
    st.integers(0, 2),
    st.integers(0, 3),
    st.integers(0, 5).map(lambda k: 60.0 * (k + 1)),
)


def _materialise(specs):
    out, gpu = [], 0
    for aid, (cpu, mem, g, value, age) in enumerate(specs, start=1):
        uuids = [f"g{gpu + k}" for k in range(g)]
        gpu += g
        out.append(run(aid, cpu=cpu, mem=mem, gpus=uuids, value=value, age=age))
    return out


def _brute(n: Need, cands):
    best = None
    for size in range(0, len(cands) + 1):
        for combo in combinations(cands, size):
            if frees_enough(n, combo):
                key = rank(combo, now=NOW)
                if best is None or key < best[0]:
                    best = (key, combo)
        if best is not None:
            return best[1]
    return None


@settings(max_examples=300, deadline=None)
@given(
    specs=st.lists(running_st, min_size=0, max_size=7),
    cpu=st.integers(0, 8000),
    mem=st.integers(0, 20),
    gpus=st.integers(0, 4),
    free_cpu=st.integers(0, 2000),
    free_mem=st.integers(0, 6),
)
def test_choice_is_the_best_set_that_frees_enough(specs, cpu, mem, gpus, free_cpu, free_mem):
    cands = _materialise(specs)
    n = need(cpu, mem, gpus, free_cpu=free_cpu, free_mem=free_mem)
    found = choose(n, cands, now=NOW)
    expected = _brute(n, cands)
    if expected is None:
        assert found is None
        return
    assert found is not None
    assert frees_enough(n, found)
    # The same rank as the best set (the fewest, then lowest classes, then youngest), and minimal: none is spare.
    assert rank(found, now=NOW)[:3] == rank(expected, now=NOW)[:3]
    for r in found:
        assert not frees_enough(n, [x for x in found if x is not r])


@settings(max_examples=200, deadline=None)
@given(specs=st.lists(running_st, min_size=1, max_size=7), cpu=st.integers(1, 8000), seed=st.randoms())
def test_choice_does_not_depend_on_the_candidates_order(specs, cpu, seed):
    cands = _materialise(specs)
    shuffled = list(cands)
    seed.shuffle(shuffled)
    n = need(cpu)
    assert ids(choose(n, cands, now=NOW)) == ids(choose(n, shuffled, now=NOW))
