"""The invoke view: an async Django view that relays a call to a healthy agent instance as it streams.

No thread hop on the way (async auth with a short in-memory key cache, cached routing tables),
one shared httpx client, the response relayed chunk by chunk from `aiter_raw()` (SSE included),
and the invocation record appended to an in-memory buffer that a background thread bulk-inserts.
"""

from __future__ import annotations

import inspect
import re
import time
import uuid
from urllib.parse import quote

import httpx
from django.conf import settings
from django.http import JsonResponse, StreamingHttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from redis.exceptions import RedisError

from agents import ssrf
from euler.errors import EulerError, InvalidInput, NotFound, QuotaExceeded, Unavailable, error_response
from gateway import auth, limits, quota, recorder, routes, safety
from gateway.asgi import BODY_TOO_LARGE
from gateway.client import upstream_client

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
DROP_REQUEST = HOP_BY_HOP | {"host", "cookie", "x-euler-api-key", "content-length", "x-forwarded-for", "x-request-id"}
DROP_RESPONSE = HOP_BY_HOP | {"set-cookie", "server", "date"}  # upstream cookies must not land on Euler's domain
REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")
STREAM_BODY_OVER = 1 << 20  # bodies up to 1 MiB are sent as bytes, so a failover can resend them
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})
SAFE_PATH = "/:@!$&'()*+,;=-._~"


def _request_id(request) -> str:
    """The lean handler skips euler.observability's middleware: set its request id here the same way."""
    try:
        from euler.observability import new_request_id, request_id_var
    except ImportError:
        incoming = request.headers.get("X-Request-ID", "")
        return incoming if REQUEST_ID_RE.match(incoming) else uuid.uuid4().hex
    request_id = new_request_id(request.headers.get("X-Request-ID"))
    request_id_var.set(request_id)
    request.request_id = request_id
    return request_id


def _error(exc: EulerError, request_id: str | None = None) -> JsonResponse:
    response = error_response(exc)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = safety.CSP
    if request_id:
        response["X-Request-ID"] = request_id
    return response


def _request_headers(request, route: routes.Route, request_id: str) -> dict[str, str]:
    connection_named = {
        token.strip().lower() for token in request.headers.get("Connection", "").split(",") if token.strip()
    }
    drop = DROP_REQUEST | connection_named
    if auth.bearer_key(request) is not None:
        drop = drop | {"authorization"}  # an Euler key is never sent upstream
    if route.auth_header is not None:
        drop = drop | {"authorization", route.auth_header[0].lower()}
    headers = {name: value for name, value in request.headers.items() if name.lower() not in drop}
    client_ip = request.META.get("REMOTE_ADDR") or "unknown"
    previous = request.headers.get("X-Forwarded-For")
    headers["X-Forwarded-For"] = f"{previous}, {client_ip}" if previous else client_ip
    headers["X-Request-ID"] = request_id
    if route.auth_header is not None:
        headers[route.auth_header[0]] = route.auth_header[1]
    return headers


def _response_headers(upstream: httpx.Response) -> dict[str, str]:
    headers: dict[str, str] = {}
    for raw_name, raw_value in upstream.headers.raw:
        name = raw_name.decode("latin-1")
        lowered = name.lower()
        if lowered in DROP_RESPONSE:
            continue
        value = raw_value.decode("latin-1")
        headers[lowered] = f"{headers[lowered]}, {value}" if lowered in headers else value
    if headers.get("content-type", "").startswith("text/event-stream"):
        headers["x-accel-buffering"] = "no"
        headers.setdefault("cache-control", "no-cache")
    return headers


def _too_large(limit: int) -> EulerError:
    failure = EulerError(f"The request body is over {limit} bytes.", code="body_too_large", extra={"limit": limit})
    failure.status_code = 413
    return failure


