"""Which running jobs a higher-class job preempts on one node (pure): the fewest jobs, then the lowest classes, then
the youngest, among those that free enough for it (CPU, memory, disk, and GPUs of the kind it asks for).

A set's rank is (how many, its classes highest first, its ages oldest first): a set that stops fewer jobs always
wins; between sets of one size, the one whose highest class is lower (then the next...), then the one whose oldest
member is younger (then the next...), then the lower attempt ids. The search is exact: sets of one, then of two...
until one frees enough; past SEARCH_LIMIT sets of one size it settles for the cheapest members that free enough.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

SEARCH_LIMIT = 20_000  # sets of one size examined exactly; past it, greedy (see choose)


@dataclass(frozen=True, slots=True)
class Running:
    """An attempt that holds resources on a node, as preemption reads it."""

    attempt_id: int
    job_id: int
    project_id: int
    node_id: int
    priority_value: int  # its job's class value
    cpu_milli: int = 0
    memory_bytes: int = 0
    disk_bytes: int = 0
    gpu_uuids: tuple[str, ...] = ()
    started_at: float | None = None  # None: not started yet (assigned)
    preempted_last_hour: int = 0  # how many times its job was preempted in the last hour
    immune: bool = False  # its job reached the hourly cap: not preempted again until it ends
    stopping: bool = False  # already asked to stop (cancel, timeout, an earlier preemption...)


@dataclass(frozen=True, slots=True)
class Need:
    """What the preemptor needs on the node, and what the node has free for it now."""

    cpu_milli: int
    memory_bytes: int
    disk_bytes: int
    gpu_count: int
    free_cpu_milli: int
    free_memory_bytes: int
    free_disk_bytes: int
    free_gpus: frozenset[str]  # the node's free GPUs
    usable_gpus: frozenset[str] | None = None  # the node's GPUs of the kind the job asks for; None: any GPU


@dataclass(frozen=True, slots=True)
class Guards:
    """The operator's guards against flapping (EULER_PREEMPT_MIN_RUN_SECONDS, EULER_PREEMPT_MAX_PER_HOUR)."""

    min_run_seconds: float = 0.0
    max_per_hour: int = 3


def preemptible(r: Running, *, value: int, now: float, guards: Guards) -> bool:
    """Whether a job of class `value` may preempt this attempt: a lower class, started at least the minimum run
    ago, not already stopping, and its job not at the hourly cap (nor immune since it reached it)."""
    return (
        r.priority_value < value
        and not r.stopping
        and not r.immune
        and r.started_at is not None
        and now - r.started_at >= guards.min_run_seconds
        and r.preempted_last_hour < guards.max_per_hour
    )


def frees_enough(need: Need, victims: Iterable[Running]) -> bool:
    cpu, mem, disk = need.free_cpu_milli, need.free_memory_bytes, need.free_disk_bytes
    gpus = set(need.free_gpus) if need.gpu_count else None
    for r in victims:
        cpu += r.cpu_milli
        mem += r.memory_bytes
        disk += r.disk_bytes
        if gpus is not None:
            gpus.update(r.gpu_uuids)
    if cpu < need.cpu_milli or mem < need.memory_bytes or disk < need.disk_bytes:
        return False
    if gpus is None:
        return True
    if need.usable_gpus is not None:
        gpus &= need.usable_gpus
    return len(gpus) >= need.gpu_count


def least_count(need: Need, pool: Sequence[Running]) -> int:
    """A lower bound on how many of `pool` must stop: for each resource short, the fewest of its largest holders
    that cover the shortfall (sets smaller than this cannot free enough, so the search starts here)."""
    bound = 0
    for short, amount in (
        (need.cpu_milli - need.free_cpu_milli, lambda r: r.cpu_milli),
        (need.memory_bytes - need.free_memory_bytes, lambda r: r.memory_bytes),
        (need.disk_bytes - need.free_disk_bytes, lambda r: r.disk_bytes),
    ):
        if short <= 0:
            continue
        covered, k = 0, 0
        for value in sorted((amount(r) for r in pool), reverse=True):
            if covered >= short:
                break
            covered += value
            k += 1
        bound = max(bound, k)
    return max(bound, 1)


