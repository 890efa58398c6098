"""WebSocket /ws/jobs/{id}/logs/: backlog then live chunks in order, end message, auth, scoping, clean disconnect."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator

from config.asgi import application
from jobs.models import LogChunk

pytestmark = pytest.mark.django_db(transaction=True)


def add(attempt, seq: int, data: str, stream: str = "stdout"):
    LogChunk.objects.create(attempt=attempt, seq=seq, offset=seq * 100, stream=stream, data=data)


async def publish(job, attempt, seq: int, data: str, stream: str = "stdout"):
    """What the ingest view does after commit: store, then broadcast."""
    await sync_to_async(add)(attempt, seq, data, stream)
    message = {"type": "job.log", "attempt_id": attempt.pk, "attempt": attempt.number}
    await get_channel_layer().group_send(f"jobs.{job.pk}", message | {"seq": seq, "stream": stream, "data": data})


async def end(job, state: str = "succeeded"):
    await get_channel_layer().group_send(f"jobs.{job.pk}", {"type": "job.state", "state": state, "terminal": True})


def socket(job, key: str | None = None, query: str = "", cookie: str = "") -> WebsocketCommunicator:
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
    if cookie:
        headers.append((b"cookie", cookie.encode()))
    if key:
        headers.append((b"x-euler-api-key", key.encode()))
    return WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/logs/{query}", headers=headers)


@pytest.fixture
def running(project, node_and_credential, make_job):
    job, attempt = make_job(project, node_and_credential[0], state="running")
    add(attempt, 0, "backlog 0\n")
    add(attempt, 1, "backlog 1\n", "stderr")
    return job, attempt


async def receive_all(ws, n: int) -> list[dict]:
    return [await ws.receive_json_from(timeout=10) for _ in range(n)]


async def following(job, api_key: str) -> WebsocketCommunicator:
    """A socket on the `running` fixture's job, connected, its two backlog chunks and where the job stands read."""
    ws = socket(job, api_key)
    assert (await ws.connect())[0]
    await opening(ws, 2)
    return ws


async def opening(ws, n: int) -> tuple[list[dict], dict]:
    """The n chunks of the backlog, then the message of where the job stands (sent once, after the backlog)."""
    backlog = await receive_all(ws, n)
    standing = await ws.receive_json_from(timeout=10)
    assert standing["type"] == "state", standing
    return backlog, standing


async def test_it_sends_the_backlog_then_live_chunks_then_end(api_key, running):
    job, attempt = running
    ws = socket(job, api_key)
    connected, _ = await ws.connect()
    assert connected
    backlog, standing = await opening(ws, 2)
    assert standing == {"type": "state", "state": "running", "node": attempt.node_name}  # no need to read the job
    assert [(m["type"], m["seq"], m["stream"], m["data"]) for m in backlog] == [
        ("log", 0, "stdout", "backlog 0\n"),
        ("log", 1, "stderr", "backlog 1\n"),
    ]
    for seq in (2, 3):
        await publish(job, attempt, seq, f"live {seq}\n")
    live = await receive_all(ws, 2)
    assert [(m["seq"], m["data"], m["attempt"]) for m in live] == [(2, "live 2\n", 1), (3, "live 3\n", 1)]
    await end(job)
    assert await ws.receive_json_from(timeout=10) == {"type": "end", "state": "succeeded"}
    assert (await ws.receive_output(timeout=10))["type"] == "websocket.close"


async def test_a_duplicate_live_message_is_sent_once_and_a_gap_is_read_from_the_database(api_key, running):
    job, attempt = running
    ws = await following(job, api_key)
    await sync_to_async(add)(attempt, 2, "stored, broadcast lost\n")
    await publish(job, attempt, 3, "after the gap\n")
    layer = get_channel_layer()
    await layer.group_send(
        f"jobs.{job.pk}",
        {"type": "job.log", "attempt_id": attempt.pk, "attempt": 1, "seq": 3, "stream": "stdout", "data": "dup"},
    )
    got = await receive_all(ws, 2)
    assert [(m["seq"], m["data"]) for m in got] == [(2, "stored, broadcast lost\n"), (3, "after the gap\n")]
    assert await ws.receive_nothing(timeout=0.3)
    await ws.disconnect()


