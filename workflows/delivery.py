"""One try of one webhook delivery: signed POST through the gateway's pinned SSRF guard, under one deadline.

The try is claimed by a conditional UPDATE (pending and due → sending), so a delivery enqueued twice is sent
once. Each try writes a DeliveryTry row (status, latency, response code, the first bytes of the answer); a
failed try is scheduled again with backoff until EULER_WEBHOOK_MAX_TRIES.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass
from datetime import timedelta

import httpx
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from agents import ssrf
from jobs import retrypolicy
from workflows import signing
from workflows.destinations import allowed_networks
from workflows.models import Delivery, DeliveryState, DeliveryTry

EXCERPT = 512  # bytes of the answer kept in the log
USER_AGENT = "Euler-Webhooks/1"


@dataclass
class Outcome:
    status_code: int | None = None
    latency_ms: int | None = None
    error: str = ""
    excerpt: str = ""

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def body_of(payload: dict) -> bytes:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()


async def _post(url: str, body: bytes, headers: dict, deadline: float) -> Outcome:
    started = time.perf_counter()
    out = Outcome()
    async with ssrf.pinned_client(allowed=allowed_networks, timeout=deadline) as client:
        try:
            async with asyncio.timeout(deadline):
                async with client.stream("POST", url, content=body, headers=headers) as response:
                    out.status_code = response.status_code
                    chunks, size = [], 0
                    async for chunk in response.aiter_raw():
                        chunks.append(chunk)
                        size += len(chunk)
                        if size >= EXCERPT:
                            break
                    out.excerpt = b"".join(chunks)[:EXCERPT].decode("utf-8", "replace")
        except TimeoutError:
            out.error = f"no answer within {deadline:g}s"
        except httpx.HTTPError as exc:
            cause = exc.__cause__
            why = str(cause) if isinstance(cause, ssrf.ForbiddenAddress) else (str(exc) or type(exc).__name__)
            out.error = why[:300]
    out.latency_ms = round((time.perf_counter() - started) * 1000)
    return out


def retry_after(tries: int) -> float:
    """Seconds before the next try after `tries` failed ones (tripled each time, at most an hour)."""
    initial = settings.EULER_WEBHOOK_RETRY_BACKOFF
    backoff = retrypolicy.Backoff(initial=initial, factor=3.0, max=max(initial, 3600.0))
    return retrypolicy.backoff_delay(retry_number=tries, backoff=backoff, u=random.random())


def deliver(delivery_id: int) -> float | None:
    """One try, when the delivery is due; returns the seconds until the next try, or None when done."""
    now = timezone.now()
    claimed = Delivery.objects.filter(pk=delivery_id, state=DeliveryState.PENDING, next_attempt_at__lte=now).update(
        state=DeliveryState.SENDING, attempts=F("attempts") + 1, updated_at=now
    )
    if claimed != 1:
        return None
    delivery = Delivery.objects.select_related("hook").get(pk=delivery_id)
    hook = delivery.hook
    body = body_of(delivery.payload)
    stamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        signing.HEADER: signing.header(hook.secret, stamp, body),
        "Euler-Event": delivery.event_type,
        "Euler-Delivery": str(delivery.pk),
    }
    outcome = asyncio.run(_post(hook.url, body, headers, settings.EULER_WEBHOOK_TIMEOUT))
    DeliveryTry.objects.create(
        delivery=delivery,
        number=delivery.attempts,
        status_code=outcome.status_code,
        latency_ms=outcome.latency_ms,
        error=outcome.error,
        response_excerpt=outcome.excerpt,
    )
    if outcome.ok:
        Delivery.objects.filter(pk=delivery.pk).update(state=DeliveryState.SUCCEEDED, updated_at=timezone.now())
        return None
    if delivery.attempts >= settings.EULER_WEBHOOK_MAX_TRIES:
        Delivery.objects.filter(pk=delivery.pk).update(state=DeliveryState.FAILED, updated_at=timezone.now())
        return None
    delay = retry_after(delivery.attempts)
    Delivery.objects.filter(pk=delivery.pk).update(
        state=DeliveryState.PENDING,
        next_attempt_at=timezone.now() + timedelta(seconds=delay),
        updated_at=timezone.now(),
    )
    return delay
