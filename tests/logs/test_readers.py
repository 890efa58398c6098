"""Log readers: the text endpoint, `?attempt=N`, `?follow=1` streaming, and project scoping."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from jobs.models import Attempt, LogChunk

pytestmark = pytest.mark.django_db(transaction=True)


def add(attempt, seq: int, data: str, stream: str = "stdout"):
    LogChunk.objects.create(attempt=attempt, seq=seq, offset=seq * 100, stream=stream, data=data)


@pytest.fixture
def job_with_log(project, node_and_credential, make_job):
    node, _ = node_and_credential
    job, attempt = make_job(project, node, state="succeeded")
    add(attempt, 0, "hello from Euler\n")
    add(attempt, 1, "oops\n", "stderr")
    return job, attempt


def test_it_answers_the_latest_attempts_log_as_text(api, job_with_log):
    job, _ = job_with_log
    r = api.get(f"/api/v1/jobs/{job.pk}/logs")
    assert r.status_code == 200
    assert r["Content-Type"].startswith("text/plain")
    assert r.content.decode() == "hello from Euler\noops\n"
    assert r["X-Euler-Attempt"] == "1"


def test_it_reads_another_attempt_by_number(api, job_with_log, make_job, node_and_credential, project):
    job, first = job_with_log
    _, second = make_job(project, node_and_credential[0], job=job, number=2, state="running")
    add(second, 0, "second try\n")
    assert api.get(f"/api/v1/jobs/{job.pk}/logs").content.decode() == "second try\n"
    assert api.get(f"/api/v1/jobs/{job.pk}/logs?attempt=1").content.decode() == "hello from Euler\noops\n"
    r = api.get(f"/api/v1/jobs/{job.pk}/logs?attempt=9")
    assert r.status_code == 404 and r.json()["code"] == "attempt_not_found"


@pytest.mark.parametrize("query", ["attempt=x", "attempt=0", "attempt=-1", "follow=maybe"])
def test_bad_query_values_are_400(api, job_with_log, query):
    job, _ = job_with_log
    r = api.get(f"/api/v1/jobs/{job.pk}/logs?{query}")
    assert r.status_code == 400 and r.json()["code"] in {"invalid_attempt", "invalid_follow"}


def test_another_projects_job_is_404(other_api, job_with_log):
    job, _ = job_with_log
    r = other_api.get(f"/api/v1/jobs/{job.pk}/logs")
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    assert other_api.get(f"/api/v1/jobs/{job.pk}/logs?follow=1").status_code == 404


def test_anonymous_and_bad_keys_are_401(anon, client_for, job_with_log):
    job, _ = job_with_log
    assert anon.get(f"/api/v1/jobs/{job.pk}/logs").status_code == 401
    r = client_for("euler_pk_nope").get(f"/api/v1/jobs/{job.pk}/logs")
    assert r.status_code == 401 and r.json()["code"] == "invalid_api_key"


def test_a_console_session_reads_its_projects_log(owner, job_with_log, client):
    job, _ = job_with_log
    client.force_login(owner)
    assert client.get(f"/api/v1/jobs/{job.pk}/logs").content.decode() == "hello from Euler\noops\n"


def test_a_job_without_an_attempt_has_an_empty_log(api, project, node_and_credential, make_job):
    job, attempt = make_job(project, node_and_credential[0])
    job.current_attempt = None
    job.save(update_fields=["current_attempt"])
    attempt.delete()
    r = api.get(f"/api/v1/jobs/{job.pk}/logs")
    assert r.status_code == 200 and r.content == b""


def test_other_methods_are_refused(api, job_with_log):
    job, _ = job_with_log
    assert api.post(f"/api/v1/jobs/{job.pk}/logs").status_code == 405


async def test_follow_streams_new_output_until_the_attempt_ends(api_key, project, node_and_credential, make_job):
    node, _ = node_and_credential
    job, attempt = await sync_to_async(make_job)(project, node, state="running")
    await sync_to_async(add)(attempt, 0, "line 0\n")
    response = await AsyncClient().get(f"/api/v1/jobs/{job.pk}/logs?follow=1", headers={"X-Euler-API-Key": api_key})
    assert response.status_code == 200 and response.streaming, response.content
    received: list[str] = []

    async def read():
        async for part in response.streaming_content:
            received.append(part.decode())

    reader = asyncio.create_task(read())
    for i in range(1, 6):
        await asyncio.sleep(0.05)
        await sync_to_async(add)(attempt, i, f"line {i}\n")
    await sync_to_async(Attempt.objects.filter(pk=attempt.pk).update)(state="succeeded")
    await asyncio.wait_for(reader, 30)
    assert "".join(received) == "".join(f"line {i}\n" for i in range(6))


async def test_follow_of_an_ended_attempt_returns_the_whole_log_and_stops(api_key, job_with_log):
    job, _ = job_with_log
    response = await AsyncClient().get(f"/api/v1/jobs/{job.pk}/logs?follow=1", headers={"X-Euler-API-Key": api_key})
    parts = [p async for p in response.streaming_content]
    assert b"".join(parts).decode() == "hello from Euler\noops\n"


async def test_follow_of_a_job_not_placed_yet_waits_for_its_attempt(api_key, project, node_and_credential, make_job):
    from jobs.models import Job

    job, attempt = await sync_to_async(make_job)(project, node_and_credential[0], state="running")
    await sync_to_async(Job.objects.filter(pk=job.pk).update)(current_attempt=None, state="queued")
    await sync_to_async(Attempt.objects.filter(pk=attempt.pk).delete)()
    response = await AsyncClient().get(f"/api/v1/jobs/{job.pk}/logs?follow=1", headers={"X-Euler-API-Key": api_key})
    received: list[str] = []

    async def read():
        async for part in response.streaming_content:
            received.append(part.decode())

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.3)
    _, placed = await sync_to_async(make_job)(project, node_and_credential[0], job=job, number=1)
    await sync_to_async(add)(placed, 0, "placed at last\n")
    await sync_to_async(Attempt.objects.filter(pk=placed.pk).update)(state="succeeded")
    await asyncio.wait_for(reader, 30)
    assert "".join(received) == "placed at last\n"


async def test_follow_of_a_job_cancelled_before_placement_ends_empty(api_key, project, node_and_credential, make_job):
    from jobs.models import Job

    job, attempt = await sync_to_async(make_job)(project, node_and_credential[0], state="running")
    await sync_to_async(Job.objects.filter(pk=job.pk).update)(current_attempt=None, state="cancelled")
    await sync_to_async(Attempt.objects.filter(pk=attempt.pk).delete)()
    response = await AsyncClient().get(f"/api/v1/jobs/{job.pk}/logs?follow=1", headers={"X-Euler-API-Key": api_key})
    assert [p async for p in response.streaming_content] == []
