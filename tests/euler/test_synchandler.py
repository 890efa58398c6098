"""Requests to sync views under ASGI (euler/synchandler.py): the whole request on one pooled thread, the middleware
chain as Django's handler runs it, the thread's database connection kept between requests (and replaced once it
no longer answers), async views left to Django's handler, streamed downloads, answers filled after the chain
(Deferred: the blocking read)."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core import signals
from django.db import connection

from euler import synchandler
from quotas.services import apikey_create, project_create

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def key():
    _, raw = apikey_create(project=project_create(name="sync-handler"), label="t")
    return raw


@pytest.fixture
def one_thread(monkeypatch):
    """One sync-view thread, so that two requests in a row run on the same one."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="euler-web-sync-test")
    monkeypatch.setattr(synchandler, "EXECUTOR", executor)
    yield executor
    executor.shutdown(wait=True)


class Seen:
    """What each request's signals saw: the thread, and (after Django's own receivers) the open connection."""

    def __init__(self):
        self.started: list[str] = []
        self.finished: list[tuple[str, object]] = []

    def on_started(self, **_kw):
        self.started.append(threading.current_thread().name)

    def on_finished(self, **_kw):
        self.finished.append((threading.current_thread().name, connection.connection))


@pytest.fixture
def seen():
    record = Seen()
    signals.request_started.connect(record.on_started, dispatch_uid="test-synchandler-started")
    signals.request_finished.connect(record.on_finished, dispatch_uid="test-synchandler-finished")
    yield record
    signals.request_started.disconnect(dispatch_uid="test-synchandler-started")
    signals.request_finished.disconnect(dispatch_uid="test-synchandler-finished")


async def _not_here(scope, receive, send):
    await send({"type": "http.response.start", "status": 599, "headers": []})
    await send({"type": "http.response.body", "body": b"django's handler"})


def call(method: str, path: str, key: str, body: bytes = b"", query: bytes = b""):
    """One request through the router; (status, headers, body)."""
    app = synchandler.route_sync_views(_not_here)
    sent: list[dict] = []
    queue = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        if queue:
            return queue.pop(0)
        await asyncio.Event().wait()

    async def send(message):
        sent.append(message)

    headers = [(b"host", b"127.0.0.1"), (b"x-euler-api-key", key.encode()), (b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]  # fmt: skip
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": query,
             "headers": headers, "client": ("127.0.0.1", 5555), "server": ("127.0.0.1", 8000), "scheme": "http",
             "http_version": "1.1", "root_path": "", "asgi": {"version": "3.0"}}  # fmt: skip
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 30))
    start = sent[0]
    content = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], {k.lower(): v for k, v in start["headers"]}, content


JOB = {"name": "s", "image": "alpine:3.20", "command": ["true"], "cpu_milli": 100, "memory_bytes": 64 << 20,
       "timeout_seconds": 60, "node_selector": {"nowhere": "1"}}  # fmt: skip


def test_a_sync_view_runs_whole_on_one_pooled_thread_through_the_middleware(key, one_thread, seen):
    status, headers, body = call("POST", "/api/v1/jobs", key, json.dumps(JOB).encode())
    assert status == 201, body
    assert json.loads(body)["state"] == "queued"
    # The chain ran (request id, Server-Timing, the security middleware's headers) ...
    assert headers[b"x-request-id"] and headers[b"server-timing"].startswith(b"app;dur=")
    assert headers[b"x-content-type-options"] == b"nosniff"
    # ... and the signals, the view and the close on the one pooled thread.
    assert seen.started == [seen.finished[0][0]] and seen.started[0].startswith("euler-web-sync-test")


def test_the_thread_keeps_its_database_connection_between_requests(key, one_thread, seen):
    for _ in range(2):
        status, _, _ = call("GET", "/api/v1/jobs", key)
        assert status == 200
    (_, first), (_, second) = seen.finished
    assert first is not None and first is second  # still open after the request: the next one used it


def test_a_kept_connection_that_no_longer_answers_is_replaced(key, one_thread, seen):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: a server-side end of the connection")
    assert call("GET", "/api/v1/jobs", key)[0] == 200
    kept = seen.finished[0][1]
    with connection.cursor() as cur:  # the database ends that session (a restart, an idle timeout)
        cur.execute("SELECT pg_terminate_backend(%s)", [kept.info.backend_pid])
    status, _, body = call("GET", "/api/v1/jobs", key)
    assert status == 200, body  # asked first, found dead, replaced: not a 500
    assert seen.finished[1][1] is not kept


def test_async_views_go_to_djangos_handler_and_unknown_paths_get_djangos_404(key, one_thread):
    assert call("GET", "/api/v1/jobs/1/logs", key) == (599, {}, b"django's handler")
    status, _, _ = call("GET", "/api/v1/no-such-thing", key)
    assert status == 404


def test_sync_view_resolves_the_path_below_the_root_path():
    assert synchandler.sync_view({"path": "/euler/api/v1/jobs", "root_path": "/euler"})
    assert not synchandler.sync_view({"path": "/euler/api/v1/jobs/7/logs", "root_path": "/euler"})


def test_a_deferred_answer_is_filled_after_the_chain_and_a_wait_holds_no_thread(key, one_thread, seen):
    status, _, body = call("POST", "/api/v1/jobs", key, json.dumps(JOB).encode())
    job_id = json.loads(body)["id"]
    # A queued job that does not move: the blocking read's timeout answers, with the job and the chain's headers.
    status, headers, body = call("GET", f"/api/v1/jobs/{job_id}/wait", key, query=b"timeout=0.2")
    assert status == 200 and json.loads(body)["state"] == "queued"
    assert headers[b"x-euler-wait"] == b"timeout" and headers[b"content-length"] == str(len(body)).encode()
    assert headers[b"x-request-id"] and headers[b"x-content-type-options"] == b"nosniff"
    assert len(seen.started) == len(seen.finished) == 2  # the request was over for Django before the wait


def test_a_deferred_answer_whose_client_goes_away_is_not_sent():
    async def forever():
        await asyncio.Event().wait()

    async def disconnect():
        return None

    async def main():
        answer = synchandler.Deferred(forever)
        return await synchandler._filled(answer, disconnect()), answer.status_code

    assert asyncio.run(main()) == (False, 200)  # the fill was cancelled, nothing taken


def test_a_deferred_answer_that_fails_is_a_500_with_the_apis_body():
    async def broken():
        raise RuntimeError("boom")

    async def main():
        answer = synchandler.Deferred(broken)
        filled = await synchandler._filled(answer, asyncio.Event().wait())
        return filled, answer.status_code, json.loads(answer.content)["code"]

    assert asyncio.run(main()) == (True, 500, "server_error")
