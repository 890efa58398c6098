"""Pure checks of a job submission, each failing with InvalidInput and a stable code."""

from __future__ import annotations

import re

from euler.errors import InvalidInput
from jobs import retrypolicy
from jobs.checkpoints import rules as checkpoint_rules
from jobs.outputs import rules as output_rules
from nodeagent import gpumatch, imageref
from nodeagent.protocol import DEFAULT_STOP_GRACE_SECONDS, WARN_SIGNALS

MIB = 1024 * 1024
MAX_TIMEOUT = 7 * 24 * 3600
MAX_CPU_MILLI = 1_000_000
MAX_MEMORY = 16 * 1024**4
MAX_DISK = 64 * 1024**4
MAX_GPUS = 8
MAX_RETRIES = 10
MAX_PRIORITY = 100  # priority is -MAX_PRIORITY..MAX_PRIORITY

# The options a container never gets, whatever the body says: 400 forbidden_option.
FORBIDDEN_OPTIONS = frozenset(
    {
        "privileged", "volumes", "binds", "mounts", "network_mode", "cap_add", "capabilities",
        "devices", "device_requests", "pid_mode", "ipc_mode", "uts_mode", "userns_mode", "security_opt",
        "user", "runtime", "sysctls", "tmpfs", "volumes_from", "extra_hosts", "cgroup_parent", "ports",
        "publish_all_ports", "group_add", "oom_kill_disable", "pids_limit", "ulimits", "entrypoint",
        "working_dir", "host_config", "labels", "dns", "init", "shm_size", "cgroupns",
    }
)  # fmt: skip

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,255}$")
_REGION = re.compile(r"^[A-Za-z0-9._-]{0,63}$")
_LABEL_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9._-]{0,63}$")


