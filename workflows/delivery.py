"""One try of each delivery of a batch: signed POSTs through the gateway's pinned SSRF guard, sent concurrently,
each under one deadline.

A batch is claimed by the dispatcher (workflows/dispatch.py `claim`: pending → sending, one more attempt) and
names each delivery's attempt number, so a message sent twice, or a stale one after its batch was taken back,
sends nothing. Each try writes a DeliveryTry row (status, latency, response code, the first bytes of the
answer); a failed try is due again after a backoff, until EULER_WEBHOOK_MAX_TRIES.
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


def _headers(delivery: Delivery, body: bytes) -> dict:
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        signing.HEADER: signing.header(delivery.hook.secret, int(time.time()), body),
        "Euler-Event": delivery.event_type,
        "Euler-Delivery": str(delivery.pk),
    }


async def _post_all(requests: list[tuple[int, str, bytes, dict]], deadline: float) -> list[Outcome]:
    """Every request's outcome, in order: hooks concurrently, each hook's requests one after the other."""
    by_hook: dict[int, list[int]] = {}
    for i, (hook_id, *_rest) in enumerate(requests):
        by_hook.setdefault(hook_id, []).append(i)
    outcomes: list[Outcome | None] = [None] * len(requests)

    async def one_hook(indices: list[int]) -> None:
        for i in indices:
            _hook, url, body, headers = requests[i]
            outcomes[i] = await _post(url, body, headers, deadline)

    await asyncio.gather(*(one_hook(indices) for indices in by_hook.values()))
    return outcomes  # type: ignore[return-value]


def _record(delivery: Delivery, outcome: Outcome) -> None:
    DeliveryTry.objects.create(
        delivery=delivery,
        number=delivery.attempts,
        status_code=outcome.status_code,
        latency_ms=outcome.latency_ms,
        error=outcome.error,
        response_excerpt=outcome.excerpt,
    )
    now = timezone.now()
    if outcome.ok:
        state, due = DeliveryState.SUCCEEDED, delivery.next_attempt_at
    elif delivery.attempts >= settings.EULER_WEBHOOK_MAX_TRIES:
        state, due = DeliveryState.FAILED, delivery.next_attempt_at
    else:
        state, due = DeliveryState.PENDING, now + timedelta(seconds=retry_after(delivery.attempts))
    Delivery.objects.filter(pk=delivery.pk, state=DeliveryState.SENDING, attempts=delivery.attempts).update(
        state=state, next_attempt_at=due, updated_at=now
    )


def deliver_batch(claimed: list[tuple[int, int]]) -> int:
    """One try of each claimed (delivery id, attempt number), concurrently; returns how many were sent."""
    wanted = dict(claimed)
    rows = [
        d
        for d in Delivery.objects.select_related("hook")
        .filter(pk__in=list(wanted), state=DeliveryState.SENDING)
        .order_by("next_attempt_at", "id")
        if d.attempts == wanted[d.pk]
    ]
    if not rows:
        return 0
    requests = []
    for delivery in rows:
        body = body_of(delivery.payload)
        requests.append((delivery.hook_id, delivery.hook.url, body, _headers(delivery, body)))
    outcomes = asyncio.run(_post_all(requests, settings.EULER_WEBHOOK_TIMEOUT))
    for delivery, outcome in zip(rows, outcomes, strict=True):
        _record(delivery, outcome)
    return len(rows)
