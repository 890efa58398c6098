"""Preemption decisions of one pass (pure): which queued jobs of a higher class, having found no room, stop which
lower-class running jobs, and on which node.

A job that found no node with room preempts on the node where the best victim set (victims.py: the fewest jobs,
then the lowest classes, then the youngest) frees enough for it; its turn comes in the order given (the policy
passes classes highest first, then the fair-share order). A node held for another job (a reservation, or a claim
of an earlier preemption whose victims still stop) is not touched, nor is a victim taken twice; a node chosen in
this pass is held for its preemptor from here on (the caller records the claim).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass

from jobs.scheduling import reasons
from jobs.scheduling.capacity import Capacity, eligibility_key, shape_of
from jobs.scheduling.gpufit import gpu_kind
from jobs.scheduling.snapshots import JobSnapshot
from jobs.scheduling.victims import Guards, Need, Running, cheap, choose, preemptible, rank

MAX_PER_PASS = 100  # preemptors decided in one pass: a burst is spread over passes, each seeing the last one's claims


@dataclass(frozen=True, slots=True)
class Decision:
    job_id: int  # the preemptor
    node_id: int
    victims: tuple[Running, ...]


def decide(
    state: Capacity,
    waiting: Iterable[JobSnapshot],
    running: Iterable[Running],
    *,
    now: float,
    guards: Guards,
) -> tuple[list[Decision], dict[int, str]]:
    """The preemptions for the jobs that found no room (in the order given), and the pending reason of each
    preemptor. `state` is the pass's capacity after its placements; `running` the active attempts."""
    index = {node.id: i for i, node in enumerate(state.nodes)}
    by_node: dict[int, list[Running]] = {}
    lowest = None
    for r in running:
        i = index.get(r.node_id)
        if i is None or not preemptible(r, value=r.priority_value + 1, now=now, guards=guards):
            continue  # the class test comes per preemptor; the other guards hold for every one
        by_node.setdefault(i, []).append(r)
        lowest = r.priority_value if lowest is None else min(lowest, r.priority_value)
    for rs in by_node.values():  # the greedy order once (victims.choose): a class's candidates are a prefix
        rs.sort(key=lambda r: cheap(r, now))
    decisions: list[Decision] = []
    pending: dict[int, str] = {}
    if lowest is None:
        return decisions, pending
    taken_nodes: set[int] = set()
    failed: set[tuple] = set()  # (eligibility key, shape, class) that found no victims: alike jobs skip
    # Per (shape, class): each node's best victim set. A node's candidates change only when it is taken (and then
    # no job looks at it again this pass), so alike preemptors reuse what the first one found.
    found_on: dict[tuple, dict] = {}
    eligible: dict[tuple, frozenset[int]] = {}
    for job in waiting:
        if len(decisions) >= MAX_PER_PASS:
            break
        if job.priority_value <= lowest:
            continue
        key = (eligibility_key(job), shape_of(job), job.priority_value)
        if key in failed:
            continue
        found = _best_node(state, job, by_node, taken_nodes, found_on.setdefault(key[1:], {}), eligible, now=now)
        if found is None:
            failed.add(key)
            continue
        i, victims = found
        taken_nodes.add(i)
        used = {r.attempt_id for r in victims}
        by_node[i] = [r for r in by_node[i] if r.attempt_id not in used]
        node = state.nodes[i]
        decisions.append(Decision(job.id, node.id, victims))
        pending[job.id] = reasons.preempting(len(victims), node.name or f"#{node.id}")
    return decisions, pending


def _best_node(
    state: Capacity,
    job: JobSnapshot,
    by_node: dict[int, list[Running]],
    taken: set[int],
    known: dict,
    eligible: dict[tuple, frozenset[int]],
    *,
    now: float,
) -> tuple[int, tuple[Running, ...]] | None:
    """The node whose best victim set ranks first (then the lowest node id) among those the job may use, and that
    set; None: no node. `known` holds, for jobs of this shape and class, every node's best set in rank order
    (built by the first such job: a node's candidates change only when it is taken, and no job looks at a taken
    node again); `eligible` the node indices each eligibility key may use."""
    ranked = known.get("ranked")
    if ranked is None:
        found = ((_on_node(state, job, i, running, now=now), i) for i, running in by_node.items())
        ranked = known["ranked"] = sorted(((f[0], state.nodes[i].id), i, f[1]) for f, i in found if f is not None)
    key = eligibility_key(job)
    mine = eligible.get(key)
    if mine is None:
        plain, gpu = state.classes_for(job)
        mine = eligible[key] = frozenset(i for cls in ((*plain, *gpu) if job.gpu_count == 0 else gpu)
                                         for i in cls.members)  # fmt: skip
    for _, i, victims in ranked:
        if i in mine and i not in taken and i not in state.reserved:
            return i, victims
    return None


def _on_node(state: Capacity, job: JobSnapshot, i: int, running: list[Running], *, now: float) -> tuple | None:
    """(rank, victims) of the best victim set on node i for the job, or None."""
    candidates = running[: bisect_left(running, job.priority_value, key=lambda r: r.priority_value)]
    if not candidates:
        return None
    node, kind = state.nodes[i], gpu_kind(job)
    need = Need(
        cpu_milli=job.cpu_milli,
        memory_bytes=job.memory_bytes,
        disk_bytes=job.disk_bytes,
        gpu_count=job.gpu_count,
        free_cpu_milli=state.cpu[i],
        free_memory_bytes=state.mem[i],
        free_disk_bytes=state.disk[i],
        free_gpus=frozenset(state.gpus[i]),
        usable_gpus=None if kind is None else frozenset(state.usable(node.gpu_uuids, kind)),
    )
    victims = choose(need, candidates, now=now, ordered=True)
    if not victims:  # None: not enough even with all; (): room already (held back by something else)
        return None
    return rank(victims, now=now), victims
