"""Heartbeat and poll served without Django's handler (nodes/node_api/asgi.py `serve_hot`): the same answers,
the request id, nosniff and a sized body, a clear 413 for an oversized body, the HTTPS rule."""

from __future__ import annotations

import asyncio
import json

import pytest

from nodes import services
from nodes.node_api.asgi import HOT, route_node_api
from tests.nodes.conftest import resources

pytestmark = pytest.mark.django_db(transaction=True)


async def _other_app(scope, receive, send):  # everything that is not a node endpoint
    raise AssertionError("the node router handed a node endpoint on")


def _call(path: str, body: bytes, *, cred: str = "", client: str = "127.0.0.1", chunks: int = 1, gone=None):
    """One request through the node router. `gone` (a coroutine function): the client disconnects once it returns
    and the call returns what was sent; without it the client stays until the answer (an ASGI server's `receive`
    blocks until the client goes)."""
    app = route_node_api(_other_app)
    sent: list[dict] = []
    step = -(-len(body) // chunks) or 1
    parts = [body[i : i + step] for i in range(0, len(body), step)] or [b""]
    queue = [{"type": "http.request", "body": p, "more_body": i < len(parts) - 1} for i, p in enumerate(parts)]

    async def receive():
        if queue:
            return queue.pop(0)
        await (gone() if gone is not None else asyncio.Event().wait())
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    headers = [(b"content-type", b"application/json"), (b"x-request-id", b"abc123")]
    if cred:
        headers.append((b"authorization", f"Bearer {cred}".encode()))
    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": headers, "client": (client, 5555), "server": ("127.0.0.1", 8000), "scheme": "http",
             "http_version": "1.1", "root_path": "", "asgi": {"version": "3.0"}}  # fmt: skip
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 30))
    if gone is not None:
        return sent
    start, body_msg = sent
    return start["status"], dict(start["headers"]), json.loads(body_msg["body"])


def test_a_heartbeat_is_answered_with_the_request_id_and_a_sized_body(platform_node):
    node, cred = platform_node
    services.node_approve(node=node)
    body = json.dumps({"agent_version": "t", "resources": resources(), "running": []}).encode()
    status, headers, reply = _call(HOT[0], body, cred=cred, chunks=3)
    assert status == 200 and reply["approval"] == "approved" and reply["commands"] == []
    assert headers[b"x-request-id"] == b"abc123" and headers[b"x-content-type-options"] == b"nosniff"
    assert int(headers[b"content-length"]) > 0 and headers[b"content-type"] == b"application/json"


def test_a_poll_with_a_bad_credential_gets_401_and_an_oversized_body_413(platform_node, settings):
    status, _, reply = _call(HOT[1], b'{"wait": 0}', cred="euler_node_" + "z" * 43)
    assert status == 401 and reply["code"] == "invalid_node_credential"
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    status, _, reply = _call(HOT[0], b"{" + b" " * 200 + b"}", cred="euler_node_" + "z" * 43)
    assert status == 413 and reply["code"] == "request_too_large"


def test_plain_http_from_outside_is_refused(platform_node):
    _, cred = platform_node
    status, _, reply = _call(HOT[0], b"{}", cred=cred, client="198.51.100.7")
    assert status == 403 and reply["code"] == "https_required"


def test_a_held_poll_ends_when_its_agent_disconnects_and_answers_nothing(platform_node):
    """Not at its own `wait` (60 s here): a stopped or killed agent's poll does not hold the web process."""
    from nodes import channel

    node, cred = platform_node
    services.node_approve(node=node)
    held = {}

    async def gone():
        listener = held["listener"] = channel.ensure_listener()  # this loop's, which the poll's waiter joins
        while not listener.waiters.get(node.pk):  # the poll is waiting (the event, not a guessed delay): now go
            await asyncio.sleep(0.01)
        held["waiting"] = len(listener.waiters[node.pk])

    assert _call(HOT[1], b'{"wait": 60}', cred=cred, gone=gone) == []
    assert held["waiting"] == 1 and node.pk not in held["listener"].waiters  # its waiter went with it
