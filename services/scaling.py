"""The autoscaler's shell: sample the calls in flight that the gateway counts, ask services.autoscale.decide, write
the new replica count (services/autoscale.py says how it decides)."""

from __future__ import annotations

from django.conf import settings
from redis.exceptions import RedisError

from euler.redis import client
from gateway import limits
from services.autoscale import Policy, decide, retention
from services.models import Service
from services.writes import event


def policy_of(service) -> Policy:
    return Policy(
        low=service.min_replicas,
        high=service.max_replicas,
        target=service.target_concurrency,
        up_window=settings.EULER_SERVICE_SCALE_UP_WINDOW,
        down_window=settings.EULER_SERVICE_SCALE_DOWN_WINDOW,
        zero_after=float(service.scale_to_zero_after_seconds) if service.scale_to_zero_after_seconds else None,
    )


def _samples_key(service_id: int) -> str:
    return f"euler:svc:inflight:{service_id}"


def sample(service, now: float) -> list[tuple[float, int]]:
    """Add this pass's figure to the service's samples and return those within retention."""
    policy = policy_of(service)
    key = _samples_key(service.pk)
    try:
        count = limits.agent_in_flight(service.agent_id) if service.agent_id else 0
        r = client()
        pipe = r.pipeline(transaction=False)
        pipe.lpush(key, f"{now:.3f},{count}")
        pipe.ltrim(key, 0, 2000)
        pipe.expire(key, int(retention(policy)) + 60)
        pipe.lrange(key, 0, -1)
        raw = pipe.execute()[-1]
    except RedisError:
        return []
    out = []
    for item in raw:
        t, _, n = (item.decode() if isinstance(item, bytes) else item).partition(",")
        if now - float(t) <= retention(policy):
            out.append((float(t), int(n)))
    return out


def apply(service: Service, now_dt) -> None:
    """Sample, decide, and write the new count (with an event) when it changes."""
    if service.min_replicas == service.max_replicas:
        return  # a fixed count: nothing to decide, nothing to sample
    now = now_dt.timestamp()
    samples = sample(service, now)
    if not samples:
        return
    wanted = decide(service.replicas, samples, now, policy_of(service))
    if wanted != service.replicas:
        if Service.objects.filter(pk=service.pk, replicas=service.replicas).update(replicas=wanted):
            event(
                service,
                "autoscaled",
                f"{service.replicas} → {wanted} replicas ({samples[0][1] if samples else 0} calls in flight)",
            )
            service.replicas = wanted
