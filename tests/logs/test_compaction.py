"""Log compaction: an ended attempt's chunks become one compressed row, and every reader answers byte for byte
as before (text, ?follow=1, websocket backlog and after_seq), late replays included."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient
from django.utils import timezone

from config.asgi import application
from jobs import logs_api, logstore
from jobs.models import Attempt, LogArchive, LogChunk
from tests.logs.conftest import chunk, post_logs

pytestmark = pytest.mark.django_db(transaction=True)

TEXTS = [
    "2026-11-30T10:00:00Z INFO starting worker 1 of 4\n",
    "warning: 温度 过高 ⚠\n",
    "",
    "partial line without newline",
    " … continued\n" + "x" * 5000 + "\n",
    "\ufffd replaced bytes and tabs\t\tend\n",
]


def later(seconds: int = 3600):
    return timezone.now() + timedelta(seconds=seconds)


@pytest.fixture
def ended(project, node_and_credential, make_job):
    job, attempt = make_job(project, node_and_credential[0], state="succeeded")
    Attempt.objects.filter(pk=attempt.pk).update(state="succeeded", ended_at=timezone.now())
    for seq, text in enumerate(TEXTS):
        LogChunk.objects.create(
            attempt=attempt, seq=seq, offset=seq * 100, stream="stderr" if seq % 2 else "stdout", data=text
        )
    return job, attempt


def readers(attempt_id: int) -> dict:
    return {
        "text": logs_api.full_text(attempt_id),
        "after": {s: logs_api.chunks_after(attempt_id, s) for s in range(-1, len(TEXTS) + 1)},
        "small_pages": [logs_api.chunks_after(attempt_id, s, limit=2) for s in range(-1, len(TEXTS))],
    }


def test_encode_decode_round_trip_is_exact():
    chunks = [logstore.Chunk(i, i * 7, "stdout" if i % 2 else "stderr", t) for i, t in enumerate(TEXTS)]
    assert logstore.decode(logstore.encode(chunks)) == chunks
    assert logstore.decode(logstore.encode([])) == []


def test_merge_counts_a_seq_in_both_stores_once_and_orders_by_seq():
    a = [logstore.Chunk(0, 0, "stdout", "a"), logstore.Chunk(2, 2, "stdout", "c")]
    hot = [logstore.Chunk(1, 1, "stdout", "b"), logstore.Chunk(2, 2, "stdout", "c")]
    assert [c.data for c in logstore.merge(a, hot)] == ["a", "b", "c"]


def test_compaction_keeps_every_reader_byte_exact(ended):
    _, attempt = ended
    before = readers(attempt.pk)
    assert logstore.compact_ended(now=later()) == 1
    assert not LogChunk.objects.filter(attempt=attempt).exists()
    archive = LogArchive.objects.get(attempt=attempt)
    assert archive.chunks == len(TEXTS) and archive.raw_bytes == len("".join(TEXTS).encode())
    assert len(bytes(archive.data)) < archive.raw_bytes / 2
    assert readers(attempt.pk) == before


async def test_the_text_endpoint_and_follow_answer_the_same_after_compaction(api_key, ended):
    job, _ = ended
    headers = {"X-Euler-API-Key": api_key}

    async def read() -> tuple[bytes, str, bytes]:
        plain = await AsyncClient().get(f"/api/v1/jobs/{job.pk}/logs", headers=headers)
        follow = await AsyncClient().get(f"/api/v1/jobs/{job.pk}/logs?follow=1", headers=headers)
        assert plain.status_code == follow.status_code == 200, plain.content
        return plain.content, plain["X-Euler-Attempt"], b"".join([part async for part in follow.streaming_content])

    before = await read()
    await sync_to_async(logstore.compact_ended)(now=later())
    assert await read() == before
    assert before[0] == before[2] == "".join(TEXTS).encode()


async def test_the_websocket_backlog_and_after_seq_are_the_same_after_compaction(api_key, ended):
    job, _ = ended
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost"), (b"x-euler-api-key", api_key.encode())]

    async def read(query: str) -> list[dict]:
        ws = WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/logs/{query}", headers=headers)
        connected, _ = await ws.connect()
        assert connected
        messages = []
        while True:
            message = await ws.receive_json_from(timeout=10)
            messages.append(message)
            if message["type"] == "end":
                break
        await ws.disconnect()
        return messages

    before = [await read(""), await read("?after_seq=2&attempt=1")]
    await sync_to_async(logstore.compact_ended)(now=later())
    assert [await read(""), await read("?after_seq=2&attempt=1")] == before
    assert len([m for m in before[0] if m["type"] == "log"]) == len(TEXTS)


def test_active_and_recently_ended_attempts_are_not_compacted(project, node_and_credential, make_job, settings):
    settings.EULER_LOG_COMPACT_AFTER = 300
    _, running = make_job(project, node_and_credential[0], state="running")
    _, recent = make_job(project, node_and_credential[0], state="failed")
    Attempt.objects.filter(pk=recent.pk).update(state="failed", ended_at=timezone.now())
    for attempt in (running, recent):
        LogChunk.objects.create(attempt=attempt, seq=0, offset=0, stream="stdout", data="x\n")
    assert logstore.compact_ended(now=timezone.now() + timedelta(seconds=60)) == 0
    assert logstore.compact_ended(now=later()) == 1  # the ended one, once its wait is over
    assert LogChunk.objects.filter(attempt=running).count() == 1
    assert LogArchive.objects.filter(attempt=recent).exists()


def test_a_late_replay_is_not_doubled_and_a_late_new_chunk_is_folded_in(ended, node_and_credential, node_api):
    _, attempt = ended
    text = logs_api.full_text(attempt.pk)
    logstore.compact_ended(now=later())
    client = node_api(node_and_credential[1])
    replay = post_logs(client, attempt.pk, [chunk(1, TEXTS[1], stream="stderr"), chunk(len(TEXTS), "late\n")])
    assert replay.status_code == 200, replay.content
    assert logs_api.full_text(attempt.pk) == text + "late\n"
    assert [s for s, _, _ in logs_api.chunks_after(attempt.pk, 0)] == list(range(1, len(TEXTS) + 1))
    logstore.compact_ended(now=later())
    assert not LogChunk.objects.filter(attempt=attempt).exists()
    assert LogArchive.objects.get(attempt=attempt).chunks == len(TEXTS) + 1
    assert logs_api.full_text(attempt.pk) == text + "late\n"


def test_compaction_in_batches_covers_every_ended_attempt(project, node_and_credential, make_job):
    attempts = []
    for _ in range(5):
        _, attempt = make_job(project, node_and_credential[0], state="succeeded")
        Attempt.objects.filter(pk=attempt.pk).update(state="succeeded", ended_at=timezone.now())
        LogChunk.objects.create(attempt=attempt, seq=0, offset=0, stream="stdout", data=f"{attempt.pk}\n")
        attempts.append(attempt)
    assert logstore.compact_ended(now=later(), batch=2) == 5
    assert [logs_api.full_text(a.pk) for a in attempts] == [f"{a.pk}\n" for a in attempts]


def test_the_decoded_cache_keeps_the_newest_within_its_bytes_and_checks_the_version():
    cache = logstore._DecodedCache(max_bytes=100)
    one, two = [logstore.Chunk(0, 0, "stdout", "a")], [logstore.Chunk(0, 0, "stdout", "b")]
    cache.put(1, (1, 60, 10), one)
    assert cache.get(1, (1, 60, 10)) is one
    assert cache.get(1, (2, 61, 11)) is None  # recompacted since: decoded again
    cache.put(2, (1, 60, 10), two)  # 120 bytes > 100: the oldest goes
    assert cache.get(1, (1, 60, 10)) is None and cache.get(2, (1, 60, 10)) is two
    cache.put(3, (1, 500, 10), one)  # larger than the whole cache: not kept
    assert cache.get(3, (1, 500, 10)) is None