def rank(victims: Sequence[Running], *, now: float) -> tuple:
    """The order of preference between victim sets (lower is better): see the module's docstring."""
    return (
        len(victims),
        tuple(sorted((r.priority_value for r in victims), reverse=True)),
        tuple(sorted((_age(r, now) for r in victims), reverse=True)),
        tuple(sorted(r.attempt_id for r in victims)),
    )


def _age(r: Running, now: float) -> float:
    return now - r.started_at if r.started_at is not None else 0.0


def _useful(need: Need, r: Running) -> bool:
    """Whether stopping r frees anything the job lacks (an attempt that frees nothing it needs is never a victim)."""
    short_gpu = need.gpu_count and r.gpu_uuids and (need.usable_gpus is None or need.usable_gpus & set(r.gpu_uuids))
    return bool(
        (need.cpu_milli > need.free_cpu_milli and r.cpu_milli > 0)
        or (need.memory_bytes > need.free_memory_bytes and r.memory_bytes > 0)
        or (need.disk_bytes > need.free_disk_bytes and r.disk_bytes > 0)
        or short_gpu
    )


def choose(
    need: Need, candidates: Collection[Running], *, now: float, ordered: bool = False
) -> tuple[Running, ...] | None:
    """The best set of candidates (already preemptible) whose stopping frees enough for `need`; () when the node
    already has room; None when even all of them would not free enough. `ordered`: the candidates come in the
    greedy order already (cheap)."""
    if frees_enough(need, ()):
        return ()
    pool = [r for r in candidates if _useful(need, r)]
    if not ordered:
        pool.sort(key=lambda r: cheap(r, now))
    greedy = _greedy_size(need, pool)
    if greedy is None:
        return None
    # The cheapest `greedy` candidates free enough and are the best set of that size (see cheap); a smaller set
    # that frees enough wins over them, so the sizes below are searched, from the least that could.
    for size in range(least_count(need, pool) if greedy > 1 else greedy, greedy):
        best, best_rank, seen = None, None, 0
        for combo in combinations(pool, size):
            seen += 1
            if seen > SEARCH_LIMIT:
                break  # too many to try: the greedy set stands (it frees enough, with a few more jobs)
            if frees_enough(need, combo):
                key = rank(combo, now=now)
                if best_rank is None or key < best_rank:
                    best, best_rank = combo, key
        if best is not None:
            return tuple(sorted(best, key=lambda r: r.attempt_id))
    return tuple(sorted(pool[:greedy], key=lambda r: r.attempt_id))


def _greedy_size(need: Need, pool: Sequence[Running]) -> int | None:
    """How many of `pool`, taken in order, free enough; None: not even all of them."""
    cpu, mem, disk = need.free_cpu_milli, need.free_memory_bytes, need.free_disk_bytes
    gpus = set(need.free_gpus) if need.gpu_count else None
    usable = need.usable_gpus

    def enough() -> bool:
        if cpu < need.cpu_milli or mem < need.memory_bytes or disk < need.disk_bytes:
            return False
        return gpus is None or len(gpus if usable is None else gpus & usable) >= need.gpu_count

    for k, r in enumerate(pool, start=1):
        cpu += r.cpu_milli
        mem += r.memory_bytes
        disk += r.disk_bytes
        if gpus is not None:
            gpus.update(r.gpu_uuids)
        if enough():
            return k
    return None


def cheap(r: Running, now: float) -> tuple:
    """The greedy order: the lowest class first, then the youngest, then the lowest attempt id. The first k in
    this order, when they free enough, are the best set of k: any other k-set holds classes at least as high,
    place by place, and within the same classes ages at least as old."""
    return (r.priority_value, _age(r, now), r.attempt_id)
