"""Open log streams end once the credential that opened them dies: a revoked key, a removed member's key,
a signed-out session. The websocket closes with 4401; a `?follow=1` stream ends."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client

from jobs.consumers import CLOSE_UNAUTHENTICATED
from tests.logs.test_websocket import socket

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def running(project, node_and_credential, make_job):
    job, _attempt = make_job(project, node_and_credential[0], state="running")
    return job


@pytest.fixture
def carol(make_user, project):
    from quotas.models import Membership, Role

    user = make_user("carol")
    Membership.objects.create(project=project, user=user, role=Role.MEMBER)
    return user


def _carols_key(project, carol) -> str:
    from quotas.services import apikey_create

    return apikey_create(project=project, by=carol)[1]


def _remove(project, user) -> None:
    from quotas.members import member_remove

    member_remove(project=project, user_id=user.pk)


def _revoke_all(project) -> None:
    from quotas.models import ApiKey
    from quotas.services import apikey_revoke

    for key in ApiKey.objects.filter(project=project):
        apikey_revoke(project=project, key_id=key.pk)


async def closed_code(ws) -> int:
    """Read until the server closes (messages before the close are the backlog and states)."""
    while True:
        message = await ws.receive_output(timeout=10)
        if message["type"] == "websocket.close":
            return message.get("code")


async def test_a_websocket_closes_once_its_key_is_revoked(project, running):
    from quotas.services import apikey_create

    _, secret = await sync_to_async(apikey_create)(project=project)
    ws = socket(running, secret)
    assert (await ws.connect())[0]
    await sync_to_async(_revoke_all)(project)
    assert await closed_code(ws) == CLOSE_UNAUTHENTICATED
    await ws.disconnect()


async def test_a_websocket_closes_once_its_keys_creator_is_removed(project, running, carol):
    secret = await sync_to_async(_carols_key)(project, carol)
    ws = socket(running, secret)
    assert (await ws.connect())[0]
    await sync_to_async(_remove)(project, carol)
    assert await closed_code(ws) == CLOSE_UNAUTHENTICATED
    await ws.disconnect()


async def test_a_websocket_closes_once_its_session_signs_out(project, running, carol):
    client = Client()
    await sync_to_async(client.force_login)(carol)
    session_key = client.cookies["sessionid"].value
    ws = socket(running, cookie=f"sessionid={session_key}")
    assert (await ws.connect())[0]
    await sync_to_async(client.logout)()
    assert await closed_code(ws) == CLOSE_UNAUTHENTICATED
    await ws.disconnect()


async def test_a_websocket_stays_open_while_its_key_is_good(project, running):
    from quotas.selectors import RECHECK_SECONDS
    from quotas.services import apikey_create

    _, secret = await sync_to_async(apikey_create)(project=project)
    ws = socket(running, secret)
    assert (await ws.connect())[0]
    assert (await ws.receive_json_from(timeout=10))["type"] == "state"  # where the job stands, on connecting
    await asyncio.sleep(RECHECK_SECONDS * 2.5)  # two re-checks pass
    assert await ws.receive_nothing(timeout=0.1)
    await ws.disconnect()


async def test_a_follow_stream_ends_once_its_keys_creator_is_removed(project, running, carol):
    secret = await sync_to_async(_carols_key)(project, carol)
    response = await AsyncClient().get(f"/api/v1/jobs/{running.pk}/logs?follow=1", headers={"X-Euler-API-Key": secret})
    assert response.status_code == 200
    await sync_to_async(_remove)(project, carol)

    async def drain():
        return [chunk async for chunk in response.streaming_content]

    assert await asyncio.wait_for(drain(), timeout=10) == []
    again = await AsyncClient().get(f"/api/v1/jobs/{running.pk}/logs", headers={"X-Euler-API-Key": secret})
    assert again.status_code == 401