def _body(request):
    """(content, size) to send upstream, or EulerError 413 before any of it is sent."""
    limit = settings.EULER_GATEWAY_MAX_BODY_BYTES
    if getattr(request, "scope", {}).get(BODY_TOO_LARGE):
        raise _too_large(limit)
    length = request.headers.get("Content-Length")
    if not length:
        # Chunked: no size announced. The lean handler has read it already (stopping at the
        # limit); read at most one byte past the limit to know.
        content = request.read(limit + 1)
        if len(content) > limit:
            raise _too_large(limit)
        return content, len(content)
    try:
        size = int(length)
    except ValueError:
        raise InvalidInput("Content-Length is not a number.", code="invalid_content_length") from None
    if size > limit:
        raise _too_large(limit)
    if size <= 0:
        return b"", 0
    if size <= STREAM_BODY_OVER:
        return request.read(), size

    async def chunks():
        while chunk := request.read(65536):
            yield chunk

    return chunks(), size


@csrf_exempt
async def invoke(request, name: str, path: str = ""):
    started = time.perf_counter()
    request_id = getattr(request, "request_id", None) or _request_id(request)
    lease = None
    try:
        caller = await auth.caller_for(request)
        project_id = caller.project_id
        route = await routes.route_for(project_id, name)
        if route is None:
            raise NotFound(f"No agent named {name!r}.")
        content, bytes_in = _body(request)
        if caller.rpm_limit is not None:
            wait = await limits.rpm_check(caller.key_id, caller.rpm_limit)
            if wait is not None:
                raise QuotaExceeded(
                    f"The key's limit of {caller.rpm_limit} calls per minute is reached.",
                    code="rpm_limit_exceeded",
                    extra={"retry_after": wait, "limit": caller.rpm_limit},
                )
        cap = route.max_concurrent or settings.EULER_GATEWAY_MAX_CONCURRENT
        lease = await limits.acquire(project_id, cap, route.agent_id if route.service_managed else None)
        if lease is None:
            raise QuotaExceeded(
                f"The project has {cap} calls in flight through the gateway, its limit.",
                code="too_many_concurrent_calls",
                extra={"retry_after": 1, "limit": cap},
            )
        try:
            allowed, retry_after = await _awaited(quota.check_and_count(project_id, name))
        except RedisError as exc:  # the invocation counter cannot be kept: refuse, never 500
            raise Unavailable(
                "The gateway cannot count this call right now (Redis unreachable); try again shortly.",
                code="counter_unavailable",
                extra={"retry_after": 1},
            ) from exc
        if not allowed:
            raise QuotaExceeded(
                "The project has used its invocations for this period.", extra={"retry_after": retry_after}
            )
    except EulerError as exc:
        await limits.release(lease)
        return _error(exc, request_id)
    except BaseException:
        await limits.release(lease)
        raise
    try:
        return await _forward(request, name, path, route, caller, content, bytes_in, lease, started, request_id)
    except BaseException:
        await limits.release(lease)
        raise