async def test_an_ended_job_gets_its_backlog_and_end_at_once(api_key, project, node_and_credential, make_job):
    job, attempt = await sync_to_async(make_job)(project, node_and_credential[0], state="failed")
    await sync_to_async(add)(attempt, 0, "boom\n", "stderr")
    ws = socket(job, api_key)
    assert (await ws.connect())[0]
    assert (await ws.receive_json_from(timeout=10))["data"] == "boom\n"
    assert await ws.receive_json_from(timeout=10) == {"type": "end", "state": "failed"}


async def test_a_reconnect_resumes_after_the_last_seq(api_key, running):
    job, _ = running
    ws = socket(job, api_key, "?after_seq=0")
    await ws.connect()
    assert [m["seq"] for m in (await opening(ws, 1))[0]] == [1]
    assert await ws.receive_nothing(timeout=0.3)
    await ws.disconnect()


async def test_a_reconnect_naming_an_older_attempt_gets_the_latest_attempt_from_its_start(
    api_key, running, make_job, project, node_and_credential
):
    job, _ = running
    _, second = await sync_to_async(make_job)(project, node_and_credential[0], job=job, number=2)
    await sync_to_async(add)(second, 0, "retry 0\n")
    ws = socket(job, api_key, "?after_seq=1&attempt=1")
    await ws.connect()
    (got,), _ = await opening(ws, 1)
    assert (got["attempt"], got["seq"], got["data"]) == (2, 0, "retry 0\n")
    await ws.disconnect()
    ws = socket(job, api_key, "?after_seq=0&attempt=2")
    await ws.connect()
    await opening(ws, 0)
    assert await ws.receive_nothing(timeout=0.3)
    await ws.disconnect()


async def test_a_retry_switches_to_the_new_attempts_log(api_key, running, make_job, project, node_and_credential):
    job, first = running
    ws = await following(job, api_key)
    _, second = await sync_to_async(make_job)(project, node_and_credential[0], job=job, number=2)
    await publish(job, second, 0, "second attempt\n")
    got = await receive_all(ws, 2)
    assert got[0] == {"type": "attempt", "attempt": 2}
    assert (got[1]["attempt"], got[1]["seq"], got[1]["data"]) == (2, 0, "second attempt\n")
    await ws.disconnect()


async def test_another_projects_job_is_refused(other_api_key, running):
    job, _ = running
    connected, code = await socket(job, other_api_key).connect()
    assert not connected


async def test_an_anonymous_or_bad_key_handshake_is_refused(running):
    job, _ = running
    assert not (await socket(job).connect())[0]
    assert not (await socket(job, "euler_pk_wrong").connect())[0]


async def test_a_disconnect_leaves_no_subscription(api_key, running):
    job, _ = running
    layer = get_channel_layer()
    ws = await following(job, api_key)
    assert layer.groups.get(f"jobs.{job.pk}")
    await ws.disconnect()
    assert not layer.groups.get(f"jobs.{job.pk}")


async def test_a_console_session_may_read_its_projects_job(owner, running):
    from django.test import Client

    job, _ = running
    client = Client()
    await sync_to_async(client.force_login)(owner)
    ws = socket(job, cookie=f"sessionid={client.cookies['sessionid'].value}")
    assert (await ws.connect())[0]
    assert [m["seq"] for m in await receive_all(ws, 2)] == [0, 1]
    await ws.disconnect()


