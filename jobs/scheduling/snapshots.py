"""Frozen, Django-free views of nodes, queued jobs and project limits that the scheduling policy reads."""

from __future__ import annotations

from dataclasses import dataclass, field

PLATFORM = "platform"
COMMUNITY = "community"
UNTRUSTED = "untrusted"
POOL_ANY = "any"
POOL_OWN = "own"


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    id: int
    name: str = ""
    region: str = ""
    labels: frozenset[tuple[str, str]] = frozenset()
    trust: str = PLATFORM
    public_pool: bool = False
    owner_project_id: int | None = None
    approved: bool = True
    online: bool = True
    draining: bool = False
    cpu_milli: int = 0  # totals
    memory_bytes: int = 0
    disk_bytes: int | None = None  # None: the node does not report disk (an older agent); not counted
    gpu_uuids: tuple[str, ...] = ()  # in device index order; healthy GPUs only (an unhealthy one is not offered)
    gpu_kinds: tuple[tuple[str, int], ...] = ()  # (NVML name, memory bytes) of each of gpu_uuids; () when unknown
    runs_networked: bool = True  # False: its agent could not install its egress rules and refuses networked jobs
    image_patterns: tuple[str, ...] = ()  # the lender's allowed images (nodeagent/imageref.py); (): every image
    runtimes: tuple = ()  # isolation.Runtime of each runtime it offers; (): an older agent, the engine's default
    min_isolation: str = "runc"  # the least isolation any job gets here (its trust level's, or its lender's)
    # The lender's terms (jobs/scheduling/terms.py; caps are already applied to the totals above): open now, and
    # for how many seconds more (None: no window closes); the projects it takes (None: all); the longest job.
    terms_open: bool = True
    terms_left: float | None = None
    terms_projects: frozenset[int] | None = None
    terms_max_seconds: float | None = None
    reliability: float | None = None  # 0–100 (lending/reliability.py); None: not scored yet

    used_cpu_milli: int = 0  # held by active attempts
    used_memory_bytes: int = 0
    used_disk_bytes: int = 0
    used_gpus: frozenset[str] = frozenset()

    @property
    def shared(self) -> bool:
        """In the shared pool that every project's `pool: any` jobs may use (the same rule in SQL: the fair-share
        figures in jobs.selectors)."""
        return self.trust == PLATFORM or (self.trust == "community" and self.public_pool)


@dataclass(frozen=True, slots=True)
class JobSnapshot:
    id: int
    project_id: int
    cpu_milli: int
    memory_bytes: int
    gpu_count: int = 0
    gpu_model: str = ""  # a typed request's glob over the NVML name (nodeagent/gpumatch.py); "": any model
    gpu_min_memory_bytes: int = 0  # a typed request's least memory per GPU; 0: any
    disk_bytes: int = 0
    queued_at: float = 0.0  # order key: earlier first, then id
    region: str = ""
    node_selector: frozenset[tuple[str, str]] = frozenset()
    pool: str = POOL_ANY
    min_trust: str = COMMUNITY
    needs_secrets: bool = False  # has env: platform nodes only
    not_before: float | None = None  # retry backoff
    priority: int = 0  # orders the project's own queue (higher first), then FIFO
    priority_value: int = 0  # its priority class's value: classes place strictly in order, highest first
    networked: bool = True  # network "default" (the node's egress policy); False: "none", loopback only
    image: str = ""  # as submitted: matched against a node's image_patterns
    isolation: str = ""  # "sandbox": a sandboxed runtime wherever it runs; else what each node requires
    timeout_seconds: int = 0  # 0: not known (tests of other rules); a lender's window or hour limit reads it
    min_reliability: float = 0.0  # 0–100: only nodes scored at least this
    spread_group: str = ""  # a service's replicas: other lenders' nodes first, then other nodes (spread.py)
    # A job that declares a checkpoint: the seconds it needs before a lender's window closes to be stopped there with
    # a checkpoint (its stop grace + EULER_WINDOW_CHECK_INTERVAL; jobs/scheduling/terms.py fits_window). None: no
    # checkpoint, it must finish by its timeout before the window closes.
    checkpoint_lead: float | None = None


@dataclass(frozen=True, slots=True)
class ProjectLimit:
    active: int = 0  # jobs of the project holding an attempt now
    max_concurrent: int | None = None  # None: no concurrency cap
    weight: float = 1.0  # fair-share weight
    held: tuple[float, float, float] = (0.0, 0.0, 0.0)  # CPU millicores, memory bytes, GPUs its active attempts hold
    recent: tuple[float, float, float] | None = None  # decayed recent usage as an average holding (half-life on)


@dataclass(frozen=True, slots=True)
class Placement:
    job_id: int
    node_id: int
    gpu_uuids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    placements: tuple[Placement, ...] = ()
    pending: dict[int, str] = field(default_factory=dict)  # job id -> why it stays queued
    reservations: dict[int, int] = field(default_factory=dict)  # job id -> node id it reserved this pass
    shares: dict[int, float] = field(default_factory=dict)  # project id -> weighted share after the pass
    preemptions: tuple = ()  # preemption.Decision: the victims a preemptor stops, and the node held for it