async def _forward(request, name, path, route, caller, content, bytes_in, lease, started, request_id):
    """Send the call to an instance (failing over on connect errors) and relay its answer; the relay owns the lease."""
    target_path = quote(path, safe=SAFE_PATH)
    query = request.META.get("QUERY_STRING", "")
    headers = _request_headers(request, route, request_id)
    timeout = httpx.Timeout(
        connect=route.connect_timeout, read=route.response_timeout, write=route.response_timeout, pool=5.0
    )
    if not route.upstreams and route.service_managed:
        route = await routes.wait_for_upstream(route, settings.EULER_GATEWAY_COLD_START_WAIT)
    client = upstream_client()
    tried: set[int] = set()
    failure: EulerError | None = None
    upstream = response = None
    last_id = None
    while response is None:
        upstream = routes.choose(route, tried)
        if upstream is None:
            break
        tried.add(upstream.id)
        last_id = upstream.id
        url = f"{upstream.base_url}/{target_path}" + (f"?{query}" if query else "")
        sent_at = time.perf_counter()
        try:
            outgoing = client.build_request(request.method, url, headers=headers, content=content, timeout=timeout)
        except httpx.InvalidURL:
            await limits.release(lease)
            return _error(InvalidInput("The invoke path does not make a valid URL.", code="invalid_path"), request_id)
        try:
            response = await client.send(outgoing, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            routes.report(upstream.id, ok=False)
            failure = _connect_failure(exc)
            if not isinstance(content, bytes):
                break  # a streamed body cannot be sent twice
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            # Most often a kept-alive connection that the agent closed at the same moment: nothing
            # was processed, so an idempotent call with a resendable body goes to the next instance.
            routes.report(upstream.id, ok=False)
            failure = EulerError(f"The agent's connection failed: {type(exc).__name__}.", code="upstream_error")
            failure.status_code = 502
            if request.method not in IDEMPOTENT or not isinstance(content, bytes):
                break
        except httpx.TimeoutException:
            routes.report(upstream.id, ok=False)
            failure = EulerError("The agent did not answer in time.", code="upstream_timeout")
            failure.status_code = 504
            break
        except httpx.HTTPError as exc:
            routes.report(upstream.id, ok=False)
            failure = EulerError(f"The agent's connection failed: {type(exc).__name__}.", code="upstream_error")
            failure.status_code = 502
            break

    if response is None:
        if failure is None and route.service_managed:
            failure = Unavailable(
                f"Service {name!r} has no ready replica yet (it may be starting from zero); try again shortly.",
                code="no_ready_replica",
                extra={"retry_after": 5},
            )
        if failure is None:
            failure = EulerError(f"Agent {name!r} has no healthy instance.", code="no_healthy_instance")
            failure.status_code = 503
        _record(
            route,
            last_id,
            request,
            path,
            failure.status_code,
            started,
            None,
            bytes_in,
            0,
            failure.code,
            request_id,
        )
        await limits.release(lease)
        return _error(failure, request_id)

    headers_at = time.perf_counter()
    routes.report(upstream.id, ok=response.status_code < 500)
    response.request.extensions["timeout"]["read"] = route.idle_timeout  # from here on: idle timeout
    relay = _relay(response, route, upstream.id, request, path, started, headers_at, bytes_in, request_id, lease)
    limits.release_when_dropped(relay, lease)  # a relay never started (the client left first) has no finally
    relayed = StreamingHttpResponse(relay, status=response.status_code)
    for header, value in safety.harden(_response_headers(response), by_session=caller.by_session).items():
        relayed[header] = value
    relayed["X-Request-ID"] = request_id
    relayed["Server-Timing"] = (
        f"gateway;dur={(sent_at - started) * 1000:.3f}, upstream;dur={(headers_at - sent_at) * 1000:.3f}"
    )
    return relayed


async def _relay(response, route, instance_id, request, path, started, headers_at, bytes_in, request_id, lease):
    bytes_out = 0
    error = ""
    try:
        async for chunk in response.aiter_raw():
            bytes_out += len(chunk)
            yield chunk
    except httpx.ReadTimeout:
        error = "idle_timeout"
    except httpx.HTTPError as exc:
        error = f"upstream_error: {type(exc).__name__}"
    except BaseException:
        error = "client_disconnected"
        raise
    finally:
        await limits.release(lease)
        await response.aclose()
        _record(
            route,
            instance_id,
            request,
            path,
            response.status_code,
            started,
            headers_at,
            bytes_in,
            bytes_out,
            error,
            request_id,
        )


def _connect_failure(exc: Exception) -> EulerError:
    cause = exc.__cause__
    if isinstance(cause, ssrf.ForbiddenAddress):
        failure = EulerError(f"The agent's address was refused: {cause}.", code="forbidden_address")
    else:
        failure = EulerError("No instance of the agent could be reached.", code="upstream_unreachable")
    failure.status_code = 502
    return failure


def _record(route, instance_id, request, path, status, started, headers_at, bytes_in, bytes_out, error, request_id):
    now = time.perf_counter()
    recorder.add(
        recorder.Record(
            project_id=route.project_id,
            agent_id=route.agent_id,
            instance_id=instance_id,
            method=request.method[:10],
            path=("/" + path)[:500],
            status=status,
            latency_ms=(now - started) * 1000,
            ttfb_ms=(headers_at - started) * 1000 if headers_at else None,
            bytes_in=bytes_in,
            bytes_out=bytes_out,
            error=error[:200],
            request_id=request_id,
            created_at=timezone.now(),
        )
    )


async def _awaited(value):
    return await value if inspect.isawaitable(value) else value