def bare_socket(job, headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/logs/", headers=[(b"host", b"localhost"), *headers])


async def test_an_api_key_handshake_needs_no_origin(api_key, running):
    """Scripts and CLIs send no Origin; a browser cannot set X-Euler-API-Key, so there is nothing to hijack."""
    job, _ = running
    ws = bare_socket(job, [(b"x-euler-api-key", api_key.encode())])
    assert (await ws.connect())[0]
    assert [m["seq"] for m in await receive_all(ws, 2)] == [0, 1]
    await ws.disconnect()


async def test_a_bad_key_without_origin_is_still_refused(running):
    job, _ = running
    assert not (await bare_socket(job, [(b"x-euler-api-key", b"euler_pk_wrong")]).connect())[0]


async def test_a_session_handshake_keeps_the_origin_check(owner, running):
    from django.test import Client

    job, _ = running
    client = Client()
    await sync_to_async(client.force_login)(owner)
    cookie = (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())
    assert not (await bare_socket(job, [cookie]).connect())[0]  # no Origin
    assert not (await bare_socket(job, [cookie, (b"origin", b"http://evil.example")]).connect())[0]
    ws = bare_socket(job, [cookie, (b"origin", b"http://localhost")])
    assert (await ws.connect())[0]
    await ws.disconnect()


async def test_a_move_that_is_not_an_end_is_sent_as_a_state_message(api_key, running):
    job, _ = running
    ws = await following(job, api_key)
    await get_channel_layer().group_send(f"jobs.{job.pk}", {"type": "job.state", "state": "queued", "terminal": False})
    assert await ws.receive_json_from(timeout=10) == {"type": "state", "state": "queued"}
    running = {"type": "job.state", "state": "running", "terminal": False, "node": "n1"}
    await get_channel_layer().group_send(f"jobs.{job.pk}", running)
    assert await ws.receive_json_from(timeout=10) == {"type": "state", "state": "running", "node": "n1"}
    await end(job, "cancelled")
    assert await ws.receive_json_from(timeout=10) == {"type": "end", "state": "cancelled"}


async def test_a_queued_job_is_told_with_why_it_waits(api_key, project, node_and_credential, make_job):
    from jobs.models import Job

    job, _ = await sync_to_async(make_job)(project, node_and_credential[0], state="running")
    await sync_to_async(Job.objects.filter(pk=job.pk).update)(state="queued", pending_reason="no node has 64 GPUs")
    ws = socket(job, api_key)
    assert (await ws.connect())[0]
    _, standing = await opening(ws, 0)
    assert standing == {"type": "state", "state": "queued", "pending_reason": "no node has 64 GPUs"}
    await ws.disconnect()


async def end_naming(job, attempt, log_seq: int):
    """An attempt's end as jobs.transitions.move tells it: with the attempt and its last stored chunk."""
    message = {"type": "job.state", "state": "succeeded", "terminal": True, "attempt_id": attempt.pk}
    await get_channel_layer().group_send(f"jobs.{job.pk}", message | {"log_seq": log_seq})


async def test_an_end_naming_the_last_chunk_sent_ends_the_stream(api_key, running):
    job, attempt = running
    ws = await following(job, api_key)
    await end_naming(job, attempt, 1)
    assert await ws.receive_json_from(timeout=10) == {"type": "end", "state": "succeeded"}


async def test_an_end_naming_a_chunk_not_yet_received_sends_it_from_the_database_first(api_key, running):
    job, attempt = running
    ws = await following(job, api_key)
    await sync_to_async(add)(attempt, 2, "stored, its broadcast still on the way\n")
    await end_naming(job, attempt, 2)
    got = await ws.receive_json_from(timeout=10)
    assert (got["seq"], got["data"]) == (2, "stored, its broadcast still on the way\n")
    assert await ws.receive_json_from(timeout=10) == {"type": "end", "state": "succeeded"}


def test_an_attempts_end_is_told_with_its_last_stored_chunk(running, monkeypatch):
    from django.db import transaction

    from jobs import broadcast, transitions
    from jobs.models import Job

    job, attempt = running
    sent = []
    monkeypatch.setattr(broadcast, "on_commit", sent.extend)
    with transaction.atomic():
        transitions.move(Job.objects.select_for_update().get(pk=job.pk), "succeeded", attempt=attempt)
    assert sent == [(job.pk, "succeeded", "", {"attempt_id": attempt.pk, "log_seq": 1})]


class Mute:
    """A channel layer that carries nothing: only the direct path of this process (jobs.broadcast) remains."""

    async def group_send(self, group: str, message: dict) -> None:
        pass


async def test_a_move_made_in_this_process_reaches_the_socket_directly_and_once(api_key, running):
    from jobs import broadcast

    job, attempt = running
    ws = await following(job, api_key)
    await broadcast._send_all(Mute(), [(job.pk, "queued", "")])  # told here only
    assert await ws.receive_json_from(timeout=10) == {"type": "state", "state": "queued"}
    await get_channel_layer().group_send(f"jobs.{job.pk}", {"type": "job.state", "state": "queued", "terminal": False})
    assert await ws.receive_nothing(timeout=0.3)  # the layer's copy of the same move: not sent again
    await broadcast._send_all(Mute(), [(job.pk, "succeeded", "", {"attempt_id": attempt.pk, "log_seq": 1})])
    assert await ws.receive_json_from(timeout=10) == {"type": "end", "state": "succeeded"}
    await ws.disconnect()
    assert not broadcast._here
