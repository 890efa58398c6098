"""Log ingest from node agents: idempotent, capped, fenced, validated, and broadcast after commit."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from jobs.models import LogChunk
from tests.logs.conftest import chunk, post_logs

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(project, node_and_credential, make_job, node_api):
    node, credential = node_and_credential
    job, attempt = make_job(project, node)
    return job, attempt, node_api(credential)


def stored(attempt) -> list[tuple[int, str]]:
    return list(LogChunk.objects.filter(attempt=attempt).order_by("seq").values_list("seq", "data"))


def test_it_stores_chunks_and_answers_a_log_reply(running):
    job, attempt, client = running
    r = post_logs(client, attempt.pk, [chunk(0, "hello from Euler\n"), chunk(1, "bye\n", stream="stderr")])
    assert r.status_code == 200, r.json()
    assert r.json() == {"stored": 2, "duplicates": 0, "last_seq": 1}
    assert stored(attempt) == [(0, "hello from Euler\n"), (1, "bye\n")]
    attempt.refresh_from_db()
    assert attempt.log_bytes == len("hello from Euler\nbye\n") and not attempt.log_truncated


def test_a_retried_chunk_is_stored_once(running):
    _, attempt, client = running
    post_logs(client, attempt.pk, [chunk(0, "a\n"), chunk(1, "b\n")])
    r = post_logs(client, attempt.pk, [chunk(1, "b\n"), chunk(2, "c\n")])
    assert r.json() == {"stored": 1, "duplicates": 1, "last_seq": 2}
    assert stored(attempt) == [(0, "a\n"), (1, "b\n"), (2, "c\n")]
    attempt.refresh_from_db()
    assert attempt.log_bytes == 6


def test_past_the_cap_it_keeps_one_truncation_marker_and_drops_the_rest(running, settings):
    settings.EULER_MAX_LOG_BYTES = 10
    _, attempt, client = running
    post_logs(client, attempt.pk, [chunk(0, "12345678"), chunk(1, "abcdef")])
    post_logs(client, attempt.pk, [chunk(2, "more"), chunk(3, "and more")])
    rows = stored(attempt)
    assert [s for s, _ in rows] == [0, 1]
    assert rows[1][1].startswith("ab") and "log truncated" in rows[1][1]
    assert sum("log truncated" in d for _, d in rows) == 1
    attempt.refresh_from_db()
    assert attempt.log_truncated and attempt.log_bytes == 10


def test_a_chunk_for_an_attempt_that_is_not_current_is_refused_with_409(running, project, make_job):
    job, old, client = running
    make_job(project, old.node, job=job, number=2)
    r = post_logs(client, old.pk, [chunk(0, "late\n")])
    assert r.status_code == 409 and r.json()["code"] == "stale_attempt"
    assert stored(old) == []


def test_another_nodes_attempt_is_refused_with_409(running, other_node_and_credential, node_api):
    _, attempt, _ = running
    _, other_credential = other_node_and_credential
    r = post_logs(node_api(other_credential), attempt.pk, [chunk(0, "x\n")])
    assert r.status_code == 409 and r.json()["code"] == "stale_attempt"


def test_an_oversized_chunk_is_refused_with_413(running):
    _, attempt, client = running
    r = post_logs(client, attempt.pk, [chunk(0, "欧" * 70000)])  # 210,000 bytes: more than 64 KiB of output can be
    assert r.status_code == 413 and r.json()["code"] == "log_chunk_too_large"
    r = post_logs(client, attempt.pk, [chunk(i, "x") for i in range(65)])
    assert r.status_code == 413


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[]",
        {"chunks": "nope"},
        {"chunks": [{"seq": -1, "offset": 0, "stream": "stdout", "data": "x"}]},
        {"chunks": [{"seq": 0, "offset": 0, "stream": "stdin", "data": "x"}]},
        {"chunks": [{"seq": 0, "offset": 0, "stream": "stdout", "data": 5}]},
        {"chunks": [{"seq": 0, "offset": 0, "stream": "stdout", "data": "x", "extra": 1}]},
        {"chunks": [{"seq": 0, "offset": 0, "stream": "stdout", "data": "x"}], "more": True},
        {"chunks": [chunk(0, "x"), chunk(0, "y")]},
    ],
)
def test_a_malformed_batch_is_a_400(running, body):
    _, attempt, client = running
    r = post_logs(client, attempt.pk, body)
    assert r.status_code == 400, r.content
    assert stored(attempt) == []


def test_a_chunk_of_64_kib_of_invalid_utf8_replaced_by_the_agent_is_stored(running):
    from nodeagent import protocol

    _, attempt, client = running
    r = post_logs(client, attempt.pk, [chunk(0, "\ufffd" * protocol.MAX_LOG_CHUNK_BYTES)])  # 192 KiB of UTF-8
    assert r.status_code == 200, r.content[:200]


def test_nul_is_stored_as_a_replacement_character_and_a_lone_surrogate_is_a_400(running):
    _, attempt, client = running
    body = '{"chunks": [{"seq": 0, "offset": 0, "stream": "stdout", "data": "a\\u0000b"}]}'
    assert post_logs(client, attempt.pk, body).status_code == 200
    assert stored(attempt) == [(0, "a\ufffdb")]
    body = '{"chunks": [{"seq": 1, "offset": 3, "stream": "stdout", "data": "a\\ud800c"}]}'
    assert post_logs(client, attempt.pk, body).status_code == 400


def test_without_a_node_credential_it_is_a_401(running, anon):
    _, attempt, _ = running
    assert post_logs(anon, attempt.pk, [chunk(0, "x")]).status_code == 401


def test_each_stored_chunk_is_published_to_the_jobs_group_after_commit(running):
    job, attempt, client = running
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(f"jobs.{job.pk}", channel)
    post_logs(client, attempt.pk, [chunk(0, "one\n"), chunk(1, "two\n", stream="stderr")])
    post_logs(client, attempt.pk, [chunk(1, "two\n", stream="stderr")])  # a duplicate publishes nothing
    got = [async_to_sync(layer.receive)(channel) for _ in range(2)]
    assert [(m["type"], m["seq"], m["stream"], m["data"]) for m in got] == [
        ("job.log", 0, "stdout", "one\n"),
        ("job.log", 1, "stderr", "two\n"),
    ]
    assert got[0]["attempt"] == 1 and got[0]["attempt_id"] == attempt.pk


def _body_of_exactly(size: int) -> bytes:
    """A valid LogBatch whose encoded body is exactly `size` bytes (chunks of ASCII, the last one padded)."""
    from nodeagent import protocol

    chunks, offset = [], 0
    while True:
        body = protocol.encode_json({"chunks": chunks})
        missing = size - len(body)
        if missing <= 0:
            break
        c = {"seq": len(chunks), "offset": offset, "stream": "stdout", "data": ""}
        room = missing - len(protocol.encode_json(c)) - (1 if chunks else 0)
        if room <= 0:  # no room for one more chunk: widen the previous one instead
            chunks[-1]["data"] += "y" * missing
            continue
        c["data"] = "x" * min(room, protocol.MAX_LOG_CHUNK_BYTES)
        chunks.append(c)
        offset += len(c["data"])
    body = protocol.encode_json({"chunks": chunks})
    assert len(body) == size
    return body


def test_a_body_of_exactly_the_protocol_limit_is_stored_and_one_byte_more_is_a_413(running, settings):
    from nodeagent import protocol

    settings.EULER_MAX_LOG_BYTES = 8 * protocol.MAX_LOG_REQUEST_BYTES
    _, attempt, client = running
    limit = protocol.MAX_LOG_REQUEST_BYTES
    assert limit > settings.DATA_UPLOAD_MAX_MEMORY_SIZE  # the route does not depend on Django's global limit
    body = _body_of_exactly(limit)
    r = post_logs(client, attempt.pk, body.decode())
    assert r.status_code == 200, r.content[:300]
    attempt.refresh_from_db()
    assert attempt.log_bytes == sum(len(c["data"]) for c in __import__("json").loads(body)["chunks"])
    r = post_logs(client, attempt.pk, _body_of_exactly(limit + 1).decode())
    assert r.status_code == 413 and r.json()["code"] == "log_batch_too_large"


def test_a_gap_stores_a_marker_in_its_place_and_flags_the_attempt(running):
    _, attempt, client = running
    body = {
        "chunks": [chunk(0, "before\n", offset=0), chunk(2, "after\n", offset=107)],
        "gaps": [{"seq": 1, "offset": 7, "bytes": 100, "reason": "400 invalid_log_batch"}],
    }
    r = post_logs(client, attempt.pk, body)
    assert r.status_code == 200 and r.json()["stored"] == 3 and not r.json().get("capped")
    rows = stored(attempt)
    assert rows[0] == (0, "before\n") and rows[2] == (2, "after\n")
    assert "100 bytes of output at offset 7 were refused (400 invalid_log_batch)" in rows[1][1]
    attempt.refresh_from_db()
    assert attempt.log_truncated and attempt.log_bytes == len("before\nafter\n")


def test_a_gap_of_unknown_size_says_output_was_lost(running):
    _, attempt, client = running
    reason = "the engine's log rotated it away before the agent read it"
    body = {"chunks": [chunk(0, "before\n", offset=0)], "gaps": [{"seq": 1, "offset": 7, "bytes": 0, "reason": reason}]}
    assert post_logs(client, attempt.pk, body).status_code == 200
    assert stored(attempt)[1][1] == f"\n[euler: log truncated: output after offset 7 was lost: {reason}]\n"
    attempt.refresh_from_db()
    assert attempt.log_truncated and attempt.log_bytes == len("before\n")


def test_the_reply_says_capped_once_the_marker_is_stored_and_a_chunk_that_fills_the_cap_exactly_is_not(
    running, settings
):
    settings.EULER_MAX_LOG_BYTES = 1024
    _, attempt, client = running
    r = post_logs(client, attempt.pk, [chunk(0, "a" * 1024)])
    assert not r.json().get("capped")  # full, but nothing was cut yet
    r = post_logs(client, attempt.pk, [chunk(1, "b")])
    assert r.json()["capped"] is True
    rows = stored(attempt)
    assert rows[0][1] == "a" * 1024 and rows[1][1].startswith("\n[euler: log truncated")
    attempt.refresh_from_db()
    assert attempt.log_truncated and attempt.log_bytes == 1024
    assert post_logs(client, attempt.pk, [chunk(2, "c")]).json()["capped"] is True
    assert len(stored(attempt)) == 2
