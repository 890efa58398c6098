"""Pure rules of arrays and dependencies: a dependency's verdict, an array's aggregate state, how many waiting
tasks an array may release, cycle detection. Plain data in, plain data out; no Django."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

ENDED = frozenset({"succeeded", "failed", "cancelled", "lost"})
IN_SLOT = frozenset({"queued", "assigned", "running"})
STATES = ("waiting", "queued", "assigned", "running", "succeeded", "failed", "cancelled", "lost")
CONDITIONS = ("succeeded", "ended")

MET, NEVER, PENDING = "met", "never", "pending"

Node = tuple[str, int]  # ("job", id) or ("array", id)


BROKEN = "dependency_failed"  # a job that ended so never ran: the chain is broken, whatever the condition


def job_verdict(condition: str, state: str, reason: str = "") -> str:
    """Whether a job in `state` meets `condition` (met), never can (never: it ended otherwise), or not yet.

    A job cancelled `dependency_failed` never ran: it meets neither condition, so a failure travels down a
    chain A → B (succeeded) → C (ended) to its end instead of starting C after a B that never ran."""
    if state not in ENDED:
        return PENDING
    if reason == BROKEN:
        return NEVER
    if condition == "ended" or state == "succeeded":
        return MET
    return NEVER


def array_verdict(condition: str, counts: Mapping[str, int], count: int, *, broken: bool = False) -> str:
    """The same for a whole array: `succeeded` needs every task succeeded, so one task that ended otherwise
    settles it at once (never); `ended` needs every task ended. `broken`: the array's own dependency failed."""
    if broken:
        return NEVER
    ended = sum(counts.get(s, 0) for s in ENDED)
    if condition == "succeeded" and ended - counts.get("succeeded", 0) > 0:
        return NEVER
    return MET if ended >= count else PENDING


def array_state(counts: Mapping[str, int], count: int) -> str:
    """One state for the array: running while any task holds a node, else queued or waiting while any waits;
    once all ended, succeeded when all did, failed when any failed or was lost, else cancelled."""
    if counts.get("running", 0) or counts.get("assigned", 0):
        return "running"
    if counts.get("queued", 0):
        return "queued"
    if counts.get("waiting", 0):
        return "waiting"
    if counts.get("succeeded", 0) >= count:
        return "succeeded"
    if counts.get("failed", 0) or counts.get("lost", 0):
        return "failed"
    return "cancelled"


def full_counts(rows: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Counts per state with every state present (0 when none)."""
    counts = dict.fromkeys(STATES, 0)
    for state, n in rows:
        counts[state] = counts.get(state, 0) + n
    return counts


def room(*, parallelism: int | None, in_slot: int, waiting: int) -> int:
    """How many waiting tasks an array releases now: all of them without a limit, else up to its parallelism."""
    if parallelism is None:
        return waiting
    return max(0, min(waiting, parallelism - in_slot))


def initially_queued(*, count: int, parallelism: int | None, held: bool) -> int:
    """How many of a new array's tasks start queued (the lowest indices); the rest start waiting."""
    if held:
        return 0
    return count if parallelism is None else min(count, parallelism)


def find_cycle(new: Node, targets: Iterable[Node], parents: Callable[[set[Node]], Mapping[Node, Iterable[Node]]]):
    """The path from `new` back to itself through its would-be dependencies, or None.

    `parents(nodes)` answers, for each node asked, what it waits for (its dependencies; for an array task, also
    its array), one level at a time, so the walk reads only `new`'s would-be ancestors."""
    came_from: dict[Node, Node] = {}
    frontier: set[Node] = set()
    for target in targets:
        if target == new:
            return [new, new]
        if target not in came_from:
            came_from[target] = new
            frontier.add(target)
    while frontier:
        nxt: set[Node] = set()
        for node, ups in parents(frontier).items():
            for up in ups:
                if up == new:
                    path = [new, node]
                    while path[-1] != new:
                        path.append(came_from[path[-1]])
                    return list(reversed(path))
                if up not in came_from:
                    came_from[up] = node
                    nxt.add(up)
        frontier = nxt
    return None


def describe(node: Node) -> str:
    return f"{node[0]} {node[1]}"


def pending_reason(waits: Iterable[tuple[Node, str]]) -> str:
    """What a waiting job waits for, e.g. "waiting for job 12 to succeed, array 3 to end"."""
    parts = [f"{describe(node)} to {'succeed' if cond == 'succeeded' else 'end'}" for node, cond in waits]
    return ("waiting for " + ", ".join(parts))[:1000] if parts else ""


def parallelism_reason(array_id: int, parallelism: int) -> str:
    return f"waiting for a slot: array {array_id} runs at most {parallelism} tasks at once"
