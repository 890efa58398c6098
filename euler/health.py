"""Liveness and readiness probes."""

from __future__ import annotations

import redis as redis_lib
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from euler.redis import client


@require_GET
def healthz(request):
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request):
    failed: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means not ready
        failed["database"] = type(exc).__name__
    try:
        r = redis_lib.Redis(connection_pool=client().connection_pool, socket_timeout=1)
        r.ping()
    except Exception as exc:  # noqa: BLE001
        failed["redis"] = type(exc).__name__
    if failed:
        names = ", ".join(sorted(failed))
        return JsonResponse(
            {"status": "unavailable", "code": "not_ready", "detail": f"not reachable: {names}", "failed": failed},
            status=503,
        )
    return JsonResponse({"status": "ready"})


def metrics_view(request):
    """Prometheus scrape endpoint; `EULER_METRICS_TOKEN`, when set, is required as a Bearer token."""
    import hmac

    from django.conf import settings
    from django.http import HttpResponse

    from euler import metrics

    token = settings.EULER_METRICS_TOKEN
    if token:
        presented = request.META.get("HTTP_AUTHORIZATION", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(presented.encode(), token.encode()):
            return JsonResponse({"code": "not_authenticated", "detail": "A metrics token is required."}, status=401)
    return HttpResponse(metrics.render(), content_type="text/plain; version=0.0.4; charset=utf-8")
