"""Pure checks of a service spec, each failing with InvalidInput and a stable code.

The job part of a spec (image, command, resources, placement, env) is checked by jobs.validation, the same
functions as a job submission's, so a replica is exactly a job that could have been submitted."""

from __future__ import annotations

import hashlib
import json

from euler.errors import InvalidInput
from jobs import validation as jobs_validation

# The fields of a job submission a service takes, with the same checks and defaults. Not taken: the timeout (a
# replica runs under the longest job timeout), retries (the controller replaces a replica), outputs, inputs,
# arrays and dependencies (a replica serves, it does not produce), and `network` (always the node's egress policy:
# the node path reaches the container on the agent's job network).
JOB_FIELDS = (
    "image", "command", "cpu_milli", "memory_bytes", "disk_bytes", "gpu_count", "gpus", "env", "region",
    "node_selector", "pool", "min_trust", "priority", "isolation", "min_reliability",
)  # fmt: skip
REVISION_FIELDS = frozenset(JOB_FIELDS) - {"gpus"}  # gpus is folded into gpu_count, gpu_model, gpu_min_memory_bytes
MAX_TARGET_CONCURRENCY = 10_000
MAX_SCALE_TO_ZERO = 7 * 24 * 3600
PROBE_DEFAULTS = {"path": "/health", "interval_seconds": 5, "timeout_seconds": 2.0, "failures": 3}


def port(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise InvalidInput("port is the container port the service listens on, 1 to 65535.", code="invalid_port")
    return value


def replicas(value, *, limit: int) -> dict:
    """{"min": m, "max": M} with 0 <= m <= M <= limit, M >= 1; a bare integer n means {"min": n, "max": n}."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = {"min": value, "max": value}
    if not isinstance(value, dict) or set(value) - {"min", "max"} or "min" not in value:
        raise InvalidInput('replicas is {"min": m, "max": M} (or one number).', code="invalid_replicas")
    low = value["min"]
    high = value.get("max", low)
    for v in (low, high):
        if isinstance(v, bool) or not isinstance(v, int):
            raise InvalidInput("replicas.min and replicas.max are integers.", code="invalid_replicas")
    if not (0 <= low <= high <= limit and high >= 1):
        raise InvalidInput(
            f"replicas needs 0 <= min <= max <= {limit} and max >= 1, got min {low}, max {high}.",
            code="invalid_replicas",
        )
    return {"min": low, "max": high}


def readiness(value) -> dict:
    """{"path", "interval_seconds", "timeout_seconds", "failures"}, each optional (PROBE_DEFAULTS)."""
    if value is None:
        return dict(PROBE_DEFAULTS)
    if not isinstance(value, dict) or set(value) - set(PROBE_DEFAULTS):
        raise InvalidInput(
            "readiness is {path, interval_seconds, timeout_seconds, failures}, each optional.", code="invalid_readiness"
        )
    out = {**PROBE_DEFAULTS, **value}
    from agents.services import validate_health_path

    try:
        validate_health_path(out["path"])
    except InvalidInput:
        raise InvalidInput("readiness.path is an absolute path like /health.", code="invalid_readiness") from None
    interval, timeout, failures = out["interval_seconds"], out["timeout_seconds"], out["failures"]
    if isinstance(interval, bool) or not isinstance(interval, int) or not 1 <= interval <= 300:
        raise InvalidInput("readiness.interval_seconds is 1 to 300.", code="invalid_readiness")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0.1 <= timeout <= 60:
        raise InvalidInput("readiness.timeout_seconds is 0.1 to 60.", code="invalid_readiness")
    if isinstance(failures, bool) or not isinstance(failures, int) or not 1 <= failures <= 100:
        raise InvalidInput("readiness.failures is 1 to 100.", code="invalid_readiness")
    return {"path": out["path"], "interval_seconds": interval, "timeout_seconds": float(timeout), "failures": failures}


def target_concurrency(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TARGET_CONCURRENCY:
        raise InvalidInput(
            f"target_concurrency is the calls in flight per replica to scale at, 1 to {MAX_TARGET_CONCURRENCY}.",
            code="invalid_target_concurrency",
        )
    return value


def scale_to_zero_after_seconds(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 10 <= value <= MAX_SCALE_TO_ZERO:
        raise InvalidInput(
            f"scale_to_zero_after_seconds is 10 to {MAX_SCALE_TO_ZERO} (or null: never).", code="invalid_scale_to_zero"
        )
    return value


def check_scaling(spec: dict) -> None:
    """Scale to zero needs replicas.min 0; replicas.min 0 needs scale to zero (else nothing would wake it)."""
    zero = spec.get("scale_to_zero_after_seconds") is not None
    if zero != (spec["replicas"]["min"] == 0):
        raise InvalidInput(
            "replicas.min is 0 exactly when scale_to_zero_after_seconds is set.", code="invalid_replicas"
        )


def spec_hash(job_spec: dict) -> str:
    """A revision's identity: the job part without env (env changes always make a new revision)."""
    shown = {k: v for k, v in sorted(job_spec.items()) if k != "env"}
    return hashlib.sha256(json.dumps(shown, sort_keys=True, default=str).encode()).hexdigest()


def job_part(spec: dict) -> dict:
    """The job columns of a validated spec (gpus folded in)."""
    return {k: spec[k] for k in ("gpu_model", "gpu_min_memory_bytes", *REVISION_FIELDS) if k in spec}


def job_checks() -> dict:
    """jobs.validation's (check, default) of each job field a service takes."""
    return {key: jobs_validation.FIELDS[key] for key in JOB_FIELDS}