def _int(value, *, code: str, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{what} must be an integer.", code=code)
    if not low <= value <= high:
        raise InvalidInput(f"{what} must be between {low} and {high}, got {value}.", code=code)
    return value


def _no_control(text: str) -> bool:
    return not any(ord(c) < 32 or ord(c) == 127 for c in text)


def name(value) -> str:
    if not isinstance(value, str) or not 1 <= len(value.strip()) <= 100 or not _no_control(value):
        raise InvalidInput("name is 1 to 100 printable characters.", code="invalid_name")
    return value.strip()


def image(value) -> str:
    """Docker's reference grammar (nodeagent/imageref.py), then the image policy: a registry that is an IP
    address, a local-only name or a name that resolves to a non-public address is refused, unless the operator
    lists it in EULER_ALLOWED_REGISTRIES. The agent checks again before it pulls."""
    from django.conf import settings

    try:
        ref = imageref.parse(value)
    except imageref.InvalidReference as exc:
        raise InvalidInput(
            f"image is not a valid image reference (e.g. alpine:3.20): {exc}.", code="invalid_image"
        ) from None
    why = imageref.check(ref, allowed=settings.EULER_ALLOWED_REGISTRIES, unresolved_ok=True)
    if why:
        raise InvalidInput(f"{why}: refused by the image policy.", code="forbidden_image_registry")
    return value


def command(value) -> list[str]:
    if not isinstance(value, list) or not value:
        raise InvalidInput("command is a non-empty list of strings.", code="invalid_command")
    if len(value) > 256 or not all(isinstance(arg, str) for arg in value):
        raise InvalidInput("command is a list of at most 256 strings.", code="invalid_command")
    if any("\x00" in arg for arg in value) or sum(len(arg) for arg in value) > 64 * 1024:
        raise InvalidInput("command holds a NUL byte or exceeds 64 KiB.", code="invalid_command")
    return value


def cpu_milli(value) -> int:
    return _int(value, code="invalid_cpu", low=1, high=MAX_CPU_MILLI, what="cpu_milli")


def memory_bytes(value) -> int:
    return _int(value, code="invalid_memory", low=4 * MIB, high=MAX_MEMORY, what="memory_bytes")


def disk_bytes(value) -> int:
    return _int(value, code="invalid_disk", low=4 * MIB, high=MAX_DISK, what="disk_bytes")


def default_disk_bytes() -> int:
    from django.conf import settings  # the one default that a setting decides

    return settings.EULER_JOB_DEFAULT_DISK_BYTES


def network(value) -> str:
    if value not in ("default", "none"):
        raise InvalidInput("network is 'default' (the node's egress policy) or 'none' (loopback only).",
                           code="invalid_network")  # fmt: skip
    return value


def gpu_count(value) -> int:
    return _int(value, code="invalid_gpu_count", low=0, high=MAX_GPUS, what="gpu_count")


MAX_GPU_MEMORY_GIB = 4096
_GPU_KEYS = frozenset({"count", "model", "min_memory_gib"})


def gpus(value) -> dict | None:
    """`gpus`: an integer (what gpu_count says) or a typed request {"count", "model", "min_memory_gib"}.

    Returns the job's columns {"gpu_count", "gpu_model", "gpu_min_memory_bytes"}; the model is a glob over the
    NVML name (nodeagent/gpumatch.py says how it matches)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return {"gpu_count": _int(value, code="invalid_gpus", low=0, high=MAX_GPUS, what="gpus"),
                "gpu_model": "", "gpu_min_memory_bytes": 0}  # fmt: skip
    unknown = sorted(set(value) - _GPU_KEYS)
    if unknown:
        raise InvalidInput(
            f"gpus has no field {unknown[0][:64]!r} (count, model, min_memory_gib).", code="invalid_gpus"
        )
    if "count" not in value:
        raise InvalidInput("gpus.count is required (1 to 8 whole GPUs).", code="invalid_gpus")
    count = _int(value["count"], code="invalid_gpus", low=1, high=MAX_GPUS, what="gpus.count")
    model = value.get("model", "")
    if not isinstance(model, str) or (model and not gpumatch.MODEL_GLOB.match(model)):
        raise InvalidInput(
            "gpus.model is a glob of at most 128 letters, digits, spaces, '._+()/-' and '*?[]!' "
            '(e.g. "A100*"), matched case-insensitively against the GPU\'s NVML name.',
            code="invalid_gpu_model",
        )
    gib = value.get("min_memory_gib", 0)
    if isinstance(gib, bool) or not isinstance(gib, int | float) or not 0 <= gib <= MAX_GPU_MEMORY_GIB:
        raise InvalidInput(
            f"gpus.min_memory_gib is a number from 0 to {MAX_GPU_MEMORY_GIB}.", code="invalid_gpu_memory"
        )
    return {"gpu_count": count, "gpu_model": model, "gpu_min_memory_bytes": int(gib * gpumatch.GIB)}


def merge_gpus(spec: dict, *, given: set[str]) -> dict:
    """The validated spec with `gpus` folded into the job's columns; `gpus` and `gpu_count` together: 400."""
    typed = spec.pop("gpus", None)
    if typed is None:
        return spec
    if "gpu_count" in given:
        raise InvalidInput("Give either gpus or gpu_count, not both.", code="conflicting_gpus")
    return {**spec, **typed}


def timeout_seconds(value) -> int:
    return _int(value, code="invalid_timeout", low=1, high=MAX_TIMEOUT, what="timeout_seconds")


def stop_grace_seconds(value) -> int:
    """SIGTERM, this many seconds, SIGKILL, at every stop (jobs/stopping.py); at most the operator's maximum."""
    from django.conf import settings

    return _int(value, code="invalid_stop_grace", low=0, high=settings.EULER_MAX_STOP_GRACE, what="stop_grace_seconds")


def warn_before_timeout_seconds(value) -> int:
    return _int(value, code="invalid_warn_before_timeout", low=0, high=MAX_TIMEOUT, what="warn_before_timeout_seconds")


def warn_signal(value) -> str:
    if not isinstance(value, str) or value.upper() not in WARN_SIGNALS:
        raise InvalidInput(f"warn_signal must be one of {', '.join(sorted(WARN_SIGNALS))}.", code="invalid_warn_signal")
    return value.upper()


def default_stop_grace() -> int:
    from django.conf import settings

    return min(DEFAULT_STOP_GRACE_SECONDS, settings.EULER_MAX_STOP_GRACE)


def max_retries(value) -> int:
    return _int(value, code="invalid_max_retries", low=0, high=MAX_RETRIES, what="max_retries")


def env(value) -> dict[str, str]:
    if not isinstance(value, dict):
        raise InvalidInput("env is an object of strings.", code="invalid_env")
    if len(value) > 128:
        raise InvalidInput("env holds at most 128 variables.", code="invalid_env")
    total = 0
    for key, val in value.items():
        if not _ENV_NAME.match(key):
            raise InvalidInput(f"env name {key[:64]!r} is not a valid variable name.", code="invalid_env")
        if not isinstance(val, str) or "\x00" in val or len(val) > 32 * 1024:
            raise InvalidInput(f"env value of {key} must be a string of at most 32 KiB.", code="invalid_env")
        total += len(key) + len(val)
    if total > 128 * 1024:
        raise InvalidInput("env exceeds 128 KiB in all.", code="invalid_env")
    return value


def region(value) -> str:
    if not isinstance(value, str) or not _REGION.match(value):
        raise InvalidInput("region is up to 63 letters, digits, '.', '_' or '-'.", code="invalid_region")
    return value


def node_selector(value) -> dict[str, str]:
    if not isinstance(value, dict) or len(value) > 32:
        raise InvalidInput("node_selector is an object of at most 32 labels.", code="invalid_node_selector")
    for key, val in value.items():
        if not _LABEL_KEY.match(key) or not isinstance(val, str) or not _LABEL_VALUE.match(val):
            raise InvalidInput(f"node_selector label {key[:64]!r} is not a valid label.", code="invalid_node_selector")
    return value


def retry_on(value) -> list:
    """Endings and exit codes (jobs/retrypolicy.py): ["lost", {"exit_codes": [75, "128-143"]}]."""
    try:
        return retrypolicy.normalize_retry_on(value)
    except retrypolicy.PolicyError as exc:
        raise InvalidInput(str(exc), code=exc.code) from None


def retry_backoff(value) -> dict | None:
    """{"initial": s, "factor": f, "max": s}, each optional; stored as sent (None: the operator's defaults)."""
    if value is None:
        return None
    try:
        retrypolicy.parse_backoff(value, default=retrypolicy.Backoff(1.0, 2.0, retrypolicy.BACKOFF_LIMIT))
    except retrypolicy.PolicyError as exc:
        raise InvalidInput(str(exc), code=exc.code) from None
    return {key: float(val) for key, val in value.items()}


def pool(value) -> str:
    if value not in ("any", "own"):
        raise InvalidInput("pool is 'any' or 'own'.", code="invalid_pool")
    return value


def min_trust(value) -> str:
    if value not in ("community", "platform"):
        raise InvalidInput("min_trust is 'community' or 'platform'.", code="invalid_min_trust")
    return value


def isolation(value) -> str:
    if value not in ("default", "sandbox"):
        raise InvalidInput(
            "isolation is 'default' (what each node's trust level requires) or 'sandbox' (a sandboxed runtime, "
            "gVisor's runsc, on every node).",
            code="invalid_isolation",
        )
    return value


def priority(value) -> int:
    return _int(value, code="invalid_priority", low=-MAX_PRIORITY, high=MAX_PRIORITY, what="priority")


def min_reliability(value) -> float:
    """0–100: only nodes whose reliability score (lending/reliability.py) is at least this; 0: any node."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
        raise InvalidInput("min_reliability is a number from 0 to 100.", code="invalid_min_reliability")
    return float(value)


def outputs(value) -> dict | None:
    from django.conf import settings

    return output_rules.outputs(
        value, default_bytes=settings.EULER_OUTPUTS_DEFAULT_JOB_BYTES, max_bytes=settings.EULER_OUTPUTS_MAX_JOB_BYTES
    )


MAX_DEPENDENCIES = 32


def array(value) -> dict | None:
    """{"count": N, "parallelism": P?}: N tasks of the job (N up to EULER_JOB_ARRAY_MAX_COUNT)."""
    from django.conf import settings

    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"count", "parallelism"} or "count" not in value:
        raise InvalidInput('array is {"count": N} with an optional "parallelism".', code="invalid_array")
    top = settings.EULER_JOB_ARRAY_MAX_COUNT
    out = {"count": _int(value["count"], code="invalid_array", low=1, high=top, what="array count")}
    if value.get("parallelism") is not None:
        out["parallelism"] = _int(value["parallelism"], code="invalid_array", low=1, high=top, what="parallelism")
    return out


def depends_on(value) -> list[dict]:
    """[{"job": ID} or {"array": ID}, "condition": "succeeded" (default) or "ended"}], at most MAX_DEPENDENCIES."""
    if not isinstance(value, list) or len(value) > MAX_DEPENDENCIES:
        raise InvalidInput(
            f"depends_on is a list of at most {MAX_DEPENDENCIES} dependencies.", code="invalid_depends_on"
        )
    out, seen = [], set()
    for dep in value:
        if (
            not isinstance(dep, dict)
            or set(dep) - {"job", "array", "condition"}
            or len(set(dep) & {"job", "array"}) != 1
        ):
            raise InvalidInput('each dependency is {"job": ID} or {"array": ID}, with an optional "condition".',
                               code="invalid_depends_on")  # fmt: skip
        kind = "job" if "job" in dep else "array"
        target = _int(dep[kind], code="invalid_depends_on", low=1, high=2**63 - 1, what=f"depends_on {kind}")
        condition = dep.get("condition", "succeeded")
        if condition not in ("succeeded", "ended"):
            raise InvalidInput("a dependency's condition is 'succeeded' or 'ended'.", code="invalid_depends_on")
        if (kind, target) not in seen:
            seen.add((kind, target))
            out.append({kind: target, "condition": condition})
    return out


# Field name -> (check, default when absent; None: required).
FIELDS = {
    "name": (name, None),
    "image": (image, None),
    "command": (command, None),
    "cpu_milli": (cpu_milli, None),
    "memory_bytes": (memory_bytes, None),
    "disk_bytes": (disk_bytes, default_disk_bytes),
    "network": (network, lambda: "default"),
    "gpu_count": (gpu_count, lambda: 0),
    "gpus": (gpus, lambda: None),  # folded into gpu_count, gpu_model, gpu_min_memory_bytes (merge_gpus)
    "timeout_seconds": (timeout_seconds, None),
    "stop_grace_seconds": (stop_grace_seconds, default_stop_grace),
    "warn_before_timeout_seconds": (warn_before_timeout_seconds, lambda: 0),
    "warn_signal": (warn_signal, lambda: "SIGUSR1"),
    "env": (env, dict),
    "region": (region, str),
    "node_selector": (node_selector, dict),
    "max_retries": (max_retries, lambda: 1),
    "retry_on": (retry_on, lambda: ["lost"]),
    "retry_backoff": (retry_backoff, lambda: None),
    "pool": (pool, lambda: "any"),
    "min_trust": (min_trust, lambda: "community"),
    "priority": (priority, lambda: 0),
    "outputs": (outputs, lambda: None),
    "inputs_from": (output_rules.inputs_from, list),
    "checkpoint": (checkpoint_rules.spec, lambda: None),
    "isolation": (isolation, lambda: "default"),
    "min_reliability": (min_reliability, lambda: 0.0),
}

# Workflow fields of a submission: not columns of the job (jobs.arrays reads them).
WORKFLOW_FIELDS = {
    "array": (array, lambda: None),
    "depends_on": (depends_on, list),
}
