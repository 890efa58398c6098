"""Which nodes a queued job may use: one small named filter per rule, each returning its reason when it rejects.

Static filters read only what a node is (never what it has free), so the policy checks them once per class
of alike nodes (capacity.Relevant says which node attributes make a class: a filter that reads a new node
attribute must add it there). Capacity filters read what a node has free now. Both return a reason name,
the key of the phrase that pending reasons print ("3 are offline"), or None when the node passes.
"""

from __future__ import annotations

from collections.abc import Callable

from jobs.scheduling import isolation as tiers
from jobs.scheduling import terms as lender_terms
from jobs.scheduling.snapshots import PLATFORM, POOL_OWN, JobSnapshot, NodeSnapshot
from nodeagent.gpumatch import describe
from nodeagent.imageref import allowed_by

Filter = Callable[[NodeSnapshot, JobSnapshot], str | None]


def approval(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    return None if node.approved else "approval"


def online(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    return None if node.online else "online"


def draining(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    return "draining" if node.draining else None


def pool(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    """`pool: own` takes only the project's nodes; `pool: any` also the shared pool (NodeSnapshot.shared)."""
    own = node.owner_project_id is not None and node.owner_project_id == job.project_id
    if job.pool == POOL_OWN:
        return None if own else "pool"
    return None if own or node.shared else "pool"


def min_trust(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    return "min_trust" if job.min_trust == PLATFORM and node.trust != PLATFORM else None


def secrets(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    """A job with env (secrets) runs on platform nodes only."""
    return "secrets" if job.needs_secrets and node.trust != PLATFORM else None


def region(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    return "region" if job.region and node.region != job.region else None


def labels(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    """The job's node_selector must be a subset of the node's labels."""
    return "labels" if job.node_selector and not job.node_selector <= node.labels else None


def egress(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    """A node whose agent could not install its egress rules refuses networked jobs (network "none" fits)."""
    return "egress" if job.networked and not node.runs_networked else None


def image(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    """A lender may narrow the images their node runs (EULER_NODE_ALLOWED_IMAGES, nodeagent/imageref.py)."""
    return "image" if node.image_patterns and not allowed_by(job.image, node.image_patterns) else None


def isolation(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    """A sandboxed runtime where the job asks for one or the node's trust level (or lender) requires one, and a
    runtime that runs the job's network (jobs/scheduling/isolation.py)."""
    sandbox = tiers.needs_sandbox(job_isolation=job.isolation, node_minimum=node.min_isolation)
    return tiers.reject(node.runtimes, sandbox=sandbox, networked=job.networked)


# A lender's terms (lending/terms.py; the caps are applied to the node's totals when it is loaded). A window's
# end is a reclaim known ahead: a job must finish by its timeout before the window closes, unless it declares a
# checkpoint: then it is stopped with its grace and a checkpoint before the close and requeued (lending/windows.py).


def terms_project(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    """The lender lends the node to these projects only."""
    if node.terms_projects is not None and job.project_id not in node.terms_projects:
        return "terms_project"
    return None


def terms_closed(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    """Outside every availability window the lender set."""
    return None if node.terms_open else "terms_closed"


def terms_window(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    """The window closes before the job's timeout could end (and the job has no checkpoint to stop with there)."""
    fits = lender_terms.fits_window(
        left=node.terms_left, timeout=job.timeout_seconds, checkpoint_lead=job.checkpoint_lead
    )
    return None if fits else "terms_window"


def terms_hours(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    """The lender's longest job (max_job_hours), against the job's timeout."""
    if node.terms_max_seconds is not None and job.timeout_seconds > node.terms_max_seconds:
        return "terms_hours"
    return None


def reliability(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    """A job's `min_reliability`: nodes not scored yet do not qualify (lending/reliability.py)."""
    if job.min_reliability and (node.reliability is None or node.reliability < job.min_reliability):
        return "reliability"
    return None


# In the order pending reasons count them: a node is counted once, for the first filter that rejects it.
STATIC: tuple[Filter, ...] = (
    approval,
    online,
    draining,
    pool,
    min_trust,
    secrets,
    region,
    labels,
    egress,
    image,
    isolation,
    terms_project,
    terms_closed,
    terms_window,
    terms_hours,
    reliability,
)

STATIC_PHRASES = {
    "approval": "are not approved",
    "online": "are offline",
    "draining": "are draining",
    "pool": "are outside the job's pool",
    "min_trust": "are below min_trust platform",
    "secrets": "are not platform nodes (the job has env)",
    "region": "are in another region",
    "labels": "lack the node_selector labels",
    "egress": 'refuse networked jobs (egress rules not installed; network "none" jobs fit)',
    "image": "do not allow the job's image (their lenders' EULER_NODE_ALLOWED_IMAGES)",
    "isolation": "lack a sandboxed runtime (the job, the node's trust level or its lender requires one)",
    "terms_project": "are not lent to this project (their lenders' terms)",
    "terms_closed": "are outside their lenders' availability windows",
    "terms_window": "close their availability window before the job's timeout could end (and before a checkpoint's stop)",
    "terms_hours": "take no job this long (their lenders' max_job_hours)",
    "reliability": "score below the job's min_reliability",
}
# The isolation filter's other reasons: a sandbox that cannot run the job's network, no runtime for it at all.
ISOLATION_PHRASES = {
    "sandbox_network": 'sandbox only network "none" jobs (their runsc runs with --network=none)',
    "runtime": "offer no runtime for the job's network",
}

# Capacity reasons, in the order they are checked and counted; "busy": it had room before this pass filled it.
CAPACITY = ("gpus", "cpu", "memory", "disk")
REASON_ORDER = (*STATIC_PHRASES, *ISOLATION_PHRASES, *CAPACITY, "busy")


def static_reject(node: NodeSnapshot, job: JobSnapshot) -> str | None:
    """The first static filter that removes the node for this job, or None."""
    for check in STATIC:
        why = check(node, job)
        if why is not None:
            return why
    return None


def capacity_reject(cpu: int, memory: int, gpus: int, disk: int, job: JobSnapshot) -> str | None:
    """The first resource of which a node with this much free lacks what the job asks for, or None."""
    if gpus < job.gpu_count:  # first: the scarcest, and what a node without GPUs lacks
        return "gpus"
    if cpu < job.cpu_milli:
        return "cpu"
    if memory < job.memory_bytes:
        return "memory"
    if disk < job.disk_bytes:
        return "disk"
    return None


def capacity_phrases(job: JobSnapshot) -> dict[str, str]:
    """The phrases of the capacity reasons for this job's size: "lack 2 free GPUs"."""
    return {
        "cpu": f"lack {job.cpu_milli} free millicores",
        "memory": f"lack {job.memory_bytes} free memory bytes",
        "disk": f"lack {job.disk_bytes} free disk bytes",
        "gpus": f"lack {describe(job.gpu_count, job.gpu_model, job.gpu_min_memory_bytes, free=True)}",
        "busy": "were filled earlier in this pass",
    }
